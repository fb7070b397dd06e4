"""Run an agent *through* the gateway, in-process: the function behind
``agui-engine demo`` showing a run over a real loopback transport.

:func:`run_via_gateway` starts the SSE (or WebSocket) gateway for ``agent`` on
``127.0.0.1`` with an ephemeral port, in the current event loop, runs ``input``
with the matching client agent against it and yields the events the client
received; the server is shut down when the iteration ends (or is closed early,
which cancels the run on the server). Every event has therefore crossed the
whole gateway path: verification, the event log with ids, HTTP framing, the
client's decoder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import Event, RunAgentInput

__all__ = ["GatewayAgent", "run_via_gateway"]


async def run_via_gateway(
    agent: Agent | AgentFunction, input: RunAgentInput, *, transport: str = "sse", **server_options: Any
) -> AsyncIterator[Event]:
    """Yield the events of ``input`` run by ``agent`` behind a loopback gateway.

    ``transport``: ``"sse"`` (default) or ``"ws"``. ``server_options`` go to
    :func:`~transports.sse_server.start_sse_server` / :func:`~transports.websocket_server.start_websocket_server`.
    Raises UsageError for an unknown transport; the client's errors otherwise.
    """
    if transport == "sse":
        from .sse_client import SSEAgent
        from .sse_server import start_sse_server

        server: Any = await start_sse_server(agent, **server_options)
        client: Agent = SSEAgent(server.url)
    elif transport in ("ws", "websocket"):
        from .websocket_client import WebSocketAgent
        from .websocket_server import start_websocket_server

        server = await start_websocket_server(agent, **server_options)
        client = WebSocketAgent(server.url)
    else:
        raise UsageError(f"run_via_gateway: unknown transport {transport!r} (sse or ws)")
    events = client.run(input)
    try:
        async for event in events:
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()  # cancels the run on the server if we stopped early
        await server.close()


class GatewayAgent:
    """An :class:`~agui_engine.protocol.agent.Agent` that runs every input through a
    loopback gateway in front of ``agent`` (see :func:`run_via_gateway`): a
    drop-in wrapper for the demo, ``GatewayAgent(demo_agent())``."""

    def __init__(self, agent: Agent | AgentFunction, *, transport: str = "sse", **server_options: Any) -> None:
        if transport not in ("sse", "ws", "websocket"):
            raise UsageError(f"GatewayAgent: unknown transport {transport!r} (sse or ws)")
        self.agent = as_agent(agent, where="GatewayAgent(agent)")
        self.transport = transport
        self.server_options = server_options

    @property
    def resources(self) -> Any:
        """The data resources of the agent behind the gateway (served by it), or None."""
        return getattr(self.agent, "resources", None)

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        return run_via_gateway(self.agent, input, transport=self.transport, **self.server_options)
