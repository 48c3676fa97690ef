"""The checks: each rule of API.md as a black-box test over HTTP, in the order they run.

A check is a function of a `Session` that returns when the deployment keeps
its rule and raises `CheckFailed` (with the call that shows the breach) or
`CheckSkipped`. The first checks (`setup.*`) write the records the others
read, all into threads of the run's own (`chainrecall-check:<run>`); checks
that write are marked so, and `--read-only` runs only the others, against a
thread the user names. Every check knows the service only through API.md:
field names beyond the ones API.md fixes are never relied upon.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import httpx

from chainrecall.check import rules
from chainrecall.check.rules import Rule
from chainrecall.check.session import (
    RESOURCE_OF_PREFIX,
    CheckFailed,
    CheckSkipped,
    Exchange,
    Session,
    content_type_params,
    expect_id,
    expect_problem,
    expect_status,
    find_ids,
    json_of,
    media_type,
)

SOURCE = "chainrecall-check"
JSON_PAYLOAD: dict[str, Any] = {
    "check": "chainrecall",
    "text": "naïve café ✓ 中文",
    "numbers": [0, -1, 2.5, 1e21],
    "flags": [True, False, None],
    "nested": {"empty": {}, "list": []},
}
TEXT_PAYLOAD = "chainrecall check: plain text ✓\nsecond line, tab\there, naïve café\n"
WALK_PAGE_LIMIT = 5000  # a walk longer than this many pages is taken as endless
RESOLVE_BUDGET = 300  # fetches the cited-ID check may make on a large thread
CONCURRENT_WRITERS = 4
APPENDS_PER_WRITER = 8
CONCURRENT_RETRIES = 8
CONCURRENCY_DEADLINE_S = 120.0


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    rule: Rule
    run: Callable[[Session], None]
    writes: bool = False
    setup: bool = False  # writes the records later checks read; always runs when writing


CHECKS: list[Check] = []


def check(
    name: str, title: str, rule: Rule, *, writes: bool = False, setup: bool = False
) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    def register(run: Callable[[Session], None]) -> Callable[[Session], None]:
        CHECKS.append(Check(name, title, rule, run, writes=writes, setup=setup))
        return run

    return register


# -- what the checks share ----------------------------------------------------------


def subject_thread(session: Session) -> str:
    """The thread the read checks walk: the run's own, or --thread in read-only mode."""
    thread_id = session.state.get("thread")
    if thread_id is None:
        if session.options.read_only:
            raise CheckSkipped("needs a thread to read: pass --thread thr_... with --read-only")
        raise CheckSkipped("needs the thread that setup.post-trigger creates, and it failed")
    return str(thread_id)


def seed(session: Session, key: str) -> Any:
    """A record the setup checks wrote; skip when they did not run or failed."""
    if session.options.read_only:
        raise CheckSkipped("needs records of its own, which --read-only does not write")
    if key not in session.state:
        raise CheckSkipped(f"needs the {key} that a setup check creates, and that check failed")
    return session.state[key]


def own_thread_only(session: Session) -> str:
    seed(session, "triggers")
    return subject_thread(session)


def trigger_body(session: Session, label: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "source": SOURCE,
        "kind": "check.event",
        "summary": f"chainrecall check {session.run_id}: {label}",
        "payload": {"check": session.run_id, "label": label},
    }
    body.update(fields)
    return body


def post_trigger(
    session: Session, body: dict[str, Any], client: httpx.Client | None = None
) -> tuple[dict[str, Any], Exchange]:
    """POST /triggers that must store a new trigger: 201 with a record that has an id."""
    response, exchange = session.call("POST", "/triggers", json_body=body, client=client)
    expect_status(response, exchange, 201, "POST /triggers of a new event", rule=rules.POST_TRIGGER)
    record = json_of(response, exchange)
    if not isinstance(record, dict):
        raise CheckFailed("POST /triggers answered no JSON object", exchange, rules.POST_TRIGGER)
    expect_id(record.get("id"), "trg", "the new trigger's id", exchange)
    expect_id(record.get("thread_id"), "thr", "the new trigger's thread_id", exchange)
    return record, exchange


def append(session: Session, thread_id: str, label: str, client: httpx.Client | None = None) -> str:
    record, _ = post_trigger(session, trigger_body(session, label, thread_id=thread_id), client)
    return str(record["id"])


def get_record(session: Session, object_id: str) -> tuple[dict[str, Any], Exchange]:
    resource = RESOURCE_OF_PREFIX[object_id.split("_", 1)[0]]
    body, exchange = session.get_json(f"/{resource}/{object_id}")
    if not isinstance(body, dict):
        raise CheckFailed(f"GET /{resource}/{object_id} answered no JSON object", exchange)
    if body.get("id") != object_id:
        raise CheckFailed(
            f"GET /{resource}/{object_id} answered the record of {body.get('id')!r}",
            exchange,
            rules.EXACT,
        )
    return body, exchange


def event_count(session: Session, thread_id: str) -> tuple[int, Exchange]:
    record, exchange = get_record(session, thread_id)
    count = record.get("event_count")
    if not isinstance(count, int) or isinstance(count, bool):
        raise CheckFailed(
            f"the thread record's event_count is {count!r}, not an integer",
            exchange,
            rules.THREAD_RECORD,
        )
    return count, exchange


def unknown_id(prefix: str) -> str:
    """A well-formed ID that no service has issued (random, and marked as the checker's)."""
    return f"{prefix}_zzcheck{secrets.token_hex(6)}"


# -- walking a thread's events ------------------------------------------------------


def event_key(item: dict[str, Any]) -> str:
    """What tells one event from another: a worker's start and its reports share its id,
    so the id alone does not; its position (`seq`, in API.md's page) or its kind and
    time do."""
    if "seq" in item:
        return f"{item['id']} (seq {item['seq']})"
    return f"{item['id']} ({item.get('kind', 'event')} at {item.get('at', '?')})"


