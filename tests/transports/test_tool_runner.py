"""ThreadedToolRunner: sync tools in worker threads (the default executor or the given one,
with the caller's context variables), async and inline tools on the loop, and its
deadline told apart from a tool's own TimeoutError; and the standard runner the transports
supply: an LLMAgent or Thread with sync tools and no tool_runner works through run_agent,
the SSE, WebSocket and stdio servers and a Thread (in process and over SSE), and the runner
reaches nothing outside the run it was supplied to."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest

from agui_engine import LLMAgent, Thread
from agui_engine.demo.weather_model import EmbeddedModel
from agui_engine.genui.components import tool_from_callable
from agui_engine.loops.tool_runner import ToolDeadlineExceeded, ToolRunner, supplied_tool_runner
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
)
from agui_engine.protocol.verify import verify_events
from agui_engine.transports import (
    SSEAgent,
    StdioAgent,
    ThreadedToolRunner,
    WebSocketAgent,
    run_agent,
    run_via_gateway,
    start_sse_server,
)
from agui_engine.transports.tool_runner import STANDARD_TOOL_RUNNER
from tests.helpers import run_input

from .sync_tool_agent import make_agent

ROOT = Path(__file__).resolve().parents[2]

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


def where() -> dict[str, object]:
    """Which thread runs me, and what context I see."""
    return {"thread": threading.current_thread().name, "request": REQUEST_ID.get()}


async def where_async() -> dict[str, object]:
    """Async: on the loop."""
    return {"thread": threading.current_thread().name, "request": REQUEST_ID.get()}


def test_it_is_a_tool_runner() -> None:
    assert isinstance(ThreadedToolRunner(), ToolRunner)


async def test_sync_tools_run_in_a_worker_thread_async_and_inline_ones_on_the_loop() -> None:
    runner = ThreadedToolRunner()
    loop_thread = threading.current_thread().name
    REQUEST_ID.set("r-1")
    sync = await runner(tool_from_callable(where), {}, inline=False, timeout=None)
    inline = await runner(tool_from_callable(where), {}, inline=True, timeout=None)
    awaited = await runner(tool_from_callable(where_async), {}, inline=False, timeout=None)
    assert sync["thread"] != loop_thread and inline["thread"] == awaited["thread"] == loop_thread
    assert sync["request"] == inline["request"] == awaited["request"] == "r-1"


async def test_a_given_executor_runs_the_sync_tools_with_the_callers_context() -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tools") as pool:
        REQUEST_ID.set("r-2")
        result = await ThreadedToolRunner(pool)(tool_from_callable(where), {}, inline=False, timeout=None)
    assert str(result["thread"]).startswith("tools") and result["request"] == "r-2"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_deadline_raises_tool_deadline_exceeded(kind: str) -> None:
    release = threading.Event()

    def stuck_sync() -> str:
        """Blocks until released."""
        release.wait(10)
        return "late"

    async def stuck_async() -> str:
        """Sleeps past the deadline."""
        await asyncio.sleep(10)
        return "late"

    tool = tool_from_callable(stuck_sync if kind == "sync" else stuck_async)
    try:
        with pytest.raises(ToolDeadlineExceeded, match="did not return within 0.05 s"):
            await ThreadedToolRunner()(tool, {}, inline=False, timeout=0.05)
    finally:
        release.set()


async def test_a_tools_own_timeout_error_is_not_the_deadline() -> None:
    def own() -> str:
        """Its own client timed out."""
        raise TimeoutError("upstream")

    with pytest.raises(TimeoutError, match="upstream") as info:
        await ThreadedToolRunner()(tool_from_callable(own), {}, inline=False, timeout=5)
    assert not isinstance(info.value, ToolDeadlineExceeded)


# --------------------------------------------------------------------------- the standard runner
# LLMAgent(model, tools=[a_sync_function]) with no tool_runner, on every path that runs agents:
# the tool runs in a worker thread, never on the event loop.


def _tool_result(events: list[Event]) -> str:
    [result] = [e.content for e in events if isinstance(e, ToolCallResultEvent)]
    return result


def _in_a_worker_thread(result: str, loop_thread: str) -> None:
    assert result.startswith("Oslo from ") and result != f"Oslo from {loop_thread}", result


def test_importing_the_transports_supplies_nothing_and_the_clients_carry_the_standard_runner() -> None:
    assert supplied_tool_runner() is None  # no import-time side effect
    assert isinstance(STANDARD_TOOL_RUNNER, ThreadedToolRunner)
    for client in (SSEAgent("http://127.0.0.1:1/"), WebSocketAgent("ws://127.0.0.1:1/"), StdioAgent("true")):
        assert client.tool_runner is STANDARD_TOOL_RUNNER


async def test_run_agent_runs_a_sync_tool_in_a_worker_thread_with_no_runner_given() -> None:
    events = []
    async for event in run_agent(make_agent(), run_input("go")):
        assert supplied_tool_runner() is None  # supplied to the agent's steps only, not to the caller between them
        events.append(event)
    assert verify_events(events) == []
    _in_a_worker_thread(_tool_result(events), threading.current_thread().name)
    assert events[-1].type.value == "RUN_FINISHED"


async def test_run_agent_takes_an_async_generator_function_and_refuses_what_is_no_agent() -> None:
    async def echo(input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)

    assert [e.type.value async for e in run_agent(echo, run_input("go"))] == ["RUN_STARTED", "RUN_FINISHED"]
    with pytest.raises(UsageError, match="run_agent"):
        _ = [e async for e in run_agent(42, run_input("go"))]  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_a_served_agent_runs_its_sync_tool_in_a_worker_thread(transport: str) -> None:
    events = [e async for e in run_via_gateway(make_agent(), run_input("go"), transport=transport)]
    assert verify_events(events) == []
    _in_a_worker_thread(_tool_result(events), threading.current_thread().name)


async def test_a_stdio_served_agent_runs_its_sync_tool_in_a_worker_thread() -> None:
    command = [sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio",
               "--agent", "py:tests.transports.sync_tool_agent:agent"]
    events = [e async for e in StdioAgent(command, cwd=str(ROOT)).run(run_input("go"))]
    assert verify_events(events) == []
    _in_a_worker_thread(_tool_result(events), "MainThread")  # the server's loop runs in its main thread


async def test_a_thread_supplies_its_runner_to_an_in_process_agent_with_sync_tools() -> None:
    thread = Thread(make_agent(), tool_runner=ThreadedToolRunner())  # the LLMAgent has no runner of its own
    turn = await thread.send("go")
    _in_a_worker_thread(_tool_result(turn.events), threading.current_thread().name)
    assert thread.messages[-1]["content"].startswith("ran: Oslo from ")
    assert supplied_tool_runner() is None


async def test_an_in_process_agent_with_sync_tools_and_no_runner_anywhere_ends_with_one_line() -> None:
    with pytest.raises(UsageError, match=r"server tools 'which_thread'.*run_agent"):
        await Thread(make_agent()).send("go")


async def test_a_thread_over_sse_runs_its_sync_client_tool_in_a_worker_thread() -> None:
    def get_weather(city: str) -> dict[str, object]:
        """Look up the current weather for a city (a client tool: it runs here, in the client)."""
        return {"city": city, "temperature": 21.0, "condition": threading.current_thread().name}

    server = await start_sse_server(LLMAgent(EmbeddedModel()), port=0)
    try:
        thread = Thread(SSEAgent(server.url), tools=[get_weather])  # the README's example: no tool_runner
        turn = await thread.send("What's the weather in Tokyo?")
    finally:
        await server.close()
    assert len(turn.runs) == 2 and turn.tool_results[0][2] is None
    condition = msgspec.json.decode(turn.tool_results[0][1])["condition"]
    assert condition != threading.current_thread().name
