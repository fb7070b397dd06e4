"""A real LangGraph graph behind ``AgentLoop(..., mcp_servers=[...])``: the graph binds the MCP tools it
receives as client tools (the adapter's config convention), its model calls one, the graph ends the run
with the call pending, the loop runs it on the tests' own MCP server (stdio, a real subprocess) and runs
the graph again on the conversation with the result: one stream for the client."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage

from agui_engine.adapters.langgraph import LangGraphAgent
from agui_engine.adapters.mcp import MCPServer, mcp_connections
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.events import (
    RunAgentInput,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from agui_engine.protocol.verify import verify_events
from agui_engine.transports import run_agent

from .langgraph_graphs import Script, ScriptedChatModel, agent_graph, call, finish, text
from .test_mcp import _Served


@pytest.fixture(autouse=True)
async def _closed_connections() -> AsyncIterator[None]:
    yield
    await mcp_connections().aclose()


def _script(messages: Sequence[BaseMessage]) -> Script:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return text("The MCP server says ", str(last.content))
    return [*call("add", f"call_{uuid.uuid4().hex[:8]}", '{"a": 40', ', "b": 2}'), *finish()]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_langgraph_graph_gets_mcp_tools_as_client_tools_that_the_loop_runs(transport: str) -> None:
    served = _Served("http") if transport == "http" else None
    try:
        await _graph_run(MCPServer(url=served.url, server_id="remote") if served is not None else MCPServer(
            transport="stdio", command=sys.executable, args=("-m", "tests.adapters.mcp_servers", "stdio"),
            server_id="local", connect_timeout=120.0))  # a new Python process importing the SDK, at any load
    finally:
        if served is not None:
            served.stop()


async def _graph_run(server: MCPServer) -> None:
    model = ScriptedChatModel(choose=_script)
    loop = AgentLoop(LangGraphAgent(agent_graph(model, tools=())), mcp_servers=[server])
    input_ = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="add them")], tools=[],
                           context=[], state=None, forwarded_props=None)
    events: list[Any] = [e async for e in run_agent(loop, input_)]
    assert verify_events(events) == []  # the graph's own CUSTOM / STATE findings aside, a valid stream
    assert [e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)] == ["add"]
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["42.0"]
    assert "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent)).endswith(
        "The MCP server says 42.0")
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is None
    assert (finished.thread_id, finished.run_id) == ("t", "r")
    assert model.calls == 2  # the graph ran twice: the call, then the answer with the result
