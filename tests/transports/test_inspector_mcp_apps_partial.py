"""Tool input while the model types (issue 34): the gateway announces a tool's MCP app when the call
starts (CUSTOM ``agui_engine.mcp_apps.app``) and streams the arguments' operations from its one parse
(``agui_engine.mcp_apps.tool_input``); the inspector mounts the app at once and forwards them as
``ui/notifications/tool-input-partial``. Checked with the official app SDK (``@modelcontextprotocol/
ext-apps``, :mod:`tests.mcp_sdk_app_server`) in a real headless Chromium, against an in-process
gateway whose model holds the call open at a gate until the test has seen the partial input (no
timing): the app gets partial input before the call ends, then the whole input and the result; a call
the model never finishes (the stream fails) ends with ``ui/notifications/tool-cancelled``.

Each under both loops: ``LLMAgent`` (the MCP tool a server tool of the model) and ``AgentLoop`` in
front of a remote AG-UI agent on loopback that sends the same argument chunks (the MCP tool a client
tool of that agent, run by the loop); the last test compares their events without a browser.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import msgspec
import pytest

from agui_engine.adapters import MCPServer, mcp_connections
from agui_engine.demo.weather_model import message_role
from agui_engine.genui.mcp_apps import MCP_APP_ANNOUNCE_EVENT, MCP_APP_INPUT_EVENT
from agui_engine.llm import (
    Finish,
    LLMStreamItem,
    LLMTool,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
)
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.events import (
    CustomEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from agui_engine.transports import SSEAgent, run_agent, start_sse_server
from tests.mcp_apps_server import running_app_server
from tests.mcp_sdk_app_server import SDK_BUNDLE
from tests.transports.test_inspector import DEADLINE_MS, browser, open_inspector  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(180)  # a subprocess, Chromium and an MCP session on a busy machine


class GatedModel:
    """Calls ``show_sdk_probe`` and stops in the middle of its arguments until ``gate`` is set; then
    finishes them (or, ``fail``, ends the stream with an error). After the tool's result: "shown"."""

    def __init__(self, gate: asyncio.Event, *, fail: bool = False) -> None:
        self.gate = gate
        self.fail = fail

    def complete(self, messages: Sequence[Any], tools: Sequence[LLMTool], tool_choice: ToolChoice = "auto", *,
                 parallel_tool_calls: bool = True, max_output_tokens: int | None = None) -> AsyncIterator[LLMStreamItem]:
        return self._stream(any(message_role(m) == "tool" for m in messages))

    async def _stream(self, answered: bool) -> AsyncIterator[LLMStreamItem]:
        if answered:
            yield TextDelta(text="shown")
            yield Finish(reason="stop")
            return
        yield ToolCallStart(index=0, id="call-probe", name="show_sdk_probe")
        for delta in BEFORE_GATE:
            yield ToolCallArgsDelta(index=0, delta=delta)
        await self.gate.wait()
        if self.fail:
            yield StreamError(message="the model stopped", code="model_failed")
            return
        for delta in AFTER_GATE:
            yield ToolCallArgsDelta(index=0, delta=delta)
        yield ToolCallEnd(index=0)
        yield Finish(reason="tool_calls")


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    if not SDK_BUNDLE.exists():
        message = f"{SDK_BUNDLE} is missing: run tests/install-deps.sh (npm ci in tests/js-ext-apps)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with running_app_server("http", "tests.mcp_sdk_app_server") as url:
        yield url


def _view(page: Any) -> Any:
    proxy = next(f for f in page.frames if f.parent_frame is page.main_frame and "mcp-app-sandbox" in f.url)
    return next(f for f in page.frames if f.parent_frame is proxy)


#: The model's argument fragments up to the gate, and after it (the GatedModel's, and the gated
#: remote agent's: the same chunks under both loops).
BEFORE_GATE = ('{"count": 7, "note": "typed', " so far")
AFTER_GATE = (' and the rest"}',)


