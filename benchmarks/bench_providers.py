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
  typed chunk object with ``construct_type`` (openai ``ChatCompletionChunk`` /
  ``ResponseStreamEvent``, anthropic ``RawMessageStreamEvent``; google-genai's converter
  and pydantic ``GenerateContentResponse``), still without routing tool calls or
  joining arguments.

Providers: OpenAI Chat, OpenAI Responses, Anthropic (``event:`` lines) and Gemini
(CRLF frames; its calls arrive whole, so its tool-call part is one chunk).

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

from agui_engine.adapters.anthropic import AnthropicStreamParser
from agui_engine.adapters.gemini import GeminiStreamParser
from agui_engine.adapters.openai_chat import ChatStreamParser
from agui_engine.adapters.openai_responses import ResponsesStreamParser
from agui_engine.adapters.provider import ProviderStream, StreamParser

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


def _responses_body() -> bytes:
    seq = iter(range(10**6))
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_bench", "object": "response", "created_at": 1, "status": "in_progress",
         "model": "gpt-4.1", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "msg_bench", "type": "message", "status": "in_progress", "role": "assistant", "content": []}},
    ]
    events += [{"type": "response.output_text.delta", "item_id": "msg_bench", "output_index": 0, "content_index": 0,
                "delta": f"word{i} ", "logprobs": []} for i in range(TEXT_DELTAS)]
    for call in (1, 2):
        item = {"id": f"fc_{call}", "type": "function_call", "status": "in_progress", "call_id": f"call_{call}", "name": "show", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": call, "item": item})
        fragments = ['{"items": [' if j == 0 else ("]}" if j == ARG_FRAGMENTS - 1 else f'"v{j}", ') for j in range(ARG_FRAGMENTS)]
        events += [{"type": "response.function_call_arguments.delta", "item_id": f"fc_{call}", "output_index": call, "delta": f}
                   for f in fragments]
        events.append({"type": "response.output_item.done", "output_index": call,
                       "item": {**item, "status": "completed", "arguments": "".join(fragments)}})
    events.append({"type": "response.completed", "response": {"id": "resp_bench", "object": "response", "created_at": 1,
                   "status": "completed", "model": "gpt-4.1", "output": [],
                   "usage": {"input_tokens": 10, "output_tokens": 2000, "total_tokens": 2010,
                             "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}})
    return b"".join(
        f"event: {e['type']}\ndata: ".encode() + msgspec.json.encode({**e, "sequence_number": next(seq)}) + b"\n\n" for e in events
    )


def _gemini_body() -> bytes:
    """Gemini streams whole calls (no argument fragments): the calls come in one chunk,
    each with the full 400-element argument array."""
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": f"word{i} "}]}, "index": 0}], "modelVersion": "gemini-2.5-flash"}
        for i in range(TEXT_DELTAS)
    ]
    calls = [{"functionCall": {"name": "show", "args": {"items": [f"v{j}" for j in range(ARG_FRAGMENTS)]}}} for _ in range(2)]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": calls}, "finishReason": "STOP", "index": 0}],
                   "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2000, "totalTokenCount": 2010},
                   "modelVersion": "gemini-2.5-flash"})
    return b"".join(b"data: " + msgspec.json.encode(c) + b"\r\n\r\n" for c in chunks)


def _segments(body: bytes) -> list[bytes]:
    return [body[i : i + TCP_SEGMENT] for i in range(0, len(body), TCP_SEGMENT)]


BODIES = {
    "openai-chat": _segments(_chat_body()),
    "openai-responses": _segments(_responses_body()),
    "anthropic": _segments(_anthropic_body()),
    "gemini": _segments(_gemini_body()),
}
PARSERS: dict[str, Callable[[], StreamParser]] = {
    "openai-chat": ChatStreamParser,
    "openai-responses": ResponsesStreamParser,
    "anthropic": AnthropicStreamParser,
    "gemini": GeminiStreamParser,
}


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
    if provider == "gemini":
        return _genai(objects)
    if provider == "openai-chat":
        streaming = pytest.importorskip("openai._streaming")
        models = pytest.importorskip("openai._models")
        from openai.types.chat import ChatCompletionChunk as target
    elif provider == "openai-responses":
        streaming = pytest.importorskip("openai._streaming")
        models = pytest.importorskip("openai._models")
        from openai.types.responses import ResponseStreamEvent as target  # type: ignore[assignment]
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


def _genai(objects: bool) -> Callable[[], int]:
    """google-genai's own stream reading: its SSE line decoder and ``json.loads``
    (``HttpResponse.segments``), then for ``sdk-objects`` its REST-to-model converter
    and the pydantic ``GenerateContentResponse``, as ``generate_content_stream`` does."""
    httpx = pytest.importorskip("httpx")
    api_client = pytest.importorskip("google.genai._api_client")
    genai_models = pytest.importorskip("google.genai.models")
    genai_types = pytest.importorskip("google.genai.types")
    chunks = BODIES["gemini"]

    def run() -> int:
        response = httpx.Response(200, content=iter(chunks))
        n = 0
        for segment in api_client.HttpResponse(headers={}, response_stream=response).segments():
            if objects:
                converted = genai_models._GenerateContentResponse_from_mldev(segment, None, None)
                genai_types.GenerateContentResponse._from_response(response=converted, kwargs={})
            n += 1
        return n

    return run


@pytest.mark.parametrize("impl", ["ours", "sdk-json", "sdk-objects"])
@pytest.mark.parametrize("provider", list(BODIES))
def test_provider_stream(benchmark: Any, provider: str, impl: str) -> None:
    benchmark.group = f"providers-{provider}"
    func = _ours(provider) if impl == "ours" else _sdk(provider, objects=impl == "sdk-objects")
    assert benchmark(func) > TEXT_DELTAS
