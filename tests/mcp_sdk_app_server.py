"""An MCP server whose app is built on the official MCP Apps SDK (``@modelcontextprotocol/ext-apps``,
installed by ``tests/install-deps.sh`` into ``tests/js-ext-apps`` from its lock file): the app a
host is checked with.

``python -m tests.mcp_sdk_app_server http`` serves it like :mod:`tests.mcp_apps_server`.

Tools: ``show_sdk_probe(count: int, note: str)`` -- has the app (:data:`SDK_APP_URI`), returns
``"probe <count>"`` and ``{"count": count}``; ``echo(text: str)`` -- app-only, returns ``text``.

The app (the SDK's ``App`` over its default ``PostMessageTransport`` to ``window.parent``) keeps what
the host told it in ``window.probe`` ({partials, input, result, cancelled, contexts, teardowns,
host, order: the tool notifications' names in arrival order}) and offers ``window.call(method, params)``: one SDK call, resolved to ``{result}`` or
``{error, code}``, so a test drives each request and what the user does in between.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mcp.types import CallToolResult, TextContent

from agui_engine.adapters.mcp_sdk import FastServer, new_server
from tests.mcp_apps_server import APP_MIME, serve

SDK_APP_URI = "ui://sdk-probe/app.html"
SDK_DIR = Path(__file__).resolve().parent / "js-ext-apps"
#: The SDK's self-contained ES module (its dependencies bundled in).
SDK_BUNDLE = SDK_DIR / "node_modules" / "@modelcontextprotocol" / "ext-apps" / "dist" / "src" / "app-with-deps.js"

PROBE_JS = """
const { App } = window.ExtApps;
const probe = { partials: [], input: null, result: null, cancelled: null, contexts: [], teardowns: 0, host: null,
                order: [] };
window.probe = probe;
const app = new App({ name: "sdk-probe", version: "1.0.0" }, { availableDisplayModes: ["inline", "fullscreen"] },
                    { autoResize: false });
app.ontoolinputpartial = (p) => { probe.partials.push(p.arguments); probe.order.push("tool-input-partial"); };
app.ontoolinput = (p) => { probe.input = p.arguments; probe.order.push("tool-input"); };
app.ontoolresult = (r) => { probe.result = r; probe.order.push("tool-result"); };
app.ontoolcancelled = (p) => { probe.cancelled = p; probe.order.push("tool-cancelled"); };
app.onhostcontextchanged = (c) => { probe.contexts.push(c); };
app.onteardown = async () => { probe.teardowns += 1; return {}; };
window.call = async (method, params) => {
  try { return { result: (await app[method](params)) ?? null }; }
  catch (e) { return { error: String(e && e.message), code: e && e.code }; }
};
app.connect().then(() => {
  probe.host = { capabilities: app.getHostCapabilities(), version: app.getHostVersion(), context: app.getHostContext() };
  document.body.dataset.connected = "1";
}, (e) => { document.body.dataset.connectError = String(e && e.message); });
"""


def sdk_bundle_as_script() -> str:
    """The SDK bundle as a script that leaves its exports on ``window.ExtApps`` (the app has no network:
    the bundle is inlined, and an inline module cannot import from itself)."""
    if not SDK_BUNDLE.exists():
        raise RuntimeError(f"{SDK_BUNDLE} is missing: run tests/install-deps.sh")
    source = SDK_BUNDLE.read_text()
    at = source.rindex("export{")
    names = source[at + len("export{"):source.rindex("}")]
    pairs = [part.split(" as ") if " as " in part else [part, part] for part in names.split(",")]
    assert all(re.fullmatch(r"[\w$]+", a.strip()) and re.fullmatch(r"[\w$]+", b.strip()) for a, b in pairs)
    exports = ",".join(f"{b.strip()}:{a.strip()}" for a, b in pairs)
    return source[:at] + f"window.ExtApps={{{exports}}};"


def app_html() -> str:
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>sdk probe</title></head><body>"
            "<p id=\"hello\">SDK probe</p>"
            f"<script type=\"module\">{sdk_bundle_as_script()}\n{PROBE_JS}</script></body></html>")


def build_server() -> FastServer:
    server = new_server("sdk-probe", log_level="CRITICAL")
    html = app_html()

    @server.tool(description="Show the SDK probe app.", meta={"ui": {"resourceUri": SDK_APP_URI}})
    def show_sdk_probe(count: int, note: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=f"probe {count}")],
                              structuredContent={"count": count})

    @server.tool(description="Echo (the app's own tool).", meta={"ui": {"visibility": ["app"]}})
    def echo(text: str) -> str:
        return text

    @server.resource(SDK_APP_URI, mime_type=APP_MIME, meta={"ui": {"prefersBorder": True}})
    def app() -> str:
        return html

    return server


if __name__ == "__main__":
    serve(sys.argv[1], build_server())
