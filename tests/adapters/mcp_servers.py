"""The tests' own MCP server (the ``mcp`` SDK's FastMCP), run as a real process:

    python -m tests.adapters.mcp_servers stdio [--tools N]
    python -m tests.adapters.mcp_servers http PORT [--tools N]     (streamable HTTP at /mcp)
    python -m tests.adapters.mcp_servers sse PORT                   (SSE at /sse)

Its tools: ``add`` (numbers), ``weather`` (the name the embedded model's ``weather`` tool
also has: a collision), ``fail`` (raises: an ``isError`` result), ``slow`` (hangs), ``nap`` (answers after a while),
``crash`` (the process exits mid-call), ``big`` (a 50 MB result), ``garbage`` (a malformed
JSON-RPC line on stdout, stdio only), ``pid``, ``env_has`` (whether an environment variable
is set; never its value), ``header_seen`` (the length of the Authorization header the
server received), ``client_ui`` (the MIME types the client's MCP Apps capability names), ``grow`` (adds the tool ``late`` and sends ``tools/list_changed``).
``--tools N`` adds ``t0`` ... ``t{N-1}``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from agui_engine.adapters.mcp_sdk import FastServer, new_server, run_server, sdk_major

if sdk_major() >= 2:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
else:
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp.exceptions import ToolError

#: How long ``slow`` sleeps: far past any test's call timeout.
SLOW_SECONDS = 3600.0
#: Characters of ``big``'s result.
BIG_CHARS = 50 * 1024 * 1024


#: The stdio transport's own stdout, kept before the server starts: SDK 2.x points fd 1 elsewhere while
#: it serves (so that stray prints cannot corrupt the protocol); ``garbage`` writes to the wire itself.
_WIRE = os.dup(1)


def build(tools: int = 0) -> FastServer:
    server = new_server("agui-engine-tests", log_level="WARNING")

    @server.tool()
    def add(a: float, b: float) -> str:
        """Add two numbers."""
        return str(a + b)

    @server.tool()
    def weather(city: str) -> str:
        """The weather (MCP's, not the embedded model's)."""
        return f"MCP weather in {city}: 21 C"

    @server.tool()
    def fail(why: str = "broken") -> str:
        """Always fails."""
        # ToolError: its message is the result's text in both SDK lines (2.x hides any other exception's)
        raise ToolError(f"the tool failed: {why}")

    @server.tool()
    async def slow() -> str:
        """Never returns in time."""
        await asyncio.sleep(SLOW_SECONDS)
        return "late"

    @server.tool()
    async def nap(seconds: float) -> str:
        """Answers after ``seconds``: late, for a caller whose timeout is shorter."""
        await asyncio.sleep(seconds)
        return f"napped {seconds:g} s"

    @server.tool()
    def crash() -> str:
        """The server process dies mid-call."""
        os._exit(3)

    @server.tool()
    def big() -> str:
        """A 50 MB result."""
        return "x" * BIG_CHARS

    @server.tool()
    def garbage() -> str:
        """Writes a line that is not JSON-RPC to stdout (the stdio transport), then hangs."""
        os.write(_WIRE, b"{this is not json\n")
        import time

        time.sleep(SLOW_SECONDS)
        return "never"

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def env_has(name: str) -> bool:
        """Whether the environment variable is set (its value stays here)."""
        return bool(os.environ.get(name))

    @server.tool()
    def header_seen(ctx: Context) -> int:  # type: ignore[type-arg]
        """Length of the Authorization header of this request (0: none)."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        return len(headers.get("authorization", "")) if headers is not None else 0

    @server.tool()
    def client_ui(ctx: Context) -> str:  # type: ignore[type-arg]
        """The MIME types the client said it draws (MCP Apps' capability), comma-separated."""
        params = ctx.session.client_params
        capabilities = params.capabilities if params is not None else None
        # a declared field in SDK 2.x, an extra one in 1.x (its schema predates extensions)
        extensions = (getattr(capabilities, "extensions", None)
                      or (capabilities.model_extra or {}).get("extensions") if capabilities is not None else None)
        ui = (extensions or {}).get("io.modelcontextprotocol/ui") or {}
        return ",".join(ui.get("mimeTypes") or [])

    @server.tool()
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        """Adds the tool ``late`` and tells the client the list changed."""

        def late() -> str:
            """Added at run time."""
            return "late tool"

        server.add_tool(late)
        await ctx.session.send_tool_list_changed()
        return "grown"

    for n in range(tools):
        def numbered(n: int = n) -> str:
            return f"tool {n}"

        server.add_tool(numbered, name=f"t{n}", description=f"numbered tool {n}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=("stdio", "http", "sse"))
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--tools", type=int, default=0)
    args = parser.parse_args()
    transport = {"stdio": "stdio", "http": "streamable-http", "sse": "sse"}[args.transport]
    run_server(build(args.tools), transport, port=args.port)
    sys.exit(0)


if __name__ == "__main__":
    main()
