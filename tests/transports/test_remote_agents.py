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


# -- verified once: the agent loop's Verifier, not a second one in the gateway's producer


class _CountingVerifier:
    """Counts the Verifiers made (the gateway's producer and the agent loop each make theirs)."""

    made = 0

    @classmethod
    def patch(cls, monkeypatch: pytest.MonkeyPatch) -> None:
        import agui_engine.loops.agent_loop as agent_loop
        import agui_engine.transports.run_producer as run_producer
        from agui_engine.protocol.verify import Verifier

        cls.made = 0

        class Counting(Verifier):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                cls.made += 1
                super().__init__(*args, **kwargs)

        monkeypatch.setattr(agent_loop, "Verifier", Counting)
        monkeypatch.setattr(run_producer, "Verifier", Counting)


async def _through_gateway(agent: Any, run_id: str) -> list[Any]:
    async with await start_sse_server(agent) as gateway:
        async with httpx.AsyncClient() as http:
            resp = await http.post(gateway.url, content=msgspec.json.encode(make_input(run_id)),
                                   headers={"Accept": "text/event-stream", "Content-Type": "application/json"})
    return [decode_event(f.data) for f in SSEDecoder().feed(resp.content)]


FINE = [
    {"type": "RUN_STARTED"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"t{i} "} for i in range(20)),
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED"},
]


async def test_a_remote_agents_run_behind_the_gateway_is_verified_by_one_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    _CountingVerifier.patch(monkeypatch)
    async with CountingUpstream(FINE) as upstream:
        events = await _through_gateway(SSEAgent(upstream.url), "r1")
    assert [e.type.value for e in events] == [e["type"] for e in FINE]
    assert _CountingVerifier.made == 1  # the agent loop's; the producer feeds none (AgentHost.verifies)


async def test_any_other_agents_run_is_verified_by_the_gateways_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    from .scripted import ScriptedAgent

    _CountingVerifier.patch(monkeypatch)
    events = await _through_gateway(ScriptedAgent(deltas=3), "r1")
    assert events[-1].type.value == "RUN_FINISHED" and _CountingVerifier.made == 1


async def test_verified_once_a_remote_agents_violation_still_ends_the_run_with_run_error() -> None:
    """Arguments for a tool call never started: not repairable; the loop's Verifier, the only one
    that sees the remote agent's events, refuses it."""
    broken = [*FINE[:3], {"type": "TOOL_CALL_ARGS", "toolCallId": "nope", "delta": "{}"}, *FINE[3:]]
    async with CountingUpstream(broken) as upstream:
        events = await _through_gateway(SSEAgent(upstream.url), "r1")
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "protocol_violation"
    assert [e.type.value for e in events][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]


def test_the_host_says_which_runs_are_verified_already() -> None:
    from agui_engine.transports.agent_host import AgentHost

    from .scripted import ScriptedAgent

    plain = make_input("r1")
    proxied = msgspec.structs.replace(
        plain, forwarded_props={"__proxiedMCPRequest": {"serverHash": "h", "method": "tools/list"}})
    remote = AgentHost(SSEAgent("http://127.0.0.1:1/"))
    assert remote.verifies(plain) and not remote.verifies(proxied)
    assert not AgentHost(ScriptedAgent()).verifies(plain)
    assert not AgentHost(AgentLoop(ScriptedAgent(), a2ui=True)).verifies(plain)  # its A2UI events come after the loop
