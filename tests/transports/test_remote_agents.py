"""Remote AG-UI agents: never run twice, and served inside the agent loop.

The upstreams here are real loopback servers written the way third-party AG-UI endpoints are:
no event ids, no resume. Each counts the runs it was asked to start.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import websockets
from aiohttp import web

from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.codec import SSEDecoder, decode_event
from agui_engine.protocol.events import RunErrorEvent, RunFinishedEvent, TextMessageContentEvent
from agui_engine.transports import SSEAgent, StdioAgent, UpstreamStoppedError, WebSocketAgent, start_sse_server
from agui_engine.transports.agent_host import serving_agent
from agui_engine.transports.runs import RunRegistry

from .scripted import make_input


def _frames(events: list[dict[str, Any]]) -> bytes:
    """SSE frames without ``id:`` lines, as pydantic-ai and ag-ui-langgraph write them."""
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


class CountingUpstream:
    """An SSE AG-UI endpoint that counts its POSTs and streams ``events`` without event ids."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.posts: list[dict[str, str]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> CountingUpstream:
        app = web.Application()
        app.router.add_post("/", self._post)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    async def _post(self, request: web.Request) -> web.StreamResponse:
        self.posts.append(dict(request.headers))
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        events = [{**e, "runId": body["runId"], "threadId": body["threadId"]} if e["type"].startswith("RUN_") else e
                  for e in self.events]
        await resp.write(_frames(events))
        await resp.write_eof()
        return resp


TRUNCATED = [
    {"type": "RUN_STARTED"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Booked your flight"},
]


async def test_a_truncated_stream_without_event_ids_is_never_posted_again() -> None:
    async with CountingUpstream(TRUNCATED) as upstream:
        client = SSEAgent(upstream.url, backoff_initial=0.01)
        events = [e async for e in client.run(make_input("r1"))]
    assert len(upstream.posts) == 1  # the agent ran once: its side effect (a booking) is not repeated
    assert "Last-Event-ID" not in upstream.posts[0]
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "upstream_stopped"
    assert "sent no event id to resume from" in events[-1].message
    assert [e.delta for e in events if isinstance(e, TextMessageContentEvent)] == ["Booked your flight"]
    assert client.reconnects == 0


async def test_an_accepted_run_that_streams_nothing_raises_upstream_stopped_before_its_first_event() -> None:
    async with CountingUpstream([]) as upstream:
        with pytest.raises(UpstreamStoppedError) as info:
            [e async for e in SSEAgent(upstream.url, backoff_initial=0.01).run(make_input("r1"))]
    assert info.value.code == "upstream_stopped" and len(upstream.posts) == 1


async def test_served_behind_the_gateway_the_truncated_upstream_runs_once_and_the_client_is_told() -> None:
    async with CountingUpstream(TRUNCATED) as upstream:
        async with await start_sse_server(SSEAgent(upstream.url, backoff_initial=0.01)) as gateway:
            async with httpx.AsyncClient() as http:
                resp = await http.post(gateway.url, content=msgspec.json.encode(make_input("r1")),
                                       headers={"Accept": "text/event-stream", "Content-Type": "application/json"})
    decoder = SSEDecoder()
    events = [decode_event(f.data) for f in decoder.feed(resp.content)]
    assert len(upstream.posts) == 1
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "upstream_stopped"
    # the loop closed the open text message before the RUN_ERROR (spec/agent-loop.md §4)
    assert [e.type.value for e in events][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]


async def test_a_websocket_upstream_that_closes_after_the_run_message_is_not_asked_again() -> None:
    runs: list[str] = []

    async def handler(ws: Any) -> None:
        async for message in ws:
            runs.append(json.loads(message)["type"])
            await ws.close()

    async with websockets.serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(UpstreamStoppedError):
            [e async for e in WebSocketAgent(f"ws://127.0.0.1:{port}/", backoff_initial=0.01).run(make_input("r1"))]
    assert runs == ["run"]  # no resume message naming a cursor the server never sent


DOUBLE_END = [
    {"type": "RUN_STARTED"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},  # a framework closing at node exit and at run end
    {"type": "RUN_FINISHED"},
]


async def test_a_remote_agent_served_by_the_gateway_goes_through_the_agent_loop() -> None:
    async with CountingUpstream(DOUBLE_END) as upstream:
        async with await start_sse_server(SSEAgent(upstream.url)) as gateway:
            events = [e async for e in SSEAgent(gateway.url).run(make_input("r1"))]
    assert [e.type.value for e in events] == [
        "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert isinstance(events[-1], RunFinishedEvent)


def test_serving_agent_wraps_every_remote_client_once_and_nothing_else() -> None:
    for remote in (SSEAgent("http://127.0.0.1:9/"), WebSocketAgent("ws://127.0.0.1:9/"), StdioAgent("true")):
        served = RunRegistry(remote).agent
        assert isinstance(served, AgentLoop) and served.agent is remote
    loop = AgentLoop(SSEAgent("http://127.0.0.1:9/"))
    assert serving_agent(loop) is loop  # already in a loop (with its own components): as it is

    async def own(input: Any) -> AsyncIterator[Any]:
        yield  # pragma: no cover

    assert not isinstance(RunRegistry(own).agent, AgentLoop)
