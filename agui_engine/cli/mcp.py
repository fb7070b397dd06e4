"""``--mcp SPEC`` (repeatable): MCP servers whose tools the served agent offers (``spec/mcp.md``).

``http(s)://host/path`` is a streamable HTTP server, ``sse:http(s)://...`` an SSE one,
``stdio:command args...`` a subprocess; ``id=`` before any of them names it.
``--mcp-header-env [ID:]NAME=ENVVAR`` (repeatable) sends the header ``NAME`` with the value of the
environment variable ``ENVVAR`` to the HTTP server ``ID`` (to every HTTP server without ``ID:``): a
token never shows in ``ps``, and it joins the log's secrets. ``--mcp-connect-timeout SECONDS``
gives every server that long to answer ``initialize`` (default ``MCP_CONNECT_TIMEOUT_SECONDS``): a
stdio server that starts slowly (``npx`` fetching its package, a busy machine) is waited for at
start-up instead of being served without. The embedded
agent (an ``LLMAgent``) and an ``AgentLoop`` take the servers as they are; any other agent
is wrapped in an ``AgentLoop`` that offers their tools as client tools and runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import sys
from collections.abc import Sequence

import msgspec

from agui_engine.adapters.mcp import MCP_CONNECT_TIMEOUT_SECONDS, MCPServer, mcp_connections
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.tool_sources import check_tool_sources
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.errors import UsageError

__all__ = ["add_mcp_argument", "close_mcp", "mcp_servers", "open_mcp", "require_mcp_sdk", "with_mcp"]


def add_mcp_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--mcp SPEC`` (repeatable) to ``parser``."""
    parser.add_argument("--mcp", action="append", default=[], metavar="SPEC",
                        help="an MCP server whose tools the agent offers (repeatable): http(s)://HOST/PATH "
                             "(streamable HTTP), sse:http(s)://HOST/PATH or 'stdio:COMMAND ARGS'; ID=SPEC names it "
                             "(default: none)")
    parser.add_argument("--mcp-header-env", action="append", default=[], metavar="[ID:]NAME=ENVVAR",
                        help="send the header NAME, its value read from the environment variable ENVVAR, to the "
                             "HTTP --mcp server ID (every HTTP one without ID:); repeatable (default: none)")
    parser.add_argument("--mcp-connect-timeout", type=float, default=MCP_CONNECT_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="seconds each --mcp server gets to start (a stdio one) and answer initialize and "
                             "tools/list, at start-up and at each reconnection; a server that exits or refuses "
                             f"fails at once (default: {MCP_CONNECT_TIMEOUT_SECONDS:g})")


def require_mcp_sdk() -> None:
    """Raise UsageError (one line: what to install) when the ``mcp`` SDK, an optional extra, is
    not installed: ``--mcp`` is a mistake to correct before anything starts, not a server that
    is down (that the adapter would otherwise log at every retry while serving without it)."""
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("--mcp needs the MCP SDK: pip install 'agui-engine[mcp]'")


def mcp_servers(specs: Sequence[str], header_envs: Sequence[str] = (),
                connect_timeout: float = MCP_CONNECT_TIMEOUT_SECONDS) -> list[MCPServer]:
    """The servers of ``--mcp`` specs with the headers of ``--mcp-header-env`` entries and the
    ``connect_timeout`` of ``--mcp-connect-timeout``; raises UsageError (one line) for a bad spec,
    two with one id, a header entry that is malformed, names no HTTP server or an unset variable,
    a timeout that is not a positive number, or any spec while the SDK is not installed."""
    if not connect_timeout > 0 or connect_timeout == float("inf"):
        raise UsageError(f"--mcp-connect-timeout {connect_timeout:g}: write a positive number of seconds")
    if specs:
        require_mcp_sdk()
    servers = [msgspec.structs.replace(MCPServer.parse(spec), connect_timeout=connect_timeout) for spec in specs]
    check_tool_sources(servers)
    for entry in header_envs:
        match = re.fullmatch(r"(?:([A-Za-z0-9_-]+):)?([!#$%&'*+.^_`|~0-9A-Za-z-]+)=([A-Za-z_][A-Za-z0-9_]*)", entry)
        if match is None:
            raise UsageError(f"--mcp-header-env {entry!r}: write [ID:]HEADER=ENVVAR, e.g. Authorization=MCP_TOKEN")
        server_id, name, variable = match.groups()
        value = os.environ.get(variable)
        if not value:
            raise UsageError(f"--mcp-header-env {entry!r}: the environment variable {variable} is not set")
        hits = [n for n, s in enumerate(servers)
                if s.transport != "stdio" and (server_id is None or s.source_id == server_id)]
        if not hits:
            raise UsageError(f"--mcp-header-env {entry!r}: no HTTP --mcp server{f' with id {server_id}' if server_id else ''}")
        for n in hits:
            server = servers[n]
            servers[n] = msgspec.structs.replace(server, headers={**server.headers, name: value})
    return servers


def with_mcp(agent: Agent, servers: Sequence[MCPServer]) -> Agent:
    """``agent`` offering the tools of ``servers``: an ``LLMAgent`` or ``AgentLoop`` gets them
    added to its ``tool_sources``; any other agent is wrapped in ``AgentLoop(agent, mcp_servers=...)``.
    Raises UsageError for a server id the agent already has."""
    if not servers:
        return agent
    if isinstance(agent, (LLMAgent, AgentLoop)):
        agent.tool_sources = check_tool_sources([*agent.tool_sources, *servers])
        return agent
    return AgentLoop(agent, mcp_servers=list(servers))


async def open_mcp(servers: Sequence[MCPServer]) -> None:
    """Connect to every server now (each logs whether it is reachable, ``/readyz`` shows it);
    a server that cannot be reached is retried at the runs, with backoff, and said so on stderr
    in one line (the server serves without its tools meanwhile)."""
    await asyncio.gather(*(server.list_tools() for server in servers))
    for server in servers:
        status = server.status()
        if not status["connected"]:
            print(f"warning: MCP server {server.source_id} cannot be reached ({status['error']}): serving "
                  "without its tools; it is tried again at the next runs (GET /readyz shows it)",
                  file=sys.stderr, flush=True)


async def close_mcp() -> None:
    """Close every MCP connection of the process (stdio servers' processes reaped)."""
    await mcp_connections().aclose()
