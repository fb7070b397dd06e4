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

from mcp.server.fastmcp import Context, FastMCP

#: How long ``slow`` sleeps: far past any test's call timeout.
SLOW_SECONDS = 3600.0
#: Characters of ``big``'s result.
BIG_CHARS = 50 * 1024 * 1024


def build(tools: int = 0, *, port: int = 0) -> FastMCP:
    server = FastMCP("agui-engine-tests", host="127.0.0.1", port=port, log_level="WARNING")

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
        raise ValueError(f"the tool failed: {why}")

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
        os.write(1, b"{this is not json\n")
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
        extensions = (params.capabilities.model_extra or {}).get("extensions") if params is not None else None
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
    server = build(args.tools, port=args.port)
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "http":
        server.run("streamable-http")
    else:
        server.run("sse")
    sys.exit(0)


if __name__ == "__main__":
    main()