@dataclass
class Walk:
    """Events seen on a walk, with the page (exchange) each was seen on."""

    items: list[dict[str, Any]] = field(default_factory=list)
    seen_on: list[Exchange] = field(default_factory=list)
    last_cursor: str | None = None
    last_exchange: Exchange | None = None

    @property
    def ids(self) -> list[str]:
        return [str(item["id"]) for item in self.items]

    @property
    def keys(self) -> list[str]:
        return [event_key(item) for item in self.items]

    def add(self, page: dict[str, Any], exchange: Exchange) -> None:
        self.items.extend(page["items"])
        self.seen_on.extend([exchange] * len(page["items"]))
        self.last_cursor = page["next_cursor"]
        self.last_exchange = exchange


def events_path(thread_id: str) -> str:
    return f"/threads/{thread_id}/events"


def fetch_page(
    session: Session,
    thread_id: str,
    cursor: str | None,
    limit: int | None,
    rule: Rule,
    client: httpx.Client | None = None,
) -> tuple[dict[str, Any], Exchange]:
    """One page of events, checked for the page shape API.md fixes."""
    params: dict[str, Any] = {}
    if cursor is not None:
        params["cursor"] = cursor
    if limit is not None:
        params["limit"] = limit
    response, exchange = session.call("GET", events_path(thread_id), params=params, client=client)
    expect_status(response, exchange, 200, "a page of events", rule=rule)
    page = json_of(response, exchange)
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise CheckFailed("the page is not an object with an `items` list", exchange, rule)
    for item in page["items"]:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise CheckFailed(f"an event on the page has no id: {item!r}"[:300], exchange, rule)
    if not isinstance(page.get("has_more"), bool):
        raise CheckFailed("the page has no boolean `has_more`", exchange, rule)
    if not isinstance(page.get("next_cursor"), str) or not page["next_cursor"]:
        raise CheckFailed(
            "the page has no next_cursor (it must be on every page, the last one too)",
            exchange,
            rules.PAGING_LAST_CURSOR,
        )
    if limit is not None and len(page["items"]) > limit:
        raise CheckFailed(
            f"the page holds {len(page['items'])} events, more than limit={limit}",
            exchange,
            rules.PAGING_LIMIT,
        )
    return page, exchange


def walk(
    session: Session,
    thread_id: str,
    limit: int | None,
    rule: Rule,
    *,
    cursor: str | None = None,
    after_page: Callable[[int], None] | None = None,
    max_pages: int = WALK_PAGE_LIMIT,
    only_pages: int | None = None,
) -> Walk:
    """Follow next_cursor from `cursor` until has_more is false (or for `only_pages` pages)."""
    seen = Walk()
    for page_number in range(1, max_pages + 1):
        page, exchange = fetch_page(session, thread_id, cursor, limit, rule)
        seen.add(page, exchange)
        if after_page is not None:
            after_page(page_number)
        if not page["has_more"] or page_number == only_pages:
            return seen
        if not page["items"] and page["next_cursor"] == cursor:
            raise CheckFailed(
                "has_more is true but the page is empty and next_cursor did not move: "
                "the walk would never end",
                exchange,
                rule,
            )
        cursor = page["next_cursor"]
    raise CheckFailed(f"the walk did not end within {max_pages} pages", seen.last_exchange, rule)


def expect_once_in_order(seen: Walk, expected: list[str], rule: Rule, what: str) -> None:
    """`seen` holds exactly the events whose keys are `expected`, once each, in that order."""
    first_seen: dict[str, int] = {}
    for index, key in enumerate(seen.keys):
        if key in first_seen:
            raise CheckFailed(
                f"{what}: event {key} was seen twice (a duplicate)", seen.seen_on[index], rule
            )
        first_seen[key] = index
    missing = [key for key in expected if key not in first_seen]
    if missing:
        after = [first_seen[k] for k in expected[expected.index(missing[0]) :] if k in first_seen]
        shown = seen.seen_on[after[0]] if after else seen.last_exchange
        raise CheckFailed(
            f"{what}: {len(missing)} event(s) never seen, first {missing[0]} "
            "(skipped behind the cursor)",
            shown,
            rule,
        )
    wanted = set(expected)
    extra = [key for key in seen.keys if key not in wanted]
    if extra:
        raise CheckFailed(
            f"{what}: event {extra[0]} was seen but is not among the thread's events",
            seen.seen_on[first_seen[extra[0]]],
            rule,
        )
    for index, (got, due) in enumerate(zip(seen.keys, expected, strict=True)):
        if got != due:
            raise CheckFailed(
                f"{what}: the events came out of order: {got} where {due} was due (oldest first)",
                seen.seen_on[index],
                rule,
            )
    seqs = [item.get("seq") for item in seen.items]
    if all(isinstance(s, int) for s in seqs):
        for index in range(1, len(seqs)):
            if seqs[index] <= seqs[index - 1]:  # type: ignore[operator]
                raise CheckFailed(
                    f"{what}: seq goes from {seqs[index - 1]} to {seqs[index]} (not oldest first)",
                    seen.seen_on[index],
                    rule,
                )


# -- setup: the run's own records ---------------------------------------------------


@check(
    "setup.post-trigger",
    "POST /triggers answers 201, Location and a record with thread_id; a thread_key "
    "creates its thread once",
    rules.POST_TRIGGER,
    writes=True,
    setup=True,
)
def setup_post_trigger(session: Session) -> None:
    first_body = trigger_body(
        session, "json payload", kind="check.json", thread_key=session.thread_key,
        payload=JSON_PAYLOAD,
    )  # fmt: skip
    response, exchange = session.call("POST", "/triggers", json_body=first_body)
    expect_status(response, exchange, 201, "POST /triggers with a new thread_key")
    first = json_of(response, exchange)
    if not isinstance(first, dict):
        raise CheckFailed("POST /triggers answered no JSON object", exchange)
    trigger_id = expect_id(first.get("id"), "trg", "the trigger's id", exchange)
    thread_id = expect_id(first.get("thread_id"), "thr", "the trigger's thread_id", exchange)
    location = response.headers.get("location")
    if not location:
        raise CheckFailed("201 Created without a Location header", exchange)
    located, located_exchange = session.call("GET", urljoin(session.base_url + "/", location))
    expect_status(located, located_exchange, 200, "GET of the Location of a new trigger")
    if json_of(located, located_exchange).get("id") != trigger_id:
        raise CheckFailed(
            f"the Location {location} does not answer trigger {trigger_id}", located_exchange
        )
    session.state["thread"] = thread_id
    session.state["created_trigger"] = first

    text, exchange = post_trigger(
        session, trigger_body(session, "text payload", kind="check.text", thread_id=thread_id,
                              payload=TEXT_PAYLOAD),
    )  # fmt: skip
    if text["thread_id"] != thread_id:
        raise CheckFailed(f"a trigger posted with thread_id {thread_id} landed elsewhere", exchange)
    again, exchange = post_trigger(
        session, trigger_body(session, "same key", thread_key=session.thread_key)
    )
    if again["thread_id"] != thread_id:
        raise CheckFailed(
            f"the second trigger with thread_key {session.thread_key!r} went to thread "
            f"{again['thread_id']}, not {thread_id}: the key made a second thread",
            exchange,
        )
    other, exchange = post_trigger(
        session, trigger_body(session, "other thread", thread_key=session.thread_key + ":other")
    )
    if other["thread_id"] == thread_id:
        raise CheckFailed("two different thread_keys share one thread", exchange)
    session.state["other_thread"] = other["thread_id"]
    session.state["triggers"] = [trigger_id, text["id"], again["id"]]


