"""Data queries through the real gateway on loopback: ``POST <path>/data/query`` on the SSE
server and the ``query`` message on the WebSocket server, the Python clients
(``SSEAgent.query``, ``WebSocketAgent.query``, ``Thread.query``), every error status, the
cache, the concurrency limit, slow resolvers, and a resource-bound component in a real run
of the embedded model."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.sync.client import connect as sync_connect

from agui_engine.demo.weather_model import EmbeddedModel
from agui_engine.genui.component_stream import COMPONENT_END
from agui_engine.genui.components import Component
from agui_engine.genui.resources import (
    Resource,
    ResourceBusyError,
    ResourceFailedError,
    ResourceParamsError,
    ResourcePermissionError,
    ResourceRegistry,
    ResourceResultTooLargeError,
    ResourceTimeoutError,
    UnknownResourceError,
)
from agui_engine.llm import LLMTool
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.thread import Thread
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import CustomEvent, RunAgentInput, ToolCallResultEvent, UserMessage
from agui_engine.transports import ManualClock, SSEAgent, WebSocketAgent, start_sse_server, start_websocket_server
from agui_engine.transports.data import ResourceBroker
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.server_options import ConnectionOptions, DataOptions

from ..waiting import eventually
from .loop_thread import LoopThread, json_values
from .scripted import ScriptedAgent

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}


class Calls:
    """How often each resolver really ran (what a cache hit must not increase)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}

    def note(self, name: str) -> None:
        self.count[name] = self.count.get(name, 0) + 1


def make_registry(calls: Calls, gate: asyncio.Event | None = None) -> ResourceRegistry:
    registry = ResourceRegistry()

    @registry.resource("echo", params={"type": "object"}, cache_ttl=60)
    def echo(params: Any, identity: str | None) -> dict[str, Any]:
        calls.note("echo")
        return {"params": params, "identity": identity}

    @registry.resource("private.notes", params=CITY, permission=lambda identity, params: identity == "alice")
    async def private_notes(params: Any, identity: str | None) -> dict[str, Any]:
        calls.note("private.notes")
        return {"owner": identity, "city": params["city"]}

    @registry.resource("slow", timeout=0.5)
    async def slow(params: Any, identity: str | None) -> str:
        calls.note("slow")
        await asyncio.sleep(30)
        return "never"

    @registry.resource("slow.sync", timeout=0.3, max_concurrency=None)
    def slow_sync(params: Any, identity: str | None) -> str:
        calls.note("slow.sync")
        time.sleep(1.0)
        return "late"

    @registry.resource("cached.slow", params={"type": "object"}, cache_ttl=60)
    async def cached_slow(params: Any, identity: str | None) -> dict[str, Any]:
        calls.note("cached.slow")
        await asyncio.sleep(0.2)
        return {"identity": identity, "n": calls.count["cached.slow"]}

    @registry.resource("fast")
    async def fast(params: Any, identity: str | None) -> int:
        calls.note("fast")
        return 42

    @registry.resource("broken")
    def broken(params: Any, identity: str | None) -> None:
        raise RuntimeError("database password is hunter2")

    @registry.resource("not.json")
    def not_json(params: Any, identity: str | None) -> object:
        return object()

    @registry.resource("big", max_result_bytes=100)
    def big(params: Any, identity: str | None) -> str:
        return "x" * 200

    @registry.resource("gated", max_concurrency=2)
    async def gated(params: Any, identity: str | None) -> str:
        calls.note("gated")
        assert gate is not None
        await asyncio.wait_for(gate.wait(), 10)
        return "opened"

    @registry.resource("hook.raises", permission=lambda identity, params: 1 / 0)
    def hook_raises(params: Any, identity: str | None) -> int:
        return 1

    def office_hours(identity: str | None, params: Any) -> bool:
        raise ResourcePermissionError("the archive opens at 9")

    @registry.resource("hook.refuses", permission=office_hours)
    def hook_refuses(params: Any, identity: str | None) -> int:
        return 1

    @registry.resource("struct.city", params=msgspec.defstruct("CityParams", [("city", str)]))
    def struct_city(params: Any, identity: str | None) -> str:
        return str(params.city)

    return registry


