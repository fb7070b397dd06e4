"""The agent loop's own cost per event, on top of the inner agent, side by side in one run.

The agent loop sits between every framework adapter or remote agent and the client, so its cost
is paid on every event of every wrapped run. Target (issue 10): at most 2 µs per event on top of
the inner agent. The inner agent is a pass-through async generator over pre-built events (no
JSON, no IO), so what is left is the loop itself: the async generator hop, the repair checks, the
Verifier, and for tool calls the argument parse (:class:`~agui_engine.loops.tool_calls.ToolCallTransformer`).

Workloads (decoded events, as an adapter yields them):

* ``example``: the recorded weather run shipped in ``agui_engine/data/example-run.sse`` (40 events:
  reasoning chunks, text, a tool call and its result, state, a component's CUSTOM events, steps),
  repeated as 25 runs (1,000 events, 25 ``run()`` calls).
* ``long-text``: one run with a 2,000-delta text message and a 500-fragment tool call (2,506 events).
* ``component``: one run with 10 weather cards (a sentence of text, then the card's
  ``show_component_WeatherCard`` call in 8-character fragments, 175 events in all) with the component
  registered: the loop parses every fragment, adds the component events (props deltas, status,
  end), checks the final props against the schema and answers each call. This is the component
  work itself, counted per *inner* event; it is not part of the 2 µs target.

Members of each group:

* ``ours``: ``AgentLoop(inner).run(input)``, every event consumed.
* ``inner``: the inner agent's ``run(input)`` consumed directly: the floor the loop adds to.
* ``verifier``: the inner agent plus ``Verifier.feed`` per event: what verification alone costs.

The per-event figure is ``(ours - inner) / inner events`` in CPU time, medians of interleaved
rounds (a loaded machine slows every member alike): ``python benchmarks/bench_agent_loop.py``.
The pytest-benchmark group of each workload (``pytest benchmarks/bench_agent_loop.py
--benchmark-enable --benchmark-only``) prints the members side by side as ratios.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from importlib import resources
from typing import Any

import msgspec
import pytest

from agui_engine.genui.components import Component
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.events import (
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UserMessage,
)
from agui_engine.protocol.verify import Verifier

CARD = Component("WeatherCard", "The weather of one city.", {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"},
                   "conditions": {"type": "string"}, "note": {"type": "string"}},
    "required": ["city", "temperature"],
})


def _example_runs(runs: int) -> list[list[Any]]:
    data = resources.files("agui_engine").joinpath("data", "example-run.sse").read_bytes()
    decoder = EventStreamDecoder("sse")
    one = decoder.feed(data) + decoder.close()
    return [
        [msgspec.structs.replace(e, run_id=f"run_{i}") if isinstance(e, (RunStartedEvent, RunFinishedEvent)) else e
         for e in one]
        for i in range(runs)
    ]


def _tool_call(name: str) -> list[Any]:
    args = '{"items":[' + ",".join(f'{{"n":{i}}}' for i in range(500)) + "]}"
    step = len(args) // 500
    return [ToolCallStartEvent(tool_call_id="c", tool_call_name=name, parent_message_id="m"),
            *(ToolCallArgsEvent(tool_call_id="c", delta=args[i : i + step]) for i in range(0, len(args), step)),
            ToolCallEndEvent(tool_call_id="c")]


def _long_text() -> list[list[Any]]:
    stream: list[Any] = [RunStartedEvent(thread_id="t", run_id="r"), TextMessageStartEvent(message_id="m")]
    stream += [TextMessageContentEvent(message_id="m", delta=f" word{i}") for i in range(2000)]
    stream.append(TextMessageEndEvent(message_id="m"))
    stream += [*_tool_call("f"), RunFinishedEvent(thread_id="t", run_id="r")]
    return [stream]


def _component() -> list[list[Any]]:
    """A dashboard of 10 weather cards, each call's arguments in 8-character fragments, with a
    sentence of text before each (what a model streams when it shows components)."""
    stream: list[Any] = [RunStartedEvent(thread_id="t", run_id="r")]
    for n in range(10):
        message = f"m{n}"
        stream += [TextMessageStartEvent(message_id=message),
                   *(TextMessageContentEvent(message_id=message, delta=w) for w in f"Here is city {n} for you:".split()),
                   TextMessageEndEvent(message_id=message)]
        args = (f'{{"_tambo_statusMessage":"Showing city {n}","city":"City number {n}","temperature":{n}.5,'
                f'"conditions":"partly cloudy with a light breeze","note":null}}')
        call = f"call_{n}"
        stream += [ToolCallStartEvent(tool_call_id=call, tool_call_name="show_component_WeatherCard",
                                      parent_message_id=message),
                   *(ToolCallArgsEvent(tool_call_id=call, delta=args[i : i + 8]) for i in range(0, len(args), 8)),
                   ToolCallEndEvent(tool_call_id=call)]
    stream.append(RunFinishedEvent(thread_id="t", run_id="r"))
    return [stream]


#: workload -> the runs (each a list of inner events) and the components the loop registers.
WORKLOADS: dict[str, tuple[list[list[Any]], list[Component]]] = {
    "example": (_example_runs(25), []),
    "long-text": (_long_text(), []),
    "component": (_component(), [CARD]),
}
INPUT = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")])


class PassThrough:
    """The inner agent: yields the next prepared run's events, nothing else."""

    def __init__(self, runs: list[list[Any]]) -> None:
        self.runs = runs
        self._next: Iterator[list[Any]] = iter(())

    def reset(self) -> None:
        self._next = iter(self.runs)

    async def run(self, input: RunAgentInput) -> AsyncIterator[Any]:
        for event in next(self._next):
            yield event


