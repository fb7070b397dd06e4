"""Anthropic Messages: stream normalisation (thinking signatures!) and requests."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from agui_engine.adapters.anthropic import (
    DEFAULT_ANTHROPIC_MAX_TOKENS,
    AnthropicClient,
    build_anthropic_body,
)
from agui_engine.adapters.provider import CompletionRequest
from agui_engine.adapters.replay import load_fixture
from agui_engine.llm import LLMTool, ReasoningDelta
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    DataSource,
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

from .conftest import digest, digest_fixture, parse_chunks

W = "show_component_WeatherCard"


run = partial(digest_fixture, "anthropic")


def test_tool_use_blocks_with_split_partial_json() -> None:
    d = run("tool_calls")
    assert d["text"] == "I'll show both cities."
    assert d["calls"] == [
        ("toolu_01A09q90qw90lq917835lq9", W, {"city": "Paris", "tempC": 18}),
        ("toolu_01B7n2kXb9YzQw8Vt3Lm4Pq", W, {"city": "Oslo", "tempC": -3.5}),
    ]
    assert d["end"] == ("finish", "tool_calls", "tool_use") and d["usage"] == (472, 112, 584, None, 0)


def test_thinking_signature_and_redacted_thinking_reach_the_client() -> None:
    items = parse_chunks("anthropic", [load_fixture("anthropic", "reasoning").body])
    d = digest(items)
    assert d["reasoning"] == "The user wants weather for Paris and Oslo. I'll show two cards."
    assert d["signatures"] == ["EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds2yQ8Zr"]
    assert d["encrypted"] == ["redacted_thinking:EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"]
    # The signature arrives after the thinking text and before the answer text.
    kinds = [type(i).__name__ for i in items]
    assert kinds.index("TextDelta") > max(i for i, it in enumerate(items) if isinstance(it, ReasoningDelta))


def test_usage_counts_cache_reads_and_writes_as_input() -> None:
    d = run("usage")
    # input_tokens 12 uncached + 2000 read + 36 written = 2048 in total.
    assert d["usage"] == (2048, 5, 2053, None, 2000) and d["end"] == ("finish", "length", "max_tokens")


def test_errors() -> None:
    assert run("error_midstream")["end"] == ("error", "overloaded_error", True)
    assert run("truncated")["end"] == ("error", "truncated", True)
    assert run("error_at_start")["end"] == ("error", "overloaded_error", True)


def test_request_body_merges_turns_and_replays_thinking() -> None:
    history = [
        SystemMessage(id="s", content="Be brief."),
        UserMessage(
            id="u",
            content=[
                TextPart(text="What is it?"),
                ImagePart(source=DataSource(value="AAAA", mime_type="image/png")),
                ImagePart(source=UrlSource(value="https://x/y.png")),
            ],
        ),
        ReasoningMessage(id="r1", content="Let me look.", encrypted_value="sig-1"),
        ReasoningMessage(id="r2", content="", encrypted_value="redacted_thinking:redacted-data"),
        ReasoningMessage(id="r4", content="", encrypted_value="sig-omitted"),  # signed, text omitted
        ReasoningMessage(id="r3", content="no signature: dropped"),
        AssistantMessage(
            id="a",
            content="Checking.",
            tool_calls=[
                ToolCall(id="toolu_1", function=FunctionCall(name="f", arguments='{"q": 1}')),
                ToolCall(id="toolu_2", function=FunctionCall(name="f", arguments="")),
            ],
        ),
        ToolMessage(id="t1", tool_call_id="toolu_1", content="one"),
        ToolMessage(id="t2", tool_call_id="toolu_2", content="", error="failed"),
        UserMessage(id="u2", content="and?"),
    ]
    tools = [LLMTool(name="f", description="F", parameters={"type": "object"}, strict=True)]
    body = build_anthropic_body("claude", CompletionRequest(messages=history, tools=tools, parallel_tool_calls=False))
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert body["max_tokens"] == DEFAULT_ANTHROPIC_MAX_TOKENS and body["stream"] is True
    assert body["tools"] == [{"name": "f", "description": "F", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "redacted-data"},
                {"type": "thinking", "thinking": "", "signature": "sig-omitted"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error: failed", "is_error": True},
                {"type": "text", "text": "and?"},
            ],
        },
    ]


def test_tool_choice_forms_and_bad_arguments() -> None:
    tools = [LLMTool(name="f", description="F", parameters={})]
    def choice(tc: str) -> Any:
        return build_anthropic_body("m", CompletionRequest(messages=[], tools=tools, tool_choice=tc))["tool_choice"]

    assert choice("required") == {"type": "any", "disable_parallel_tool_use": False}
    assert choice("none") == {"type": "none"}
    assert choice("f") == {"type": "tool", "name": "f", "disable_parallel_tool_use": False}
    bad = [AssistantMessage(id="a", tool_calls=[ToolCall(id="t", function=FunctionCall(name="f", arguments="[1]"))])]
    with pytest.raises(UsageError, match="JSON object"):
        build_anthropic_body("m", CompletionRequest(messages=bad, tools=[]))


def test_client_headers_and_thinking_option() -> None:
    client = AnthropicClient("claude", api_key="k", base_url="http://h", thinking={"type": "enabled", "budget_tokens": 1024})
    url, body = client.build_request(CompletionRequest(messages=[], tools=[], max_output_tokens=4096))
    assert url == "http://h/v1/messages" and body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 4096
    assert client.auth_headers() == {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def test_strict_tools_only_when_asked_and_only_on_strict_tools() -> None:
    tools = [
        LLMTool(name="f", description="F", parameters={"type": "object", "additionalProperties": False}, strict=True),
        LLMTool(name="g", description="G", parameters={"type": "object"}),
    ]
    request = CompletionRequest(messages=[], tools=tools)
    _, default = AnthropicClient("claude", api_key="k").build_request(request)
    assert all("strict" not in tool for tool in default["tools"])  # off by default
    _, strict = AnthropicClient("claude", api_key="k", strict_tools=True).build_request(request)
    assert [tool.get("strict") for tool in strict["tools"]] == [True, None]