@asynccontextmanager
async def gateway(agent: Any = None, *, start: Any = start_sse_server, **options: Any) -> AsyncIterator[Any]:
    """A gateway on loopback (SSE by default) in front of ``agent`` (a scripted one)."""
    server = await start(agent if agent is not None else ScriptedAgent(deltas=1), **options)
    try:
        yield server
    finally:
        await server.close()


async def post(url: str, body: Any, token: str | None = "tok-alice", *, raw: bytes | None = None,
               content_type: str = "application/json") -> httpx.Response:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url + "data/query", content=raw if raw is not None else json.dumps(body), headers=headers)


# --------------------------------------------------------------------------- HTTP


async def test_a_query_answers_the_data_and_the_python_clients_read_it() -> None:
    calls = Calls()
    async with gateway(auth_token=TOKENS, data=DataOptions(resources=make_registry(calls))) as server:
        resp = await post(server.url, {"resourceId": "echo", "params": {"a": [1, "é"]}})
        assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("application/json")
        assert resp.headers["Cache-Control"] == "no-store"
        assert resp.json() == {"resourceId": "echo", "data": {"params": {"a": [1, "é"]}, "identity": "alice"}}
        client = SSEAgent(server.url, headers={"Authorization": "Bearer tok-bob"})
        assert await client.query("echo", {"b": 2}) == {"params": {"b": 2}, "identity": "bob"}
        assert await client.query("fast") == 42  # params default to {}
        thread = Thread(client)
        assert await thread.query("struct.city", {"city": "Oslo"}) == "Oslo"  # a Struct reached the resolver


async def test_permission_is_the_hooks_answer_for_each_identity() -> None:
    calls = Calls()
    async with gateway(auth_token=TOKENS, data=DataOptions(resources=make_registry(calls))) as server:
        alice = SSEAgent(server.url, headers={"Authorization": "Bearer tok-alice"})
        bob = SSEAgent(server.url, headers={"Authorization": "Bearer tok-bob"})
        assert await alice.query("private.notes", {"city": "Oslo"}) == {"owner": "alice", "city": "Oslo"}
        with pytest.raises(ResourcePermissionError) as info:
            await bob.query("private.notes", {"city": "Oslo"})
        assert info.value.http_status == 403 and info.value.code == "forbidden"
        resp = await post(server.url, {"resourceId": "private.notes", "params": {"city": "Oslo"}}, "tok-bob")
        assert resp.status_code == 403 and resp.json()["error"]["code"] == "forbidden"
        assert calls.count["private.notes"] == 1  # bob's query never reached the resolver
        # no token at all: the gateway's own 401, before anything else
        resp = await post(server.url, {"resourceId": "private.notes", "params": {"city": "Oslo"}}, None)
        assert resp.status_code == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
        with pytest.raises(RemoteAgentError) as refused:
            await SSEAgent(server.url).query("echo", {})
        assert refused.value.status == 401 and refused.value.code == "unauthorized"


async def test_without_auth_the_identity_is_none() -> None:
    calls = Calls()
    async with gateway(data=DataOptions(resources=make_registry(calls))) as server:
        assert await SSEAgent(server.url).query("echo", {}) == {"params": {}, "identity": None}
        with pytest.raises(ResourcePermissionError, match="anonymous"):
            await SSEAgent(server.url).query("private.notes", {"city": "Oslo"})


