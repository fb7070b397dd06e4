"""An agent that prints to stdout while it runs, as agent frameworks do (for the console tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agui_engine.protocol.events import Event, RunAgentInput, RunFinishedEvent, RunStartedEvent

print("agent module imported")  # noqa: T201 - the point: a framework printing at import


async def agent(input: RunAgentInput) -> AsyncIterator[Event]:
    print("\x1b[1m╭── running ──╮\x1b[0m")  # noqa: T201 - a framework's panel, with colour
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    print("╰─────────────╯")  # noqa: T201
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)
