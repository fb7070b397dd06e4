"""What durable threads cost: keeping a run, listing 100,000 threads, restoring a 1,000-run thread.

Stores: today's in-memory history (``memory``: the event log's ``MemoryThreadStore``), SQLite
(``sqlite``: a file in a temp directory) and PostgreSQL (``postgres``: a real server from
Debian's package on a free port, tests/postgres_server.py). All figures are printed (``-s``),
side by side in one run:

* ``test_write_cost``: runs of bench_proto's ``genui`` (305 events) and ``long-text`` (2,004)
  runs through a real :class:`~transports.runs.RunRegistry` (agent, verifier, log, one
  subscriber reading every event), first keeping nothing (``keep_history=False``), then
  keeping each run in the store. The gateway process's CPU per run (``time.process_time``:
  the event loop and the SQLite worker thread; the PostgreSQL server's own CPU is not in it)
  gives what keeping costs as a share of the run's own CPU, and per event of the run.
* ``test_write_cost_served``: the same runs served over SSE by a real server in this process to
  a client in another process (``httpx``, reading every frame): the gateway's CPU per run --
  HTTP, framing, the subscriber -- is the baseline the keeping is compared with.
* ``test_list_100k``: 100,000 threads of one principal (written in bulk), then pages of 20
  walked by cursor from the newest, and title searches: p50 / p99 per page.
* ``test_restore_1000_runs``: one thread of 1,000 kept runs (each through ``keep_run``), then
  what ``GET <path>/threads/<threadId>`` does: read the records, decode, take the branch, build
  the served events.

With ``--benchmark-disable`` (CI) each test runs once at a small size (a smoke test of the
code, nothing printed as a figure). Run:
``pytest benchmarks/bench_threads.py --benchmark-enable -s -p no:xdist``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from bench_proto import RUNS  # noqa: E402  (rootdir-relative, as bench_history does)

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunAgentInput, RunStartedEvent, UserMessage
from agui_engine.protocol.threads import decode_cursor
from agui_engine.transports.eventlog import InMemoryEventLog
from agui_engine.transports.history import (
    HistoryBudget,
    MemoryThreadStore,
    branch,
    branch_payloads,
    build_record,
    decode_records,
)
from agui_engine.transports.open_threads import open_thread_store
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry
from agui_engine.transports.thread_store import StoreBudget

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.postgres_server import PostgresServer, postgres_bin  # noqa: E402

STORES = ["memory", "sqlite", "postgres"]


def _measuring(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_enable", default=False))


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed: run tests/install-deps.sh")
    server = PostgresServer()
    server.start()
    yield server
    server.stop()


_N = [0]


async def _open(kind: str, tmp: Path, pg: PostgresServer | None, budget: StoreBudget | None = None) -> Any:
    _N[0] += 1
    if kind == "memory":
        return None
    if kind == "sqlite":
        return await open_thread_store(f"sqlite:{tmp / f's{_N[0]}.sqlite3'}", budget)
    assert pg is not None
    return await open_thread_store(pg.createdb(f"b{_N[0]}"), budget)


class _Replay:
    """An agent replaying one of bench_proto's runs with the input's ids."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def run(self, input: RunAgentInput) -> AsyncIterator[Any]:
        for e in self.events:
            if isinstance(e, RunStartedEvent):
                yield msgspec.structs.replace(e, thread_id=input.thread_id, run_id=input.run_id)
            elif type(e).__name__ == "RunFinishedEvent":
                yield msgspec.structs.replace(e, thread_id=input.thread_id, run_id=input.run_id)
            else:
                yield e


async def _runs(registry: RunRegistry, count: int, tag: str) -> float:
    """CPU seconds of the process per run, over ``count`` runs (each on its own thread)."""
    start = time.process_time()
    for i in range(count):
        inp = RunAgentInput(thread_id=f"{tag}-{i}", run_id=f"{tag}-r{i}",
                            messages=[UserMessage(id="u", content="show me the weather")])
        run = await registry.start(inp)
        sub = registry.subscribe(run, 0)
        while True:
            got = await sub.next()
            if got is not None and got.finished:
                break
        sub.close()
    return (time.process_time() - start) / count