@check(
    "setup.post-worker",
    "POST /workers answers 201 with the worker; the thread's owner_workers lists it",
    rules.POST_WORKER,
    writes=True,
    setup=True,
)
def setup_post_worker(session: Session) -> None:
    thread_id = own_thread_only(session)
    body = {"thread_id": thread_id, "task": f"chainrecall check {session.run_id}: worker"}
    response, exchange = session.call("POST", "/workers", json_body=body)
    expect_status(response, exchange, 201, "POST /workers")
    worker = json_of(response, exchange)
    worker_id = expect_id(worker.get("id"), "wkr", "the worker's id", exchange)
    thread, exchange = get_record(session, thread_id)
    owners = thread.get("owner_workers")
    if not isinstance(owners, list) or worker_id not in owners:
        raise CheckFailed(
            f"the thread's owner_workers {owners!r} does not list {worker_id}", exchange
        )
    session.state["worker"] = worker_id


@check(
    "setup.report",
    "POST /workers/{id}/report stores the report; the record shows the latest and keeps "
    "the earlier one",
    rules.REPORT,
    writes=True,
    setup=True,
)
def setup_report(session: Session) -> None:
    worker_id = seed(session, "worker")
    triggers = seed(session, "triggers")
    first_summary = f"chainrecall check {session.run_id}: first report"
    latest_summary = f"chainrecall check {session.run_id}: latest report"
    for summary, refs, status in (
        (first_summary, triggers[:2], "waiting"), (latest_summary, triggers[2:], "ready"),
    ):  # fmt: skip
        body = {"summary": summary, "body": "filed by chainrecall check", "refs": refs,
                "status": status}  # fmt: skip
        response, exchange = session.call("POST", f"/workers/{worker_id}/report", json_body=body)
        expect_status(response, exchange, range(200, 300), "POST /workers/{id}/report")
    worker, exchange = get_record(session, worker_id)
    latest = worker.get("report")
    if isinstance(latest, dict) and latest.get("summary") != latest_summary:
        raise CheckFailed(
            f"the worker's report is {latest.get('summary')!r}, not the latest one filed", exchange
        )
    text = json.dumps(worker, ensure_ascii=False)
    if latest_summary not in text:
        raise CheckFailed("the worker record does not show the latest report", exchange)
    if first_summary not in text:
        raise CheckFailed("the worker record lost the earlier report", exchange)
    cited = set(find_ids(worker))
    if not set(triggers) <= cited:
        raise CheckFailed(
            f"the worker record does not cite the refs it reported: {sorted(set(triggers) - cited)}",
            exchange,
        )


# -- fetch by ID --------------------------------------------------------------------

# Fields that change by nature (API.md, Reading rule 2); every other field must not.
_MUTABLE_FIELDS = {
    "thread": {"event_count", "summary", "status", "title", "owner_workers"},
    "trigger": {"neighbours"},
    "worker": {"status", "report", "earlier_reports", "reports"},
}


def _is_mutable(kind: str, name: str) -> bool:
    return name in _MUTABLE_FIELDS[kind] or name.startswith(("last_", "updated"))


def expect_same_record(
    kind: str, first: dict[str, Any], second: dict[str, Any], exchange: Exchange, what: str
) -> None:
    if second.get("id") != first.get("id"):
        raise CheckFailed(
            f"{what}: answered {second.get('id')!r} for {first.get('id')!r}", exchange, rules.EXACT
        )
    for name in sorted(first):
        if name not in second:
            raise CheckFailed(f"{what}: the field {name!r} vanished", exchange)
        if not _is_mutable(kind, name) and first[name] != second[name]:
            raise CheckFailed(
                f"{what}: {name} changed from {first[name]!r} to {second[name]!r}"[:500], exchange
            )
    count_before, count_after = first.get("event_count"), second.get("event_count")
    if (
        isinstance(count_before, int)
        and isinstance(count_after, int)
        and count_after < count_before
    ):
        raise CheckFailed(
            f"{what}: event_count shrank from {count_before} to {count_after}", exchange
        )
    owners_before, owners_after = first.get("owner_workers"), second.get("owner_workers")
    if isinstance(owners_before, list) and isinstance(owners_after, list):
        lost = set(owners_before) - set(owners_after)
        if lost:
            raise CheckFailed(f"{what}: owner_workers lost {sorted(lost)}", exchange)


def some_id(session: Session, prefix: str) -> str:
    """An existing ID of a kind: the run's own, or one cited by the thread under test."""
    if not session.options.read_only:
        if prefix == "thr":
            return subject_thread(session)
        if prefix == "trg":
            return str(seed(session, "triggers")[0])
        return str(seed(session, "worker"))
    thread_id = subject_thread(session)
    if prefix == "thr":
        return thread_id
    if prefix == "wkr":
        thread, _ = get_record(session, thread_id)
        for owner in thread.get("owner_workers") or []:
            return str(owner)
        raise CheckSkipped(f"thread {thread_id} has no owner_workers to fetch")
    page, _ = fetch_page(session, thread_id, None, 100, rules.PAGING_COMPLETE)
    for item in page["items"]:
        if str(item["id"]).startswith("trg_"):
            return str(item["id"])
    raise CheckSkipped(f"thread {thread_id} has no trigger on its first page")


