"""Properties over large spaces: paging visits every event once in order; cursors and IDs hold."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrecall import ids
from chainrecall.errors import InvalidCursor, NotFound
from chainrecall.paging import decode_cursor, encode_cursor
from chainrecall.service import Memory

_counter = itertools.count()
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(
    plan=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 7)), min_size=1, max_size=30),
)
def test_paging_interleaved_with_appends_visits_every_event_once_in_order(
    memory: Memory, plan: list[tuple[int, int]]
) -> None:
    """Appends to several threads interleave with page reads of random sizes."""
    run = next(_counter)
    expected: dict[int, list[str]] = {}
    cursors: dict[int, str | None] = {}
    seen: dict[int, list[str]] = {}
    for thread_no, page_size in plan:
        trigger, _ = memory.record_trigger(
            source="p", kind="k", thread_key=f"prop:{run}:{thread_no}", payload=page_size
        )
        expected.setdefault(thread_no, []).append(trigger.id)
        page = memory.list_events(trigger.thread_id, cursors.get(thread_no), page_size)
        seen.setdefault(thread_no, []).extend(e.id for e in page.items)
        cursors[thread_no] = page.next_cursor
    for thread_no, wanted in expected.items():
        thread = memory.find_thread(f"prop:{run}:{thread_no}")
        rest = list(memory.walk_events(thread.id, cursors[thread_no]))
        assert seen[thread_no] + [e.id for e in rest] == wanted
        assert [e.seq for e in memory.walk_events(thread.id)] == list(range(1, len(wanted) + 1))


@settings(max_examples=300)
@given(
    thread=st.from_regex(r"thr_[0-9a-z]{8}", fullmatch=True),
    seq=st.integers(0, 10**9),
    position=st.integers(0, 200),
    replacement=st.characters(codec="ascii"),
)
def test_any_altered_cursor_is_refused(
    thread: str, seq: int, position: int, replacement: str
) -> None:
    secret = b"k" * 32
    cursor = encode_cursor(secret, thread, seq)
    assert decode_cursor(secret, cursor, thread) == seq
    index = position % len(cursor)
    altered = cursor[:index] + replacement + cursor[index + 1 :]
    if altered == cursor:
        return
    try:
        decoded = decode_cursor(secret, altered, thread)
    except InvalidCursor:
        return
    # base64 has a few spare bits in its last character: an edit there may decode to the
    # very same bytes, which is the same cursor, not a forgery
    assert decoded == seq


@given(st.sampled_from(["trigger", "thread", "worker"]))
def test_new_ids_are_valid_short_and_of_their_kind(kind: ids.Kind) -> None:
    value = ids.new_id(kind)
    assert ids.is_valid(value, kind) and ids.kind_of(value) == kind
    assert re.fullmatch(r"^(trg|thr|wkr)_[0-9a-z_]{1,40}$", value) and len(value) == 12


@given(st.text(max_size=60))
def test_anything_but_a_well_formed_id_is_not_found(text: str) -> None:
    if ids.ID_PATTERN.match(text):
        return
    memory = Memory.__new__(Memory)  # no store needed: malformed IDs never reach it
    for fetch in (memory.get_trigger, memory.get_thread, memory.get_worker):
        with pytest.raises(NotFound):
            fetch(text)