@pytest.mark.parametrize(
    ("body", "status", "code", "error"),
    [
        ({"resourceId": "nope"}, 404, "unknown_resource", UnknownResourceError),
        ({"resourceId": "private.notes", "params": {"city": 3}}, 422, "invalid_params", ResourceParamsError),
        ({"resourceId": "private.notes", "params": {}}, 422, "invalid_params", ResourceParamsError),
        ({"resourceId": "slow"}, 504, "resource_timeout", ResourceTimeoutError),
        ({"resourceId": "broken"}, 502, "resource_failed", ResourceFailedError),
        ({"resourceId": "not.json"}, 502, "resource_failed", ResourceFailedError),
        ({"resourceId": "hook.raises"}, 502, "resource_failed", ResourceFailedError),
        ({"resourceId": "hook.refuses"}, 403, "forbidden", ResourcePermissionError),
        ({"resourceId": "big"}, 502, "result_too_large", ResourceResultTooLargeError),
    ],
)
async def test_each_refusal_has_its_status_and_typed_error(
    body: dict[str, Any], status: int, code: str, error: type[Exception], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "agui_engine.transports")
    async with gateway(auth_token=TOKENS, data=DataOptions(resources=make_registry(Calls()))) as server:
        resp = await post(server.url, body)
        assert resp.status_code == status, resp.text
        doc = resp.json()["error"]
        assert doc["code"] == code and doc["message"]
        assert "hunter2" not in resp.text and "Traceback" not in resp.text and "RuntimeError" not in resp.text
        if status == 422:
            assert doc["path"] == "$.params.city" if body["params"] else doc["path"] == "$.params"
            assert doc["message"].endswith(f"- at {doc['path']}")
        with pytest.raises(error) as info:
            await SSEAgent(server.url, headers={"Authorization": "Bearer tok-alice"}).query(
                body["resourceId"], body.get("params")
            )
        assert info.value.code == code
        if status == 422:
            assert info.value.path == doc["path"]
    if code == "resource_failed" and body["resourceId"] == "broken":
        # the traceback is in the server's log, not in the answer
        logged = [r for r in caplog.records if r.exc_info and "broken" in r.getMessage()]
        assert logged and "hunter2" in str(logged[0].exc_info[1])


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        (b'{"resourceId": "echo", ', "application/json", 400, "malformed_json"),
        (b"\xff\xfe", "application/json", 400, "malformed_json"),
        (b'{"resourceId": 5}', "application/json", 422, "invalid_input"),
        (b'["echo"]', "application/json", 422, "invalid_input"),
        (b'{"params": {}}', "application/json", 422, "invalid_input"),
        (b'{"resourceId": "echo"}', "text/plain", 415, "unsupported_media_type"),
        (b'{"resourceId":"echo","params":' + b"[" * 600 + b"]" * 600 + b"}", "application/json", 413, "input_too_deep"),
        (b'{"resourceId":"echo","params":"' + b"x" * 5000 + b'"}', "application/json", 413, "limit_exceeded"),
    ],
)
async def test_malformed_bodies_are_refused_as_run_bodies_are(raw: bytes, content_type: str, status: int, code: str) -> None:
    async with gateway(data=DataOptions(resources=make_registry(Calls())), connection=ConnectionOptions(max_input_bytes=4096)) as server:
        resp = await post(server.url, None, raw=raw, content_type=content_type)
        assert resp.status_code == status, resp.text
        assert resp.json()["error"]["code"] == code


async def test_a_gateway_without_resources_answers_404_to_every_query() -> None:
    async with gateway() as server:
        resp = await post(server.url, {"resourceId": "echo"})
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "unknown_resource"
        assert (await post(server.url, None, raw=b"{")).status_code == 400


async def test_the_query_path_follows_the_gateway_path_and_cors() -> None:
    async with gateway(path="/agui", data=DataOptions(resources=make_registry(Calls())), cors_origins=["http://app.test"]) as server:
        url = server.url + "agui/"
        assert await SSEAgent(server.url + "agui").query("fast") == 42
        async with httpx.AsyncClient() as client:
            pre = await client.options(url + "data/query", headers={"Origin": "http://app.test",
                                                                    "Access-Control-Request-Method": "POST"})
            assert pre.status_code == 204 and "POST" in pre.headers["Access-Control-Allow-Methods"]
            resp = await client.post(url + "data/query", json={"resourceId": "fast"}, headers={"Origin": "http://app.test"})
            assert resp.status_code == 200 and resp.headers["Access-Control-Allow-Origin"] == "http://app.test"


# --------------------------------------------------------------------------- cache and limits


