"""MCP Apps in the inspector, in a real headless Chromium, against ``agui-engine serve --mcp URL`` (a
subprocess, bearer token on) and the tests' own MCP server (FastMCP over streamable HTTP, a
subprocess too).

A person types "show counter 3"; the embedded model calls the MCP tool ``show_counter``; the page
reads the app's ``ui://`` resource through the gateway's proxy (with the page's token), draws it in a
``sandbox="allow-scripts"`` iframe under a CSP from the resource's ``_meta.ui.csp``, and the app
shows the tool's result; its button calls ``increment`` back through the proxy; a resource no run
showed and one that is not ``ui://`` are refused to it by the gateway. Script in the app
cannot read the inspector's DOM, cookies or storage. Resources that are not apps are refused with
a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_apps_server import APP_CSP, running_app_server
from tests.transports.test_inspector import DEADLINE_MS, browser, open_inspector  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "inspector-test-token"


@pytest.fixture(scope="module")
def app_server_url() -> Iterator[str]:
    with running_app_server() as url:
        yield url


@contextmanager
def running_gateway(mcp: str, token: str = TOKEN) -> Iterator[str]:
    """``agui-engine serve --port 0 --pace 0 --mcp <mcp>`` with bearer ``token``; yields its URL."""
    env = {**os.environ, "AGUI_AUTH_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--pace", "0",
                             "--mcp", mcp, "--mcp-connect-timeout", "120", "--no-access-log"],  # any load
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            if line.startswith("serving on "):
                url = line.split("serving on ", 1)[1].strip()
                break
        assert url, "agui-engine serve did not start"
        yield url if url.endswith("/") else url + "/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def gateway(app_server_url: str) -> Iterator[str]:
    """``agui-engine serve --mcp <the app server>`` with a bearer token; its URL."""
    with running_gateway(f"counter={app_server_url}") as url:
        yield url


async def _ask(page: Any, message: str) -> None:
    await page.fill("#token", TOKEN)
    await page.fill("#message", message)
    await page.press("#message", "Enter")
    await page.wait_for_function("() => document.querySelectorAll('.mcp-app').length > 0", timeout=DEADLINE_MS)


async def test_the_app_appears_calls_back_through_the_proxy_and_cannot_reach_the_page(
    browser: Any, gateway: str, tmp_path: Path  # noqa: F811 - the fixture
) -> None:
    page = await open_inspector(browser, gateway)
    await page.context.add_cookies([{"name": "inspector_secret", "value": "s3cr3t", "url": gateway}])
    await page.evaluate("() => { localStorage.setItem('inspector_secret', 's3cr3t'); }")
    await _ask(page, "show counter 3")
    frame_el = await page.wait_for_selector(".mcp-app iframe", timeout=DEADLINE_MS)
    assert await frame_el.get_attribute("sandbox") == "allow-scripts"
    csp = await frame_el.get_attribute("data-csp")
    assert "default-src 'none'" in csp and f"connect-src {APP_CSP['connectDomains'][0]}" in csp
    assert APP_CSP["resourceDomains"][0] in csp
    # the app is drawn inside the sandbox proxy (a page of its own, opaque origin): the frame in its frame
    frame = page.frame_locator(".mcp-app iframe").frame_locator("iframe")
    # the app got the tool's result (ui/notifications/tool-result) and its input
    await frame.locator("#count").filter(has_text="counter at 3").wait_for(timeout=DEADLINE_MS)
    body = frame.locator("body")
    assert await body.get_attribute("data-tool-input") == '{"start":3}'
    assert '"agui-engine inspector"' in (await body.get_attribute("data-host") or "")
    # the button calls a second tool (app-only, never offered to the model) through the proxy
    await frame.locator("#inc").click()
    await frame.locator("#count").filter(has_text="counter at 4").wait_for(timeout=DEADLINE_MS)
    requests = await page.eval_on_selector_all(".mcp-app .app-requests li",
                                               "els => els.map(e => [e.dataset.method, e.dataset.status])")
    assert requests == [["resources/read", "ok"], ["tools/call", "ok"]]
    # the gateway's proxy reads only the ui:// resources this principal's runs showed: the app asks for
    # another of its server's resources (ui://counter/plain.html: no run showed it) and for one that is
    # not ui:// (data://notes), and is refused both (JSON-RPC -32603 with the gateway's reason)
    [app] = [f for f in page.frames if f.parent_frame is not None and f.parent_frame.parent_frame is not None]
    refused = await app.evaluate("""async () => [
        await send("resources/read", {uri: "ui://counter/plain.html"}),
        await send("resources/read", {uri: "data://notes"})]""")
    assert refused == [
        {"error": {"code": -32603, "message": "Error: MCP resource not shown in this principal's runs (the UI "
                                              "proxy reads only the ui:// resources of apps they showed)"}},
        {"error": {"code": -32603, "message": "Error: MCP UI proxy reads ui:// resources only"}}], refused
    # the app's script reached neither the page's DOM, nor its cookies, nor its storage
    probe = (await frame.locator("#probe").text_content() or "").split("\n")
    assert probe == ["parent-dom:blocked", "cookie:blocked", "storage:blocked", "origin:null"], probe
    assert "s3cr3t" not in await frame.locator("body").inner_html()
    # the CSP holds: a connection to an undeclared origin is refused by it, not merely failed
    await page.wait_for_function(
        "() => document.querySelector('.mcp-app iframe').contentDocument === null", timeout=DEADLINE_MS)
    await body.and_(frame.locator("[data-fetch-failed='yes']")).wait_for(timeout=DEADLINE_MS)
    assert (await body.get_attribute("data-csp-blocked") or "").startswith("http://127.0.0.1:9")
    await page.screenshot(path=str(tmp_path / "mcp-app.png"), full_page=True)
    print(f"screenshot: {tmp_path / 'mcp-app.png'}")
    assert page.errors == []


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("show plain", 'refused: ui://counter/plain.html has MIME type "text/html", not text/html;profile=mcp-app'),
        ("show notes", 'refused: the resource "data://notes" is not a ui:// resource'),
    ],
)
async def test_a_resource_that_is_not_an_app_is_refused(
    browser: Any, gateway: str, message: str, error: str  # noqa: F811 - the fixture
) -> None:
    page = await open_inspector(browser, gateway)
    await _ask(page, message)
    await page.wait_for_selector(".mcp-app[data-state='refused']", timeout=DEADLINE_MS)
    assert await page.text_content(".mcp-app .app-error") == error
    assert await page.query_selector(".mcp-app iframe") is None


async def test_the_csp_is_built_from_declared_origins_only(browser: Any, gateway: str) -> None:  # noqa: F811
    page = await open_inspector(browser, gateway)
    built = await page.evaluate("""async () => {
        const m = await import("./static/mcp-apps.js");
        return [m.appCSP({}), m.appCSP({connectDomains: ["https://api.x.test", "https://a.test; script-src *",
                                                         "*", "javascript:alert(1)", 7],
                                        resourceDomains: ["https://*.cdn.test:8443"],
                                        frameDomains: ["https://frames.test"], baseUriDomains: ["'self'"]}),
                m.withCSP("<!DOCTYPE html><p>x</p>", "default-src 'none'"), m.withCSP("<p>x</p>", 'a "b"')];
    }""")
    empty, declared, with_doctype, without = built
    assert empty["dropped"] == [] and "connect-src 'none'" in empty["policy"] and "frame-src 'none'" in empty["policy"]
    policy = declared["policy"].split("; ")
    assert "connect-src https://api.x.test" in policy
    assert "script-src 'unsafe-inline' https://*.cdn.test:8443" in policy
    assert "frame-src https://frames.test" in policy and "base-uri 'none'" in policy
    assert declared["dropped"] == ['connectDomains: "https://a.test; script-src *"', 'connectDomains: "*"',
                                   'connectDomains: "javascript:alert(1)"', "connectDomains: 7",
                                   "baseUriDomains: \"'self'\""]
    assert with_doctype == ('<!DOCTYPE html><meta http-equiv="Content-Security-Policy" '
                            "content=\"default-src 'none'\"><p>x</p>")
    assert without == '<meta http-equiv="Content-Security-Policy" content="a &quot;b&quot;"><p>x</p>'
