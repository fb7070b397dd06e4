"""The gateway end to end: the same agent on all three transports gives the same
events; the CLI's serve and run commands; the in-process gateway of the demo."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import msgspec
import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.transports.eventlog import UnknownRunError
from agui_engine.transports.gateway import run_via_gateway
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.stdio_client import StdioAgent
from agui_engine.transports.websocket_client import WebSocketAgent
from agui_engine.transports.websocket_server import start_websocket_server

from ..waiting import eventually
from .scripted import ScriptedAgent, make_input


def run_finished(registry: RunRegistry, run_id: str) -> bool:
    """True once the registry knows the run and it has ended (a poll predicate)."""
    try:
        return registry.get(run_id).finished
    except UnknownRunError:
        return False


async def test_the_same_agent_on_all_three_transports_gives_the_same_events() -> None:
    direct = [e async for e in ScriptedAgent(deltas=5).run(make_input("same"))]
    async with await start_sse_server(ScriptedAgent(deltas=5)) as srv:
        over_sse = [e async for e in SSEAgent(srv.url).run(make_input("same"))]
    async with await start_websocket_server(ScriptedAgent(deltas=5)) as srv:
        over_ws = [e async for e in WebSocketAgent(srv.url).run(make_input("same"))]
    stdio = StdioAgent([sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio",
                        "--agent", "py:tests.transports.scripted:agent"])
    over_stdio = [e async for e in stdio.run(make_input("same"))]
    assert over_sse == over_ws == over_stdio == direct


async def test_run_via_gateway_and_composition() -> None:
    # A WebSocket gateway in front of a remote SSE agent: agents compose.
    async with await start_sse_server(ScriptedAgent(deltas=3)) as sse:
        events = [e async for e in run_via_gateway(SSEAgent(sse.url), make_input("c"), transport="ws")]
    assert events == [e async for e in ScriptedAgent(deltas=3).run(make_input("c"))]


async def test_run_via_gateway_closed_early_cancels_the_run() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    gen = run_via_gateway(agent, make_input("early"))
    async for e in gen:
        if e.type.value == "TEXT_MESSAGE_CONTENT":
            break
    await gen.aclose()
    assert "early" in agent.cancelled


def _ag_ui_validate() -> str:
    """The ag-ui-validate script beside this Python (a venv) or, for a venv over the
    system site-packages, the one on PATH."""
    found = shutil.which("ag-ui-validate", path=os.path.dirname(sys.executable)) or shutil.which("ag-ui-validate")
    assert found, "ag-ui-validate is not installed (pip install ag-ui-validate)"
    return found


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_cli_serve_and_run_against_it(transport: str) -> None:
    env = {**os.environ, "AGUI_AUTH_TOKEN": "cli-token"}
    server = subprocess.Popen(
        [sys.executable, "-m", "agui_engine", "serve", "--transport", transport, "--port", "0",
         "--agent", "py:tests.transports.scripted:agent"],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
    )
    try:
        assert server.stderr is not None
        deadline = time.monotonic() + 20
        url = None
        while time.monotonic() < deadline:
            text = server.stderr.readline().decode()
            if text.startswith("serving on "):
                url = text.split()[-1]
                break
        assert url, "the server did not start"
        refused = subprocess.run([sys.executable, "-m", "agui_engine", "run", "--url", url, "--raw", "hi"],
                                 capture_output=True, timeout=30)
        assert refused.returncode == 2 and b"401" in refused.stderr
        ok = subprocess.run([sys.executable, "-m", "agui_engine", "run", "--url", url, "--raw",
                             "--header", "Authorization: Bearer cli-token", "hi"], capture_output=True, timeout=30)
        assert ok.returncode == 0, ok.stderr.decode()
        events = [decode_event(x) for x in ok.stdout.splitlines()]
        assert events[0].type.value == "RUN_STARTED" and events[-1].type.value == "RUN_FINISHED"
        if transport != "sse":
            return
        validate = subprocess.run(
            [_ag_ui_validate(), url, "--timeout", "10",
             "--header", "Authorization: Bearer cli-token", "--off", "AGUI902"],
            capture_output=True, timeout=60,
        )
        assert validate.returncode == 0, validate.stdout.decode() + validate.stderr.decode()
    finally:
        server.terminate()
        assert server.wait(timeout=15) == 0
    msgspec.json.encode({})


async def test_delete_aborts_the_upstream_model_http_request() -> None:
    """The whole chain: a provider adapter streaming from a (replayed) model over
    HTTP, the LLM agent, the SSE gateway; DELETE closes the agent's generator and
    the model's HTTP response is closed at once."""
    import httpx

    from agui_engine.adapters.openai_chat import OpenAIChatClient
    from agui_engine.adapters.replay import ReplayServer, load_fixture
    from agui_engine.loops.llm_agent import LLMAgent

    data = load_fixture("openai_chat", "text").body
    async with ReplayServer() as model_server:
        llm = OpenAIChatClient(
            "m", api_key="k", base_url=model_server.base_url("openai_chat", "text", hold_after=len(data) * 2 // 3)
        )
        async with await start_sse_server(LLMAgent(llm), options=RegistryOptions(grace_seconds=60)) as srv:
            h = {"Content-Type": "application/json"}
            async with httpx.AsyncClient(timeout=10) as c:
                async with c.stream("POST", srv.url, content=msgspec.json.encode(make_input("up")), headers=h) as r:
                    seen = b""
                    async for chunk in r.aiter_raw():
                        seen += chunk
                        if b"TEXT_MESSAGE_CONTENT" in seen:
                            break
                    assert model_server.disconnects == 0
                    d = await c.delete(srv.url + "runs/up", headers={"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]})
                    assert d.status_code == 204
                    assert await model_server.wait_for_disconnect(timeout=5)
        await llm.aclose()
    assert model_server.disconnects == 1


async def test_gateway_agent_wraps_the_demo_agent() -> None:
    from agui_engine.cli.agent_spec import embedded_agent
    from agui_engine.transports.gateway import GatewayAgent

    text = "What's the weather in Tokyo?"
    direct = [e async for e in embedded_agent().run(make_input("g", text))]
    for transport in ("sse", "ws"):
        through = [e async for e in GatewayAgent(embedded_agent(), transport=transport).run(make_input("g", text))]
        assert [e.type for e in through] == [e.type for e in direct]


class Bulky:
    """An agent that emits ``n`` 4 KiB text deltas as fast as it can (16 MiB for
    the default): far more than the socket buffers plus a small event log hold."""

    def __init__(self, n: int = 4000) -> None:
        self.n = n

    async def run(self, input):  # type: ignore[no-untyped-def]
        import asyncio

        from agui_engine.protocol.events import (
            RunFinishedEvent,
            RunStartedEvent,
            TextMessageContentEvent,
            TextMessageEndEvent,
            TextMessageStartEvent,
        )

        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        for i in range(self.n):
            yield TextMessageContentEvent(message_id="m", delta=f"{i:06d}" + "x" * 4090)
            if i % 20 == 0:
                # Paced like a fast model stream (a network read now and then), so a
                # reader that keeps reading keeps up with the 256 KiB log.
                await asyncio.sleep(0.001)
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


async def _sse_stalled(url: str, run_id: str, registry) -> bytes:  # type: ignore[no-untyped-def]
    """POST over a raw socket with a small receive buffer, read nothing until the
    run has finished on the server, then read everything."""
    import asyncio
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    payload = msgspec.json.encode(make_input(run_id))
    writer.write(
        b"POST / HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
    )
    await writer.drain()
    await eventually(lambda: run_finished(registry, run_id), timeout=30)
    data = await asyncio.wait_for(reader.read(-1), 30)
    writer.close()
    return data.partition(b"\r\n\r\n")[2]


async def test_a_stalled_reader_never_makes_the_server_buffer_without_bound() -> None:
    """Backpressure, SSE and WebSocket: a client that stops reading does not stall
    the run (it finishes on the server meanwhile) and does not make the server
    hold the run: what the client finally gets is a gapless prefix that is much
    smaller than the run, then RUN_ERROR{cursor_expired} (the event log, bounded
    at 256 KiB here, was its only buffer besides the sockets')."""
    import asyncio

    from websockets.asyncio.client import connect

    from agui_engine.protocol.codec import SSEDecoder
    from agui_engine.transports.eventlog import InMemoryEventLog

    total = 4000 * 4096
    async with await start_sse_server(Bulky(), log=InMemoryEventLog(max_bytes=256 * 1024)) as srv:
        raw = await _sse_stalled(srv.url, "bp-sse", srv.registry)
    d = SSEDecoder()
    frames = d.feed(raw) + d.close()
    assert [int(f.id.rpartition(":")[2]) for f in frames[:-1]] == list(range(1, len(frames)))
    last = decode_event(frames[-1].data)
    assert last.type.value == "RUN_ERROR" and last.code == "cursor_expired"
    assert frames[-1].id == frames[-2].id  # the error frame has no id: the cursor stays on the last real event
    assert len(frames) > 20 and len(raw) < total / 2

    async with await start_websocket_server(Bulky(), log=InMemoryEventLog(max_bytes=256 * 1024)) as srv:
        async with connect(srv.url + "?batch=0", max_queue=1) as ws:
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("bp-ws")}).decode())
            await eventually(lambda: run_finished(srv.registry, "bp-ws"), timeout=30)
            lines = []
            while not lines or "error" not in lines[-1]:
                lines.append(msgspec.json.decode(await asyncio.wait_for(ws.recv(), 10)))
    ids = [int(doc["id"].rpartition(":")[2]) for doc in lines[:-1]]
    assert ids == list(range(1, len(ids) + 1))
    assert lines[-1]["runId"] == "bp-ws" and lines[-1]["error"]["code"] == "cursor_expired"
    assert 20 < len(ids) and len(ids) * 4096 < total / 2