async def test_the_cache_is_keyed_by_id_canonical_params_and_identity() -> None:
    calls = Calls()
    clock = ManualClock()
    broker = ResourceBroker(make_registry(calls), clock=clock)
    async with gateway(auth_token=TOKENS, data=DataOptions(resources=broker)) as server:
        alice = SSEAgent(server.url, headers={"Authorization": "Bearer tok-alice"})
        bob = SSEAgent(server.url, headers={"Authorization": "Bearer tok-bob"})
        first = await alice.query("echo", {"a": 1, "b": [2, 3]})
        assert await alice.query("echo", {"b": [2, 3], "a": 1}) == first  # same params, other key order
        assert calls.count["echo"] == 1
        assert (await bob.query("echo", {"a": 1, "b": [2, 3]}))["identity"] == "bob"  # never alice's data
        assert calls.count["echo"] == 2
        await alice.query("echo", {"a": 2})
        assert calls.count["echo"] == 3
        clock.advance(59.0)
        await alice.query("echo", {"a": 1, "b": [2, 3]})
        assert calls.count["echo"] == 3  # still fresh
        clock.advance(1.5)
        await alice.query("echo", {"a": 1, "b": [2, 3]})
        assert calls.count["echo"] == 4  # expired after its 60 s TTL: resolved again
        # a resource without a TTL is never cached
        await alice.query("fast")
        await alice.query("fast")
        assert calls.count["fast"] == 2


async def test_identical_queries_in_flight_share_one_resolution() -> None:
    calls = Calls()
    async with gateway(auth_token=TOKENS, data=DataOptions(resources=make_registry(calls))) as server:
        alice = SSEAgent(server.url, headers={"Authorization": "Bearer tok-alice"})
        bob = SSEAgent(server.url, headers={"Authorization": "Bearer tok-bob"})
        answers = await asyncio.gather(*(alice.query("cached.slow", {"q": 1}) for _ in range(6)), bob.query("cached.slow", {"q": 1}))
        assert answers[:6] == [{"identity": "alice", "n": 1}] * 6 or answers[:6] == [{"identity": "alice", "n": 2}] * 6
        assert answers[6]["identity"] == "bob"
        assert calls.count["cached.slow"] == 2  # one resolution per identity, not one per query
        assert await alice.query("cached.slow", {"q": 1}) == answers[0]  # then from the cache
        assert calls.count["cached.slow"] == 2


async def test_a_slow_resolver_times_out_while_other_queries_keep_flowing() -> None:
    """Queries of a resolver that has not answered yet hold up no other query, and a resolver past
    its timeout is a ResourceTimeoutError. The held resolver waits on the test's own gate (not on
    the clock), so the ordering is asserted, never a duration."""
    calls, gate = Calls(), asyncio.Event()
    async with gateway(data=DataOptions(resources=make_registry(calls, gate))) as server:
        client = SSEAgent(server.url)
        started = time.monotonic()
        held = asyncio.create_task(client.query("gated"))
        slow = asyncio.create_task(client.query("slow"))
        slow_sync = asyncio.create_task(client.query("slow.sync"))
        await eventually(lambda: calls.count.get("gated") == 1)
        answers = await asyncio.gather(*(client.query("fast") for _ in range(20)))
        assert answers == [42] * 20 and not held.done()  # all answered while the held one was still running
        with pytest.raises(ResourceTimeoutError):
            await slow
        with pytest.raises(ResourceTimeoutError):
            await slow_sync
        assert time.monotonic() - started >= 0.5  # not before the slow resolver's own timeout
        gate.set()
        assert await held == "opened"
        assert calls.count == {"gated": 1, "slow": 1, "slow.sync": 1, "fast": 20}


async def test_the_concurrency_limit_queues_then_refuses_with_503() -> None:
    calls = Calls()
    gate = asyncio.Event()
    async with gateway(data=DataOptions(resources=make_registry(calls, gate), query_queue_timeout=0.3)) as server:
        client = SSEAgent(server.url)
        held = [asyncio.create_task(client.query("gated")) for _ in range(2)]
        await asyncio.sleep(0.1)
        assert calls.count["gated"] == 2
        resp = await post(server.url, {"resourceId": "gated"}, None)  # a third one: waits 0.3 s, refused
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "resource_busy"
        assert resp.headers["Retry-After"] == "1"
        with pytest.raises(ResourceBusyError):
            await client.query("gated")
        assert calls.count["gated"] == 2  # never more than max_concurrency=2 at once
        assert await client.query("fast") == 42  # another resource is not held up
        waiting = asyncio.create_task(client.query("gated"))  # queued: gets a slot when one frees
        await asyncio.sleep(0.05)
        gate.set()
        assert await asyncio.gather(*held, waiting) == ["opened"] * 3


