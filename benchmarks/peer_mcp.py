"""Speed and scale against a peer: the official MCP memory server and chainrecall, in one run.

This module owns the side-by-side measurement. The peer is
`@modelcontextprotocol/server-memory` from npm, installed with the machine's
npm into `bench-out/peer/` (git-ignored) and driven with the official `mcp`
Python SDK client over stdio, as an agent would. Ours is `chainrecall serve`
on a loopback port, driven over HTTP. At each size (1k, 10k, 100k records;
quick: 1k) both stores are seeded with the same number of records (theirs:
entities with one observation, written in its own JSONL file format, since its
create tool rewrites the whole file per call; ours: triggers through
`POST /triggers/batch`), then we time: a fetch by ID (their `open_nodes`,
our `GET /triggers/{id}`), their `read_graph` (the whole graph, the only
other read it has), a create (their `create_entities`, our `POST /triggers`),
and record what each answers for an unknown ID.

Run: `python -m benchmarks.peer_mcp [--quick]`; writes docs/benchmarks-peer.md,
docs/img/peer-latency.png and bench-out/peer_mcp.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
PEER_DIR = REPO / "bench-out" / "peer"
PEER_PACKAGE = "@modelcontextprotocol/server-memory"
PEER_ENTRY = (
    PEER_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)
DOC = REPO / "docs" / "benchmarks-peer.md"
IMG = REPO / "docs" / "img" / "peer-latency.png"
OUT = REPO / "bench-out" / "peer_mcp.json"
FULL_SIZES = (1000, 10_000, 100_000)
QUICK_SIZES = (1000,)
UNKNOWN_NAME = "trg_zzzzzzzz"  # a well-formed ID that no store here holds
REPORTED = {1000: 10.5, 10_000: 73.0, 100_000: 1250.0}  # the figures for their fetch, ms


class PeerUnavailable(RuntimeError):
    """node/npm or the peer package is missing; the message says how to get it."""


def ensure_peer(install: bool = True) -> Path:
    """The peer's entry script, installing the npm package under bench-out/peer/ if needed."""
    if PEER_ENTRY.exists():
        return PEER_ENTRY
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        raise PeerUnavailable("node and npm are needed for the peer (apt-get install nodejs npm)")
    if not install:
        raise PeerUnavailable(f"run: npm install --prefix {PEER_DIR} {PEER_PACKAGE}")
    PEER_DIR.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(PEER_DIR), PEER_PACKAGE],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not PEER_ENTRY.exists():
        raise PeerUnavailable(f"npm install {PEER_PACKAGE} failed: {done.stderr[-500:]}")
    return PEER_ENTRY


@dataclass
class Timing:
    samples_ms: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else float("nan")

    @property
    def p95(self) -> float:
        if not self.samples_ms:
            return float("nan")
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


@dataclass
class SizeResult:
    size: int
    peer_fetch: Timing
    peer_read_graph: Timing
    peer_create: Timing
    peer_unknown: str
    ours_fetch: Timing
    ours_create: Timing
    ours_unknown: str
    ours_unknown_status: int
    seed_s: dict[str, float]


def repeats_for(size: int) -> int:
    """Fewer samples where one call takes a second; always at least 5."""
    return 60 if size <= 1000 else 25 if size <= 10_000 else 5


# -- the peer ---------------------------------------------------------------------------


def seed_peer_file(path: Path, size: int) -> list[str]:
    names = [f"record-{i:06d}" for i in range(size)]
    with path.open("w", encoding="utf-8") as out:
        for i, name in enumerate(names):
            entity = {
                "type": "entity", "name": name, "entityType": "event",
                "observations": [f"CI run {i} failed on PR #{i % 997}: 3 of 118 tests red"],
            }  # fmt: skip
            out.write(json.dumps(entity) + "\n")
    return names


def _text_of(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in getattr(result, "content", [])]
    return "".join(parts)


