"""``--mcp SPEC`` (repeatable): MCP servers whose tools the served agent offers (``spec/mcp.md``).

``http(s)://host/path`` is a streamable HTTP server, ``sse:http(s)://...`` an SSE one,
``stdio:command args...`` a subprocess; ``id=`` before any of them names it. The embedded
agent (an ``LLMAgent``) and an ``AgentLoop`` take the servers as they are; any other agent
is wrapped in an ``AgentLoop`` that offers their tools as client tools and runs them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from agui_engine.adapters.mcp import MCPServer, mcp_connections
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.tool_sources import check_tool_sources
from agui_engine.protocol.agent import Agent

__all__ = ["add_mcp_argument", "close_mcp", "mcp_servers", "open_mcp", "with_mcp"]


def add_mcp_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--mcp SPEC`` (repeatable) to ``parser``."""
    parser.add_argument("--mcp", action="append", default=[], metavar="SPEC",
                        help="an MCP server whose tools the agent offers (repeatable): http(s)://HOST/PATH "
                             "(streamable HTTP), sse:http(s)://HOST/PATH or 'stdio:COMMAND ARGS'; ID=SPEC names it")


def mcp_servers(specs: Sequence[str]) -> list[MCPServer]:
    """The servers of ``--mcp`` specs; raises UsageError (one line) for a bad spec or two with one id."""
    servers = [MCPServer.parse(spec) for spec in specs]
    check_tool_sources(servers)
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
    a server that cannot be reached is retried at the runs, with backoff."""
    await asyncio.gather(*(server.list_tools() for server in servers))


async def close_mcp() -> None:
    """Close every MCP connection of the process (stdio servers' processes reaped)."""
    await mcp_connections().aclose()