async def test_hung_sync_resolvers_hold_only_their_own_resource() -> None:
    """Issue 22, hole 2: 40 calls of a sync resolver that never returns (past its timeout
    the thread cannot be stopped) used to fill the loop's shared default executor, so a
    healthy sync resource answered 504. Each resource now has its own bounded pool: the
    hung one answers 504 and then 503, the healthy one keeps answering at once."""
    import threading

    release = threading.Event()
    hung_calls: list[int] = []

    def hung(params: Any, identity: str | None) -> str:
        hung_calls.append(1)
        release.wait(30)
        return "late"

    def healthy(params: Any, identity: str | None) -> str:
        return "ok"

    resources = [Resource("hung", hung, timeout=0.2, max_concurrency=64), Resource("healthy", healthy, timeout=2.0)]
    try:
        async with gateway(data=DataOptions(resources=resources, query_queue_timeout=0.2)) as server:
            answers = await asyncio.gather(*(post(server.url, {"resourceId": "hung"}, None) for _ in range(40)))
            assert {r.status_code for r in answers} <= {503, 504} and 504 in {r.status_code for r in answers}
            for _ in range(5):
                r = await post(server.url, {"resourceId": "healthy"}, None)
                assert r.status_code == 200 and r.json()["data"] == "ok", r.text
            # the hung resource's own pool is bounded: at most its threads run its resolver
            from agui_engine.transports.data import MAX_RESOLVER_THREADS

            assert 0 < len(hung_calls) <= MAX_RESOLVER_THREADS
    finally:
        release.set()


# --------------------------------------------------------------------------- WebSocket


