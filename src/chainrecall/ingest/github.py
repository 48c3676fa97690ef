"""GitHub webhook deliveries: signature check, thread routing, summaries and links.

A delivery is kept byte for byte; this module decides where it goes and what
its one line says. Thread keys use `repository.full_name` exactly as sent:

- pull requests, reviews, review comments, review threads and issue comments on
  a PR, and issues with their comments: `github:{owner}/{repo}#{number}` (PRs
  and issues share one number space on GitHub, so they share one key form);
- `check_run`, `check_suite`, `workflow_run`, `workflow_job`, `status`: the PR
  they belong to (`pull_requests[]`), else a PR already seen with the same head
  SHA or branch, else the branch a push of that commit was seen on, else
  `github:{owner}/{repo}:branch:{name}`, else `github:{owner}/{repo}:commit:{sha}`;
- `push`: `github:{owner}/{repo}:branch:{name}` (`:tag:{name}` for tags);
- anything else, including event types GitHub adds later:
  `github:{owner}/{repo}` (or `github:{org}` when there is no repository).

Links are found through aliases that earlier deliveries claimed: a PR claims
its head SHA and branch for its thread, a push or PR update claims its head SHA
for its trigger (a later CI trigger cites it), a comment claims its GitHub id
(a reply names it as `in_reply_to`).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from chainrecall.errors import InvalidInput, Unauthorized
from chainrecall.ingest.common import (
    Lookup,
    as_dict,
    as_list,
    clip,
    count_tests,
    describe_counts,
    failing_area,
    hmac_sha256_hex,
    parse_json_object,
    timestamp_or_none,
)
from chainrecall.model import NewTrigger
from chainrecall.service import Memory

SOURCE = "github"
SIGNATURE_HEADER = "X-Hub-Signature-256"
FORM_TYPE = "application/x-www-form-urlencoded"

PR_EVENTS = frozenset(
    {
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "pull_request_review_thread",
    }
)
ISSUE_EVENTS = frozenset({"issues", "issue_comment"})
CI_EVENTS = frozenset({"check_run", "check_suite", "workflow_run", "workflow_job", "status"})
# PR actions after which CI runs on the new head: CI triggers cite these.
PR_UPDATE_ACTIONS = frozenset({"opened", "reopened", "synchronize", "ready_for_review"})

_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_ZERO_SHA = "0" * 40
_VERDICTS = {
    "success": "passed",
    "failure": "failed",
    "cancelled": "cancelled",
    "timed_out": "timed out",
    "action_required": "needs action",
    "neutral": "neutral",
    "skipped": "skipped",
    "stale": "stale",
    "startup_failure": "failed to start",
    "in_progress": "in progress",
    "error": "errored",
    "pending": "pending",
}
_NOISE_KEYS = ("url", "node_id", "gravatar_id", "avatar_url")


# -- signatures and bodies -----------------------------------------------------------


def sign(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub sends for `body` (for senders and tests)."""
    return "sha256=" + hmac_sha256_hex(secret, body)


def verify_signature(secret: str, body: bytes, header: str | None) -> None:
    """Raise Unauthorized unless `header` is the HMAC-SHA256 of `body` under `secret`."""
    match_signature([("", secret)], body, header)


def match_signature(candidates: list[tuple[str, str]], body: bytes, header: str | None) -> str:
    """The namespace whose secret signed `body`, among (namespace, secret) pairs.

    Every candidate is compared, each in constant time, so a timing difference reveals
    neither how much of a guess matched nor which namespace did. Unauthorized if none.
    """
    if not header:
        raise Unauthorized(
            f"the {SIGNATURE_HEADER} header is missing; set the webhook's secret in GitHub "
            "to the value given to chainrecall serve --github-secret"
        )
    presented = header.strip().encode("utf-8")
    matched = None
    for namespace, secret in candidates:
        if hmac.compare_digest(sign(secret, body).encode("ascii"), presented):
            matched = namespace if matched is None else matched
    if matched is None:
        raise Unauthorized(
            f"the {SIGNATURE_HEADER} header does not match the body; check that the "
            "webhook's secret in GitHub equals chainrecall's --github-secret (or the one set "
            "with `chainrecall webhook-secret --source github`) and that nothing between "
            "GitHub and this server rewrites the body"
        )
    return matched


