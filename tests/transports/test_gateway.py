"""The gateway end to end: the same agent on all three transports gives the same
events; the CLI's serve and run commands; the in-process gateway of the demo."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import msgspec

from agui_engine.codec import decode_event
from transports.gateway import run_via_gateway
from transports.sse import SSEAgent, start_sse_server
from transports.stdio import StdioAgent
from transports.websocket import WebSocketAgent, start_ws_server

from .scripted import ScriptedAgent, make_input


async def test_the_same_agent_on_all_three_transports_gives_the_same_events() -> None:
    direct = [e async for e in ScriptedAgent(deltas=5).run(make_input("same"))]
    async with await start_sse_server(ScriptedAgent(deltas=5)) as srv:
        over_sse = [e async for e in SSEAgent(srv.url).run(make_input("same"))]
    async with await start_ws_server(ScriptedAgent(deltas=5)) as srv:
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


def test_cli_serve_sse_and_run_against_it() -> None:
    env = {**os.environ, "AGUI_AUTH_TOKEN": "cli-token"}
    server = subprocess.Popen(
        [sys.executable, "-m", "agui_engine", "serve", "--transport", "sse", "--port", "0",
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
        validate = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ag-ui-validate"), url, "--timeout", "10",
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

    from adapters.openai_chat import OpenAIChatClient
    from adapters.replay import ReplayServer, load_fixture
    from agui_engine.llm_agent import LLMAgent

    data = load_fixture("openai_chat", "text").body
    async with ReplayServer() as model_server:
        llm = OpenAIChatClient(
            "m", api_key="k", base_url=model_server.base_url("openai_chat", "text", hold_after=len(data) * 2 // 3)
        )
        async with await start_sse_server(LLMAgent(llm), grace_seconds=60) as srv:
            h = {"Content-Type": "application/json"}
            async with httpx.AsyncClient(timeout=10) as c:
                async with c.stream("POST", srv.url, content=msgspec.json.encode(make_input("up")), headers=h) as r:
                    seen = b""
                    async for chunk in r.aiter_raw():
                        seen += chunk
                        if b"TEXT_MESSAGE_CONTENT" in seen:
                            break
                    assert model_server.disconnects == 0
                    d = await c.delete(srv.url + "runs/up")
                    assert d.status_code == 204
                    assert await model_server.wait_for_disconnect(timeout=5)
        await llm.aclose()
    assert model_server.disconnects == 1


async def test_gateway_agent_wraps_the_demo_agent() -> None:
    from transports.agent_spec import embedded_agent
    from transports.gateway import GatewayAgent

    text = "What's the weather in Tokyo?"
    direct = [e async for e in embedded_agent().run(make_input("g", text))]
    for transport in ("sse", "ws"):
        through = [e async for e in GatewayAgent(embedded_agent(), transport=transport).run(make_input("g", text))]
        assert [e.type for e in through] == [e.type for e in direct]
