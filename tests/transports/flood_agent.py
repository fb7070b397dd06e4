"""An agent that streams FLOOD_KIB KiB of text deltas as fast as it can, then
finishes: for a server subprocess whose readers never read
(``agui-engine serve --agent py:tests.transports.flood_agent:agent``).
``AGUI_TEST_FLOOD_KIB`` sets the size (default FLOOD_KIB)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

#: KiB of deltas per run when AGUI_TEST_FLOOD_KIB is not set.
FLOOD_KIB = 1536


class FloodAgent:
    def __init__(self, kib: int) -> None:
        self.kib = kib

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        for i in range(self.kib):
            yield TextMessageContentEvent(message_id="m", delta=f"{i:07d}" + "f" * 1000)
            if i % 64 == 0:
                await asyncio.sleep(0)
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


agent = FloodAgent(int(os.environ.get("AGUI_TEST_FLOOD_KIB", FLOOD_KIB)))