def parse_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The delivery's JSON object, sent as application/json or as a form `payload=`."""
    if content_type and content_type.split(";")[0].strip().lower() == FORM_TYPE:
        try:
            form = parse_qs(body.decode("utf-8"), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            form = {}
        values = form.get("payload")
        if not values:
            raise InvalidInput(
                "a form-encoded GitHub delivery must carry its JSON in a `payload` field",
                field="payload",
            )
        return parse_json_object(values[0].encode("utf-8"), "GitHub delivery")
    return parse_json_object(body, "GitHub delivery")


def check_event_name(event: str | None) -> str:
    if not event or not _EVENT_NAME.match(event):
        raise InvalidInput(
            "the X-GitHub-Event header is missing or not an event name such as "
            f"pull_request; got {clip(event, 40)!r}",
            field="X-GitHub-Event",
        )
    return event


def check_delivery_id(delivery_id: str | None) -> str:
    if not delivery_id or len(delivery_id) > 200 or not delivery_id.isprintable():
        raise InvalidInput(
            "the X-GitHub-Delivery header is missing or malformed; GitHub sends a GUID "
            "per delivery, and redeliveries repeat it so that nothing is stored twice",
            field="X-GitHub-Delivery",
        )
    return delivery_id.strip()


# -- aliases ---------------------------------------------------------------------------


def pr_sha_alias(repo: str, sha: str) -> str:
    return f"github:{repo}:pr-head:{sha}"


def pr_branch_alias(repo: str, branch: str) -> str:
    return f"github:{repo}:pr-branch:{branch}"


def push_sha_alias(repo: str, sha: str) -> str:
    return f"github:{repo}:pushed:{sha}"


def update_alias(repo: str, sha: str) -> str:
    """Names the push or PR update that made `sha` a head: CI on that SHA cites it."""
    return f"github:{repo}:update:{sha}"


def comment_alias(repo: str, kind: str, comment_id: Any) -> str:
    return f"github:{repo}:{kind}:{comment_id}"


# -- thread keys -----------------------------------------------------------------------


def number_key(repo: str, number: int) -> str:
    return f"github:{repo}#{number}"


def branch_key(repo: str, branch: str) -> str:
    return f"github:{repo}:branch:{branch}"


def tag_key(repo: str, tag: str) -> str:
    return f"github:{repo}:tag:{tag}"


def commit_key(repo: str, sha: str) -> str:
    return f"github:{repo}:commit:{sha}"


def repo_key(repo: str) -> str:
    return f"github:{repo}"


_KEY_NUMBER = re.compile(r"#(\d+)$")
_KEY_BRANCH = re.compile(r":branch:(.+)$")


def label_for_key(key: str | None) -> str:
    """How a summary names a thread found by alias: `PR #2`, `branch main`, ..."""
    if not key:
        return ""
    if match := _KEY_NUMBER.search(key):
        return f"PR #{match.group(1)}"
    if match := _KEY_BRANCH.search(key):
        return f"branch {match.group(1)}"
    return ""


@dataclass
class Route:
    """Where a delivery goes and how its summary names that place."""

    thread_key: str | None = None
    thread_id: str | None = None
    label: str = ""
    title: str | None = None
    status: str | None = None
    thread_aliases: list[str] = field(default_factory=list)


def route_commit(
    lookup: Lookup,
    repo: str,
    *,
    sha: str | None,
    branch: str | None,
    pr_numbers: list[int],
) -> Route:
    """The thread of a CI event on `sha` / `branch`, by the rules in the module docstring."""
    if pr_numbers:
        return Route(thread_key=number_key(repo, pr_numbers[0]), label=f"PR #{pr_numbers[0]}")
    candidates = []
    if sha:
        candidates.append(pr_sha_alias(repo, sha))
    if branch:
        candidates.append(pr_branch_alias(repo, branch))
    if sha:
        candidates.append(push_sha_alias(repo, sha))
    for alias in candidates:
        thread_id = lookup.resolve(alias)
        if thread_id is None:
            continue
        key = lookup.thread_key(thread_id)
        if key is not None:  # a deleted thread's alias is stale: fall through
            return Route(thread_id=thread_id, label=label_for_key(key))
    if branch:
        return Route(thread_key=branch_key(repo, branch), label=f"branch {branch}")
    if sha:
        return Route(thread_key=commit_key(repo, sha), label=f"commit {sha[:7]}")
    return Route(thread_key=repo_key(repo), label=repo)


# -- the delivery ----------------------------------------------------------------------


@dataclass
class _Draft:
    route: Route
    summary: str
    author: str | None = None
    occurred_at: str | None = None
    in_reply_to: str | None = None
    refs: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)


