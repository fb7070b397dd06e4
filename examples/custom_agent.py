"""Your own agent as an async generator: the events are yours to write, the server does the rest.

Run it from the repository root::

    agui-engine serve --agent py:examples.custom_agent:agent

then, in another terminal::

    agui-engine run --url http://127.0.0.1:8000/ "hello there"

``agent(input)`` yields AG-UI events: it starts the run, streams a reply word by word,
shows the reply's length as a state snapshot, and finishes. ``serve`` wraps it like any
agent: every event is verified, logged for resume (``Last-Event-ID``), and sent over SSE
(or ``--transport ws`` / ``stdio``). No model at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agui_engine import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)


def last_user_text(input: RunAgentInput) -> str:
    """What the user said last ("" if nothing)."""
    for message in reversed(input.messages):
        if isinstance(message, UserMessage) and isinstance(message.content, str):
            return message.content
    return ""


async def agent(input: RunAgentInput) -> AsyncIterator[Event]:
    said = last_user_text(input)
    reply = f"You said {len(said.split())} words: {said}" if said else "Say something!"
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    message_id = f"{input.run_id}-reply"
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    for at, word in enumerate(reply.split(" ")):
        yield TextMessageContentEvent(message_id=message_id, delta=word if at == 0 else " " + word)
    yield TextMessageEndEvent(message_id=message_id)
    yield StateSnapshotEvent(snapshot={"words": len(said.split())})
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)
