"""The SSE gateway and SSEAgent, against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import msgspec
import pytest
from aiohttp import web

from agui_engine.protocol.codec import SSEDecoder, decode_event, encode_event
from agui_engine.protocol.events import RunAgentInput, RunStartedEvent
from agui_engine.transports.clock import ManualClock
from agui_engine.transports.content_negotiation import negotiate
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import REGISTRY_KEY, create_app, start_sse_server

from ..waiting import WAIT_TIMEOUT, eventually
from .scripted import ScriptedAgent, make_input

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


def body(run_id: str = "run-1") -> bytes:
    return msgspec.json.encode(make_input(run_id))


async def post(url: str, data: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    h = {"Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})}
    async with httpx.AsyncClient(timeout=10) as c:
        return await c.post(url, content=data, headers=h)


def frames(raw: bytes) -> list:
    d = SSEDecoder()
    return d.feed(raw) + d.close()


async def test_post_streams_every_event_with_ids_and_headers() -> None:
    agent = ScriptedAgent(deltas=3)
    async with await start_sse_server(agent) as srv:
        r = await post(srv.url, body())
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["x-accel-buffering"] == "no"
    assert b"\r" not in r.content
    msgs = frames(r.content)
    events = [decode_event(m.data) for m in msgs]
    assert [m.id for m in msgs] == [f"run-1:{i}" for i in range(1, len(msgs) + 1)]
    assert [e.type.value for e in events][:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert events[-1].type.value == "RUN_FINISHED"
    # the stream is exactly what the agent produced, byte for byte per event
    direct = [encode_event(e) async for e in ScriptedAgent(deltas=3).run(make_input())]
    assert [m.data.encode() for m in msgs] == direct
    assert "run-1" in agent.closed


async def test_ndjson_when_asked() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=2)) as srv:
        r = await post(srv.url, body(), {"Accept": "application/x-ndjson"})
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = r.content.split(b"\n")
    assert lines[-1] == b""
    assert [decode_event(x).type.value for x in lines[:-1]][-1] == "RUN_FINISHED"


def test_negotiate() -> None:
    assert negotiate(None) == "sse"
    assert negotiate("text/event-stream, application/x-ndjson") == "sse"
    assert negotiate("application/x-ndjson") == "ndjson"
    assert negotiate("text/event-stream;q=0.5, application/x-ndjson") == "ndjson"
    assert negotiate("*/*") == "sse"
    with pytest.raises(Exception) as ei:
        negotiate("text/html")
    assert ei.value.http_status == 406  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("data", "headers", "status", "code"),
    [
        (b'{"threadId": "t", ', {}, 400, "malformed_json"),
        (b'{"threadId": "t", "runId": 5, "messages": []}', {}, 422, "invalid_input"),
        (b'{"threadId": "t", "runId": "a\\nb", "messages": []}', {}, 422, "invalid_input"),
        (b"x" * 2000, {}, 413, "limit_exceeded"),
        (b"{}", {"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
        (None, {"Accept": "text/html"}, 406, "not_acceptable"),
    ],
)
async def test_bad_requests_are_refused_before_the_stream(data, headers, status, code) -> None:  # type: ignore[no-untyped-def]
    agent = ScriptedAgent()
    async with await start_sse_server(agent, connection=ConnectionOptions(max_input_bytes=1000)) as srv:
        r = await post(srv.url, body() if data is None else data, headers)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    assert agent.started == set()


async def test_422_names_the_json_path() -> None:
    async with await start_sse_server(ScriptedAgent()) as srv:
        r = await post(srv.url, b'{"threadId": "t", "runId": "r", "messages": [{"role": "user", "id": 1, "content": "x"}]}')
    assert r.status_code == 422
    assert "$.messages[0].id" in r.json()["error"]["message"]


async def test_busy_server_answers_503_with_retry_after_and_duplicate_run_409() -> None:
    agent = ScriptedAgent(hang=True)
    async with await start_sse_server(agent, options=RegistryOptions(max_runs=1)) as srv:
        async with httpx.AsyncClient(timeout=10) as c:
            h = {"Content-Type": "application/json"}
            async with c.stream("POST", srv.url, content=body("a"), headers=h) as first:
                assert first.status_code == 200
                second = await c.post(srv.url, content=body("b"), headers=h)
                assert second.status_code == 503
                assert second.headers["retry-after"] == "1"
                assert second.json()["error"]["code"] == "server_busy"
                dup = await c.post(srv.url, content=body("a"), headers=h)
                assert dup.status_code in (409, 503)


async def test_duplicate_run_id_is_409() -> None:
    async with await start_sse_server(ScriptedAgent(hang=True)) as srv:
        async with httpx.AsyncClient(timeout=10) as c:
            h = {"Content-Type": "application/json"}
            async with c.stream("POST", srv.url, content=body("a"), headers=h) as first:
                assert first.status_code == 200
                dup = await c.post(srv.url, content=body("a"), headers=h)
                assert dup.status_code == 409
                assert dup.json()["error"]["code"] == "run_exists"


async def test_bearer_auth_refused_and_accepted() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=1), auth_token="s3cret") as srv:
        missing = await post(srv.url, body("a"))
        wrong = await post(srv.url, body("b"), {"Authorization": "Bearer nope"})
        ok = await post(srv.url, body("c"), {"Authorization": "Bearer s3cret"})
        delete = await httpx.AsyncClient().delete(srv.url + "runs/c")
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
    assert "s3cret" not in wrong.text and "nope" not in wrong.text
    assert ok.status_code == 200 and frames(ok.content)
    assert delete.status_code == 401


async def test_cors_preflight_and_headers() -> None:
    async with await start_sse_server(ScriptedAgent(deltas=1), cors_origins=["https://app.example"]) as srv:
        async with httpx.AsyncClient() as c:
            pre = await c.options(srv.url, headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
            bad = await c.options(srv.url, headers={"Origin": "https://evil.example"})
        r = await post(srv.url, body(), {"Origin": "https://app.example"})
    assert pre.status_code == 204
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert "Last-Event-ID" in pre.headers["access-control-allow-headers"]
    assert pre.headers["access-control-allow-origin"] == "https://app.example"
    assert bad.status_code == 403
    assert r.headers["access-control-allow-origin"] == "https://app.example"


async def test_keepalive_comments_on_a_silent_run() -> None:
    agent = ScriptedAgent(deltas=2, silence=0.5)
    async with await start_sse_server(agent, connection=ConnectionOptions(keepalive_seconds=0.05)) as srv:
        r = await post(srv.url, body())
    assert r.content.count(b": keep-alive\n\n") >= 3
    # keep-alives never carry an id: they do not move the resume cursor
    msgs = frames(r.content)
    assert all(m.id for m in msgs)
    assert decode_event(msgs[-1].data).type.value == "RUN_FINISHED"


class Frames:
    """Reads SSE frames from one streaming response, a few at a time."""

    def __init__(self, resp: httpx.Response) -> None:
        self.it = resp.aiter_raw()
        self.dec = SSEDecoder()
        self.pending: list = []

    async def take(self, n: int | None = None) -> list:
        try:
            while n is None or len(self.pending) < n:
                self.pending += self.dec.feed(await asyncio.wait_for(self.it.__anext__(), WAIT_TIMEOUT))
        except StopAsyncIteration:
            pass
        if n is None:
            n = len(self.pending)
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


async def _read_until(resp: httpx.Response, n_frames: int) -> list:
    return await Frames(resp).take(n_frames)


async def test_disconnect_and_resume_loses_and_repeats_nothing() -> None:
    agent = ScriptedAgent(deltas=30, pause=0.01)
    async with await start_sse_server(agent, options=RegistryOptions(grace_seconds=5)) as srv:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-AGUI-Resumable": "1"}  # a client that resumes says so
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", srv.url, content=body(), headers=h) as r1:
                first = await _read_until(r1, 5)
                key = {"X-AGUI-Run-Key": r1.headers["X-AGUI-Run-Key"]}  # resume presents it (spec §2.6)
            # the connection is gone; the run goes on within its grace period
            await asyncio.sleep(0.05)
            last = first[-1].id
            r2 = await c.post(srv.url, content=body(), headers={**h, **key, "Last-Event-ID": last})
            rest = frames(r2.content)
            # EventSource-style resume by GET (the key as a query parameter, as an EventSource
            # must), from the very beginning and from the middle
            full = frames((await c.get(srv.url + "runs/run-1", params={"runKey": key["X-AGUI-Run-Key"]})).content)
            mid = frames((await c.get(srv.url + "runs/run-1", headers={**key, "Last-Event-ID": "run-1:10"})).content)
    ids = [m.id for m in first] + [m.id for m in rest]
    seqs = [int(i.rpartition(":")[2]) for i in ids]
    assert seqs == list(range(1, len(seqs) + 1))
    assert [m.data for m in first + rest] == [m.data for m in full]
    assert [m.id for m in mid] == [m.id for m in full][10:]
    assert decode_event(rest[-1].data).type.value == "RUN_FINISHED"
    assert agent.cancelled == set()


async def test_resume_on_another_gateway_node_sharing_the_event_log() -> None:
    """Two gateway nodes (two servers, two registries) share one event log, as
    they would share Redis: a run started on node A, dropped mid-stream and
    resumed on node B with Last-Event-ID streams the rest live from the log,
    nothing lost or repeated; node B cannot start a run id node A has."""
    from agui_engine.transports.eventlog import InMemoryEventLog

    shared = InMemoryEventLog()
    agent = ScriptedAgent(deltas=30, pause=0.01)
    async with await start_sse_server(agent, log=shared) as a, await start_sse_server(agent, log=shared) as b:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-AGUI-Resumable": "1"}
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", a.url, content=body(), headers=h) as r1:
                first = await _read_until(r1, 5)
            r2 = await c.post(b.url, content=body(), headers={**h, "Last-Event-ID": first[-1].id})
            again = await c.post(b.url, content=body(), headers=h)
            unknown = await c.get(b.url + "runs/nope")
    rest = frames(r2.content)
    assert r2.status_code == 200 and len(rest) > 10  # most of the run was still ahead: followed live
    seqs = [int(m.id.rpartition(":")[2]) for m in first + rest]
    assert seqs == list(range(1, len(seqs) + 1))
    direct = [encode_event(e) async for e in ScriptedAgent(deltas=30).run(make_input())]
    assert [m.data.encode() for m in first + rest] == direct
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_exists"
    assert unknown.status_code == 404


async def test_expired_cursor_and_unknown_run_get_clear_answers() -> None:
    from agui_engine.transports.eventlog import InMemoryEventLog

    agent = ScriptedAgent(deltas=20)
    async with await start_sse_server(agent, log=InMemoryEventLog(max_events=5)) as srv:
        key = {"X-AGUI-Run-Key": (await post(srv.url, body())).headers["X-AGUI-Run-Key"]}
        async with httpx.AsyncClient() as c:
            gone = await c.get(srv.url + "runs/run-1", headers={**key, "Last-Event-ID": "run-1:3"})
            unknown = await c.get(srv.url + "runs/nope", headers=key)
            wrong = await c.get(srv.url + "runs/run-1", headers={**key, "Last-Event-ID": "other:3"})
            tail = await c.get(srv.url + "runs/run-1", headers={**key, "Last-Event-ID": "run-1:23"})
            over = await c.get(srv.url + "runs/run-1", headers={**key, "Last-Event-ID": "run-1:28"})
    assert gone.status_code == 410
    assert gone.json()["error"]["code"] == "cursor_expired"
    assert "event 4" in gone.json()["error"]["message"] or "starts at" in gone.json()["error"]["message"]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_run"
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "bad_cursor"
    assert [m.id for m in frames(tail.content)] == ["run-1:24", "run-1:25", "run-1:26", "run-1:27", "run-1:28"]
    assert over.status_code == 204  # an EventSource stops reconnecting


async def test_delete_cancels_at_once_and_closes_the_agent_generator() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    async with await start_sse_server(agent) as srv:
        h = {"Content-Type": "application/json"}
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", srv.url, content=body(), headers=h) as r:
                reader = Frames(r)
                got = await reader.take(3)
                key = {"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]}
                d = await c.delete(srv.url + "runs/run-1", headers=key)
                assert d.status_code == 204
                assert "run-1" in agent.cancelled  # closed before DELETE answered
                rest = await reader.take()
            again = await c.delete(srv.url + "runs/run-1", headers=key)
            missing = await c.delete(srv.url + "runs/zzz", headers=key)
    last = decode_event(rest[-1].data)
    assert last.type.value == "RUN_ERROR" and last.code == "cancelled"
    assert len(got) == 3
    assert again.status_code == 409 and missing.status_code == 404


async def test_grace_period_then_cancel_when_the_last_subscriber_leaves() -> None:
    """On the registry's clock: no real-time wait for the grace period."""
    agent = ScriptedAgent(deltas=3, hang=True)
    clock = ManualClock()
    async with await start_sse_server(agent, options=RegistryOptions(grace_seconds=30), clock=clock) as srv:
        h = {"Content-Type": "application/json", "X-AGUI-Resumable": "1"}  # it declared it would resume
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", srv.url, content=body(), headers=h) as r:
                await _read_until(r, 3)
        run = srv.registry.get("run-1")
        await eventually(lambda: run.subscribers == 0, what="the server to see the client go")
        clock.advance(29.9)
        assert agent.cancelled == set() and run.finished is False  # still within the grace period
        clock.advance(0.1)
        await eventually(lambda: "run-1" in agent.cancelled, what="the grace period to cancel the run")
        assert run.terminal_code == "abandoned"