async def lines(ws: Any, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < count:
        message = await asyncio.wait_for(ws.recv(), 10)
        out.extend(json.loads(line) for line in message.split("\n"))
    return out


async def test_the_websocket_query_message() -> None:
    calls = Calls()
    async with gateway(start=start_websocket_server, auth_token=TOKENS, data=DataOptions(resources=make_registry(calls))) as server:
        async with connect(server.url, additional_headers={"Authorization": "Bearer tok-bob"}) as ws:
            # a slow query first, then a fast one on the same connection: the fast answer comes first
            await ws.send(json.dumps({"type": "query", "queryId": "q-slow", "resourceId": "slow"}))
            await ws.send(json.dumps({"type": "query", "queryId": "q1", "resourceId": "echo", "params": {"x": 1}}))
            await ws.send(json.dumps({"type": "query", "queryId": "q2", "resourceId": "private.notes",
                                      "params": {"city": 5}}))
            await ws.send(json.dumps({"type": "query", "queryId": "q3", "resourceId": "private.notes",
                                      "params": {"city": "Oslo"}}))
            await ws.send(json.dumps({"type": "query", "queryId": "q4", "resourceId": "nope"}))
            await ws.send(json.dumps({"type": "query", "resourceId": "echo"}))  # no queryId: malformed
            got = await lines(ws, 6)
        by_id = {line.get("queryId"): line for line in got}
        assert got[-1]["queryId"] == "q-slow"  # answered last, after its 0.5 s timeout
        assert by_id["q1"] == {"queryId": "q1", "result": {"params": {"x": 1}, "identity": "bob"}}
        assert by_id["q2"]["error"] == {
            "code": "invalid_params", "status": 4422, "path": "$.params.city",
            "message": "params of private.notes do not match its schema: 5 is not of type 'string' - at $.params.city",
        }
        assert by_id["q3"]["error"]["code"] == "forbidden" and by_id["q3"]["error"]["status"] == 4403
        assert by_id["q4"]["error"]["code"] == "unknown_resource" and by_id["q4"]["error"]["status"] == 4404
        assert by_id["q-slow"]["error"]["code"] == "resource_timeout" and by_id["q-slow"]["error"]["status"] == 4504
        assert by_id[None]["error"]["code"] == "bad_input" and "queryId" in by_id[None]["error"]["message"]

        # the Python client over WebSocket, and a thread over it
        alice = WebSocketAgent(server.url, headers={"Authorization": "Bearer tok-alice"})
        assert await Thread(alice).query("private.notes", {"city": "Oslo"}) == {"owner": "alice", "city": "Oslo"}
        with pytest.raises(ResourceParamsError) as info:
            await alice.query("private.notes", {"city": None})
        assert info.value.path == "$.params.city"
        with pytest.raises(ResourcePermissionError):
            await WebSocketAgent(server.url, headers={"Authorization": "Bearer tok-bob"}).query("private.notes",
                                                                                             {"city": "Oslo"})
        with pytest.raises(RemoteAgentError) as refused:
            await WebSocketAgent(server.url).query("echo")
        assert refused.value.status == 401


async def test_a_websocket_query_runs_beside_a_run_on_the_same_connection() -> None:
    async with gateway(start=start_websocket_server, data=DataOptions(resources=make_registry(Calls()))) as server:
        async with connect(server.url) as ws:
            run = RunAgentInput(thread_id="t", run_id="r1", messages=[UserMessage(id="u", content="hi")])
            await ws.send(json.dumps({"type": "run", "input": msgspec.to_builtins(run)}))
            await ws.send(json.dumps({"type": "query", "queryId": "q", "resourceId": "fast"}))
            seen: list[dict[str, Any]] = []
            while not any(line.get("queryId") == "q" for line in seen) or not any(
                line.get("event", {}).get("type") == "RUN_FINISHED" for line in seen
            ):
                seen.extend(await lines(ws, 1))
        assert {"queryId": "q", "result": 42} in seen


async def test_too_many_websocket_queries_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    import agui_engine.transports.websocket_server as wsmod

    monkeypatch.setattr(wsmod, "MAX_QUERIES_PER_CONNECTION", 2)
    gate = asyncio.Event()
    async with gateway(start=start_websocket_server, data=DataOptions(resources=make_registry(Calls(), gate))) as server:
        async with connect(server.url) as ws:
            for i in range(3):
                await ws.send(json.dumps({"type": "query", "queryId": f"g{i}", "resourceId": "gated"}))
            (refused,) = await lines(ws, 1)
            assert refused["queryId"] == "g2" and refused["error"]["code"] == "too_many_queries"
            assert refused["error"]["status"] == 4429
            gate.set()
            answers = await lines(ws, 2)
        assert sorted(a["queryId"] for a in answers) == ["g0", "g1"]


async def test_a_thread_over_an_agent_without_a_gateway_cannot_query() -> None:
    with pytest.raises(UsageError, match="cannot answer data queries"):
        await Thread(ScriptedAgent()).query("echo", {})


# --------------------------------------------------------------------------- components in a run


class RecordingModel:
    """The embedded model, recording the tools and the messages each model call was given."""

    def __init__(self) -> None:
        self.model = EmbeddedModel()
        self.tools: list[list[LLMTool]] = []
        self.messages: list[list[Any]] = []

    def complete(self, messages: Any, tools: Any, tool_choice: Any = "auto", **options: Any) -> Any:
        self.tools.append(list(tools))
        self.messages.append(list(messages))
        return self.model.complete(messages, tools, tool_choice, **options)


WEATHER = Resource("weather.current", lambda p, i: {"city": p["city"], "temperature": 21.0}, params=CITY)
FORECAST = Resource("weather.forecast", lambda p, i: [], params=CITY)
UNITS = Resource(
    "weather.units",
    lambda p, i: {},
    params={"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["c", "f"]}},
            "required": ["city", "units"]},
)
CARD_PROPS = {"type": "object", "properties": {"note": {"type": "string"}}}


async def run_over_gateway(component: Component) -> tuple[RecordingModel, list[Any], Any]:
    model = RecordingModel()
    agent = LLMAgent(model, components=[component])
    async with gateway(agent) as server:
        client = SSEAgent(server.url)
        run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="What's the weather in Tokyo?")])
        events = [e async for e in client.run(run)]
        data = await client.query("weather.current", {"city": "Tokyo"}) if "weather.current" in component.resources else None
    return model, events, data


