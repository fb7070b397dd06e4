"""MCP servers as tool sources, against the tests' own real MCP servers (``tests/adapters/mcp_servers.py``,
the SDK's FastMCP) over streamable HTTP and SSE on loopback (uvicorn, a subprocess) and stdio (a subprocess):
the scripted model calls their tools through ``LLMAgent``, a remote agent gets them through ``AgentLoop``,
and every fault of ``spec/mcp.md`` §5 ends in a typed error while the run goes on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.adapters.mcp import (
    MAX_MCP_RESULT_BYTES,
    MAX_MCP_TOOLS,
    MCPConnectionError,
    MCPServer,
    MCPTimeoutError,
    MessageSizeGauge,
    mcp_connections,
)
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from agui_engine.transports import SSEAgent, run_agent, start_sse_server
from tests.helpers import free_port

from ..agui_engine.run_checks import check_run

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.adapters.mcp_servers"
SECRET_HEADER = "Bearer sekret-header-7c1e"
SECRET_ENV = "sekret-env-93ab"




class _Served:
    """One MCP server subprocess on loopback (streamable HTTP at /mcp or SSE at /sse)."""

    def __init__(self, transport: str, *extra: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, transport, str(self.port), *extra],
                                     cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/" + ("mcp" if transport == "http" else "sse")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the MCP server exited at start"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("the MCP server did not start listening")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hung server is killed
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def http_server() -> Iterator[_Served]:
    served = _Served("http")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def sse_server() -> Iterator[_Served]:
    served = _Served("sse")
    yield served
    served.stop()


#: The tests' stdio servers' connect budget: importing the SDK alone took 6 s at load 11, more than the
#: adapter's 10 s default leaves on a busy machine; what a test measures is never the start-up.
_STDIO_CONNECT_SECONDS = 50.0


def _stdio(server_id: str = "local", *extra: str, **options: Any) -> MCPServer:
    options.setdefault("connect_timeout", _STDIO_CONNECT_SECONDS)
    return MCPServer(transport="stdio", command=sys.executable, args=("-m", SERVER_MODULE, "stdio", *extra),
                     server_id=server_id, **options)


@pytest.fixture(autouse=True)
async def _closed_connections() -> AsyncIterator[None]:
    yield
    await mcp_connections().aclose()


@pytest.fixture(params=["http", "sse", "stdio"])
def any_server(request: pytest.FixtureRequest) -> MCPServer:
    if request.param == "stdio":
        return _stdio()
    served: _Served = request.getfixturevalue(f"{request.param}_server")
    return MCPServer(url=served.url, transport=request.param, server_id="remote")


def _input(text: str = "hi", run_id: str = "r1", thread_id: str = "t1") -> RunAgentInput:
    return RunAgentInput(thread_id=thread_id, run_id=run_id, messages=[UserMessage(id=f"u-{run_id}", content=text)],
                         tools=[], context=[], state=None, forwarded_props=None)


def _calling(*calls: ScriptedCall) -> ScriptedModel:
    """Calls ``calls``, then says what they returned."""
    return ScriptedModel([ScriptedTurn(tool_calls=calls), lambda messages: "got: " + " | ".join(tool_results(messages))])


async def _run(agent: Any, input_: RunAgentInput | None = None) -> list[Event]:
    return [event async for event in run_agent(agent, input_ or _input())]


def _results(events: Sequence[Event]) -> list[str]:
    return [e.content for e in events if isinstance(e, ToolCallResultEvent)]


def _text(events: Sequence[Event]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))


def _finished(events: Sequence[Event]) -> None:
    assert isinstance(events[-1], RunFinishedEvent), events[-1]
    check_run(list(events))


# ----------------------------------------------------------------------------- the size gauge (HTTP, SSE)


def _largest(events: Sequence[bytes]) -> int:
    return max((len(e) for e in events), default=0)


_event = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"x").replace(b"\n", b"x"))
_terminator = st.sampled_from([b"\n", b"\r\n", b"\r"])


@settings(deadline=None)
@given(st.lists(st.tuples(_event, _terminator, _terminator), max_size=8), st.integers(0, 40), st.randoms())
def test_the_gauge_counts_each_message_whatever_the_splits(
    messages: list[tuple[bytes, bytes, bytes]], limit: int, rng: random.Random
) -> None:
    # an event's lines (content, then a terminator) end with a blank line (a second terminator)
    body = b"".join(content + t1 + t2 for content, t1, t2 in messages if not (t1 == b"\r" and t2 == b"\n"))
    contents = [content for content, t1, t2 in messages if not (t1 == b"\r" and t2 == b"\n")]
    expected = _largest(contents) > limit

    def gauge_over(pieces: Sequence[bytes]) -> tuple[bool, int]:
        gauge = MessageSizeGauge(limit)
        over = False
        for piece in pieces:
            over = gauge.feed(piece) or over
        return over, gauge.largest

    whole = gauge_over([body])
    bytewise = gauge_over([body[i:i + 1] for i in range(len(body))])
    cuts = sorted(rng.sample(range(len(body) + 1), min(len(body) + 1, rng.randint(0, 6))))
    split = gauge_over([body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])])
    assert whole == bytewise == split == (expected, _largest(contents))


def test_a_json_body_is_one_message() -> None:
    gauge = MessageSizeGauge(10)
    assert not gauge.feed(b'{"a": "12')
    assert gauge.feed(b'345"}')  # 14 bytes, no blank line: one message
    assert gauge.largest == 14


# ----------------------------------------------------------------------------- configuration


def test_a_server_spec_parses_into_its_transport() -> None:
    assert MCPServer.parse("http://h:1/mcp").transport == "http"
    sse = MCPServer.parse("sse:https://h/sse")
    assert (sse.transport, sse.url) == ("sse", "https://h/sse")
    stdio = MCPServer.parse("tools=stdio:python3 -m my.server --flag 'a b'")
    assert (stdio.command, stdio.args, stdio.source_id) == ("python3", ("-m", "my.server", "--flag", "a b"), "tools")
    assert MCPServer.parse("stdio:python3 -m my.server").source_id == "my_server"
    assert MCPServer.parse("stdio:python3 -c 'import x'").source_id == "python3"
    assert MCPServer.parse("http://api.example.com:8080/mcp").source_id == "api_example_com"
    for bad, why in (("ftp://h/x", "--mcp 'ftp://h/x': write http"), ("stdio:", "write stdio:COMMAND"),
                     ("h:80", "write http"), ("sse:nothttp", "--mcp: .*needs an http"),
                     ("http://user:pw@h/mcp", "--mcp: .*must not carry credentials"),
                     ("ftp://user:pw@h/x?token=tk", "--mcp 'ftp://h/x'")):
        with pytest.raises(UsageError, match=why) as raised:
            MCPServer.parse(bad)
        assert "pw" not in str(raised.value) and "tk" not in str(raised.value)  # a spec's credentials: never echoed
    with pytest.raises(UsageError, match="server_id"):
        MCPServer(url="http://h/mcp", server_id="no spaces")
    with pytest.raises(UsageError, match="call_timeout"):
        MCPServer(url="http://h/mcp", call_timeout=0)


def test_the_server_hash_is_the_middlewares() -> None:
    # getServerHash of @ag-ui/mcp-apps-middleware 0.1.1: md5(JSON.stringify({type, url}))
    import hashlib

    server = MCPServer(url="http://127.0.0.1:3001/mcp")
    expected = hashlib.md5(b'{"type":"http","url":"http://127.0.0.1:3001/mcp"}').hexdigest()
    assert server.server_hash == expected


def test_repr_and_status_never_show_credentials() -> None:
    server = MCPServer(url="http://h/mcp?token=abc", headers={"Authorization": SECRET_HEADER}, env={"K": SECRET_ENV})
    text = repr(server) + str(server) + json.dumps(server.status())
    assert "sekret" not in text and "abc" not in text


def test_two_servers_with_one_id_are_refused() -> None:
    with pytest.raises(UsageError, match="distinct server_id"):
        LLMAgent(ScriptedModel(["x"]), mcp_servers=[_stdio("same"), MCPServer(url="http://h/mcp", server_id="same")])
    with pytest.raises(UsageError, match="not a tool source"):
        LLMAgent(ScriptedModel(["x"]), mcp_servers=["http://h/mcp"])  # type: ignore[list-item]


# ----------------------------------------------------------------------------- the tools reach the model


async def test_the_scripted_model_calls_an_mcp_tool_through_llm_agent(any_server: MCPServer) -> None:
    agent = LLMAgent(_calling(ScriptedCall("add", {"a": 2, "b": 3})), mcp_servers=[any_server])
    events = await _run(agent)
    _finished(events)
    assert _results(events) == ["5.0"]
    assert _text(events) == "got: 5.0"


async def test_the_tools_keep_their_schema_and_meta(any_server: MCPServer) -> None:
    tools = {t.name: t for t in await mcp_connections().get(any_server).list_tools()}
    assert tools["add"].input_schema["properties"]["a"]["type"] == "number"
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].description == "Add two numbers."


async def test_an_is_error_result_goes_back_to_the_model_and_the_run_goes_on() -> None:
    agent = LLMAgent(_calling(ScriptedCall("fail", {"why": "no disk"})), mcp_servers=[_stdio()])
    events = await _run(agent)
    _finished(events)
    [content] = _results(events)
    assert content.startswith("Error: ") and "no disk" in content


async def test_the_tool_list_is_fetched_once_per_session_not_per_run() -> None:
    server = _stdio()
    agent = LLMAgent(_calling(ScriptedCall("add", {"a": 1, "b": 1})), mcp_servers=[server])
    for n in range(3):
        _finished(await _run(agent, _input(run_id=f"r{n}")))
    requests = mcp_connections().get(server).requests
    assert requests["tools/list"] == 1 and requests["initialize"] == 1 and requests["tools/call"] == 3


async def test_tools_list_changed_makes_the_next_run_list_them_again(any_server: MCPServer) -> None:
    server = any_server
    grow = LLMAgent(_calling(ScriptedCall("grow")), mcp_servers=[server])
    _finished(await _run(grow))
    connection = mcp_connections().get(server)
    for _ in range(100):  # the notification arrives right after the call's answer
        if connection.status()["tools"] == 0 or "late" in {t.name for t in await connection.list_tools()}:
            break
        await asyncio.sleep(0.02)
    late = LLMAgent(_calling(ScriptedCall("late")), mcp_servers=[server])
    events = await _run(late, _input(run_id="r2"))
    _finished(events)
    assert _results(events) == ["late tool"]
    assert connection.requests["tools/list"] == 2


async def test_name_collisions_are_namespaced_by_server_id() -> None:
    def weather(city: str) -> str:
        """The agent's own weather tool."""
        return f"own weather in {city}"

    model = _calling(ScriptedCall("weather", {"city": "Oslo"}), ScriptedCall("a__add", {"a": 1, "b": 2}),
                     ScriptedCall("b__add", {"a": 3, "b": 4}), ScriptedCall("a__weather", {"city": "Rome"}),
                     ScriptedCall("pid"), ScriptedCall("a__pid"))
    agent = LLMAgent(model, tools=[weather], mcp_servers=[_stdio("a"), _stdio("b")], inline_tools=["weather"])
    events = await _run(agent)
    _finished(events)
    offered = {e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)}
    assert offered == {"weather", "a__add", "b__add", "a__weather", "pid", "a__pid"}
    results = _results(events)
    assert results[:4] == ["own weather in Oslo", "3.0", "7.0", "MCP weather in Rome: 21 C"]
    # two servers both have pid: both namespaced, the bare name is no tool
    assert "unknown tool 'pid'" in results[4] and results[5].isdigit()


