"""The LoCoMo benchmark end to end on one tiny conversation made here, and its scoring by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import locomo


def tiny_locomo(path: Path) -> Path:
    """One conversation in LoCoMo's format: two sessions, an image turn, three questions."""
    session_1 = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Bo! I adopted a greyhound called Pixel."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats! How old is Pixel?"},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "She is four, and she loves the beach."},
        {"speaker": "Bo", "dia_id": "D1:4", "text": "I started pottery classes on Tuesdays.",
         "blip_caption": "a photo of a blue clay bowl"},
    ]  # fmt: skip
    session_2 = [
        {"speaker": "Ana", "dia_id": "D2:1", "text": "We took Pixel to Brighton last weekend."},
        {"speaker": "Bo", "dia_id": "D2:2", "text": "My bowl came out of the kiln cracked."},
        {"speaker": "Ana", "dia_id": "D2:3", "text": "Oh no! Will you glaze the next one?"},
        {"speaker": "Bo", "dia_id": "D2:4", "text": "Yes, a celadon glaze this time."},
    ]
    conversation = {
        "speaker_a": "Ana", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": session_1,
        "session_2_date_time": "10:02 am on 27 June, 2023", "session_2": session_2,
    }  # fmt: skip
    qa = [
        {"question": "What is the name of Ana's greyhound?", "answer": "Pixel",
         "evidence": ["D1:1"], "category": 4},
        {"question": "Where did Ana take her dog, and what does the dog love?",
         "answer": "Brighton; the beach", "evidence": ["D2:1", "D1:3"], "category": 1},
        {"question": "What colour was Bo's first bowl?", "answer": "blue",
         "evidence": ["D1:4", "D9:99"], "category": 2},
        {"question": "What did Ana bake?", "evidence": ["D2:3"], "category": 5,
         "adversarial_answer": "bread"},
    ]  # fmt: skip
    path.write_text(json.dumps([{"sample_id": "conv-26", "conversation": conversation, "qa": qa}]))
    return path


def test_loading_resolves_evidence_and_keeps_image_captions(tmp_path: Path) -> None:
    (conv,) = locomo.load_locomo(tiny_locomo(tmp_path / "tiny.json"))
    assert len(conv.turns) == 8 and conv.session_dates == {1: "2023-05-08", 2: "2023-06-27"}
    pottery = conv.turns[3]
    assert pottery.image_caption == "a photo of a blue clay bowl"
    assert pottery.text.endswith("[image: a photo of a blue clay bowl]")
    assert conv.turns[4].occurred_at == "2023-06-27T10:02:00Z"
    colour = conv.questions[2]
    assert colour.evidence == [3] and colour.unknown_evidence == ["D9:99"]


def test_scoring_counts_only_full_lines_of_the_evidence(tmp_path: Path) -> None:
    (conv,) = locomo.load_locomo(tiny_locomo(tmp_path / "tiny.json"))
    for i, turn in enumerate(conv.turns):
        turn.trigger_id, turn.thread_id = f"trg_{i:08d}", f"thr_{turn.session:08d}"
    question = conv.questions[1]  # evidence D2:1 (turn 4) and D1:3 (turn 2)
    whole = conv.turns[4].line
    cut = conv.turns[2].line[:-12] + "\n"  # the same turn, its text cut short
    assert locomo.score(whole + cut, conv, question) == 0.5
    assert locomo.score(whole + conv.turns[2].line, conv, question) == 1.0
    # the right words under another trigger's ID do not count
    stolen = f"trg_99999999 thr_x 2023-05-08 Ana: {conv.turns[2].text}\n"
    assert locomo.score(stolen, conv, question) == 0.0
    # packing keeps the budget and tells the turns in story order
    text = locomo.pack(conv, [4, 2, 0], len(whole) + len(conv.turns[2].line.encode()))
    assert text == conv.turns[2].line + conv.turns[4].line


