"""Hostile client input on every transport (issue: hardening, findings 3, 4 and 8):
each gets its documented 4xx / error line / close code before any run starts, never
a 500, a 1011, a RecursionError or a dead stdio server. Real servers on loopback,
a real WebSocket, a real subprocess."""

from __future__ import annotations

import asyncio
import io
import sys

import httpx
import msgspec
import pytest
import websockets
from websockets.asyncio.client import connect

from agui_engine.transports.content_negotiation import negotiate
from agui_engine.transports.input_decoding import MAX_INPUT_DEPTH, decode_run_input
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.stdio_server import serve_stdio
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent, make_input

# A RunAgentInput whose state nests ``depth`` arrays: state is level 2 of the body.
#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


def deep_state_body(depth: int, run_id: str = "deep") -> bytes:
    state = "[" * depth + "]" * depth
    return (
        b'{"threadId":"t","runId":"' + run_id.encode() + b'","messages":[],"tools":[],"context":[],'
        b'"forwardedProps":{},"state":' + state.encode() + b"}"
    )


HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


async def raw_request(port: int, request: bytes) -> bytes:
    """Send raw bytes (headers httpx would refuse to send) and read the answer's status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()


# --------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("depth", [MAX_INPUT_DEPTH, MAX_INPUT_DEPTH + 1, 1_000, 5_000, 100_000])
def test_decode_run_input_bounds_depth_without_recursion_error(depth: int) -> None:
    from agui_engine.transports.input_errors import InputTooDeepError

    data = deep_state_body(depth - 1)  # the body object itself is level 1
    if depth <= MAX_INPUT_DEPTH:
        assert decode_run_input(data).run_id == "deep"
    else:
        with pytest.raises(InputTooDeepError) as info:
            decode_run_input(data)
        assert info.value.http_status == 413 and info.value.code == "input_too_deep"


def test_cursor_with_a_non_ascii_digit_is_a_bad_cursor() -> None:
    from agui_engine.transports.event_ids import resume_cursor
    from agui_engine.transports.eventlog import BadCursorError

    for cursor in ("A:²", "A:١٢", "A:𝟙"):
        with pytest.raises(BadCursorError):
            resume_cursor(cursor, "A")


@pytest.mark.parametrize("run_id", ["a\x01b", "a\x0bb", "a\x7fb", "a\x85b", "a\u2028b", "a\tb"])
def test_run_id_with_a_control_character_is_invalid_input(run_id: str) -> None:
    from agui_engine.transports.input_errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        decode_run_input(msgspec.json.encode(make_input(run_id)))


@pytest.mark.parametrize("accept", ["text/event-stream;q=inf", "text/event-stream;q=nan", "text/event-stream;q=2",
                                    "text/event-stream;q=-1", "text/event-stream;q=1e0", "text/event-stream;q=0.0001"])
def test_an_invalid_qvalue_makes_its_range_unacceptable(accept: str) -> None:
    from agui_engine.transports.input_errors import NotAcceptableError

    with pytest.raises(NotAcceptableError):
        negotiate(accept)
    # a valid alternative still wins
    assert negotiate(accept + ", application/x-ndjson;q=0.5") == "ndjson"
    assert negotiate("text/event-stream;q=0.001") == "sse"


# --------------------------------------------------------------------------- HTTP


async def test_http_hostile_inputs_get_their_4xx_before_any_run_starts() -> None:
    agent = ScriptedAgent(deltas=2)
    async with await start_sse_server(agent, auth_token="secret-token") as srv:
        port = int(srv.url.rsplit(":", 1)[1].strip("/"))
        auth = {"Authorization": "Bearer secret-token"}
        async with httpx.AsyncClient(timeout=10) as c:
            for depth in (1_000, 100_000):
                r = await c.post(srv.url, content=deep_state_body(depth), headers={**HEADERS, **auth})
                assert r.status_code == 413, r.text
                assert r.json()["error"]["code"] == "input_too_deep"
            for rid in ("x\x01", "x\x0b", "x\x7f"):
                r = await c.post(srv.url, content=msgspec.json.encode(make_input(rid)), headers={**HEADERS, **auth})
                assert r.status_code == 422, r.text
            r = await c.post(
                srv.url, content=msgspec.json.encode(make_input("r1")), headers={**HEADERS, **auth, "Last-Event-ID": "r1:²".encode()}  # type: ignore[dict-item]
            )
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_cursor"
            r = await c.get(srv.url + "runs/A", headers={**auth, "Last-Event-ID": "A:²".encode()})  # type: ignore[dict-item]
            assert r.status_code == 400
            r = await c.post(
                srv.url, content=msgspec.json.encode(make_input("q")), headers={**HEADERS, **auth, "Accept": "text/event-stream;q=inf"}
            )
            assert r.status_code == 406
        # a bearer token with a non-ASCII (and non-UTF-8) byte: 401, not 500
        for token in (b"secr\xe9t", b"\xff\xfe", "sécret".encode()):
            status = await raw_request(
                port,
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
                + token
                + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
            )
            assert status.split()[1] == b"401", status
    assert agent.started == set()  # none of it started a run


# --------------------------------------------------------------------------- WebSocket


async def test_websocket_hostile_messages_get_error_lines_and_the_connection_stays_open() -> None:
    agent = ScriptedAgent(deltas=2)
    async with await start_websocket_server(agent) as srv:
        async with connect(srv.url) as ws:
            deep = b'{"type":"run","input":' + deep_state_body(100_000) + b"}"
            await ws.send(deep.decode(), text=True)
            line = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5))
            assert line["error"]["code"] == "input_too_deep" and line["error"]["status"] == 4413
            await ws.send("[" * 200_000, text=True)
            line = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5))
            assert line["error"]["status"] == 4413
            await ws.send(msgspec.json.encode({"type": "resume", "runId": "A", "lastEventId": "A:²"}).decode(), text=True)
            line = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5))
            assert line["error"]["code"] == "bad_cursor"
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("x\x0b")}).decode(), text=True)
            line = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5))
            assert line["error"]["status"] == 4422
            # still serving on the same connection
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("ok")}).decode(), text=True)
            got = ""
            while "RUN_FINISHED" not in got:
                got = str(await asyncio.wait_for(ws.recv(), 5))
    assert agent.started == {"ok"}


# --------------------------------------------------------------------------- stdio


async def test_stdio_keeps_serving_after_deep_and_non_object_lines() -> None:
    agent = ScriptedAgent(deltas=1)
    lines = [
        b"[" * 100_000 + b"\n",
        deep_state_body(5_000, "s1") + b"\n",
        b'"str"\n',
        b"42\n",
        msgspec.json.encode(make_input("alive")) + b"\n",
    ]
    out = io.BytesIO()
    assert await serve_stdio(agent, stdin=io.BytesIO(b"".join(lines)), stdout=out) == 0
    docs = [msgspec.json.decode(x) for x in out.getvalue().splitlines()]
    errors = {d["line"]: d["error"]["code"] for d in docs if "error" in d}
    assert errors == {1: "input_too_deep", 2: "input_too_deep", 3: "invalid_input", 4: "invalid_input"}
    assert docs[-1]["type"] == "RUN_FINISHED"
    assert agent.started == {"alive"}


async def test_stdio_server_subprocess_survives_a_100000_deep_line() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio", "--agent", "py:tests.transports.scripted:agent",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    data = b"[" * 100_000 + b"\n" + msgspec.json.encode(make_input("after")) + b"\n"
    out, err = await asyncio.wait_for(proc.communicate(data), 30)
    assert proc.returncode == 0, err.decode()[-2000:]
    docs = [msgspec.json.decode(x) for x in out.splitlines()]
    assert docs[0]["error"]["code"] == "input_too_deep"
    assert docs[-1]["type"] == "RUN_FINISHED"
    assert b"RecursionError" not in err


# --------------------------------------------------------------------------- fuzzing

from collections.abc import Iterator  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from websockets.sync.client import connect as sync_connect  # noqa: E402

from .loop_thread import LoopThread, json_values  # noqa: E402

TOKEN = "fuzz-token"


class _Servers(LoopThread):
    """An SSE and a WebSocket gateway running in their own event loop thread, so that
    hypothesis (synchronous) can hit them with real sockets."""

    def __init__(self) -> None:
        super().__init__()
        self.sse = self.start(start_sse_server, ScriptedAgent(deltas=1), auth_token=TOKEN, cors_origins=["*"])
        self.ws = self.start(start_websocket_server, ScriptedAgent(deltas=1))
        self.port = int(self.sse.url.rsplit(":", 1)[1].strip("/"))


@pytest.fixture(scope="module")
def servers() -> Iterator[_Servers]:
    s = _Servers()
    yield s
    s.close()


_json = json_values
_header_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_run_ids = st.text(max_size=12, alphabet=st.characters(blacklist_categories=["Cs"])) | st.sampled_from(["run-1", "x\x0b", "A", "a:b", "é", "\udcff"])


@st.composite
def _bodies(draw: st.DrawFn, kinds: tuple[str, ...] = ("input", "mutated", "json", "bytes", "deep")) -> bytes:
    kind = draw(st.sampled_from(kinds))
    if kind == "input":
        return msgspec.json.encode(make_input(draw(st.text(min_size=1, max_size=10))))
    if kind == "mutated":
        doc = msgspec.to_builtins(make_input("m"))
        doc[draw(st.sampled_from(sorted(doc)))] = draw(_json)
        return msgspec.json.encode(doc)
    if kind == "json":
        return msgspec.json.encode(draw(_json))
    if kind == "deep":
        n = draw(st.integers(500, 3000))
        return b'{"threadId":"t","runId":"d","messages":[],"state":' + b"[" * n + b"]" * n + b"}"
    return draw(st.binary(max_size=200))


def _quote_path(text: str) -> bytes:
    from urllib.parse import quote

    return quote(text.encode("utf-8", "surrogatepass"), safe="").encode()


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from([b"POST", b"GET", b"DELETE", b"OPTIONS"]),
    path_run=st.none() | _run_ids,
    auth=st.sampled_from(["good", "none", "fuzz"]),
    auth_fuzz=_header_bytes,
    content_type=st.sampled_from([b"application/json", b"application/json; charset=utf-8", b"text/plain"]) | _header_bytes,
    accept=st.none() | st.sampled_from([b"text/event-stream;q=inf", b"application/x-ndjson", b"*/*;q=0.5"]) | _header_bytes,
    last_event_id=st.none() | st.sampled_from([b"A:\xc2\xb2", b"run-1:0", b"m:99999999999999999999", b":1"]) | _header_bytes,
    origin=st.none() | st.just(b"http://x.test"),
    body=_bodies(),
)
def test_fuzz_http_request_surface_never_answers_500(
    servers: _Servers,
    method: bytes,
    path_run: str | None,
    auth: str,
    auth_fuzz: bytes,
    content_type: bytes,
    accept: bytes | None,
    last_event_id: bytes | None,
    origin: bytes | None,
    body: bytes,
) -> None:
    import socket

    path = b"/" if path_run is None else b"/runs/" + _quote_path(path_run)
    head = [method + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    if auth == "good":
        head.append(b"Authorization: Bearer " + TOKEN.encode())
    elif auth == "fuzz":
        head.append(b"Authorization: Bearer " + auth_fuzz)
    head.append(b"Content-Type: " + content_type)
    for name, value in ((b"Accept", accept), (b"Last-Event-ID", last_event_id), (b"Origin", origin)):
        if value is not None:
            head.append(name + b": " + value)
    head.append(b"Content-Length: %d" % len(body))
    with socket.create_connection(("127.0.0.1", servers.port), timeout=10) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        status_line = sock.makefile("rb").readline()
    assert status_line.startswith(b"HTTP/1."), status_line
    status = int(status_line.split()[1])
    assert status < 500 or status == 503, (status, head, body[:200])


@st.composite
def _ws_messages(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["run", "cancel", "resume", "other", "text"]))
    if kind == "text":
        return draw(st.text(max_size=60))
    doc: dict[str, object] = {"type": kind if kind != "other" else draw(_json)}
    if kind == "run":  # spliced as text: a deep input is not decodable here either
        return '{"type":"run","input":' + draw(_bodies(("input", "mutated", "json", "deep"))).decode() + "}"
    else:
        doc["runId"] = draw(_run_ids.filter(str.isprintable) | _json)
        doc["lastEventId"] = draw(st.sampled_from(["A:²", "run-1:1", ":", "x"]) | _json)
    return msgspec.json.encode(doc).decode()  # (lone surrogates cannot be sent: WebSocket text is UTF-8)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_ws_messages() | _bodies().map(lambda b: b.decode("utf-8", "replace")), min_size=1, max_size=4))
def test_fuzz_websocket_messages_never_close_with_1011(servers: _Servers, messages: list[str]) -> None:
    with sync_connect(servers.ws.url, open_timeout=10, close_timeout=5) as ws:
        for message in messages:
            try:
                ws.send(message)
            except websockets.ConnectionClosedError as exc:
                assert exc.rcvd is not None and exc.rcvd.code != 1011, exc
                return
        # every message gets an answer line or a run's events; then the connection still works
        ws.send('{"type":"cancel","runId":"__probe__"}')  # answered with unknown_run for __probe__
        while True:
            try:
                reply = ws.recv(timeout=10)
            except websockets.ConnectionClosed as exc:
                assert exc.rcvd is not None and exc.rcvd.code not in (1011, 1006), exc
                return
            if '"runId":"__probe__"' in str(reply):
                return


# --------------------------------------------------------------------------- unreadable requests (issue 22, hole 1)


async def _raw_answer(port: int, request: bytes) -> tuple[int, bytes, bytes]:
    """Send raw bytes, read the whole answer (the server closes): status, headers, body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head, body


