"""Generated GitHub webhook deliveries shaped like the real ones, for the ingest benchmarks.

Real deliveries are large: a `pull_request` body embeds the full repository
object three times (the event's, and the head's and base's) and a user object
for every person it names, about 20 KB in all. The generator builds bodies with
GitHub's fields (the same keys, URLs and nesting as octokit/webhooks' examples)
so that parsing, signature checks, search text and payload storage cost what
they cost on real traffic. Each pull request goes through a life cycle that
exercises every routing rule: opened, CI on its head SHA without
`pull_requests[]` (found by SHA), a review comment and a reply to it, a new
push, a CI job found by branch, a comment on the PR, and the merge; every
eighth PR also pushes to main. Everything is deterministic in its arguments.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chainrecall.ingest.github import sign

OWNER = "acme-payments"
REPO = "ledger"
FULL_NAME = f"{OWNER}/{REPO}"
API = "https://api.github.com"
WEB = "https://github.com"
SECRET = "bench-webhook-secret"
STAMP = "2026-11-03T09:{minute:02d}:{second:02d}Z"
AREAS = ["payments", "invoices", "ledger", "api", "workers", "billing"]
PEOPLE = ["octocat", "hubot", "monalisa", "defunkt", "mojombo", "pjhyett", "wycats"]


@dataclass(frozen=True)
class Delivery:
    """One delivery as GitHub sends it: the event name, a unique GUID and the body bytes."""

    event: str
    delivery_id: str
    body: bytes

    def headers(self, secret: str = SECRET) -> dict[str, str]:
        return {
            "X-GitHub-Event": self.event,
            "X-GitHub-Delivery": self.delivery_id,
            "X-Hub-Signature-256": sign(secret, self.body),
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/bench",
        }


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(str(p) for p in parts).encode()).hexdigest()


def _guid(*parts: object) -> str:
    h = hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _at(index: int) -> str:
    return STAMP.format(minute=(index // 60) % 60, second=index % 60)


def user(login: str) -> dict[str, Any]:
    uid = int(_sha(login)[:7], 16)
    base = f"{API}/users/{login}"
    return {
        "login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4", "gravatar_id": "",
        "url": base, "html_url": f"{WEB}/{login}", "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}", "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions", "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos", "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events", "type": "User", "site_admin": False,
    }  # fmt: skip


def repository() -> dict[str, Any]:
    base = f"{API}/repos/{FULL_NAME}"
    templated = {
        "keys": "/keys{/key_id}", "collaborators": "/collaborators{/collaborator}",
        "issue_events": "/issues/events{/number}", "assignees": "/assignees{/user}",
        "branches": "/branches{/branch}", "blobs": "/git/blobs{/sha}", "git_tags": "/git/tags{/sha}",
        "git_refs": "/git/refs{/sha}", "trees": "/git/trees{/sha}", "statuses": "/statuses/{sha}",
        "commits": "/commits{/sha}", "git_commits": "/git/commits{/sha}",
        "comments": "/comments{/number}", "issue_comment": "/issues/comments{/number}",
        "contents": "/contents/{+path}", "compare": "/compare/{base}...{head}",
        "archive": "/{archive_format}{/ref}", "issues": "/issues{/number}", "pulls": "/pulls{/number}",
        "milestones": "/milestones{/number}", "notifications": "/notifications{?since,all,participating}",
        "labels": "/labels{/name}", "releases": "/releases{/id}",
    }  # fmt: skip
    plain = [
        "forks", "teams", "hooks", "events", "tags", "languages", "stargazers", "contributors",
        "subscribers", "subscription", "merges", "downloads", "deployments",
    ]  # fmt: skip
    repo: dict[str, Any] = {
        "id": 186853002, "node_id": "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=", "name": REPO,
        "full_name": FULL_NAME, "private": False, "owner": user(OWNER),
        "html_url": f"{WEB}/{FULL_NAME}", "description": "Double-entry ledger of the payments team",
        "fork": False, "url": base,
    }  # fmt: skip
    for name in plain:
        repo[f"{name}_url"] = f"{base}/{name}"
    for name, tail in templated.items():
        repo[f"{name}_url"] = base + tail
    repo.update(
        {
            "created_at": "2024-05-15T15:19:25Z", "updated_at": "2026-11-02T18:01:12Z",
            "pushed_at": "2026-11-03T08:55:02Z", "git_url": f"git://github.com/{FULL_NAME}.git",
            "ssh_url": f"git@github.com:{FULL_NAME}.git", "clone_url": f"{WEB}/{FULL_NAME}.git",
            "svn_url": f"{WEB}/{FULL_NAME}", "homepage": None, "size": 41231,
            "stargazers_count": 12, "watchers_count": 12, "language": "Python", "has_issues": True,
            "has_projects": True, "has_downloads": True, "has_wiki": True, "has_pages": False,
            "forks_count": 3, "mirror_url": None, "archived": False, "disabled": False,
            "open_issues_count": 41, "license": None, "forks": 3, "open_issues": 41,
            "watchers": 12, "default_branch": "main", "is_template": False, "topics": [],
            "visibility": "public", "web_commit_signoff_required": False, "custom_properties": {},
        }
    )  # fmt: skip
    return repo


def _pr(
    number: int, author: str, sha: str, state: str = "open", merged: bool = False
) -> dict[str, Any]:
    base = f"{API}/repos/{FULL_NAME}"
    area = AREAS[number % len(AREAS)]
    branch = f"{area}-fix-{number}"
    title = f"{area}: retry the settlement call when the bank times out ({number})"
    return {
        "url": f"{base}/pulls/{number}", "id": 279147437 + number, "node_id": f"MDExOlB1bGxS{number}",
        "html_url": f"{WEB}/{FULL_NAME}/pull/{number}", "diff_url": f"{WEB}/{FULL_NAME}/pull/{number}.diff",
        "patch_url": f"{WEB}/{FULL_NAME}/pull/{number}.patch", "issue_url": f"{base}/issues/{number}",
        "number": number, "state": state, "locked": False, "title": title, "user": user(author),
        "body": f"The bank's API times out under load; retry {area} settlement calls with "
        "backoff and an idempotency key so that a retry never books twice.\n\nFixes #"
        f"{number - 1}.",
        "created_at": _at(number), "updated_at": _at(number + 5),
        "closed_at": _at(number + 9) if state == "closed" else None,
        "merged_at": _at(number + 9) if merged else None,
        "merge_commit_sha": _sha("merge", number), "assignee": None, "assignees": [],
        "requested_reviewers": [user(PEOPLE[(number + 1) % len(PEOPLE)])], "requested_teams": [],
        "labels": [{"id": 1362934389, "node_id": "MDU6TGFiZWwxMzYyOTM0Mzg5",
                    "url": f"{base}/labels/{area}", "name": area, "color": "d73a4a",
                    "default": False, "description": f"the {area} module"}],
        "milestone": None, "draft": False, "commits_url": f"{base}/pulls/{number}/commits",
        "review_comments_url": f"{base}/pulls/{number}/comments",
        "review_comment_url": f"{base}/pulls/comments{{/number}}",
        "comments_url": f"{base}/issues/{number}/comments", "statuses_url": f"{base}/statuses/{sha}",
        "head": {"label": f"{OWNER}:{branch}", "ref": branch, "sha": sha, "user": user(OWNER),
                 "repo": repository()},
        "base": {"label": f"{OWNER}:main", "ref": "main", "sha": _sha("main", number),
                 "user": user(OWNER), "repo": repository()},
        "_links": {name: {"href": f"{base}/pulls/{number}/{name}"}
                   for name in ("self", "html", "issue", "comments", "review_comments",
                                "review_comment", "commits", "statuses")},
        "author_association": "MEMBER", "auto_merge": None, "active_lock_reason": None,
        "merged": merged, "mergeable": None, "rebaseable": None, "mergeable_state": "unknown",
        "merged_by": user(PEOPLE[0]) if merged else None, "comments": 1, "review_comments": 2,
        "maintainer_can_modify": False, "commits": 2, "additions": 120, "deletions": 14,
        "changed_files": 4,
    }  # fmt: skip


def _comment(number: int, cid: int, author: str, body: str, reply_to: int | None) -> dict[str, Any]:
    base = f"{API}/repos/{FULL_NAME}"
    area = AREAS[number % len(AREAS)]
    comment: dict[str, Any] = {
        "url": f"{base}/pulls/comments/{cid}", "pull_request_review_id": 237895671 + cid,
        "id": cid, "node_id": f"MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudD{cid}",
        "diff_hunk": "@@ -40,6 +40,12 @@ def settle(batch):\n-    return bank.post(batch)\n"
        "+    for attempt in retries(5):\n+        with attempt:\n+            return bank.post(batch)",
        "path": f"{area}/settlement.py", "position": 7, "original_position": 7,
        "commit_id": _sha("head", number), "original_commit_id": _sha("head", number),
        "user": user(author), "body": body, "created_at": _at(cid % 3600),
        "updated_at": _at(cid % 3600), "html_url": f"{WEB}/{FULL_NAME}/pull/{number}#r{cid}",
        "pull_request_url": f"{base}/pulls/{number}", "author_association": "MEMBER",
        "_links": {"self": {"href": f"{base}/pulls/comments/{cid}"},
                   "html": {"href": f"{WEB}/{FULL_NAME}/pull/{number}#r{cid}"},
                   "pull_request": {"href": f"{base}/pulls/{number}"}},
        "start_line": None, "original_start_line": None, "start_side": None, "line": 46,
        "original_line": 46, "side": "RIGHT",
    }  # fmt: skip
    if reply_to is not None:
        comment["in_reply_to_id"] = reply_to
    return comment


def _check_run(number: int, sha: str, failed: int) -> dict[str, Any]:
    area = AREAS[number % len(AREAS)]
    total = 118 + number % 40
    text = "\n".join(
        [f"FAILED {area}/test_settlement.py::test_retry_{i} - TimeoutError" for i in range(failed)]
        + [f"==== {failed} failed, {total - failed} passed in 41.20s ===="]
    )
    cid = 128620228 + number
    return {
        "id": cid, "name": "pytest", "node_id": f"MDg6Q2hlY2tSdW4x{cid}", "head_sha": sha,
        "external_id": "", "url": f"{API}/repos/{FULL_NAME}/check-runs/{cid}",
        "html_url": f"{WEB}/{FULL_NAME}/runs/{cid}", "details_url": "https://ci.example.com",
        "status": "completed", "conclusion": "failure" if failed else "success",
        "started_at": _at(number + 1), "completed_at": _at(number + 2),
        "output": {"title": f"{failed} failed" if failed else "all green",
                   "summary": f"{total} tests ran", "text": text, "annotations_count": failed,
                   "annotations_url": f"{API}/repos/{FULL_NAME}/check-runs/{cid}/annotations"},
        "check_suite": {"id": 118578147 + number, "node_id": "MDEwOkNoZWNrU3VpdGUxMTg1NzgxNDc=",
                        "head_branch": None, "head_sha": sha, "status": "completed",
                        "conclusion": "failure" if failed else "success",
                        "url": f"{API}/repos/{FULL_NAME}/check-suites/{118578147 + number}",
                        "before": _sha("main", number), "after": sha, "pull_requests": [],
                        "app": {"id": 29310, "slug": "ci", "name": "CI"},
                        "created_at": _at(number), "updated_at": _at(number + 2)},
        "app": {"id": 29310, "slug": "ci", "node_id": "MDM6QXBwMjkzMTA=", "owner": user(OWNER),
                "name": "CI", "description": "", "external_url": "https://ci.example.com",
                "html_url": f"{WEB}/apps/ci", "created_at": "2024-04-19T19:36:24Z",
                "updated_at": "2024-04-19T19:36:56Z",
                "permissions": {"checks": "write", "contents": "read", "metadata": "read"},
                "events": ["push", "pull_request"]},
        "pull_requests": [],
    }  # fmt: skip


def _workflow_job(number: int, sha: str, branch: str) -> dict[str, Any]:
    jid = 2832853555 + number
    steps = [
        {"name": name, "status": "completed", "conclusion": "success", "number": i + 1,
         "started_at": _at(number + i), "completed_at": _at(number + i + 1)}
        for i, name in enumerate(["Set up job", "Checkout", "Install", "Lint", "Test"])
    ]  # fmt: skip
    return {
        "id": jid, "run_id": 940463255 + number, "workflow_name": "CI", "head_branch": branch,
        "run_url": f"{API}/repos/{FULL_NAME}/actions/runs/{940463255 + number}",
        "run_attempt": 1, "node_id": f"CR_kwDOB{jid}", "head_sha": sha,
        "url": f"{API}/repos/{FULL_NAME}/actions/jobs/{jid}",
        "html_url": f"{WEB}/{FULL_NAME}/runs/{jid}", "status": "completed",
        "conclusion": "success", "created_at": _at(number + 3), "started_at": _at(number + 3),
        "completed_at": _at(number + 8), "name": "test (3.11)", "steps": steps,
        "check_run_url": f"{API}/repos/{FULL_NAME}/check-runs/{jid}",
        "labels": ["ubuntu-latest"], "runner_id": 1, "runner_name": "GitHub Actions 1",
        "runner_group_id": 2, "runner_group_name": "GitHub Actions",
    }  # fmt: skip


def pr_cycle(number: int, salt: str = "") -> list[Delivery]:
    """The deliveries of one pull request's life, in the order GitHub sends them."""
    author = PEOPLE[number % len(PEOPLE)]
    reviewer = PEOPLE[(number + 1) % len(PEOPLE)]
    first, second = _sha("head", number), _sha("head2", number)
    area = AREAS[number % len(AREAS)]
    branch = f"{area}-fix-{number}"
    repo, sender = repository(), user(author)
    out: list[tuple[str, dict[str, Any]]] = []

    def pr_event(action: str, sha: str, **extra: Any) -> dict[str, Any]:
        return {"action": action, "number": number, "pull_request": _pr(number, author, sha, **extra),
                "repository": repo, "sender": sender}  # fmt: skip

    out.append(("pull_request", pr_event("opened", first)))
    out.append(
        ("check_run", {"action": "completed", "check_run": _check_run(number, first, 3),
                       "repository": repo, "sender": user("ci-bot")})
    )  # fmt: skip
    cid = 2_000_000 + number * 10
    issue_pr = {k: v for k, v in _pr(number, author, first).items() if k not in ("head", "base")}
    for body, reply_to, who in [
        ("Should the retry budget come from settings instead of a constant?", None, reviewer),
        ("Yes: moved it to SETTLEMENT_RETRIES, default 5.", cid, author),
    ]:
        comment_id = cid if reply_to is None else cid + 1
        out.append(
            ("pull_request_review_comment",
             {"action": "created", "comment": _comment(number, comment_id, who, body, reply_to),
              "pull_request": _pr(number, author, first), "repository": repo,
              "sender": user(who)})
        )  # fmt: skip
    out.append(("pull_request", pr_event("synchronize", second)))
    out.append(
        ("workflow_job", {"action": "completed", "workflow_job": _workflow_job(number, second, branch),
                          "repository": repo, "sender": user("ci-bot")})
    )  # fmt: skip
    out.append(
        ("issue_comment",
         {"action": "created",
          "issue": {**issue_pr, "pull_request": {"url": issue_pr["url"]}, "comments": 1},
          "comment": {"id": cid + 5, "node_id": f"MDEyOklzc3VlQ29tbWVudD{cid}",
                      "url": f"{API}/repos/{FULL_NAME}/issues/comments/{cid + 5}",
                      "html_url": f"{WEB}/{FULL_NAME}/pull/{number}#issuecomment-{cid + 5}",
                      "user": user(reviewer), "created_at": _at(number + 7),
                      "updated_at": _at(number + 7), "author_association": "MEMBER",
                      "body": "LGTM once CI is green; the backoff numbers look right."},
          "repository": repo, "sender": user(reviewer)})
    )  # fmt: skip
    out.append(("pull_request", pr_event("closed", second, state="closed", merged=True)))
    if number % 8 == 0:
        head = {"id": _sha("merge", number), "tree_id": _sha("tree", number), "distinct": True,
                "message": f"Merge pull request #{number} from {OWNER}/{branch}",
                "timestamp": _at(number + 10), "author": {"name": author, "username": author},
                "committer": {"name": "GitHub", "username": "web-flow"},
                "added": [], "removed": [], "modified": [f"{area}/settlement.py"]}  # fmt: skip
        out.append(
            ("push", {"ref": "refs/heads/main", "before": _sha("main", number),
                      "after": _sha("merge", number), "created": False, "deleted": False,
                      "forced": False, "compare": f"{WEB}/{FULL_NAME}/compare/x...y",
                      "commits": [head], "head_commit": head, "repository": repo,
                      "pusher": {"name": author}, "sender": sender})
        )  # fmt: skip
    return [
        Delivery(event, _guid(salt, number, i, event), json.dumps(body).encode())
        for i, (event, body) in enumerate(out)
    ]


def deliveries(count: int, first_pr: int = 1, salt: str = "") -> list[Delivery]:
    """`count` deliveries: whole PR life cycles from PR `first_pr` on, cut at `count`."""
    out: list[Delivery] = []
    number = first_pr
    while len(out) < count:
        out.extend(pr_cycle(number, salt))
        number += 1
    return out[:count]


def write_github_dir(root: Path, items: list[Delivery]) -> None:
    """Save deliveries as `chainrecall import` reads them: `root/{event}/{n:08d}-{guid}.json`.

    The import replays files in the order of their names, so the sequence number
    comes first; the GUID after it keeps each file's own delivery identity.
    """
    for n, item in enumerate(items):
        folder = root / item.event
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{n:08d}-{item.delivery_id}.json").write_bytes(item.body)
