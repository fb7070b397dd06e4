"""The aiohttp transport SSEAgent reads a run's stream with: httpx's interface, aiohttp's C
parser, and each failure named by its cause -- against real sockets: a closed port, a
listener whose accept queue is full, a server that accepts and never answers, one that
dies in the middle of a stream, a plain HTTP server asked for TLS."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from agui_engine.transports.aiohttp_transport import AiohttpTransport
from agui_engine.transports.retrying_client import ConnectionLostError, tls_failure
from agui_engine.transports.sse_client import SSEAgent

from .scripted import make_input


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()  # nothing listens there now: a connection is refused
    return port


async def _server(handler: object) -> asyncio.Server:
    return await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]


def _port(server: asyncio.Server) -> int:
    port: int = server.sockets[0].getsockname()[1]
    return port


async def test_a_refused_connection_is_a_connect_error_not_a_timeout() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/"
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ConnectError) as info:
            await client.post(url, content=b"{}")
    assert not isinstance(info.value, httpx.TimeoutException)
    assert isinstance(info.value.__cause__.os_error, ConnectionRefusedError)  # type: ignore[union-attr]


async def test_sse_agent_on_a_closed_port_says_it_cannot_reach_it_with_a_connect_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/"
    with pytest.raises(ConnectionLostError) as info:
        [e async for e in SSEAgent(url, backoff_initial=0.01).run(make_input("r1"))]
    assert info.value.message == f"cannot reach {url} (ConnectError)"


async def test_a_full_accept_queue_is_a_connect_timeout() -> None:
    # A listener with a backlog of 0 whose queue is filled by connections never accepted:
    # the kernel drops the next SYN, so the connection is not refused, it never completes.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            try:
                filler.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(filler)
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            with pytest.raises(httpx.ConnectTimeout):
                await client.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(30, connect=0.3))
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


async def test_a_server_that_accepts_and_never_answers_is_a_read_timeout() -> None:
    held: list[asyncio.StreamWriter] = []

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # reads the request, answers nothing, keeps the connection open

    server = await _server(stall)
    try:
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"http://127.0.0.1:{_port(server)}/", timeout=httpx.Timeout(0.3, connect=5))
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_server_that_dies_mid_stream_is_a_remote_protocol_error_after_what_it_sent() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"6\r\ndata: \r\n")  # one chunk, then the connection is gone mid-body
        await writer.drain()
        writer.close()

    server = await _server(cut)
    got = b""
    try:
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            with pytest.raises(httpx.RemoteProtocolError):
                async with client.stream("GET", f"http://127.0.0.1:{_port(server)}/") as resp:
                    async for chunk in resp.aiter_raw():
                        got += chunk
    finally:
        server.close()
        await server.wait_closed()
    assert got == b"data: "


async def test_tls_to_a_plain_server_is_a_connect_error_whose_cause_names_the_tls_failure() -> None:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await _server(plain)
    try:
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            with pytest.raises(httpx.ConnectError) as info:
                await client.get(f"https://127.0.0.1:{_port(server)}/")
    finally:
        server.close()
        await server.wait_closed()
    assert tls_failure(info.value) == "WRONG_VERSION_NUMBER"


async def test_sse_agent_reads_one_chunk_per_event_in_batches_with_every_event_in_order() -> None:
    """An upstream that writes each event as its own HTTP chunk (as FastAPI's StreamingResponse
    does), all sent at once: SSEAgent gets every event, in order, and reads them in batches
    (aiohttp hands over what the socket had, not one piece per chunk)."""
    import json

    deltas = [f"token {i} é\u2028 " for i in range(200)]

    def chunk(event: dict[str, object]) -> bytes:
        data = b"data: " + json.dumps(event).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = json.loads(await reader.readexactly(length))
        run = {"threadId": body["threadId"], "runId": body["runId"]}
        events = [{"type": "RUN_STARTED", **run}, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                  *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d} for d in deltas),
                  {"type": "TEXT_MESSAGE_END", "messageId": "m"}, {"type": "RUN_FINISHED", **run}]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + b"".join(map(chunk, events)) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    reads: list[int] = []

    class Counting(SSEAgent):
        async def _attempt(self, session, input, last_id) -> AsyncIterator:  # type: ignore[no-untyped-def,override]
            async for item in super()._attempt(session, input, last_id):
                if item is not None:
                    reads.append(len(item[1]))
                yield item

    server = await _server(upstream)
    try:
        events = [e async for e in Counting(f"http://127.0.0.1:{_port(server)}/").run(make_input("r1"))]
    finally:
        server.close()
        await server.wait_closed()
    assert [e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT"] == deltas
    assert [e.type.value for e in events][-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert sum(reads) == len(events) == 204 and max(reads) > 1
