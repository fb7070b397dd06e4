"""Pacing a model's stream for a human watching: the clock lives here, in the
command line, not in the IO-free core.

:class:`PacedModel` wraps any :class:`~agui_engine.llm.LLMClient` and sleeps
``pace_seconds`` after every chunk it passes on (a text, reasoning or
tool-argument delta, a tool call's start), so ``agui-engine demo`` and ``serve``
show text arriving and component props filling in as a hosted model would.
Usage, finish and tool-call ends pass at once. Closing the stream closes the
wrapped one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from agui_engine.llm import (
    LLMClient,
    LLMStreamItem,
    LLMTool,
    ReasoningDelta,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolChoice,
    model_reasoning,
)
from agui_engine.protocol.capabilities import ReasoningCapabilities
from agui_engine.protocol.errors import UsageError

__all__ = ["PacedModel", "paced"]

#: The items a pause follows: the ones a model streams token by token.
_CHUNKS = (TextDelta, ReasoningDelta, ToolCallStart, ToolCallArgsDelta)


class PacedModel:
    """``model``'s stream with a ``pace_seconds`` pause after each chunk.

    Raises UsageError for a negative pace.
    """

    def __init__(self, model: LLMClient, pace_seconds: float) -> None:
        if pace_seconds < 0:
            raise UsageError(f"the pace must be >= 0 seconds, got {pace_seconds!r}")
        self.model = model
        self.pace_seconds = pace_seconds

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]:
        inner = self.model.complete(
            messages, tools, tool_choice, parallel_tool_calls=parallel_tool_calls, max_output_tokens=max_output_tokens
        )
        return self._paced(inner)

    def reasoning_capabilities(self) -> ReasoningCapabilities | None:
        """The paced model's (pacing changes when items come, not which)."""
        return model_reasoning(self.model)

    async def _paced(self, inner: AsyncIterator[LLMStreamItem]) -> AsyncIterator[LLMStreamItem]:
        async with aclosing(inner):  # type: ignore[type-var]
            async for item in inner:
                yield item
                if isinstance(item, _CHUNKS) and not (isinstance(item, ReasoningDelta) and not item.text):
                    await asyncio.sleep(self.pace_seconds)


def paced(model: LLMClient, pace_seconds: float) -> LLMClient:
    """``model`` itself when ``pace_seconds`` is 0, else a :class:`PacedModel`."""
    return PacedModel(model, pace_seconds) if pace_seconds else model
