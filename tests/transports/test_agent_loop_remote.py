"""A remote AG-UI agent behind the real SSE and WebSocket clients, wrapped by the agent loop, drives components."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agui_engine.genui.component_stream import COMPONENT_END, COMPONENT_PROPS_DELTA, COMPONENT_START, find_component
from agui_engine.genui.components import STATUS_MESSAGE_PARAMETER, Component
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.events import (
    CustomEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageChunkEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agui_engine.transports import SSEAgent, StdioAgent, WebSocketAgent, start_sse_server, start_websocket_server
from tests.helpers import run_input as user_input

from ..agui_engine.run_checks import check_run

CARD = Component("WeatherCard", "Shows the weather of one city.", {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
})


class FrameworkLike:
    """A remote agent the way a framework writes one: text as chunks, the component called as a
    client tool (no parentMessageId, arguments in pieces, standard parameter first), the run ending
    with the call pending. It only calls the component if the tool it was given has the engine's
    strict schema (so the test proves the tools went over the wire)."""

    def __init__(self) -> None:
        self.tools: list[Any] = []

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        self.tools = list(input.tools)
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageChunkEvent(message_id="m1", delta="Here is Oslo: ")
        (card,) = [t for t in input.tools if t.name == "show_component_WeatherCard"]
        assert list(card.parameters["properties"])[0] == STATUS_MESSAGE_PARAMETER
        yield ToolCallStartEvent(tool_call_id="call-1", tool_call_name=card.name)
        args = json.dumps({STATUS_MESSAGE_PARAMETER: "Showing the weather", "city": "Oslo", "temperature": -3.5})
        for i in range(0, len(args), 7):
            yield ToolCallArgsEvent(tool_call_id="call-1", delta=args[i : i + 7])
        yield ToolCallEndEvent(tool_call_id="call-1")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id,
                               outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["call-1"]))


def run_input() -> RunAgentInput:
    return user_input("weather in Oslo?")


def check_component_run(events: list[Any]) -> None:
    acc = check_run(events)
    names = [e.name for e in events if isinstance(e, CustomEvent)]
    assert names[0] == COMPONENT_START and COMPONENT_PROPS_DELTA in names and names[-1] == COMPONENT_END
    (end,) = [e.value for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    assert end["finalProps"] == {"city": "Oslo", "temperature": -3.5}
    block = find_component(acc, end["componentId"])
    assert block is not None and block["props"] == end["finalProps"] and block["streamingState"] == "done"
    # the message the component lives on is the remote agent's text message
    (start,) = [e.value for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_START]
    assert start["messageId"] == "m1"
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == "call-1" and "is shown" in result.content
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None  # answered: not pending


async def test_a_remote_sse_agent_drives_a_component() -> None:
    remote = FrameworkLike()
    async with await start_sse_server(remote) as server:
        loop = AgentLoop(SSEAgent(server.url), components=[CARD])
        events = [e async for e in loop.run(run_input())]
    check_component_run(events)
    assert [t.name for t in remote.tools] == ["show_component_WeatherCard"]


async def test_a_remote_websocket_agent_drives_a_component() -> None:
    remote = FrameworkLike()
    async with await start_websocket_server(remote) as server:
        loop = AgentLoop(WebSocketAgent(server.url), components=[CARD])
        events = [e async for e in loop.run(run_input())]
    check_component_run(events)


#: What ``agui-engine serve --transport stdio --agent py:...`` serves in the stdio test.
agent = FrameworkLike()


async def test_a_remote_stdio_agent_drives_a_component() -> None:
    command = [sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio",
               "--agent", "py:tests.transports.test_agent_loop_remote:agent"]
    loop = AgentLoop(StdioAgent(command), components=[CARD])
    events = [e async for e in loop.run(run_input())]
    check_component_run(events)
