"""Gemini: whole function calls with minted ids, thought signatures, requests."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import pytest

from agui_engine.adapters.gemini import (
    MINTED_ID_PREFIX,
    GeminiClient,
    GeminiStreamParser,
    build_gemini_body,
    build_gemini_contents,
)
from agui_engine.adapters.provider import CompletionRequest, ProviderStream
from agui_engine.adapters.replay import load_fixture
from agui_engine.llm import (
    LLMTool,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)
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
    UserMessage,
)
from agui_engine.transports import ThreadedToolRunner

from .conftest import digest, digest_fixture, parse_chunks

W = "show_component_WeatherCard"


run = partial(digest_fixture, "gemini")


def test_whole_function_calls_get_minted_ids_and_their_arguments() -> None:
    d = run("tool_calls")
    assert d["text"] == "I'll show both cities."
    assert d["calls"] == [("minted_0", W, {"city": "Paris", "tempC": 18}), ("minted_1", W, {"city": "Oslo", "tempC": -3.5})]
    assert d["end"] == ("finish", "tool_calls", "STOP")


def test_thought_summary_and_the_signature_on_its_call() -> None:
    items = parse_chunks("gemini", [load_fixture("gemini", "reasoning").body])
    d = digest(items)
    assert d["reasoning"] == "**Checking the forecast**\nThe user wants two cities."
    assert d["signatures"] == ["CiQB0e2Kb7XqLm9Vb3JzZ0FpZ0U2"]
    starts = [item for item in items if isinstance(item, ToolCallStart)]
    assert [s.signature for s in starts] == ["CiQB0e2Kb7XqLm9Vb3JzZ0FpZ0U2", None]  # the first call's own
    assert not any(isinstance(item, ReasoningDelta) and item.signature for item in items)
    assert d["usage"] == (42, 124, 166, 88, None)  # output = candidates + thoughts


def test_usage_errors_truncation_blocked() -> None:
    assert run("usage")["usage"] == (2048, 5, 2053, None, 1920)
    assert run("usage")["end"] == ("finish", "length", "MAX_TOKENS")
    assert run("error_midstream")["end"] == ("error", "UNAVAILABLE", True)
    assert run("truncated")["end"] == ("error", "truncated", True)
    assert run("blocked")["end"] == ("error", "prompt_blocked", False)


def test_provider_ids_are_kept_and_default_ids_are_marked_minted() -> None:
    chunk = {"candidates": [{"content": {"parts": [{"functionCall": {"id": "fc-9", "name": "f"}}]}, "finishReason": "STOP"}]}
    stream = ProviderStream(GeminiStreamParser())
    items = stream.feed(b"data: " + msgspec.json.encode(chunk) + b"\r\n\r\n") + stream.close()
    assert items[:3] == [ToolCallStart(index=0, id="fc-9", name="f"), ToolCallArgsDelta(index=0, delta="{}"), ToolCallEnd(index=0)]
    chunk["candidates"][0]["content"]["parts"][0]["functionCall"].pop("id")  # type: ignore[index]
    stream = ProviderStream(GeminiStreamParser())
    items = stream.feed(b"data: " + msgspec.json.encode(chunk) + b"\n\n") + stream.close()
    assert isinstance(items[0], ToolCallStart) and items[0].id.startswith(MINTED_ID_PREFIX)


def test_request_body() -> None:
    minted = MINTED_ID_PREFIX + "abc"
    history = [
        SystemMessage(id="s", content="Be brief."),
        UserMessage(id="u", content=[TextPart(text="Weather?"), ImagePart(source=DataSource(value="AAAA", mime_type="image/png"))]),
        ReasoningMessage(id="r", content="summary", encrypted_value="c2lnLXR1cm4="),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(id=minted, function=FunctionCall(name="get_weather", arguments='{"city":"Paris"}')),
                ToolCall(id="fc-2", function=FunctionCall(name="get_weather", arguments='{"city":"Oslo"}'), encrypted_value="c2lnLWNhbGw="),
            ],
        ),
        ToolMessage(id="t1", tool_call_id=minted, content='{"tempC": 18}'),
        ToolMessage(id="t2", tool_call_id="fc-2", content="cold"),
        ReasoningMessage(id="r2", content="", encrypted_value="c2lnLXRleHQ="),
        AssistantMessage(id="a2", content="Done."),
    ]
    tools = [LLMTool(name="get_weather", description="Weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})]
    body = build_gemini_body(CompletionRequest(messages=history, tools=tools, tool_choice="required", max_output_tokens=99))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["tools"] == [{"functionDeclarations": [{"name": "get_weather", "description": "Weather", "parametersJsonSchema": tools[0].parameters}]}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {"maxOutputTokens": 99}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather?"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLXR1cm4="},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}, "id": "fc-2"}, "thoughtSignature": "c2lnLWNhbGw="},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"tempC": 18}}},
                {"functionResponse": {"name": "get_weather", "response": {"result": "cold"}, "id": "fc-2"}},
            ],
        },
        {"role": "model", "parts": [{"text": "Done.", "thoughtSignature": "c2lnLXRleHQ="}]},
    ]
    forced = build_gemini_body(CompletionRequest(messages=[], tools=tools, tool_choice="get_weather"))
    assert forced["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}


def test_another_providers_opaque_reasoning_is_not_sent_as_a_signature() -> None:
    history = [
        ReasoningMessage(id="r", content="", encrypted_value="rs_1:not base64!"),
        AssistantMessage(id="a", tool_calls=[ToolCall(id="fc-1", function=FunctionCall(name="f", arguments="{}"), encrypted_value="EqQ=")]),
    ]
    body = build_gemini_body(CompletionRequest(messages=history, tools=[]))
    assert body["contents"] == [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "id": "fc-1"}, "thoughtSignature": "EqQ="}]}]


def test_each_call_keeps_its_own_signature_and_a_text_signature_stays_on_the_text() -> None:
    history = [
        ReasoningMessage(id="r", content="", encrypted_value="dGV4dC1zaWc="),
        AssistantMessage(
            id="a",
            content="Checking.",
            tool_calls=[
                ToolCall(id="fc-1", function=FunctionCall(name="f", arguments="{}"), encrypted_value="Y2FsbC0x"),
                ToolCall(id="fc-2", function=FunctionCall(name="f", arguments="{}"), encrypted_value="Y2FsbC0y"),
            ],
        ),
    ]
    body = build_gemini_body(CompletionRequest(messages=history, tools=[]))
    assert body["contents"] == [
        {
            "role": "model",
            "parts": [
                {"text": "Checking.", "thoughtSignature": "dGV4dC1zaWc="},
                {"functionCall": {"name": "f", "args": {}, "id": "fc-1"}, "thoughtSignature": "Y2FsbC0x"},
                {"functionCall": {"name": "f", "args": {}, "id": "fc-2"}, "thoughtSignature": "Y2FsbC0y"},
            ],
        }
    ]


async def test_each_call_signature_goes_from_the_stream_through_a_run_back_onto_its_own_call() -> None:
    from agui_engine.loops.llm_agent import LLMAgent
    from agui_engine.protocol.events import (
        ReasoningEncryptedValueEvent,
        RunAgentInput,
        ToolCallStartEvent,
    )

    parts = [
        {"text": "Thinking it over.", "thought": True},
        {"functionCall": {"id": "fc-a", "name": "lookup", "args": {"q": "a"}}, "thoughtSignature": "c2lnLWE="},
        {"functionCall": {"id": "fc-b", "name": "lookup", "args": {"q": "b"}}, "thoughtSignature": "c2lnLWI="},
    ]
    first = b"data: " + msgspec.json.encode({"candidates": [{"content": {"role": "model", "parts": parts},
                                                              "finishReason": "STOP"}]}) + b"\r\n\r\n"
    second = b'data: {"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}, "finishReason": "STOP"}]}\r\n\r\n'
    requests: list[Any] = []

    class GeminiOverBytes:
        """The real Gemini parser over fixed response bodies; records each request's messages."""

        async def _items(self, body: bytes) -> Any:
            for item in parse_chunks("gemini", [body]):
                yield item

        def complete(self, messages: Any, tools: Any, tool_choice: str = "auto", **_: Any) -> Any:
            requests.append(build_gemini_body(CompletionRequest(messages=list(messages), tools=list(tools))))
            return self._items(first if len(requests) == 1 else second)

    def lookup(q: str) -> str:
        """Look up."""
        return q.upper()

    agent = LLMAgent(GeminiOverBytes(), tools=[lookup], tool_runner=ThreadedToolRunner(), inline_tools=["lookup"])
    events = [e async for e in agent.run(RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="go")]))]
    starts = {e.tool_call_id for e in events if isinstance(e, ToolCallStartEvent)}
    values = [(e.subtype, e.entity_id, e.encrypted_value) for e in events if isinstance(e, ReasoningEncryptedValueEvent)]
    assert starts == {"fc-a", "fc-b"}
    assert values == [("tool-call", "fc-a", "c2lnLWE="), ("tool-call", "fc-b", "c2lnLWI=")]
    model_turn = requests[1]["contents"][1]
    assert model_turn["role"] == "model"
    assert [(p["functionCall"]["id"], p.get("thoughtSignature")) for p in model_turn["parts"]] == [
        ("fc-a", "c2lnLWE="),
        ("fc-b", "c2lnLWI="),
    ]