# ----------------------------------------------------------------------------- faults


async def test_an_unreachable_server_makes_its_tools_absent_not_a_failed_run(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agui_engine.adapters.mcp")
    server = MCPServer(url=f"http://127.0.0.1:{free_port()}/mcp", server_id="gone")
    agent = LLMAgent(_calling(ScriptedCall("add", {"a": 1, "b": 2})), mcp_servers=[server])
    events = await _run(agent)
    _finished(events)
    assert "unknown tool 'add'" in _results(events)[0]
    assert "MCP server gone unavailable" in caplog.text
    status = server.status()
    assert status["connected"] is False and "ConnectError" in status["error"]
    # within the backoff the next run does not even try
    attempts = mcp_connections().get(server).requests["initialize"]
    _finished(await _run(agent, _input(run_id="r2")))
    assert mcp_connections().get(server).requests["initialize"] == attempts == 1
    await asyncio.sleep(0.6)  # past the first backoff: tried again (and failed again, logged once)
    _finished(await _run(agent, _input(run_id="r3")))
    assert mcp_connections().get(server).requests["initialize"] == 2


async def test_a_stdio_server_that_exits_at_start_says_its_exit_status(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agui_engine.adapters.mcp")
    server = MCPServer(transport="stdio", command=sys.executable, args=("-c", "import sys; sys.exit(3)"),
                       server_id="quits")
    assert await server.list_tools() == []
    why = "its process exited with status 3 before answering initialize"
    assert server.status()["error"] == why and f"MCP server quits unavailable: {why}" in caplog.text


async def test_a_server_that_never_answers_initialize_is_given_up_and_reaped() -> None:
    server = MCPServer(transport="stdio", command=sys.executable, args=("-c", "import time; time.sleep(600)"),
                       server_id="mute", connect_timeout=0.5)
    agent = LLMAgent(_calling(ScriptedCall("add", {"a": 1, "b": 2})), mcp_servers=[server])
    events = await _run(agent)
    _finished(events)
    assert "unknown tool 'add'" in _results(events)[0]
    assert "no answer within 0.5 s" in server.status()["error"]
    mute = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).endswith("time.sleep(600)")
            and _parent(p) == os.getpid()]
    assert not mute  # the process that never answered is gone


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _parent(proc_dir: Path) -> int:
    try:
        return int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


