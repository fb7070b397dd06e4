"""MCP tool calls: what the gateway's path costs over the bare ``mcp`` client, and what tool-list caching saves.

Group ``mcp-call-stdio`` / ``mcp-call-http``, one ``add`` call on the tests' own FastMCP server
(``tests/adapters/mcp_servers.py``: a stdio subprocess; streamable HTTP on loopback):

* ``ours`` -- the call as the decision loop makes it: the ``ServerTool`` that ``run_source_tools``
  builds for the model, through ``tool_outcome`` (the same function the agent calls), the
  process's ``MCPConnection`` (timeout and break watch, per-message size limit, result to text);
* ``bare`` -- ``ClientSession.call_tool`` of the SDK on its own ``stdio_client`` /
  ``streamable_http_client`` session to the same server: the floor.

Group ``mcp-run``: a whole ``LLMAgent`` run (the scripted model calls ``add`` once, then answers)
with the tool list cached per session (``ours``) and with a source that lists the tools on every
run (``list-every-run``: what a client without the cache does). ``extra_info`` records the
``tools/list`` requests per run of each (the caching figure: 0 against 1).

Run: ``python -m pytest benchmarks/bench_mcp.py --benchmark-enable``; the summary prints each
member's median as a ratio to ``ours``. In CI (``--benchmark-disable``) each runs once and only
the answers are checked; timing is never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from agui_engine.adapters.mcp import MCPServer, mcp_connections
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.tool_runner import tool_outcome
from agui_engine.loops.tool_sources import SourceTool, SourceToolResult, run_source_tools
from agui_engine.protocol.events import RunAgentInput, RunFinishedEvent, UserMessage

ROOT = Path(__file__).resolve().parents[1]
SERVER = ("-m", "tests.adapters.mcp_servers")


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(mcp_connections().aclose())
    loop.close()


@pytest.fixture(scope="module")
def http_url(loop: asyncio.AbstractEventLoop) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, *SERVER, "http", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    loop.run_until_complete(mcp_connections().aclose())  # uvicorn waits for open streams to end
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _BareSession:
    """The SDK's own client session, held open by a task of ``loop`` (anyio wants its
    context managers left in the task that entered them)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, transport: str, url: str) -> None:
        self.loop, self.transport, self.url = loop, transport, url
        self.session: Any = None
        self._stop = asyncio.Event()
        ready: asyncio.Future[Any] = loop.create_future()
        self._task = loop.create_task(self._hold(ready))
        self.session = loop.run_until_complete(ready)

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        async with contextlib.AsyncExitStack() as stack:
            if self.transport == "stdio":
                read, write = await stack.enter_async_context(
                    stdio_client(StdioServerParameters(command=sys.executable, args=[*SERVER, "stdio"], cwd=ROOT)))
            else:
                read, write, _ = await stack.enter_async_context(streamable_http_client(self.url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            ready.set_result(session)
            await self._stop.wait()

    def close(self) -> None:
        self._stop.set()
        self.loop.run_until_complete(self._task)


def _server(transport: str, http_url: str) -> MCPServer:
    if transport == "stdio":
        return MCPServer(transport="stdio", command=sys.executable, args=(*SERVER, "stdio"), server_id="bench")
    return MCPServer(url=http_url, server_id="bench")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("impl", ["ours", "bare"])
def test_one_call(benchmark: Any, loop: asyncio.AbstractEventLoop, request: pytest.FixtureRequest, impl: str,
                  transport: str) -> None:
    benchmark.group = f"mcp-call-{transport}"
    url = request.getfixturevalue("http_url") if transport == "http" else ""
    if impl == "bare":
        bare = _BareSession(loop, transport, url)
        try:
            result = benchmark(lambda: loop.run_until_complete(bare.session.call_tool("add", {"a": 1, "b": 2})))
        finally:
            bare.close()
        assert result.content[0].text == "3.0"
        return
    tools = loop.run_until_complete(run_source_tools([_server(transport, url)], set()))
    add = next(t for t in tools if t.name == "add")

    def call() -> tuple[str, str | None]:
        return loop.run_until_complete(tool_outcome(None, add, {"a": 1, "b": 2}, inline=False, timeout=None))

    assert benchmark(call) == ("3.0", None)


class _ListEveryRun:
    """A source without the cache: ``tools/list`` on the server at every run."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    @property
    def source_id(self) -> str:
        return self.server.source_id

    async def list_tools(self) -> Sequence[SourceTool]:
        listed = await mcp_connections().get(self.server).request("tools/list", {})
        return [SourceTool(name=t["name"], description=t.get("description", ""), input_schema=t["inputSchema"])
                for t in listed["tools"]]

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        return await self.server.call_tool(name, arguments)

    def status(self) -> dict[str, Any]:
        return self.server.status()


@pytest.mark.benchmark(group="mcp-run")
@pytest.mark.parametrize("impl", ["ours", "list-every-run"])
def test_run_with_and_without_the_tool_list_cache(benchmark: Any, loop: asyncio.AbstractEventLoop,
                                                   impl: str) -> None:
    server = _server("stdio", "")
    source: Any = server if impl == "ours" else _ListEveryRun(server)
    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("add", {"a": 1, "b": 2})]), "done"])
    agent = LLMAgent(model, mcp_servers=[source], tool_timeout=None)
    input_ = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="add")], tools=[],
                           context=[], state=None, forwarded_props=None)

    async def run() -> list[Any]:
        return [e async for e in agent.run(input_)]

    loop.run_until_complete(run())  # connected and, for ours, listed once
    connection = mcp_connections().get(server)
    lists_before, runs = connection.requests.get("tools/list", 0), 0

    def one() -> list[Any]:
        nonlocal runs
        runs += 1
        return loop.run_until_complete(run())

    events = benchmark(one)
    per_run = (connection.requests.get("tools/list", 0) - lists_before) / runs
    benchmark.extra_info["tools_list_requests_per_run"] = per_run
    assert isinstance(events[-1], RunFinishedEvent)
    assert per_run == (0 if impl == "ours" else 1)
