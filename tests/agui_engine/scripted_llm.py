"""A scripted LLMClient for the decision-loop and agent tests: replies are given up front."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agui_engine.llm import (
    Finish,
    LLMStreamItem,
    LLMTool,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)


class Call:
    """What one ``complete()`` call received."""

    def __init__(self, messages: Sequence[Any], tools: Sequence[LLMTool], tool_choice: str, kwargs: dict[str, Any]):
        self.messages = list(messages)
        self.tools = list(tools)
        self.tool_choice = tool_choice
        self.kwargs = kwargs


class ScriptedLLM:
    """Each ``complete()`` streams the next reply of ``replies`` (the last one repeats).

    A reply is a list of items, or a callable ``(messages) -> list`` for replies that
    depend on the conversation. ``closed`` counts streams whose ``finally`` ran;
    ``raise_before`` makes ``complete()`` itself raise.
    """

    def __init__(self, *replies: list[LLMStreamItem] | Callable[[Sequence[Any]], list[LLMStreamItem]]):
        self.replies = list(replies)
        self.calls: list[Call] = []
        self.closed = 0
        self.finished = 0

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: str = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]:
        self.calls.append(
            Call(messages, tools, tool_choice, {"parallel_tool_calls": parallel_tool_calls,
                                                "max_output_tokens": max_output_tokens})
        )
        reply = self.replies[min(len(self.calls) - 1, len(self.replies) - 1)]
        items = reply(messages) if callable(reply) else reply
        return self._stream(list(items))

    async def _stream(self, items: list[LLMStreamItem]) -> AsyncIterator[LLMStreamItem]:
        try:
            for item in items:
                if isinstance(item, BaseException):
                    raise item
                yield item
            self.finished += 1
        finally:
            self.closed += 1


def text(*pieces: str) -> list[LLMStreamItem]:
    return [TextDelta(text=p) for p in pieces] + [Finish(reason="stop")]


def call(index: int, call_id: str, name: str, *fragments: str) -> list[LLMStreamItem]:
    return [ToolCallStart(index=index, id=call_id, name=name)] + [
        ToolCallArgsDelta(index=index, delta=f) for f in fragments
    ] + [ToolCallEnd(index=index)]


def counter_ids(prefix: str = "id") -> Callable[[], str]:
    n = iter(range(1_000_000))
    return lambda: f"{prefix}{next(n)}"
