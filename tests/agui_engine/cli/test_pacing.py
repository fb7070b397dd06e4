"""agui_engine.cli.pacing: the embedded model paced for a human watching."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agui_engine.cli import pacing
from agui_engine.cli.pacing import PacedModel, paced
from agui_engine.demo.weather_model import GET_WEATHER_TOOL, EmbeddedModel
from agui_engine.llm import ReasoningDelta, TextDelta, ToolCallArgsDelta, ToolCallStart
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import UserMessage

TOOLS = [GET_WEATHER_TOOL]


def user(text: str) -> UserMessage:
    return UserMessage(id="u1", content=text)


async def collect(model: Any, text: str) -> list[Any]:
    return [item async for item in model.complete([user(text)], TOOLS)]


async def test_pace_sleeps_after_each_chunk_and_zero_never_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(pacing.asyncio, "sleep", fake_sleep)
    model = EmbeddedModel()
    assert paced(model, 0) is model
    plain = await collect(model, "What's the weather in Tokyo?")
    assert slept == []
    items = await collect(paced(model, 0.25), "What's the weather in Tokyo?")
    assert items == plain  # pacing changes the timing, never the stream
    chunks = [i for i in items if isinstance(i, (TextDelta, ToolCallStart, ToolCallArgsDelta))
              or (isinstance(i, ReasoningDelta) and i.text)]
    assert set(slept) == {0.25} and len(slept) == len(chunks) > 3


async def test_closing_the_paced_stream_closes_the_model_stream() -> None:
    closed = asyncio.Event()

    class Watched:
        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            try:
                async for item in EmbeddedModel().complete(*args, **kwargs):
                    yield item
            finally:
                closed.set()

    stream = PacedModel(Watched(), 0.001).complete([user("a dashboard please")], TOOLS)
    first = await stream.__anext__()
    assert isinstance(first, TextDelta)  # the dashboard needs GET_WEATHER_TOOL's sibling tools: plain text here
    assert not closed.is_set()
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed.is_set()
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


def test_negative_pace_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        PacedModel(EmbeddedModel(), -1)
