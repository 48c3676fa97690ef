"""Fetch by ID over HTTP, one server process, against the bare-endpoint floor.

For each store size: `python -m chainrecall serve` and the bare endpoint
(benchmarks/bare_endpoint.py: plain Starlette + sqlite3, the same primary-key
lookup on the same file) run side by side; in alternating rounds we measure
latency (p50, p99) of sequential GET /triggers/{id} over one keep-alive
connection (httpx), and requests/s with 16 connections (wrk, one thread,
rotating over random existing IDs). Reported: our throughput as a share of
the bare one's (goal >= 0.70) and our throughput at the largest store against
the smallest (goal >= 0.80).

Rerun: `python -m benchmarks.run --full --only fetch_http`
"""

from __future__ import annotations

from benchmarks.common import (
    Mode,
    Section,
    Table,
    Target,
    bare_server,
    chainrecall_server,
    fetch_latencies,
    keepalive,
    load,
    median,
    ms,
    percentile,
    rate,
    size_label,
)
from benchmarks.dataset import Dataset, random_ids

NAME = "fetch_http"
CONNECTIONS = 16
_BARE_ON_POSTGRES = "the bare endpoint reads SQLite only: on PostgreSQL only ours is measured"


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="Fetch by ID over HTTP (one server process)",
        intro=(
            "GET /triggers/{id} for random existing IDs. *Latency*: sequential requests on one "
            f"keep-alive connection (httpx client, so client time is included on both sides). "
            f"*Throughput*: {CONNECTIONS} connections for {mode.load_seconds:g} s per round. "
            "*Bare*: plain Starlette + sqlite3 doing the same primary-key lookup on the same "
            "file (benchmarks/bare_endpoint.py), same uvicorn settings, measured in the same "
            f"run in alternating rounds ({mode.rounds} per server; throughput is the median "
            "round, latency percentiles are over all rounds' requests)."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    table = Table(
        [
            "triggers", "ours p50 ms", "ours p99 ms", "bare p50 ms", "bare p99 ms",
            "ours req/s", "bare req/s", "ours / bare", "ours p50 under load ms",
        ]
    )  # fmt: skip
    ours_rps: dict[int, float] = {}
    tool = ""
    for dataset in datasets:
        if dataset.is_postgres:
            tool = _postgres_row(dataset, mode, table, section)
            continue
        latency_ids = random_ids(dataset, mode.latency_requests, seed=dataset.triggers)
        load_ids = random_ids(dataset, 10_000, seed=dataset.triggers + 1)
        lat: dict[str, list[float]] = {"ours": [], "bare": []}
        rps: dict[str, list[float]] = {"ours": [], "bare": []}
        loaded_p50: list[float] = []
        with chainrecall_server(dataset.url) as ours, bare_server(dataset.url) as bare:
            servers = {"ours": ours, "bare": bare}
            for name, server in servers.items():  # warm both: imports, caches, first pages
                with keepalive(server.url) as client:
                    fetch_latencies(client, latency_ids[:100])
                    check = client.get(f"/triggers/{latency_ids[0]}").json()
                    if check["id"] != latency_ids[0]:
                        raise RuntimeError(f"{name} answered another trigger: {check}")
            for round_no in range(mode.rounds):
                order = ["ours", "bare"] if round_no % 2 == 0 else ["bare", "ours"]
                for name in order:
                    with keepalive(servers[name].url) as client:
                        lat[name] += fetch_latencies(client, latency_ids)
                for name in order:
                    result = load(
                        servers[name].url, "get_ids", seconds=mode.load_seconds,
                        connections=CONNECTIONS, ids=load_ids,
                    )  # fmt: skip
                    tool = result.tool
                    rps[name].append(result.per_second)
                    if name == "ours":
                        loaded_p50.append(result.p50)
        ours_rate, bare_rate = median(rps["ours"]), median(rps["bare"])
        ours_rps[dataset.triggers] = ours_rate
        share = ours_rate / bare_rate
        table.rows.append(
            [
                size_label(dataset.triggers),
                ms(percentile(lat["ours"], 50)), ms(percentile(lat["ours"], 99)),
                ms(percentile(lat["bare"], 50)), ms(percentile(lat["bare"], 99)),
                rate(ours_rate), rate(bare_rate), f"{share:.2f}", ms(median(loaded_p50)),
            ]
        )  # fmt: skip
        label = size_label(dataset.triggers)
        section.numbers.update(
            {
                f"ours_p50_ms@{label}": percentile(lat["ours"], 50) * 1000,
                f"ours_p99_ms@{label}": percentile(lat["ours"], 99) * 1000,
                f"bare_p50_ms@{label}": percentile(lat["bare"], 50) * 1000,
                f"ours_rps@{label}": ours_rate,
                f"bare_rps@{label}": bare_rate,
                f"share_of_bare@{label}": share,
            }
        )
        section.targets.append(Target(f"throughput vs bare at {label}", share, 0.70))
    if table.rows:
        section.tables.append(table)
        section.notes.append(f"load generator: {tool}")
        section.notes.append(
            "where our time goes (py-spy under wrk, and CPU time per request through the ASGI "
            "app alone at 100k): about half of the server's CPU is uvicorn's socket writes and "
            "HTTP parsing, the same for both servers. In the app, FastAPI's routing and "
            "dependency solving cost ~190 µs CPU per request before GET /triggers/{id} moved to "
            "a plain Starlette route (api/app.py `fast_routes`: 365 -> 178 µs, bare: 73 µs). "
            "The rest of the gap to bare is FastAPI's app-level middleware (telemetry check, "
            "exit-stack, its body limit) plus ours, the record model and the neighbour lookup "
            "(`next` is a second index probe)"
        )
    if len(ours_rps) > 1:
        smallest, largest = min(ours_rps), max(ours_rps)
        flat = ours_rps[largest] / ours_rps[smallest]
        section.numbers["flatness"] = flat
        section.targets.append(
            Target(
                f"flat with size: throughput at {size_label(largest)} / at {size_label(smallest)}",
                flat, 0.80,
            )
        )  # fmt: skip
    return section


def _postgres_row(dataset: Dataset, mode: Mode, table: Table, section: Section) -> str:
    """Our server alone on PostgreSQL (no bare floor there); answers the load tool's name."""
    latency_ids = random_ids(dataset, mode.latency_requests, seed=dataset.triggers)
    load_ids = random_ids(dataset, 10_000, seed=dataset.triggers + 1)
    latencies: list[float] = []
    rps: list[float] = []
    loaded_p50: list[float] = []
    tool = ""
    with chainrecall_server(dataset.url) as ours:
        with keepalive(ours.url) as client:  # warm: imports, the pool, first pages
            fetch_latencies(client, latency_ids[:100])
            check = client.get(f"/triggers/{latency_ids[0]}").json()
            if check["id"] != latency_ids[0]:
                raise RuntimeError(f"the server answered another trigger: {check}")
        for _ in range(mode.rounds):
            with keepalive(ours.url) as client:
                latencies += fetch_latencies(client, latency_ids)
            result = load(
                ours.url, "get_ids", seconds=mode.load_seconds, connections=CONNECTIONS,
                ids=load_ids,
            )  # fmt: skip
            tool = result.tool
            rps.append(result.per_second)
            loaded_p50.append(result.p50)
    label = size_label(dataset.triggers)
    table.rows.append(
        [
            f"{label} (PostgreSQL)", ms(percentile(latencies, 50)), ms(percentile(latencies, 99)),
            "n/a", "n/a", rate(median(rps)), "n/a", "n/a", ms(median(loaded_p50)),
        ]
    )  # fmt: skip
    section.numbers.update(
        {
            f"ours_p50_ms@{label}": percentile(latencies, 50) * 1000,
            f"ours_p99_ms@{label}": percentile(latencies, 99) * 1000,
            f"ours_rps@{label}": median(rps),
        }
    )
    if _BARE_ON_POSTGRES not in section.notes:
        section.notes.append(_BARE_ON_POSTGRES)
    return tool
