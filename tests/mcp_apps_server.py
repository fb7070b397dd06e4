"""The tests' own MCP server with an MCP App (the official ``mcp`` SDK's FastMCP), over streamable HTTP
on loopback in a subprocess of its own, so that node (the npm middleware) and Python reach the same
server.

``python -m tests.mcp_apps_server [http|sse]`` binds 127.0.0.1 on a free port, prints
``http://127.0.0.1:<port>/mcp`` (``/sse`` for SSE) on one line and serves until its stdin closes (so a
test that dies takes it along). ``python -m tests.mcp_apps_server stdio`` serves over its stdin and stdout.

With ``MCP_APPS_SERVER_JOURNAL=<path>`` in its environment, the server appends one JSON line per
request its handlers answer (``{"tool": name}`` or ``{"read": uri}``): the server's own side of what
reached it.

Tools:

* ``show_counter(start: int)`` -- has an app (``_meta.ui.resourceUri`` = :data:`APP_URI`); returns
  ``"counter at <start>"`` as text and ``{"count": start}`` as structured content.
* ``increment(count: int)`` -- no app, visible to the app only (``visibility: ["app"]``); the app's
  button calls it through the proxy; returns ``"counter at <count + 1>"``.
* ``hidden_app`` -- an app only the app may call (not model-visible: the middleware skips it).
* ``show_plain`` / ``show_notes`` -- "apps" whose resource a host must refuse: :data:`PLAIN_URI` has
  the wrong MIME type, :data:`NOTES_URI` is not ``ui://``.

Resources: :data:`APP_URI` (the app, ``text/html;profile=mcp-app``, with a ``_meta.ui.csp``),
:data:`PLAIN_URI` (``text/html`` without the profile: not an app), :data:`NOTES_URI` (``text/plain``, not ``ui://``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.types import CallToolResult, TextContent

from agui_engine.adapters.mcp_sdk import FastServer, new_server, run_server

APP_URI = "ui://counter/app.html"
PLAIN_URI = "ui://counter/plain.html"
NOTES_URI = "data://notes"
APP_MIME = "text/html;profile=mcp-app"
APP_CSP = {"connectDomains": ["https://api.example.test"], "resourceDomains": ["https://cdn.example.test"]}

#: The app: shows the tool's result, and a button that calls ``increment`` through the host. It also
#: tries what it must not be able to do (read the host page, its cookies, its storage) and reports
#: what happened in ``#probe``.
APP_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>counter</title></head>
<body>
<p id="count">waiting</p>
<button id="inc">+1</button>
<pre id="probe"></pre>
<script>
let nextId = 1;
const pending = new Map();
function send(method, params) {
  const id = nextId++;
  parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve) => pending.set(id, resolve));
}
function show(result) {
  const text = (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join(" ");
  document.getElementById("count").textContent = text;
  window.lastResult = result;
}
window.addEventListener("message", (event) => {
  const msg = event.data;
  if (!msg || msg.jsonrpc !== "2.0") return;
  if (msg.id !== undefined && pending.has(msg.id)) { pending.get(msg.id)(msg.result ?? {error: msg.error}); pending.delete(msg.id); return; }
  if (msg.method === "ui/notifications/tool-input") document.body.dataset.toolInput = JSON.stringify(msg.params.arguments);
  if (msg.method === "ui/notifications/tool-result") show(msg.params);
});
document.getElementById("inc").addEventListener("click", async () => {
  const current = window.lastResult && window.lastResult.structuredContent ? window.lastResult.structuredContent.count : 0;
  const result = await send("tools/call", {name: "increment", arguments: {count: current}});
  show(result);
});
const probe = [];
try { probe.push("parent-dom:" + parent.document.title); } catch (e) { probe.push("parent-dom:blocked"); }
try { probe.push("cookie:" + document.cookie); } catch (e) { probe.push("cookie:blocked"); }
try { probe.push("storage:" + localStorage.length); } catch (e) { probe.push("storage:blocked"); }
try { probe.push("origin:" + window.origin); } catch (e) { probe.push("origin:blocked"); }
document.getElementById("probe").textContent = probe.join("\\n");
// a connection the CSP does not declare (connect-src: api.example.test only) must be refused by it
document.addEventListener("securitypolicyviolation", (e) => {
  if (e.violatedDirective.startsWith("connect-src")) document.body.dataset.cspBlocked = e.blockedURI;
});
fetch("http://127.0.0.1:9/undeclared").catch(() => { document.body.dataset.fetchFailed = "yes"; });
send("ui/initialize", {appInfo: {name: "counter", version: "1"}, appCapabilities: {},
                       protocolVersion: "2025-11-21"}).then((answer) => {
  document.body.dataset.host = JSON.stringify(answer.hostInfo || null);
  parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*");
});
</script>
</body></html>
"""


