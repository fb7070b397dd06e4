"""An agent that asks for approval (AG-UI 1.0 interrupt) and answers the resume it gets: served
by ``agui-engine serve --agent py:tests.transports.interrupt_agent:agent`` in the durable-thread
tests. The first run of a thread ends with an ``interrupt`` outcome (``approve-<runId>``, a
``responseSchema`` asking for ``{"approved": bool}``, and ``expiresAt`` from the user's message
when it says ``expire:<ISO time>``); a run with ``resume`` says what it was given."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from agui_engine.protocol.events import (
    Event,
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)

SCHEMA = {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}


async def agent(input: RunAgentInput) -> AsyncIterator[Event]:
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    if input.resume:
        text = "resumed with " + json.dumps([{"id": r.interrupt_id, "status": r.status, "payload": r.payload}
                                             for r in input.resume], sort_keys=True)
        mid = "a-" + input.run_id
        yield TextMessageStartEvent(message_id=mid)
        yield TextMessageContentEvent(message_id=mid, delta=text)
        yield TextMessageEndEvent(message_id=mid)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)
        return
    last = next((m.content for m in reversed(input.messages) if isinstance(m, UserMessage)), "")
    expires = str(last).partition("expire:")[2].strip() or None
    ask = Interrupt(id="approve-" + input.run_id, reason="approval", message="May I?", response_schema=SCHEMA,
                    expires_at=expires)
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id,
                           outcome=RunFinishedInterruptOutcome(interrupts=[ask]))
