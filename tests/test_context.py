"""The context builder: inline and spill within a budget, pointers that resolve, stable prefixes."""

from __future__ import annotations

import re

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrecall.context import Budget, ContextSource, assemble, build_context, prefix_ratios
from chainrecall.context.prefix import shared_prefix_bytes, shared_prefix_ratio
from chainrecall.errors import InvalidInput, NotFound
from chainrecall.service import Memory

POINTER = re.compile(r"GET (/[^\s)]+)")
ID_IN_TEXT = re.compile(r"\b(?:trg|thr|wkr)_[0-9a-z]{8}\b")


def object_path(object_id: str) -> str:
    prefix = object_id.split("_", 1)[0]
    return {"trg": "/triggers/", "thr": "/threads/", "wkr": "/workers/"}[prefix] + object_id


def assert_everything_resolves(api: httpx.Client, context_text: str, items: list[str],
                               spilled_pointers: list[str]) -> None:  # fmt: skip
    """Every ID and every GET pointer the context names answers 200 from the live API."""
    paths = {object_path(i) for i in items}
    paths |= {object_path(i) for i in ID_IN_TEXT.findall(context_text)}
    paths |= set(POINTER.findall(context_text))
    paths |= {p.removeprefix("GET ") for p in spilled_pointers}
    for path in sorted(paths):
        answer = api.get(path)
        assert answer.status_code == 200, f"{path} answered {answer.status_code}: {answer.text}"


def payments_thread(memory: Memory) -> dict[str, str]:
    """A PR thread with a worker, a CI failure carrying a 41 KB log, and a chat thread."""
    opened = memory.record_trigger(
        source="github", kind="pull_request.opened", thread_key="github:acme/payments#412",
        thread_title="payments retry PR", summary="PR #412 opened: add retry to payment client",
        payload={"number": 412, "title": "Add retry to payment client"},
    ).trigger  # fmt: skip
    memory.record_trigger(
        source="chat", kind="message", thread_key="chat:general", thread_title="general chat",
        payload="lunch at noon?",
    )  # fmt: skip
    worker = memory.start_worker(opened.thread_id, "review PR #412 and get CI green")
    log = "".join(f"payments/test_client.py::test_{i:05d} TIMEOUT after 30s\n" for i in range(820))
    log = log[: 41 * 1024]
    failed = memory.record_trigger(
        source="ci", kind="check_run.completed", thread_id=opened.thread_id,
        summary="CI failed on PR #412: 3 of 118 tests red in payments/",
        payload=log, author="ci-bot",
    ).trigger  # fmt: skip
    memory.report(worker.id, summary="three payment timeouts; retry added", refs=[failed.id])
    return {"opened": opened.id, "failed": failed.id, "thread": opened.thread_id,
            "worker": worker.id, "log": log}  # fmt: skip


def test_a_41_kb_payload_is_spilled_behind_its_pointer_never_inline(memory: Memory) -> None:
    ids = payments_thread(memory)
    context = build_context(memory, trigger_id=ids["failed"], budget_bytes=1_000_000)
    assert len(ids["log"].encode()) == 41 * 1024
    assert context.bytes < 4096
    assert ids["log"][:1000] not in context.text
    pointer = f"GET /triggers/{ids['failed']}/payload (41 KB, truncated)"
    assert pointer in context.text
    assert pointer in [str(s) for s in context.spilled]
    assert "preview: payments/test_client.py::test_00000 TIMEOUT" in context.text


def test_a_context_has_header_index_thread_then_the_trigger_last(memory: Memory) -> None:
    ids = payments_thread(memory)
    text = build_context(memory, trigger_id=ids["failed"], budget_bytes=8000).text
    starts = [text.index(mark) for mark in
              ("# Chain of Recall", "## Threads", f"## Thread {ids['thread']}", "## Now: ")]  # fmt: skip
    assert starts == sorted(starts)
    assert text.startswith("# Chain of Recall")
    now = text[text.index("## Now: ") :]
    assert ids["failed"] in now and "ci/check_run.completed" in now and "by ci-bot" in now
    assert f"prev {ids['opened']}" in now
    thread_section = text[text.index("## Thread ") : text.index("## Now: ")]
    assert f"{ids['worker']} ready: review PR #412" in thread_section
    assert "report: three payment timeouts" in thread_section
    assert "PR #412 opened" in thread_section  # the neighbour before, inline
    assert f"{ids['thread']}: payments retry PR · open · " in text


def test_every_id_and_pointer_in_a_context_resolves_through_the_api(
    memory: Memory, api: httpx.Client
) -> None:
    ids = payments_thread(memory)
    for i in range(30):  # enough events for earlier-events and later-events pointers
        memory.record_trigger(source="chat", kind="message", thread_id=ids["thread"],
                              payload=f"comment {i}")  # fmt: skip
    for budget in (300, 900, 2500, 20_000):
        for target in ({"trigger_id": ids["failed"]}, {"thread_id": ids["thread"]}):
            context = build_context(memory, budget_bytes=budget, events_limit=6, **target)
            spilled = [s.pointer for s in context.spilled]
            assert_everything_resolves(api, context.text, context.items, spilled)
    later = build_context(memory, trigger_id=ids["failed"], budget_bytes=20_000).text
    cursor_pointer = re.search(r"later: GET (\S+) \((\d+) events after", later)
    assert cursor_pointer is not None
    page = api.get(cursor_pointer.group(1)).json()
    assert len(page["items"]) == int(cursor_pointer.group(2)) == 31  # the report, 30 comments


