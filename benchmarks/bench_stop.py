"""Stop latency: from a client's stop to the upstream model request being closed.

Side by side in one run, on the same chain (replayed OpenAI model over loopback
HTTP -> OpenAI adapter -> LLMAgent -> SSE gateway), each stop made after the
first text delta (``tests/transports/stop_measure.py``):

* **abort** -- the official @ag-ui/client's ``abortRun()`` (run by node): the
  connection closes, no DELETE. Before issue 9 this path kept the run (and the
  model request) alive for the 30 s grace period;
* **delete** -- an explicit ``DELETE <url>/runs/<runId>`` (what SSEAgent sends
  when closed early), the path that was always prompt.

The report is the median over the repeats and the ratio abort / delete.
Resolution: the replay server polls for the disconnect every 10 ms.

    AGUI_BENCH_FULL=1 python -m pytest benchmarks/bench_stop.py -s --benchmark-enable

In CI (``--benchmark-disable``) it runs each once and only checks that both
stopped the upstream request. Timing is never asserted.
"""

from __future__ import annotations

import os
import statistics
import sys

import pytest

from tests.transports.stop_measure import measure_stop

#: Repeats per stop kind in a full run (the median is reported: node start-up and
#: other work on a shared machine skew single runs); one in CI.
FULL_REPEATS = 15


async def test_stop_latency_abort_vs_delete(request: pytest.FixtureRequest) -> None:
    full = bool(os.environ.get("AGUI_BENCH_FULL")) or not request.config.getoption("benchmark_disable", True)
    repeats = FULL_REPEATS if full else 1
    figures: dict[str, list[float]] = {"abort": [], "delete": []}
    for i in range(repeats):
        for how in figures:
            result = await measure_stop(how, f"bench-{how}-{i}")
            assert result["stop_ms"] is not None, f"{how}: the upstream request was not closed"
            figures[how].append(result["stop_ms"])
    med = {how: statistics.median(values) for how, values in figures.items()}
    lines = [f"stop -> upstream model request closed, median of {repeats}:"]
    for how, values in figures.items():
        lines.append(f"  {how:6s} {med[how]:7.1f} ms  (min {min(values):.1f}, max {max(values):.1f})")
    lines.append(f"  ratio abort / delete: {med['abort'] / med['delete']:.2f}")
    print("\n" + "\n".join(lines), file=sys.stderr)
