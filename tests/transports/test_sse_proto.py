"""The binary (protobuf) encoding over HTTP: the gateway answers with it when Accept prefers it,
SSEAgent(binary=True) asks for it and decodes it (resume included), and the real @ag-ui/client
HttpAgent, asking for it, builds the same messages from ``agui-engine serve`` as over SSE."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.events import RunErrorEvent, RunStartedEvent
from agui_engine.protocol.proto import (
    PROTO_CONTENT_TYPE,
    PROTO_KEEPALIVE_FRAME,
    ProtoEventDecoder,
    encode_proto_frame,
)
from agui_engine.transports.content_negotiation import negotiate
from agui_engine.transports.http_headers import RUN_KEY_HEADER
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import node_with

from ..waiting import eventually
from .scripted import ScriptedAgent, make_input

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


JS_DIR = Path(__file__).resolve().parents[1] / "js"
#: a run of the embedded demo model through the CLI and node: seconds, not minutes
RUN_TIMEOUT = 120


def body(run_id: str = "run-1") -> bytes:
    return msgspec.json.encode(make_input(run_id))


async def post(url: str, data: bytes, accept: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as c:
        return await c.post(url, content=data, headers={"Content-Type": "application/json", "Accept": accept,
                                                         **(headers or {})})


def decode_proto_body(raw: bytes) -> list[Any]:
    d = ProtoEventDecoder()
    return d.feed(raw) + d.close()


def decode_sse_body(raw: bytes) -> list[Any]:
    d = EventStreamDecoder("sse")
    return d.feed(raw) + d.close()


def test_negotiate_prefers_what_accept_prefers() -> None:
    assert negotiate(PROTO_CONTENT_TYPE) == "proto"
    assert negotiate(f"{PROTO_CONTENT_TYPE}, text/event-stream;q=0.5") == "proto"
    assert negotiate(f"{PROTO_CONTENT_TYPE};q=0.4, text/event-stream;q=0.5") == "sse"
    assert negotiate(f"{PROTO_CONTENT_TYPE}, text/event-stream") == "sse"  # a tie: SSE
    assert negotiate(f"{PROTO_CONTENT_TYPE}, */*;q=0.1") == "proto"
    assert negotiate("*/*") == "sse"  # a wildcard never picks the binary encoding
    assert negotiate(f"{PROTO_CONTENT_TYPE};q=inf, text/event-stream;q=0.1") == "sse"  # q outside RFC 9110 = 0


P = PROTO_CONTENT_TYPE


@pytest.mark.parametrize(("accept", "kind"), [
    # RFC 9110 12.5.1: the most specific range naming a type gives its q; a wildcard does not
    # bring back a type its own range refused
    ("text/event-stream;q=0, */*", "ndjson"),
    (f"text/event-stream;q=0, application/*;q=0, {P}", "proto"),  # its exact range beats application/*
    (f"text/event-stream;q=0, {P};q=0.5, application/*;q=0.1", "proto"),
    ("text/*;q=0.2, */*;q=0.9", "ndjson"),  # text/event-stream weighs 0.2 (text/*), the rest 0.9
    (f"text/*;q=0.2, */*;q=0.9, {P}", "proto"),
    ("application/*", "ndjson"),  # the textual application type first on a tie
    (f"application/*;q=0.5, {P};q=0.6", "proto"),
    (f"{P};q=0, */*", "sse"),
    ("TEXT/EVENT-STREAM;Q=0.5, application/x-ndjson;q=0.4", "sse"),  # case-insensitive names
    (f"text/event-stream;charset=utf-8;q=0.3, {P} ; q=0.31", "proto"),  # spaces, other parameters
    ("text/event-stream;q=0.9, text/event-stream;q=0.1", "sse"),  # a repeated range: its best q
    # a quoted parameter value may hold a comma or a semicolon (RFC 9110 5.6.6): not a new range or q
    ('text/event-stream;note="a,b";q=0.1, application/x-ndjson;q=0.5', "ndjson"),
    (f'{P};ext="x;q=0", text/event-stream;q=0.9', "proto"),
    ('text/event-stream;x="a \\" , b";q=0.2, application/x-ndjson;q=0.3', "ndjson"),  # an escaped quote
    ('text/event-stream;x="never closed, q=0', "sse"),
])
def test_negotiate_takes_each_types_q_from_its_most_specific_range(accept: str, kind: str) -> None:
    assert negotiate(accept) == kind


@pytest.mark.parametrize("accept", ["text/event-stream;q=0, application/*;q=0, */*;q=1, text/*;q=1",
                                    f"*/*;q=0, {P};q=0", "text/html, image/*", ",", ";q=1", "*/*;q=0"])
def test_negotiate_refuses_what_admits_none_saying_what_it_speaks(accept: str) -> None:
    from agui_engine.transports.input_errors import NotAcceptableError

    with pytest.raises(NotAcceptableError, match=f"admits none of text/event-stream, .*{re.escape(P)}"):
        negotiate(accept)


async def test_proto_stream_carries_the_same_events_as_sse() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=3)) as srv:
        binary = await post(srv.url, body("run-p"), PROTO_CONTENT_TYPE)
        text = await post(srv.url, body("run-s"), "text/event-stream")
    assert binary.status_code == 200 and binary.headers["content-type"] == PROTO_CONTENT_TYPE
    assert binary.headers["x-agui-run-id"] == "run-p"
    events, sse_events = decode_proto_body(binary.content), decode_sse_body(text.content)
    assert [e.type for e in events] == [e.type for e in sse_events] and events[-1].type.value == "RUN_FINISHED"
    assert binary.content == b"".join(encode_proto_frame(e) for e in events)  # one frame per event
    assert len(binary.content) < len(text.content)


async def test_unacceptable_accept_is_a_406_that_names_the_binary_type() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=1)) as srv:
        r = await post(srv.url, body(), "application/json")
    assert r.status_code == 406 and PROTO_CONTENT_TYPE in r.json()["error"]["message"]


async def test_keepalive_frames_keep_an_idle_binary_stream_open_and_are_skipped() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=2, silence=0.3), connection=ConnectionOptions(keepalive_seconds=0.05)) as srv:
        r = await post(srv.url, body(), PROTO_CONTENT_TYPE)
    assert r.content.count(PROTO_KEEPALIVE_FRAME) >= 2
    events = decode_proto_body(r.content)
    assert events[-1].type.value == "RUN_FINISHED" and len(events) == len(decode_proto_body(
        r.content.replace(PROTO_KEEPALIVE_FRAME, b"")))


async def test_resume_positions_count_frames_from_the_cursor() -> None:
    """GET <url>/runs/<id> with Last-Event-ID <id>:<n> streams events n+1...: the same events
    the SSE stream carries with ids n+1..., so a binary client names its position by counting."""
    async with await start_sse_server(ScriptedAgent(deltas=4)) as srv:
        first = await post(srv.url, body("run-r"), "text/event-stream")
        total = len(decode_sse_body(first.content))
        async with httpx.AsyncClient(timeout=10) as c:
            rest = await c.get(srv.url.rstrip("/") + "/runs/run-r", headers={"Accept": PROTO_CONTENT_TYPE,
                                                                  "Last-Event-ID": "run-r:3",
                                                                  RUN_KEY_HEADER: first.headers[RUN_KEY_HEADER]})
    assert rest.headers["content-type"] == PROTO_CONTENT_TYPE, (rest.status_code, rest.text)
    assert decode_proto_body(rest.content) == decode_sse_body(first.content)[3:]
    assert len(decode_proto_body(rest.content)) == total - 3


async def test_sse_agent_binary_runs_and_resumes_after_a_drop() -> None:
    agent = ScriptedAgent(deltas=6, pause=0.02)
    async with await start_sse_server(agent) as srv:
        plain = [e async for e in SSEAgent(srv.url).run(make_input("run-a"))]
        cut = _CuttingTransport(after_bytes=120)
        async with httpx.AsyncClient(transport=cut, timeout=10) as client:
            remote = SSEAgent(srv.url, binary=True, client=client, backoff_initial=0.01)
            events = [e async for e in remote.run(make_input("run-b"))]
    assert cut.accepts[0].startswith(PROTO_CONTENT_TYPE) and cut.content_types[0] == PROTO_CONTENT_TYPE
    assert len(cut.accepts) >= 2 and cut.last_event_ids[1] is not None  # it dropped, then resumed
    assert [e.type for e in events] == [e.type for e in plain]
    assert [getattr(e, "delta", None) for e in events] == [getattr(e, "delta", None) for e in plain]


async def test_delete_cancels_a_binary_stream_which_ends_with_run_error_cancelled() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    async with await start_sse_server(agent) as srv:
        headers = {"Content-Type": "application/json", "Accept": PROTO_CONTENT_TYPE}
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", srv.url, content=body(), headers=headers) as r:
                decoder, got = ProtoEventDecoder(), list[Any]()
                chunks = r.aiter_raw()
                while len(got) < 3:
                    got += decoder.feed(await chunks.__anext__())
                key = {RUN_KEY_HEADER: r.headers[RUN_KEY_HEADER]}
                d = await c.delete(srv.url.rstrip("/") + "/runs/run-1", headers=key)
                assert d.status_code == 204 and "run-1" in agent.cancelled
                async for chunk in chunks:
                    got += decoder.feed(chunk)
                got += decoder.close()
    assert isinstance(got[-1], RunErrorEvent) and got[-1].code == "cancelled"


async def test_sse_agent_binary_closed_early_cancels_the_remote_run() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    async with await start_sse_server(agent) as srv:
        stream = SSEAgent(srv.url, binary=True).run(make_input("run-c"))
        got = [await stream.__anext__() for _ in range(3)]
        await stream.aclose()
        await eventually(lambda: "run-c" in agent.cancelled, what="the DELETE to cancel the run")
    assert [e.type.value for e in got][:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]


async def test_sse_agent_binary_takes_an_sse_answer() -> None:
    """A server that does not speak protobuf answers SSE; the agent reads whatever it got."""
    async with await start_sse_server(ScriptedAgent(deltas=2)) as srv:
        async with httpx.AsyncClient(transport=_SSEOnly(), timeout=10) as client:
            events = [e async for e in SSEAgent(srv.url, binary=True, client=client).run(make_input())]
    assert events[-1].type.value == "RUN_FINISHED"


async def test_sse_agent_binary_refusal_is_still_a_remote_agent_error() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=1), auth_token="secret") as srv:
        with pytest.raises(RemoteAgentError) as info:
            [e async for e in SSEAgent(srv.url, binary=True).run(make_input())]
    assert info.value.status == 401


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        (b"\x00\x00\x00\x01\x13", "invalid_protobuf"),  # a group wire type
        (b"\xff\xff\xff\xff", "frame_too_large"),  # a 4 GiB length: refused before any body
        (b"\x00\x00\x00\x02\x12\x7f", "invalid_protobuf"),  # a length past its message
    ],
)
async def test_sse_agent_binary_ends_a_bad_stream_with_a_typed_run_error(tail: bytes, code: str) -> None:
    """A server that sends bad bytes after a good event: RUN_ERROR with the error's code, not a crash."""
    from aiohttp import web

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": PROTO_CONTENT_TYPE})
        await resp.prepare(request)
        await resp.write(encode_proto_frame(RunStartedEvent(thread_id="t", run_id="run-1")) + tail)
        await resp.write_eof()
        return resp

    async def cancel(request: web.Request) -> web.Response:
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/", handler)
    app.router.add_delete("/runs/{run_id}", cancel)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        events = [e async for e in SSEAgent(f"http://127.0.0.1:{port}/", binary=True).run(make_input())]
    finally:
        await runner.cleanup()
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert isinstance(events[1], RunErrorEvent) and events[1].code == code, events[1]