async def test_the_model_chooses_a_resource_from_the_enum_and_the_gateway_serves_it() -> None:
    card = Component("WeatherCard", "Current weather.", CARD_PROPS, resources=[WEATHER, FORECAST])
    model, events, data = await run_over_gateway(card)
    (tool,) = [t for t in model.tools[0] if t.name == "show_component_WeatherCard"]
    assert tool.strict and tool.parameters["properties"]["resourceId"]["enum"] == ["weather.current", "weather.forecast"]
    (end,) = [e.value for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    assert end["finalProps"]["resourceId"] == "weather.current" and end["finalProps"]["params"] == {"city": "Tokyo"}
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content == "Component WeatherCard is shown on the user's screen."
    assert data == {"city": "Tokyo", "temperature": 21.0}  # served by the gateway in front of the agent


async def test_params_that_do_not_fit_the_chosen_resource_go_back_to_the_model() -> None:
    card = Component("WeatherCard", "Current weather.", CARD_PROPS, resources=[UNITS])
    model, events, _ = await run_over_gateway(card)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert "do not match its schema" in result.content and "- at $.params" in result.content
    assert "'units' is a required property" in result.content
    tool_message = model.messages[1][-1]  # the model's next call sees the error with the JSON path
    assert "'units' is a required property - at $.params" in (tool_message.error or "")


# --------------------------------------------------------------------------- property: never 500


class _Servers(LoopThread):
    """An SSE and a WebSocket gateway serving the test resources in their own loop thread,
    so that hypothesis (synchronous) can hit them with real sockets."""

    def __init__(self) -> None:
        super().__init__()
        registry = self.call(self._registry)
        self.sse = self.start(start_sse_server, ScriptedAgent(deltas=1), data=DataOptions(resources=registry), connection=ConnectionOptions(max_input_bytes=64 * 1024))
        self.ws = self.start(start_websocket_server, ScriptedAgent(deltas=1), data=DataOptions(resources=registry))

    @staticmethod
    async def _registry() -> ResourceRegistry:
        registry = make_registry(Calls(), asyncio.Event())  # the gate's Event belongs to the servers' loop
        registry.add(Resource("tight", lambda p, i: p, params={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}},
                           "mode": {"enum": ["a", "b"]}, "pattern": {"type": "string", "pattern": "^[a-z]+$"}},
            "required": ["n"], "additionalProperties": False}, max_result_bytes=2048))
        return registry


@pytest.fixture(scope="module")
def servers() -> Iterator[_Servers]:
    s = _Servers()
    yield s
    s.close()


_ids = st.sampled_from(["echo", "tight", "struct.city", "private.notes", "not.json", "big", "nope", ""]) | st.text(max_size=12)


@st.composite
def _query_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["query", "query", "json", "bytes", "deep"]))
    if kind == "query":
        doc: dict[str, Any] = {"resourceId": draw(_ids | json_values)}
        if draw(st.booleans()):
            doc["params"] = draw(json_values)
        return msgspec.json.encode(doc)
    if kind == "json":
        return msgspec.json.encode(draw(json_values))
    if kind == "deep":
        n = draw(st.integers(400, 2000))
        return b'{"resourceId":"echo","params":' + b"[" * n + b"]" * n + b"}"
    return draw(st.binary(max_size=200))


#: Seconds one request of the property tests may wait for its answer: never reached by a sound
#: server (an answer takes milliseconds; the slowest resource gives up after its own timeout, a
#: 504), only by a hung one. Generous, because the machine may be far busier than this test.
_ANSWER_WAIT_SECONDS = 120.0


@pytest.fixture(scope="module")
def http_client() -> Iterator[httpx.Client]:
    """One keep-alive client for every example: no TCP connect per example, which a loaded
    machine made slow and whose refusals were not the server's answers."""
    with httpx.Client(timeout=_ANSWER_WAIT_SECONDS) as client:
        yield client


