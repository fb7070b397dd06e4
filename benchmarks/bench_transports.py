"""Transport benchmark: this gateway vs the reference stack, side by side in one run.

What is measured, for SSE and for WebSocket, each server in its own process
pinned to one core (``benchmarks/transport_servers.py``):

* events per second and **server CPU per event** (``time.process_time`` read
  inside the server before and after) with 1, 100 and 1,000 concurrent streams
  on loopback;
* **memory per idle open stream**: server RSS growth while N streams are open
  on a run that went silent after ``RUN_STARTED``, divided by N.

This engine runs with the whole gateway path on (verification, event ids, the
resume log, keep-alive timers, write coalescing). The reference stack is
FastAPI + uvicorn + the official SDK's ``EventEncoder`` (a WebSocket endpoint
sending ``model_dump_json`` per event for WS). Both stream the same events
(see ``transport_servers.py``), ready in bursts of 20 as a model's network
reads deliver them.

Run the full measurement (a few minutes)::

    AGUI_BENCH_FULL=1 python -m pytest benchmarks/bench_transports.py -s --benchmark-enable
    python benchmarks/bench_transports.py --full

In CI (``--benchmark-disable``, the default addopts) it runs once at tiny sizes
and only checks that every stack delivered every event. Timing is never
asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ALL_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
SERVER_SCRIPT = HERE / "transport_servers.py"

#: Full-size plan: (concurrent streams, events per stream). 1,000 events is a
#: long answer streamed token by token; enough that a stream's setup (HTTP
#: request, handshake) is amortised as it is in production, so the figure is the
#: per-event cost. The reference stack gets exactly the same load.
FULL_LOAD = [(1, 20_000), (100, 1_000), (1000, 1_000), (1000, 200)]
#: The last point (1,000 short streams of 200 events) is reported too, because
#: there the per-stream setup (request parsing, run start, handshake) is no
#: longer amortised: it is the honest figure for short answers.
FULL_IDLE = 1000
#: Each full-size load point runs this many times; the median (by server CPU per
#: event) is reported, because other work on a shared machine skews single runs.
FULL_REPEATS = 3
#: CI plan: prove the harness works, in a few seconds.
QUICK_LOAD = [(3, 40)]
QUICK_IDLE = 5
BURST = 20


@dataclass
class LoadResult:
    stack: str
    streams: int
    events: int
    wall: float
    cpu: float
    sys_cpu: float = 0.0

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall if self.wall else 0.0

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu / self.events * 1e6 if self.events else 0.0


@dataclass
class Results:
    load: list[LoadResult] = field(default_factory=list)
    idle_kib: dict[str, float] = field(default_factory=dict)


class Server:
    def __init__(self, stack: str, env: dict[str, str] | None = None) -> None:
        self.stack = stack
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), stack],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=HERE.parent,
            # The server pins itself to the lowest core of the set it inherits: give
            # it every core even when the load generator is pinned already.
            preexec_fn=(lambda: os.sched_setaffinity(0, ALL_CORES)) if ALL_CORES else None,  # noqa: PLW1509 - no threads here
        )
        assert self.proc.stdout is not None
        ports: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while len(ports) < 2 and time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode().split()
            if len(line) == 2:
                ports[line[0]] = int(line[1])
        self.port = ports["PORT"]
        self.stats_port = ports["STATS"]

    async def stats(self) -> dict[str, float]:
        r, w = await asyncio.open_connection("127.0.0.1", self.stats_port)
        w.write(b"GET /__stats HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        data = await r.read()
        w.close()
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_input(events: int, idle: bool = False) -> dict[str, Any]:
    rid = uuid.uuid4().hex
    return {
        "threadId": "bench",
        "runId": rid,
        "messages": [{"id": "u", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {"events": events, "burst": BURST, "idle": idle},
    }


# -- clients (raw sockets for SSE, so the client costs as little as possible) -----------------


async def sse_open(port: int, body: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(
        b"POST / HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(body), body)
    )
    return r, w


async def sse_stream(port: int, events: int) -> int:
    r, w = await sse_open(port, json.dumps(run_input(events)).encode())
    count = 0
    tail = b""
    while data := await r.read(262144):
        count += (tail + data).count(b"data:")
        tail = data[-4:]
    w.close()
    return count


async def sse_idle(port: int) -> asyncio.StreamWriter:
    r, w = await sse_open(port, json.dumps(run_input(10, idle=True)).encode())
    buf = b""
    while b"data:" not in buf:
        chunk = await r.read(65536)
        if not chunk:
            raise RuntimeError("idle stream closed")
        buf += chunk
    return w


async def ws_stream(port: int, events: int) -> int:
    from websockets.asyncio.client import connect

    count = 0
    async with connect(f"ws://127.0.0.1:{port}/", compression=None, max_size=None) as ws:
        await ws.send(json.dumps({"type": "run", "input": run_input(events)}))
        async for message in ws:
            count += message.count('"type":')
            if '"RUN_FINISHED"' in message or '"RUN_ERROR"' in message:
                break
    return count


async def ws_idle(port: int) -> Any:
    from websockets.asyncio.client import connect

    ws = await connect(f"ws://127.0.0.1:{port}/", compression=None, max_size=None, ping_interval=None)
    await ws.send(json.dumps({"type": "run", "input": run_input(10, idle=True)}))
    await ws.recv()
    return ws


# -- the measurement ----------------------------------------------------------------------------


async def measure_load(server: Server, kind: str, streams: int, events: int) -> LoadResult:
    one = sse_stream if kind == "sse" else ws_stream
    await asyncio.gather(*(one(server.port, 20) for _ in range(min(streams, 20))))  # warm-up
    before = await server.stats()
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(server.port, events) for _ in range(streams)))
    wall = time.perf_counter() - t0
    after = await server.stats()
    assert all(c == events for c in counts), f"{server.stack}: expected {events} events per stream, got {set(counts)}"
    return LoadResult(
        server.stack, streams, sum(counts), wall, after["cpu"] - before["cpu"], after["sys"] - before["sys"]
    )


async def measure_idle(server: Server, kind: str, n: int) -> float:
    await asyncio.sleep(0.2)
    before = await server.stats()
    opener = sse_idle if kind == "sse" else ws_idle
    handles = []
    for i in range(0, n, 100):  # open in waves so the accept backlog never overflows
        handles += await asyncio.gather(*(opener(server.port) for _ in range(min(100, n - i))))
    await asyncio.sleep(0.3)
    after = await server.stats()
    for h in handles:
        if kind == "sse":
            h.close()
        else:
            await h.close()
    return (after["rss"] - before["rss"]) / n / 1024


def pin_client() -> None:
    """Keep the load generator off the server's core (the server pins itself to
    the lowest one), so that the two do not share a core's caches."""
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:
            os.sched_setaffinity(0, set(cores[1:]))


