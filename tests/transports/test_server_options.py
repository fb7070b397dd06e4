"""The servers' entry points: one options value per concern, filled by the keyword
arguments; typed keywords; the URL of an IPv6 host, on real servers bound to ::1."""

from __future__ import annotations

import asyncio
import inspect
import io

import httpx
import msgspec
import pytest

from agui_engine.protocol.errors import UsageError
from agui_engine.transports import ConnectionOptions, DataOptions
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import AppKeywords, create_app, start_sse_server
from agui_engine.transports.stdio_server import serve_stdio
from agui_engine.transports.websocket_client import WebSocketAgent
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent, make_input


async def _run_through(agent: SSEAgent | WebSocketAgent, run_id: str) -> list[str]:
    return [e.type.value async for e in agent.run(make_input(run_id))]


async def test_an_ipv6_host_is_bracketed_in_both_servers_urls_and_clients_reach_it() -> None:
    expected = [e.type.value async for e in ScriptedAgent(deltas=2).run(make_input("v6"))]
    async with await start_sse_server(ScriptedAgent(deltas=2), host="::1", port=0) as sse:
        port = sse.url.rsplit(":", 1)[1].rstrip("/")
        assert sse.url == f"http://[::1]:{port}/"
        assert await _run_through(SSEAgent(sse.url), "v6") == expected
    async with await start_websocket_server(ScriptedAgent(deltas=2), host="::1", port=0) as ws:
        port = ws.url.rsplit(":", 1)[1].rstrip("/")
        assert ws.url == f"ws://[::1]:{port}/"  # was ws://::1:port/, which no client can parse
        assert await _run_through(WebSocketAgent(ws.url), "v6") == expected


async def test_connection_options_or_the_keywords_set_the_same_limits() -> None:
    big = msgspec.json.encode(make_input("big", text="x" * 2000))
    for server in (
        await start_sse_server(ScriptedAgent(), connection=ConnectionOptions(max_input_bytes=1000, max_idle_per_ip=7)),
        await start_sse_server(ScriptedAgent(), max_input_bytes=1000, max_idle_per_ip=7),
    ):
        async with server:
            assert server.gate is not None and server.gate.per_ip == 7
            async with httpx.AsyncClient(timeout=10) as c:
                r = await c.post(server.url, content=big, headers={"Content-Type": "application/json"})
            assert r.status_code == 413 and r.json()["error"]["code"] == "limit_exceeded"
    for ws in (
        await start_websocket_server(ScriptedAgent(), connection=ConnectionOptions(max_idle_connections=9)),
        await start_websocket_server(ScriptedAgent(), max_idle_connections=9),
    ):
        async with ws:
            assert ws.gate is not None and ws.gate.total == 9


async def test_a_setting_given_both_ways_is_refused_naming_it() -> None:
    with pytest.raises(UsageError, match="send_timeout is given both in ConnectionOptions"):
        create_app(ScriptedAgent(), send_timeout=5, connection=ConnectionOptions(send_timeout=9))
    with pytest.raises(UsageError, match="max_idle_per_ip is given both"):
        await start_sse_server(ScriptedAgent(), max_idle_per_ip=1, connection=ConnectionOptions(max_idle_per_ip=2))
    with pytest.raises(UsageError, match="query_queue_timeout is given both in DataOptions"):
        await start_websocket_server(ScriptedAgent(), query_queue_timeout=1, data=DataOptions(query_queue_timeout=2))
    with pytest.raises(UsageError, match="configure create_app"):
        await start_sse_server(app=create_app(ScriptedAgent()), auth_token="t")


def test_options_values_are_checked_when_built() -> None:
    with pytest.raises(UsageError, match="max_input_bytes must be >= 1"):
        ConnectionOptions(max_input_bytes=0)
    with pytest.raises(UsageError, match="send_timeout must be > 0"):
        ConnectionOptions(send_timeout=float("nan"))
    with pytest.raises(UsageError, match="query_queue_timeout"):
        DataOptions(query_queue_timeout=-1)


def test_stdio_takes_the_same_connection_options() -> None:
    line = msgspec.json.encode(make_input("s", text="x" * 500)) + b"\n"
    out = io.BytesIO()
    small = ConnectionOptions(max_input_bytes=100)
    rc = asyncio.run(serve_stdio(ScriptedAgent(deltas=1), stdin=io.BytesIO(line), stdout=out, connection=small))
    assert rc == 0
    (answer,) = [msgspec.json.decode(x) for x in out.getvalue().splitlines()]
    assert answer["error"]["code"] == "limit_exceeded" and answer["line"] == 1


def test_start_sse_server_takes_exactly_create_apps_keywords_typed() -> None:
    params = inspect.signature(create_app).parameters
    keywords = {name: p for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(AppKeywords.__annotations__) == set(keywords)
    # the same annotation, as written (the modules use postponed annotations)
    written = {k: getattr(v, "__forward_arg__", v) for k, v in AppKeywords.__annotations__.items()}
    assert written == {k: p.annotation for k, p in keywords.items()}
    assert inspect.signature(start_sse_server).parameters["options"].annotation != "Any"