@pytest.mark.parametrize("path", [b"/", b"/data/query"])
async def test_a_body_or_header_the_server_cannot_read_gets_a_json_400_and_no_traceback(
    path: bytes, caplog: pytest.LogCaptureFixture, front_end: str
) -> None:
    import gzip
    import logging

    agent = ScriptedAgent(deltas=1)
    good = msgspec.json.encode(make_input("enc"))
    bodies = [
        (b"gzip", b"this is not gzip"),
        (b"gzip", gzip.compress(good)[:-12]),  # cut short: no trailer
        (b"deflate", b"\xff\xfe garbage"),
        (b"br", b"\x0b\x02\x80whatever"),
    ]
    caplog.set_level(logging.INFO)
    async with await start_sse_server(agent) as srv:
        port = int(srv.url.rsplit(":", 1)[1].strip("/"))
        for encoding, body in bodies:
            status, head, answer = await _raw_answer(
                port,
                b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: "
                + encoding + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body,
            )
            assert status == 400, (encoding, head, answer)
            assert b"application/json" in head.lower()
            error = msgspec.json.decode(answer)["error"]
            # a gzip body cut short decodes as far as it goes: then the JSON is incomplete
            assert error["code"] in ("unreadable_request", "malformed_json") and error["message"], error
        # a header line over aiohttp's limit (8190 bytes) and too many header bytes (under ASGI the
        # server's own HTTP parser answers these before any application runs: uvicorn's plain 400)
        for header in () if front_end == "asgi" else (b"X-Big: " + b"a" * 20_000, b"\r\n".join(b"X-H%d: %s" % (i, b"b" * 100) for i in range(400))):
            status, head, answer = await _raw_answer(
                port, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nContent-Length: 0\r\n\r\n"
            )
            assert 400 <= status < 500, (head, answer)
            error = msgspec.json.decode(answer)["error"]
            assert error["code"] == "unreadable_request" and len(error["message"]) < 400, error
        # a good gzip body still works: the encoding is honoured, not refused
        if path == b"/":
            zipped = gzip.compress(good)
            status, head, answer = await _raw_answer(
                port,
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(zipped) + zipped,
            )
            assert status == 200 and b"RUN_FINISHED" in answer
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert agent.started == ({"enc"} if path == b"/" else set())


@pytest.mark.parametrize("path", [b"/", b"/data/query"])
@pytest.mark.parametrize("encoding", [b"gzip, gzip, br, zstd", b"gzip, identity", b"x-gzip", b"compress", b"zstd;q=1"])
async def test_stacked_or_unknown_content_encodings_are_a_400_not_read_as_plain_json(
    path: bytes, encoding: bytes
) -> None:
    # the body is plain JSON the server would accept: the header says it is encoded in a way the server
    # does not decode, so reading it as plain would be reading something else than was sent
    agent = ScriptedAgent(deltas=1)
    good = msgspec.json.encode(make_input("plain"))
    async with await start_sse_server(agent) as srv:
        port = int(srv.url.rsplit(":", 1)[1].strip("/"))
        status, head, answer = await _raw_answer(
            port,
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: "
            + encoding + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(good) + good,
        )
    assert status == 400, (head, answer)
    error = msgspec.json.decode(answer)["error"]
    assert error["code"] == "unreadable_request" and encoding.decode() in error["message"], error
    assert agent.started == set()
