"""OpenAI Chat Completions / OpenAI-compatible: stream normalisation and requests."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import pytest

from agui_engine.adapters.openai_chat import (
    ChatStreamParser,
    OpenAIChatClient,
    OpenAICompatibleClient,
    build_chat_body,
    encode_chat_stream,
)
from agui_engine.adapters.provider import CompletionRequest, ProviderStream
from agui_engine.adapters.replay import load_fixture
from agui_engine.llm import (
    Finish,
    LLMTool,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UnknownToolChoiceError,
)
from agui_engine.protocol.errors import UsageError

from .conftest import REQUEST_HISTORY, digest, digest_fixture, parse_chunks

W = "show_component_WeatherCard"




run_chat = partial(digest_fixture, "openai_chat")
run_compatible = partial(digest_fixture, "openai_compatible")


def test_parallel_tool_calls_with_split_arguments() -> None:
    d = run_chat("tool_calls")
    assert d["calls"] == [
        ("call_Q1aXv7", W, {"_tambo_statusMessage": "Showing Paris", "city": "Paris", "tempC": 18}),
        ("call_R2bYw8", W, {"_tambo_statusMessage": "Showing Oslo", "city": "Oslo", "tempC": -3.5}),
    ]
    assert d["end"] == ("finish", "tool_calls", "tool_calls")
    assert d["usage"] == (81, 46, 127, 0, 0)


def test_text_usage_reasoning_tokens_and_length() -> None:
    assert run_chat("text")["text"] == "Paris is sunny and Oslo is rainy. \u2614 \u00e9t\u00e9 \U0001f600"
    reasoning = run_chat("reasoning")
    assert reasoning["text"] == "The answer is 42." and reasoning["usage"] == (30, 202, 232, 192, 0)
    usage = run_chat("usage")
    assert usage["usage"] == (2048, 5, 2053, 0, 1920) and usage["end"] == ("finish", "length", "length")


def test_in_band_error_and_missing_done() -> None:
    error = run_chat("error_midstream")
    assert error["text"] == "Paris is " and error["end"] == ("error", "server_error", True)
    truncated = run_chat("truncated")
    assert truncated["end"] == ("error", "truncated", True)
    assert truncated["calls"] == [("call_Q1aXv7", W, ("partial", '{"city": "Par'))]


def test_compatible_reasoning_fields_and_quirks() -> None:
    deepseek = run_compatible("reasoning")
    assert deepseek["reasoning"] == "The user asks 2+2. That is 4." and deepseek["text"] == "2 + 2 = 4"
    assert deepseek["usage"] == (9, 20, 29, 14, None)
    openrouter = run_compatible("reasoning_openrouter")
    assert openrouter["reasoning"] == "Thinking about Oslo." and openrouter["text"] == "Oslo is cold."
    # Name + whole arguments in one fragment without an index, on the finishing chunk
    # that also carries text: nothing is lost.
    atomic = run_compatible("atomic_tool_call")
    assert atomic["text"] == "Here you go. One card:"
    assert atomic["calls"] == [("call_x9", W, {"city": "Rome", "tempC": 24})]
    assert atomic["end"] == ("finish", "tool_calls", "tool_calls")  # EOF after finish_reason is fine here
    assert run_compatible("error_midstream")["end"] == ("error", "InternalServerError", True)
    assert run_compatible("truncated")["end"] == ("error", "truncated", True)


def _feed(parser: ChatStreamParser, *chunks: dict[str, Any] | str) -> list[Any]:
    stream = ProviderStream(parser)
    data = b"".join(
        b"data: " + (c.encode() if isinstance(c, str) else msgspec.json.encode(c)) + b"\n\n" for c in chunks
    )
    return stream.feed(data) + stream.close()


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_repeated_ids_arguments_before_the_name_and_reused_index() -> None:
    items = _feed(
        ChatStreamParser(provider="openai-compatible", id_factory=lambda: "minted"),
        _delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a":'}}]),  # args before id/name
        _delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "1}"}}]),
        _delta(tool_calls=[{"index": 0, "id": "c1", "function": {"arguments": ""}}]),  # id repeated
        _delta(tool_calls=[{"index": 0, "id": "c2", "function": {"name": "g", "arguments": "{}"}}]),  # new id, same index
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    )
    d = digest(items)
    assert d["calls"] == [("c1", "f", {"a": 1}), ("c2", "g", {})]


def test_name_without_an_id_gets_a_minted_one_and_other_choices_are_ignored() -> None:
    items = _feed(
        ChatStreamParser(id_factory=lambda: "minted"),
        {"choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        _delta(tool_calls=[{"index": 0, "function": {"name": "f", "arguments": {"x": 1}}}]),
        "[DONE]",
    )
    assert items[0] == ToolCallStart(index=0, id="minted", name="f")
    assert items[1] == ToolCallArgsDelta(index=0, delta='{"x":1}')
    assert isinstance(items[-1], Finish) and items[-1].reason == "tool_calls"


def test_refusal_is_user_visible_text_and_content_filter_maps() -> None:
    items = _feed(
        ChatStreamParser(),
        _delta(refusal="I can't help with that."),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]},
        "[DONE]",
    )
    assert items == [TextDelta(text="I can't help with that."), Finish(reason="content_filter", raw_reason="content_filter")]


def test_nothing_after_done_and_error_as_string() -> None:
    assert _feed(ChatStreamParser(), "[DONE]", _delta(content="late")) == [Finish(reason="stop", raw_reason=None)]
    items = _feed(ChatStreamParser(), {"error": "boom"})
    assert isinstance(items[-1], StreamError) and "boom" in items[-1].message


# --------------------------------------------------------------------------- requests

TOOLS = [
    LLMTool(name=W, description="A weather card", parameters={"type": "object", "properties": {}}, strict=True),
    LLMTool(name="lookup", description="Look up", parameters={"type": "object"}),
]

HISTORY = REQUEST_HISTORY


def test_request_body_openai() -> None:
    body = build_chat_body("gpt-4o", CompletionRequest(messages=HISTORY, tools=TOOLS, max_output_tokens=100))
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "parallel_tool_calls" not in body and body["tool_choice"] == "auto"  # on: the API default
    assert body["max_completion_tokens"] == 100
    assert body["tools"][0] == {
        "type": "function",
        "function": {"name": W, "description": "A weather card", "parameters": {"type": "object", "properties": {}}, "strict": True},
    }
    assert "strict" not in body["tools"][1]["function"]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use tools."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"cat"}'}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: timeout"},
        {"role": "user", "content": "thanks"},
    ]


def test_request_body_compatible_and_tool_choice_forms() -> None:
    body = build_chat_body(
        "m",
        CompletionRequest(messages=HISTORY[:2], tools=TOOLS, tool_choice="lookup", max_output_tokens=5),
        compatible=True,
        strict_tools=False,
    )
    assert body["messages"][1] == {"role": "system", "content": "Use tools."}
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert "strict" not in body["tools"][0]["function"] and body["max_tokens"] == 5
    assert build_chat_body(
        "m", CompletionRequest(messages=HISTORY[:1], tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    )["parallel_tool_calls"] is False
    no_tools = build_chat_body("m", CompletionRequest(messages=HISTORY[:1], tools=[], tool_choice="required"))
    assert "tools" not in no_tools and "parallel_tool_calls" not in no_tools and "tool_choice" not in no_tools
    with pytest.raises(UnknownToolChoiceError, match="'nope' is not one of the tools offered"):
        build_chat_body("m", CompletionRequest(messages=HISTORY[:1], tools=TOOLS, tool_choice="nope"))


def test_clients_read_keys_and_base_urls_from_the_environment() -> None:
    env = {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "http://proxy/v1"}
    client = OpenAIChatClient("gpt-4o", env=env)
    assert client.base_url == "http://proxy/v1" and client.auth_headers() == {"authorization": "Bearer sk-env"}
    assert "sk-env" not in repr(client)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        OpenAIChatClient("gpt-4o", env={})
    # The OpenAI key is never sent to a third-party server.
    local = OpenAICompatibleClient("llama", base_url="http://localhost:8000/v1", env=env)
    assert local.auth_headers() == {}
    keyed = OpenAICompatibleClient("llama", base_url="http://x/v1", env={"OPENAI_COMPATIBLE_API_KEY": "k"})
    assert keyed.auth_headers() == {"authorization": "Bearer k"}


async def test_encode_chat_stream_round_trips_through_the_parser() -> None:
    for provider in ("openai_chat", "openai_compatible", "anthropic", "gemini", "openai_responses"):
        for name in ("tool_calls", "text", "reasoning", "error_midstream"):
            original = parse_chunks(provider, [load_fixture(provider, name).body])

            async def source() -> Any:
                for item in original:  # noqa: B023 (consumed within the iteration)
                    yield item

            wire = b"".join([chunk async for chunk in encode_chat_stream(source(), model="m")])
            again = parse_chunks("openai_compatible", [wire])
            a, b = digest(original), digest(again)
            # Signatures and encrypted reasoning have no Chat field; all else survives.
            for key in ("text", "reasoning", "calls"):
                assert a[key] == b[key], (provider, name, key)
            assert a["end"][:2] == b["end"][:2] or a["end"][0] == b["end"][0] == "error"


def test_a_tool_name_streamed_in_pieces_starts_the_call_with_the_whole_name() -> None:
    fixture = load_fixture("openai_compatible", "split_tool_name")
    for chunks in ([fixture.body], [fixture.body[i : i + 1] for i in range(len(fixture.body))]):
        items = parse_chunks("openai_compatible", chunks)
        starts = [i for i in items if isinstance(i, ToolCallStart)]
        assert starts == [ToolCallStart(index=0, id="call_s1", name="show_component_WeatherCard")]
        assert digest(items)["calls"] == [("call_s1", "show_component_WeatherCard", {"city": "Paris", "tempC": 18})]
    # Split name with no arguments at all: started at finish; a name repeated whole on
    # every fragment is not doubled; two calls each get their own joined name.
    items = _feed(
        ChatStreamParser(provider="openai-compatible"),
        _delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "get_", "arguments": ""}}]),
        _delta(tool_calls=[{"index": 0, "function": {"name": "time"}}]),
        _delta(tool_calls=[{"index": 1, "id": "b", "function": {"name": "f"}}]),
        _delta(tool_calls=[{"index": 1, "function": {"name": "f", "arguments": "{}"}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    )
    assert [(i.index, i.name) for i in items if isinstance(i, ToolCallStart)] == [(0, "get_time"), (1, "f")]
    assert digest(items)["calls"] == [("a", "get_time", {}), ("b", "f", {})]
