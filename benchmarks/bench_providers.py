"""Provider stream parsing: our adapters against the official SDKs' own stream decoding.

Workload: one long model answer as the provider sends it -- 600 text deltas, then two
parallel tool calls whose arguments arrive in 400 fragments each, then usage -- cut
into 1460-byte slices (one TCP segment each), as a socket delivers them.

* ``ours``: ``ProviderStream`` (the engine's ``SSEDecoder`` + the provider's parser) ->
  normalised ``LLMStreamItem``s (text, tool-call start/args/end routed by index, usage,
  finish): everything the decision loop needs.
* ``sdk-json``: the SDK's own ``SSEDecoder`` + ``json.loads`` of every frame -- the least
  a client must do, with no normalisation at all (a lower bound for the SDK).
* ``sdk-objects``: what the SDK's ``Stream`` really yields: each frame built into its
  typed chunk object with ``construct_type`` (openai ``ChatCompletionChunk``, anthropic
  ``RawMessageStreamEvent``), still without routing tool calls or joining arguments.

Run: ``pytest benchmarks/bench_providers.py --benchmark-enable --benchmark-only``; the
summary prints each alternative's ratio to ours (benchmarks/conftest.py). The SDKs are
test-only dependencies; without them the SDK rows are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from adapters.anthropic import AnthropicStreamParser
from adapters.openai_chat import ChatStreamParser
from adapters.provider import ProviderStream, StreamParser

TCP_SEGMENT = 1460
TEXT_DELTAS = 600
ARG_FRAGMENTS = 400


def _chat_body() -> bytes:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    frames: list[dict[str, Any]] = []
    for i in range(TEXT_DELTAS):
        frames.append({**head, "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]})
    for call in range(2):
        first = {"index": call, "id": f"call_{call}", "type": "function", "function": {"name": "show", "arguments": ""}}
        frames.append({**head, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]})
        for j in range(ARG_FRAGMENTS):
            fragment = '{"items": [' if j == 0 else ("]}" if j == ARG_FRAGMENTS - 1 else f'"v{j}", ')
            delta = {"tool_calls": [{"index": call, "function": {"arguments": fragment}}]}
            frames.append({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    frames.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    frames.append({**head, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2000, "total_tokens": 2010}})
    return b"".join(b"data: " + msgspec.json.encode(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n"


def _anthropic_body() -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude",
         "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"word{i} "}} for i in range(TEXT_DELTAS)]
    events.append({"type": "content_block_stop", "index": 0})
    for block in (1, 2):
        events.append({"type": "content_block_start", "index": block,
                       "content_block": {"type": "tool_use", "id": f"toolu_{block}", "name": "show", "input": {}}})
        for j in range(ARG_FRAGMENTS):
            fragment = '{"items": [' if j == 0 else ("]}" if j == ARG_FRAGMENTS - 1 else f'"v{j}", ')
            events.append({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": fragment}})
        events.append({"type": "content_block_stop", "index": block})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 2000}})
    events.append({"type": "message_stop"})
    return b"".join(f"event: {e['type']}\ndata: ".encode() + msgspec.json.encode(e) + b"\n\n" for e in events)


def _segments(body: bytes) -> list[bytes]:
    return [body[i : i + TCP_SEGMENT] for i in range(0, len(body), TCP_SEGMENT)]


BODIES = {"openai-chat": _segments(_chat_body()), "anthropic": _segments(_anthropic_body())}
PARSERS: dict[str, Callable[[], StreamParser]] = {"openai-chat": ChatStreamParser, "anthropic": AnthropicStreamParser}


def _ours(provider: str) -> Callable[[], int]:
    chunks = BODIES[provider]
    factory = PARSERS[provider]

    def run() -> int:
        stream = ProviderStream(factory())
        n = 0
        for chunk in chunks:
            n += len(stream.feed(chunk))
        return n + len(stream.close())

    return run


def _sdk(provider: str, objects: bool) -> Callable[[], int]:
    chunks = BODIES[provider]
    if provider == "openai-chat":
        streaming = pytest.importorskip("openai._streaming")
        models = pytest.importorskip("openai._models")
        from openai.types.chat import ChatCompletionChunk as target
    else:
        streaming = pytest.importorskip("anthropic._streaming")
        models = pytest.importorskip("anthropic._models")
        from anthropic.types import RawMessageStreamEvent as target  # type: ignore[assignment]

    def run() -> int:
        n = 0
        for sse in streaming.SSEDecoder().iter_bytes(iter(chunks)):
            if sse.data.startswith("[DONE]"):
                break
            data = json.loads(sse.data)
            if objects:
                models.construct_type(type_=target, value=data)
            n += 1
        return n

    return run


@pytest.mark.parametrize("impl", ["ours", "sdk-json", "sdk-objects"])
@pytest.mark.parametrize("provider", list(BODIES))
def test_provider_stream(benchmark: Any, provider: str, impl: str) -> None:
    benchmark.group = f"providers-{provider}"
    func = _ours(provider) if impl == "ours" else _sdk(provider, objects=impl == "sdk-objects")
    assert benchmark(func) > TEXT_DELTAS