# derandomize: the same examples every run, so a failure is the input's, never the draw's; no
# deadline: an example's duration is the machine's, not the server's (issue 30: FlakyFailure at load 9)
@settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_query_bodies())
# Why 300 s: 100 examples, each a real HTTP round trip; 33 s with both cores busy (load 14)
@pytest.mark.timeout(300)
def test_no_query_body_makes_the_http_endpoint_answer_500(servers: _Servers, http_client: httpx.Client,
                                                          body: bytes) -> None:
    resp = http_client.post(servers.sse.url + "data/query", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code < 500 or resp.status_code in (502, 503, 504), (resp.status_code, resp.text, body[:200])
    if resp.status_code != 200:
        assert resp.json()["error"]["code"] != "internal_error"


@settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(resource_id=_ids, params=json_values, query_id=st.text(min_size=1, max_size=8))
@pytest.mark.timeout(300)  # as the HTTP one: 100 real round trips on a machine that may be busy
def test_no_query_message_makes_the_websocket_answer_4500(
    servers: _Servers, resource_id: str, params: Any, query_id: str
) -> None:
    # msgspec writes inf as null (json.dumps would write Infinity, which is not JSON: a malformed message)
    message = msgspec.json.encode({"type": "query", "queryId": query_id, "resourceId": resource_id, "params": params}).decode()
    with sync_connect(servers.ws.url, open_timeout=_ANSWER_WAIT_SECONDS, close_timeout=_ANSWER_WAIT_SECONDS) as ws:
        ws.send(message)
        try:
            reply = json.loads(ws.recv(timeout=_ANSWER_WAIT_SECONDS))
        except websockets.ConnectionClosed as exc:  # pragma: no cover - the assertion's message
            raise AssertionError(f"the connection closed: {exc}") from None
    assert reply["queryId"] == query_id
    if "error" in reply:
        assert reply["error"]["status"] != 4500 and reply["error"]["code"] != "internal_error", reply


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_agui_engine_serve_serves_the_demo_resources_by_default(transport: str) -> None:
    import os
    import signal
    import sys

    from agui_engine.demo.weather_model import DEMO_WEATHER

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--transport", transport, "--port", "0",
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        env={**os.environ, "AGUI_AUTH_TOKEN": "serve-token"},
    )
    try:
        assert proc.stderr is not None
        url = None
        async with asyncio.timeout(30):
            while url is None:
                line = (await proc.stderr.readline()).decode()
                assert line, "the server exited before serving"
                if line.startswith("serving on "):
                    url = line.split()[-1]
        client_class: Any = SSEAgent if transport == "sse" else WebSocketAgent
        client = client_class(url, headers={"Authorization": "Bearer serve-token"})
        assert await client.query("weather.current", {"city": "Tokyo"}) == DEMO_WEATHER["tokyo"]
        with pytest.raises(ResourceParamsError) as info:
            await client.query("weather.current", {"city": "Atlantis"})  # not in the demo table
        assert info.value.path == "$.params.city"
        with pytest.raises(RemoteAgentError):
            await client_class(url).query("weather.current", {"city": "Tokyo"})  # no token: 401
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0


async def test_a_query_in_flight_does_not_count_as_an_idle_connection() -> None:
    """The cap on connections that run nothing (one per address here) does not count a
    connection whose query is being resolved, as it does not count one streaming a run."""
    calls, gate = Calls(), asyncio.Event()
    async with gateway(start=start_websocket_server, data=DataOptions(resources=make_registry(calls, gate)), connection=ConnectionOptions(max_idle_per_ip=1)) as ws_server:
        async with connect(ws_server.url) as first:
            await first.send(json.dumps({"type": "query", "queryId": "g", "resourceId": "gated"}))
            await eventually(lambda: calls.count.get("gated") == 1)
            async with connect(ws_server.url) as second:  # admitted: the first one is working
                await second.send(json.dumps({"type": "query", "queryId": "f", "resourceId": "fast"}))
                assert await lines(second, 1) == [{"queryId": "f", "result": 42}]
            gate.set()
            assert await lines(first, 1) == [{"queryId": "g", "result": "opened"}]
            with pytest.raises(websockets.InvalidStatus):  # the first is idle again: the cap applies
                async with connect(ws_server.url):
                    pass
    calls, gate = Calls(), asyncio.Event()
    async with gateway(data=DataOptions(resources=make_registry(calls, gate)), connection=ConnectionOptions(max_idle_per_ip=1)) as server:
        slow = asyncio.create_task(SSEAgent(server.url).query("gated"))
        await eventually(lambda: calls.count.get("gated") == 1)
        assert await SSEAgent(server.url).query("fast") == 42  # a second connection, admitted
        gate.set()
        assert await slow == "opened"