async def _consume(stream: AsyncIterator[Any]) -> int:
    n = 0
    async for _ in stream:
        n += 1
    return n


async def run_ours(inner: PassThrough, loop: AgentLoop) -> int:
    inner.reset()
    return sum([await _consume(loop.run(INPUT)) for _ in inner.runs])


async def run_inner(inner: PassThrough, loop: AgentLoop) -> int:
    inner.reset()
    return sum([await _consume(inner.run(INPUT)) for _ in inner.runs])


async def run_verifier(inner: PassThrough, loop: AgentLoop) -> int:
    inner.reset()
    n = 0
    for _ in inner.runs:
        verifier = Verifier()
        async for event in inner.run(INPUT):
            n += len(verifier.feed(event))
        verifier.close()
    return n


MEMBERS = {"ours": run_ours, "inner": run_inner, "verifier": run_verifier}


@pytest.fixture(scope="module")
def event_loop_runner() -> Iterator[asyncio.AbstractEventLoop]:
    runner = asyncio.new_event_loop()
    yield runner
    runner.close()


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("impl", list(MEMBERS))
def test_agent_loop(benchmark: Any, event_loop_runner: asyncio.AbstractEventLoop, impl: str, workload: str) -> None:
    benchmark.group = f"agent-loop-{workload}"
    runs, components = WORKLOADS[workload]
    inner = PassThrough(runs)
    loop = AgentLoop(inner, components=components)
    member = MEMBERS[impl]
    count = benchmark(lambda: event_loop_runner.run_until_complete(member(inner, loop)))
    inner_events = sum(len(r) for r in runs)
    assert count >= inner_events  # every event went through (components add some)
    benchmark.extra_info["inner_events"] = inner_events


def measure(rounds: int = 41) -> dict[str, dict[str, float]]:
    """CPU seconds (``time.process_time``) per workload and member, the median of ``rounds``
    rounds interleaved (inner, verifier, ours, inner, ...) so that a busy machine slows all
    alike, after one warm-up round of each."""
    out: dict[str, dict[str, float]] = {}
    runner = asyncio.new_event_loop()
    try:
        for workload, (runs, components) in sorted(WORKLOADS.items()):
            inner = PassThrough(runs)
            loop = AgentLoop(inner, components=components)
            samples: dict[str, list[float]] = {name: [] for name in MEMBERS}
            for member in MEMBERS.values():
                runner.run_until_complete(member(inner, loop))
            for _ in range(rounds):
                for name, member in MEMBERS.items():
                    start = time.process_time()
                    runner.run_until_complete(member(inner, loop))
                    samples[name].append(time.process_time() - start)
            out[workload] = {name: statistics.median(cpu) for name, cpu in samples.items()}
    finally:
        runner.close()
    return out


if __name__ == "__main__":
    for workload, medians in measure().items():
        events = sum(len(r) for r in WORKLOADS[workload][0])
        inner, ours, verifier = medians["inner"], medians["ours"], medians["verifier"]
        print(f"{workload:10s} {events:5d} inner events: inner agent alone {inner / events * 1e6:5.2f} us/event, "
              f"+ Verifier {(verifier - inner) / events * 1e6:5.2f}, + agent loop {(ours - inner) / events * 1e6:5.2f} "
              f"us/event (ratio {ours / inner:4.1f}x the inner agent; target <= 2 us on top)")