def _repeatable(kind: str, prefix: str) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        object_id = some_id(session, prefix)
        first, _ = get_record(session, object_id)
        second, exchange = get_record(session, object_id)
        expect_same_record(kind, first, second, exchange, f"{object_id} fetched twice")
        created = session.state.get("created_trigger")
        if prefix == "trg" and isinstance(created, dict) and created.get("id") == object_id:
            expect_same_record(
                kind, created, second, exchange, f"{object_id} as POST answered it and as GET does"
            )

    return run


for _kind, _prefix in (("trigger", "trg"), ("thread", "thr"), ("worker", "wkr")):
    check(
        f"fetch.{_kind}-repeatable",
        f"GET /{RESOURCE_OF_PREFIX[_prefix]}/{{id}} answers the same {_kind} each time",
        rules.REPEATABLE,
    )(_repeatable(_kind, _prefix))


@check(
    "fetch.cited-ids-resolve",
    "every ID a record cites (thread, owners, refs, neighbours, events) resolves to itself",
    rules.CITED_IDS_RESOLVE,
)
def cited_ids_resolve(session: Session) -> None:
    thread_id = subject_thread(session)
    pending: list[str] = [thread_id]
    seen_walk = walk(session, thread_id, 100, rules.PAGING_COMPLETE, only_pages=3)
    pending.extend(seen_walk.ids)
    if not session.options.read_only:
        pending.extend(seed(session, "triggers"))
        pending.append(seed(session, "worker"))
    resolved: set[str] = set()
    while pending and len(resolved) < RESOLVE_BUDGET:
        object_id = pending.pop(0)
        if object_id in resolved:
            continue
        resource = RESOURCE_OF_PREFIX[object_id.split("_", 1)[0]]
        response, exchange = session.call("GET", f"/{resource}/{object_id}")
        resolved.add(object_id)
        if response.status_code == 410:  # deleted: its ID stays retired (Reading rule 4)
            expect_problem(response, exchange, 410, f"GET /{resource}/{object_id}")
            continue
        if response.status_code != 200:
            raise CheckFailed(
                f"{object_id} was cited by a record, yet GET /{resource}/{object_id} answered "
                f"{response.status_code}",
                exchange,
            )
        record = json_of(response, exchange)
        if not isinstance(record, dict) or record.get("id") != object_id:
            raise CheckFailed(f"GET /{resource}/{object_id} answered another record", exchange)
        pending.extend(cited for cited in find_ids(record) if cited not in resolved)
    if pending:
        session.notes.append(f"resolved the first {RESOLVE_BUDGET} IDs only")


# -- unknown, malformed and wrong-kind IDs ----------------------------------------------


@dataclass(frozen=True)
class Resource:
    slug: str
    method: str
    template: str  # with {id}
    prefix: str  # the kind of ID the resource takes
    writes: bool = False


RESOURCES = [
    Resource("trigger", "GET", "/triggers/{id}", "trg"),
    Resource("trigger-payload", "GET", "/triggers/{id}/payload", "trg"),
    Resource("thread", "GET", "/threads/{id}", "thr"),
    Resource("thread-events", "GET", "/threads/{id}/events", "thr"),
    Resource("worker", "GET", "/workers/{id}", "wkr"),
    Resource("worker-report", "POST", "/workers/{id}/report", "wkr", writes=True),
]
_WRONG_KIND = {"trg": "thr", "thr": "trg", "wkr": "thr"}


def _not_found(resource: Resource, variant: str) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        if variant == "unknown":
            object_id = unknown_id(resource.prefix)
        elif variant == "malformed":
            object_id = f"not-an-id-{secrets.token_hex(3)}"
        else:
            object_id = some_id(session, _WRONG_KIND[resource.prefix])
        body = None
        if resource.method == "POST":
            body = {"summary": "chainrecall check: must not be stored", "refs": []}
        path = resource.template.format(id=object_id)
        response, exchange = session.request(resource.method, path, json_body=body)
        if response is not None and response.status_code == 200:
            raise CheckFailed(
                f"{resource.method} {path} answered 200 for a {variant} ID instead of 404",
                exchange,
            )
        expect_problem(
            response, exchange, 404, f"{resource.method} {path} ({variant} ID)", names=object_id
        )

    return run


for _resource in RESOURCES:
    for _variant, _what in (
        ("unknown", "a well-formed ID that does not exist"),
        ("malformed", "a string that is not an ID"),
        ("wrong-kind", "an existing ID of another kind"),
    ):
        check(
            f"404.{_resource.slug}.{_variant}",
            f"{_resource.method} {_resource.template} with {_what} answers 404 problem+json",
            rules.UNKNOWN_ID_404,
            writes=_resource.writes,
        )(_not_found(_resource, _variant))


# -- payloads -------------------------------------------------------------------------


@check(
    "payload.json",
    "a JSON payload comes back whole as application/json",
    rules.PAYLOAD,
)
def payload_json(session: Session) -> None:
    trigger_id = seed(session, "triggers")[0]
    response, exchange = session.call("GET", f"/triggers/{trigger_id}/payload")
    expect_status(response, exchange, 200, "GET /triggers/{id}/payload")
    if media_type(exchange.content_type) != "application/json":
        raise CheckFailed(f"a JSON payload came back as {exchange.content_type}", exchange)
    if json_of(response, exchange) != JSON_PAYLOAD:
        raise CheckFailed("the JSON payload came back changed", exchange)


@check(
    "payload.text",
    "a string payload comes back whole as text/plain; charset=utf-8",
    rules.PAYLOAD,
)
def payload_text(session: Session) -> None:
    trigger_id = seed(session, "triggers")[1]
    response, exchange = session.call("GET", f"/triggers/{trigger_id}/payload")
    expect_status(response, exchange, 200, "GET /triggers/{id}/payload")
    charset = content_type_params(exchange.content_type).get("charset")
    if media_type(exchange.content_type) != "text/plain" or charset not in {"utf-8", "utf8"}:
        raise CheckFailed(f"a string payload came back as {exchange.content_type}", exchange)
    if response.content != TEXT_PAYLOAD.encode():
        raise CheckFailed("the string payload came back changed", exchange)


