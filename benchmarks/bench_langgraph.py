"""The LangGraph adapter: ours against ag-ui-langgraph 0.0.47 on the same graph, in one run.

Workload: a real langgraph graph (``agent -> tools -> agent``, the tests' graph with a
``MemorySaver`` checkpointer, which ag-ui-langgraph requires) over a scripted streaming chat
model: turn 1 streams :data:`TEXT_CHUNKS` text chunks and two tool calls whose arguments
come in :data:`ARG_CHUNKS` fragments each; the tool node runs both; turn 2 streams
:data:`TEXT_CHUNKS` more text chunks. Each round is one whole AG-UI run.

* ``ours``: :class:`agui_engine.adapters.langgraph.LangGraphAgent` (LangGraph's own
  ``astream`` stream modes, the translator, msgspec events).
* ``ag-ui-langgraph``: the official ``LangGraphAgent(emit_raw_events=False)``
  (``astream_events`` v2, pydantic events).
* ``bare-graph``: ``graph.ainvoke`` of the same graph and model with no adapter and no
  streaming consumer: the cost both adapters share. An adapter's own cost is its run minus
  this.

The pytest-benchmark summary prints each row's ratio to ours (wall time of a CPU-bound
run on one event loop). ``python3 benchmarks/bench_langgraph.py`` prints the median CPU time
(``time.process_time``, rounds interleaved) per run and the adapter CPU per emitted event of
each, and the ratio of the adapters' own CPU.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers when run as a script

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from agui_engine.adapters.langgraph import LangGraphAgent  # noqa: E402
from agui_engine.protocol.events import RunAgentInput, UserMessage  # noqa: E402
from tests.adapters.langgraph_graphs import (  # noqa: E402
    ScriptedChatModel,
    agent_graph,
    call,
    finish,
    official_events,
    text,
)

TEXT_CHUNKS = 200
ARG_CHUNKS = 100


def _model() -> ScriptedChatModel:
    fragments = ['{"city": "'] + ["x"] * (ARG_CHUNKS - 2) + ['"}']
    turn1 = [*text(*(f"w{i} " for i in range(TEXT_CHUNKS)), finish=False),
             *call("get_weather", "call_A", *fragments, index=0), *call("get_weather", "call_B", *fragments, index=1),
             *finish()]
    return ScriptedChatModel(scripts=[turn1, text(*(f"v{i} " for i in range(TEXT_CHUNKS)))])


def _input(i: int) -> RunAgentInput:
    return RunAgentInput(thread_id=f"bench-{i}", run_id=f"r{i}", messages=[UserMessage(id="u1", content="Paris?")])


def _runners() -> dict[str, Callable[[int], Coroutine[Any, Any, int]]]:
    ours_graph = agent_graph(_model(), checkpointer=InMemorySaver())
    theirs_graph = agent_graph(_model(), checkpointer=InMemorySaver())
    bare_graph = agent_graph(_model(), checkpointer=InMemorySaver())
    ours = LangGraphAgent(ours_graph)

    async def run_ours(i: int) -> int:
        return len([e async for e in ours.run(_input(i))])

    async def run_theirs(i: int) -> int:
        return len(await official_events(theirs_graph, _input(i)))

    async def run_bare(i: int) -> int:
        await bare_graph.ainvoke({"messages": [("user", "Paris?")]}, {"configurable": {"thread_id": f"bench-{i}"}})
        return 0

    return {"ours": run_ours, "ag-ui-langgraph": run_theirs, "bare-graph": run_bare}


@pytest.mark.benchmark(group="langgraph adapter: one run (2 model calls, 2 streamed tool calls)")
@pytest.mark.parametrize("impl", ["ours", "ag-ui-langgraph", "bare-graph"])
def test_langgraph_run(benchmark: Any, impl: str) -> None:
    runner = _runners()[impl]
    loop = asyncio.new_event_loop()
    counter = iter(range(10**9))
    try:
        events = benchmark(lambda: loop.run_until_complete(runner(next(counter))))
    finally:
        loop.close()
    if impl != "bare-graph":
        assert events > 2 * TEXT_CHUNKS


def measure(rounds: int = 25) -> dict[str, tuple[float, int]]:
    """Median CPU seconds per run and events per run of each implementation. The rounds are
    interleaved (ours, theirs, bare, ours, ...) so that a busy machine slows all alike, after
    one warm-up run of each."""
    runners = _runners()
    samples: dict[str, list[float]] = {name: [] for name in runners}
    events: dict[str, int] = {}
    loop = asyncio.new_event_loop()
    try:
        for runner in runners.values():
            loop.run_until_complete(runner(-1))
        for i in range(rounds):
            for name, runner in runners.items():
                start = time.process_time()
                events[name] = loop.run_until_complete(runner(i))
                samples[name].append(time.process_time() - start)
    finally:
        loop.close()
    return {name: (statistics.median(cpu), events[name]) for name, cpu in samples.items()}


def translator_cpu(rounds: int = 50) -> tuple[float, int]:
    """Our translator alone: CPU seconds per run to turn one run's recorded LangGraph stream
    items into AG-UI events, and the number of events (the adapter's own work, no graph)."""
    from agui_engine.adapters.langgraph import STREAM_MODES, GraphStreamTranslator

    graph = agent_graph(_model(), checkpointer=InMemorySaver())
    agent = LangGraphAgent(graph)
    config = agent._config(_input(0), [], [])

    async def record() -> list[Any]:
        return [item async for item in graph.astream({"messages": [("user", "Paris?")]}, config,
                                                     stream_mode=list(STREAM_MODES), subgraphs=True)]

    items = asyncio.run(record())
    samples, events = [], 0
    for _ in range(rounds):
        start = time.process_time()
        translator = GraphStreamTranslator()
        events = sum(len(translator.feed(item)) for item in items) + len(translator.finish())
        samples.append(time.process_time() - start)
    return statistics.median(samples), events


if __name__ == "__main__":
    own, own_events = translator_cpu()
    print(f"ours, translator alone: {own * 1e3:.2f} ms CPU per run, {own_events} events, "
          f"{own / own_events * 1e6:.2f} us per event")
    results = measure()
    bare = results["bare-graph"][0]
    for name, (cpu, events) in results.items():
        line = f"{name:16s} {cpu * 1e3:8.2f} ms CPU per run"
        if events:
            line += f", {events} events, adapter CPU {(cpu - bare) / events * 1e6:7.1f} us per event"
        print(line)
    theirs = results["ag-ui-langgraph"][0] - bare
    print(f"ag-ui-langgraph's CPU above the bare graph / our translator's CPU, per event: "
          f"{theirs / results['ag-ui-langgraph'][1] / (own / own_events):.0f}x; "
          f"whole run: {results['ag-ui-langgraph'][0] / results['ours'][0]:.1f}x")