async def test_a_hanging_server_call_times_out_and_the_run_goes_on() -> None:
    server = _stdio(call_timeout=0.5)
    agent = LLMAgent(_calling(ScriptedCall("slow"), ScriptedCall("add", {"a": 1, "b": 1})), mcp_servers=[server])
    events = await _run(agent)
    _finished(events)
    slow, add = _results(events)
    assert "MCPTimeoutError" in slow and "did not answer tools/call within 0.5 s" in slow
    assert add == "2.0"
    # the connection stays up: a slow tool is not a broken server
    assert (await server.call_tool("add", {"a": 2, "b": 2})).text == "4.0"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_answer_after_the_timeout_leaves_the_session_and_the_other_calls_alone(
    transport: str, http_server: _Served, caplog: pytest.LogCaptureFixture
) -> None:
    # the SDK hands the late answer to the message handler as an error: it is no broken session
    caplog.set_level(logging.WARNING, logger="agui_engine.adapters.mcp")
    server = _stdio(call_timeout=0.3) if transport == "stdio" else MCPServer(
        url=http_server.url, server_id="local", call_timeout=0.3)
    connection = mcp_connections().get(server)
    with pytest.raises(MCPTimeoutError):
        await connection.call_tool("nap", {"seconds": 0.6})
    await asyncio.sleep(0.6)  # the answer arrives, nobody waits for it
    assert (await connection.call_tool("add", {"a": 1, "b": 1})).text == "2.0"
    assert connection.requests["initialize"] == 1 and connection.connected  # the same session
    assert caplog.text == ""


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
async def test_a_server_that_crashes_mid_call_is_an_error_result_then_reconnected(transport: str) -> None:
    served = None if transport == "stdio" else _Served(transport)
    server = _stdio() if served is None else MCPServer(url=served.url, transport=transport, server_id="remote",
                                                       call_timeout=30)
    try:
        agent = LLMAgent(_calling(ScriptedCall("crash")), mcp_servers=[server])
        events = await _run(agent)
        _finished(events)
        [content] = _results(events)
        assert content.startswith("Error: MCPConnectionError") and "crash" not in content.split(":")[0]
        if served is not None:  # the HTTP server comes back on its port (a restart): a new session there
            served.proc.wait(10)
            served = _Served(transport, port=served.port)
        await asyncio.sleep(0.6)  # past the first backoff (a stdio server is simply started again)
        add = LLMAgent(_calling(ScriptedCall("add", {"a": 1, "b": 2})), mcp_servers=[server])
        events = await _run(add, _input(run_id="r2"))
        _finished(events)
        assert _results(events) == ["3.0"]
        assert server.status()["connected"] is True
    finally:
        if served is not None:
            served.stop()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_50_mb_result_is_refused_by_the_size_limit(transport: str, http_server: _Served) -> None:
    # the oversized message breaks the session (every call in flight on it fails: spec/mcp.md §5);
    # the next call reconnects
    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("big")]),
                           ScriptedTurn(tool_calls=[ScriptedCall("add", {"a": 1, "b": 1})]), "done"])
    server = _stdio() if transport == "stdio" else MCPServer(url=http_server.url, server_id="local")
    events = await _run(LLMAgent(model, mcp_servers=[server]))
    _finished(events)
    big, add = _results(events)
    assert "MCPResultTooLargeError" in big and f"MAX_MCP_RESULT_BYTES={MAX_MCP_RESULT_BYTES}" in big
    assert add == "2.0"
    assert max(len(encode_event(e)) for e in events) < 100_000


