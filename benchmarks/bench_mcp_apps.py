"""MCP Apps' proxied requests: what one ``tools/call`` from an app costs through the gateway.

Group ``mcp-apps-proxy``, the app server's ``increment`` tool (``tests/mcp_apps_server.py``: FastMCP over
streamable HTTP on loopback, a subprocess):

* ``ours`` -- the whole path an app's request takes: ``POST`` of a run whose
  ``forwardedProps.__proxiedMCPRequest`` is the call, to the SSE gateway (bearer check, the run
  registry, the event log, SSE framing, the check that a run of the same principal showed an app of
  that server), read to ``RUN_FINISHED`` by httpx; the gateway forwards it on the process's one
  connection to the server (one run that shows the app comes first, outside the measurement);
* ``in-process`` -- ``McpAppsProxy.answer`` on that connection: the proxy without HTTP or a run;
* ``session-per-request`` -- what ``@ag-ui/mcp-apps-middleware`` does for each proxied request, with the
  Python SDK: a new streamable HTTP session (connect, ``initialize``, the call, session ``DELETE``).

Run: ``python -m pytest benchmarks/bench_mcp_apps.py --benchmark-enable``; the summary prints each
member's median as a ratio to ``ours``. In CI (``--benchmark-disable``) each runs once and only the
answers are checked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agui_engine.adapters.mcp import MCPServer, mcp_connections
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agui_engine.genui.mcp_apps import proxied_request, server_hash
from agui_engine.loops.llm_agent import LLMAgent
from tests.mcp_apps_server import running_app_server

CALL = {"name": "increment", "arguments": {"count": 1}}


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(mcp_connections().aclose())
    loop.close()


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    with running_app_server() as url:
        yield url


def _request(url: str) -> dict[str, Any]:
    return {"serverHash": server_hash("http", url), "method": "tools/call", "params": CALL}


def _check(result: Any) -> None:
    assert result["structuredContent"] == {"count": 2}, result


@pytest.mark.benchmark(group="mcp-apps-proxy")
@pytest.mark.parametrize("impl", ["ours", "in-process", "session-per-request"])
def test_one_proxied_tool_call(benchmark: Any, loop: asyncio.AbstractEventLoop, app_url: str, impl: str) -> None:
    shows_the_app = ScriptedTurn(tool_calls=(ScriptedCall("show_counter", {"start": 1}),))
    agent = LLMAgent(ScriptedModel([shows_the_app, "shown"]), mcp_servers=[MCPServer(url=app_url)])
    request = _request(app_url)
    if impl == "in-process":
        parsed = proxied_request({"__proxiedMCPRequest": request})
        assert parsed is not None
        _check(benchmark(lambda: loop.run_until_complete(agent.mcp_apps.answer(parsed))))
        return
    if impl == "session-per-request":
        _check(benchmark(lambda: loop.run_until_complete(_fresh_session_call(app_url))))
        return
    from agui_engine.transports import start_sse_server

    server = loop.run_until_complete(start_sse_server(agent, auth_token="bench"))
    client = httpx.AsyncClient(headers={"Authorization": "Bearer bench", "Accept": "text/event-stream"})
    runs = iter(range(10**9))

    async def show_the_app() -> None:  # a run of the same principal that shows the app (the proxy's rule)
        body = {"threadId": "t", "runId": "shows", "messages": [{"id": "u", "role": "user", "content": "show"}],
                "tools": [], "context": []}
        response = await client.post(server.url, json=body)
        assert '"ACTIVITY_SNAPSHOT"' in response.text, response.text

    loop.run_until_complete(show_the_app())

    async def proxied() -> Any:
        body = {"threadId": "t", "runId": f"p-{next(runs)}", "messages": [], "tools": [], "context": [],
                "forwardedProps": {"__proxiedMCPRequest": request}}
        response = await client.post(server.url, json=body)
        for line in response.text.splitlines():
            if line.startswith("data:") and '"RUN_FINISHED"' in line:
                return json.loads(line[5:])["result"]
        raise AssertionError(response.text)

    try:
        _check(benchmark(lambda: loop.run_until_complete(proxied())))
    finally:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(server.close())


async def _fresh_session_call(url: str) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(CALL["name"], CALL["arguments"])
    return result.model_dump(by_alias=True, exclude_none=True)