async def run_all(full: bool) -> Results:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if full:
        pin_client()
    load = FULL_LOAD if full else QUICK_LOAD
    repeats = FULL_REPEATS if full else 1
    idle = FULL_IDLE if full else QUICK_IDLE
    results = Results()
    for kind in ("sse", "ws"):
        for stack in (f"engine-{kind}", f"ref-{kind}"):
            server = Server(stack)
            try:
                for streams, events in load:
                    runs = [await measure_load(server, kind, streams, events) for _ in range(repeats)]
                    runs.sort(key=lambda r: r.cpu_us_per_event)
                    results.load.append(runs[len(runs) // 2])  # the median run
                if full:
                    server.close()
                    server = Server(stack)  # a fresh process for a clean memory baseline
                results.idle_kib[stack] = await measure_idle(server, kind, idle)
            finally:
                server.close()
    return results


def report(results: Results) -> str:
    lines = [
        (
            f"{'stack':<11} {'streams':>7} {'events':>8} {'events/s':>10} {'server CPU us/event':>20}"
            f" {'(of which kernel)':>17} {'CPU ratio ref/engine':>21}"
        )
    ]
    by_key = {(r.stack, r.streams, r.events // r.streams): r for r in results.load}
    for r in results.load:
        kind = r.stack.split("-")[1]
        ref = by_key.get((f"ref-{kind}", r.streams, r.events // r.streams))
        ratio = f"{ref.cpu_us_per_event / r.cpu_us_per_event:.1f}x" if r.stack.startswith("engine") and ref else ""
        lines.append(
            f"{r.stack:<11} {r.streams:>7} {r.events:>8} {r.events_per_s:>10.0f} {r.cpu_us_per_event:>20.2f}"
            f" {r.sys_cpu / r.events * 1e6 if r.events else 0:>17.2f} {ratio:>21}"
        )
    lines.append("")
    lines.append("memory per idle open stream (server RSS growth / streams):")
    for stack, kib in results.idle_kib.items():
        lines.append(f"  {stack:<11} {kib:6.1f} KiB")
    return "\n".join(lines)


def test_transports_side_by_side(benchmark: Any) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    full = os.environ.get("AGUI_BENCH_FULL") == "1"
    results = benchmark.pedantic(lambda: asyncio.run(run_all(full)), rounds=1, iterations=1)
    if results is None:  # pytest-benchmark disabled mode returns the function's result too
        return
    text = report(results)
    print("\n" + text)
    benchmark.extra_info["report"] = text
    stacks = {r.stack for r in results.load}
    assert stacks == {"engine-sse", "ref-sse", "engine-ws", "ref-ws"}


if __name__ == "__main__":
    print(report(asyncio.run(run_all("--full" in sys.argv))))
