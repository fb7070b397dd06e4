"""The servers' entry points: one options value per concern, each setting given one way (a
field of its struct); the gateway's keywords written once (AppKeywords) and typed; the URL of
an IPv6 host, on real servers bound to ::1."""

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


async def test_connection_options_set_the_limits_of_every_server() -> None:
    big = msgspec.json.encode(make_input("big", text="x" * 2000))
    small = ConnectionOptions(max_input_bytes=1000, max_idle_per_ip=7, max_idle_connections=9)
    for server in (
        await start_sse_server(ScriptedAgent(), connection=small),
        await start_sse_server(app=create_app(ScriptedAgent(), connection=small)),  # the app carries them
    ):
        async with server:
            assert server.gate is not None and (server.gate.per_ip, server.gate.total) == (7, 9)
            async with httpx.AsyncClient(timeout=10) as c:
                r = await c.post(server.url, content=big, headers={"Content-Type": "application/json"})
            assert r.status_code == 413 and r.json()["error"]["code"] == "limit_exceeded"
    async with await start_websocket_server(ScriptedAgent(), connection=small) as ws:
        assert ws.gate is not None and (ws.gate.per_ip, ws.gate.total) == (7, 9)


async def test_a_setting_has_one_way_in() -> None:
    """The settings that were keywords beside their struct are the struct's fields only: an
    old keyword is a TypeError naming it, and ``app=`` takes no second set of options."""
    for start in (start_sse_server, start_websocket_server):
        for keyword in ("max_input_bytes", "send_timeout", "max_idle_per_ip", "resources", "query_queue_timeout"):
            with pytest.raises(TypeError, match=keyword):
                await start(ScriptedAgent(), **{keyword: 1})
    for keyword in ("keepalive_seconds", "body_timeout", "idle_timeout"):
        with pytest.raises(TypeError, match=keyword):
            await start_sse_server(ScriptedAgent(), **{keyword: 1})
    with pytest.raises(TypeError, match=r"create_app\(\) .* 'send_timeout'; it is ConnectionOptions.send_timeout"):
        create_app(ScriptedAgent(), send_timeout=5)
    with pytest.raises(TypeError, match=r"'resources'; it is DataOptions.resources: give data="):
        create_app({"one": ScriptedAgent()}, resources=[])
    with pytest.raises(UsageError, match="auth_token configure create_app"):
        await start_sse_server(app=create_app(ScriptedAgent()), auth_token="t")
    with pytest.raises(UsageError, match="agent configure create_app"):
        await start_sse_server(ScriptedAgent(), app=create_app(ScriptedAgent()))


def test_options_values_are_checked_when_built() -> None:
    with pytest.raises(UsageError, match="max_input_bytes must be >= 1"):
        ConnectionOptions(max_input_bytes=0)
    with pytest.raises(UsageError, match="send_timeout must be > 0"):
        ConnectionOptions(send_timeout=float("nan"))
    for seconds in ("keepalive_seconds", "body_timeout", "idle_timeout"):
        with pytest.raises(UsageError, match=f"{seconds} must be > 0"):
            ConnectionOptions(**{seconds: 0})
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


def test_the_gateways_keywords_are_written_once_and_typed() -> None:
    """create_app, create_asgi_app, start_sse_server and add_agui_routes take
    ``**options: Unpack[AppKeywords]``: one TypedDict, no second list of parameters."""
    from agui_engine.transports.asgi_server import create_asgi_app
    from agui_engine.transports.fastapi_routes import add_agui_routes

    for front in (create_app, create_asgi_app, start_sse_server, add_agui_routes):
        params = inspect.signature(front).parameters
        assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
        assert params["options"].annotation == "Unpack[AppKeywords]", front.__name__
        named = {n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
        assert not named & set(AppKeywords.__annotations__), front.__name__
    # each struct field is a setting of one concern, never also a keyword
    fields = set(ConnectionOptions.__struct_fields__) | set(DataOptions.__struct_fields__)
    assert not fields & set(AppKeywords.__annotations__)
    ws = set(inspect.signature(start_websocket_server).parameters)
    assert not fields & ws and {"connection", "data", "options", "auth_token"} <= ws