def test_the_budget_is_never_exceeded_and_what_is_cut_is_reported(memory: Memory) -> None:
    ids = payments_thread(memory)
    full = build_context(memory, trigger_id=ids["failed"], budget_bytes=100_000)
    for budget in range(1, full.bytes + 1, 37):
        context = build_context(memory, trigger_id=ids["failed"], budget_bytes=budget)
        assert context.bytes == len(context.text.encode()) <= budget
        if context.bytes < full.bytes:
            assert context.spilled, f"budget {budget}: something was cut and not reported"
    tiny = build_context(memory, trigger_id=ids["failed"], budget_bytes=5)
    assert tiny.text == "" and tiny.bytes == 0
    assert f"GET /triggers/{ids['failed']}" in [s.pointer for s in tiny.spilled]


def test_a_thread_context_shows_its_newest_events_and_points_at_the_earlier_ones(
    memory: Memory,
) -> None:
    ids = payments_thread(memory)
    for i in range(20):
        memory.record_trigger(source="chat", kind="message", thread_id=ids["thread"],
                              payload=f"comment number {i}")  # fmt: skip
    context = build_context(memory, thread_id=ids["thread"], budget_bytes=50_000, events_limit=8)
    assert "comment number 19" in context.text
    assert "comment number 0" not in context.text
    shown = [int(n) for n in re.findall(r"^#(\d+) ", context.text, re.M)]
    assert shown == list(range(shown[0], 25)) and 5 <= len(shown) <= 8
    earlier = f"earlier: GET /threads/{ids['thread']}/events?limit={shown[0] - 1} "
    assert earlier in context.text
    assert "## Now:" not in context.text


def test_the_json_form_holds_the_same_records_within_the_same_budget(memory: Memory) -> None:
    ids = payments_thread(memory)
    context = build_context(memory, trigger_id=ids["failed"], budget_bytes=3000, fmt="json")
    assert context.bytes <= 3000 and context.format == "json"
    doc = context.json
    assert doc["trigger"]["id"] == ids["failed"]
    assert doc["trigger"]["payload"] == f"GET /triggers/{ids['failed']}/payload (41 KB, truncated)"
    assert doc["thread"]["id"] == ids["thread"]
    by_creation = sorted(memory.list_threads(), key=lambda t: (t.created_at, t.id))
    assert [t["id"] for t in doc["threads"]] == [t.id for t in by_creation]
    squeezed = build_context(memory, trigger_id=ids["failed"], budget_bytes=700, fmt="json")
    assert squeezed.bytes <= 700 and squeezed.spilled


def test_a_small_payload_is_inline_whole(memory: Memory) -> None:
    trigger = memory.record_trigger(
        source="chat", kind="message", thread_key="chat:x", payload={"text": "deploy at 5?"}
    ).trigger
    context = build_context(memory, trigger_id=trigger.id, budget_bytes=4000)
    assert 'payload (application/json): {"text":"deploy at 5?"}' in context.text
    assert not any("payload" in s.pointer for s in context.spilled)


def test_unknown_ids_and_bad_budgets_are_refused(memory: Memory) -> None:
    ids = payments_thread(memory)
    with pytest.raises(NotFound, match="trg_zzzzzzzz"):
        build_context(memory, trigger_id="trg_zzzzzzzz", budget_bytes=100)
    with pytest.raises(NotFound, match="thr_zzzzzzzz"):
        build_context(memory, thread_id="thr_zzzzzzzz", budget_bytes=100)
    for bad in (0, -1):
        with pytest.raises(InvalidInput, match="budget_bytes"):
            build_context(memory, trigger_id=ids["failed"], budget_bytes=bad)
    with pytest.raises(InvalidInput, match="tokenizer"):
        build_context(memory, trigger_id=ids["failed"], budget_bytes=100, budget_tokens=50)
    with pytest.raises(InvalidInput, match="give trigger_id"):
        build_context(memory, budget_bytes=100)
    other = memory.find_thread("chat:general").id
    with pytest.raises(InvalidInput, match="belongs to thread"):
        build_context(memory, trigger_id=ids["failed"], thread_id=other, budget_bytes=100)


# -- property: random threads and budgets -------------------------------------------------

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ăêôơưđ.,:#0123456789", min_size=1,
                max_size=60).filter(lambda s: s.strip())  # fmt: skip