def _journal(entry: dict[str, str]) -> None:
    """Append ``entry`` to the journal ``MCP_APPS_SERVER_JOURNAL`` names, if any."""
    path = os.environ.get("MCP_APPS_SERVER_JOURNAL")
    if path:
        with open(path, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry) + "\n")


def build_server() -> FastServer:
    """The FastMCP (SDK 1.x) or MCPServer (2.x) server."""
    server = new_server("counter", log_level="CRITICAL")

    @server.tool(description="Show a counter app starting at start.",
                 meta={"ui": {"resourceUri": APP_URI}})
    def show_counter(start: int) -> CallToolResult:
        _journal({"tool": "show_counter"})
        return CallToolResult(content=[TextContent(type="text", text=f"counter at {start}")],
                              structuredContent={"count": start})

    @server.tool(description="Add one to the counter.", meta={"ui": {"visibility": ["app"]}})
    def increment(count: int) -> CallToolResult:
        _journal({"tool": "increment"})
        return CallToolResult(content=[TextContent(type="text", text=f"counter at {count + 1}")],
                              structuredContent={"count": count + 1})

    @server.tool(description="An app the model never sees.",
                 meta={"ui": {"resourceUri": APP_URI, "visibility": ["app"]}})
    def hidden_app() -> str:
        _journal({"tool": "hidden_app"})
        return "hidden"

    @server.tool(description="Show the plain page (not an app: its MIME type lacks the profile).",
                 meta={"ui": {"resourceUri": PLAIN_URI}})
    def show_plain() -> str:
        _journal({"tool": "show_plain"})
        return "plain shown"

    @server.tool(description="Show the notes (not a ui:// resource).", meta={"ui": {"resourceUri": NOTES_URI}})
    def show_notes() -> str:
        _journal({"tool": "show_notes"})
        return "notes shown"

    @server.resource(APP_URI, mime_type=APP_MIME, meta={"ui": {"csp": APP_CSP, "prefersBorder": True}})
    def app() -> str:
        _journal({"read": APP_URI})
        return APP_HTML

    @server.resource(PLAIN_URI, mime_type="text/html")
    def plain() -> str:
        _journal({"read": PLAIN_URI})
        return "<p>not an app</p>"

    @server.resource(NOTES_URI, mime_type="text/plain")
    def notes() -> str:
        _journal({"read": NOTES_URI})
        return "notes"

    return server


def serve(transport: str, server: FastServer | None = None) -> None:
    """Serve ``server`` (default: :func:`build_server`'s) on a free loopback port until stdin closes."""
    import anyio
    import uvicorn

    server = server or build_server()
    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    def watch_stdin() -> None:
        sys.stdin.read()
        userver.should_exit = True

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}", flush=True)
    anyio.run(lambda: userver.serve(sockets=[sock]))


@contextmanager
def running_app_server(transport: str = "http", module: str = "tests.mcp_apps_server",
                       args: tuple[str, ...] = ()) -> Iterator[str]:
    """Run the server (``python -m <module> <transport> <args>``) in a subprocess over ``transport``
    (``http``: streamable HTTP at ``/mcp``; ``sse``: at ``/sse``); yields its URL; stops it (stdin
    closed) and reaps it."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", module, transport, *args], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"the MCP server did not start: {url!r}"
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


if __name__ == "__main__":
    if sys.argv[1:] == ["stdio"]:
        run_server(build_server(), "stdio")
    else:
        serve(sys.argv[1] if len(sys.argv) > 1 else "http")