def plan_delivery(
    *,
    event: str,
    delivery_id: str,
    body: bytes,
    content_type: str | None,
    lookup: Lookup,
    payload: dict[str, Any] | None = None,
) -> NewTrigger:
    """The trigger for one delivery (validated, not stored); InvalidInput if malformed."""
    event = check_event_name(event)
    delivery_id = check_delivery_id(delivery_id)
    data = payload if payload is not None else parse_body(body, content_type)
    repo = _repository(data)
    action = data.get("action") if isinstance(data.get("action"), str) else None
    if event in PR_EVENTS:
        draft = _pull_request_event(event, action, data, _need_repo(repo, event), lookup)
    elif event in ISSUE_EVENTS:
        draft = _issue_event(event, action, data, _need_repo(repo, event), lookup)
    elif event in CI_EVENTS:
        draft = _ci_event(event, action, data, _need_repo(repo, event), lookup)
    elif event == "push":
        draft = _push_event(data, _need_repo(repo, event))
    else:
        draft = _other_event(event, action, data, repo)
    route = draft.route
    return Memory.new_trigger(
        source=SOURCE,
        kind=f"{event}.{action}" if action else event,
        payload=None,
        raw=body,
        content_type=content_type or "application/json",
        search_text=_search_text(draft.summary, data),
        thread_key=route.thread_key,
        thread_id=route.thread_id,
        thread_title=route.title,
        thread_status=route.status,
        summary=draft.summary,
        author=draft.author or _login(data.get("sender")),
        occurred_at=draft.occurred_at,
        dedupe_key=delivery_id,
        in_reply_to=draft.in_reply_to,
        refs=_unique(draft.refs),
        aliases=_unique(draft.aliases),
        thread_aliases=_unique(route.thread_aliases),
    )


def _repository(data: dict[str, Any]) -> str | None:
    name = as_dict(data.get("repository")).get("full_name")
    return name if isinstance(name, str) and "/" in name else None


def _need_repo(repo: str | None, event: str) -> str:
    if repo is None:
        raise InvalidInput(
            f"a {event} delivery must name its repository as repository.full_name "
            "(owner/name); this body has none",
            field="repository.full_name",
        )
    return repo


def _login(user: Any) -> str | None:
    login = as_dict(user).get("login")
    return login if isinstance(login, str) and login else None


def _number(obj: Any, what: str) -> int:
    number = as_dict(obj).get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise InvalidInput(
            f"the delivery has no {what}.number; a GitHub {what} event always carries one",
            field=f"{what}.number",
        )
    return number


def _unique(values: Iterable[str | None]) -> list[str]:
    seen: dict[str, None] = {}
    for value in values:
        if value:
            seen.setdefault(value, None)
    return list(seen)


def _who(data: dict[str, Any], fallback: str = "someone") -> str:
    return _login(data.get("sender")) or fallback


def _labels(data: dict[str, Any]) -> str:
    name = as_dict(data.get("label")).get("name")
    return f" '{clip(name, 40)}'" if name else ""


# -- pull requests and issues ------------------------------------------------------------


