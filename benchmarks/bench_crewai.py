"""The CrewAI adapter: its own CPU per event and the time to the first token, side by side
with ``ag-ui-crewai`` 1.0 (the official bridge) in one run, reported as ratios.

Workloads (the tests' own: ``tests/adapters/test_crewai.py``, ``tests/adapters/crewai_flows.py``):

* **the crew**: the two-agent sequential crew (forecaster with a tool, then writer) over
  CrewAI's own ``BaseLLM`` extension point, scripted; each reply streams :data:`WORDS`
  whitespace-separated chunks through CrewAI's stream-chunk event.
* **the flow**: a flow written ``ag-ui-crewai``'s way (``CopilotKitState``,
  ``copilotkit_emit_state``, ``copilotkit_stream`` around ``litellm.acompletion`` streaming the
  replay server's recorded Chat Completions text) whose second method kicks off the crew.
  Both bridges can run it: the differential test checks they carry the same content.

Measured, rounds interleaved so drift hits all alike (``time.process_time``: every thread of
the process, the replay server included, the same for all):

* ``bare``: the kickoff with no bridge -- what CrewAI (and litellm) spend themselves.
* ``ours``: :class:`agui_engine.adapters.crewai.CrewAIAgent`, every event encoded for the
  wire (``encode_sse``).
* ``theirs``: ``ag-ui-crewai``'s FastAPI flow endpoint, driven in-process as an ASGI app (no
  sockets: the body chunks it sends are what it would write to the wire).

Adapter CPU per event = (bridge run - bare run) / events the bridge emitted. Time to first
token on the crew, paced at 2 ms per chunk like a model streaming, wrapped in a one-method
flow for theirs (it has no crew streaming at all): ours is the first ``TEXT_MESSAGE_CONTENT``;
theirs is the first event that carries the crew's answer to the client (it emits no text
content for a crew: the answer arrives in the ``MESSAGES_SNAPSHOT`` / ``STATE_SNAPSHOT`` after
the method ends).

``python3 benchmarks/bench_crewai.py`` prints the figures; under pytest each side runs once
(CI checks that they work; ``--benchmark-only`` times them).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# not OTEL_SDK_DISABLED: set at collection, it would silence every other test's OpenTelemetry SDK
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", CREWAI_TRACING_ENABLED="false",
                  CREWAI_DISABLE_TRACKING="true", LITELLM_LOCAL_MODEL_COST_MAP="True")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers when run as a script

from ag_ui_crewai import CopilotKitState  # noqa: E402
from crewai.flow.flow import Flow, start  # noqa: E402

from agui_engine.adapters.crewai import CrewAIAgent  # noqa: E402
from agui_engine.adapters.replay import ReplayServer  # noqa: E402
from agui_engine.protocol.codec import encode_sse  # noqa: E402
from agui_engine.protocol.events import TextMessageContentEvent  # noqa: E402
from tests.adapters.crewai_flows import QUESTION, chat_flow  # noqa: E402
from tests.adapters.test_crewai import ScriptedLLM, final, use_tool, weather_crew  # noqa: E402

#: words per scripted crew reply (one stream chunk each)
WORDS = 200
#: words per crew reply when pytest runs each side once (CI checks they work, fast)
TEST_WORDS = 20
#: seconds between two chunks of the paced crew (a model streaming)
PACE = 0.002

INPUT = QUESTION


def make_crew(delay: float = 0.0) -> Any:
    text = " ".join(["sunny"] * WORDS)
    return weather_crew(
        ScriptedLLM(model="a", replies=[use_tool("Paris"), final(text)], delay=delay),
        ScriptedLLM(model="b", replies=[final(text)], delay=delay),
    )


def crew_flow(delay: float) -> type[Flow[Any]]:
    """The crew alone, in the one-method flow ag-ui-crewai needs to run anything."""

    class CrewFlow(Flow[CopilotKitState]):
        @start()
        def forecast(self) -> str:
            out = make_crew(delay).kickoff(inputs={"message": "Paris"})
            self.state.messages.append({"role": "assistant", "content": out.raw})
            return str(out.raw)

    return CrewFlow


async def ours(agent: CrewAIAgent, marks: list[float] | None = None) -> int:
    """Events of one run, each encoded for the wire; ``marks`` gets the time of the first token."""
    count = 0
    async for event in agent.run(INPUT):
        encode_sse(event)
        count += 1
        if marks is not None and not marks and isinstance(event, TextMessageContentEvent):
            marks.append(time.perf_counter())
    return count


def official_app(flow: Any) -> Any:
    from ag_ui_crewai import add_crewai_flow_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_crewai_flow_fastapi_endpoint(app, flow, "/")
    return app


#: What the crew's answer starts with (its tool result, "Paris: sunny, 21 C", does not).
ANSWER = b"sunny sunny"


async def theirs(app: Any, marks: list[float] | None = None, needle: bytes = ANSWER) -> int:
    """One run through ag-ui-crewai's endpoint as an ASGI app; the events it sent.
    ``marks`` gets the time of its first body chunk that carries ``needle``."""
    import msgspec

    body = msgspec.json.encode(msgspec.to_builtins(INPUT))
    received = False
    count = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            await asyncio.Event().wait()  # the client stays connected
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal count
        if message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            count += chunk.count(b"\ndata:") + chunk.startswith(b"data:")
            if marks is not None and not marks and needle in chunk:
                marks.append(time.perf_counter())

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/", "raw_path": b"/", "query_string": b"", "root_path": "", "server": ("bench", 80),
             "client": ("bench", 1), "headers": [(b"content-type", b"application/json"),
                                                  (b"accept", b"text/event-stream")]}
    await app(scope, receive, send)
    return count


async def bare(flow_type: type[Flow[Any]]) -> None:
    flow = flow_type()
    await asyncio.to_thread(flow.kickoff, inputs={"messages": [{"role": "user", "content": "Weather in Paris?"}]})


async def cpu(call: Any) -> tuple[float, Any]:
    t = time.process_time()
    result = await call()
    return time.process_time() - t, result


async def measure(rounds: int) -> dict[str, Any]:
    async with ReplayServer() as server:
        flow_type = chat_flow(server.base_url("openai_chat", "text"), crew_words=WORDS)
        agent, app = CrewAIAgent(flow_type), official_app(flow_type())
        await bare(flow_type), await ours(agent), await theirs(app)  # warm: imports, litellm's first call
        samples: dict[str, list[float]] = {"bare": [], "ours": [], "theirs": []}
        counts: dict[str, int] = {}
        for _ in range(rounds):
            took, _ = await cpu(lambda: bare(flow_type))
            samples["bare"].append(took)
            took, counts["ours"] = await cpu(lambda: ours(agent))
            samples["ours"].append(took)
            took, counts["theirs"] = await cpu(lambda: theirs(app))
            samples["theirs"].append(took)
        medians = {k: statistics.median(v) for k, v in samples.items()}
        ttft: dict[str, list[float]] = {"ours": [], "theirs": [], "ours_total": [], "theirs_total": []}
        paced = crew_flow(PACE)
        paced_agent, paced_app = CrewAIAgent(paced), official_app(paced())
        await ours(paced_agent), await theirs(paced_app)
        for _ in range(max(1, rounds // 5)):
            for name, run in (("ours", lambda m: ours(paced_agent, m)), ("theirs", lambda m: theirs(paced_app, m))):
                marks: list[float] = []
                t0 = time.perf_counter()
                await run(marks)
                ttft[name].append(marks[0] - t0)
                ttft[name + "_total"].append(time.perf_counter() - t0)
    return {"cpu": medians, "events": counts, "ttft": {k: statistics.median(v) for k, v in ttft.items()}}


def report(figures: dict[str, Any]) -> None:
    c, n, t = figures["cpu"], figures["events"], figures["ttft"]
    ours_per, theirs_per = (c["ours"] - c["bare"]) / n["ours"], (c["theirs"] - c["bare"]) / n["theirs"]
    print(f"bare flow   {c['bare'] * 1e3:8.1f} ms CPU per run (CrewAI + litellm + the crew)")
    print(f"ours        {c['ours'] * 1e3:8.1f} ms CPU per run, {n['ours']} events: {ours_per * 1e6:7.1f} us per event")
    print(f"theirs      {c['theirs'] * 1e3:8.1f} ms CPU per run, {n['theirs']} events: {theirs_per * 1e6:7.1f} us per event")
    print(f"CPU per event ours/theirs = {ours_per / theirs_per:.3f}; adapter CPU per run ours/theirs = "
          f"{(c['ours'] - c['bare']) / (c['theirs'] - c['bare']):.2f}; whole run ours/theirs = {c['ours'] / c['theirs']:.2f}")
    print(f"first token of the crew: ours {t['ours'] * 1e3:.0f} ms of {t['ours_total'] * 1e3:.0f} ms, "
          f"theirs {t['theirs'] * 1e3:.0f} ms of {t['theirs_total'] * 1e3:.0f} ms: "
          f"ours/theirs = {t['ours'] / t['theirs']:.3f}")


@pytest.mark.timeout(180)  # the flow, its crew and litellm's first import (5-10 s) on a loaded machine
def test_bench_ours(benchmark: Any) -> None:
    async def once() -> int:
        async with ReplayServer() as server:
            return await ours(CrewAIAgent(chat_flow(server.base_url("openai_chat", "text"), crew_words=TEST_WORDS)))

    assert benchmark.pedantic(lambda: asyncio.run(once()), rounds=1) > 2 * TEST_WORDS


@pytest.mark.timeout(180)  # as above, and ag-ui-crewai's per-request flow copy
def test_bench_theirs(benchmark: Any) -> None:
    async def once() -> int:
        async with ReplayServer() as server:
            return await theirs(official_app(chat_flow(server.base_url("openai_chat", "text"), crew_words=TEST_WORDS)()))

    assert benchmark.pedantic(lambda: asyncio.run(once()), rounds=1) > 5


if __name__ == "__main__":
    report(asyncio.run(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 10)))
