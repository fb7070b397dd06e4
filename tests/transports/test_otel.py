"""OpenTelemetry (issue 33): a traced gateway's spans follow the GenAI semantic conventions, continue
the client's W3C trace, and carry it on to the model provider and to a remote AG-UI agent; the run
and event counters reach OpenTelemetry metrics beside Prometheus.

Real components throughout: the gateway on loopback, the real OpenAI Chat adapter against an
OpenAI-compatible server on loopback (aiohttp) that records the headers it is sent, the SDK's
in-memory exporter and metric reader (``tests/otel_sdk.py``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web

from agui_engine import (
    LLMAgent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.adapters.openai_chat import OpenAICompatibleClient, encode_chat_stream
from agui_engine.llm import Finish, TextDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, Usage
from agui_engine.loops.observe import OBSERVER, model_span, tool_span, trace_headers
from agui_engine.transports.metrics import GatewayMetrics
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import start_sse_server

from ..otel_sdk import counter_total, sdk, spans_of
from ..waiting import eventually

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


CLIENT_SPAN = 0x00F067AA0BA902B7


def _traceparent() -> tuple[int, str]:
    """A new trace id (the exporter is shared by every test of the process) and the client's
    W3C traceparent naming CLIENT_SPAN in it."""
    trace_id = uuid.uuid4().int
    return trace_id, f"00-{trace_id:032x}-{CLIENT_SPAN:016x}-01"


def _input(thread: str, run: str, text: str = "weather in Oslo?") -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "state": None, "messages": [{"id": "u1", "role": "user", "content": text}],
            "tools": [], "context": [], "forwardedProps": None}


class ChatServer:
    """An OpenAI-compatible Chat Completions server on loopback: first a get_weather call, then
    (once a tool result is in the conversation) the answer; it keeps each request's headers."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        body = await request.json()
        answered = any(m.get("role") == "tool" for m in body["messages"])

        async def items() -> AsyncIterator[Any]:
            if answered:
                yield TextDelta(text="Oslo: sunny")
                yield Usage(input_tokens=40, output_tokens=3)
                yield Finish(reason="stop")
            else:
                yield ToolCallStart(index=0, id="call_oslo", name="get_weather")
                yield ToolCallArgsDelta(index=0, delta='{"city": "Oslo"}')
                yield ToolCallEnd(index=0)
                yield Usage(input_tokens=31, output_tokens=9)
                yield Finish(reason="tool_calls")

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        async for frame in encode_chat_stream(items(), model="gpt-test-2026"):
            await resp.write(frame)
        await resp.write_eof()
        return resp

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def hello(input: Any) -> AsyncIterator[Any]:
    """Three events of text between the run's start and end."""
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    for event in (TextMessageStartEvent(message_id="m", role="assistant"),
                  TextMessageContentEvent(message_id="m", delta="hi"), TextMessageEndEvent(message_id="m")):
        yield event
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"{city}: sunny"


@pytest.fixture
async def chat_server() -> AsyncIterator[ChatServer]:
    server = ChatServer()
    await server.start()
    yield server
    await server.close()


def _agent(chat: ChatServer) -> LLMAgent:
    return LLMAgent(OpenAICompatibleClient("gpt-test-2026", base_url=chat.url), tools=[get_weather])


async def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    async with httpx.AsyncClient(timeout=30) as client:
        resp = await client.post(url, json=body, headers={"Accept": "text/event-stream", **(headers or {})})
        assert resp.status_code == 200, resp.text
        return resp.text