@pytest.mark.timeout(900)  # figures over three stores; seconds at the smoke size
@pytest.mark.parametrize("run", ["genui", "long-text"])
async def test_write_cost(run: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    measuring = _measuring(request.config)
    pg = request.getfixturevalue("postgres") if measuring or postgres_bin() is not None else None
    count = 150 if measuring else 3
    events = RUNS[run]
    rows = []
    bare = RunRegistry(_Replay(events), options=RegistryOptions(keep_history=False, max_retained=10))
    await _runs(bare, 5, "warm")
    base = min([await _runs(bare, count, f"bare{k}") for k in range(3)])
    for kind in STORES:
        store = await _open(kind, tmp_path, pg)
        log = InMemoryEventLog(history=HistoryBudget(max_total_bytes=1 << 34)) if kind == "memory" else None
        reg = RunRegistry(_Replay(events), options=RegistryOptions(max_retained=10), log=log, threads=store)
        await _runs(reg, 5, f"warm-{kind}")
        cost = min([await _runs(reg, count, f"{kind}{k}") for k in range(3)])
        rows.append((kind, cost))
        if store is not None:
            await store.aclose()
    if measuring:
        print(f"\n[{run}: {len(events)} events; a run without history: {base * 1e6:,.0f} us CPU]")
        for kind, cost in rows:
            keep = cost - base
            print(f"  {kind:8} run+keep {cost * 1e6:8,.0f} us  keep {keep * 1e6:7,.0f} us = "
                  f"{keep / base:6.1%} of the run, {keep / len(events) * 1e6:5.2f} us per event")


_CLIENT = """
import sys, httpx, json
url, count, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with httpx.Client(timeout=60) as c:
    for i in range(count):
        body = {"threadId": f"{tag}-{i}", "runId": f"{tag}-r{i}", "messages": [
            {"id": "u", "role": "user", "content": "show me the weather"}]}
        with c.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as r:
            for _ in r.iter_bytes():
                pass
"""


async def _served_runs(server_url: str, count: int, tag: str) -> float:
    """Gateway CPU seconds per run (this process: the server; the client is another process)."""
    start = time.process_time()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _CLIENT, server_url, str(count), tag)
    assert await proc.wait() == 0
    return (time.process_time() - start) / count