PAYLOADS = st.one_of(
    WORDS,
    st.integers(min_value=0, max_value=60_000).map(lambda n: "log line\n" * (n // 9)),
    st.dictionaries(st.sampled_from(["title", "body", "n"]), WORDS, max_size=3),
)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(
    stream=st.lists(
        st.tuples(st.integers(min_value=0, max_value=5), WORDS, PAYLOADS), min_size=1, max_size=8
    ),
    budget=st.integers(min_value=1, max_value=6000),
    fmt=st.sampled_from(["text", "json"]),
    by_thread=st.booleans(),
)
def test_random_threads_and_budgets_never_exceed_the_budget_and_always_resolve(
    memory: Memory, api: httpx.Client, stream: list[tuple[int, str, object]], budget: int,
    fmt: str, by_thread: bool,
) -> None:  # fmt: skip
    last = None
    for thread_number, summary, payload in stream:
        last = memory.record_trigger(
            source="chat", kind="message", thread_key=f"chat:topic-{thread_number}",
            thread_title=f"topic {thread_number}: {summary}", summary=summary, payload=payload,
        ).trigger  # fmt: skip
    assert last is not None
    target = {"thread_id": last.thread_id} if by_thread else {"trigger_id": last.id}
    context = build_context(memory, budget_bytes=budget, fmt="json" if fmt == "json" else "text",
                            **target)  # fmt: skip
    assert context.bytes == len(context.text.encode("utf-8")) <= budget
    assert last.id in context.items or any(
        last.id in s.pointer or last.thread_id in s.pointer for s in context.spilled
    )
    assert_everything_resolves(api, context.text, context.items,
                               [s.pointer for s in context.spilled])  # fmt: skip
    if isinstance(payload, str) and len(payload) > 1000:
        assert payload[:600] not in context.text


# -- prefix stability ---------------------------------------------------------------------


def test_shared_prefix_is_measured_in_bytes() -> None:
    assert shared_prefix_bytes("ăbc", "ăbd") == 3  # ă is two bytes
    assert shared_prefix_ratio("abcd", "abxy") == 0.5
    assert shared_prefix_ratio("", "") == 1.0
    assert prefix_ratios(["a", "ab", "xb"]) == [0.5, 0.0]


def replay_stream(memory: Memory, turns: int) -> tuple[list[str], list[str]]:
    """Record a stream one trigger at a time and build the context after each; answer the
    contexts and the thread of each turn."""
    texts, threads = [], []
    for turn in range(turns):
        # A new topic opens every 3rd turn, and older ones keep getting messages.
        topic = turn // 3 if turn % 3 == 0 else (turn * 7) % (turn // 3 + 1)
        trigger = memory.record_trigger(
            source="chat", kind="message", thread_key=f"chat:topic-{topic}",
            thread_title=f"topic {topic}: release planning and CI follow-ups",
            payload=f"message {turn} on topic {topic}: " + "details " * 20,
        ).trigger  # fmt: skip
        threads.append(trigger.thread_id)
        texts.append(build_context(memory, trigger_id=trigger.id, budget_bytes=16_000).text)
    return texts, threads


def index_of(text: str) -> list[str]:
    return text[: text.index("## Thread ")].splitlines()[2:]


def most_recent_first(text: str, touched: list[str]) -> str:
    """The same context with its index ordered by recent activity (what a builder that
    sorted by recency would send): the control for the prefix measurement."""
    lines = index_of(text)
    recency: dict[str, int] = {}
    for thread_id in reversed(touched):
        recency.setdefault(thread_id, len(recency))
    lines.sort(key=lambda line: recency[line.split(":", 1)[0]])
    head = text.splitlines()[:2]
    return "\n".join([*head, *lines]) + "\n" + text[text.index("## Thread ") :]


def test_consecutive_contexts_share_a_long_prefix(memory: Memory) -> None:
    texts, threads = replay_stream(memory, 48)
    for i in range(1, len(texts)):
        before, after = texts[i - 1], texts[i]
        if threads[i] in threads[:i]:
            # No new thread: header and index are byte for byte the same.
            assert after.startswith(before[: before.index("## Thread ")]), f"turn {i}"
        else:
            # A new thread adds a line; the lines already there keep their order.
            kept = [line for line in index_of(after) if line in index_of(before)]
            assert kept == index_of(before), f"turn {i}: index lines moved"
    ratios = prefix_ratios(texts)
    control = prefix_ratios(
        [most_recent_first(text, threads[: i + 1]) for i, text in enumerate(texts)]
    )
    late, late_control = ratios[24:], control[24:]  # once the index holds a dozen threads
    mean, mean_control = sum(late) / len(late), sum(late_control) / len(late_control)
    assert mean >= 0.4, f"mean shared prefix {mean:.2f}"
    assert mean >= 2 * mean_control, f"{mean:.2f} vs {mean_control:.2f} ordered by recency"


def test_assemble_is_pure_and_needs_a_tokenizer_for_a_token_budget() -> None:
    empty = ContextSource(threads=[], more_threads=False)
    context = assemble(empty, Budget(bytes=1000))
    assert context.text.startswith("# Chain of Recall") and context.items == []
    with pytest.raises(ValueError, match="tokenizer"):
        assemble(empty, Budget(bytes=1000, tokens=10))
