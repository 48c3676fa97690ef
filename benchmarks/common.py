"""What every benchmark shares: run sizes, statistics, server processes, load generators, tables.

A benchmark module exposes `run(datasets, mode) -> Section`; the runner
(`benchmarks/run.py`) renders the sections into Markdown. Load against a
server comes from `wrk` (Debian package) when it is installed, else from an
asyncio httpx generator; the report says which one was used. Servers run as
child processes on loopback ports, started and stopped here, every wait with a
deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"


@dataclass(frozen=True)
class Mode:
    """How much of everything to do: `--quick` (CI smoke run) or `--full` (the real sizes)."""

    name: str
    sizes: tuple[int, ...]
    latency_requests: int  # sequential requests per server per round
    load_seconds: float  # one wrk / async load run
    rounds: int  # alternating rounds of ours vs bare; we report medians over rounds
    embedded_lookups: int
    ingest_single: int  # sequential single POSTs
    ingest_batches: int  # batches of 1000 (HTTP batch, and record_triggers)
    page_repeats: int
    webhook_sequential: int = 60  # sequential signed POST /webhooks/github deliveries
    import_jsonl: int = 2000  # triggers in the generated JSONL file `chainrecall import` reads
    import_github: int = 200  # deliveries in the generated github-dir folder
    context_repeats: int = 100  # build_context calls (and GET /context requests) per size
    stream_turns: int = 60  # turns of the replayed stream the strategies are compared over
    # Whether webhooks, bulk import and GET /context run on every size or only on the
    # largest: a server start costs seconds, and the quick run must stay short.
    every_size: bool = True

    @property
    def largest(self) -> int:
        return max(self.sizes)


QUICK = Mode(
    "quick", (1000, 5000), 300, 1.0, 1, 2000, 60, 1, 30,
    import_jsonl=1000, import_github=120, context_repeats=60, stream_turns=100, every_size=False,
)  # fmt: skip
FULL = Mode(
    "full", (1000, 100_000, 1_000_000), 2000, 4.0, 3, 10_000, 500, 5, 200,
    webhook_sequential=500, import_jsonl=20_000, import_github=2000, context_repeats=300,
    stream_turns=1000,
)  # fmt: skip
# The pytest smoke test.
TINY = Mode(
    "tiny", (1000,), 40, 0.5, 1, 200, 10, 1, 5,
    webhook_sequential=8, import_jsonl=50, import_github=16, context_repeats=5, stream_turns=12,
)  # fmt: skip


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.headers) + " |"]
        lines.append("|" + "|".join("---" for _ in self.headers) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Target:
    """A goal from the issue and whether this run met it."""

    name: str
    value: float
    goal: float  # met when value >= goal (value <= goal with at_most)
    at_most: bool = False

    @property
    def met(self) -> bool:
        return self.value <= self.goal if self.at_most else self.value >= self.goal


@dataclass
class Section:
    name: str  # the module name, what --only takes
    title: str
    intro: str
    command: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    numbers: dict[str, float] = field(default_factory=dict)  # flat results, for tests and logs

    def markdown(self) -> str:
        parts = [f"## {self.title}", "", self.intro, "", f"Rerun: `{self.command}`", ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        if self.targets:
            parts.append("Targets:")
            parts.append("")
            for target in self.targets:
                verdict = "met" if target.met else "**missed**"
                sign = "<=" if target.at_most else ">="
                parts.append(
                    f"- {target.name}: {target.value:.2f} (goal {sign} {target.goal:.2f}): {verdict}"
                )
            parts.append("")
        parts += [f"- {note}" for note in self.notes]
        return "\n".join(parts).rstrip() + "\n"


# -- statistics ------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of `values` (pct in 0..100)."""
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def rate(value: float) -> str:
    return f"{value:,.0f}"


def load_note() -> str:
    """The machine's load as a section starts: `--only` reruns a section at another time
    than the report's header says, on a machine that may be busier or idler."""
    if not hasattr(os, "getloadavg"):
        return "load average: not available on this system"
    return f"load average {os.getloadavg()[0]:.1f} when this section started"


def size_label(size: int) -> str:
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    if size >= 1000 and size % 1000 == 0:
        return f"{size // 1000}k"
    return str(size)


