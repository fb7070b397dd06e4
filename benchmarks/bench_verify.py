"""Verifier and accumulator cost per event: ours against ag-ui-validate 0.4.0, side by side in one run.

The verifier runs on every event in the gateway's hot path, so what matters is its cost per event
on a realistic stream. Two workloads, both already decoded (verification is measured, not JSON):

* ``example``: the recorded weather run shipped in ``agui_engine/data/example-run.sse`` (40 events:
  reasoning chunks, text, a tool call and its result, state, a component's tool call and CUSTOM
  events, steps), repeated as 25 sequential runs in one stream (1,000 events).
* ``long-text``: one run with a 2,000-delta text message and a 500-fragment tool call.

Members of each group:

* ``ours``: ``Verifier().feed`` for every event, then ``close()``.
* ``ag-ui-validate``: its ``Validator.feed`` on the events as dicts (what it takes), then
  ``finalize()``. It is the only other AG-UI stream checker for Python.
* ``loop``: iterating over the events and doing nothing: the floor.

The ``accumulate`` group measures ``Accumulator.apply`` on the same streams (nothing to compare it
with: the official Python SDK has no client).

Run: ``pytest benchmarks/bench_verify.py --benchmark-enable --benchmark-only``; the summary prints
each member's ratio to ours (benchmarks/conftest.py).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import msgspec
import pytest
from ag_ui_validate import create_validator

from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import EventStreamDecoder, encode_event
from agui_engine.protocol.events import (
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agui_engine.protocol.verify import Verifier


def _example_stream(runs: int) -> list[Any]:
    data = resources.files("agui_engine").joinpath("data", "example-run.sse").read_bytes()
    decoder = EventStreamDecoder("sse")
    one = decoder.feed(data) + decoder.close()
    stream: list[Any] = []
    for i in range(runs):
        for event in one:
            if isinstance(event, (RunStartedEvent, RunFinishedEvent)):
                event = msgspec.structs.replace(event, run_id=f"run_{i}")
            stream.append(event)
    return stream


def _long_text_stream() -> list[Any]:
    stream: list[Any] = [RunStartedEvent(thread_id="t", run_id="r"), TextMessageStartEvent(message_id="m")]
    stream += [TextMessageContentEvent(message_id="m", delta=f" word{i}") for i in range(2000)]
    stream.append(TextMessageEndEvent(message_id="m"))
    stream.append(ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m"))
    args = '{"items":[' + ",".join(f'{{"n":{i}}}' for i in range(500)) + "]}"
    step = len(args) // 500
    stream += [ToolCallArgsEvent(tool_call_id="c", delta=args[i : i + step]) for i in range(0, len(args), step)]
    stream += [ToolCallEndEvent(tool_call_id="c"), RunFinishedEvent(thread_id="t", run_id="r")]
    return stream


WORKLOADS = {"example": _example_stream(25), "long-text": _long_text_stream()}
AS_DICTS = {name: [msgspec.json.decode(encode_event(e)) for e in events] for name, events in WORKLOADS.items()}


def verify_ours(events: list[Any]) -> int:
    verifier = Verifier()
    out = 0
    for event in events:
        out += len(verifier.feed(event))
    verifier.close()
    return out


def verify_ag_ui_validate(events: list[dict[str, Any]]) -> int:
    validator = create_validator()
    for event in events:
        validator.feed(event)
    validator.finalize()
    return sum(d.severity == "error" for d in validator.report().diagnostics)


def loop_only(events: list[Any]) -> int:
    n = 0
    for _event in events:
        n += 1
    return n


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("impl", ["ours", "ag-ui-validate", "loop"])
def test_verify(benchmark: Any, impl: str, workload: str) -> None:
    benchmark.group = f"verify-{workload}"
    if impl == "ours":
        result = benchmark(verify_ours, WORKLOADS[workload])
        assert result >= len(WORKLOADS[workload])
    elif impl == "ag-ui-validate":
        assert benchmark(verify_ag_ui_validate, AS_DICTS[workload]) == 0
    else:
        assert benchmark(loop_only, WORKLOADS[workload]) == len(WORKLOADS[workload])


def accumulate(events: list[Any]) -> int:
    acc = Accumulator()
    for event in events:
        acc.apply(event)
    return len(acc.messages)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_accumulate(benchmark: Any, workload: str) -> None:
    benchmark.group = f"accumulate-{workload}"
    benchmark.extra_info["impl"] = "ours"
    assert benchmark(accumulate, WORKLOADS[workload]) >= 1