def _pull_request_event(
    event: str, action: str | None, data: dict[str, Any], repo: str, lookup: Lookup
) -> _Draft:
    pr = as_dict(data.get("pull_request"))
    if not pr:
        raise InvalidInput(
            f"a {event} delivery must carry a pull_request object", field="pull_request"
        )
    number = _number(pr, "pull_request")
    head = as_dict(pr.get("head"))
    head_sha = head.get("sha") if isinstance(head.get("sha"), str) else None
    head_ref = head.get("ref") if isinstance(head.get("ref"), str) else None
    head_repo = as_dict(head.get("repo")).get("full_name")
    route = Route(
        thread_key=number_key(repo, number),
        label=f"PR #{number}",
        title=f"PR #{number}: {clip(pr.get('title'), 150)}",
    )
    if action != "closed":
        # a fork's branch names live in another repository: only our own ones identify the PR
        if head_sha:
            route.thread_aliases.append(pr_sha_alias(repo, head_sha))
        if head_ref and head_repo in (None, repo):
            route.thread_aliases.append(pr_branch_alias(repo, head_ref))
    who = _who(data)
    title = clip(pr.get("title"), 90)
    draft = _Draft(route=route, summary="")
    if event == "pull_request":
        draft.occurred_at = timestamp_or_none(pr.get("updated_at"))
        if action == "closed":
            route.status = "merged" if pr.get("merged") else "closed"
        elif action == "reopened":
            route.status = "open"
        if action in PR_UPDATE_ACTIONS and head_sha:
            draft.aliases.append(update_alias(repo, head_sha))
        draft.summary = _pr_summary(action, data, who, number, title, pr, head_sha)
    elif event == "pull_request_review":
        review = as_dict(data.get("review"))
        state = str(review.get("state") or action or "reviewed").lower().replace("_", " ")
        reviewer = _login(review.get("user")) or who
        draft.author = reviewer
        draft.occurred_at = timestamp_or_none(review.get("submitted_at"))
        verb = {
            "approved": "approved",
            "changes requested": "requested changes on",
            "commented": "commented in a review of",
        }.get(state, f"reviewed ({state})")
        if action == "dismissed":
            verb = f"dismissed {reviewer}'s review of"
            reviewer = who
        text = clip(review.get("body"), 80)
        draft.summary = f"{reviewer} {verb} PR #{number}" + (f": {text}" if text else "")
    elif event == "pull_request_review_comment":
        draft = _comment_draft(
            draft, data, repo, lookup, "review-comment", f"PR #{number}",
            location=_comment_location(as_dict(data.get("comment"))),
        )  # fmt: skip
    else:  # pull_request_review_thread
        comments = as_list(as_dict(data.get("thread")).get("comments"))
        first = as_dict(comments[0]) if comments else {}
        where = _comment_location(first)
        draft.summary = f"{who} {action or 'updated'} a review thread on PR #{number}" + (
            f" at {where}" if where else ""
        )
        cited = (
            lookup.resolve(comment_alias(repo, "review-comment", first["id"]))
            if first.get("id") is not None
            else None
        )
        if cited:
            draft.refs.append(cited)
    return draft


def _pr_summary(
    action: str | None,
    data: dict[str, Any],
    who: str,
    number: int,
    title: str,
    pr: dict[str, Any],
    head_sha: str | None,
) -> str:
    subject = f"PR #{number}: {title}"
    if action == "closed":
        return f"{who} {'merged' if pr.get('merged') else 'closed'} {subject}"
    if action == "synchronize":
        return f"{who} pushed {(head_sha or '')[:7]} to {subject}"
    if action in {"labeled", "unlabeled"}:
        return f"{who} {action}{_labels(data)} {subject}"
    if action in {"assigned", "unassigned"}:
        target = _login(data.get("assignee")) or "someone"
        return f"{who} {action} {target} {'to' if action == 'assigned' else 'from'} {subject}"
    if action in {"review_requested", "review_request_removed"}:
        reviewer = _login(data.get("requested_reviewer")) or clip(
            as_dict(data.get("requested_team")).get("name"), 40
        )
        verb = (
            "requested review from"
            if action == "review_requested"
            else "removed review request for"
        )
        return f"{who} {verb} {reviewer or 'a reviewer'} on {subject}"
    if action == "ready_for_review":
        return f"{who} marked {subject} ready for review"
    verb = (action or "updated").replace("_", " ")
    return f"{who} {verb} {subject}"


def _comment_location(comment: dict[str, Any]) -> str:
    path = comment.get("path")
    if not isinstance(path, str):
        return ""
    line = comment.get("line") or comment.get("original_line") or comment.get("position")
    return f"{clip(path, 60)}:{line}" if isinstance(line, int) else clip(path, 60)


