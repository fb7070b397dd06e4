"""Scale-out benchmark: the gateway with the shared Redis event log vs the
in-memory log, side by side in one run (beside ``bench_transports.py``, whose
servers and clients it reuses).

What is measured, each gateway in its own process pinned to one core, a real
``redis-server`` started here on a free port:

* **server CPU per event** (gateway process, ``time.process_time`` read inside
  it) and **first-event latency** (client: request sent -> first ``data:``
  line, median and p99 over the streams) with 100 and 1,000 concurrent SSE
  streams, for ``engine-sse`` (in memory) and ``engine-sse-redis``; the ratio
  Redis / memory of CPU per event (target: at most 2x) and **Redis's own CPU**
  per event (from ``/proc/<pid>/stat`` of redis-server);
* **events per second one Redis sustains for N gateways**: N unpinned
  ``engine-sse-redis`` processes loaded at once; reported with the Redis CPU
  they cost and, from Redis CPU per event, the events/s one Redis core would
  sustain (the capacity figure a deployment plans with).

Run the full measurement::

    AGUI_BENCH_FULL=1 python -m pytest benchmarks/bench_scaleout.py -s --benchmark-enable
    python benchmarks/bench_scaleout.py --full

In CI (``--benchmark-disable``) it runs once at tiny sizes and only checks that
every stream got every event. Timing is never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_transports import FULL_REPEATS, Server, pin_client, run_input, sse_open  # noqa: E402

from tests.redis_server import RedisServer  # noqa: E402

#: Full plan: (concurrent streams, events per stream) for the memory-vs-Redis table.
FULL_LOAD = [(100, 1_000), (1000, 200)]
#: Gateways sharing one Redis for the throughput table (and streams x events each).
FULL_GATEWAYS = [1, 2]
FULL_GATEWAY_LOAD = (500, 400)
QUICK_LOAD = [(3, 40)]
QUICK_GATEWAYS = [2]
QUICK_GATEWAY_LOAD = (3, 40)


@dataclass
class Point:
    stack: str
    streams: int
    events: int
    wall: float
    cpu: float
    redis_cpu: float
    first_ms: list[float] = field(default_factory=list)

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.events * 1e6

    @property
    def redis_us(self) -> float:
        return self.redis_cpu / self.events * 1e6

    def first(self, q: float) -> float:
        data = sorted(self.first_ms)
        return data[min(len(data) - 1, int(q * len(data)))] if data else 0.0


@dataclass
class Throughput:
    gateways: int
    events: int
    wall: float
    redis_cpu: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall


async def timed_stream(port: int, events: int) -> tuple[int, float]:
    """One SSE stream: (events received, ms from request to the first event)."""
    t0 = time.perf_counter()
    r, w = await sse_open(port, json.dumps(run_input(events)).encode())
    count = 0
    first = 0.0
    tail = b""
    while data := await r.read(262144):
        n = (tail + data).count(b"data:")
        if n and not count:
            first = (time.perf_counter() - t0) * 1000
        count += n
        tail = data[-4:]
    w.close()
    return count, first


async def measure(server: Server, redis: RedisServer, streams: int, events: int) -> Point:
    await asyncio.gather(*(timed_stream(server.port, 20) for _ in range(min(streams, 20))))  # warm-up
    before, rbefore = await server.stats(), redis.cpu_seconds()
    t0 = time.perf_counter()
    got = await asyncio.gather(*(timed_stream(server.port, events) for _ in range(streams)))
    wall = time.perf_counter() - t0
    after, rafter = await server.stats(), redis.cpu_seconds()
    counts = [c for c, _ in got]
    assert all(c == events for c in counts), f"{server.stack}: expected {events} events per stream, got {set(counts)}"
    return Point(
        server.stack, streams, sum(counts), wall, after["cpu"] - before["cpu"], rafter - rbefore, [f for _, f in got]
    )


async def gateways_on_one_redis(redis: RedisServer, n: int, streams: int, events: int) -> Throughput:
    servers = [Server("engine-sse-redis", {"AGUI_BENCH_REDIS": redis.url, "AGUI_BENCH_PIN": "0"}) for _ in range(n)]
    try:
        await asyncio.gather(*(timed_stream(s.port, 20) for s in servers))
        rbefore = redis.cpu_seconds()
        t0 = time.perf_counter()
        got = await asyncio.gather(*(timed_stream(s.port, events) for s in servers for _ in range(streams)))
        wall = time.perf_counter() - t0
        assert all(c == events for c, _ in got)
        return Throughput(n, sum(c for c, _ in got), wall, redis.cpu_seconds() - rbefore)
    finally:
        for s in servers:
            s.close()


async def run_all(full: bool) -> tuple[list[Point], list[Throughput]]:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if full:
        pin_client()
    redis = RedisServer()
    redis.start()
    points: list[Point] = []
    throughput: list[Throughput] = []
    try:
        for stack in ("engine-sse", "engine-sse-redis"):
            server = Server(stack, {"AGUI_BENCH_REDIS": redis.url})
            try:
                for streams, events in FULL_LOAD if full else QUICK_LOAD:
                    runs = [await measure(server, redis, streams, events) for _ in range(FULL_REPEATS if full else 1)]
                    runs.sort(key=lambda p: p.cpu_us)
                    points.append(runs[len(runs) // 2])
            finally:
                server.close()
        streams, events = FULL_GATEWAY_LOAD if full else QUICK_GATEWAY_LOAD
        for n in FULL_GATEWAYS if full else QUICK_GATEWAYS:
            throughput.append(await gateways_on_one_redis(redis, n, streams, events))
    finally:
        redis.stop()
    return points, throughput


def report(points: list[Point], throughput: list[Throughput]) -> str:
    lines = [
        f"{'stack':<17} {'streams':>7} {'events':>8} {'events/s':>9} {'gateway CPU us/ev':>18}"
        f" {'redis CPU us/ev':>16} {'first event ms p50/p99':>23} {'CPU ratio redis/memory':>23}"
    ]
    memory = {p.streams: p for p in points if p.stack == "engine-sse"}
    for p in points:
        base = memory.get(p.streams)
        ratio = f"{p.cpu_us / base.cpu_us:.2f}x" if p.stack.endswith("redis") and base else ""
        lines.append(
            f"{p.stack:<17} {p.streams:>7} {p.events:>8} {p.events / p.wall:>9.0f} {p.cpu_us:>18.2f}"
            f" {p.redis_us:>16.2f} {p.first(0.5):>11.1f} / {p.first(0.99):<9.1f} {ratio:>23}"
        )
    lines.append("")
    lines.append("one Redis, N gateway processes (unpinned) streaming at once:")
    for t in throughput:
        per_event = t.redis_cpu / t.events * 1e6
        core = 1e6 / per_event if per_event else float("inf")
        lines.append(
            f"  {t.gateways} gateway(s): {t.events_per_s:9.0f} events/s, Redis CPU {per_event:.2f} us/event"
            f" ({t.redis_cpu / t.wall * 100:.0f}% of a core) -> one Redis core sustains ~{core:,.0f} events/s"
        )
    return "\n".join(lines)


def test_redis_log_vs_memory_side_by_side(benchmark: Any) -> None:
    full = os.environ.get("AGUI_BENCH_FULL") == "1"
    result = benchmark.pedantic(lambda: asyncio.run(run_all(full)), rounds=1, iterations=1)
    if result is None:
        return
    points, throughput = result
    text = report(points, throughput)
    print("\n" + text)
    benchmark.extra_info["report"] = text
    assert {p.stack for p in points} == {"engine-sse", "engine-sse-redis"}
    assert all(t.events > 0 for t in throughput)
    assert statistics.median(p.first(0.5) for p in points) >= 0


if __name__ == "__main__":
    print(report(*asyncio.run(run_all("--full" in sys.argv))))