def timed(call: Callable[[], object], count: int) -> list[float]:
    """Seconds each of `count` calls took."""
    out = []
    clock = time.perf_counter
    for _ in range(count):
        began = clock()
        call()
        out.append(clock() - began)
    return out


# -- servers -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env() -> dict[str, str]:
    """Environment for a child that imports this checkout's `chainrecall` and `benchmarks`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(REPO), env.get("PYTHONPATH", "")])
    return env


class Served:
    """A server child process on a loopback port, up once GET /healthz answers 200."""

    def __init__(self, name: str, argv: list[str], port: int) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Served:
        self.proc = subprocess.Popen(self.argv, env=child_env())
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.argv}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"{self.name} did not answer within 60 s: {self.argv}")
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def chainrecall_server(db: str, *options: str, workers: int = 1) -> Served:
    """`python -m chainrecall serve [--workers N] [options]`, as a user starts it."""
    port = free_port()
    argv = [
        sys.executable, "-m", "chainrecall", "serve", "--db", db, "--port", str(port),
        "--log-level", "warning", "--workers", str(workers), *options,
    ]  # fmt: skip
    return Served(f"chainrecall serve --workers {workers}", argv, port)


def bare_server(db: str) -> Served:
    port = free_port()
    return Served(
        "bare endpoint", [sys.executable, "-m", "benchmarks.bare_endpoint", db, str(port)], port
    )


# -- load ------------------------------------------------------------------------


@dataclass
class LoadResult:
    requests: int
    seconds: float
    p50: float  # seconds
    p99: float
    tool: str

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


_WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nWRK_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,'
    .. '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""

_WRK_GET_IDS = """
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS_FILE")) do ids[#ids + 1] = line end
local i = 0
request = function()
  i = i + 1
  if i > #ids then i = 1 end
  return wrk.format("GET", "/triggers/" .. ids[i])
end
"""

_WRK_POST_TRIGGERS = """
local n = 0
local run = os.getenv("BENCH_RUN")
request = function()
  n = n + 1
  local body = string.format(
    '{"source":"bench-ingest","kind":"message","thread_key":"bench-ingest:%s:%d",'
    .. '"summary":"ingested message %d","payload":{"text":"ingested message %d","n":%d}}',
    run, n % 500, n, n, n)
  return wrk.format("POST", "/triggers", {["Content-Type"] = "application/json"}, body)
end
"""

# Signed GitHub deliveries: each line of the items file is "event<TAB>signature<TAB>body".
# The signature covers the body only, so a body can be resent under a fresh delivery GUID.
_WRK_GITHUB_DELIVERIES = """
local items = {}
for line in io.lines(os.getenv("BENCH_IDS_FILE")) do
  local first = string.find(line, "\t", 1, true)
  if first then
    local second = string.find(line, "\t", first + 1, true)
    items[#items + 1] = {
      string.sub(line, 1, first - 1), string.sub(line, first + 1, second - 1),
      string.sub(line, second + 1)}
  end
