"""The CrewAI adapter: its own CPU per event and the time to the first token, in one run.

Workload: the tests' two-agent sequential crew (forecaster with a tool, then writer) over
CrewAI's own ``BaseLLM`` extension point, scripted: the forecaster's first reply calls the
tool, each reply streams :data:`WORDS` whitespace-separated chunks through CrewAI's
stream-chunk event. Each round is one whole kickoff.

* ``bare-crew``: ``crew.copy().kickoff()`` with no adapter: the cost CrewAI itself spends.
* ``ours``: :class:`agui_engine.adapters.crewai.CrewAIAgent` running the same crew as an
  AG-UI run. Its own cost is its run minus ``bare-crew``.

``ag-ui-crewai`` 1.0 is not beside it: it translates only flow code that calls its own
litellm helper, so on a Crew it emits no tokens at all before the crew ends (nothing to
compare per event; its time to first token is the crew's whole run).

``python3 benchmarks/bench_crewai.py`` prints median CPU per run (``time.process_time``,
rounds interleaved), the adapter's CPU per emitted event, and the wall time to the first
``TEXT_MESSAGE_CONTENT`` against the crew's whole run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers when run as a script

from agui_engine.adapters.crewai import CrewAIAgent  # noqa: E402
from agui_engine.events import TextMessageContentEvent  # noqa: E402
from tests.adapters.test_crewai import ScriptedLLM, final, run_input, use_tool, weather_crew  # noqa: E402

#: words per scripted reply (one stream chunk each)
WORDS = 200


def make_crew(delay: float = 0.0) -> Any:
    text = " ".join(["sunny"] * WORDS)
    return weather_crew(
        ScriptedLLM(model="a", replies=[use_tool("Paris"), final(text)], delay=delay),
        ScriptedLLM(model="b", replies=[final(text)], delay=delay),
    )


def bare(crew: Any) -> None:
    crew.copy().kickoff(inputs={"message": "Paris"})


async def ours(agent: CrewAIAgent) -> int:
    return len([e async for e in agent.run(run_input("Paris"))])


async def first_token(agent: CrewAIAgent) -> tuple[float, float]:
    """Seconds to the first TEXT_MESSAGE_CONTENT and to the end of the run."""
    start = time.perf_counter()
    first = None
    async for event in agent.run(run_input("Paris")):
        if first is None and isinstance(event, TextMessageContentEvent):
            first = time.perf_counter() - start
    return first if first is not None else float("nan"), time.perf_counter() - start


def test_bench_bare_crew(benchmark: Any) -> None:
    crew = make_crew()
    benchmark(bare, crew)


def test_bench_ours(benchmark: Any) -> None:
    agent = CrewAIAgent(make_crew())
    count = benchmark(lambda: asyncio.run(ours(agent)))
    assert count > 2 * WORDS


def main(rounds: int = 15) -> None:
    crew = make_crew()
    agent = CrewAIAgent(crew)
    bare_cpu: list[float] = []
    ours_cpu: list[float] = []
    events = 0
    for _ in range(rounds):  # interleaved, so drift hits both alike
        t = time.process_time()
        bare(crew)
        bare_cpu.append(time.process_time() - t)
        t = time.process_time()
        events = asyncio.run(ours(agent))
        ours_cpu.append(time.process_time() - t)
    b, o = statistics.median(bare_cpu), statistics.median(ours_cpu)
    print(f"bare crew   {b * 1e3:8.2f} ms CPU per run")
    print(f"ours        {o * 1e3:8.2f} ms CPU per run, {events} events")
    print(f"adapter     {(o - b) / events * 1e6:8.2f} us CPU per event ({(o - b) / b:.1%} on top of the crew)")
    paced = CrewAIAgent(make_crew(delay=0.002))  # 2 ms per chunk, like a model streaming
    ttft, total = asyncio.run(first_token(paced))
    print(f"first token {ttft * 1e3:8.1f} ms of a {total * 1e3:.1f} ms run ({ttft / total:.1%}); "
          "ag-ui-crewai on a Crew: none before the end")


if __name__ == "__main__":
    pytest.importorskip("crewai")
    main()
