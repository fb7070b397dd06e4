"""agui_engine.loops.thread: a conversation across runs over a real agent, client tools run locally."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agui_engine.genui.component_stream import component_blocks
from agui_engine.loops.thread import MAX_TOOL_ROUNDS, Thread, ToolRoundsExceededError
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agui_engine.transports import ThreadedToolRunner

from ..thread_agents import ApprovalAgent, client_tools_agent

CALLS: list[str] = []


def get_weather(city: str) -> dict[str, Any]:
    """Look up the current weather for a city."""
    CALLS.append(city)
    return {"city": city, "temperature": 21.5, "condition": "Sunny", "humidity": 40, "wind_kph": 12}


async def test_send_runs_the_client_tool_and_follows_up_automatically() -> None:
    CALLS.clear()
    thread = Thread(client_tools_agent(), tools=[get_weather], tool_runner=ThreadedToolRunner())
    turn = await thread.send("What's the weather in Tokyo?")
    assert CALLS == ["Tokyo"]
    assert len(turn.runs) == 2 and [r.status for r in turn.runs] == ["finished", "finished"]
    assert turn.runs[0].pending_tool_call_ids and turn.pending_tool_call_ids == []
    (call_id, content, error) = turn.tool_results[0]
    assert error is None and json.loads(content)["temperature"] == 21.5
    roles = [m["role"] for m in thread.messages]
    assert roles[0] == "user" and "tool" in roles and roles[-1] == "assistant"
    tool_message = next(m for m in thread.messages if m["role"] == "tool")
    assert tool_message["toolCallId"] == call_id
    # the follow-up run used the tool's numbers in its answer; the card names its data (weather.current)
    (card,) = component_blocks(thread.accumulator)
    assert card["name"] == "WeatherCard" and card["props"]["params"] == {"city": "Tokyo"}
    assert "21.5°C" in thread.messages[-1]["content"]
    # a second turn on the same thread carries the history
    turn2 = await thread.send("thanks!")
    assert len(turn2.runs) == 1 and turn2.status == "finished"
    assert sum(1 for m in thread.messages if m["role"] == "user") == 2


async def test_a_raising_client_tool_sends_its_error_as_the_result() -> None:
    def get_weather(city: str) -> dict[str, Any]:
        """Look up the current weather for a city."""
        raise ConnectionError(f"weather service down for {city}")

    thread = Thread(client_tools_agent(), tools=[get_weather], tool_runner=ThreadedToolRunner())
    turn = await thread.send("What's the weather in Paris?")
    (_, content, error) = turn.tool_results[0]
    assert error == "ConnectionError: weather service down for Paris"
    assert content == "Error: ConnectionError: weather service down for Paris"
    tool_message = next(m for m in thread.messages if m["role"] == "tool")
    assert tool_message["error"] == error and tool_message["content"] == content
    assert turn.runs[-1].status == "finished" and len(turn.runs) >= 2


async def test_async_tools_and_unknown_pending_calls_stay_for_the_caller() -> None:
    async def get_weather(city: str) -> str:
        """Look up the current weather for a city."""
        return f"{city}: 18 C, cloudy"

    thread = Thread(client_tools_agent(), tools=[get_weather], tool_runner=ThreadedToolRunner())
    turn = await thread.send("What's the weather in Berlin?")
    assert turn.tool_results[0][1] == "Berlin: 18 C, cloudy"


class PendingCall:
    """Ends every run with a call of a tool the thread does not have, pending."""

    async def run(self, input: RunAgentInput) -> Any:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield ToolCallStartEvent(tool_call_id="x1", tool_call_name="open_browser", parent_message_id="m1")
        yield ToolCallArgsEvent(tool_call_id="x1", delta='{"url": "https://example.org"}')
        yield ToolCallEndEvent(tool_call_id="x1")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id,
                               outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["x1"]))


async def test_a_pending_call_of_an_unknown_tool_stays_for_the_caller() -> None:
    thread = Thread(PendingCall(), tools=[get_weather], tool_runner=ThreadedToolRunner())
    turn = await thread.send("open it")
    assert turn.pending_tool_call_ids == ["x1"] and len(turn.runs) == 1 and turn.tool_results == []
    thread.add_tool_result("x1", "opened")
    again = await thread.run()
    assert again.pending_tool_call_ids == []  # x1 is answered now
    assert any(m.get("toolCallId") == "x1" and m["content"] == "opened" for m in thread.messages)


async def test_interrupts_are_answered_with_resume_entries() -> None:
    seen: list[Interrupt] = []

    def approve(interrupt: Interrupt) -> ResumeEntry:
        seen.append(interrupt)
        return ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload={"approved": True})

    agent = ApprovalAgent()
    thread = Thread(agent, on_interrupt=approve)
    turn = await thread.send("deploy")
    assert [i.id for i in seen] == ["approve-1"] and seen[0].message == "Deploy to production?"
    assert len(turn.runs) == 2 and turn.interrupts == []
    assert agent.inputs[1].resume is not None and agent.inputs[1].resume[0].payload == {"approved": True}
    assert thread.messages[-1]["content"] == "approve-1: resolved {'approved': True}"

    manual = Thread(ApprovalAgent())
    turn = await manual.send("deploy")
    assert [i.id for i in turn.interrupts] == ["approve-1"] and len(turn.runs) == 1
    resumed = await manual.resume([ResumeEntry(interrupt_id="approve-1", status="cancelled")])
    assert resumed.status == "finished" and manual.messages[-1]["content"] == "approve-1: cancelled None"


async def test_follow_ups_are_bounded() -> None:
    class Looping(ApprovalAgent):  # interrupts on every run, resumed or not
        async def run(self, input: Any) -> Any:
            async for event in ApprovalAgent.run(self, input.__class__(**{**_fields(input), "resume": None})):
                yield event

    thread = Thread(Looping(), on_interrupt=lambda i: ResumeEntry(interrupt_id=i.id, status="resolved"),
                    max_tool_rounds=2)
    with pytest.raises(ToolRoundsExceededError, match="max_tool_rounds=2"):
        await thread.send("deploy")
    assert len(thread.accumulator.runs) == 3  # everything received stays on the thread
    assert MAX_TOOL_ROUNDS == 8


def _fields(struct: Any) -> dict[str, Any]:
    return {f: getattr(struct, f) for f in struct.__struct_fields__}


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="agent with run"):
        Thread(object())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="two client tools"):
        Thread(client_tools_agent(), tools=[get_weather, get_weather], tool_runner=ThreadedToolRunner())
    with pytest.raises(UsageError, match="max_tool_rounds"):
        Thread(client_tools_agent(), max_tool_rounds=-1)
