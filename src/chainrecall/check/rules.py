"""The rules of API.md that the checks enforce, quoted so a failure names the rule it broke.

Each constant is one rule of the contract, with the section of API.md it comes
from; a check cites one of these, and the reports print it next to a failure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    section: str
    text: str

    def __str__(self) -> str:
        return f"API.md {self.section}: {self.text}"


ID_FORM = Rule(
    "Identifiers",
    "IDs are opaque strings ^(trg|thr|wkr)_[0-9a-z_]{1,40}$, assigned by the service.",
)
EXACT = Rule(
    "Reading, rule 1 (Exact)",
    "A fetch by ID returns that one record or an error; never a different object.",
)
REPEATABLE = Rule(
    "Reading, rule 2 (Repeatable)",
    "An ID, once returned, names the same object forever: the same ID fetched twice "
    "returns the same object (fields that change by nature, such as event_count, may grow).",
)
CITED_IDS_RESOLVE = Rule(
    "Reading, rules 1-2",
    "Every ID a record cites (thread_id, owner_workers, thread_ids, report refs, "
    "neighbours, event ids) names an object that a fetch by that ID returns.",
)
UNKNOWN_ID_404 = Rule(
    "Reading, rule 3 (Unknown ID)",
    "Unknown, malformed and wrong-kind IDs answer 404 with an application/problem+json "
    "body (type, title, status, detail naming the ID, instance), on every sub-resource; "
    "never 200 with an empty object, an empty list or null.",
)
DELETED_410 = Rule(
    "Reading, rule 4 (Deleted)",
    "A deleted object answers 410 Gone with a problem body, and its ID is never given to "
    "anything else.",
)
PAYLOAD = Rule(
    "Reading, GET /triggers/{id}/payload",
    "The original payload, whole: a JSON payload as application/json, a string payload "
    "as text/plain; charset=utf-8.",
)
THREAD_RECORD = Rule(
    "Reading, GET /threads/{id}",
    "The thread record has id, key, event_count (integer) and owner_workers (list of wkr_ ids).",
)
PAGING_COMPLETE = Rule(
    "Paging, rule 1",
    "Walking from no cursor, following next_cursor until has_more is false, yields every "
    "event of the thread exactly once, in order (oldest first): no gap, no duplicate.",
)
PAGING_CONCURRENT = Rule(
    "Paging, rule 2",
    "While other clients append concurrently, an event appended during the walk is either "
    "seen once, after every event committed before it, or not yet seen; never skipped "
    "behind the cursor.",
)
PAGING_LAST_CURSOR = Rule(
    "Paging, rule 3",
    "next_cursor is present on every page, the last one too, and stays valid: coming back "
    "later with the last cursor yields exactly the events appended since.",
)
PAGING_BAD_CURSOR = Rule(
    "Paging, rule 4",
    "A cursor that was not issued by the service, was altered, or belongs to another "
    "thread answers 400 with a problem body; never a 500, never a silent restart.",
)
PAGING_LIMIT = Rule(
    "Paging, rule 5",
    "limit has a default and a maximum of at least 100; a limit out of range or not an "
    "integer is a 400.",
)
POST_TRIGGER = Rule(
    "Writing, POST /triggers",
    "Answers 201 Created, Location, and the trigger record with its thread_id; the thread "
    "of a thread_key is created on first use.",
)
DEDUPE = Rule(
    "Writing, POST /triggers (dedupe_key)",
    "The same dedupe_key again answers 200 with the first record, also when the retries "
    "arrive at the same moment: retries never make duplicates.",
)
UNKNOWN_THREAD_422 = Rule(
    "Writing, POST /triggers",
    "An unknown thread_id is a 422 naming it.",
)
POST_WORKER = Rule(
    "Writing, POST /workers",
    "Starts a worker on a thread: answers 201 with the worker record; the thread's "
    "owner_workers now lists it.",
)
REPORT = Rule(
    "Writing, POST /workers/{id}/report",
    "Stores the report (summary, body, refs, status); the record shows the latest report "
    "and keeps the earlier ones.",
)
REPORT_BAD_REF = Rule(
    "Writing, POST /workers/{id}/report",
    "A ref that does not resolve is a 422 with a problem body naming it, and stores nothing.",
)
BAD_INPUT = Rule(
    "Writing, bad input",
    "Bad input (malformed JSON, missing fields, wrong types) answers 4xx with a problem "
    "body and stores nothing (no trigger, and no thread created for a new thread_key).",
)
SIZE_LIMIT = Rule(
    "Writing, body size limit",
    "A body over the size limit (default 25 MiB) answers 413 with a problem body and "
    "stores nothing.",
)
AUTH = Rule(
    "Authentication",
    "When the database holds an API token, every call needs Authorization: Bearer; a "
    "missing or invalid token answers 401 with a problem body.",
)