async def test_malformed_json_rpc_fails_the_call_at_once() -> None:
    server = _stdio(call_timeout=20)
    agent = LLMAgent(_calling(ScriptedCall("garbage")), mcp_servers=[server])
    events = await _run(agent)
    _finished(events)
    [content] = _results(events)
    assert "MCPConnectionError" in content and "malformed message" in content


async def test_a_server_listing_1000_tools_is_refused_by_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agui_engine.adapters.mcp")
    # 1000 tools take a while to build and list on a busy machine: a generous connect budget, so that
    # what is measured is the limit, not the machine's load
    server = _stdio("many", "--tools", "1000", connect_timeout=50)
    agent = LLMAgent(_calling(ScriptedCall("t1")), mcp_servers=[server])
    events = await _run(agent)
    _finished(events)
    assert "unknown tool 't1'" in _results(events)[0]
    assert f"MAX_MCP_TOOLS={MAX_MCP_TOOLS}" in server.status()["error"]
    assert "MAX_MCP_TOOLS" in caplog.text


async def test_direct_calls_raise_typed_errors() -> None:
    server = _stdio(call_timeout=0.3)
    connection = mcp_connections().get(server)
    with pytest.raises(MCPTimeoutError):
        await connection.call_tool("slow", {})
    with pytest.raises(MCPConnectionError):
        await connection.call_tool("crash", {})
    with pytest.raises(UsageError):
        await connection.request("no/such/method", {})


