"""LoCoMo, retrieval only: how much of each question's evidence each strategy fits in B bytes.

This module owns the LoCoMo replay and its scoring. Each conversation of
`shared/bench/locomo/locomo10.json` (never copied into the repository) is
replayed into a fresh SQLite store through the public HTTP ingest path: a
`chainrecall serve` child on a loopback port, `POST /triggers/batch` with one
trigger per turn (text payload, `author` = speaker, `occurred_at` = session
date, `dedupe_key` = dia_id, thread_key `<sample_id>:session_N`). An image
turn's caption is part of its text (`text [image: caption]`) and also kept as
its own field of the replayed turn. Then, for every question and every budget
B, each strategy assembles a context of at most B bytes of UTF-8, and the
score is the fraction of the question's evidence turns whose line (trigger ID
and full text) is inside. Every strategy packs the same line format
(`trg_ thr_ date speaker: text`), so per-item overhead is equal; only the
labelled gold-thread upper bound reads the gold evidence. Chain of Recall is
exactly `GET /recall?q=&budget_bytes=` against the same server.

Run: `python -m benchmarks.locomo [--quick] [--data PATH]`; writes
docs/benchmarks-recall.md (its LoCoMo section), docs/img/locomo-recall.png and
bench-out/locomo.json.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from chainrecall.store.base import search_terms

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo" / "locomo10.json"
OUT_DIR = REPO / "bench-out"
DOC = REPO / "docs" / "benchmarks-recall.md"
IMG = REPO / "docs" / "img" / "locomo-recall.png"
BUDGETS = (2048, 4096, 8192, 16384)
TUNE = ("conv-26", "conv-30")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RRF_K = 60
NEIGHBOUR_WINDOWS = (1, 2, 3)  # the one knob of the neighbour baselines, tuned on TUNE
SUMMARY_SHARE = 0.25  # rolling window + summaries: at most this share goes to session summaries
REFERENCE_8K = {  # figures measured before this module, quoted by the issue (categories 1-4)
    "keep-last": 0.075, "bm25": 0.680, "bm25+neighbours": 0.767, "dense": 0.710,
    "hybrid-rrf": 0.778, "gold-threads": 0.975,
}  # fmt: skip

_EVIDENCE = re.compile(r"D(\d+):(\d+)")


# -- data --------------------------------------------------------------------------


@dataclass
class Turn:
    index: int  # position in the whole conversation
    session: int
    dia_id: str
    speaker: str
    text: str  # what is stored and scored: the turn's words plus its image caption
    image_caption: str | None
    occurred_at: str
    trigger_id: str = ""
    thread_id: str = ""

    @property
    def line(self) -> str:
        """The one line every strategy packs for this turn (the same format /recall uses)."""
        return f"{self.trigger_id} {self.thread_id} {self.occurred_at[:10]} {self.speaker}: {self.text}\n"


@dataclass
class Question:
    sample_id: str
    number: int
    text: str
    category: int
    evidence: list[int]  # turn indexes
    unknown_evidence: list[str]  # dia ids the data set cites that no turn carries


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    session_dates: dict[int, str]

    def session_turns(self, session: int) -> list[Turn]:
        return [t for t in self.turns if t.session == session]


def parse_session_date(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> a datetime (UTC is assumed: the data set gives no zone)."""
    cleaned = " ".join(value.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y"):
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {value!r}")


def turn_text(raw: dict[str, Any]) -> tuple[str, str | None]:
    caption = raw.get("blip_caption")
    text = str(raw.get("text", "")).strip()
    if caption:
        return f"{text} [image: {caption}]".strip(), str(caption)
    return text, None


def load_locomo(path: Path) -> list[Conversation]:
    """Every conversation with its turns and questions; evidence resolved to turn indexes."""
    raw_all = json.loads(path.read_text(encoding="utf-8"))
    conversations: list[Conversation] = []
    for raw in raw_all:
        conv = raw["conversation"]
        sessions = sorted(
            int(k.split("_")[1])
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
        )
        turns: list[Turn] = []
        dates: dict[int, str] = {}
        for session in sessions:
            start = parse_session_date(conv[f"session_{session}_date_time"])
            dates[session] = start.strftime("%Y-%m-%d")
            for offset, item in enumerate(conv[f"session_{session}"]):
                text, caption = turn_text(item)
                when = (start + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")
                turns.append(
                    Turn(len(turns), session, item["dia_id"], item["speaker"], text, caption, when)
                )
        by_dia = {t.dia_id: t.index for t in turns}
        questions: list[Question] = []
        for number, qa in enumerate(raw["qa"]):
            cited = [f"D{s}:{n}" for s, n in _EVIDENCE.findall(" ".join(map(str, qa["evidence"])))]
            cited = list(dict.fromkeys(cited))
            questions.append(
                Question(
                    raw["sample_id"], number, str(qa["question"]), int(qa["category"]),
                    [by_dia[d] for d in cited if d in by_dia],
                    [d for d in cited if d not in by_dia],
                )
            )  # fmt: skip
        conversations.append(Conversation(raw["sample_id"], turns, questions, dates))
    return conversations


# -- replay through the public ingest path ----------------------------------------------


def replay(conv: Conversation, client: httpx.Client) -> float:
    """POST every turn to /triggers/batch (one batch per session); returns seconds taken."""
    started = time.perf_counter()
    sessions = sorted({t.session for t in conv.turns})
    for session in sessions:
        turns = conv.session_turns(session)
        items = [
            {
                "source": "locomo", "kind": "chat.message",
                "thread_key": f"{conv.sample_id}:session_{session}",
                "thread_title": f"{conv.sample_id} session {session} ({conv.session_dates[session]})",
                "payload": t.text, "author": t.speaker, "occurred_at": t.occurred_at,
                "dedupe_key": f"{conv.sample_id}:{t.dia_id}",
            }
            for t in turns
        ]  # fmt: skip
        response = client.post("/triggers/batch", json={"items": items})
        if response.status_code not in (200, 201):
            raise RuntimeError(
                f"ingest of {conv.sample_id} session {session} failed: {response.text}"
            )
        for turn, answer in zip(turns, response.json()["items"], strict=True):
            trigger = answer.get("trigger", answer)
            turn.trigger_id, turn.thread_id = trigger["id"], trigger["thread_id"]
    return time.perf_counter() - started


# -- scoring -----------------------------------------------------------------------------


def evidence_found(context: str, turns: Sequence[Turn]) -> int:
    """How many of `turns` have a line in `context` holding both their ID and their full text."""
    found = 0
    lines_by_id: dict[str, list[str]] = defaultdict(list)
    for line in context.splitlines():
        for token in line.split(" ", 2)[:2]:
            if token.startswith("trg_"):
                lines_by_id[token].append(line)
    for turn in turns:
        if any(turn.text in line for line in lines_by_id.get(turn.trigger_id, ())):
            found += 1
    return found


def score(context: str, conv: Conversation, question: Question) -> float:
    gold = [conv.turns[i] for i in question.evidence]
    return evidence_found(context, gold) / len(gold) if gold else 0.0


# -- strategies ----------------------------------------------------------------------------


@dataclass
class Context:
    text: str
    hops: int = 0
    calls: int = 1  # requests the agent makes to memory to build it
    store_reads: int = 1  # reads inside the memory service (recall reports its own)


def pack(conv: Conversation, order: Iterable[int], budget: int) -> str:
    """Lines of the turns in `order` (best first) that fit in `budget`, told in story order."""
    used = 0
    chosen: list[int] = []
    seen: set[int] = set()
    for index in order:
        if index in seen:
            continue
        seen.add(index)
        size = len(conv.turns[index].line.encode("utf-8"))
        if used + size <= budget:
            used += size
            chosen.append(index)
        if budget - used < 64:
            break
    return "".join(conv.turns[i].line for i in sorted(chosen))


def with_neighbours(conv: Conversation, ranking: Sequence[int], window: int) -> list[int]:
    """Each hit followed by its neighbours in the same session, nearest first."""
    order: list[int] = []
    for index in ranking:
        order.append(index)
        session = conv.turns[index].session
        for step in range(1, window + 1):
            for j in (index - step, index + step):
                if 0 <= j < len(conv.turns) and conv.turns[j].session == session:
                    order.append(j)
    return order


class BM25Index:
    """SQLite FTS5 BM25 (porter stemming, the store's own tokenizer) over one conversation."""

    def __init__(self, conv: Conversation) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5(body, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self.db.executemany(
            "INSERT INTO turns (rowid, body) VALUES (?, ?)",
            [(t.index, f"{t.speaker} {t.text}") for t in conv.turns],
        )

    def rank(self, query: str) -> list[int]:
        terms = search_terms(query)
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rows = self.db.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns)", (match,)
        ).fetchall()
        return [int(r[0]) for r in rows]


@dataclass
class Prepared:
    """What the baselines precompute per conversation (an index a client would hold)."""

    conv: Conversation
    bm25: BM25Index
    dense: Any = None  # numpy matrix of turn vectors, or None without the embed extra
    question_vectors: dict[int, Any] = field(default_factory=dict)
    summaries: dict[int, str] = field(default_factory=dict)


Assemble = Callable[[Prepared, Question, int], Context]


@dataclass
class Strategy:
    name: str
    label: str
    assemble: Assemble
    needs_embeddings: bool = False
    reads_gold: bool = False


def keep_last(prep: Prepared, question: Question, budget: int) -> Context:
    conv = prep.conv
    used, start = 0, len(conv.turns)
    while start > 0:
        size = len(conv.turns[start - 1].line.encode("utf-8"))
        if used + size > budget:
            break
        used += size
        start -= 1
    return Context("".join(t.line for t in conv.turns[start:]), calls=1)


def session_summary(conv: Conversation, session: int, idf: dict[str, float]) -> str:
    """Model-free: the session's date, speakers and its 6 highest TF-IDF words."""
    counts: dict[str, int] = defaultdict(int)
    for turn in conv.session_turns(session):
        for word in search_terms(turn.text, max_terms=1000):
            if len(word) > 3 and not word.isdigit():
                counts[word] += 1
    top = sorted(counts, key=lambda w: (-counts[w] * idf.get(w, 0.0), w))[:6]
    speakers = sorted({t.speaker for t in conv.session_turns(session)})
    return (
        f"session {session} {conv.session_dates[session]} ({' & '.join(speakers)}): "
        f"{', '.join(top)}\n"
    )


def session_idf(conv: Conversation) -> dict[str, float]:
    sessions = sorted(conv.session_dates)
    df: dict[str, int] = defaultdict(int)
    for session in sessions:
        text = " ".join(t.text for t in conv.session_turns(session))
        for word in set(search_terms(text, max_terms=100_000)):
            df[word] += 1
    return {w: math.log(len(sessions) / n) + 0.1 for w, n in df.items()}


def rolling_with_summaries(prep: Prepared, question: Question, budget: int) -> Context:
    conv = prep.conv
    sessions = sorted(conv.session_dates)
    if not prep.summaries:  # the same for every question: made once per conversation
        idf = session_idf(conv)
        prep.summaries = {s: session_summary(conv, s, idf) for s in sessions}
    summary_room = int(budget * SUMMARY_SHARE)
    # Newest turns first; summaries for the sessions the window does not reach, newest first.
    window = keep_last(prep, question, budget - summary_room).text
    reached = {t.session for t in conv.turns if t.line in window}
    lines: list[str] = []
    used = 0
    for session in reversed(sessions):
        if session in reached:
            continue
        line = prep.summaries[session]
        if used + len(line.encode("utf-8")) > summary_room:
            break
        lines.append(line)
        used += len(line.encode("utf-8"))
    return Context("".join(reversed(lines)) + window, calls=1)


def bm25_top(prep: Prepared, question: Question, budget: int) -> Context:
    return Context(pack(prep.conv, prep.bm25.rank(question.text), budget))


def make_bm25_neighbours(window: int) -> Assemble:
    def assemble(prep: Prepared, question: Question, budget: int) -> Context:
        order = with_neighbours(prep.conv, prep.bm25.rank(question.text), window)
        return Context(pack(prep.conv, order, budget), hops=1)

    return assemble


def dense_ranking(prep: Prepared, question: Question) -> list[int]:
    import numpy as np

    scores = prep.dense @ prep.question_vectors[question.number]
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def dense_top(prep: Prepared, question: Question, budget: int) -> Context:
    return Context(pack(prep.conv, dense_ranking(prep, question), budget))


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    fused: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, index in enumerate(ranking):
            fused[index] += 1.0 / (k + rank + 1)
    return sorted(fused, key=lambda i: (-fused[i], i))


def hybrid(prep: Prepared, question: Question, budget: int) -> Context:
    fused = rrf([prep.bm25.rank(question.text), dense_ranking(prep, question)])
    return Context(pack(prep.conv, fused, budget))


def make_hybrid_neighbours(window: int) -> Assemble:
    def assemble(prep: Prepared, question: Question, budget: int) -> Context:
        fused = rrf([prep.bm25.rank(question.text), dense_ranking(prep, question)])
        return Context(pack(prep.conv, with_neighbours(prep.conv, fused, window), budget), hops=1)

    return assemble


def gold_threads(prep: Prepared, question: Question, budget: int) -> Context:
    """Upper bound, reads the gold evidence: only its sessions, BM25 order, then story order."""
    conv = prep.conv
    sessions = {conv.turns[i].session for i in question.evidence}
    inside = [t.index for t in conv.turns if t.session in sessions]
    ranked = [i for i in prep.bm25.rank(question.text) if conv.turns[i].session in sessions]
    return Context(pack(conv, [*ranked, *inside], budget))


def make_chain_of_recall(client: httpx.Client | None) -> Assemble:
    def assemble(prep: Prepared, question: Question, budget: int) -> Context:
        if client is None:
            raise RuntimeError("Chain of Recall needs a server to ask")
        response = client.get("/recall", params={"q": question.text, "budget_bytes": budget})
        if response.status_code != 200:
            raise RuntimeError(f"GET /recall answered {response.status_code}: {response.text}")
        body = response.json()
        if body["bytes"] > budget or len(body["text"].encode("utf-8")) > budget:
            raise AssertionError(f"/recall exceeded its budget of {budget} bytes")
        return Context(
            body["text"], hops=int(body["hops"]), calls=1, store_reads=int(body["calls"])
        )

    return assemble


def strategies(client: httpx.Client | None, windows: dict[str, int]) -> list[Strategy]:
    return [
        Strategy("keep-last", "the newest turns that fit", keep_last),
        Strategy(
            "rolling+summaries",
            f"newest turns, plus at most {int(SUMMARY_SHARE * 100)}% of the budget for "
            "per-session summaries made without a model (date, speakers, top-6 TF-IDF words)",
            rolling_with_summaries,
        ),
        Strategy("bm25", "SQLite FTS5 BM25 (porter), top hits that fit", bm25_top),
        Strategy(
            "bm25+neighbours",
            f"each BM25 hit followed by its ±{windows['bm25+neighbours']} neighbours in the session",
            make_bm25_neighbours(windows["bm25+neighbours"]),
        ),
        Strategy("dense", "MiniLM-L6 cosine top hits", dense_top, needs_embeddings=True),
        Strategy(
            "hybrid-rrf",
            f"reciprocal rank fusion (k={RRF_K}) of BM25 and MiniLM",
            hybrid,
            needs_embeddings=True,
        ),
        Strategy(
            "hybrid+neighbours",
            f"RRF hits each followed by ±{windows['hybrid+neighbours']} neighbours",
            make_hybrid_neighbours(windows["hybrid+neighbours"]),
            needs_embeddings=True,
        ),
        Strategy(
            "chain-of-recall",
            "GET /recall?q=&budget_bytes= over HTTP (this project)",
            make_chain_of_recall(client),
        ),
        Strategy(
            "gold-threads",
            "UPPER BOUND, reads gold evidence: only the evidence sessions",
            gold_threads,
            reads_gold=True,
        ),
    ]


# -- running -----------------------------------------------------------------------------------


@dataclass
class Row:
    """One question under one strategy at one budget."""

    sample_id: str
    question: int
    category: int
    strategy: str
    budget: int
    recall: float
    bytes: int
    hops: int
    calls: int
    store_reads: int
    ms: float


@dataclass
class RunConfig:
    data: Path
    budgets: tuple[int, ...] = BUDGETS
    only: tuple[str, ...] = ()  # sample ids; empty: all
    max_questions: int | None = None  # per conversation, for quick runs
    embeddings: bool = True
    cache_dir: Path = OUT_DIR / "cache"
    strategy_names: tuple[str, ...] = ()  # empty: all
    log: Callable[[str], None] = print


def load_embedder(config: RunConfig) -> tuple[Any, str]:
    if not config.embeddings:
        return None, "embedding strategies off (--no-embed)"
    try:
        from benchmarks.embedding import MODEL_NAME, EmbeddingUnavailable, MiniLM
    except ImportError as exc:  # numpy itself is missing
        return None, f"embedding strategies skipped: {exc}"
    try:
        return MiniLM(config.cache_dir), f"embeddings: {MODEL_NAME}"
    except EmbeddingUnavailable as exc:
        return None, f"embedding strategies skipped: {exc}"


def tune_windows(
    conversations: list[Conversation], config: RunConfig, embedder: Any
) -> dict[str, int]:
    """The neighbour window of the two neighbour baselines, chosen on the tuning conversations."""
    chosen = {"bm25+neighbours": 1, "hybrid+neighbours": 1}
    tune = [c for c in conversations if c.sample_id in TUNE]
    if not tune:
        return chosen
    for name in chosen:
        if name.startswith("hybrid") and embedder is None:
            continue
        best = -1.0
        for window in NEIGHBOUR_WINDOWS:
            assemble = (
                make_bm25_neighbours if name.startswith("bm25") else make_hybrid_neighbours
            )(window)
            values: list[float] = []
            for conv in tune:
                prep = prepare(conv, embedder)
                for q in conv.questions:
                    if q.category in (1, 2, 3, 4) and q.evidence:
                        for budget in config.budgets:
                            values.append(score(assemble(prep, q, budget).text, conv, q))
            mean = statistics.fmean(values) if values else 0.0
            if mean > best:
                best, chosen[name] = mean, window
    return chosen


def prepare(conv: Conversation, embedder: Any) -> Prepared:
    prep = Prepared(conv, BM25Index(conv))
    if embedder is not None:
        embedder.load_cache(conv.sample_id)
        texts = [f"{t.speaker}: {t.text}" for t in conv.turns]
        prep.dense = embedder.encode(texts)
        vectors = embedder.encode([q.text for q in conv.questions])
        prep.question_vectors = {q.number: vectors[i] for i, q in enumerate(conv.questions)}
        embedder.save_cache(conv.sample_id, texts + [q.text for q in conv.questions])
    return prep


def run(config: RunConfig) -> tuple[list[Row], dict[str, Any]]:
    conversations = load_locomo(config.data)
    if config.only:
        conversations = [c for c in conversations if c.sample_id in config.only]
    if config.max_questions is not None:
        for conv in conversations:
            conv.questions = conv.questions[: config.max_questions]
    embedder, embed_note = load_embedder(config)
    config.log(embed_note)
    rows: list[Row] = []
    meta: dict[str, Any] = {"embeddings": embed_note, "ingest_s": {}, "unknown_evidence": 0}
    windows = {"bm25+neighbours": 1, "hybrid+neighbours": 1}
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp, ExitStack() as stack:
        from benchmarks.common import chainrecall_server

        clients: dict[str, httpx.Client] = {}
        for conv in conversations:  # one server and store per conversation, kept for the run
            server = stack.enter_context(
                chainrecall_server(str(Path(tmp) / f"{conv.sample_id}.db"))
            )
            client = stack.enter_context(httpx.Client(base_url=server.url, timeout=60))
            clients[conv.sample_id] = client
            meta["ingest_s"][conv.sample_id] = round(replay(conv, client), 2)
        # Tuning needs trigger IDs (the line format), so it runs after every replay.
        windows = tune_windows(conversations, config, embedder)
        meta["windows"] = windows
        config.log(f"neighbour windows tuned on {', '.join(TUNE)}: {windows}")
        for conv in conversations:
            prep = prepare(conv, embedder)
            for strategy in strategies(clients[conv.sample_id], windows):
                if config.strategy_names and strategy.name not in config.strategy_names:
                    continue
                if strategy.needs_embeddings and embedder is None:
                    continue
                started = time.perf_counter()
                for question in conv.questions:
                    if not question.evidence:
                        continue
                    for budget in config.budgets:
                        t0 = time.perf_counter()
                        ctx = strategy.assemble(prep, question, budget)
                        ms = (time.perf_counter() - t0) * 1000
                        size = len(ctx.text.encode("utf-8"))
                        if size > budget:
                            raise AssertionError(f"{strategy.name} sent {size} > {budget} bytes")
                        rows.append(
                            Row(conv.sample_id, question.number, question.category,
                                strategy.name, budget, score(ctx.text, conv, question), size,
                                ctx.hops, ctx.calls, ctx.store_reads, ms)
                        )  # fmt: skip
                config.log(
                    f"{conv.sample_id} {strategy.name}: {time.perf_counter() - started:.1f} s"
                )
    meta["unknown_evidence"] = sum(
        len(q.unknown_evidence) for c in conversations for q in c.questions
    )
    meta["labels"] = {s.name: s.label for s in strategies(None, windows)}
    meta["conversations"] = [c.sample_id for c in conversations]
    meta["questions"] = {
        c.sample_id: sum(1 for q in c.questions if q.evidence) for c in conversations
    }
    return rows, meta


# -- report --------------------------------------------------------------------------------------


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else float("nan")


def split_of(sample_id: str) -> str:
    return "tune" if sample_id in TUNE else "held-out"


def order_of(rows: list[Row]) -> list[str]:
    return list(dict.fromkeys(r.strategy for r in rows))


def recall_table(rows: list[Row], split: str, categories: tuple[int, ...]) -> str:
    budgets = sorted({r.budget for r in rows})
    picked = [r for r in rows if split_of(r.sample_id) == split and r.category in categories]
    if not picked:
        return "(no questions in this split)\n"
    head = "| strategy | " + " | ".join(f"{b // 1024} KiB" for b in budgets) + " |"
    lines = [head, "|---|" + "---|" * len(budgets)]
    best_other: dict[int, float] = {}
    for budget in budgets:
        others = [
            mean(r.recall for r in picked if r.strategy == s and r.budget == budget)
            for s in order_of(picked)
            if s not in ("chain-of-recall", "gold-threads")
        ]
        best_other[budget] = max(others, default=float("nan"))
    for name in order_of(picked):
        cells = []
        for budget in budgets:
            value = mean(r.recall for r in picked if r.strategy == name and r.budget == budget)
            mark = ""
            if name == "chain-of-recall":
                mark = " ✓" if value > best_other[budget] else " ✗"
            cells.append(f"{value:.3f}{mark}")
        label = f"{name} (upper bound)" if name == "gold-threads" else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def category_table(rows: list[Row], split: str, budget: int) -> str:
    picked = [r for r in rows if split_of(r.sample_id) == split and r.budget == budget]
    cats = sorted({r.category for r in picked})
    lines = [
        "| strategy | " + " | ".join(f"{c} {CATEGORIES[c]}" for c in cats)
        + " | bytes sent | hops | calls | store reads | ms/question |",
        "|---|" + "---|" * (len(cats) + 5),
    ]  # fmt: skip
    for name in order_of(picked):
        mine = [r for r in picked if r.strategy == name]
        core = [r for r in mine if r.category != 5]
        cells = [f"{mean(r.recall for r in mine if r.category == c):.3f}" for c in cats]
        lines.append(
            f"| {name} | " + " | ".join(cells)
            + f" | {mean(r.bytes for r in core):.0f} | {mean(r.hops for r in core):.1f}"
            f" | {mean(r.calls for r in core):.1f} | {mean(r.store_reads for r in core):.0f}"
            f" | {mean(r.ms for r in core):.1f} |"
        )  # fmt: skip
    return "\n".join(lines) + "\n"


def losses(rows: list[Row]) -> list[str]:
    """Every (split, budget, category) where Chain of Recall is not above the best baseline."""
    out: list[str] = []
    for split in ("held-out", "tune"):
        for budget in sorted({r.budget for r in rows}):
            for category in (1, 2, 3, 4, 5):
                cell = [
                    r for r in rows
                    if split_of(r.sample_id) == split and r.budget == budget and r.category == category
                ]  # fmt: skip
                if not cell:
                    continue
                ours = mean(r.recall for r in cell if r.strategy == "chain-of-recall")
                others = {
                    name: mean(r.recall for r in cell if r.strategy == name)
                    for name in order_of(cell)
                    if name not in ("chain-of-recall", "gold-threads")
                }
                if not others or ours != ours:  # nothing to compare, or not run
                    continue
                best = max(others, key=lambda n: others[n])
                if ours <= others[best]:
                    out.append(
                        f"{split}, {budget // 1024} KiB, category {category} ({CATEGORIES[category]}): "
                        f"chain-of-recall {ours:.3f} vs {best} {others[best]:.3f}"
                    )
    return out


def plot(rows: list[Row], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install 'chainrecall[bench]')"
    picked = [r for r in rows if split_of(r.sample_id) == "held-out" and r.category != 5]
    if not picked:
        picked = [r for r in rows if r.category != 5]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in order_of(picked):
        budgets = sorted({r.budget for r in picked if r.strategy == name})
        xs = [
            mean(r.bytes for r in picked if r.strategy == name and r.budget == b) for b in budgets
        ]
        ys = [
            mean(r.recall for r in picked if r.strategy == name and r.budget == b) for b in budgets
        ]
        style = "-o" if name == "chain-of-recall" else ("--" if name == "gold-threads" else "-")
        ax.plot(xs, ys, style, label=name, linewidth=2.5 if name == "chain-of-recall" else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes sent per question (mean)")
    ax.set_ylabel("evidence recall (categories 1-4)")
    ax.set_title("LoCoMo: evidence recall against bytes sent")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def render(rows: list[Row], meta: dict[str, Any], command: str, image: Path | None) -> str:
    n_tune = sum(v for k, v in meta["questions"].items() if k in TUNE)
    n_held = sum(v for k, v in meta["questions"].items() if k not in TUNE)
    parts = [
        "## LoCoMo: evidence recall within a byte budget",
        "",
        f"Rerun: `{command}`",
        "",
        "Each of the LoCoMo conversations is replayed through `POST /triggers/batch` into a "
        "fresh SQLite store served by `chainrecall serve` on a loopback port (one thread per "
        "session, one trigger per turn; image captions appended to the turn text). For every "
        "question, each strategy packs at most B bytes of UTF-8; the score is the fraction of "
        "the question's evidence turns whose line (trigger ID and full text) is inside. "
        "Every strategy packs the same line format `trg_ thr_ date speaker: text`. "
        "Chain of Recall is one `GET /recall` per question over HTTP. Only `gold-threads` "
        "reads the gold evidence (upper bound). No strategy reads the data set's "
        "model-written `observation` or summaries; methods that do are not run here. "
        f"Tuned only on {' and '.join(TUNE)} ({n_tune} questions with evidence); "
        f"the other conversations ({n_held} questions) are held out. {meta['embeddings']}.",
        "",
        "### Categories 1-4, held-out conversations",
        "",
        "✓/✗: Chain of Recall above / not above the best non-gold strategy at that budget.",
        "",
        recall_table(rows, "held-out", (1, 2, 3, 4)),
        "### Categories 1-4, tuning conversations (conv-26, conv-30)",
        "",
        recall_table(rows, "tune", (1, 2, 3, 4)),
    ]
    for split in ("held-out", "tune"):
        for budget in sorted({r.budget for r in rows}):
            if (budget != 8192 and split == "tune") or not any(
                split_of(r.sample_id) == split for r in rows
            ):
                continue
            parts += [
                f"### By category at {budget // 1024} KiB, {split} "
                "(bytes, hops, calls, store reads and ms are means over categories 1-4)",
                "",
                category_table(rows, split, budget),
            ]
    parts += [
        "### Category 5 (adversarial) apart",
        "",
        "Adversarial questions ask about things the conversation does not say (or says of "
        "the other speaker); their `evidence` points at the turns they distort. Recall of "
        "those turns is reported here apart and is not part of the tables above.",
        "",
        recall_table(rows, "held-out", (5,)),
        "### Where Chain of Recall does not win",
        "",
        "Every split, budget and category (5 included) where it is not above the best "
        "non-gold strategy:",
        "",
        *([f"- {line}" for line in losses(rows)] or ["- none"]),
        "",
        "### Strategies",
        "",
        *[f"- `{name}`: {label}" for name, label in meta["labels"].items()],
        f"- neighbour windows chosen on the tuning conversations: {meta.get('windows')}",
        "- `calls`: requests the agent makes to memory for the context (baselines hold their "
        "index in the client, so 1); `store reads`: reads inside the service that `/recall` "
        "reports (`calls` in its answer).",
        "- ms/question: wall time to assemble one context; for Chain of Recall this is the "
        "HTTP round trip to a local server on a shared 2-core machine.",
        f"- evidence ids cited by the data set that no turn carries: "
        f"{meta['unknown_evidence']} (ignored; a question left with none is skipped).",
        f"- reference figures quoted by the issue at 8 KiB: {REFERENCE_8K}.",
        "",
    ]
    if image is not None:
        parts += [f"![LoCoMo recall against bytes](img/{image.name})", ""]
    parts += [
        "Related sections: the peer MCP memory server side by side "
        "(`python -m benchmarks.peer_mcp --full`, docs/benchmarks-peer.md) and the super-agent "
        "replay week (`python -m benchmarks.replay --full`, docs/benchmarks-replay.md).",
        "",
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.locomo", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="conv-26 only, 40 questions")
    parser.add_argument("--full", action="store_true", help="all conversations (default)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--only", nargs="*", default=[], help="sample ids, e.g. conv-26")
    parser.add_argument("--no-embed", action="store_true", help="skip the MiniLM strategies")
    parser.add_argument("--strategies", nargs="*", default=[], help="names to run (default all)")
    parser.add_argument("--doc", type=Path, default=DOC, help="markdown section to write")
    parser.add_argument(
        "--from-json", type=Path, default=None, help="re-render a saved bench-out/locomo.json"
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        rows = [Row(**r) for r in saved["rows"]]
        img = args.doc.parent / "img" / IMG.name  # beside the report it belongs to
        image_path: Path | None = img if plot(rows, img) is None else None
        args.doc.write_text(
            render(
                rows,
                saved["meta"],
                saved.get("command", "python -m benchmarks.locomo --full"),
                image_path,
            ),
            encoding="utf-8",
        )
        print(f"wrote {args.doc}")
        return 0
    if not args.data.exists():
        print(
            f"LoCoMo skipped: {args.data} is absent. It lives in the workspace's "
            "shared/bench/locomo/ (never in this repository); pass --data PATH to it.",
            file=sys.stderr,
        )
        return 0
    config = RunConfig(
        args.data, only=tuple(args.only), embeddings=not args.no_embed,
        strategy_names=tuple(args.strategies),
    )  # fmt: skip
    if args.quick:
        config.only = config.only or ("conv-26",)
        config.max_questions = 40
    rows, meta = run(config)
    command = "python -m benchmarks.locomo " + " ".join(argv if argv is not None else sys.argv[1:])
    img = args.doc.parent / "img" / IMG.name  # beside the report it belongs to
    image: Path | None = img
    note = plot(rows, img)
    if note:
        print(note, file=sys.stderr)
        image = None
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(render(rows, meta, command.strip(), image), encoding="utf-8")
    OUT_DIR.mkdir(exist_ok=True)
    (OUT_DIR / "locomo.json").write_text(
        json.dumps({"meta": meta, "command": command.strip(), "rows": [r.__dict__ for r in rows]}),
        encoding="utf-8",
    )
    print(f"wrote {args.doc} and {OUT_DIR / 'locomo.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
