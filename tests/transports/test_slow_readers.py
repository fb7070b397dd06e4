"""Readers slower than the run (issue: hardening, findings 5 and 8): a reader still
reading when the run's retention expires gets the whole run and its terminal event
(SSE and WebSocket), never silence or an unretrieved task exception; a reader that
stopped reading is cut after the send timeout; what a never-reading client costs."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
from websockets.asyncio.client import connect

from agui_engine.protocol.codec import SSEDecoder, decode_event
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.transports.eventlog import InMemoryEventLog
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import make_input

EVENTS = 4000  # text deltas; + 4 lifecycle/message events


class Chatty:
    """4,000 deltas of ~1 KiB as fast as it can: the run ends long before a slow reader."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        for i in range(EVENTS):
            yield TextMessageContentEvent(message_id="m", delta=f"{i:06d}" + "y" * 1000)
            if i % 200 == 0:
                await asyncio.sleep(0)
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def _unretrieved(loop: asyncio.AbstractEventLoop) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    return seen


async def _small_buffer_connection(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    return await asyncio.open_connection(sock=sock, limit=64 * 1024)


async def _post_with_small_buffer(url: str, run_id: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await _small_buffer_connection(url)
    payload = msgspec.json.encode(make_input(run_id))
    writer.write(
        b"POST / HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
    )
    await writer.drain()
    return reader, writer


async def _wait_retention_expired(registry: Any, run_id: str) -> None:
    # the run finished and its retention (0.05 s) is long over while the client has read little
    for _ in range(500):
        run = registry._runs.get(run_id)
        if run is not None and run.finished:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)


async def test_a_slow_sse_reader_gets_the_whole_run_after_retention_expired() -> None:
    seen = _unretrieved(asyncio.get_running_loop())
    log = InMemoryEventLog(max_bytes=64 * 1024 * 1024)
    async with await start_sse_server(Chatty(), log=log, options=RegistryOptions(retention_seconds=0.05)) as srv:
        reader, writer = await _post_with_small_buffer(srv.url, "slow-sse")
        await _wait_retention_expired(srv.registry, "slow-sse")
        assert srv.registry._runs["slow-sse"].finished  # kept: still being read
        chunks = []
        while chunk := await asyncio.wait_for(reader.read(4096), 10):
            chunks.append(chunk)
            await asyncio.sleep(0)  # a slow reader
        writer.close()
        await asyncio.sleep(0.05)
        assert "slow-sse" not in srv.registry._runs  # discarded once its last reader left
    body = b"".join(chunks).partition(b"\r\n\r\n")[2]
    decoder = SSEDecoder()
    frames = decoder.feed(body) + decoder.close()
    assert len(frames) == EVENTS + 4
    assert decode_event(frames[-1].data).type.value == "RUN_FINISHED"
    assert not seen, seen


async def test_a_slow_websocket_reader_gets_the_whole_run_after_retention_expired() -> None:
    seen = _unretrieved(asyncio.get_running_loop())
    log = InMemoryEventLog(max_bytes=64 * 1024 * 1024)
    async with await start_websocket_server(Chatty(), log=log, options=RegistryOptions(retention_seconds=0.05)) as srv:
        async with connect(srv.url + "?batch=0", max_queue=1, max_size=None) as ws:
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("slow-ws")}).decode())
            await _wait_retention_expired(srv.registry, "slow-ws")
            lines = []
            while True:
                doc = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 10))
                lines.append(doc)
                if "error" in doc or doc["event"]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
    assert len(lines) == EVENTS + 4, lines[-1]
    assert lines[-1]["event"]["type"] == "RUN_FINISHED"
    assert not seen, seen


async def test_a_client_that_stops_reading_is_cut_after_the_send_timeout() -> None:
    log = InMemoryEventLog(max_bytes=64 * 1024 * 1024)
    async with await start_sse_server(Chatty(), log=log, connection=ConnectionOptions(send_timeout=0.3)) as srv:
        reader, writer = await _post_with_small_buffer(srv.url, "stalled")
        run = None
        for _ in range(300):  # the server cuts the stream: its subscription is gone
            run = srv.registry._runs.get("stalled")
            if run is not None and run.finished and run.subscribers == 0:
                break
            await asyncio.sleep(0.02)
        assert run is not None and run.subscribers == 0
        writer.close()
    async with await start_websocket_server(Chatty(), log=log, connection=ConnectionOptions(send_timeout=0.3)) as srv:
        async with connect(srv.url + "?batch=0", max_queue=1, max_size=None) as ws:
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("stalled-ws")}).decode())
            for _ in range(300):
                run = srv.registry._runs.get("stalled-ws")
                if run is not None and run.finished and run.subscribers == 0:
                    break
                await asyncio.sleep(0.02)
            assert run is not None and run.subscribers == 0


class Filler:
    """More event bytes than a run's log keeps (DEFAULT_LOG_MAX_BYTES), in token-sized deltas."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        for i in range(12_000):
            yield TextMessageContentEvent(message_id="m", delta="z" * 400)
            if i % 200 == 0:
                await asyncio.sleep(0)
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_a_never_reading_client_holds_no_more_than_spec_limits_promises(transport: str) -> None:
    """spec/limits.md (DEFAULT_LOG_MAX_BYTES): a client that never reads costs the
    server at most MAX_HELD_PER_STALLED_RUN_FACTOR x the log's byte bound (the log's
    events with msgspec's allocation slack, plus one coalesced read and the transport
    buffers). Measured with tracemalloc on the server side of a real connection."""
    import gc
    import tracemalloc

    from agui_engine.transports.eventlog import DEFAULT_LOG_MAX_BYTES, MAX_HELD_PER_STALLED_RUN_FACTOR

    tracemalloc.start()
    try:
        srv = await (start_sse_server(Filler()) if transport == "sse" else start_websocket_server(Filler()))
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        if transport == "sse":
            _, writer = await _post_with_small_buffer(srv.url, "never")
        else:
            ws = await connect(srv.url, max_queue=1)
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("never")}).decode())
        await _wait_retention_expired(srv.registry, "never")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        if transport == "sse":
            writer.close()
        else:
            ws.transport.abort()
        await srv.close()
    finally:
        tracemalloc.stop()
    assert DEFAULT_LOG_MAX_BYTES < held <= MAX_HELD_PER_STALLED_RUN_FACTOR * DEFAULT_LOG_MAX_BYTES, held / 2**20