def test_tool_result_for_an_unknown_call_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown tool call"):
        build_gemini_body(CompletionRequest(messages=[ToolMessage(id="t", tool_call_id="x", content="")], tools=[]))


def test_client_url_and_header() -> None:
    client = GeminiClient("gemini-2.5-flash", api_key="k", base_url="http://h")
    url, _ = client.build_request(CompletionRequest(messages=[], tools=[]))
    assert url == "http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert client.auth_headers() == {"x-goog-api-key": "k"} and "k" not in url


def test_an_error_written_as_bare_json_lines_is_an_error_not_truncation() -> None:
    body = load_fixture("gemini", "bare_json_error").body
    for chunks in ([body], [body[i : i + 1] for i in range(len(body))]):
        items = parse_chunks("gemini", chunks)
        assert items[0] == TextDelta(text="Paris is ")
        end = items[-1]
        assert isinstance(end, StreamError)
        assert end.code == "UNAVAILABLE" and end.retryable
        assert "The model is overloaded" in end.message
    # at the very start (nothing else in the body), as one line
    bare = b'{"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}\n'
    (only,) = parse_chunks("gemini", [bare])
    assert isinstance(only, StreamError) and only.code == "INVALID_ARGUMENT" and not only.retryable
    assert "API key not valid" in only.message


def test_a_signature_on_a_trailing_text_part_goes_back_on_that_part() -> None:
    # Gemini 3: the last text part carries the signature, streamed after the text, so the
    # history holds it as a reasoning message right after the assistant message.
    messages = [
        UserMessage(id="u1", content="hi"),
        AssistantMessage(id="a1", content="Hello world"),
        ReasoningMessage(id="r1", content="", encrypted_value="CiQB0e2Kb7XqTHJhaWxpbmc="),
        UserMessage(id="u2", content="again"),
    ]
    _, contents = build_gemini_contents(messages)
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [{"text": "Hello world", "thoughtSignature": "CiQB0e2Kb7XqTHJhaWxpbmc="}]