async def test_the_stdio_process_is_reaped_on_close() -> None:
    server = _stdio()
    pid = int((await server.call_tool("pid", {})).text)
    assert Path(f"/proc/{pid}").exists()
    await mcp_connections().aclose()
    assert not Path(f"/proc/{pid}").exists()  # gone, not a zombie


async def test_generic_requests_and_resources(any_server: MCPServer) -> None:
    connection = mcp_connections().get(any_server)
    assert await connection.request("ping") == {}
    listed = await connection.request("tools/list", {})
    assert "add" in {t["name"] for t in listed["tools"]}
    # the client declares the MCP Apps extension as @ag-ui/mcp-apps-middleware does
    assert (await connection.call_tool("client_ui", {})).text == "text/html;profile=mcp-app"
    called = await connection.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 5}})
    assert called["content"][0]["text"] == "6.0"
    with pytest.raises(UsageError):
        await connection.notify("tools/call", {})


async def test_credentials_reach_the_server_but_no_event_or_log_line(
    http_server: _Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    remote = MCPServer(url=http_server.url, headers={"Authorization": SECRET_HEADER}, server_id="remote")
    local = _stdio(env={"MCP_TEST_TOKEN": SECRET_ENV})
    gone = MCPServer(url=f"http://127.0.0.1:{free_port()}/mcp", headers={"X-Key": SECRET_HEADER},
                     server_id="gone")
    model = _calling(ScriptedCall("remote__header_seen"), ScriptedCall("local__env_has", {"name": "MCP_TEST_TOKEN"}))
    agent = LLMAgent(model, mcp_servers=[remote, local, gone])
    events = await _run(agent)
    _finished(events)
    assert _results(events) == [str(len(SECRET_HEADER)), "true"]  # they arrived
    wire = b"".join(encode_event(e) for e in events).decode()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    status = json.dumps([s.status() for s in (remote, local, gone)])
    for secret in (SECRET_HEADER, SECRET_ENV, "sekret"):
        assert secret not in wire and secret not in logged and secret not in status


# ----------------------------------------------------------------------------- the agent loop


async def test_a_remote_agent_gets_mcp_tools_as_client_tools_that_the_loop_runs() -> None:
    remote = LLMAgent(_calling(ScriptedCall("add", {"a": 20, "b": 22})))  # knows no MCP server
    async with await start_sse_server(remote) as served:
        loop = AgentLoop(SSEAgent(served.url), mcp_servers=[_stdio()])
        events = await _run(loop)
    _finished(events)
    assert _results(events) == ["42.0"]
    assert _text(events) == "got: 42.0"  # the follow-up inner run read the result
    assert sum(isinstance(e, RunFinishedEvent) for e in events) == 1
    assert not any(isinstance(e, RunErrorEvent) for e in events)
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and (finished.thread_id, finished.run_id) == ("t1", "r1")
    assert finished.outcome is None  # nothing left pending for the client


async def test_the_loop_leaves_other_client_tools_to_the_client() -> None:
    from agui_engine.protocol.events import Tool

    remote = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("pick_date")])]))
    async with await start_sse_server(remote) as served:
        loop = AgentLoop(SSEAgent(served.url), mcp_servers=[_stdio()])
        input_ = msgspec.structs.replace(_input(), tools=[Tool(name="pick_date", description="d", parameters={
            "type": "object", "properties": {}})])
        events = await _run(loop, input_)
    _finished(events)
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is not None
    assert len(finished.outcome.pending_tool_call_ids) == 1  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def _proxy(upstream_url: str, garbage: bool = False) -> AsyncIterator[str]:
    """A proxy on loopback in front of a real HTTP MCP server, with no server-to-client stream (GET
    is 405, as a server may answer); with ``garbage`` it answers tools/call of "garbage" with a body
    that is not JSON-RPC. Its URL."""
    import httpx
    from aiohttp import web

    upstream = httpx.AsyncClient(timeout=30)

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return web.Response(status=405)  # no server-to-client stream: the client does without it
        body = await request.read()
        if garbage and request.method == "POST" and b'"tools/call"' in body and b'"garbage"' in body:
            return web.Response(body=b"{this is not json-rpc", content_type="application/json")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        answer = await upstream.request(request.method, upstream_url, content=body, headers=headers)
        keep = {k: v for k, v in answer.headers.items()
                if k.lower() in ("content-type", "mcp-session-id", "mcp-protocol-version")}
        return web.Response(status=answer.status_code, body=answer.content, headers=keep)

    app = web.Application()
    app.router.add_route("*", "/mcp", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    finally:
        await mcp_connections().aclose()
        await runner.cleanup()
        await upstream.aclose()


async def test_malformed_json_rpc_over_http_fails_the_call_at_once(http_server: _Served) -> None:
    async with _proxy(http_server.url, garbage=True) as url:
        server = MCPServer(url=url, server_id="proxied", call_timeout=20)
        model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("garbage")]),
                               ScriptedTurn(tool_calls=[ScriptedCall("add", {"a": 1, "b": 1})]), "done"])
        events = await _run(LLMAgent(model, mcp_servers=[server]))
        _finished(events)
        garbage, add = _results(events)
        assert "MCPConnectionError" in garbage and "malformed message" in garbage
        assert add == "2.0"  # the next call opened a new session


async def test_an_http_server_that_restarted_is_sent_the_request_again_on_a_new_session() -> None:
    # no stream from server to client shows the restart: the first request after it is answered 404
    # for its session id (the server never ran it), so it goes once more, on a new session
    served = _Served("http")
    try:
        async with _proxy(served.url) as url:
            server = MCPServer(url=url, server_id="restarting")
            assert (await server.call_tool("add", {"a": 1, "b": 2})).text == "3.0"
            served.stop()
            served = _Served("http", port=served.port)
            assert (await server.call_tool("add", {"a": 2, "b": 2})).text == "4.0"
            requests = mcp_connections().get(server).requests
            assert (requests["initialize"], requests["tools/call"]) == (2, 3)
            assert server.status()["connected"] is True
    finally:
        served.stop()