def _comment_draft(
    draft: _Draft,
    data: dict[str, Any],
    repo: str,
    lookup: Lookup,
    kind: str,
    subject: str,
    location: str = "",
) -> _Draft:
    """A comment event: author, text, and links to the comment it replies to or changes."""
    comment = as_dict(data.get("comment"))
    comment_id = comment.get("id")
    author = _login(comment.get("user")) or _who(data)
    action = _str(data.get("action")) or "created"
    draft.author = author
    draft.occurred_at = timestamp_or_none(comment.get("updated_at") or comment.get("created_at"))
    if comment_id is not None:
        alias = comment_alias(repo, kind, comment_id)
        earlier = lookup.resolve(alias)
        if earlier is None:
            draft.aliases.append(alias)  # the comment's first seen event answers for it
        elif action in {"edited", "deleted"}:
            draft.refs.append(earlier)
    parent = comment.get("in_reply_to_id")
    if parent is not None:
        draft.in_reply_to = lookup.resolve(comment_alias(repo, kind, parent))
    verb = {"created": "commented on", "edited": "edited a comment on"}.get(
        action, f"{action} a comment on"
    )
    if draft.in_reply_to or parent is not None:
        verb = "replied on" if action == "created" else verb
    where = f" at {location}" if location else ""
    text = clip(comment.get("body"), 90)
    draft.summary = f"{author} {verb} {subject}{where}" + (f": {text}" if text else "")
    return draft


def _issue_event(
    event: str, action: str | None, data: dict[str, Any], repo: str, lookup: Lookup
) -> _Draft:
    issue = as_dict(data.get("issue"))
    if not issue:
        raise InvalidInput(f"a {event} delivery must carry an issue object", field="issue")
    number = _number(issue, "issue")
    is_pr = bool(issue.get("pull_request"))
    noun = "PR" if is_pr else "issue"
    route = Route(
        thread_key=number_key(repo, number),
        label=f"{noun} #{number}",
        title=f"{'PR' if is_pr else 'Issue'} #{number}: {clip(issue.get('title'), 150)}",
    )
    draft = _Draft(route=route, summary="")
    subject = f"{noun} #{number}"
    if event == "issue_comment":
        return _comment_draft(draft, data, repo, lookup, "issue-comment", subject)
    who = _who(data)
    draft.occurred_at = timestamp_or_none(issue.get("updated_at"))
    if action == "closed":
        route.status = "closed"
    elif action == "reopened":
        route.status = "open"
    title = clip(issue.get("title"), 90)
    if action in {"labeled", "unlabeled"}:
        verb = f"{action}{_labels(data)}"
    elif action in {"assigned", "unassigned"}:
        target = _login(data.get("assignee")) or "someone"
        verb = f"{action} {target} {'to' if action == 'assigned' else 'from'}"
    elif action in {"milestoned", "demilestoned"}:
        milestone = clip(as_dict(data.get("milestone")).get("title"), 40)
        verb = f"{action} ({milestone})" if milestone else action
    else:
        verb = (action or "updated").replace("_", " ")
    draft.summary = f"{who} {verb} {subject}: {title}"
    return draft


# -- CI ------------------------------------------------------------------------------------


def _verdict(status: Any, conclusion: Any) -> str:
    if isinstance(conclusion, str) and conclusion:
        return _VERDICTS.get(conclusion, conclusion.replace("_", " "))
    if isinstance(status, str) and status:
        return _VERDICTS.get(status, status.replace("_", " "))
    return "reported"


