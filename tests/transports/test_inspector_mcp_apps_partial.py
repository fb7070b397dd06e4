"""Tool input while the model types (issue 34): the gateway announces a tool's MCP app when the call
starts (CUSTOM ``agui_engine.mcp_apps.app``) and streams the arguments' operations from its one parse
(``agui_engine.mcp_apps.tool_input``); the inspector mounts the app at once and forwards them as
``ui/notifications/tool-input-partial``. Checked with the official app SDK (``@modelcontextprotocol/
ext-apps``, :mod:`tests.mcp_sdk_app_server`) in a real headless Chromium, against an in-process
gateway whose model holds the call open at a gate until the test has seen the partial input (no
timing): the app gets partial input before the call ends, then the whole input and the result; a call
the model never finishes (the stream fails) ends with ``ui/notifications/tool-cancelled``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from agui_engine.adapters import MCPServer, mcp_connections
from agui_engine.demo.weather_model import message_role
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
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.transports import start_sse_server
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
        yield ToolCallArgsDelta(index=0, delta='{"count": 7, "note": "typed')
        yield ToolCallArgsDelta(index=0, delta=" so far")
        await self.gate.wait()
        if self.fail:
            yield StreamError(message="the model stopped", code="model_failed")
            return
        yield ToolCallArgsDelta(index=0, delta=' and the rest"}')
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


async def _app_with_partial_input(browser: Any, mcp_url: str, gate: asyncio.Event, fail: bool) -> tuple[Any, Any, Any]:  # noqa: F811
    server = await start_sse_server(LLMAgent(GatedModel(gate, fail=fail), mcp_servers=[MCPServer(url=mcp_url)]),
                                    port=0, inspector=True)
    page = await open_inspector(browser, server.url)
    await page.fill("#message", "show the probe")
    await page.press("#message", "Enter")
    # the app is there while the model is still typing its arguments (the gate holds the call open)
    await page.frame_locator(".mcp-app iframe").frame_locator("iframe").locator(
        "body[data-connected='1']").wait_for(timeout=DEADLINE_MS)
    view = _view(page)
    await view.wait_for_function("() => window.probe.partials.some(p => p.note === 'typed so far')", timeout=DEADLINE_MS)
    return server, page, view


async def test_the_app_gets_partial_input_before_the_call_ends_then_the_input_and_the_result(
    browser: Any, mcp_url: str  # noqa: F811 - the fixture
) -> None:
    gate = asyncio.Event()
    server, page, view = await _app_with_partial_input(browser, mcp_url, gate, fail=False)
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


async def test_a_call_that_never_ends_is_cancelled_for_its_app(browser: Any, mcp_url: str) -> None:  # noqa: F811
    gate = asyncio.Event()
    server, page, view = await _app_with_partial_input(browser, mcp_url, gate, fail=True)
    try:
        gate.set()
        await view.wait_for_function("() => window.probe.cancelled !== null", timeout=DEADLINE_MS)
        probe = await view.evaluate("window.probe")
        assert "the run failed" in probe["cancelled"]["reason"] and probe["input"] is None and probe["result"] is None
        assert probe["order"][-1] == "tool-cancelled"
        assert await page.get_attribute(".mcp-app", "data-tool-state") == "cancelled"
    finally:
        await server.close()
        await mcp_connections().aclose()