async def test_graceful_shutdown_ends_open_streams_with_a_terminal_event() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    srv = await start_sse_server(agent)
    h = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as c:
        async with c.stream("POST", srv.url, content=body(), headers=h) as r:
            reader = Frames(r)
            got = await reader.take(3)
            closing = asyncio.create_task(srv.close())
            got += await reader.take()
            await closing
    last = decode_event(got[-1].data)
    assert last.type.value == "RUN_ERROR" and last.code == "shutdown"
    assert "run-1" in agent.cancelled


async def test_a_protocol_violation_by_the_agent_ends_the_run_with_run_error() -> None:
    from agui_engine.protocol.events import RunStartedEvent, TextMessageContentEvent

    class Broken:
        closed = False

        async def run(self, input: RunAgentInput):  # type: ignore[no-untyped-def]
            try:
                yield RunStartedEvent(thread_id="t", run_id=input.run_id)
                yield TextMessageContentEvent(message_id="never-started", delta="x")
                yield TextMessageContentEvent(message_id="never-started", delta="y")
            finally:
                Broken.closed = True

    async with await start_sse_server(Broken()) as srv:
        r = await post(srv.url, body())
    events = [decode_event(m.data) for m in frames(r.content)]
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert Broken.closed


async def test_an_agent_that_raises_gets_run_started_and_run_error_without_traceback() -> None:
    class Raises:
        async def run(self, input: RunAgentInput):  # type: ignore[no-untyped-def]
            raise KeyError("secret-api-key-123")
            yield  # pragma: no cover

    async with await start_sse_server(Raises()) as srv:
        r = await post(srv.url, body())
    events = [decode_event(m.data) for m in frames(r.content)]
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1].code == "agent_error"
    assert "secret" not in r.text