async def gated_remote_agent(gate: asyncio.Event, input: RunAgentInput, *, fail: bool = False) -> AsyncIterator[Event]:
    """A remote AG-UI agent (served on loopback) that does what :class:`GatedModel` does: calls
    ``show_sdk_probe`` (a client tool to it: the AgentLoop in front runs it), stops mid-arguments
    until ``gate`` is set, then finishes them (``fail``: raises, its stream ends with RUN_ERROR);
    once the tool's result is in its input, says "shown"."""
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    if any(isinstance(m, ToolMessage) for m in input.messages):
        yield TextMessageStartEvent(message_id="m-shown", role="assistant")
        yield TextMessageContentEvent(message_id="m-shown", delta="shown")
        yield TextMessageEndEvent(message_id="m-shown")
    else:
        yield ToolCallStartEvent(tool_call_id="call-probe", tool_call_name="show_sdk_probe", parent_message_id="m-1")
        for delta in BEFORE_GATE:
            yield ToolCallArgsEvent(tool_call_id="call-probe", delta=delta)
        await gate.wait()
        if fail:
            raise RuntimeError("the model stopped")
        for delta in AFTER_GATE:
            yield ToolCallArgsEvent(tool_call_id="call-probe", delta=delta)
        yield ToolCallEndEvent(tool_call_id="call-probe")
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


@asynccontextmanager
async def gated_agent(kind: str, mcp_url: str, gate: asyncio.Event, fail: bool = False) -> AsyncIterator[Agent]:
    """``llm``: LLMAgent over :class:`GatedModel`; ``loop``: AgentLoop (the MCP server's tools run by
    the loop) in front of :func:`gated_remote_agent` served by a second gateway, read over SSE."""
    if kind == "llm":
        yield LLMAgent(GatedModel(gate, fail=fail), mcp_servers=[MCPServer(url=mcp_url)])
        return
    upstream = await start_sse_server(partial(gated_remote_agent, gate, fail=fail), port=0)
    try:
        yield AgentLoop(SSEAgent(upstream.url), mcp_servers=[MCPServer(url=mcp_url)])
    finally:
        await upstream.close()


def app_input_so_far(events: Sequence[Event]) -> dict[str, Any]:
    """The arguments the host builds from the ``tool_input`` operations (flat: ``add`` / ``replace``
    set a member, ``append`` grows its string; the probe's arguments have no nesting)."""
    value: dict[str, Any] = {}
    for event in events:
        if isinstance(event, CustomEvent) and event.name == MCP_APP_INPUT_EVENT:
            for op in event.value["operations"]:
                key = op["path"][1:]
                value[key] = value[key] + op["value"] if op["op"] == "append" else op["value"]
    return value


async def _app_with_partial_input(browser: Any, agent: Agent) -> tuple[Any, Any, Any]:  # noqa: F811
    server = await start_sse_server(agent, port=0, inspector=True)
    page = await open_inspector(browser, server.url)
    await page.fill("#message", "show the probe")
    await page.press("#message", "Enter")
    # the app is there while the model is still typing its arguments (the gate holds the call open)
    await page.frame_locator(".mcp-app iframe").frame_locator("iframe").locator(
        "body[data-connected='1']").wait_for(timeout=DEADLINE_MS)
    view = _view(page)
    await view.wait_for_function("() => window.probe.partials.some(p => p.note === 'typed so far')", timeout=DEADLINE_MS)
    return server, page, view


