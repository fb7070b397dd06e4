"""Every provider fixture through the real adapter and LLMAgent: a run that passes our
verifier and ag-ui-validate, components streaming from the split tool-call arguments,
reasoning signatures reaching the client and going back to the provider."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

from agui_engine.adapters.replay import PROVIDERS, ReplayServer, fixture_names, load_fixture
from agui_engine.genui.components import Component
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import (
    CustomEvent,
    ReasoningEncryptedValueEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
    UserMessage,
)
from agui_engine.protocol.verify import verify_events

from .conftest import digest, parse_chunks
from .test_provider import CLIENTS, KEY

WEATHER_CARD = Component(
    "WeatherCard",
    "Shows the weather of one city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "tempC": {"type": "number"}},
        "required": ["city", "tempC"],
    },
)
RUNS = [(p, n) for p in PROVIDERS for n in fixture_names(p)]


async def _no_sleep(delay: float) -> None:
    pass


async def _run(provider: str, *script: str) -> tuple[list[Any], ReplayServer]:
    async with ReplayServer() as server:
        client = CLIENTS[provider]("m", api_key=KEY, base_url=server.base_url(provider, *script), sleep=_no_sleep)
        agent = LLMAgent(client, components=[WEATHER_CARD])
        run_input = RunAgentInput(
            thread_id="thread-1", run_id="run-1", messages=[UserMessage(id="u1", content="Weather in Paris and Oslo?")]
        )
        events = [event async for event in agent.run(run_input)]
        await client.aclose()
    return events, server


@pytest.mark.parametrize(("provider", "name"), RUNS)
async def test_fixture_through_llm_agent_is_a_valid_run(provider: str, name: str) -> None:
    fixture = load_fixture(provider, name)
    # After a component the agent calls the model again: that call gets the text answer.
    events, server = await _run(provider, name, "text")
    assert verify_events(events) == []
    assert_valid_agui([msgspec.json.decode(encode_event(e)) for e in events], max_warnings=0)
    assert KEY not in repr(events)

    if not fixture.is_stream:
        if fixture.status == 429 or fixture.status >= 500:  # retried inside the adapter, then the text
            assert isinstance(events[-1], RunFinishedEvent) and len(server.requests) == 2
        else:  # not retryable: one request, RUN_ERROR with the provider's code, the key redacted
            assert isinstance(events[-1], RunErrorEvent) and len(server.requests) == 1
            assert events[-1].code == "invalid_api_key" and "[redacted]" in events[-1].message
        return
    expected = digest(parse_chunks(provider, [fixture.body]))
    if name == "error_at_start":  # failed before its first item: retried, the client never knew
        assert isinstance(events[-1], RunFinishedEvent) and len(server.requests) == 2
        return
    if expected["end"][0] == "error":
        assert isinstance(events[-1], RunErrorEvent)
        assert events[-1].code == expected["end"][1]
        # What was open is closed before RUN_ERROR: text, reasoning message and span.
        # (A tool call cut mid-arguments stays open: an END would claim them complete.)
        kinds = [type(e).__name__ for e in events]
        for start, end in (("TextMessageStart", "TextMessageEnd"), ("ReasoningMessageStart", "ReasoningMessageEnd"), ("ReasoningStart", "ReasoningEnd")):
            assert kinds.count(start) == kinds.count(end), (start, kinds)
        return
    assert isinstance(events[-1], RunFinishedEvent)
    calls = [c for c in expected["calls"] if c[1] == "show_component_WeatherCard"]
    ends = [e.value for e in events if isinstance(e, CustomEvent) and e.name == "tambo.component.end"]
    assert [end["finalProps"] for end in ends] == [
        {k: v for k, v in args.items() if not k.startswith("_tambo_")} for _, _, args in calls
    ]
    if calls:
        deltas = [e for e in events if isinstance(e, CustomEvent) and e.name == "tambo.component.props_delta"]
        args_events = [e for e in events if isinstance(e, ToolCallArgsEvent)]
        # Props stream as the arguments arrive: split arguments give several deltas per card.
        split = provider != "gemini" and name == "tool_calls"
        assert len(deltas) >= (2 * len(calls) if split else len(calls))
        assert len(args_events) >= (2 * len(calls) if split else len(calls))
        assert len(server.requests) == 2  # the model was called again with the results
    blobs = [e.encrypted_value for e in events if isinstance(e, ReasoningEncryptedValueEvent)]
    assert blobs == expected["signatures"] + expected["encrypted"] or sorted(blobs) == sorted(
        expected["signatures"] + expected["encrypted"]
    )


def _second_request(server: ReplayServer) -> dict[str, Any]:
    assert len(server.requests) == 2
    body = server.requests[1].json
    assert isinstance(body, dict)
    return body


async def test_gemini_signature_and_minted_ids_go_back_correctly() -> None:
    events, server = await _run("gemini", "reasoning", "text")
    assert isinstance(events[-1], RunFinishedEvent)
    model_turn, results = _second_request(server)["contents"][1:3]
    assert model_turn["role"] == "model"
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == "CiQB0e2Kb7XqLm9Vb3JzZ0FpZ0U2"
    assert "thoughtSignature" not in calls[1]  # only the call it came with
    # the client got it tied to that tool call, not to a reasoning message
    (value,) = [e for e in events if isinstance(e, ReasoningEncryptedValueEvent)]
    first_call = next(e for e in events if isinstance(e, ToolCallStartEvent))
    assert (value.subtype, value.entity_id) == ("tool-call", first_call.tool_call_id)
    assert all("id" not in p["functionCall"] for p in calls)  # minted ids stay ours
    assert [p["functionResponse"]["name"] for p in results["parts"]] == ["show_component_WeatherCard"] * 2


async def test_responses_encrypted_reasoning_and_call_ids_go_back() -> None:
    from agui_engine.adapters.openai_responses import OpenAIResponsesClient

    async with ReplayServer() as server:
        client = OpenAIResponsesClient(
            "o4-mini", api_key=KEY, base_url=server.base_url("openai_responses", "reasoning", "text"), reasoning={"effort": "low"}
        )
        agent = LLMAgent(client, components=[WEATHER_CARD])
        run_input = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="Paris?")])
        events = [e async for e in agent.run(run_input)]
        await client.aclose()
    assert isinstance(events[-1], RunFinishedEvent)
    items = _second_request(server)["input"]
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert reasoning == [
        {
            "type": "reasoning",
            "id": "rs_68a1f0c3aa01",
            "summary": [{"type": "summary_text", "text": "**Planning lookups**\n\nI need the weather for two cities.\n\nThen I answer."}],
            "encrypted_content": "gAAAAABoXyZ1c2VjcmV0LXJlYXNvbmluZy1ibG9i",
        }
    ]
    assert [i["call_id"] for i in items if i.get("type") == "function_call_output"] == ["call_A1b2C3"]


async def test_anthropic_tool_results_follow_their_tool_use() -> None:
    events, server = await _run("anthropic", "tool_calls", "text")
    assert isinstance(events[-1], RunFinishedEvent)
    messages = _second_request(server)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    uses = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert uses == results == ["toolu_01A09q90qw90lq917835lq9", "toolu_01B7n2kXb9YzQw8Vt3Lm4Pq"]


async def test_anthropic_thinking_signature_is_replayed_byte_exact() -> None:
    events, server = await _run("anthropic", "reasoning", "text")
    assert isinstance(events[-1], RunFinishedEvent)
    assistant = _second_request(server)["messages"][1]["content"]
    # every block of the turn goes back in order, each with its own opaque value
    assert assistant[:3] == [
        {
            "type": "thinking",
            "thinking": "The user wants weather for Paris and Oslo. I'll show two cards.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds2yQ8Zr",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
        {"type": "text", "text": "I'll check both cities."},
    ]
    assert [b["type"] for b in assistant[3:]] == ["tool_use"]
    # and the client saw both values, each on its own reasoning message
    values = [e for e in events if isinstance(e, ReasoningEncryptedValueEvent)]
    assert [v.encrypted_value[:24] for v in values] == ["EqQBCgIYAhIM1gbcDa9GJwZA", "redacted_thinking:EmwKAh"]
    assert len({v.entity_id for v in values}) == 2 and all(v.subtype == "message" for v in values)


@pytest.mark.parametrize("provider", sorted(CLIENTS))
async def test_closing_the_run_closes_the_provider_response(provider: str) -> None:
    from agui_engine.protocol.events import TextMessageContentEvent

    data = load_fixture(provider, "text").body
    first_text = next(data.index(word) for word in (b"Paris is ", b'"Hello"') if word in data)  # the first text frame
    hold = min(data.index(end, first_text) + len(end) for end in (b"\n\n", b"\r\n\r\n") if end in data[first_text:])
    async with ReplayServer() as server:
        client = CLIENTS[provider]("m", api_key=KEY, base_url=server.base_url(provider, "text", hold_after=hold))
        agent = LLMAgent(client, components=[WEATHER_CARD])
        run_input = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")])
        events = agent.run(run_input)
        async for event in events:
            if isinstance(event, TextMessageContentEvent):
                break
        await events.aclose()  # type: ignore[attr-defined]
        assert await server.wait_for_disconnect(timeout=5.0)
        await client.aclose()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_tool_loop_reuses_one_connection(provider: str) -> None:
    # Three model calls (component, component, text) over one pooled TCP connection:
    # each response's body is read to its end after the terminal marker.
    events, server = await _run(provider, "tool_calls", "tool_calls", "text")
    assert isinstance(events[-1], RunFinishedEvent)
    assert len(server.requests) == 3
    assert server.connections == 1, [r.peer for r in server.requests]