end
local n = 0
local run = os.getenv("BENCH_RUN")
request = function()
  n = n + 1
  local item = items[(n - 1) % #items + 1]
  return wrk.format("POST", "/webhooks/github", {
    ["Content-Type"] = "application/json", ["X-GitHub-Event"] = item[1],
    ["X-GitHub-Delivery"] = string.format("bench-%s-%d", run, n),
    ["X-Hub-Signature-256"] = item[2]}, item[3])
end
"""
_WRK_SCRIPTS = {
    "get_ids": _WRK_GET_IDS,
    "post_triggers": _WRK_POST_TRIGGERS,
    "github_deliveries": _WRK_GITHUB_DELIVERIES,
}


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def ingest_body(run: str, n: int) -> dict[str, Any]:
    """The trigger a load generator posts; the same shape as the wrk script's."""
    return {
        "source": "bench-ingest", "kind": "message", "thread_key": f"bench-ingest:{run}:{n % 500}",
        "summary": f"ingested message {n}", "payload": {"text": f"ingested message {n}", "n": n},
    }  # fmt: skip


def load(
    base_url: str, workload: str, *, seconds: float, connections: int = 16,
    ids: Sequence[str] = (), run: str = "r",
) -> LoadResult:  # fmt: skip
    """Drive `workload` for `seconds` over `connections`.

    "get_ids": GET /triggers/{id} over `ids`; "post_triggers": POST /triggers of
    generated triggers; "github_deliveries": POST /webhooks/github of the signed
    deliveries in `ids` ("event<TAB>signature<TAB>body" each), in turn, each
    request under a fresh X-GitHub-Delivery GUID.
    """
    if wrk_available():
        return _wrk_load(base_url, workload, seconds, connections, ids, run)
    return asyncio.run(_async_load(base_url, workload, seconds, connections, ids, run))


def _wrk_load(
    base_url: str, workload: str, seconds: float, connections: int, ids: Sequence[str], run: str
) -> LoadResult:
    script = _WRK_SCRIPTS[workload] + _WRK_DONE
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        script_path = Path(tmp) / "load.lua"
        script_path.write_text(script)
        ids_path = Path(tmp) / "ids.txt"
        ids_path.write_text("\n".join(ids) + "\n")
        env = {**os.environ, "BENCH_IDS_FILE": str(ids_path), "BENCH_RUN": run}
        # One wrk thread: on a small machine the load generator must leave the server its core.
        argv = [
            "wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
            "-s", str(script_path), base_url,
        ]  # fmt: skip
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=seconds + 60, check=False
        )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    out = json.loads(line.removeprefix("WRK_JSON "))
    errors = {k: out[k] for k in ("connect", "read", "write", "status", "timeout") if out[k]}
    if errors:
        raise RuntimeError(f"wrk saw failed requests against {base_url}: {errors}\n{done.stdout}")
    return LoadResult(
        requests=out["requests"], seconds=out["duration_us"] / 1e6,
        p50=out["p50_us"] / 1e6, p99=out["p99_us"] / 1e6, tool="wrk -t1",
    )  # fmt: skip


async def _async_load(
    base_url: str, workload: str, seconds: float, connections: int, ids: Sequence[str], run: str
) -> LoadResult:
    latencies: list[float] = []
    counter = iter(range(10**12))
    deliveries = [line.split("\t", 2) for line in ids] if workload == "github_deliveries" else []
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=10) as client:
        deadline = time.perf_counter() + seconds

        async def one_connection(offset: int) -> None:
            position = offset
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                if workload == "get_ids":
                    response = await client.get(f"/triggers/{ids[position % len(ids)]}")
                    position += connections
                elif workload == "github_deliveries":
                    n = next(counter)
                    event, signature, body = deliveries[n % len(deliveries)]
                    headers = {
                        "Content-Type": "application/json", "X-GitHub-Event": event,
                        "X-GitHub-Delivery": f"bench-{run}-{n}", "X-Hub-Signature-256": signature,
                    }  # fmt: skip
                    response = await client.post(
                        "/webhooks/github", content=body.encode(), headers=headers
                    )
                else:
                    response = await client.post("/triggers", json=ingest_body(run, next(counter)))
                if response.status_code >= 300:
                    raise RuntimeError(f"{response.status_code} from {base_url}: {response.text}")
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(one_connection(i) for i in range(connections)))
        elapsed = time.perf_counter() - began
    return LoadResult(
        requests=len(latencies), seconds=elapsed, p50=percentile(latencies, 50),
        p99=percentile(latencies, 99), tool="asyncio httpx (wrk not installed)",
    )  # fmt: skip


@contextmanager
def keepalive(base_url: str) -> Iterator[httpx.Client]:
    """One client with one keep-alive connection."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=base_url, limits=limits, timeout=30) as client:
        yield client


def fetch_latencies(client: httpx.Client, ids: Sequence[str]) -> list[float]:
    """Seconds each sequential GET /triggers/{id} took; any non-200 is a failure."""
    out = []
    clock = time.perf_counter
    for trigger_id in ids:
        began = clock()
        response = client.get(f"/triggers/{trigger_id}")
        elapsed = clock() - began
        if response.status_code != 200:
            raise RuntimeError(f"GET /triggers/{trigger_id} answered {response.status_code}")
        out.append(elapsed)
    return out
