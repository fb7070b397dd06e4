"""The WebSocket gateway and WebSocketAgent over real loopback connections."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import websockets
from websockets.asyncio.client import connect

from agui_engine.protocol.codec import decode_event
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.websocket_client import WebSocketAgent
from agui_engine.transports.websocket_server import MAX_BAD_MESSAGES, start_websocket_server

from .scripted import ScriptedAgent, make_input


def run_msg(run_id: str) -> str:
    return msgspec.json.encode({"type": "run", "input": make_input(run_id)}).decode()


async def read_lines(ws, until_terminal: set[str]) -> list[dict]:  # type: ignore[no-untyped-def]
    """Lines until every run in ``until_terminal`` has sent its terminal event."""
    out: list[dict] = []
    pending = set(until_terminal)
    while pending:
        message = await asyncio.wait_for(ws.recv(), 5)
        for line in message.split("\n"):
            doc = msgspec.json.loads(line) if hasattr(msgspec.json, "loads") else msgspec.json.decode(line)
            out.append(doc)
            if "event" in doc and doc["event"]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                pending.discard(doc["id"].rpartition(":")[0])
            if "error" in doc and doc.get("runId") in pending:
                pending.discard(doc["runId"])
    return out


async def test_one_connection_many_runs_with_ids() -> None:
    async with await start_websocket_server(ScriptedAgent(deltas=3, pause=0.001)) as srv:
        async with connect(srv.url) as ws:
            await ws.send(run_msg("a"))
            await ws.send(run_msg("b"))
            lines = await read_lines(ws, {"a", "b"})
    for rid in ("a", "b"):
        mine = [d for d in lines if d["id"].startswith(rid + ":")]
        assert [int(d["id"].rpartition(":")[2]) for d in mine] == list(range(1, len(mine) + 1))
        events = [decode_event(msgspec.json.encode(d["event"])) for d in mine]
        assert events == [e async for e in ScriptedAgent(deltas=3).run(make_input(rid))]


async def test_unbatched_mode_sends_one_line_per_message() -> None:
    async with await start_websocket_server(ScriptedAgent(deltas=3)) as srv:
        async with connect(srv.url + "?batch=0") as ws:
            await ws.send(run_msg("a"))
            msgs = [await asyncio.wait_for(ws.recv(), 5) for _ in range(11)]
    assert all("\n" not in m for m in msgs)
    assert msgspec.json.decode(msgs[-1])["event"]["type"] == "RUN_FINISHED"


async def test_malformed_messages_get_error_lines_and_the_connection_survives() -> None:
    agent = ScriptedAgent(deltas=1)
    async with await start_websocket_server(agent) as srv:
        async with connect(srv.url) as ws:
            answers = []
            for bad in ["{not json", "[1]", '{"type": "dance"}', '{"type": "run", "input": {"runId": 5}}',
                        '{"type": "cancel"}', '{"type": "cancel", "runId": "nope"}',
                        '{"type": "resume", "runId": "nope", "lastEventId": "nope:1"}']:
                await ws.send(bad)
                answers.append(msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5)))
            await ws.send(run_msg("ok"))
            lines = await read_lines(ws, {"ok"})
    codes = [a["error"]["code"] for a in answers]
    assert codes == ["malformed_json", "bad_input", "bad_input", "invalid_input", "bad_input", "unknown_run", "unknown_run"]
    assert all(4000 <= a["error"]["status"] <= 4999 for a in answers)
    assert answers[5]["runId"] == "nope"
    assert lines[-1]["event"]["type"] == "RUN_FINISHED"


async def test_too_many_malformed_messages_close_with_4400_and_binary_with_1003() -> None:
    async with await start_websocket_server(ScriptedAgent()) as srv:
        async with connect(srv.url) as ws:
            for _ in range(MAX_BAD_MESSAGES):
                await ws.send("nope")
            with pytest.raises(websockets.ConnectionClosed) as ei:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
            assert ei.value.rcvd.code == 4400
        async with connect(srv.url) as ws:
            await ws.send(b"\x00\x01")
            with pytest.raises(websockets.ConnectionClosed) as ei:
                await asyncio.wait_for(ws.recv(), 5)
            assert ei.value.rcvd.code == 1003


async def test_max_message_size_closes_with_1009() -> None:
    async with await start_websocket_server(ScriptedAgent(), connection=ConnectionOptions(max_input_bytes=1000)) as srv:
        async with connect(srv.url) as ws:
            await ws.send("x" * 5000)
            with pytest.raises(websockets.ConnectionClosed) as ei:
                await asyncio.wait_for(ws.recv(), 5)
            assert ei.value.rcvd.code == 1009


async def test_auth_at_the_handshake() -> None:
    async with await start_websocket_server(ScriptedAgent(deltas=1), auth_token="tok") as srv:
        with pytest.raises(websockets.InvalidStatus) as ei:
            async with connect(srv.url):
                pass
        assert ei.value.response.status_code == 401
        assert b"unauthorized" in ei.value.response.body
        with pytest.raises(RemoteAgentError) as e2:
            [e async for e in WebSocketAgent(srv.url, headers={"Authorization": "Bearer bad"}).run(make_input())]
        assert e2.value.status == 401 and e2.value.code == "unauthorized"
        ok = [e async for e in WebSocketAgent(srv.url, headers={"Authorization": "Bearer tok"}).run(make_input("h"))]
        assert ok[-1].type.value == "RUN_FINISHED"
        async with connect(srv.url + "?access_token=tok") as ws:  # browsers cannot set headers
            await ws.send(run_msg("q"))
            assert (await read_lines(ws, {"q"}))[-1]["event"]["type"] == "RUN_FINISHED"


async def test_cancel_message_closes_the_agent_generator() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    async with await start_websocket_server(agent) as srv, connect(srv.url) as ws:
        await ws.send(run_msg("c"))
        await asyncio.wait_for(ws.recv(), 5)
        await ws.send('{"type": "cancel", "runId": "c"}')
        lines = await read_lines(ws, {"c"})
    assert lines[-1]["event"] == {"type": "RUN_ERROR", "message": "the run was cancelled", "code": "cancelled"}
    assert "c" in agent.cancelled


async def test_resume_on_a_new_connection_and_expired_cursor() -> None:
    from agui_engine.transports.eventlog import InMemoryEventLog

    agent = ScriptedAgent(deltas=30, pause=0.005)
    async with await start_websocket_server(agent, options=RegistryOptions(grace_seconds=5), log=InMemoryEventLog(max_events=1000)) as srv:
        first: list[dict] = []
        async with connect(srv.url + "?batch=0") as ws:
            await ws.send(run_msg("r"))
            for _ in range(5):
                first.append(msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5)))
        key = first[0].pop("runKey")  # the run's first line carries its key (spec §2.6) ...
        assert all("runKey" not in d for d in first)  # ... and only that line
        async with connect(srv.url) as ws:
            resume = {"type": "resume", "runId": "r", "lastEventId": first[-1]["id"], "runKey": key}
            await ws.send(msgspec.json.encode(resume).decode())
            rest = await read_lines(ws, {"r"})
    seqs = [int(d["id"].rpartition(":")[2]) for d in first + rest]
    assert seqs == list(range(1, len(seqs) + 1))
    assert rest[-1]["event"]["type"] == "RUN_FINISHED"

    small = ScriptedAgent(deltas=20, pause=0.001)  # the live subscriber keeps up with the tiny log
    async with await start_websocket_server(small, log=InMemoryEventLog(max_events=4)) as srv:
        async with connect(srv.url) as ws:
            await ws.send(run_msg("s"))
            lines = await read_lines(ws, {"s"})
        async with connect(srv.url) as ws:
            resume = {"type": "resume", "runId": "s", "lastEventId": "s:2", "runKey": lines[0]["runKey"]}
            await ws.send(msgspec.json.encode(resume).decode())
            err = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5))
    assert err["runId"] == "s" and err["error"]["code"] == "cursor_expired" and err["error"]["status"] == 4410


async def test_shutdown_sends_terminal_events_then_going_away() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    srv = await start_websocket_server(agent)
    async with connect(srv.url) as ws:
        await ws.send(run_msg("z"))
        await asyncio.wait_for(ws.recv(), 5)
        closing = asyncio.create_task(srv.close())
        lines = await read_lines(ws, {"z"})
        with pytest.raises(websockets.ConnectionClosed) as ei:
            await asyncio.wait_for(ws.recv(), 5)
        await closing
    assert lines[-1]["event"]["code"] == "shutdown"
    assert ei.value.rcvd.code == 1001


async def test_ping_keepalive_closes_a_peer_that_never_answers() -> None:
    """A raw client that completes the handshake and then never answers pings:
    the server pings it (opcode 0x9) and, without a pong, closes the connection."""
    import base64
    import os

    async with await start_websocket_server(ScriptedAgent(), ping_interval=0.05, ping_timeout=0.05) as srv:
        port = int(srv.url.rstrip("/").rpartition(":")[2])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16))
        writer.write(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101")
        rest = await asyncio.wait_for(reader.read(), 5)  # until the server closes
        writer.close()
    assert rest[0] == 0x89  # a ping frame came first
    assert b"\x88" in rest  # then a close frame


async def test_ping_keepalive_keeps_an_answering_peer_through_a_silent_run() -> None:
    """A real client that answers pings stays connected through many ping
    intervals of a silent run and gets the whole run; the server did ping it
    (a pong measured the connection's latency)."""
    agent = ScriptedAgent(deltas=2, silence=0.5)  # ~10 ping intervals of silence
    async with await start_websocket_server(agent, ping_interval=0.05, ping_timeout=0.05) as srv:
        async with connect(srv.url, ping_interval=None) as ws:  # never pings itself, only answers
            await ws.send(run_msg("quiet"))
            lines = await read_lines(ws, {"quiet"})
            server_side = next(iter(srv.server.connections))
            assert server_side.latency > 0  # a pong came back for a server ping
    assert [doc["event"]["type"] for doc in lines][-1] == "RUN_FINISHED"
    assert [doc["event"] for doc in lines] == [
        msgspec.to_builtins(e) for e in [e async for e in ScriptedAgent(deltas=2).run(make_input("quiet"))]
    ]


async def test_the_server_sets_its_own_backpressure_marks() -> None:
    """max_queue / write_limit are passed to the library explicitly (the defaults are
    this module's named constants, and a caller can change them)."""
    from agui_engine.transports.websocket_server import DEFAULT_MAX_QUEUE, DEFAULT_WRITE_LIMIT

    for kwargs, queue, limit in (({}, DEFAULT_MAX_QUEUE, DEFAULT_WRITE_LIMIT), ({"max_queue": 3, "write_limit": 1234}, 3, 1234)):
        async with await start_websocket_server(ScriptedAgent(deltas=1), **kwargs) as srv:
            async with connect(srv.url) as ws:
                await ws.send(run_msg("r1"))
                await read_lines(ws, {"r1"})
                (conn,) = srv._connections
                assert (conn.ws.max_queue_high, conn.ws.write_limit_high) == (queue, limit)


async def test_a_binary_message_closes_with_unsupported_data() -> None:
    from agui_engine.transports.websocket_server import _CLOSE_UNSUPPORTED_DATA

    async with await start_websocket_server(ScriptedAgent(deltas=1)) as srv:
        async with connect(srv.url) as ws:
            await ws.send(b"\x00\x01")
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert ws.close_code == _CLOSE_UNSUPPORTED_DATA == 1003