def _pr_numbers(runs: Any) -> list[int]:
    return [
        n
        for n in (as_dict(pr).get("number") for pr in as_list(runs))
        if isinstance(n, int) and not isinstance(n, bool)
    ]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _ci_event(
    event: str, action: str | None, data: dict[str, Any], repo: str, lookup: Lookup
) -> _Draft:
    # a status delivery is the status itself; the others wrap it in an object of their name
    obj = data if event == "status" else as_dict(data.get(event))
    if not obj:
        raise InvalidInput(f"a {event} delivery must carry a {event} object", field=event)
    sha = _str(obj.get("head_sha") or obj.get("sha"))
    branch = _str(obj.get("head_branch"))
    pull_requests = as_list(obj.get("pull_requests"))
    counts_text = ""
    failing_step = ""
    if event == "check_run":
        branch = branch or _str(as_dict(obj.get("check_suite")).get("head_branch"))
        output = as_dict(obj.get("output"))
        counts_text = "\n".join(
            str(output.get(k)) for k in ("title", "summary", "text") if output.get(k)
        )
        thing = f"Check '{clip(obj.get('name'), 60)}'"
        occurred = obj.get("completed_at") or obj.get("started_at")
    elif event == "check_suite":
        app_name = clip(as_dict(obj.get("app")).get("name"), 60)
        thing = f"Check suite '{app_name}'" if app_name else "Check suite"
        occurred = obj.get("updated_at")
    elif event == "workflow_run":
        name = _str(obj.get("name")) or _str(as_dict(data.get("workflow")).get("name")) or "?"
        run = obj.get("run_number")
        thing = f"Workflow '{clip(name, 60)}'" + (f" run {run}" if isinstance(run, int) else "")
        occurred = obj.get("updated_at")
    elif event == "workflow_job":
        workflow = _str(obj.get("workflow_name"))
        thing = f"Job '{clip(obj.get('name'), 60)}'" + (
            f" ({clip(workflow, 40)})" if workflow else ""
        )
        for step in as_list(obj.get("steps")):
            if as_dict(step).get("conclusion") == "failure":
                failing_step = clip(as_dict(step).get("name"), 60)
                break
        occurred = obj.get("completed_at") or obj.get("started_at") or obj.get("created_at")
    else:  # status
        branches = [as_dict(b).get("name") for b in as_list(obj.get("branches"))]
        # a commit on several branches says nothing about which one this is about
        branch = branches[0] if len(branches) == 1 and isinstance(branches[0], str) else None
        thing = f"Status '{clip(obj.get('context'), 60)}'"
        occurred = obj.get("updated_at") or obj.get("created_at")
    pr_numbers = _pr_numbers(pull_requests)
    route = route_commit(lookup, repo, sha=sha, branch=branch, pr_numbers=pr_numbers)
    if pr_numbers:
        # the PR is now known: later CI on its head SHA or branch finds it without pull_requests[]
        for pr in pull_requests:
            pr_dict = as_dict(pr)
            if pr_dict.get("number") != pr_numbers[0]:
                continue
            head = as_dict(pr_dict.get("head"))
            if _str(head.get("sha")):
                route.thread_aliases.append(pr_sha_alias(repo, head["sha"]))
            if _str(head.get("ref")):
                route.thread_aliases.append(pr_branch_alias(repo, head["ref"]))
    if route.thread_key and route.thread_key.startswith(f"github:{repo}:"):
        route.title = f"{repo} {route.label}"
    if event == "status":
        verdict = _verdict(obj.get("state"), None)
    else:
        verdict = _verdict(obj.get("status"), obj.get("conclusion"))
    where = route.label or repo
    summary = f"{thing} {verdict} on {where}"
    if sha and not where.startswith("commit"):
        summary += f" ({sha[:7]})"
    facts = describe_counts(count_tests(counts_text), failing_area(counts_text))
    if failing_step:
        summary += f" at step '{failing_step}'"
    if facts:
        summary += f": {facts}"
    elif event == "status" and _str(obj.get("description")):
        summary += f": {clip(obj.get('description'), 80)}"
    if action in {"rerequested", "requested_action"}:
        summary += f" ({action.replace('_', ' ')} by {_who(data)})"
    draft = _Draft(route=route, summary=summary, occurred_at=timestamp_or_none(occurred))
    if sha:
        cause = lookup.resolve(update_alias(repo, sha))
        if cause:
            draft.refs.append(cause)
    return draft


# -- pushes and everything else --------------------------------------------------------------


