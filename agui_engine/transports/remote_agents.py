"""What a server runs for the agent it is given: a remote AG-UI agent inside the agent loop.

A remote AG-UI endpoint behind one of this package's client agents (:class:`~transports.sse_client.SSEAgent`,
:class:`~transports.websocket_client.WebSocketAgent`, :class:`~transports.stdio_client.StdioAgent`) is a third
party's stream: served bare, a duplicated ``*_END`` or a dropped argument fragment ends the
run with ``RUN_ERROR`` and nothing of the agent loop applies. :func:`serving_agent` is the one
place every server (``RunRegistry``: SSE, WebSocket, stdio; ``agui-engine serve --agent
http://...``; ``start_sse_server(SSEAgent(url))`` in code) decides that: such an agent is
served as ``AgentLoop(agent)`` -- verified, repaired (``spec/agent-loop.md`` §3), its client's
components and interactables turned into tools -- exactly as a LangGraph or CrewAI agent is.
Any other agent (already an ``AgentLoop``, an ``LLMAgent``, your own) is served as it is.
"""

from __future__ import annotations

from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.agent import Agent

from .retrying_client import RemoteClientBase
from .stdio_client import StdioAgent

__all__ = ["serving_agent"]


def serving_agent(agent: Agent) -> Agent:
    """``AgentLoop(agent)`` for a remote AG-UI client agent, else ``agent`` itself."""
    if isinstance(agent, (RemoteClientBase, StdioAgent)):
        return AgentLoop(agent)
    return agent
