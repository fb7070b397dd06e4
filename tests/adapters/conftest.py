"""Helpers shared by the provider adapter tests: run a recorded stream through a
parser with any split, and reduce the items to a readable digest."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pytest

from agui_engine.adapters.anthropic import AnthropicStreamParser
from agui_engine.adapters.gemini import GeminiStreamParser
from agui_engine.adapters.openai_chat import ChatStreamParser
from agui_engine.adapters.openai_responses import ResponsesStreamParser
from agui_engine.adapters.provider import ProviderStream, StreamParser
from agui_engine.adapters.replay import PROVIDERS, fixture_names, load_fixture
from agui_engine.llm import (
    Finish,
    LLMStreamItem,
    LLMTool,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from agui_engine.protocol.events import (
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    FunctionCall,
    ImagePart,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UrlSource,
    UserMessage,
)


def _counter_ids() -> Callable[[], str]:
    n = iter(range(1000))
    return lambda: f"minted_{next(n)}"


PARSERS: dict[str, Callable[[], StreamParser]] = {
    "openai_chat": lambda: ChatStreamParser(id_factory=_counter_ids()),
    "openai_compatible": lambda: ChatStreamParser(provider="openai-compatible", lenient_eof=True, id_factory=_counter_ids()),
    "openai_responses": lambda: ResponsesStreamParser(id_factory=_counter_ids()),
    "anthropic": lambda: AnthropicStreamParser(id_factory=_counter_ids()),
    "gemini": lambda: GeminiStreamParser(id_factory=_counter_ids()),
}

#: Every recorded stream (HTTP-error fixtures are not streams).
STREAM_FIXTURES = [
    (provider, name)
    for provider in PROVIDERS
    for name in fixture_names(provider)
    if load_fixture(provider, name).is_stream
]


def parse_chunks(provider: str, chunks: Sequence[bytes]) -> list[LLMStreamItem]:
    stream = ProviderStream(PARSERS[provider]())
    items: list[LLMStreamItem] = []
    for chunk in chunks:
        items += stream.feed(chunk)
    return items + stream.close()


def digest_fixture(provider: str, name: str) -> dict[str, Any]:
    """The digest of one recorded stream, parsed whole."""
    return digest(parse_chunks(provider, [load_fixture(provider, name).body]))


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def random_splits(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return split_at(data, [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 40))])


def digest(items: Sequence[LLMStreamItem]) -> dict[str, Any]:
    """What a stream says, independent of how it was chunked into deltas."""
    calls: dict[int, list[Any]] = {}
    out: dict[str, Any] = {"text": "", "reasoning": "", "signatures": [], "encrypted": [], "calls": [], "usage": None, "end": None}
    for item in items:
        if isinstance(item, TextDelta):
            out["text"] += item.text
        elif isinstance(item, ReasoningDelta):
            out["reasoning"] += item.text
            if item.signature:
                out["signatures"].append(item.signature)
            if item.encrypted:
                out["encrypted"].append(item.encrypted)
        elif isinstance(item, ToolCallStart):
            calls[item.index] = [item.id, item.name, ""]
            if item.signature:
                out["signatures"].append(item.signature)
        elif isinstance(item, ToolCallArgsDelta):
            calls[item.index][2] += item.delta
        elif isinstance(item, Usage):
            out["usage"] = (item.input_tokens, item.output_tokens, item.total_tokens, item.reasoning_tokens, item.cached_input_tokens)
        elif isinstance(item, Finish):
            out["end"] = ("finish", item.reason, item.raw_reason)
        elif isinstance(item, StreamError):
            out["end"] = ("error", item.code, item.retryable)
    for index in sorted(calls):
        call_id, name, args = calls[index]
        try:
            parsed: Any = msgspec.json.decode(args)
        except msgspec.DecodeError:
            parsed = ("partial", args)
        out["calls"].append((call_id, name, parsed))
    return out


def check_contract(items: Sequence[LLMStreamItem]) -> None:
    """The item contract every parser keeps (adapters/provider.py docstring)."""
    assert items, "a stream always ends with a terminal item"
    *body, last = items
    assert isinstance(last, Finish | StreamError)
    started: set[int] = set()
    ended: set[int] = set()
    usage_seen = 0
    for position, item in enumerate(body):
        assert not isinstance(item, Finish | StreamError), "terminal item before the end"
        if isinstance(item, TextDelta):
            assert item.text
        elif isinstance(item, ReasoningDelta):
            assert item.text or item.signature or item.encrypted
        elif isinstance(item, ToolCallStart):
            assert item.index not in started
            started.add(item.index)
        elif isinstance(item, ToolCallArgsDelta):
            assert item.index in started and item.index not in ended and item.delta
        elif isinstance(item, ToolCallEnd):
            assert item.index in started and item.index not in ended
            ended.add(item.index)
        elif isinstance(item, Usage):
            usage_seen += 1
            assert position == len(body) - 1, "usage comes right before the terminal item"
    assert usage_seen <= 1
    if isinstance(last, Finish):
        assert started == ended, "every started call ends before a normal finish"


#: A conversation with every message kind a request builder reads: system and developer
#: messages, user text with a data image and a URL image, a signed reasoning message
#: (base64, so that Gemini sends it too), assistant text with a tool call, a tool
#: result and a failed one, and a user message after the results.
REQUEST_HISTORY: list[Any] = [
    SystemMessage(id="s", content="Be brief."),
    DeveloperMessage(id="d", content="Use tools."),
    UserMessage(
        id="u",
        content=[
            TextPart(text="What is this?"),
            ImagePart(source=DataSource(value="iVBORw0KGgo=", mime_type="image/png")),
            ImagePart(source=UrlSource(value="https://example.com/cat.jpg", mime_type="image/jpeg")),
        ],
    ),
    ReasoningMessage(id="rs_1", content="thinking", encrypted_value="c2lnbmF0dXJl"),
    AssistantMessage(
        id="a",
        content="Let me look.",
        tool_calls=[ToolCall(id="call_1", function=FunctionCall(name="lookup", arguments='{"q":"cat"}'))],
    ),
    ToolMessage(id="t", tool_call_id="call_1", content="a cat"),
    ToolMessage(id="t2", tool_call_id="call_1", content="", error="timeout"),
    UserMessage(id="u2", content="thanks"),
]
#: A strict and a non-strict tool.
REQUEST_TOOLS = [
    LLMTool(name="lookup", description="Look up", parameters={"type": "object", "properties": {"q": {"type": "string"}}}, strict=True),
    LLMTool(name="other", description="Other", parameters={"type": "object", "properties": {}}),
]


@pytest.fixture
def fixture_bytes() -> Callable[[str, str], bytes]:
    return lambda provider, name: load_fixture(provider, name).body
