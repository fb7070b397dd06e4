"""OpenAI Responses API: stream normalisation and requests."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import pytest

from agui_engine.adapters.openai_responses import (
    OpenAIResponsesClient,
    ResponsesStreamParser,
    build_responses_body,
)
from agui_engine.adapters.provider import CompletionRequest, ProviderStream
from agui_engine.llm import LLMTool, ReasoningDelta, StreamError
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    FileSource,
    FunctionCall,
    ImagePart,
    ReasoningMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from .conftest import digest, digest_fixture

W = "show_component_WeatherCard"


run = partial(digest_fixture, "openai_responses")


def test_function_calls_use_call_id_and_route_by_item_id() -> None:
    d = run("tool_calls")
    assert d["text"] == "Checking both cities."
    assert d["calls"] == [
        ("call_A1b2C3", W, {"city": "Paris", "tempC": 18}),
        ("call_D4e5F6", W, {"city": "Oslo", "tempC": -3.5}),
    ]
    assert d["end"] == ("finish", "tool_calls", "completed") and d["usage"] == (75, 60, 135, 0, 0)


def test_reasoning_summaries_and_encrypted_content() -> None:
    d = run("reasoning")
    assert d["reasoning"] == "**Planning lookups**\n\nI need the weather for two cities.\n\nThen I answer."
    assert d["encrypted"] == ["rs_68a1f0c3aa01:gAAAAABoXyZ1c2VjcmV0LXJlYXNvbmluZy1ibG9i"]
    assert d["usage"] == (75, 160, 235, 128, 0)


def test_text_incomplete_error_truncated() -> None:
    assert run("text")["text"] == "Paris is sunny and Oslo is rainy."
    usage = run("usage")
    assert usage["end"] == ("finish", "length", "max_output_tokens") and usage["usage"] == (2048, 5, 2053, 0, 1920)
    error = run("error_midstream")
    assert error["text"] == "Paris is " and error["end"] == ("error", "server_error", True)
    assert run("truncated")["end"] == ("error", "truncated", True)


def _events(*events: dict[str, Any]) -> list[Any]:
    stream = ProviderStream(ResponsesStreamParser())
    data = b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + msgspec.json.encode(e) + b"\n\n" for e in events
    )
    return stream.feed(data) + stream.close()


def test_failed_alone_arguments_only_in_done_and_raw_reasoning_text() -> None:
    items = _events(
        {"type": "response.output_item.added", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"x":1}'},
        {"type": "response.output_item.done", "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"x":1}'}},
        {"type": "response.reasoning_text.delta", "item_id": "rs", "delta": "raw thought"},
        {"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}},
    )
    d = digest(items)
    assert d["calls"] == [("call_1", "f", {"x": 1})] and d["reasoning"] == "raw thought"
    assert items[-1] == StreamError(message="openai error (server_error): boom", code="server_error", retryable=True)


def test_event_line_must_match_data_type_and_sequence_must_grow() -> None:
    stream = ProviderStream(ResponsesStreamParser())
    items = stream.feed(b'event: response.created\ndata: {"type":"response.completed","sequence_number":0}\n\n')
    assert isinstance(items[-1], StreamError) and "disagrees" in items[-1].message
    stream = ProviderStream(ResponsesStreamParser())
    data = b'data: {"type":"response.created","sequence_number":3}\n\ndata: {"type":"response.in_progress","sequence_number":2}\n\n'
    items = stream.feed(data)
    assert isinstance(items[-1], StreamError) and "sequence_number 2 after 3" in items[-1].message


def test_request_body() -> None:
    history = [
        DeveloperMessage(id="d", content="Be brief."),
        UserMessage(
            id="u",
            content=[
                TextPart(text="Look"),
                ImagePart(source=DataSource(value="AAAA", mime_type="image/jpeg")),
                ImagePart(source=FileSource(value="file-123")),
            ],
        ),
        ReasoningMessage(id="engine-id", content="I thought", encrypted_value="rs_1:enc"),
        ReasoningMessage(id="engine-id-2", content="no item id known", encrypted_value="enc-without-id"),
        AssistantMessage(id="a", content="Sure.", tool_calls=[ToolCall(id="call_1", function=FunctionCall(name="f", arguments="{}"))]),
        ToolMessage(id="t", tool_call_id="call_1", content="done"),
    ]
    tools = [LLMTool(name="f", description="F", parameters={"type": "object"}, strict=True)]
    request = CompletionRequest(messages=history, tools=tools, tool_choice="f", max_output_tokens=64)
    body = build_responses_body("o4-mini", request, reasoning={"effort": "low", "summary": "auto"})
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"] and body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["tools"] == [{"type": "function", "name": "f", "description": "F", "parameters": {"type": "object"}, "strict": True}]
    assert body["tool_choice"] == {"type": "function", "name": "f"} and "parallel_tool_calls" not in body
    off = build_responses_body("m", CompletionRequest(messages=[], tools=tools, parallel_tool_calls=False))
    assert off["parallel_tool_calls"] is False
    assert body["max_output_tokens"] == 64
    assert body["input"] == [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA", "detail": "auto"},
                {"type": "input_image", "file_id": "file-123", "detail": "auto"},
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "I thought"}], "encrypted_content": "enc"},
        {"role": "assistant", "content": "Sure."},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
    ]
    plain = build_responses_body("gpt-4o", CompletionRequest(messages=history, tools=[]))
    assert "reasoning" not in plain and all(i.get("type") != "reasoning" for i in plain["input"])
    # strict=False is said explicitly: the Responses API would default it to true.
    loose = build_responses_body("m", CompletionRequest(messages=[], tools=[LLMTool(name="g", description="", parameters={})]))
    assert loose["tools"][0]["strict"] is False
    with pytest.raises(UsageError):
        build_responses_body("m", CompletionRequest(messages=[], tools=tools, tool_choice="h"))


def test_client_url() -> None:
    client = OpenAIResponsesClient("o4-mini", api_key="k", base_url="http://h/v1")
    url, _ = client.build_request(CompletionRequest(messages=[], tools=[]))
    assert url == "http://h/v1/responses"
    assert ReasoningDelta(encrypted="x").text == ""
