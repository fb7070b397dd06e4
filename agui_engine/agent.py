"""The one contract every run producer meets.

An :class:`Agent` turns a ``RunAgentInput`` into an async stream of AG-UI
events, from ``RUN_STARTED`` to ``RUN_FINISHED`` or ``RUN_ERROR``. The LLM
decision loop is an Agent, an agent framework behind an adapter is an Agent,
and every transport client is an Agent; every transport server serves any
Agent. So agents compose: a WebSocket server in front of a remote SSE agent is
``serve_ws(SSEAgent(url))``.

Cancellation: the consumer stops by closing the async iterator
(``aclose()``); the agent must then release what it holds (close the model
stream, abort the HTTP request) before ``aclose()`` returns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from .events import Event, RunAgentInput

__all__ = ["Agent"]


@runtime_checkable
class Agent(Protocol):
    def run(self, input: "RunAgentInput") -> AsyncIterator["Event"]:
        """Stream the events of one run. Must not raise after the first event:
        failures become a ``RUN_ERROR`` event that ends the stream."""
        ...
