"""The demo's MCP server: one tool with an MCP App, over stdio (``agui-engine demo --mcp`` runs it).

``python -m agui_engine.cli.demo_mcp_server`` serves, over stdin/stdout, with the official ``mcp``
SDK's FastMCP (the ``agui-engine[mcp]`` extra):

* ``roll_dice(sides: int = 6)`` -- rolls a die; its ``_meta.ui.resourceUri`` is :data:`DICE_APP_URI`,
  so a host that shows MCP Apps (the inspector) draws the app with the roll, and the app's
  "Roll again" button calls ``roll_dice`` back through the host's proxy;
* the resource :data:`DICE_APP_URI`: the app's HTML (MIME ``text/html;profile=mcp-app``; no
  external domain, so its CSP allows nothing beyond its own inline script and style).

The rolls come from :class:`random.Random` (a demo, not a casino). Nothing is read or written
but stdin and stdout.
"""

from __future__ import annotations

import random
import sys
from typing import Any, Final

__all__ = ["DICE_APP_HTML", "DICE_APP_URI", "build_server", "main", "roll"]

#: The app's resource.
DICE_APP_URI: Final = "ui://agui-engine-demo/dice.html"
_MIME: Final = "text/html;profile=mcp-app"
_rng = random.Random()

#: The app: shows the roll it is given (the tool's result) and rolls again through the host.
DICE_APP_HTML: Final = """<!doctype html>
<html><head><meta charset="utf-8"><title>dice</title>
<style>body{font:16px system-ui,sans-serif;margin:12px}#roll{font-size:40px;font-weight:700}</style></head>
<body>
<div id="roll">…</div>
<div id="detail"></div>
<button id="again" disabled>Roll again</button>
<script>
let nextId = 1, sides = 6;
const pending = new Map();
function send(method, params) {
  const id = nextId++;
  parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve, reject) => pending.set(id, {resolve, reject}));
}
function show(result) {
  const data = result.structuredContent || {};
  document.getElementById("roll").textContent = data.roll ?? "?";
  document.getElementById("detail").textContent = (result.content || []).map((c) => c.text || "").join(" ");
  document.getElementById("again").disabled = false;
}
window.addEventListener("message", (event) => {
  const msg = event.data;
  if (!msg || msg.jsonrpc !== "2.0") return;
  if (msg.id !== undefined && pending.has(msg.id)) {
    const p = pending.get(msg.id); pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message)); else p.resolve(msg.result);
    return;
  }
  if (msg.method === "ui/notifications/tool-input") sides = (msg.params.arguments || {}).sides || sides;
  if (msg.method === "ui/notifications/tool-result") show(msg.params);
});
document.getElementById("again").addEventListener("click", async () => {
  try { show(await send("tools/call", {name: "roll_dice", arguments: {sides}})); }
  catch (err) { document.getElementById("detail").textContent = err.message; }
});
send("ui/initialize", {appInfo: {name: "dice", version: "1"}, appCapabilities: {}, protocolVersion: "2025-11-21"})
  .then(() => parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*"));
</script>
</body></html>
"""


def roll(sides: int) -> dict[str, Any]:
    """One roll of a die with ``sides`` sides (2..1000; outside that, 6): ``{"roll", "sides"}``."""
    sides = sides if 2 <= sides <= 1000 else 6
    return {"roll": _rng.randint(1, sides), "sides": sides}


def build_server() -> Any:
    """The FastMCP (SDK 1.x) or MCPServer (2.x) server (``mcp`` is imported here: it is an optional extra)."""
    from mcp.types import CallToolResult, TextContent

    from agui_engine.adapters.mcp_sdk import new_server

    server = new_server("agui-engine-demo", log_level="ERROR")

    def roll_dice(sides: int = 6) -> CallToolResult:
        """Roll a die with the given number of sides and show the roll in an app."""
        data = roll(sides)
        text = f"rolled {data['roll']} on a {data['sides']}-sided die"
        return CallToolResult(content=[TextContent(type="text", text=text)], structuredContent=data)

    # the annotations are evaluated by FastMCP, so they must name objects of this scope
    roll_dice.__annotations__ = {"sides": int, "return": CallToolResult}
    server.tool(meta={"ui": {"resourceUri": DICE_APP_URI}})(roll_dice)

    def dice_app() -> str:
        return DICE_APP_HTML

    server.resource(DICE_APP_URI, name="dice", mime_type=_MIME, meta={"ui": {"prefersBorder": True}})(dice_app)
    return server


def main() -> None:
    """Serve over stdio until stdin closes; without a usable ``mcp`` SDK, one line on stderr and
    exit status 2 (the demo then says the server did not start)."""
    try:
        server = build_server()
    except ImportError as exc:
        sys.stderr.write(f"agui-engine demo MCP server: the MCP SDK cannot be used ({exc}): "
                         "pip install 'agui-engine[mcp]'\n")
        sys.exit(2)
    server.run("stdio")


if __name__ == "__main__":
    main()