# -- paging ---------------------------------------------------------------------------


def _grow_own_thread(session: Session, thread_id: str, count: int) -> list[str]:
    return [append(session, thread_id, f"paging {n}") for n in range(count)]


@check(
    "paging.walk",
    "walking with the cursor yields every event once, oldest first, at any page size",
    rules.PAGING_COMPLETE,
)
def paging_walk(session: Session) -> None:
    thread_id = subject_thread(session)
    own = not session.options.read_only
    appended = _grow_own_thread(session, thread_id, 5) if own else []
    count_before, _ = event_count(session, thread_id)
    full = walk(session, thread_id, 100, rules.PAGING_COMPLETE)
    count_after, count_exchange = event_count(session, thread_id)
    expect_once_in_order(
        full, sorted(set(full.keys), key=full.keys.index), rules.PAGING_COMPLETE,
        "walk with limit=100",
    )  # fmt: skip
    if not count_before <= len(full.items) <= count_after:
        raise CheckFailed(
            f"the walk yielded {len(full.items)} events but the thread's event_count is "
            f"{count_after}",
            count_exchange,
        )
    if own:
        mine = [event_id for event_id in full.ids if event_id in set(appended)]
        if mine != appended:
            raise CheckFailed(
                "the triggers the checker appended one after another came out in another order",
                full.last_exchange,
            )
    # The same walk in small pages must give the same sequence (on a large thread, its start).
    small = walk(session, thread_id, 2, rules.PAGING_COMPLETE, only_pages=None if own else 20)
    expected = full.keys if own else full.keys[: len(small.keys)]
    expect_once_in_order(small, expected, rules.PAGING_COMPLETE, "walk with limit=2")


@check(
    "paging.last-cursor",
    "the last page has next_cursor; later it yields exactly the events appended since",
    rules.PAGING_LAST_CURSOR,
)
def paging_last_cursor(session: Session) -> None:
    thread_id = subject_thread(session)
    full = walk(session, thread_id, 100, rules.PAGING_LAST_CURSOR)
    assert full.last_cursor is not None
    if session.options.read_only:
        later = walk(session, thread_id, 100, rules.PAGING_LAST_CURSOR, cursor=full.last_cursor)
        repeated = set(later.keys) & set(full.keys)
        if repeated:
            raise CheckFailed(
                f"the last cursor yielded {sorted(repeated)[0]} again", later.last_exchange
            )
        return
    again = walk(session, thread_id, 100, rules.PAGING_LAST_CURSOR, cursor=full.last_cursor)
    if again.items:
        raise CheckFailed(
            f"with nothing appended, the last cursor yielded {again.ids[0]}", again.last_exchange
        )
    appended = _grow_own_thread(session, thread_id, 3)
    later = walk(session, thread_id, 2, rules.PAGING_LAST_CURSOR, cursor=full.last_cursor)
    fresh = walk(session, thread_id, 100, rules.PAGING_LAST_CURSOR)
    since = fresh.keys[len(full.keys) :]
    if fresh.keys[: len(full.keys)] != full.keys or fresh.ids[len(full.ids) :] != appended:
        raise CheckFailed(
            "a fresh walk does not show the 3 appended triggers after the earlier events",
            fresh.last_exchange,
            rules.PAGING_COMPLETE,
        )
    expect_once_in_order(later, since, rules.PAGING_LAST_CURSOR, "from the last cursor")


@check(
    "paging.appends-between-pages",
    "an event appended between two pages is seen once, in order, never skipped",
    rules.PAGING_CONCURRENT,
    writes=True,
)
def paging_appends_between_pages(session: Session) -> None:
    thread_id = own_thread_only(session)
    appended: list[str] = []

    def append_one(page_number: int) -> None:
        if page_number <= 6:
            appended.append(append(session, thread_id, f"between pages {page_number}"))

    seen = walk(session, thread_id, 2, rules.PAGING_CONCURRENT, after_page=append_one)
    assert seen.last_cursor is not None
    rest = walk(session, thread_id, 2, rules.PAGING_CONCURRENT, cursor=seen.last_cursor)
    for item, exchange in zip(rest.items, rest.seen_on, strict=True):
        seen.add({"items": [item], "next_cursor": rest.last_cursor}, exchange)
    fresh = walk(session, thread_id, 100, rules.PAGING_CONCURRENT)
    expect_once_in_order(seen, fresh.keys, rules.PAGING_CONCURRENT, "walk while appending")


@check(
    "paging.concurrent-appends",
    f"walking while {CONCURRENT_WRITERS} clients append yields each event once, in order",
    rules.PAGING_CONCURRENT,
    writes=True,
)
def paging_concurrent_appends(session: Session) -> None:
    thread_id = own_thread_only(session)
    acknowledged: list[str] = []
    failures: list[CheckFailed] = []
    lock = threading.Lock()
    start = threading.Barrier(CONCURRENT_WRITERS + 1, timeout=30)
    writers_done = threading.Event()

    def write(writer: int) -> None:
        with session.new_client() as client:
            try:
                start.wait()
                for n in range(APPENDS_PER_WRITER):
                    event_id = append(session, thread_id, f"writer {writer} #{n}", client)
                    with lock:
                        acknowledged.append(event_id)
            except CheckFailed as exc:
                failures.append(exc)
            except threading.BrokenBarrierError:
                pass

    writers = [threading.Thread(target=write, args=(n,)) for n in range(CONCURRENT_WRITERS)]
    for writer in writers:
        writer.start()

    def watch() -> None:
        for writer in writers:
            writer.join(CONCURRENCY_DEADLINE_S)
        writers_done.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        start.wait()
        seen = Walk()
        cursor: str | None = None
        deadline = time.monotonic() + CONCURRENCY_DEADLINE_S
        while True:
            done_before_page = writers_done.is_set()
            page, exchange = fetch_page(session, thread_id, cursor, 3, rules.PAGING_CONCURRENT)
            seen.add(page, exchange)
            cursor = page["next_cursor"]
            if not page["has_more"]:
                if done_before_page:
                    break
                # Caught up with the writers: come back when they have written more.
                writers_done.wait(0.01)
            if time.monotonic() > deadline:
                raise CheckFailed(
                    f"the walk did not end within {CONCURRENCY_DEADLINE_S:.0f} s", exchange
                )
    finally:
        writers_done.wait(CONCURRENCY_DEADLINE_S)
        watcher.join(CONCURRENCY_DEADLINE_S)
    if failures:
        raise failures[0]
    fresh = walk(session, thread_id, 100, rules.PAGING_CONCURRENT)
    missing = set(acknowledged) - set(fresh.ids)
    if missing:
        raise CheckFailed(
            f"{len(missing)} acknowledged event(s) are not in the thread, e.g. {min(missing)}",
            fresh.last_exchange,
        )
    expect_once_in_order(
        seen, fresh.keys, rules.PAGING_CONCURRENT, "walk during concurrent appends"
    )