@pytest.mark.parametrize("kind", ["llm", "loop"])
async def test_the_app_gets_partial_input_before_the_call_ends_then_the_input_and_the_result(
    browser: Any, mcp_url: str, kind: str  # noqa: F811 - the fixture
) -> None:
    gate = asyncio.Event()
    async with gated_agent(kind, mcp_url, gate) as agent:
        server, page, view = await _app_with_partial_input(browser, agent)
        try:
            probe = await view.evaluate("window.probe")
            assert probe["input"] is None and probe["result"] is None  # the call has not ended
            # the app knows its call: hostContext.toolInfo, the tool as the server lists it
            tool_info = probe["host"]["context"]["toolInfo"]
            assert tool_info["id"] == "call-probe" and tool_info["tool"]["name"] == "show_sdk_probe"
            assert set(tool_info["tool"]["inputSchema"]["properties"]) == {"count", "note"}
            assert probe["partials"][-1] == {"count": 7, "note": "typed so far"}
            assert all(p.get("count") in (None, 7) for p in probe["partials"])
            gate.set()
            await view.wait_for_function("() => window.probe.result !== null", timeout=DEADLINE_MS)
            probe = await view.evaluate("window.probe")
            assert probe["input"] == {"count": 7, "note": "typed so far and the rest"}
            assert probe["result"]["structuredContent"] == {"count": 7}
            order = probe["order"]
            # partial input first, then the whole input once, then the result; no partial after the input
            assert order[0] == "tool-input-partial" and order[-2:] == ["tool-input", "tool-result"], order
            assert set(order[:-2]) == {"tool-input-partial"}, order
            # one app for the announcement and the middleware's activity after the result
            assert await page.eval_on_selector_all(".mcp-app", "els => els.length") == 1
            names = await page.evaluate("window.__inspector.rows.filter(r => r.type === 'CUSTOM').map(r => r.name)")
            assert names[0] == "agui_engine.mcp_apps.app" and "agui_engine.mcp_apps.tool_input" in names, names
            assert page.errors == []
        finally:
            await server.close()
            await mcp_connections().aclose()


@pytest.mark.parametrize("kind", ["llm", "loop"])
async def test_a_call_that_never_ends_is_cancelled_for_its_app(browser: Any, mcp_url: str, kind: str) -> None:  # noqa: F811
    gate = asyncio.Event()
    async with gated_agent(kind, mcp_url, gate, fail=True) as agent:
        server, page, view = await _app_with_partial_input(browser, agent)
        try:
            gate.set()
            await view.wait_for_function("() => window.probe.cancelled !== null", timeout=DEADLINE_MS)
            probe = await view.evaluate("window.probe")
            assert "the run failed" in probe["cancelled"]["reason"] and probe["input"] is None
            assert probe["result"] is None and probe["order"][-1] == "tool-cancelled"
            assert await page.get_attribute(".mcp-app", "data-tool-state") == "cancelled"
        finally:
            await server.close()
            await mcp_connections().aclose()


def _app_events(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [msgspec.to_builtins(e) for e in events if isinstance(e, CustomEvent) and e.name.startswith("agui_engine.mcp_apps.")]


async def test_the_agent_loop_streams_partial_input_as_llm_agent_does_for_the_same_chunks(mcp_url: str) -> None:
    """Without a browser: the events themselves. Under AgentLoop (a remote agent on loopback whose
    call arrives in chunks) the app is announced at TOOL_CALL_START and each fragment's operations
    follow its TOOL_CALL_ARGS while the remote agent is held mid-arguments (so before the call's
    END), and the mcp_apps events are equal to LLMAgent's for the same chunks."""
    runs: dict[str, list[Event]] = {}
    for kind in ("llm", "loop"):
        gate = asyncio.Event()
        events: list[Event] = []
        async with gated_agent(kind, mcp_url, gate) as agent:
            try:
                run = RunAgentInput(thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="probe")])
                async for event in run_agent(agent, run):
                    events.append(event)
                    if not gate.is_set() and app_input_so_far(events) == {"count": 7, "note": "typed so far"}:
                        # the producer waits at the gate: these came before the call could end
                        assert not any(isinstance(e, ToolCallEndEvent) for e in events), kind
                        gate.set()
            finally:
                await mcp_connections().aclose()
        assert gate.is_set(), f"{kind}: no partial input while the call was open"
        runs[kind] = events
        types = [e.type for e in events]
        assert types[-1] == "RUN_FINISHED" and "ACTIVITY_SNAPSHOT" in types, (kind, types)
        start = types.index("TOOL_CALL_START")
        announce = events[start + 1]
        assert isinstance(announce, CustomEvent) and announce.name == MCP_APP_ANNOUNCE_EVENT, kind
        assert app_input_so_far(events) == {"count": 7, "note": "typed so far and the rest"}, kind
    assert _app_events(runs["loop"]) == _app_events(runs["llm"])
    assert len(_app_events(runs["loop"])) >= 4  # the announcement and one input event per fragment