async def measure_peer(entry: Path, size: int, workdir: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    memory_file = workdir / f"peer-{size}.jsonl"
    started = time.perf_counter()
    names = seed_peer_file(memory_file, size)
    seed_s = time.perf_counter() - started
    params = StdioServerParameters(
        command=shutil.which("node") or "node", args=[str(entry)],
        env={"MEMORY_FILE_PATH": str(memory_file), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    rng = random.Random(size)
    fetch, graph, create = Timing(), Timing(), Timing()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await asyncio.wait_for(session.initialize(), timeout=60)

        async def call(name: str, args: dict[str, Any]) -> tuple[float, Any]:
            t0 = time.perf_counter()
            result = await asyncio.wait_for(session.call_tool(name, args), timeout=120)
            return (time.perf_counter() - t0) * 1000, result

        for _ in range(repeats_for(size)):
            ms, result = await call("open_nodes", {"names": [rng.choice(names)]})
            if "record-" not in _text_of(result):
                raise AssertionError(
                    f"open_nodes did not return the entity: {_text_of(result)[:200]}"
                )
            fetch.samples_ms.append(ms)
        for _ in range(3 if size <= 10_000 else 1):
            ms, _ = await call("read_graph", {})
            graph.samples_ms.append(ms)
        for i in range(repeats_for(size)):
            entity = {"name": f"new-{i}", "entityType": "event", "observations": ["created"]}
            ms, _ = await call("create_entities", {"entities": [entity]})
            create.samples_ms.append(ms)
        _, unknown = await call("open_nodes", {"names": [UNKNOWN_NAME]})
        unknown_text = _text_of(unknown)
        is_error = bool(getattr(unknown, "isError", False))
    answer = f"{'error' if is_error else 'success'}: {' '.join(unknown_text.split())[:160]}"
    return {"fetch": fetch, "graph": graph, "create": create, "unknown": answer, "seed_s": seed_s}


# -- ours ---------------------------------------------------------------------------------


def measure_ours(size: int, workdir: Path) -> dict[str, Any]:
    from benchmarks.common import chainrecall_server

    rng = random.Random(size)
    fetch, create = Timing(), Timing()
    with (
        chainrecall_server(str(workdir / f"ours-{size}.db")) as server,
        httpx.Client(base_url=server.url, timeout=120) as client,
    ):
        started = time.perf_counter()
        ids: list[str] = []
        for start in range(0, size, 1000):
            items = [
                {"source": "bench", "kind": "check_run.completed",
                 "thread_key": f"bench:pr#{i % 997}",
                 "payload": f"CI run {i} failed on PR #{i % 997}: 3 of 118 tests red",
                 "dedupe_key": f"record-{i:06d}"}
                for i in range(start, min(size, start + 1000))
            ]  # fmt: skip
            response = client.post("/triggers/batch", json={"items": items})
            response.raise_for_status()
            ids += [item["trigger"]["id"] for item in response.json()["items"]]
        seed_s = time.perf_counter() - started
        for _ in range(repeats_for(size)):
            t0 = time.perf_counter()
            response = client.get(f"/triggers/{rng.choice(ids)}")
            fetch.samples_ms.append((time.perf_counter() - t0) * 1000)
            response.raise_for_status()
        for i in range(repeats_for(size)):
            body = {
                "source": "bench",
                "kind": "note",
                "thread_key": "bench:new",
                "payload": f"created {i}",
            }
            t0 = time.perf_counter()
            response = client.post("/triggers", json=body)
            create.samples_ms.append((time.perf_counter() - t0) * 1000)
            response.raise_for_status()
        unknown = client.get(f"/triggers/{UNKNOWN_NAME}")
    detail = unknown.json().get("detail", unknown.text) if unknown.content else ""
    return {
        "fetch": fetch, "create": create, "seed_s": seed_s,
        "unknown": f"{unknown.status_code} {unknown.headers.get('content-type', '')}: {detail}",
        "unknown_status": unknown.status_code,
    }  # fmt: skip


def run(sizes: Sequence[int], log: Any = print) -> list[SizeResult]:
    entry = ensure_peer()
    results: list[SizeResult] = []
    with tempfile.TemporaryDirectory(prefix="peer-mcp-") as tmp:
        for size in sizes:
            peer = asyncio.run(measure_peer(entry, size, Path(tmp)))
            ours = measure_ours(size, Path(tmp))
            results.append(
                SizeResult(
                    size, peer["fetch"], peer["graph"], peer["create"], peer["unknown"],
                    ours["fetch"], ours["create"], ours["unknown"], ours["unknown_status"],
                    {"peer": round(peer["seed_s"], 2), "ours": round(ours["seed_s"], 2)},
                )
            )  # fmt: skip
            log(
                f"{size}: fetch peer {peer['fetch'].median:.2f} ms, ours {ours['fetch'].median:.2f} ms"
            )
    return results


def render(results: list[SizeResult], command: str, image: Path | None) -> str:
    lines = [
        "## Speed and scale against a peer: the official MCP memory server",
        "",
        f"Rerun: `{command}`",
        "",
        f"Peer: `{PEER_PACKAGE}` (npm), driven by the official `mcp` Python SDK client over "
        "stdio; seeded by writing its own JSONL file (its `create_entities` rewrites the whole "
        "file on every call, so seeding 100k records through it would take hours). Ours: "
        "`chainrecall serve` (SQLite) over HTTP on loopback, seeded through "
        "`POST /triggers/batch`. Both sides pay their transport (JSON-RPC over a pipe; HTTP "
        "over a socket). Medians (p95) in ms over the samples shown; one shared 2-core machine.",
        "",
        "| records | their fetch (open_nodes) | our fetch (GET /triggers/{id}) | their read_graph "
        "| their create (create_entities) | our create (POST /triggers) | samples |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.size:,} | {r.peer_fetch.median:.2f} ({r.peer_fetch.p95:.2f}) "
            f"| {r.ours_fetch.median:.2f} ({r.ours_fetch.p95:.2f}) "
            f"| {r.peer_read_graph.median:.1f} | {r.peer_create.median:.2f} ({r.peer_create.p95:.2f}) "
            f"| {r.ours_create.median:.2f} ({r.ours_create.p95:.2f}) | {len(r.ours_fetch.samples_ms)} |"
        )
    last = results[-1]
    lines += [
        "",
        f"Unknown ID (`{UNKNOWN_NAME}`) at {last.size:,} records:",
        "",
        f"- theirs (`open_nodes`): {last.peer_unknown}",
        f"- ours (`GET /triggers/{UNKNOWN_NAME}`): {last.ours_unknown}",
        "",
        "Seconds to seed: "
        + ", ".join(
            f"{r.size:,}: theirs {r.seed_s['peer']}, ours {r.seed_s['ours']}" for r in results
        )
        + ".",
        f"Figures quoted by the issue for their fetch (ms): {REPORTED}.",
        "",
    ]
    if image is not None:
        lines += [f"![fetch latency against store size](img/{image.name})", ""]
    return "\n".join(lines)


def plot(results: list[SizeResult], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [r.size for r in results]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        sizes, [r.peer_fetch.median for r in results], "-o", label="MCP server-memory open_nodes"
    )
    ax.plot(
        sizes, [r.ours_fetch.median for r in results], "-o", label="chainrecall GET /triggers/{id}"
    )
    ax.plot(sizes, [r.peer_create.median for r in results], "--", label="MCP create_entities")
    ax.plot(
        sizes, [r.ours_create.median for r in results], "--", label="chainrecall POST /triggers"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records in the store")
    ax.set_ylabel("median latency (ms)")
    ax.set_title("Latency against store size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peer_mcp", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k records only")
    parser.add_argument("--full", action="store_true", help="1k, 10k and 100k (default)")
    parser.add_argument("--sizes", nargs="*", type=int, default=None)
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    sizes = tuple(args.sizes) if args.sizes else QUICK_SIZES if args.quick else FULL_SIZES
    try:
        results = run(sizes)
    except PeerUnavailable as exc:
        print(f"peer benchmark skipped: {exc}", file=sys.stderr)
        return 0
    command = "python -m benchmarks.peer_mcp " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    img = args.doc.parent / "img" / IMG.name  # beside the report it belongs to
    image = img if plot(results, img) else None
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(render(results, command.strip(), image), encoding="utf-8")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        json.dumps([{**r.__dict__, **{k: getattr(r, k).samples_ms for k in
                     ("peer_fetch", "peer_read_graph", "peer_create", "ours_fetch", "ours_create")}}
                    for r in results]),
        encoding="utf-8",
    )  # fmt: skip
    print(f"wrote {args.doc} and {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