def _expect_bad_cursor(session: Session, thread_id: str, cursor: str, what: str) -> None:
    response, exchange = session.request("GET", events_path(thread_id), params={"cursor": cursor})
    if response is not None and response.status_code == 200:
        raise CheckFailed(f"{what} was accepted (200): a silent restart or a guess", exchange)
    expect_problem(response, exchange, 400, what)


@check(
    "paging.forged-cursor",
    "a cursor the service never issued answers 400 problem+json",
    rules.PAGING_BAD_CURSOR,
)
def paging_forged_cursor(session: Session) -> None:
    thread_id = subject_thread(session)
    for forged in ("chainrecall-check-forged", secrets.token_urlsafe(24), "0", "100"):
        _expect_bad_cursor(session, thread_id, forged, f"the forged cursor {forged!r}")


def _altered(cursor: str) -> list[str]:
    middle = len(cursor) // 2
    replacement = "A" if cursor[middle] != "A" else "B"
    changed = cursor[:middle] + replacement + cursor[middle + 1 :]
    return [changed, cursor[:-2] if len(cursor) > 4 else cursor + "AA", cursor + "x"]


@check(
    "paging.altered-cursor",
    "an issued cursor with a character changed, cut or added answers 400 problem+json",
    rules.PAGING_BAD_CURSOR,
)
def paging_altered_cursor(session: Session) -> None:
    thread_id = subject_thread(session)
    page, _ = fetch_page(session, thread_id, None, 1, rules.PAGING_COMPLETE)
    for altered in _altered(page["next_cursor"]):
        _expect_bad_cursor(session, thread_id, altered, f"the altered cursor {altered!r}")


@check(
    "paging.foreign-cursor",
    "a cursor issued for another thread answers 400 problem+json",
    rules.PAGING_BAD_CURSOR,
)
def paging_foreign_cursor(session: Session) -> None:
    thread_id = subject_thread(session)
    other = seed(session, "other_thread")
    page, _ = fetch_page(session, other, None, 1, rules.PAGING_COMPLETE)
    _expect_bad_cursor(
        session, thread_id, page["next_cursor"], f"a cursor of thread {other} on {thread_id}"
    )


@check(
    "paging.limit",
    "limit has a default, accepts 100, and a page never holds more than limit",
    rules.PAGING_LIMIT,
)
def paging_limit(session: Session) -> None:
    thread_id = subject_thread(session)
    count, _ = event_count(session, thread_id)
    if count == 0:
        raise CheckSkipped(f"thread {thread_id} has no events to page through")
    default, exchange = fetch_page(session, thread_id, None, None, rules.PAGING_LIMIT)
    if not default["items"]:
        raise CheckFailed("without limit, the first page of a non-empty thread is empty", exchange)
    fetch_page(session, thread_id, None, 100, rules.PAGING_LIMIT)
    one, exchange = fetch_page(session, thread_id, None, 1, rules.PAGING_LIMIT)
    if len(default["items"]) < 2:
        session.notes.append("the thread has one event: limit=1 splitting it was not checked")
    elif len(one["items"]) != 1 or not one["has_more"]:
        raise CheckFailed("limit=1 on a thread of several events is not one page of many", exchange)


@check(
    "paging.limit-invalid",
    "a limit out of range or not an integer answers 400 problem+json",
    rules.PAGING_LIMIT,
)
def paging_limit_invalid(session: Session) -> None:
    thread_id = subject_thread(session)
    for limit in ("0", "-1", "abc", "2.5", "1000000000"):
        response, exchange = session.request("GET", events_path(thread_id), params={"limit": limit})
        expect_problem(response, exchange, 400, f"limit={limit}")


# -- dedupe -----------------------------------------------------------------------------


@check(
    "dedupe.sequential",
    "a repeated dedupe_key answers 200 with the first record; another source is another key",
    rules.DEDUPE,
    writes=True,
)
def dedupe_sequential(session: Session) -> None:
    thread_id = own_thread_only(session)
    count_before, _ = event_count(session, thread_id)
    key = f"chainrecall-check-{session.run_id}-{secrets.token_hex(4)}"
    body = trigger_body(session, "dedupe", thread_id=thread_id, dedupe_key=key)
    first, exchange = post_trigger(session, body)
    for attempt in ("the same body", "a changed summary"):
        retry = dict(body, summary=body["summary"] + " (retry)") if "changed" in attempt else body
        response, exchange = session.call("POST", "/triggers", json_body=retry)
        expect_status(response, exchange, 200, f"a retry with {attempt} and the same dedupe_key")
        if json_of(response, exchange).get("id") != first["id"]:
            raise CheckFailed(f"a retry answered another record than {first['id']}", exchange)
    other_source = dict(body, source=SOURCE + "-other")
    other, exchange = post_trigger(session, other_source)
    if other["id"] == first["id"]:
        raise CheckFailed("the same dedupe_key from another source matched the first", exchange)
    count_after, exchange = event_count(session, thread_id)
    if count_after != count_before + 2:
        raise CheckFailed(
            f"after two new triggers and two retries event_count grew by "
            f"{count_after - count_before}, not 2",
            exchange,
        )


