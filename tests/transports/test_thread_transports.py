"""The thread client over every transport: the same multi-run turn over SSE, WebSocket and stdio.

A real gateway on loopback (SSE, WebSocket) or a real subprocess (stdio) serves the decision loop over
the embedded model with no server tools; the thread's Python ``get_weather`` runs locally when the
first run ends with it pending, and its result goes back in a follow-up run.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agui_engine.genui.component_stream import component_blocks
from agui_engine.loops.thread import Thread
from agui_engine.transports import (
    SSEAgent,
    ThreadedToolRunner,
    WebSocketAgent,
    start_sse_server,
    start_websocket_server,
)
from agui_engine.transports.stdio_client import StdioAgent

from ..agui_engine.thread_agents import client_tools_agent

SPEC = "py:tests.agui_engine.thread_agents:client_tools_agent"


def get_weather(city: str) -> dict[str, Any]:
    """Look up the current weather for a city."""
    return {"city": city, "temperature": 7.5, "condition": "Rain", "humidity": 90, "wind_kph": 30}


@asynccontextmanager
async def remote(kind: str) -> AsyncIterator[Any]:
    if kind == "stdio":
        yield StdioAgent([sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio", "--agent", SPEC])
        return
    start = start_sse_server if kind == "sse" else start_websocket_server
    server = await start(client_tools_agent(), port=0)
    try:
        yield SSEAgent(server.url) if kind == "sse" else WebSocketAgent(server.url)
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["sse", "ws", "stdio"])
async def test_a_client_tool_turn_over_each_transport(kind: str) -> None:
    async with remote(kind) as agent:
        thread = Thread(agent, tools=[get_weather], tool_runner=ThreadedToolRunner())
        turn = await thread.send("What's the weather in Oslo?")
        assert [r.status for r in turn.runs] == ["finished", "finished"]
        assert turn.tool_results and turn.tool_results[0][2] is None
        (card,) = component_blocks(thread.accumulator)
        # the card names its data (weather.current); the local tool's numbers reached the model's answer
        assert card["streamingState"] == "done" and card["props"]["params"] == {"city": "Oslo"}
        assert "7.5°C" in thread.messages[-1]["content"]
        second = await thread.send("and thanks")
        assert second.status == "finished"
