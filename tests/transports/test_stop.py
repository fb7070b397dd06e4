"""What "stop" means, measured with the real @ag-ui/client (see stop_measure.py).

The official client's ``abortRun()`` (a chat UI's stop button) aborts its fetch:
the connection closes and no DELETE is ever sent. The gateway then stops the
run -- closing the model's HTTP request -- at once, while a client that declared
it resumes (X-AGUI-Resumable, as SSEAgent sends) keeps the grace period. The
figures are printed here and reported by benchmarks/bench_stop.py; the
assertions only bound them generously (far from the 30 s grace period).
"""

from __future__ import annotations

import sys

from agui_engine.transports.http_headers import RESUMABLE_HEADER

from .stop_measure import STOP_DEADLINE_SECONDS, measure_stop


async def test_abort_run_of_the_official_client_closes_the_upstream_model_request_promptly() -> None:
    result = await measure_stop("abort", "stop-plain")
    seen = result["client"]["seen"]
    assert "TEXT_MESSAGE_CONTENT" in seen and "RUN_FINISHED" not in seen
    assert result["stop_ms"] is not None, f"the upstream request was still open {STOP_DEADLINE_SECONDS} s after abortRun()"
    assert result["upstream_disconnects"] == 1 and result["terminal_code"] == "disconnected"
    print(f"\nabortRun() -> upstream model request closed: {result['stop_ms']:.1f} ms", file=sys.stderr)


async def test_a_client_that_declares_resume_keeps_the_grace_period() -> None:
    """The same abort from a client that sent X-AGUI-Resumable: the run outlives
    the connection for the grace period (here 1 s), then stops as abandoned."""
    grace = 1.0
    result = await measure_stop("abort", "stop-resumable", headers={RESUMABLE_HEADER: "1"}, grace_seconds=grace)
    assert result["stop_ms"] is not None and result["terminal_code"] == "abandoned"
    assert result["stop_ms"] >= grace * 1000 * 0.9  # not before the grace period
    print(f"\ndeclared-resumable client, grace {grace:g} s -> upstream closed: {result['stop_ms']:.1f} ms", file=sys.stderr)