@check(
    "dedupe.concurrent",
    f"{CONCURRENT_RETRIES} retries at the same moment make one record: one 201, the rest 200",
    rules.DEDUPE,
    writes=True,
)
def dedupe_concurrent(session: Session) -> None:
    thread_id = own_thread_only(session)
    count_before, _ = event_count(session, thread_id)
    key = f"chainrecall-check-{session.run_id}-{secrets.token_hex(4)}"
    body = trigger_body(session, "concurrent dedupe", thread_id=thread_id, dedupe_key=key)
    answers: list[tuple[httpx.Response | None, Exchange]] = []
    lock = threading.Lock()
    start = threading.Barrier(CONCURRENT_RETRIES, timeout=30)

    def retry() -> None:
        with session.new_client() as client:
            try:
                start.wait()
            except threading.BrokenBarrierError:
                return
            answer = session.request("POST", "/triggers", json_body=body, client=client)
            with lock:
                answers.append(answer)

    retries = [threading.Thread(target=retry) for _ in range(CONCURRENT_RETRIES)]
    for thread in retries:
        thread.start()
    for thread in retries:
        thread.join(CONCURRENCY_DEADLINE_S)
    if len(answers) != CONCURRENT_RETRIES:
        raise CheckFailed(f"only {len(answers)} of {CONCURRENT_RETRIES} retries were answered")
    ids: set[str] = set()
    created = 0
    for response, exchange in answers:
        if response is None:
            raise CheckFailed("a concurrent retry got no answer", exchange)
        expect_status(response, exchange, (200, 201), "a concurrent retry")
        created += response.status_code == 201
        ids.add(str(json_of(response, exchange).get("id")))
    if len(ids) != 1 or created != 1:
        raise CheckFailed(
            f"{CONCURRENT_RETRIES} concurrent retries of one dedupe_key made {len(ids)} record(s) "
            f"with {created} answer(s) 201; expected one record, one 201",
            answers[-1][1],
        )
    count_after, exchange = event_count(session, thread_id)
    if count_after != count_before + 1:
        raise CheckFailed(
            f"the concurrent retries grew event_count by {count_after - count_before}, not 1",
            exchange,
        )


# -- writes that must be refused --------------------------------------------------------


@check(
    "write.unknown-thread-id",
    "POST /triggers with an unknown thread_id answers 422 naming it",
    rules.UNKNOWN_THREAD_422,
    writes=True,
)
def write_unknown_thread_id(session: Session) -> None:
    seed(session, "triggers")
    for thread_id in (unknown_id("thr"), seed(session, "triggers")[0]):
        body = trigger_body(session, "unknown thread", thread_id=thread_id)
        response, exchange = session.request("POST", "/triggers", json_body=body)
        expect_problem(response, exchange, 422, f"thread_id {thread_id}", names=thread_id)


@check(
    "write.report-unknown-ref",
    "a report citing an unresolvable ref answers 422 naming it and stores nothing",
    rules.REPORT_BAD_REF,
    writes=True,
)
def write_report_unknown_ref(session: Session) -> None:
    worker_id = seed(session, "worker")
    triggers = seed(session, "triggers")
    before, _ = get_record(session, worker_id)
    for bad_ref in (unknown_id("trg"), subject_thread(session)):
        body = {"summary": f"chainrecall check {session.run_id}: must not be stored",
                "body": "", "refs": [triggers[0], bad_ref], "status": "failed"}  # fmt: skip
        response, exchange = session.request("POST", f"/workers/{worker_id}/report", json_body=body)
        expect_problem(response, exchange, 422, f"a report citing {bad_ref}", names=bad_ref)
        after, get_exchange = get_record(session, worker_id)
        if after != before:
            raise CheckFailed(
                "the refused report changed the worker record (something was stored)", get_exchange
            )


def threads_by_key_supported(session: Session) -> bool:
    """Whether GET /threads?key= finds a thread by its key (not in API.md, so optional)."""
    if "threads_by_key" not in session.state:
        supported = False
        own, other = session.state.get("thread"), session.state.get("other_thread")
        answers = [
            session.request("GET", "/threads", params={"key": key})[0]
            for key in (session.thread_key, session.thread_key + ":other")
        ]
        if all(a is not None and a.status_code == 200 for a in answers):
            try:
                found = [set(find_ids(a.json())) for a in answers if a is not None]
                supported = own in found[0] and other in found[1] and own not in found[1]
            except ValueError:
                supported = False
        session.state["threads_by_key"] = supported
    return bool(session.state["threads_by_key"])


def expect_no_thread(session: Session, key: str, exchange: Exchange, what: str) -> None:
    """No thread has `key` (if the server can say so: GET /threads?key=)."""
    if not threads_by_key_supported(session):
        note = (
            "GET /threads?key= is not offered, so that no thread was created for a new "
            "thread_key was not verified"
        )
        if note not in session.notes:
            session.notes.append(note)
        return
    response, lookup = session.call("GET", "/threads", params={"key": key})
    if response.status_code == 200 and any(find_ids(json_of(response, lookup))):
        raise CheckFailed(f"{what} was refused but created a thread for {key!r}", exchange)


def _expect_refused(
    session: Session, body: bytes | dict[str, Any] | list[Any], what: str, key: str | None = None
) -> None:
    thread_id = own_thread_only(session)
    count_before, _ = event_count(session, thread_id)
    if isinstance(body, bytes):
        response, exchange = session.request(
            "POST", "/triggers", content=body, headers={"Content-Type": "application/json"}
        )
    else:
        response, exchange = session.request("POST", "/triggers", json_body=body)
    expect_problem(response, exchange, range(400, 500), what)
    count_after, _ = event_count(session, thread_id)
    if count_after != count_before:
        raise CheckFailed(f"{what} was refused but the thread grew by an event", exchange)
    if key is not None:
        expect_no_thread(session, key, exchange, what)


def _bad_bodies(session: Session, kind: str) -> Iterator[tuple[str, Any, str | None]]:
    """(what, body, new thread_key it names) for one kind of bad input, both ways of threading."""
    own = own_thread_only(session)
    for threading_by in ("thread_key", "thread_id"):
        key = session.fresh_key(kind) if threading_by == "thread_key" else None
        where = {"thread_key": key} if key else {"thread_id": own}
        good = trigger_body(session, "bad input", **where)
        if kind == "malformed-json":
            text = json.dumps(good)[:-10]
            yield f"malformed JSON ({threading_by})", text.encode(), key
        elif kind == "missing-fields":
            for missing in ("source", "kind"):
                body = {k: v for k, v in good.items() if k != missing}
                yield f"a body without {missing} ({threading_by})", body, key
        else:
            for name, value in (("source", 123), ("kind", ["check"]), ("summary", {"a": 1}),
                                ("dedupe_key", 7)):  # fmt: skip
                yield f"{name}={value!r} ({threading_by})", dict(good, **{name: value}), key
            if threading_by == "thread_id":
                yield "thread_id=42", dict(good, thread_id=42), None
                yield "a JSON array instead of an object", [good], None
    if kind == "missing-fields":
        body = trigger_body(session, "bad input")
        yield "a body with neither thread_key nor thread_id", body, None


