"""MCP Apps for applications (issue 34): a page of its own that imports only ``agui-engine.js`` from the
gateway, runs a conversation with ``runSSE`` and feeds every event to ``McpAppHost``, in a real headless
Chromium, against ``agui-engine serve --mcp`` (bearer token on) and the tests' counter app server.

The application decides what the person is asked (its own ``confirmLink`` and ``message`` hooks); the
app is drawn behind the gateway's sandbox proxy, gets its tool's input and result, and its button's
``tools/call`` goes through the gateway's proxy with the application's token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.mcp_apps_server import running_app_server
from tests.transports.test_inspector import DEADLINE_MS, browser  # noqa: F401 - the fixture
from tests.transports.test_inspector_mcp_apps import TOKEN, running_gateway

APPLICATION = """<!doctype html>
<html><head><meta charset="utf-8"><title>an application</title></head>
<body><div id="apps"></div>
<script type="module">
import { McpAppHost, ThreadStore, runSSE } from "./static/agui-engine.js";
const headers = () => ({ Authorization: "Bearer %TOKEN%" });
window.asked = [];
const host = new McpAppHost(document.getElementById("apps"), {
  endpoint: "./", headers, hostInfo: { name: "an application", version: "1" },
  confirmLink: async (url) => { window.asked.push(url); return false; },
  message: async (text) => { window.asked.push(text); return true; },
});
window.host = host;
const store = new ThreadStore();
const input = { threadId: "t1", runId: "r1", tools: [], context: [], state: {}, forwardedProps: {},
                messages: [{ id: "u1", role: "user", content: "show counter 3" }] };
runSSE("./", input, store, { headers: headers(), onFrame: ({ event }) => host.event(event) })
  .then((r) => { document.body.dataset.run = r.terminal ? "done" : "cut"; },
        (e) => { document.body.dataset.run = "error: " + e.message; });
</script></body></html>
"""


@pytest.fixture
def gateway() -> Iterator[str]:
    with running_app_server() as mcp_url, running_gateway(f"counter={mcp_url}") as url:
        yield url


async def test_an_application_hosts_the_app_with_agui_engine_js_alone(browser: Any, gateway: str) -> None:  # noqa: F811
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # the application's page, on the gateway's origin (as an application served beside it would be)
    await page.route(f"{gateway}app.html", lambda route: route.fulfill(
        status=200, content_type="text/html", body=APPLICATION.replace("%TOKEN%", TOKEN)))
    await page.goto(f"{gateway}app.html")
    await page.wait_for_selector("body[data-run='done']", timeout=DEADLINE_MS)
    proxy = await page.wait_for_selector(".mcp-app iframe", timeout=DEADLINE_MS)
    assert (await proxy.get_attribute("src") or "").endswith("static/mcp-app-sandbox.html")
    app = page.frame_locator(".mcp-app iframe").frame_locator("iframe")
    await app.locator("#count").filter(has_text="counter at 3").wait_for(timeout=DEADLINE_MS)
    assert await app.locator("body").get_attribute("data-tool-input") == '{"start":3}'
    assert '"an application"' in (await app.locator("body").get_attribute("data-host") or "")
    await app.locator("#inc").click()
    await app.locator("#count").filter(has_text="counter at 4").wait_for(timeout=DEADLINE_MS)
    assert await page.evaluate("new Set(window.host.apps.values()).size") == 1
    # the application's own hooks decide: the link is refused, the message accepted
    view = next(f for f in page.frames
                if f.parent_frame is not None and f.parent_frame.parent_frame is page.main_frame)
    denied = await view.evaluate("send('ui/open-link', {url: 'https://example.test/'})")
    assert denied["error"]["code"] == -32000, denied
    sent = await view.evaluate("send('ui/message', {role: 'user', content: [{type: 'text', text: 'hello'}]})")
    assert sent == {}
    assert await page.evaluate("window.asked") == ["https://example.test/", "hello"]
    assert errors == []