class _CuttingTransport(httpx.AsyncHTTPTransport):
    """Real HTTP; the first streamed answer is cut after ``after_bytes`` (a network drop)."""

    def __init__(self, after_bytes: int) -> None:
        super().__init__()
        self.after_bytes = after_bytes
        self.accepts: list[str] = []
        self.content_types: list[str] = []
        self.last_event_ids: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.method != "POST":
            return response
        self.accepts.append(request.headers["accept"])
        self.last_event_ids.append(request.headers.get("last-event-id"))
        self.content_types.append(response.headers.get("content-type", ""))
        if len(self.accepts) == 1:
            response.stream = _Cut(response.stream, self.after_bytes)
        return response


class _Cut(httpx.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in self.inner:
            if sent + len(chunk) >= self.limit:
                yield chunk[: self.limit - sent]
                raise httpx.ReadError("connection cut by the test")
            sent += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _SSEOnly(httpx.AsyncHTTPTransport):
    """Real HTTP to a server that is told the client accepts SSE only (an older gateway's answer)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["accept"] = "text/event-stream"
        return await super().handle_async_request(request)


# --------------------------------------------------------------------------------------------
# the real @ag-ui/client against the real `agui-engine serve`
# --------------------------------------------------------------------------------------------


@asynccontextmanager
async def agui_engine_serve() -> AsyncIterator[str]:
    command = shutil.which("agui-engine", path=os.path.dirname(sys.executable)) or shutil.which("agui-engine")
    assert command, "the agui-engine console script is not installed"
    proc = await asyncio.create_subprocess_exec(command, "serve", "--port", "0", stderr=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.DEVNULL)
    assert proc.stderr is not None
    try:
        url = None
        while url is None:
            line = await asyncio.wait_for(proc.stderr.readline(), RUN_TIMEOUT)
            assert line, "agui-engine serve exited"
            if line.startswith(b"serving on "):
                url = line.split()[-1].decode()
        yield url
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)


async def http_agent(url: str, mode: str) -> dict[str, Any]:
    node = node_with("@ag-ui/client")
    proc = await asyncio.create_subprocess_exec(node, "http_agent_proto.mjs", url, "What's the weather in Tokyo?", mode,
                                                cwd=JS_DIR, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    result: dict[str, Any] = json.loads(out)
    return result


async def test_ag_ui_client_http_agent_streams_protobuf_and_builds_the_same_messages() -> None:
    async with agui_engine_serve() as url:
        over_sse, over_proto = await asyncio.gather(http_agent(url, "sse"), http_agent(url, "proto"))
    assert over_sse["error"] is None and over_proto["error"] is None, (over_sse["error"], over_proto["error"])
    assert over_sse["contentType"] == "text/event-stream" and over_proto["contentType"] == PROTO_CONTENT_TYPE
    assert "RUN_FINISHED" in over_proto["types"] and len(over_proto["messages"]) >= 2
    assert over_proto["types"] == over_sse["types"]
    # the demo model mints fresh ids per run: compare with each id replaced by its first-seen rank
    assert same_ids(over_proto["messages"]) == same_ids(over_sse["messages"])
    assert same_ids(over_proto["state"]) == same_ids(over_sse["state"])


_ID_KEYS = {"id", "messageId", "toolCallId", "parentMessageId"}


def same_ids(value: Any, seen: dict[str, str] | None = None) -> Any:
    seen = {} if seen is None else seen
    if isinstance(value, dict):
        return {k: seen.setdefault(v, f"id-{len(seen)}") if k in _ID_KEYS and isinstance(v, str)
                else same_ids(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [same_ids(v, seen) for v in value]
    return value


def _messages(body: bytes) -> list[bytes]:
    """The protobuf messages of a length-prefixed body, keep-alive frames left out."""
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos:pos + 4], "big")
        if body[pos:pos + 4 + size] != PROTO_KEEPALIVE_FRAME:
            out.append(body[pos + 4:pos + 4 + size])
        pos += 4 + size
    assert pos == len(body)
    return out


async def test_the_bytes_agui_engine_serve_sends_are_ag_ui_protos_bytes() -> None:
    """Done-when of issue 25: a run of ``agui-engine serve`` (the demo model: text, a tool call,
    a component, reasoning) and that thread's history, both over protobuf: @ag-ui/proto under node
    encodes the events we sent to exactly the bytes we sent, and decodes our bytes to our events."""
    from agui_engine.protocol.events import Event

    from ..agui_engine.protocol.test_proto import official

    async with agui_engine_serve() as url, httpx.AsyncClient(timeout=RUN_TIMEOUT) as http:
        run = msgspec.json.encode(make_input("run-w", "What's the weather in Tokyo?"))
        served = await http.post(url, content=run, headers={"Content-Type": "application/json",
                                                            "Accept": PROTO_CONTENT_TYPE})
        assert served.status_code == 200 and served.headers["content-type"] == PROTO_CONTENT_TYPE
        history = await http.get(url.rstrip("/") + "/threads/" + make_input("x").thread_id,
                                 headers={"Accept": PROTO_CONTENT_TYPE, RUN_KEY_HEADER: served.headers[RUN_KEY_HEADER]})
        assert history.status_code == 200 and history.headers["content-type"] == PROTO_CONTENT_TYPE, history.text
    for body in (served.content, history.content):
        events, messages = decode_proto_body(body), _messages(body)
        assert len(events) == len(messages)
        assert {"TOOL_CALL_ARGS", "REASONING_ENCRYPTED_VALUE", "CUSTOM", "RUN_FINISHED"} <= {e.type.value for e in events}
        theirs = official(events, messages)
        assert theirs["encoded"] == [m.hex() for m in messages]
        assert [msgspec.convert(d, Event) for d in theirs["decoded"]] == events