for _kind, _title in (
    ("malformed-json", "malformed JSON"),
    ("missing-fields", "a body without a required field"),
    ("wrong-types", "fields of the wrong type"),
):

    def _run(session: Session, kind: str = _kind) -> None:
        for what, body, key in _bad_bodies(session, kind):
            _expect_refused(session, body, what, key)

    check(
        f"input.{_kind}",
        f"POST /triggers with {_title} answers 4xx problem+json and stores nothing",
        rules.BAD_INPUT,
        writes=True,
    )(_run)


@check(
    "input.worker",
    "POST /workers with bad input answers 4xx problem+json and starts no worker",
    rules.BAD_INPUT,
    writes=True,
)
def input_worker(session: Session) -> None:
    thread_id = own_thread_only(session)
    before, _ = get_record(session, thread_id)
    for what, body in (
        ("a body without task", {"thread_id": thread_id}),
        ("task=5", {"thread_id": thread_id, "task": 5}),
        ("thread_id=[...] of the wrong type", {"thread_id": {"id": thread_id}, "task": "x"}),
    ):
        response, exchange = session.request("POST", "/workers", json_body=body)
        expect_problem(response, exchange, range(400, 500), what)
        after, _ = get_record(session, thread_id)
        if after.get("owner_workers") != before.get("owner_workers"):
            raise CheckFailed(f"{what} was refused but started a worker", exchange)


@check(
    "input.report",
    "POST /workers/{id}/report with bad input answers 4xx problem+json and stores nothing",
    rules.BAD_INPUT,
    writes=True,
)
def input_report(session: Session) -> None:
    worker_id = seed(session, "worker")
    before, _ = get_record(session, worker_id)
    summary = f"chainrecall check {session.run_id}: must not be stored"
    for what, body in (
        ("a report without summary", {"body": "", "refs": []}),
        ("refs as a string", {"summary": summary, "refs": "trg_x"}),
        ("status=3", {"summary": summary, "refs": [], "status": 3}),
    ):
        response, exchange = session.request("POST", f"/workers/{worker_id}/report", json_body=body)
        expect_problem(response, exchange, range(400, 500), what)
        after, _ = get_record(session, worker_id)
        if after != before:
            raise CheckFailed(f"{what} was refused but changed the worker record", exchange)


@check(
    "input.size-limit",
    "a body one byte over the size limit answers 413 problem+json and stores nothing",
    rules.SIZE_LIMIT,
    writes=True,
)
def input_size_limit(session: Session) -> None:
    if session.options.skip_size:
        raise CheckSkipped("--skip-size")
    thread_id = own_thread_only(session)
    count_before, _ = event_count(session, thread_id)
    size = session.options.max_body_bytes + 1
    key = session.fresh_key("too-large")
    frame = json.dumps(trigger_body(session, "too large", thread_key=key, payload="")).encode()
    padding = size - len(frame)
    if padding < 0:
        raise CheckSkipped(f"a valid body is already larger than {size} bytes")
    body = frame.replace(b'"payload": ""', b'"payload": "' + b"x" * padding + b'"')
    assert len(body) == size
    response, exchange = session.request(
        "POST", "/triggers", content=body, headers={"Content-Type": "application/json"}
    )
    expect_problem(response, exchange, 413, f"a body of {size} bytes")
    count_after, _ = event_count(session, thread_id)
    if count_after != count_before:
        raise CheckFailed("the refused body still added an event", exchange)
    expect_no_thread(session, key, exchange, "the body over the limit")


# -- deletion (API.md has no delete call; checked when the server offers one) -----------


@check(
    "delete.gone",
    "a trigger deleted with DELETE /triggers/{id} answers 410 problem+json from then on",
    rules.DELETED_410,
    writes=True,
)
def delete_gone(session: Session) -> None:
    thread_id = own_thread_only(session)
    trigger_id = append(session, thread_id, "to be deleted")
    response, exchange = session.call("DELETE", f"/triggers/{trigger_id}")
    if response.status_code in (404, 405, 501):
        raise CheckSkipped(
            f"DELETE /triggers/{{id}} answered {response.status_code}: the server offers no "
            "delete call (API.md does not require one)"
        )
    if response.status_code in (401, 403):
        raise CheckSkipped("the token may not delete (DELETE answered 401/403)")
    expect_status(response, exchange, range(200, 300), "DELETE /triggers/{id}")
    for path in (f"/triggers/{trigger_id}", f"/triggers/{trigger_id}/payload"):
        gone, exchange = session.request("GET", path)
        expect_problem(gone, exchange, 410, f"GET {path} after its deletion")
    seen = walk(session, thread_id, 100, rules.PAGING_COMPLETE)
    expect_once_in_order(
        seen, sorted(set(seen.keys), key=seen.keys.index), rules.PAGING_COMPLETE,
        "walk after a deletion",
    )  # fmt: skip
    after = append(session, thread_id, "after the deletion")
    if after == trigger_id:
        raise CheckFailed(f"the deleted ID {trigger_id} was given to a new trigger", exchange)


# -- authentication -------------------------------------------------------------------


@check(
    "auth.missing-or-invalid-token",
    "with --token given, a call without it or with a wrong one answers 401 problem+json",
    rules.AUTH,
)
def auth_token(session: Session) -> None:
    if not session.token:
        raise CheckSkipped("no --token given: the deployment is taken to need none")
    path = f"/threads/{session.state.get('thread') or unknown_id('thr')}"
    for what, token in (("no token", False), ("a wrong token", "chainrecall-check-wrong")):
        with session.new_client(token=token) as client:
            response, exchange = session.request("GET", path, client=client)
        expect_problem(response, exchange, 401, f"GET {path} with {what}")