async def test_mountable_in_an_existing_aiohttp_app() -> None:
    parent = web.Application()
    parent.add_subapp("/agui", create_app(ScriptedAgent(deltas=1), path=""))
    async with await start_sse_server(app=parent) as srv:
        base = srv.url.rstrip("/")
        r = await post(base + "/agui", body())
        again = await httpx.AsyncClient().get(base + "/agui/runs/run-1", headers={"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]})
    assert r.status_code == 200 and frames(r.content)
    assert frames(again.content)[-1].id == frames(r.content)[-1].id


async def test_ag_ui_validate_accepts_the_live_endpoint() -> None:
    from ag_ui_validate.pytest_plugin import assert_valid_agui_endpoint

    async with await start_sse_server(ScriptedAgent(deltas=3)) as srv:
        await assert_valid_agui_endpoint(srv.url, severity_overrides={"AGUI902": "off"})


async def test_sse_agent_is_an_agent_and_matches_the_direct_stream() -> None:
    agent = ScriptedAgent(deltas=4)
    async with await start_sse_server(agent) as srv:
        remote = [e async for e in SSEAgent(srv.url).run(make_input())]
    direct = [e async for e in ScriptedAgent(deltas=4).run(make_input())]
    assert remote == direct


async def test_sse_agent_typed_errors() -> None:
    async with await start_sse_server(ScriptedAgent(), auth_token="t") as srv:
        with pytest.raises(RemoteAgentError) as ei:
            [e async for e in SSEAgent(srv.url).run(make_input())]
        assert ei.value.status == 401 and ei.value.code == "unauthorized"
        ok = [e async for e in SSEAgent(srv.url, headers={"Authorization": "Bearer t"}).run(make_input())]
        assert ok[-1].type.value == "RUN_FINISHED"
    from agui_engine.transports.retrying_client import ConnectionLostError

    with pytest.raises(ConnectionLostError):
        [e async for e in SSEAgent(srv.url, max_retries=0).run(make_input())]


async def test_closing_the_sse_agent_early_cancels_the_remote_run() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    async with await start_sse_server(agent, options=RegistryOptions(grace_seconds=60)) as srv:
        gen = SSEAgent(srv.url).run(make_input())
        async for e in gen:
            if e.type.value == "TEXT_MESSAGE_CONTENT":
                break
        await gen.aclose()
        # long before the 60 s grace period
        await eventually(lambda: "run-1" in agent.cancelled, timeout=5, what="the DELETE to cancel the run")


def test_registry_key_is_exposed() -> None:
    app = create_app(ScriptedAgent())
    assert app[REGISTRY_KEY].options.max_runs >= 1
    json.dumps({})


def test_frame_sse_is_byte_for_byte_the_codec_framing() -> None:
    from agui_engine.protocol.codec import encode_sse
    from agui_engine.transports.sse_server import frame_sse

    payloads = [b'{"type":"RUN_STARTED","threadId":"t","runId":"r:x"}', b'{"a":"\\u2028\xc3\xa9"}']
    assert frame_sse("r:x", 7, payloads) == encode_sse(payloads[0], id="r:x:7") + encode_sse(payloads[1], id="r:x:8")


async def test_a_client_slower_than_the_bounded_log_gets_a_clear_cursor_expired() -> None:
    from agui_engine.transports.eventlog import InMemoryEventLog

    # The agent emits 60 events without ever suspending; the log keeps 8: the
    # stream's first read finds its cursor gone and says so, without an id.
    async with await start_sse_server(ScriptedAgent(deltas=50), log=InMemoryEventLog(max_events=8)) as srv:
        r = await post(srv.url, body())
    msgs = frames(r.content)
    last = decode_event(msgs[-1].data)
    assert last.type.value == "RUN_ERROR" and last.code == "cursor_expired"
    assert msgs[-1].id is None


async def test_an_agent_failure_is_logged_with_message_and_traceback_and_the_client_gets_neither(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The operator needs the message and the traceback to fix the agent; the
    client gets a RUN_ERROR naming only the type (the text may hold secrets)."""

    class Broken:
        async def run(self, input: RunAgentInput):  # type: ignore[no-untyped-def]
            yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
            raise ValueError("my database is down at postgres://app:hunter2@db")

    with caplog.at_level("DEBUG", logger="agui_engine.transports"):
        async with await start_sse_server(Broken()) as srv:
            r = await post(srv.url, body())
    events = [decode_event(m.data) for m in frames(r.content)]
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "agent_error" and events[-1].message == "the agent failed (ValueError)"
    assert "hunter2" not in r.text and "Traceback" not in r.text and "database" not in r.text
    (record,) = [rec for rec in caplog.records if rec.levelname == "ERROR"]
    assert "ValueError: my database is down" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert "Traceback" in caplog.text and 'raise ValueError("my database is down' in caplog.text


async def test_sse_agent_reports_an_expired_cursor_after_a_drop_as_run_error(drop_proxy) -> None:  # type: ignore[no-untyped-def]
    from agui_engine.transports.eventlog import InMemoryEventLog

    # The log keeps 5 events; the connection drops early and the run goes on, so the
    # resume cursor has fallen out of the log when the client comes back: it must
    # say so, not skip silently to the tail.
    agent = ScriptedAgent(deltas=40, pause=0.002)
    async with await start_sse_server(agent, log=InMemoryEventLog(max_events=5)) as srv:
        port = int(srv.url.rstrip("/").rpartition(":")[2])
        proxy = drop_proxy("127.0.0.1", port, cut_after=600, drops=1)
        await proxy.start()
        client = SSEAgent(f"http://127.0.0.1:{proxy.port}/", backoff_initial=0.4, backoff_max=0.4)
        events = [e async for e in client.run(make_input())]
    assert events[-1].type.value == "RUN_ERROR" and events[-1].code == "cursor_expired"
    assert client.reconnects == 1


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points + [len(data)]:
        out.append(data[last:p])
        last = p
    return out


async def _through(chunks: list[bytes]) -> list:
    """SSEAgent reading a stream delivered in exactly these chunks (httpx MockTransport)."""

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            for c in chunks:
                yield c

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=Body())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        return [e async for e in SSEAgent("http://recorded/", client=client).run(make_input())]


async def _record() -> tuple[bytes, list]:
    async with await start_sse_server(ScriptedAgent(deltas=6)) as srv:
        recorded = (await post(srv.url, body())).content
    return recorded, [e async for e in ScriptedAgent(deltas=6).run(make_input())]


def test_sse_agent_decodes_any_split_of_a_recorded_stream_identically() -> None:
    """The client over a stream recorded from the live gateway, delivered whole,
    one byte at a time and at hypothesis-chosen cuts: the same events every time."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.hypothesis_profiles import at_most

    recorded, expected = asyncio.run(_record())
    assert asyncio.run(_through([recorded])) == expected
    assert asyncio.run(_through([recorded[i : i + 1] for i in range(len(recorded))])) == expected

    @settings(max_examples=at_most(60), deadline=None)  # each example runs a real server
    @given(st.lists(st.integers(0, 10_000), max_size=40))
    def prop(cuts: list[int]) -> None:
        assert asyncio.run(_through(_split(recorded, cuts))) == expected

    prop()


async def test_sse_agent_resumes_a_drop_before_the_first_event(drop_proxy) -> None:  # type: ignore[no-untyped-def]
    agent = ScriptedAgent(deltas=5, pause=0.01)
    async with await start_sse_server(agent) as srv:
        port = int(srv.url.rstrip("/").rpartition(":")[2])
        # how long is the response head? cut a few bytes after it, inside the first frame
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = body("probe")
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
            % (len(data), data)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        proxy = drop_proxy("127.0.0.1", port, cut_after=len(head) + 8, drops=1)
        await proxy.start()
        client = SSEAgent(f"http://127.0.0.1:{proxy.port}/", backoff_initial=0.01)
        remote = [e async for e in client.run(make_input())]
    assert remote == [e async for e in ScriptedAgent(deltas=5).run(make_input())]
    assert client.reconnects == 1


async def test_sse_agent_maps_legacy_thinking_and_locates_a_bad_frame() -> None:
    """The client decodes with the codec's EventStreamDecoder: an older server's
    THINKING_* events arrive as REASONING_*, and a bad frame ends the run with a
    RUN_ERROR that names the frame index and byte offset (after the good events)."""
    good = (
        b'id: run-1:1\ndata: {"type":"RUN_STARTED","threadId":"thread-1","runId":"run-1"}\n\n'
        b'id: run-1:2\ndata: {"type":"THINKING_START"}\n\n'
        b'id: run-1:3\ndata: {"type":"THINKING_END"}\n\n'
    )
    bad = b'id: run-1:4\ndata: {"type":"TEXT_MESSAGE_CONTENT","messageId":7,"delta":"x"}\n\n'
    events = await _through([good, bad])
    assert [e.type.value for e in events] == ["RUN_STARTED", "REASONING_START", "REASONING_END", "RUN_ERROR"]
    assert events[-1].code == "invalid_event"
    assert f"frame 3 at byte {len(good)}" in events[-1].message and "$.messageId" in events[-1].message


async def test_access_log_one_line_per_request_refusals_and_cut_streams_included(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    with caplog.at_level("INFO", logger="agui_engine.access"):
        async with await start_sse_server(agent, options=RegistryOptions(grace_seconds=60)) as srv:
            h = {"Content-Type": "application/json", "X-AGUI-Resumable": "1"}
            async with httpx.AsyncClient(timeout=10) as c:
                async with c.stream("POST", srv.url, content=body(), headers=h) as r:
                    await _read_until(r, 3)  # then the client cuts the stream
                    key = {"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]}
                await eventually(lambda: "499" in caplog.text, what="the cut stream's access line")
                await c.post(srv.url, content=b"x", headers={"Content-Type": "text/plain"})
                await c.post(srv.url, content=body(), headers=h)  # run-1 exists: 409
                await c.delete(srv.url + "runs/run-1", headers=key)
                await c.get(srv.url + "nowhere")
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "agui_engine.access"]
    fields = [line.split() for line in lines]
    assert [f[1:5] for f in fields] == [
        ["POST", "/", "499", "run=run-1"],
        ["POST", "/", "415", "run=-"],
        ["POST", "/", "409", "run=run-1"],
        ["DELETE", "/runs/run-1", "204", "run=run-1"],
        ["GET", "/nowhere", "404", "run=-"],
    ]
    assert all(f[0] == "127.0.0.1" and f[5].endswith("ms") and float(f[5][:-2]) >= 0 for f in fields)
    assert float(fields[0][5][:-2]) > float(fields[1][5][:-2])  # the stream lasted; the refusal did not


async def test_access_log_can_be_turned_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="agui_engine.access"):
        async with await start_sse_server(ScriptedAgent(), access_log=False) as srv:
            r = await post(srv.url, body())
    assert r.status_code == 200 and not [rec for rec in caplog.records if rec.name == "agui_engine.access"]


# ------------------------------------------------- a cursor ahead of a live run (issue 22, hole 5)


async def test_a_cursor_ahead_of_a_live_run_is_a_400_bad_cursor_on_sse_and_websocket() -> None:
    await _cursor_ahead_is_refused([None])


async def test_a_cursor_ahead_of_a_live_run_is_refused_on_its_redis_owner_and_follower(redis_logs: Any) -> None:
    await _cursor_ahead_is_refused([await redis_logs(), await redis_logs()])  # the owner node, a follower node


async def _cursor_ahead_is_refused(logs: list[Any]) -> None:
    """``Last-Event-ID: <runId>:999999999999999999`` (and one past the head) on a run
    that is still running: 400 ``bad_cursor`` on POST and GET, a ``bad_cursor`` error
    line on a WebSocket resume; on the node that runs it and, over Redis, on a node
    that only follows it. Before the fix each got 200 and a silent stream."""
    from websockets.asyncio.client import connect

    from agui_engine.transports.runs import RunRegistry
    from agui_engine.transports.websocket_server import start_websocket_server

    agent = ScriptedAgent(deltas=3, hang=True)  # one delta, then never finishes
    nodes = []
    for log in logs:
        registry = RunRegistry(agent, log=log)
        sse = await start_sse_server(registry=registry)
        ws = await start_websocket_server(registry=registry)
        nodes.append((sse, ws))
    try:
        owner_url = nodes[0][0].url
        async with httpx.AsyncClient(timeout=10) as c:
            async with c.stream("POST", owner_url, content=body("live"), headers={"Content-Type": "application/json"}) as live:
                assert live.status_code == 200
                key = {"X-AGUI-Run-Key": live.headers["X-AGUI-Run-Key"]}
                got = b""
                chunks = live.aiter_raw()  # kept open: the stream stays connected meanwhile
                while b"TEXT_MESSAGE_CONTENT" not in got:
                    got += await chunks.__anext__()
                head = nodes[0][0].registry.get("live").head  # the agent waits for ever now
                assert head == got.count(b"id: live:")
                for sse, ws in nodes:
                    for cursor in ("live:999999999999999999", f"live:{head + 1}"):
                        r = await c.post(sse.url, content=body("live"), headers={
                            "Content-Type": "application/json", "Last-Event-ID": cursor, **key})
                        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_cursor", (cursor, r.text)
                        r = await c.get(sse.url + "runs/live", headers={"Last-Event-ID": cursor, **key})
                        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_cursor", (cursor, r.text)
                        async with connect(ws.url) as sock:
                            await sock.send(msgspec.json.encode(
                                {"type": "resume", "runId": "live", "lastEventId": cursor, "runKey": key["X-AGUI-Run-Key"]}).decode())
                            line = msgspec.json.decode(await asyncio.wait_for(sock.recv(), 5))
                        assert line["error"]["code"] == "bad_cursor", (cursor, line)
                assert nodes[0][0].registry.get("live").lifecycle.live
    finally:
        for sse, ws in nodes:
            await ws.close()
            await sse.close()
