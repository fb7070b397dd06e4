"""Front ends and tracing, side by side in one run (issue 33): server CPU per event of

* ``engine-sse``      -- the aiohttp gateway (``create_app``), tracing off;
* ``engine-sse-otel`` -- the same with every run traced (``RegistryOptions(tracing=True)``, the SDK's
  TracerProvider with a batching processor, OTel counters on): what tracing costs per event;
* ``engine-asgi``     -- the same gateway as an ASGI app (``create_asgi_app``) under uvicorn;
* ``ref-sse``         -- the official pattern: FastAPI + uvicorn + ``ag_ui.encoder.EventEncoder``.

Each stack runs in its own process (``benchmarks/transport_servers.py``), pinned to one core, and
streams the same events; CPU is ``time.process_time`` read inside the server before and after
(``bench_transports.measure_load``). The median of the repeats is reported.

    AGUI_BENCH_FULL=1 python -m pytest benchmarks/bench_frontends.py -s --benchmark-enable

In CI (``--benchmark-disable``) it runs once at a tiny size and only checks that every stack
delivered every event. Timing is never asserted. Figures: spec/transports.md (front ends).
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_transports import LoadResult, Server, measure_load, pin_client  # noqa: E402

STACKS = ("engine-sse", "engine-sse-otel", "engine-asgi", "ref-sse")
#: (concurrent streams, events per stream) at full size, and the CI size.
FULL_LOAD = [(1, 20_000), (100, 1_000)]
QUICK_LOAD = [(3, 40)]
FULL_REPEATS = 3


async def run_all(full: bool) -> list[LoadResult]:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if full:
        pin_client()
    results: list[LoadResult] = []
    for stack in STACKS:
        server = Server(stack)
        try:
            for streams, events in FULL_LOAD if full else QUICK_LOAD:
                runs = [await measure_load(server, "sse", streams, events) for _ in range(FULL_REPEATS if full else 1)]
                runs.sort(key=lambda r: r.cpu_us_per_event)
                results.append(runs[len(runs) // 2])
        finally:
            server.close()
    return results


def report(results: list[LoadResult]) -> str:
    base = {(r.streams, r.events): r.cpu_us_per_event for r in results if r.stack == "engine-sse"}
    lines = [f"{'stack':<16} {'streams':>7} {'events':>8} {'events/s':>10} {'CPU us/event':>13} {'vs engine-sse':>14}"]
    for r in results:
        ratio = r.cpu_us_per_event / base[(r.streams, r.events)] if base.get((r.streams, r.events)) else 0.0
        lines.append(f"{r.stack:<16} {r.streams:>7} {r.events:>8} {r.events_per_s:>10.0f} {r.cpu_us_per_event:>13.2f}"
                     f" {ratio:>13.2f}x")
    return "\n".join(lines)


def test_front_ends_and_tracing_side_by_side(benchmark: Any) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("opentelemetry.sdk")
    full = os.environ.get("AGUI_BENCH_FULL") == "1"
    results = benchmark.pedantic(lambda: asyncio.run(run_all(full)), rounds=1, iterations=1)
    if results is None:
        return
    text = report(results)
    print("\n" + text)
    benchmark.extra_info["report"] = text
    assert {r.stack for r in results} == set(STACKS)