def _push_event(data: dict[str, Any], repo: str) -> _Draft:
    ref = data.get("ref")
    if not isinstance(ref, str) or not ref:
        raise InvalidInput("a push delivery must carry the pushed ref", field="ref")
    after = _str(data.get("after"))
    pusher = _str(as_dict(data.get("pusher")).get("name")) or _who(data)
    if ref.startswith("refs/heads/"):
        name = ref.removeprefix("refs/heads/")
        route = Route(thread_key=branch_key(repo, name), label=f"branch {name}")
    elif ref.startswith("refs/tags/"):
        name = ref.removeprefix("refs/tags/")
        route = Route(thread_key=tag_key(repo, name), label=f"tag {name}")
    else:
        name = ref
        route = Route(thread_key=f"github:{repo}:ref:{ref}", label=ref)
    route.title = f"{repo} {route.label}"
    commits = as_list(data.get("commits"))
    head = as_dict(data.get("head_commit"))
    if data.get("deleted") or after == _ZERO_SHA:
        summary = f"{pusher} deleted {route.label}"
    else:
        verb = "force-pushed" if data.get("forced") else "pushed"
        count = len(commits)
        what = f"{count} commit{'s' if count != 1 else ''}" if commits else (after or "")[:7]
        summary = f"{pusher} {verb} {what} to {route.label}"
        if data.get("created"):
            summary = f"{pusher} created {route.label}" + (f" with {what}" if commits else "")
        message = clip(head.get("message"), 90)
        if message:
            summary += f": {message}"
    draft = _Draft(
        route=route, summary=summary, author=pusher,
        occurred_at=timestamp_or_none(head.get("timestamp")),
    )  # fmt: skip
    if after and after != _ZERO_SHA:
        route.thread_aliases.append(push_sha_alias(repo, after))
        draft.aliases.append(update_alias(repo, after))
    return draft


def _other_event(event: str, action: str | None, data: dict[str, Any], repo: str | None) -> _Draft:
    if repo is not None:
        route = Route(thread_key=repo_key(repo), label=repo, title=repo)
    else:
        owner = _login(data.get("organization")) or _str(
            as_dict(data.get("enterprise")).get("slug")
        )
        scope = owner or "unscoped"
        route = Route(thread_key=f"github:{scope}", label=scope, title=f"GitHub {scope}")
    who = _who(data)
    verb = (action or "").replace("_", " ")
    if event in {"create", "delete"}:
        ref_type = clip(data.get("ref_type"), 20) or "ref"
        summary = f"{who} {event}d {ref_type} {clip(data.get('ref'), 80)} in {route.label}"
    elif event == "ping":
        hook = data.get("hook_id")
        summary = f"webhook ping for hook {hook} on {route.label}: {clip(data.get('zen'), 80)}"
    elif event == "discussion":
        discussion = as_dict(data.get("discussion"))
        number = discussion.get("number")
        summary = (
            f"{who} {verb or 'updated'} discussion #{number}: {clip(discussion.get('title'), 90)}"
        )
    elif event == "discussion_comment":
        discussion = as_dict(data.get("discussion"))
        comment = as_dict(data.get("comment"))
        author = _login(comment.get("user")) or who
        summary = (
            f"{author} {verb or 'updated'} a comment on discussion #{discussion.get('number')}: "
            f"{clip(comment.get('body'), 80)}"
        )
    elif event == "release":
        release = as_dict(data.get("release"))
        summary = f"{who} {verb or 'updated'} release {clip(release.get('tag_name'), 40)}" + (
            f": {clip(release.get('name'), 80)}" if release.get("name") else ""
        )
    else:
        summary = f"{event.replace('_', ' ')}" + (f" {verb}" if verb else "") + f" by {who}"
        for name in ("pull_request", "issue", "discussion"):
            number = as_dict(data.get(name)).get("number")
            if isinstance(number, int):
                summary += f" on {name.replace('_', ' ')} #{number}"
                break
        summary += f" in {route.label}"
    return _Draft(route=route, summary=summary)


def _search_text(summary: str, data: dict[str, Any]) -> str:
    """The words worth indexing: titles, bodies, names, SHAs; not URLs or node ids."""
    out = [summary]
    size = 0
    stack: list[Any] = [data]
    while stack and size < 64 * 1024:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                if isinstance(key, str) and key.endswith(_NOISE_KEYS):
                    continue
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(reversed(node))
        elif isinstance(node, str) and node and not node.startswith(("http://", "https://")):
            out.append(node)
            size += len(node)
    return "\n".join(out)
