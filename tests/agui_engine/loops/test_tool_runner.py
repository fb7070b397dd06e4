"""The core's side of running tools: what needs a runner, the runner supplied to a context used
when none is given, the refusal -- when a run starts, not when the agent is built -- when there
is no runner at all, and a runner's deadline told apart from a tool's own TimeoutError
(agui_engine.loops.tool_runner)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from agui_engine import LLMAgent, Thread
from agui_engine.genui.components import ServerTool, tool_from_callable
from agui_engine.llm import Finish
from agui_engine.loops.tool_runner import (
    ToolDeadlineExceeded,
    ToolRunner,
    call_on_loop,
    needs_runner,
    supplied_tool_runner,
    supplying_tool_runner,
)
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import ToolCallResultEvent
from tests.helpers import run_input

from ..scripted_llm import ScriptedLLM, call, text
from ..thread_agents import client_tools_agent


def blocking(city: str) -> str:
    """A sync tool."""
    return city.upper()


async def awaiting(city: str) -> str:
    """An async tool."""
    return city.lower()


@pytest.mark.parametrize(
    ("fn", "inline", "timeout", "needed"),
    [
        (awaiting, False, None, False),
        (awaiting, False, 5.0, True),  # a deadline is a clock
        (blocking, True, None, False),  # known to return at once: on the loop
        (blocking, True, 5.0, True),
        (blocking, False, None, True),  # a worker thread
    ],
)
def test_needs_runner_is_the_table_of_the_module_docstring(fn: Any, inline: bool, timeout: float | None, needed: bool) -> None:
    assert needs_runner(tool_from_callable(fn), inline=inline, timeout=timeout) is needed


@pytest.fixture
def no_standard_runner() -> Iterator[None]:
    """The core alone: no runner supplied to the test's context."""
    with supplying_tool_runner(None):
        yield


async def test_an_agent_with_a_sync_tool_and_no_runner_at_all_is_refused_when_it_runs(no_standard_runner: None) -> None:
    agent = LLMAgent(ScriptedLLM(text("never")), tools=[blocking, awaiting], tool_timeout=None)  # built: no refusal
    events = agent.run(run_input("go"))
    with pytest.raises(UsageError) as info:
        await anext(events)  # before RUN_STARTED: a transport refuses it with a status, not a broken stream
    message = str(info.value)
    assert "'blocking'" in message and "'awaiting'" not in message
    assert "agui_engine.transports.run_agent" in message
    assert "tool_runner=agui_engine.transports.ThreadedToolRunner()" in message
    assert "\n" not in message


async def test_the_default_deadline_needs_a_runner_even_for_async_tools(no_standard_runner: None) -> None:
    with pytest.raises(UsageError, match="'awaiting'"):
        await anext(LLMAgent(ScriptedLLM(text("never")), tools=[awaiting]).run(run_input("go")))


async def test_an_agent_without_a_runner_of_its_own_uses_the_supplied_one(no_standard_runner: None) -> None:
    runner = RecordingRunner()
    llm = ScriptedLLM([*call(0, "c1", "blocking", '{"city": "Oslo"}'), Finish(reason="tool_calls")], text("ok"))
    with supplying_tool_runner(runner):
        assert supplied_tool_runner() is runner
        results = [e.content async for e in LLMAgent(llm, tools=[blocking]).run(run_input("go"))
                   if isinstance(e, ToolCallResultEvent)]
        # a runner given to the agent wins over the supplied one
        own = RecordingRunner()
        llm = ScriptedLLM([*call(0, "c1", "blocking", '{"city": "Rome"}'), Finish(reason="tool_calls")], text("ok"))
        _ = [e async for e in LLMAgent(llm, tools=[blocking], tool_runner=own).run(run_input("go"))]
    assert supplied_tool_runner() is None  # only inside the block
    assert results == ["OSLO"] and runner.calls == [("blocking", False, 60.0)]
    assert own.calls == [("blocking", False, 60.0)]


