"""A hostile MCP app against the inspector, in a real headless Chromium (issue 30, points 1 and 2).

The inspector is opened the way ``agui-engine demo --inspect`` links it, with the bearer token in the
URL's fragment; a gateway (``agui-engine serve --mcp``, a subprocess, auth on) offers the tool of
:mod:`tests.mcp_hostile_app_server`, whose app looks for the token in everything a framed document can
read (``baseURI``, ``document.referrer``, ``name``, ``location``, every ``postMessage`` it gets) and
tries every way out to a second loopback server, the trap (a raw TCP listener here, so even a bare
connection counts): fetch, image, WebSocket, beacon, popup, form, prefetch/preconnect, CSS, navigating
the top page, its parent (the sandbox proxy), and finally its own frame. The trap must receive
nothing, the token must appear nowhere the app can read, and the app's navigation must be refused.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.mcp_apps_server import running_app_server
from tests.transports.test_inspector import DEADLINE_MS, browser, open_inspector  # noqa: F401 - the fixture
from tests.transports.test_inspector_mcp_apps import running_gateway

TOKEN = "hostile-test-bearer-0a1b2c3d4e5f"


class Trap:
    """A loopback TCP listener that records every connection made to it (and its first bytes)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(4096) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def trap() -> Iterator[Trap]:
    t = Trap()
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def gateway(trap: Trap) -> Iterator[str]:
    with running_app_server("http", "tests.mcp_hostile_app_server", (trap.url,)) as mcp_url, \
            running_gateway(f"hostile={mcp_url}", TOKEN) as url:
        yield url


async def _open_with_fragment(browser: Any, gateway: str) -> Any:  # noqa: F811 - the fixture
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{gateway}inspect#token={TOKEN}")
    await page.wait_for_function("window.__inspector && window.__inspector.ready", timeout=DEADLINE_MS)
    page.errors = errors
    return page


def _view(page: Any) -> Any:
    """The app's own frame: the frame inside the sandbox proxy's frame."""
    proxy = next(f for f in page.frames if f.parent_frame is page.main_frame and "mcp-app-sandbox" in f.url)
    return next(f for f in page.frames if f.parent_frame is proxy)


async def test_the_fragment_leaves_the_url_before_anything_mounts_and_the_token_stays_in_memory(
    browser: Any, gateway: str  # noqa: F811 - the fixture
) -> None:
    page = await _open_with_fragment(browser, gateway)
    assert TOKEN not in page.url and "#" not in page.url
    assert await page.evaluate("location.hash") == ""
    assert await page.evaluate("document.baseURI") == f"{gateway}inspect"
    assert await page.input_value("#token") == TOKEN  # kept in memory: the field's value, no attribute
    assert TOKEN not in await page.content()
    # Back does not bring it back: the entry itself was rewritten (Back leaves the page: the blank tab)
    await page.go_back()
    assert page.url == "about:blank"


async def test_a_hostile_app_gets_no_token_and_reaches_no_other_loopback_server(
    browser: Any, gateway: str, trap: Trap  # noqa: F811 - the fixture
) -> None:
    page = await _open_with_fragment(browser, gateway)
    await page.fill("#message", "show hostile")
    await page.press("#message", "Enter")  # the run needs the token: it was kept
    view = page.frame_locator(".mcp-app iframe").frame_locator("iframe")
    await view.locator("body[data-done='1']").wait_for(timeout=DEADLINE_MS)
    # the app initialized through the proxy and got its tool's input and result
    await page.wait_for_function(
        "() => { const apps = new Set(window.__inspector.mcpApps.apps.values());"
        " return apps.size === 1 && [...apps][0].initialized; }",
        timeout=DEADLINE_MS)
    await view.locator("#seen").filter(has_text="hostile shown").wait_for(timeout=DEADLINE_MS)
    seen = json.loads(await view.locator("#seen").text_content() or "{}")
    assert TOKEN not in json.dumps(seen), seen
    # what a framed document reads: the proxy's own URL (no fragment), no referrer, no name, no window of the page
    assert seen["baseURI"].endswith("/static/mcp-app-sandbox.html") and "#" not in seen["baseURI"], seen
    assert seen["referrer"] == "" and seen["name"] == "", seen
    assert seen["parentHref"] == "blocked" and seen["topHref"] == "blocked" and seen["topName"] == "blocked"
    assert all("inspect" not in origin for origin in seen["ancestorOrigins"]), seen
    assert seen["messages"], "the app got its tool data through the proxy"
    assert not any(TOKEN in m for m in seen["messages"])
    # its request to the page itself was not answered; its request to the proxy was forwarded and answered once
    assert sum('"hostInfo"' in m for m in seen["messages"]) == 1, seen["messages"]
    # every way out was refused
    attempts = seen["attempts"]
    assert attempts["fetch"].startswith("refused") and attempts["image"].startswith("refused"), attempts
    assert attempts["websocket"].startswith("refused"), attempts
    assert attempts["top"].startswith("refused") and attempts["parent"].startswith("refused"), attempts
    assert attempts["popup"] == "ok:null", attempts
    # the app cannot replace itself through the proxy (sandbox-resource-ready is the host's alone)
    assert await view.locator("#seen").count() == 1
    # finally it navigates its own frame to the trap: refused before any request leaves, the app is removed
    try:
        await _view(page).evaluate("window.leave()")
    except Exception:  # noqa: BLE001 - the document may be gone before evaluate returns
        pass
    await page.wait_for_selector(".mcp-app[data-state='gone']", timeout=DEADLINE_MS)
    assert "navigated" in (await page.text_content(".mcp-app .app-error") or "")
    assert trap.received == [], trap.received
    assert page.errors == []
