"""The inspector's MCP Apps host against the official app SDK (``@modelcontextprotocol/ext-apps`` 2.0.4,
the app of :mod:`tests.mcp_sdk_app_server`) in a real headless Chromium (issue 34).

Every request the SDK's ``App`` can send gets its answer per MCP Apps 2026-01-26, with the person in
control: ``ui/initialize`` (capabilities, context), ``tools/call`` and ``resources/read`` (through the
gateway's proxy), ``ui/open-link`` (asked first: Cancel -> -32000, Open -> a new tab), ``ui/message``
(a user turn in the message box: Discard -> -32000, Send -> the next run's user message),
``ui/update-model-context`` (the next run's ``context``), ``ui/request-display-mode`` (fullscreen;
a mode the app did not declare -> the current mode), ``ui/notifications/size-changed``, log lines,
``ui/download-file``, ``resources/list`` (not offered: -32601), sampling (the SDK itself refuses: no
capability), and ``ui/notifications/request-teardown`` (-> ``ui/resource-teardown``, answered, the
frame removed). The app got its tool's input and result.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.mcp_apps_server import running_app_server
from tests.mcp_sdk_app_server import SDK_APP_URI, SDK_BUNDLE
from tests.transports.test_inspector import DEADLINE_MS, browser, open_inspector  # noqa: F401 - the fixture
from tests.transports.test_inspector_mcp_apps import TOKEN, running_gateway

pytestmark = pytest.mark.timeout(180)  # two subprocesses, Chromium and a dozen round trips on a busy machine


def _need_sdk() -> None:
    if SDK_BUNDLE.exists():
        return
    message = f"{SDK_BUNDLE} is missing: run tests/install-deps.sh (npm ci in tests/js-ext-apps)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def gateway() -> Iterator[str]:
    _need_sdk()
    with running_app_server("http", "tests.mcp_sdk_app_server") as mcp_url, \
            running_gateway(f"probe={mcp_url}") as url:
        yield url


def _view(page: Any) -> Any:
    proxy = next(f for f in page.frames if f.parent_frame is page.main_frame and "mcp-app-sandbox" in f.url)
    return next(f for f in page.frames if f.parent_frame is proxy)


async def _run_done(page: Any, runs: int) -> None:
    await page.wait_for_function(
        f"() => window.__inspector.rows.filter(r => r.type === 'RUN_FINISHED' || r.type === 'RUN_ERROR').length >= {runs}",
        timeout=DEADLINE_MS)


async def test_every_request_of_the_sdk_app_is_answered_per_spec_with_the_user_in_control(
    browser: Any, gateway: str  # noqa: F811 - the fixture
) -> None:
    page = await open_inspector(browser, gateway)
    bodies: list[dict[str, Any]] = []
    page.on("request", lambda r: bodies.append(json.loads(r.post_data)) if r.method == "POST" and r.url == gateway
            and "__proxiedMCPRequest" not in (r.post_data or "") else None)
    await page.fill("#token", TOKEN)
    await page.fill("#message", "show sdk probe 7")
    await page.press("#message", "Enter")
    await page.wait_for_selector(".mcp-app iframe", timeout=DEADLINE_MS)
    await page.frame_locator(".mcp-app iframe").frame_locator("iframe").locator(
        "body[data-connected='1']").wait_for(timeout=DEADLINE_MS)
    view = _view(page)
    await view.wait_for_function("() => window.probe.result !== null", timeout=DEADLINE_MS)
    probe = await view.evaluate("window.probe")
    # ui/initialize: the host's info, capabilities and context
    host = probe["host"]
    assert host["version"]["name"] == "agui-engine inspector"
    assert {"openLinks", "serverTools", "serverResources", "logging", "updateModelContext", "message"} <= set(host["capabilities"])
    assert host["context"]["displayMode"] == "inline" and host["context"]["availableDisplayModes"] == ["inline", "fullscreen", "pip"]
    # the tool's input, then its result
    assert probe["input"]["count"] == 7 and probe["result"]["structuredContent"] == {"count": 7}
    await _run_done(page, 1)

    async def call(method: str, params: Any = None) -> dict[str, Any]:
        return await view.evaluate("([m, p]) => window.call(m, p)", [method, params])

    # tools/call and resources/read through the proxy
    echoed = await call("callServerTool", {"name": "echo", "arguments": {"text": "hi"}})
    assert echoed["result"]["content"][0]["text"] == "hi"
    read = await call("readServerResource", {"uri": SDK_APP_URI})
    assert read["result"]["contents"][0]["mimeType"] == "text/html;profile=mcp-app"
    # not offered by this host: -32601 (resources/list, ui/download-file); sampling: the SDK refuses itself
    listed = await call("listServerResources", {})
    assert listed["code"] == -32601, listed
    download = await call("downloadFile", {"contents": [{"type": "resource", "resource": {"uri": "file:///x.txt", "text": "x"}}]})
    assert download["code"] == -32601, download
    sampling = await call("createSamplingMessage", {"messages": [], "maxTokens": 1})
    assert "sampling" in sampling["error"], sampling
    # a log line goes to the server through the proxy
    assert await call("sendLog", {"level": "info", "data": "probe log"}) == {"result": None}

    # ui/open-link: the person is asked; Cancel -> -32000, Open -> a new tab on that URL
    pending = asyncio.ensure_future(call("openLink", {"url": "https://example.test/docs"}))
    await page.click(".mcp-app .app-prompt [data-answer='false']")
    denied = await pending
    assert denied["code"] == -32000 and "denied" in denied["error"], denied
    pending = asyncio.ensure_future(call("openLink", {"url": "https://example.test/docs"}))
    async with page.context.expect_page() as popup:  # the tab opens (offline here: it need not load)
        await page.click(".mcp-app .app-prompt [data-answer='true']")
    await (await popup.value).close()
    assert await pending == {"result": {}}
    not_web = await call("openLink", {"url": "javascript:alert(1)"})
    assert not_web["code"] == -32000, not_web

    # ui/update-model-context: kept; the next run's context carries it
    context = {"content": [{"type": "text", "text": "the probe saw 7"}], "structuredContent": {"seen": 7}}
    assert await call("updateModelContext", context) == {"result": {}}

    # ui/message: a user turn in the message box; Discard -> -32000; Send -> the next run's user message
    pending = asyncio.ensure_future(call("sendMessage", {"role": "user", "content": [{"type": "text", "text": "dropped"}]}))
    await page.wait_for_function("document.querySelector('#message').value === 'dropped'", timeout=DEADLINE_MS)
    await page.click("#discard")
    assert (await pending)["code"] == -32000
    pending = asyncio.ensure_future(call("sendMessage", {"role": "user", "content": [{"type": "text", "text": "tell me more"}]}))
    await page.wait_for_function("document.querySelector('#message').dataset.fromApp === 'ui://sdk-probe/app.html'",
                                 timeout=DEADLINE_MS)
    assert await page.input_value("#message") == "tell me more"
    await page.click("#send")
    assert await pending == {"result": {}}
    await _run_done(page, 2)
    sent = bodies[-1]
    assert sent["messages"][-1]["content"] == "tell me more" and sent["messages"][-1]["role"] == "user"
    assert [json.loads(c["value"]) for c in sent["context"]] == [context], sent["context"]
    assert SDK_APP_URI in sent["context"][0]["description"]

    # ui/request-display-mode: fullscreen (declared) -> fullscreen and host-context-changed; pip (not declared) -> the current mode
    assert await call("requestDisplayMode", {"mode": "fullscreen"}) == {"result": {"mode": "fullscreen"}}
    assert await page.get_attribute(".mcp-app", "data-display-mode") == "fullscreen"
    box = await page.eval_on_selector(".mcp-app iframe", "f => f.getBoundingClientRect().height")
    assert box > 500  # the frame fills the window (900 px high)
    assert await call("requestDisplayMode", {"mode": "pip"}) == {"result": {"mode": "fullscreen"}}
    await view.wait_for_function("() => window.probe.contexts.some(c => c.displayMode === 'fullscreen')", timeout=DEADLINE_MS)
    await page.click(".mcp-app .app-controls [data-mode='inline']")  # the person takes it back
    await view.wait_for_function("() => window.probe.contexts.some(c => c.displayMode === 'inline')", timeout=DEADLINE_MS)
    # ui/notifications/size-changed: the frame's height follows (inline)
    await call("sendSizeChanged", {"width": 300, "height": 333})
    await page.wait_for_function("document.querySelector('.mcp-app iframe').style.height === '333px'", timeout=DEADLINE_MS)

    # ui/notifications/request-teardown -> ui/resource-teardown, answered, then the frame goes
    await call("requestTeardown", {})
    await page.wait_for_selector(".mcp-app[data-state='closed']", timeout=DEADLINE_MS)
    assert await page.query_selector(".mcp-app iframe") is None
    methods = await page.eval_on_selector_all(".mcp-app .app-requests li", "els => els.map(e => [e.dataset.method, e.dataset.status])")
    assert ["notifications/message", "ok"] in methods and ["ui/notifications/request-teardown", "ok"] in methods, methods
    assert ["ui/resource-teardown", "ok"] in methods, methods  # the SDK's onteardown answered
    assert page.errors == []
