"""What a server runs for the agent it is given.

**A remote AG-UI agent inside the agent loop.** A remote AG-UI endpoint behind one of this
package's client agents (:class:`~transports.sse_client.SSEAgent`,
:class:`~transports.websocket_client.WebSocketAgent`, :class:`~transports.stdio_client.StdioAgent`)
is a third party's stream: served bare, a duplicated ``*_END`` or a dropped argument fragment
ends the run with ``RUN_ERROR`` and nothing of the agent loop applies. :func:`serving_agent` is
the one place every server (``RunRegistry``: SSE, WebSocket, stdio; ``agui-engine serve --agent
http://...``; ``start_sse_server(SSEAgent(url))`` in code) decides that: such an agent is served
as ``AgentLoop(agent)`` -- verified, repaired (``spec/agent-loop.md`` §3), its client's
components and interactables turned into tools -- exactly as a LangGraph or CrewAI agent is.
Any other agent (already an ``AgentLoop``, an ``LLMAgent``, your own) is served as it is.

**Verified once.** The events of an ``AgentLoop`` (without A2UI) have all been fed to the run's
Verifier inside the loop, which repairs by it; the registry's producer verifies them no second
time (:meth:`AgentHost.verifies`). Every other agent's events, and a proxied MCP request's
answer, are verified by the producer.

**MCP Apps' proxied requests around it.** A run whose ``forwardedProps`` carry a proxied MCP
request (an MCP app's iframe calling its server, spec/mcp.md) is answered by
:class:`AgentHost` with the agent's MCP servers (its ``mcp_apps``), for every agent and
transport, never by the agent; the run was admitted, authenticated and owned like any other.
Such a run is no turn of its thread's conversation: it joins no history. It reaches only what the
runs of its principal were shown (:class:`~agui_engine.genui.mcp_apps.ShownApps`, fed by the run
producer with every app announcement and ``mcp-apps`` activity of a run: :meth:`AgentHost.saw`):
the ``ui://`` resources of those apps, and their servers' tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from functools import partial

from agui_engine.genui.mcp_apps import (
    MCP_APP_ANNOUNCE_EVENT,
    MCP_APPS_ACTIVITY_TYPE,
    McpAppsProxy,
    ShownApps,
    is_proxied,
    proxied_request,
)
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import AguiEngineError
from agui_engine.protocol.events import ActivitySnapshotEvent, CustomEvent, Event, RunAgentInput

from .retrying_client import RemoteClientBase
from .stdio_client import StdioAgent

__all__ = ["APP_EVENTS", "AgentHost", "serving_agent"]

#: The event classes that may show a principal an MCP app (:meth:`AgentHost.saw` wants them).
APP_EVENTS: frozenset[type] = frozenset({ActivitySnapshotEvent, CustomEvent})
# What an encoded app event contains (the codec writes compact JSON): the cheap test before a decode.
_ACTIVITY_MARK = f'"activityType":"{MCP_APPS_ACTIVITY_TYPE}"'.encode()
_ANNOUNCE_MARK = f'"name":"{MCP_APP_ANNOUNCE_EVENT}"'.encode()


def serving_agent(agent: Agent) -> Agent:
    """``AgentLoop(agent)`` for a remote AG-UI client agent, else ``agent`` itself."""
    if isinstance(agent, (RemoteClientBase, StdioAgent)):
        return AgentLoop(agent)
    return agent


class AgentHost:
    """What a registry runs for ``agent``: ``agent`` is :func:`serving_agent`'s answer (what
    capabilities, resources and tool sources are read from); :meth:`run` answers proxied MCP
    requests itself and hands every other input to it."""

    def __init__(self, agent: Agent) -> None:
        self.agent = serving_agent(agent)
        # The agent's MCP servers (its ``mcp_apps``), else none: every request then names an
        # unknown server, as the middleware with no servers answers.
        proxy = getattr(self.agent, "mcp_apps", None)
        self.mcp_apps: McpAppsProxy = proxy if isinstance(proxy, McpAppsProxy) else McpAppsProxy()
        #: The apps each principal's runs showed: what its proxied requests may reach.
        self.shown = ShownApps(self.mcp_apps.table)

    def run(self, input: RunAgentInput, principal: str | None) -> AsyncIterator[Event]:
        """The proxied request's answer, or what ``agent.run(input)`` returns (unchecked: the
        registry checks it is an async iterator). ``principal``: the run's owner (None with auth
        off: every client is that one anonymous principal); a proxied request reaches only what its
        runs were shown (:meth:`saw`). Raises ProxiedRequestError when malformed."""
        request = proxied_request(input.forwarded_props)
        if request is not None:
            return self.mcp_apps.run(input, request, partial(self.shown.refusal, principal))
        return self.agent.run(input)

    def saw(self, principal: str | None, event: Event) -> None:
        """An event of ``principal``'s run went out (one of :data:`APP_EVENTS`; any other is
        ignored): the app it announces or shows is now theirs to reach."""
        self.shown.note(principal, event)

    def saw_kept(self, principal: str | None, payloads: Iterable[bytes]) -> None:
        """``principal`` read these kept events of a thread (encoded as served): the apps among
        them are theirs to reach again, as on the node that ran them before a restart."""
        for payload in payloads:
            if _ACTIVITY_MARK in payload or _ANNOUNCE_MARK in payload:
                try:
                    event = decode_event(payload)
                except AguiEngineError:  # not an event this codec reads: no app of it is shown
                    continue
                self.shown.note(principal, event)

    def verifies(self, input: RunAgentInput) -> bool:
        """Whether the stream :meth:`run` returns for ``input`` is verified already: the agent
        is an :class:`~agui_engine.loops.agent_loop.AgentLoop` whose every event went through
        the run's Verifier (``AgentLoop.verifies_output``: a remote AG-UI agent, a LangGraph or
        CrewAI agent) and the input is no proxied MCP request (its answer is not the agent's).
        The registry's producer then feeds no second Verifier: each event is verified once."""
        return (isinstance(self.agent, AgentLoop) and self.agent.verifies_output
                and not is_proxied(input.forwarded_props))

    @staticmethod
    def joins_history(input: RunAgentInput) -> bool:
        """Whether a run of ``input`` is a turn of its thread's conversation (not a proxied request)."""
        return not is_proxied(input.forwarded_props)