async def test_without_a_runner_async_and_inline_tools_run_on_the_loop(no_standard_runner: None) -> None:
    llm = ScriptedLLM([*call(0, "c1", "awaiting", '{"city": "Oslo"}'), *call(1, "c2", "blocking", '{"city": "Rome"}'),
                       Finish(reason="tool_calls")], text("ok"))
    agent = LLMAgent(llm, tools=[blocking, awaiting], inline_tools=["blocking"], tool_timeout=None)
    results = {e.tool_call_id: e.content async for e in agent.run(run_input("go")) if isinstance(e, ToolCallResultEvent)}
    assert results == {"c1": "oslo", "c2": "ROME"}


class RecordingRunner:
    """A runner of the test's own: records each call, runs it on the loop, and
    reports a deadline for tools named ``late``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, float | None]] = []

    async def __call__(
        self, tool: ServerTool, arguments: Mapping[str, Any], *, inline: bool, timeout: float | None
    ) -> Any:
        self.calls.append((tool.name, inline, timeout))
        if tool.name == "late":
            raise ToolDeadlineExceeded("stopped waiting")
        return await call_on_loop(tool, arguments)


def late() -> str:
    """Never returns in time (per the runner)."""
    return "never seen"


def own_timeout() -> str:
    """Raises a TimeoutError of its own."""
    raise TimeoutError("the database did not answer")


async def test_an_injected_runner_gets_every_call_with_inline_and_timeout() -> None:
    runner = RecordingRunner()
    assert isinstance(runner, ToolRunner)
    llm = ScriptedLLM([*call(0, "c1", "blocking", '{"city": "Oslo"}'), *call(1, "c2", "late", "{}"),
                       *call(2, "c3", "own_timeout", "{}"), Finish(reason="tool_calls")], text("ok"))
    agent = LLMAgent(llm, tools=[blocking, late, own_timeout], inline_tools=["late"], tool_timeout=7, tool_runner=runner)
    results = {e.tool_call_id: e.content async for e in agent.run(run_input("go")) if isinstance(e, ToolCallResultEvent)}
    assert sorted(runner.calls) == [("blocking", False, 7), ("late", True, 7), ("own_timeout", False, 7)]
    assert results["c1"] == "OSLO"
    # the runner's deadline is reported as the agent's timeout; the tool's own TimeoutError as the tool's failure
    assert results["c2"] == "Error: the tool late did not return within tool_timeout=7 s"
    assert results["c3"] == "Error: TimeoutError: the database did not answer"


async def test_a_thread_with_a_sync_client_tool_and_no_runner_at_all_is_refused_when_it_sends(
    no_standard_runner: None,
) -> None:
    thread = Thread(client_tools_agent(), tools=[blocking])  # built: no refusal
    with pytest.raises(UsageError, match=r"sync client tools 'blocking'.*ThreadedToolRunner\(\)"):
        await thread.send("What's the weather in Oslo?")
    assert thread.accumulator.runs == []  # refused before any run


async def test_a_thread_uses_the_supplied_runner_else_its_agents_for_its_sync_client_tools(
    no_standard_runner: None,
) -> None:
    def get_weather(city: str) -> dict[str, Any]:
        """Weather."""
        return {"city": city, "temperature": 3.0, "condition": "Snow"}

    supplied = RecordingRunner()
    with supplying_tool_runner(supplied):
        turn = await Thread(client_tools_agent(), tools=[get_weather]).send("What's the weather in Oslo?")
    assert supplied.calls == [("get_weather", False, None)] and "Snow" in turn.tool_results[0][1]
    carried = RecordingRunner()
    agent = client_tools_agent()
    agent.tool_runner = carried  # type: ignore[attr-defined]  # what a transport client carries
    await Thread(agent, tools=[get_weather]).send("What's the weather in Oslo?")
    assert carried.calls == [("get_weather", False, None)]


async def test_a_thread_runs_an_async_client_tool_without_a_runner(no_standard_runner: None) -> None:
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather."""
        return {"city": city, "temperature": 3.0, "condition": "Snow"}

    thread = Thread(client_tools_agent(), tools=[get_weather])
    turn = await thread.send("What's the weather in Oslo?")
    assert len(turn.runs) == 2 and "Snow" in turn.tool_results[0][1]