@pytest.mark.timeout(900)
@pytest.mark.parametrize("run", ["genui", "long-text"])
async def test_write_cost_served(run: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The same as test_write_cost with the run served over SSE to a real client in another
    process: the gateway's CPU per run (HTTP, framing, the subscriber) is the baseline."""
    from agui_engine.transports.sse_server import start_sse_server

    measuring = _measuring(request.config)
    pg = request.getfixturevalue("postgres") if measuring or postgres_bin() is not None else None
    count = 100 if measuring else 2
    events = RUNS[run]
    results = {}
    for kind in ["none", *STORES]:
        store = None if kind in ("none", "memory") else await _open(kind, tmp_path, pg)
        log = InMemoryEventLog(history=HistoryBudget(max_total_bytes=1 << 34)) if kind == "memory" else None
        options = RegistryOptions(keep_history=kind != "none", max_retained=10)
        registry = RunRegistry(_Replay(events), options=options, log=log, threads=store)
        srv = await start_sse_server(registry=registry, access_log=False)
        try:
            if measuring:
                await _served_runs(srv.url, 3, f"warm-{kind}")
            results[kind] = min([await _served_runs(srv.url, count, f"{kind}{k}") for k in range(2 if measuring else 1)])
        finally:
            await srv.close()
            if store is not None:
                await store.aclose()
    if measuring:
        base = results["none"]
        print(f"\n[{run} served over SSE: {len(events)} events; the gateway's CPU per run without history: "
              f"{base * 1e6:,.0f} us]")
        for kind in STORES:
            keep = results[kind] - base
            print(f"  {kind:8} {results[kind] * 1e6:8,.0f} us  keep {keep * 1e6:7,.0f} us = {keep / base:6.1%} of the run")


def _rows(n: int, record: bytes) -> list[tuple[Any, ...]]:
    """``n`` threads of principal ``alice``, one run each (the listing's scale)."""
    now = int(time.time() * 1000)
    return [(f"t{i:07}", "alice", f"question {i} about topic {i % 997}", now - n + i, now - n + i, 1, len(record), 0,
             f"r{i}") for i in range(n)]


def _bulk_sqlite(store: Any, n: int, record: bytes) -> None:
    # Below the API, on purpose: 100,000 kept runs one transaction each would take minutes.
    rows = _rows(n, record)
    db = store._conn()
    db.execute("BEGIN")
    db.executemany("INSERT INTO threads (thread_id, principal, title, created_at, updated_at, runs, nbytes, "
                   "dropped, latest_run_id) VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.executemany("INSERT INTO runs VALUES (?, 1, ?, 'alice', 'h', ?, ?)",
                   [(r[0], r[8], len(record), record) for r in rows])
    db.execute("COMMIT")
    db.execute("ANALYZE")


async def _bulk_postgres(store: Any, n: int, record: bytes) -> None:
    rows = _rows(n, record)
    async with store._pool.acquire() as conn:
        await conn.copy_records_to_table(
            "agui_threads", records=[(*r[:3], False, *r[3:]) for r in rows],
            columns=["thread_id", "principal", "title", "title_set", "created_at", "updated_at", "runs", "nbytes",
                     "dropped", "latest_run_id"])
        await conn.copy_records_to_table(
            "agui_runs", records=[(r[0], 1, r[8], "alice", "h", len(record), record) for r in rows],
            columns=["thread_id", "seq", "run_id", "principal", "key_hash", "nbytes", "record"])
        await conn.execute("ANALYZE")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_list_100k(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    measuring = _measuring(request.config)
    if kind == "postgres" and not measuring and postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed")
    pg = request.getfixturevalue("postgres") if kind == "postgres" else None
    n = 100_000 if measuring else 300
    store = await _open(kind, tmp_path, pg)
    rec = build_record(RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="q")]), None,
                       [], complete=False, principal="alice", key_hash="h")
    if kind == "sqlite":
        await store._call(_bulk_sqlite, store, n, rec)
    else:
        await _bulk_postgres(store, n, rec)
    now = time.time()
    pages: list[float] = []
    after = None
    walked = 0
    for _ in range(200 if measuring else 5):
        t = time.perf_counter()
        page = await store.list_threads("alice", limit=20, after=after, now=now)
        pages.append(time.perf_counter() - t)
        walked += len(page.threads)
        assert page.next_cursor is not None
        after = decode_cursor(page.next_cursor)
    deep = []
    for i in range(50 if measuring else 3):  # pages from cursors far into the list
        key = (int(now * 1000) - n + (i * 1999) % n, f"t{(i * 1999) % n:07}")
        t = time.perf_counter()
        await store.list_threads("alice", limit=20, after=key, now=now)
        deep.append(time.perf_counter() - t)
    search = []
    for i in range(30 if measuring else 3):
        t = time.perf_counter()
        found = await store.list_threads("alice", limit=20, search=f"topic {100 + i}", now=now)
        search.append(time.perf_counter() - t)
        assert found.threads
    await store.aclose()
    if measuring:
        print(f"\n[{kind}: listing {n:,} threads, pages of 20]")
        for name, xs in (("walk from the newest", pages), ("deep cursors", deep), ("title search", search)):
            print(f"  {name:22} p50 {statistics.median(xs) * 1e3:7.3f} ms  p99 {_pct(xs, 0.99) * 1e3:7.3f} ms "
                  f"({len(xs)} pages)")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", STORES)
async def test_restore_1000_runs(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    measuring = _measuring(request.config)
    if kind == "postgres" and not measuring and postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed")
    pg = request.getfixturevalue("postgres") if kind == "postgres" else None
    runs = 1000 if measuring else 10
    budget = StoreBudget(max_runs_per_thread=runs, max_thread_bytes=1 << 30, max_total_bytes=1 << 34)
    store = await _open(kind, tmp_path, pg, budget)
    if store is None:
        store = MemoryThreadStore(budget.history())
    payloads = [encode_event(e) for e in RUNS["genui"]]
    parent = None
    now = time.time()
    keep = []
    for i in range(runs):
        inp = RunAgentInput(thread_id="big", run_id=f"r{i}", messages=[UserMessage(id=f"u{i}", content=f"turn {i}")])
        rec = build_record(inp, parent, payloads, complete=True, principal="alice", key_hash="h", max_bytes=1 << 30)
        t = time.perf_counter()
        await store.keep_run("big", rec, now)
        keep.append(time.perf_counter() - t)
        parent = f"r{i}"
    times = []
    for _ in range(5 if measuring else 1):
        t = time.perf_counter()
        held = await store.thread_runs("big", now)
        found = branch(decode_records(held.records))
        served = branch_payloads(found.runs)
        times.append(time.perf_counter() - t)
    assert len(found.runs) == runs and served
    if hasattr(store, "aclose"):
        await store.aclose()
    if measuring:
        print(f"\n[{kind}: a {runs:,}-run thread of genui runs ({len(served):,} events served)] keep_run p50 "
              f"{statistics.median(keep) * 1e3:.2f} ms; restore (read, decode, branch, serve) "
              f"median {statistics.median(times) * 1e3:,.0f} ms")