def test_rank_fusion_and_neighbours_by_hand(tmp_path: Path) -> None:
    assert locomo.rrf([[1, 2, 3], [3, 1]], k=1) == [1, 3, 2]  # 1/2+1/3, 1/4+1/2, 1/3
    (conv,) = locomo.load_locomo(tiny_locomo(tmp_path / "tiny.json"))
    # turn 3 ends session 1: its next neighbour (turn 4) is in another session, so left out
    assert locomo.with_neighbours(conv, [3, 5], 1) == [3, 2, 5, 4, 6]


def test_every_strategy_runs_on_a_tiny_conversation(tmp_path: Path) -> None:
    data = tiny_locomo(tmp_path / "tiny.json")
    config = locomo.RunConfig(
        data, budgets=(256, 1024), embeddings=False, cache_dir=tmp_path, log=lambda _: None
    )
    rows, meta = locomo.run(config)
    names = {r.strategy for r in rows}
    assert names == {"keep-last", "rolling+summaries", "bm25", "bm25+neighbours",
                     "chain-of-recall", "gold-threads"}  # fmt: skip
    assert "embedding strategies off" in meta["embeddings"]
    assert all(r.bytes <= r.budget for r in rows)
    by = {(r.strategy, r.question, r.budget): r for r in rows}
    # the single-hop answer is found by search, by /recall and by the upper bound
    for name in ("bm25", "chain-of-recall", "gold-threads"):
        assert by[(name, 0, 1024)].recall == 1.0
    # at 1 KiB the whole conversation fits, so keeping the last turns finds everything too
    assert by[("keep-last", 1, 1024)].recall == 1.0
    # at 256 bytes the newest turns (session 2) cannot hold session 1's evidence
    assert by[("keep-last", 0, 256)].recall == 0.0
    recall_rows = [r for r in rows if r.strategy == "chain-of-recall"]
    assert all(r.calls == 1 and r.store_reads >= 2 for r in recall_rows)
    markdown = locomo.render(rows, meta, "python -m benchmarks.locomo --quick", None)
    assert "| chain-of-recall |" in markdown and "Category 5" in markdown


def test_main_skips_cleanly_without_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "out.md"
    assert locomo.main(["--quick", "--data", str(tmp_path / "absent.json"), "--doc", str(doc)]) == 0
    assert "LoCoMo skipped" in capsys.readouterr().err and not doc.exists()


def test_the_replay_week_is_seeded_and_its_gold_resolves() -> None:
    from benchmarks import replay

    first, again = replay.generate(3, 2, 80), replay.generate(3, 2, 80)
    assert [(i.key, i.text) for i in first.items] == [(i.key, i.text) for i in again.items]
    keys = {i.key for i in first.items}
    assert first.questions and all(set(q.evidence) <= keys for q in first.questions)
    assert {q.hops for q in first.questions} <= {1, 2, 3, 4}
    logs = [len(i.text.encode()) for i in first.items if i.source == "ci"]
    assert logs and min(logs) >= 1024 and max(logs) <= 201 * 1024
    assert first.workers and all(set(w.refs) <= keys for w in first.workers)


def test_replay_scoring_needs_the_id_and_the_start_of_the_text() -> None:
    from benchmarks import replay

    item = replay.Item("i1", 0, "ci", "check_run.completed", "ci:main", "ci",
                       "CI run 9001 on main failed\nFAILED test_x: PSP timeouts\n" + "ok\n" * 100)  # fmt: skip
    item.trigger_id = "trg_aaaaaaaa"
    # a line whose text is cut after its first 80 bytes still counts; newlines do not matter
    assert replay.found("trg_aaaaaaaa thr_b 2026-11-02 ci: " + item.text[:120], [item]) == 1.0
    assert replay.found("trg_bbbbbbbb thr_b: " + item.text, [item]) == 0.0
    assert replay.found("trg_aaaaaaaa thr_b: CI run 9001 on main", [item]) == 0.0


def test_a_tiny_replay_day_runs_every_strategy() -> None:
    from benchmarks import replay

    markdown = replay.run(5, 1, 12, "python -m benchmarks.replay --quick")
    for name in (
        "| keep-last |",
        "| chain-of-recall |",
        "| keep everything |",
        "| Chain of Recall |",
    ):
        assert name in markdown
