"""A small scripted Agent for the transport tests: a real async generator of real
AG-UI events (not a stand-in for any server), with knobs for pacing, silence and
failure, and a record of which runs had their generator closed.

Also importable by a subprocess: ``agui-engine serve --agent py:tests.transports.scripted:agent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)


class ScriptedAgent:
    """``deltas`` text deltas (each ``pause`` seconds apart), then a tool call.

    ``silence``: seconds of silence after the first text delta (keep-alive tests).
    ``hang``: never finish after the first delta (cancellation tests).
    ``closed``: run ids whose generator ran its ``finally`` (closed or finished).
    ``cancelled``: run ids whose generator was interrupted (closed before its end).
    """

    def __init__(self, deltas: int = 5, pause: float = 0.0, silence: float = 0.0, hang: bool = False) -> None:
        self.deltas = deltas
        self.pause = pause
        self.silence = silence
        self.hang = hang
        self.closed: set[str] = set()
        self.cancelled: set[str] = set()
        self.started: set[str] = set()

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        rid = input.run_id
        self.started.add(rid)
        finished = False
        try:
            yield RunStartedEvent(thread_id=input.thread_id, run_id=rid)
            yield TextMessageStartEvent(message_id=f"{rid}-m", role="assistant")
            for i in range(self.deltas):
                if self.pause:
                    await asyncio.sleep(self.pause)
                yield TextMessageContentEvent(message_id=f"{rid}-m", delta=f"token {i} é\u2028 ")
                if i == 0 and self.silence:
                    await asyncio.sleep(self.silence)
                if self.hang:
                    await asyncio.sleep(3600)
            yield TextMessageEndEvent(message_id=f"{rid}-m")
            yield ToolCallStartEvent(tool_call_id=f"{rid}-t", tool_call_name="get_weather", parent_message_id=f"{rid}-m")
            yield ToolCallArgsEvent(tool_call_id=f"{rid}-t", delta='{"city": ')
            yield ToolCallArgsEvent(tool_call_id=f"{rid}-t", delta='"Tokyo"}')
            yield ToolCallEndEvent(tool_call_id=f"{rid}-t")
            yield RunFinishedEvent(thread_id=input.thread_id, run_id=rid)
            finished = True
        finally:
            self.closed.add(rid)
            if not finished:
                self.cancelled.add(rid)


def agent() -> ScriptedAgent:
    """Factory for ``--agent py:tests.transports.scripted:agent``."""
    return ScriptedAgent(deltas=5)


def slow_agent() -> ScriptedAgent:
    return ScriptedAgent(deltas=20, pause=0.02)


def make_input(run_id: str = "run-1", text: str = "hello") -> RunAgentInput:
    from agui_engine.protocol.events import UserMessage

    return RunAgentInput(thread_id="thread-1", run_id=run_id, messages=[UserMessage(id="u1", content=text)])


class ByMessage:
    """For gateway subprocesses that serve several behaviours: the user's text
    picks one -- ``hang`` (3 deltas, then never finishes), otherwise 20 deltas
    paced 5 ms apart (a run of ~0.1 s that a client can cut mid-stream)."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        text = getattr(input.messages[-1], "content", "") if input.messages else ""
        inner = ScriptedAgent(deltas=3, hang=True) if text == "hang" else ScriptedAgent(deltas=20, pause=0.005)
        async for event in inner.run(input):
            yield event


def by_message() -> ByMessage:
    """Factory for ``--agent py:tests.transports.scripted:by_message``."""
    return ByMessage()
