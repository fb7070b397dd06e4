"""Capabilities over every transport, with real servers on loopback and a real stdio subprocess:
``GET <path>/capabilities`` (SSE), the ``capabilities`` message (WebSocket, stdio), the client
agents that ask for them, and a proxy (``agui-engine serve --agent http://...``) passing them
through. Every document is checked against the official SDK's pydantic model."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import websockets
from ag_ui.core.capabilities import AgentCapabilities as SdkCapabilities
from aiohttp import web

from agui_engine.cli.agent_spec import embedded_agent
from agui_engine.genui.components import Component
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.agent import agent_capabilities
from agui_engine.protocol.capabilities import (
    AgentCapabilities,
    CapabilitiesDecodeError,
    StateCapabilities,
    TransportCapabilities,
    decode_capabilities,
    encode_capabilities,
)
from agui_engine.protocol.errors import LimitExceededError
from agui_engine.protocol.events import RunAgentInput, RunFinishedEvent, RunStartedEvent
from agui_engine.transports.capabilities import (
    MAX_CAPABILITIES_BYTES,
    STDIO_TRANSPORT,
    WEBSOCKET_TRANSPORT,
    sse_transport,
)
from agui_engine.transports.retrying_client import ConnectionLostError, RemoteAgentError
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import create_app, start_sse_server
from agui_engine.transports.stdio_client import StdioAgent
from agui_engine.transports.websocket_client import WebSocketAgent
from agui_engine.transports.websocket_server import start_websocket_server

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


SERVE = [sys.executable, "-m", "agui_engine", "serve"]
#: The child's environment: no token of the caller's shell, the project importable.
ENV = {k: v for k, v in os.environ.items() if k != "AGUI_AUTH_TOKEN"}


class _Stateful:
    """An agent that declares state and runs nothing but an empty run."""

    async def capabilities(self) -> AgentCapabilities:
        return AgentCapabilities(
            state=StateCapabilities(snapshots=True, deltas=True),
            transport=TransportCapabilities(websocket=True, push_notifications=True),  # not the server's: replaced
            custom={"x": {"y": [1, None]}},
        )

    async def run(self, input: RunAgentInput) -> Any:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def _sdk_equal(data: bytes, expected: AgentCapabilities) -> None:
    """``data`` validates with the SDK and decodes with ours to ``expected``."""
    SdkCapabilities.model_validate_json(data)
    assert decode_capabilities(data) == expected


def _url(server: Any, tail: str) -> str:
    return server.url.rstrip("/") + tail


# --------------------------------------------------------------------------- SSE


async def test_sse_serves_the_agents_capabilities_with_its_own_transport() -> None:
    agent = embedded_agent(ui_spec=True)
    own = await agent_capabilities(agent)
    server = await start_sse_server(agent)
    try:
        async with httpx.AsyncClient() as client:
            resp = await client.get(_url(server, "/capabilities"))
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json")
        assert resp.headers["cache-control"] == "no-store"
        expected = msgspec.structs.replace(own, transport=sse_transport())
        _sdk_equal(resp.content, expected)
        assert expected.transport == TransportCapabilities(
            streaming=True, websocket=False, http_binary=True, push_notifications=False, resumable=True
        )
        assert own.tools is not None and "render_ui" in [t.name for t in own.tools.items or ()]
        assert await SSEAgent(server.url).capabilities() == expected
    finally:
        await server.close()


async def test_sse_replaces_the_declared_transport_and_says_websocket_when_mounted_beside_one() -> None:
    server = await start_sse_server(_Stateful(), websocket=True, path="/agui")
    try:
        caps = await SSEAgent(server.url.rstrip("/") + "/agui").capabilities()
        assert caps.transport == sse_transport(websocket=True)
        assert caps.state == StateCapabilities(snapshots=True, deltas=True)
        assert caps.custom == {"x": {"y": [1, None]}}
    finally:
        await server.close()


async def test_a_function_agent_declares_nothing_but_the_server_still_says_what_it_speaks() -> None:
    async def agent(input: RunAgentInput) -> Any:  # pragma: no cover - never run here
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)

    server = await start_sse_server(agent)
    try:
        assert await SSEAgent(server.url).capabilities() == AgentCapabilities(transport=sse_transport())
    finally:
        await server.close()


async def test_sse_capabilities_follow_the_bearer_rules_of_runs_and_refuse_other_methods_saying_why() -> None:
    server = await start_sse_server(_Stateful(), auth_token={"tok-a": "alice"}, cors_origins=["https://app.example"])
    url = _url(server, "/capabilities")
    try:
        async with httpx.AsyncClient() as client:
            missing = await client.get(url)
            wrong = await client.get(url, headers={"Authorization": "Bearer nope"})
            ok = await client.get(url, headers={"Authorization": "Bearer tok-a"})
            post = await client.post(url, headers={"Authorization": "Bearer tok-a"}, json={})
            delete = await client.delete(url)
            preflight = await client.options(url, headers={"Origin": "https://app.example",
                                                           "Access-Control-Request-Method": "GET"})
            cors = await client.get(url, headers={"Authorization": "Bearer tok-a", "Origin": "https://app.example"})
        for refused in (missing, wrong):
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["www-authenticate"].startswith("Bearer")
        assert ok.status_code == 200
        for method in (post, delete):
            assert method.status_code == 405
            assert method.headers["allow"] == "GET, HEAD, OPTIONS"
            error = method.json()["error"]
            assert error["code"] == "method_not_allowed" and "read with GET" in error["message"]
        assert preflight.status_code == 204
        assert cors.headers["access-control-allow-origin"] == "https://app.example"
        with pytest.raises(RemoteAgentError) as info:
            await SSEAgent(server.url).capabilities()
        assert info.value.status == 401
        assert (await SSEAgent(server.url, headers={"Authorization": "Bearer tok-a"}).capabilities()).state is not None
    finally:
        await server.close()


class _Failing:
    def __init__(self, exc: BaseException | None = None, value: Any = None) -> None:
        self.exc, self.value = exc, value

    async def capabilities(self) -> Any:
        if self.exc is not None:
            raise self.exc
        return self.value

    async def run(self, input: RunAgentInput) -> Any:  # pragma: no cover - never run here
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)


@pytest.mark.parametrize(
    "agent,status,code",
    [
        (_Failing(RemoteAgentError("upstream said 401", status=401, code="unauthorized")), 502, "unauthorized"),
        (_Failing(ConnectionLostError("cannot reach it")), 502, "connection_lost"),
        (_Failing(CapabilitiesDecodeError("GET x: not an AgentCapabilities document")), 502, "invalid_capabilities"),
        (_Failing(value={"state": {}}), 500, "usage_error"),
        (_Failing(RuntimeError("a bug")), 500, "internal_error"),
    ],
)
async def test_an_agent_whose_capabilities_fail_gets_a_json_error_answer(agent: Any, status: int, code: str) -> None:
    server = await start_sse_server(agent)
    try:
        async with httpx.AsyncClient() as client:
            resp = await client.get(_url(server, "/capabilities"))
        assert resp.status_code == status
        assert resp.json()["error"]["code"] == code
        assert "Traceback" not in resp.text
    finally:
        await server.close()


async def test_an_agent_that_never_answers_is_cut_off_by_the_server() -> None:
    from agui_engine.protocol.errors import UpstreamError
    from agui_engine.transports.capabilities import served_capabilities

    cancelled = asyncio.Event()

    class Hanging:
        async def capabilities(self) -> AgentCapabilities:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return AgentCapabilities()  # pragma: no cover

    with pytest.raises(UpstreamError, match="did not return within 0.2 s") as info:
        await served_capabilities(Hanging(), sse_transport(), timeout=0.2)
    assert info.value.code == "capabilities_timeout" and info.value.http_status == 502
    assert cancelled.is_set()


async def _serve_app(handler: Any, path: str = "/capabilities") -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def test_sse_agent_reads_a_server_without_capabilities_as_declaring_nothing() -> None:
    async def other(request: web.Request) -> web.Response:  # pragma: no cover - a route elsewhere
        return web.Response(text="x")

    runner, url = await _serve_app(other, "/elsewhere")
    try:
        assert await SSEAgent(url).capabilities() == AgentCapabilities()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "body,content_type,error,match",
    [
        (b'{"tools": {"items": [{"name": 1}]}}', "application/json", CapabilitiesDecodeError, r"\$\.tools\.items\[0\]\.name"),
        (b"<html>hi</html>", "text/html", RemoteAgentError, "answered 200 text/html"),
        (b"[" * 600 + b"]" * 600, "application/json", LimitExceededError, "deeper than"),
        (b'{"custom": {"a": "' + b"x" * (MAX_CAPABILITIES_BYTES + 10) + b'"}}', "application/json",
         LimitExceededError, f"over {MAX_CAPABILITIES_BYTES} bytes"),
    ],
)
async def test_sse_agent_refuses_a_bad_document_with_a_typed_error(
    body: bytes, content_type: str, error: type[Exception], match: str
) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": content_type})

    runner, url = await _serve_app(answer)
    try:
        with pytest.raises(error, match=match):
            await SSEAgent(url).capabilities()
    finally:
        await runner.cleanup()


async def test_sse_agent_gives_up_on_a_server_that_does_not_answer() -> None:
    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response()  # pragma: no cover

    runner, url = await _serve_app(hang)
    try:
        with pytest.raises(ConnectionLostError, match="no answer within 0.3 s"):
            await SSEAgent(url).capabilities(timeout=0.3)
    finally:
        await runner.cleanup()
    with pytest.raises(ConnectionLostError, match="cannot reach"):
        await SSEAgent(url).capabilities()


# --------------------------------------------------------------------------- proxy


async def test_a_gateway_in_front_of_a_remote_agent_passes_its_capabilities_through() -> None:
    card = Component("Card", "A card.", {"type": "object", "properties": {"title": {"type": "string"}}})
    upstream = await start_sse_server(embedded_agent(), auth_token="up-token")
    remote = SSEAgent(upstream.url, headers={"Authorization": "Bearer up-token"})
    own = await remote.capabilities()
    proxy = await start_sse_server(remote)  # served as AgentLoop(remote)
    looped = await start_sse_server(AgentLoop(remote, components=[card]))
    try:
        through = await SSEAgent(proxy.url).capabilities()
        assert through == own  # both SSE servers: the same transport too
        with_card = await SSEAgent(looped.url).capabilities()
        assert own.tools is not None and with_card.tools is not None
        assert [t.name for t in with_card.tools.items or ()] == [
            *(t.name for t in own.tools.items or ()), "show_component_Card"]
        # over WebSocket the same agent, with the WebSocket server's transport
        ws = await start_websocket_server(remote)
        try:
            over_ws = await WebSocketAgent(ws.url).capabilities()
            assert over_ws == msgspec.structs.replace(own, transport=WEBSOCKET_TRANSPORT)
        finally:
            await ws.close()
    finally:
        for server in (looped, proxy, upstream):
            await server.close()


async def _serving(argv: list[str]) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.DEVNULL, env=ENV)
    assert proc.stderr is not None
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stderr.readline()).decode()
            assert line, "the server did not start"
            if line.startswith("serving on "):
                return proc, line.split()[-1]


async def _stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    assert proc.stderr is not None
    await proc.stderr.read()
    assert await asyncio.wait_for(proc.wait(), 15) == 0


async def test_agui_engine_serve_proxying_another_serve_passes_the_capabilities_through() -> None:
    upstream, upstream_url = await _serving([*SERVE, "--port", "0"])
    try:
        own = await SSEAgent(upstream_url).capabilities()
        assert own.reasoning is not None and own.reasoning.supported  # the embedded model reasons
        proxy, proxy_url = await _serving([*SERVE, "--port", "0", "--agent", upstream_url])
        try:
            data = httpx.get(proxy_url.rstrip("/") + "/capabilities", timeout=10).content
            _sdk_equal(data, own)
        finally:
            await _stop(proxy)
        ws_proxy, ws_url = await _serving([*SERVE, "--transport", "ws", "--port", "0", "--agent", upstream_url])
        try:
            assert await WebSocketAgent(ws_url).capabilities() == msgspec.structs.replace(own, transport=WEBSOCKET_TRANSPORT)
        finally:
            await _stop(ws_proxy)
    finally:
        await _stop(upstream)


# --------------------------------------------------------------------------- WebSocket


async def test_websocket_answers_the_capabilities_message_beside_a_run_on_one_connection() -> None:
    server = await start_websocket_server(_Stateful(), auth_token="tok")
    try:
        async with websockets.connect(server.url, additional_headers={"Authorization": "Bearer tok"}) as ws:
            run = RunAgentInput(thread_id="t", run_id="r1", messages=[], tools=[], context=[], state=None,
                                forwarded_props=None)
            await ws.send(json.dumps({"type": "run", "input": msgspec.to_builtins(run)}))
            await ws.send('{"type": "capabilities"}')
            await ws.send('{"type": "capabilities", "extra": 1}')  # unknown members are dropped, as for events
            lines: list[dict[str, Any]] = []
            async with asyncio.timeout(10):
                while sum("capabilities" in line for line in lines) < 2 or not any(
                        line.get("event", {}).get("type") == "RUN_FINISHED" for line in lines):
                    lines += [json.loads(x) for x in str(await ws.recv()).split("\n")]
        answers = [line for line in lines if "capabilities" in line]
        assert [sorted(a) for a in answers] == [["capabilities"], ["capabilities"]]
        expected = AgentCapabilities(state=StateCapabilities(snapshots=True, deltas=True), transport=WEBSOCKET_TRANSPORT,
                                     custom={"x": {"y": [1, None]}})
        for answer in answers:
            _sdk_equal(json.dumps(answer["capabilities"]).encode(), expected)
        assert await WebSocketAgent(server.url, headers={"Authorization": "Bearer tok"}).capabilities() == expected
        with pytest.raises(RemoteAgentError) as info:
            await WebSocketAgent(server.url).capabilities()
        assert info.value.status == 401
    finally:
        await server.close()


async def test_websocket_capabilities_errors_are_error_lines_naming_no_run() -> None:
    server = await start_websocket_server(_Failing(ConnectionLostError("the remote is down")))
    try:
        async with websockets.connect(server.url) as ws:
            await ws.send('{"type": "capabilities"}')
            line = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert line == {"error": {"code": "connection_lost", "message": "the remote is down", "status": 4502}}
        with pytest.raises(RemoteAgentError, match="the remote is down") as info:
            await WebSocketAgent(server.url).capabilities()
        assert info.value.code == "connection_lost"
    finally:
        await server.close()


async def test_websocket_agent_reads_an_older_servers_refusal_as_declaring_nothing_and_gives_up_on_silence() -> None:
    async def older(ws: Any) -> None:
        async for _ in ws:
            await ws.send('{"error": {"code": "bad_input", "message": "not a run, cancel, resume or query message", '
                          '"status": 4400}}')

    async def silent(ws: Any) -> None:
        async for _ in ws:
            pass

    async with websockets.serve(older, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        assert await WebSocketAgent(f"ws://127.0.0.1:{port}").capabilities() == AgentCapabilities()
    async with websockets.serve(silent, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        with pytest.raises(ConnectionLostError, match="within 0.3 s"):
            await WebSocketAgent(f"ws://127.0.0.1:{port}").capabilities(timeout=0.3)


# --------------------------------------------------------------------------- stdio


async def test_stdio_answers_the_capabilities_line_in_a_real_subprocess() -> None:
    agent = StdioAgent([*SERVE, "--transport", "stdio"], env={"AGUI_AUTH_TOKEN": ""})
    caps = await agent.capabilities()
    own = await agent_capabilities(embedded_agent())
    assert caps == msgspec.structs.replace(own, transport=STDIO_TRANSPORT)
    SdkCapabilities.model_validate_json(encode_capabilities(caps))


async def test_stdio_answers_capabilities_between_runs_and_refuses_a_malformed_one_by_line() -> None:
    proc = await asyncio.create_subprocess_exec(*SERVE, "--transport", "stdio", stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, env=ENV)
    run = msgspec.json.encode(RunAgentInput(thread_id="t", run_id="r1", messages=[], tools=[], context=[],
                                            state=None, forwarded_props=None))
    out, _ = await asyncio.wait_for(
        proc.communicate(b'{"type": "capabilities"}\n' + run + b'\n{"type": "capabilities", "x": []}\n'
                         b'{"type": ["capabilities"]}\n'), 60)
    lines = [json.loads(line) for line in out.splitlines()]
    answers = [line["capabilities"] for line in lines if "capabilities" in line]
    assert len(answers) == 2 and answers[0] == answers[1]
    assert answers[0]["transport"] == msgspec.to_builtins(STDIO_TRANSPORT)
    assert any(line.get("type") == "RUN_FINISHED" for line in lines)
    errors = [line for line in lines if "error" in line]
    assert [e["line"] for e in errors] == [4]  # a "type" that is no message type: the line is refused, by number


async def test_stdio_agent_reads_an_older_server_as_declaring_nothing_and_a_silent_one_as_lost(tmp_path: Path) -> None:
    older = tmp_path / "older.py"
    older.write_text(textwrap.dedent("""
        import sys
        for n, line in enumerate(sys.stdin, 1):
            print('{"error": {"code": "invalid_input", "message": "not a RunAgentInput"}, "line": %d}' % n, flush=True)
    """))
    quiet = tmp_path / "quiet.py"
    quiet.write_text("import sys\nsys.stdin.read()\n")
    refusing = tmp_path / "refusing.py"
    refusing.write_text("import sys\nsys.stdin.readline()\n"
                        "print('{\"error\": {\"code\": \"limit_exceeded\", \"message\": \"no\"}, \"line\": 1}')\n")
    assert await StdioAgent([sys.executable, str(older)]).capabilities() == AgentCapabilities()
    with pytest.raises(ConnectionLostError, match="exited without answering"):
        await StdioAgent([sys.executable, str(quiet)]).capabilities()
    with pytest.raises(RemoteAgentError, match="refused: no") as info:
        await StdioAgent([sys.executable, str(refusing)]).capabilities()
    assert info.value.code == "limit_exceeded"


def test_create_app_takes_the_websocket_flag_as_a_keyword() -> None:
    app = create_app(_Stateful(), websocket=True)
    assert any(r.resource is not None and r.resource.canonical == "/capabilities" for r in app.router.routes())
