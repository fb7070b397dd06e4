"""The cost of the 0.x wire (protocol/wire.py): framing a realistic run as the 1.0 wire against
framing it as the 0.x wire (every payload through ``to_wire0`` first), side by side in one run.

Workload: bench_codec's 300-event run, ending with a frontend tool call the client must answer
(``RUN_FINISHED.outcome.pendingToolCallIds``, the one event here 0.x rewrites); a run started by
a 0.x client also carries its input in RUN_STARTED (the second workload, ``with-input``).

Run: ``pytest benchmarks/bench_wire.py --benchmark-enable --benchmark-only``; the summary prints
the 0.x wire's time as a ratio of the 1.0 wire's (benchmarks/conftest.py).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from bench_codec import realistic_run  # noqa: E402  (rootdir-relative, as bench_proto imports)

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunFinishedEvent, RunFinishedSuccessOutcome, RunStartedEvent
from agui_engine.protocol.wire import to_wire0
from agui_engine.transports.sse_server import frame_sse

_EVENTS = realistic_run()[:-1] + [
    RunFinishedEvent(thread_id="thread_8f2c", run_id="run_41d0",
                     outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["call_7"]))
]
_INPUT = msgspec.json.decode(b'{"threadId":"thread_8f2c","runId":"run_41d0","messages":[{"id":"u1","role":"user",'
                             b'"content":"What\'s the weather in Z\\u00fcrich?"}]}')
PAYLOADS = {
    "plain": [encode_event(e) for e in _EVENTS],
    "with-input": [msgspec.json.encode({**msgspec.json.decode(encode_event(_EVENTS[0])), "input": _INPUT})]
    + [encode_event(e) for e in _EVENTS[1:]],
}
assert isinstance(_EVENTS[0], RunStartedEvent)


def frame_1(payloads: list[bytes]) -> bytes:
    return frame_sse("run_41d0", 1, payloads)


def frame_0(payloads: list[bytes]) -> bytes:
    return frame_sse("run_41d0", 1, [to_wire0(p) for p in payloads])


def test_the_0x_wire_changes_only_what_0x_rejects() -> None:
    for payloads in PAYLOADS.values():
        changed = [i for i, p in enumerate(payloads) if to_wire0(p) is not p]
        assert changed == ([0, len(payloads) - 1] if payloads is PAYLOADS["with-input"] else [len(payloads) - 1])


@pytest.mark.parametrize("impl", ["ours", "wire0"])
@pytest.mark.parametrize("workload", list(PAYLOADS))
def test_wire(benchmark: Any, workload: str, impl: str) -> None:
    benchmark.group = f"wire-{workload}"
    payloads = PAYLOADS[workload]
    data = benchmark(frame_1 if impl == "ours" else frame_0, payloads)
    assert data.count(b"\n\n") == len(payloads)