def _named(spans: list[Any], prefix: str) -> list[Any]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_run_trace_follows_genai_conventions_and_continues_client_trace(chat_server: ChatServer) -> None:
    """Requirement: invoke_agent per run (gen_ai.conversation.id = threadId) as the child of the
    client's traceparent; a chat span per model call with model, token usage and finish reason;
    execute_tool per server tool call; the provider's request carries the chat span's traceparent."""
    sdk()
    trace_id, traceparent = _traceparent()
    server = await start_sse_server(_agent(chat_server), options=RegistryOptions(tracing=True))
    try:
        text = await _post(server.url, _input("thread-otel", "run-otel"), {"traceparent": traceparent})
        assert "RUN_FINISHED" in text and "Oslo: sunny" in text
        await eventually(lambda: _named(spans_of(trace_id), "invoke_agent"), what="the run's span ended")
    finally:
        await server.close()
    spans = spans_of(trace_id)
    (run,) = _named(spans, "invoke_agent")
    assert run.name == "invoke_agent LLMAgent"
    assert run.parent is not None and run.parent.span_id == CLIENT_SPAN and run.parent.is_remote
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "thread-otel"
    assert run.attributes["agui.run.id"] == "run-otel"
    assert "error.type" not in run.attributes
    chats = _named(spans, "chat ")
    assert [c.name for c in chats] == ["chat gpt-test-2026", "chat gpt-test-2026"]
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == run.context.span_id
        assert chat.kind.name == "CLIENT"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "gpt-test-2026"
        assert chat.attributes["gen_ai.response.model"] == "gpt-test-2026"
        assert chat.attributes["gen_ai.provider.name"] == "openai-compatible"
    assert (chats[0].attributes["gen_ai.usage.input_tokens"], chats[0].attributes["gen_ai.usage.output_tokens"]) == (31, 9)
    assert tuple(chats[0].attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert (chats[1].attributes["gen_ai.usage.input_tokens"], chats[1].attributes["gen_ai.usage.output_tokens"]) == (40, 3)
    assert tuple(chats[1].attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    (tool,) = _named(spans, "execute_tool")
    assert tool.name == "execute_tool get_weather"
    assert tool.parent is not None and tool.parent.span_id == run.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_oslo"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    # the provider got each chat span's context: same trace, the chat span as parent
    parents = [h.get("traceparent") for h in chat_server.headers]
    assert parents == [f"00-{trace_id:032x}-{c.context.span_id:016x}-01" for c in chats]
    assert chats[0].end_time <= tool.start_time and tool.end_time <= chats[1].start_time


async def test_trace_continues_into_a_remote_agui_agent(chat_server: ChatServer) -> None:
    """Requirement: the trace goes on into a remote AG-UI agent (SSEAgent sends traceparent): the
    remote gateway's invoke_agent span is in the client's trace, a child of the front gateway's."""
    sdk()
    trace_id, traceparent = _traceparent()
    remote = await start_sse_server(_agent(chat_server), options=RegistryOptions(tracing=True))
    front = await start_sse_server(SSEAgent(remote.url), options=RegistryOptions(tracing=True))
    try:
        text = await _post(front.url, _input("thread-remote", "run-front"), {"traceparent": traceparent})
        assert "Oslo: sunny" in text
        await eventually(lambda: len(_named(spans_of(trace_id), "invoke_agent")) == 2, what="both runs' spans")
    finally:
        await front.close()
        await remote.close()
    spans = spans_of(trace_id)
    # the front serves the remote agent inside the agent loop; the remote gateway runs the LLMAgent
    by_agent = {s.attributes["gen_ai.agent.name"]: s for s in _named(spans, "invoke_agent")}
    front_span, remote_span = by_agent["AgentLoop"], by_agent["LLMAgent"]
    assert front_span.parent is not None and front_span.parent.span_id == CLIENT_SPAN
    assert remote_span.parent is not None and remote_span.parent.is_remote
    assert remote_span.parent.span_id == front_span.context.span_id
    assert remote_span.attributes["agui.run.id"] == "run-front"  # SSEAgent keeps the run id
    assert remote_span.attributes["gen_ai.conversation.id"] == "thread-remote"
    assert _named(spans, "chat gpt-test-2026"), "the remote agent's model calls are in the same trace"


async def test_failed_run_marks_its_span_with_the_run_error_code() -> None:
    sdk()

    async def broken(input: Any) -> AsyncIterator[Any]:
        raise RuntimeError("boom")
        yield  # pragma: no cover

    server = await start_sse_server(broken, options=RegistryOptions(tracing=True))
    trace_id, traceparent = _traceparent()
    try:
        text = await _post(server.url, _input("t-broken", "r-broken"), {"traceparent": traceparent})
        assert "agent_error" in text
        await eventually(lambda: spans_of(trace_id), what="the run's span ended")
    finally:
        await server.close()
    (run,) = spans_of(trace_id)
    assert run.attributes["error.type"] == "agent_error"
    assert run.status.status_code.name == "ERROR"


async def test_untraced_gateway_and_client_without_traceparent() -> None:
    """Tracing off: no span, no traceparent sent on. A traced gateway without a client trace
    starts a new trace of its own (a root span)."""
    exporter, _ = sdk()
    assert OBSERVER.get() is None and trace_headers() == {}
    assert model_span(object()) is None and tool_span("t", "c") is None

    before = len(exporter.get_finished_spans())
    server = await start_sse_server(hello)
    try:
        await _post(server.url, _input("t-off", "r-off"), {"traceparent": _traceparent()[1]})
    finally:
        await server.close()
    assert not [s for s in exporter.get_finished_spans()[before:] if s.attributes.get("agui.run.id") == "r-off"]
    server = await start_sse_server(hello, options=RegistryOptions(tracing=True))
    root_run = f"r-root-{uuid.uuid4().hex}"  # the exporter is the process's: one run id per test
    try:
        await _post(server.url, _input("t-root", root_run))
        await eventually(lambda: [s for s in exporter.get_finished_spans() if s.attributes.get("agui.run.id") == root_run])
    finally:
        await server.close()
    (root,) = [s for s in exporter.get_finished_spans() if s.attributes.get("agui.run.id") == root_run]
    assert root.parent is None


async def test_run_and_event_counters_reach_otel_metrics_beside_prometheus() -> None:
    sdk()

    events_before = counter_total("agui.events.sent", **{"agui.transport": "sse"})
    runs_before = counter_total("agui.runs.ended", **{"agui.terminal": "RUN_FINISHED"})
    metrics = GatewayMetrics(otel=True)
    server = await start_sse_server(hello, metrics=metrics)
    try:
        for i in range(3):
            text = await _post(server.url, _input("t-m", f"r-m{i}"))
            assert text.count("data: ") == 5
        async with httpx.AsyncClient() as client:
            prom = (await client.get(server.url.rstrip("/") + "/metrics")).text
        await eventually(lambda: counter_total("agui.runs.ended", **{"agui.terminal": "RUN_FINISHED"}) - runs_before == 3)
    finally:
        await server.close()
    assert counter_total("agui.events.sent", **{"agui.transport": "sse"}) - events_before == 15
    assert 'agui_events_sent_total{transport="sse"} 15.0' in prom
    assert json.dumps("agui.runs.ended")  # the instrument names are the module docstring's
