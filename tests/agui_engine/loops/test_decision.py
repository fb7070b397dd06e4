"""The decision loop: one model step -> AG-UI events and a growing decision."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.component_stream import (
    COMPONENT_END,
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
)
from agui_engine.genui.components import Component, tool_from_callable
from agui_engine.genui.interactables import Interactable
from agui_engine.jsonstream import MAX_DEPTH
from agui_engine.llm import (
    Finish,
    LLMTool,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    UnknownToolChoiceError,
    Usage,
    resolve_tool_choice,
)
from agui_engine.loops.decision import MAX_TOOL_CALLS_PER_STEP, ModelStreamError, run_decision_loop
from agui_engine.loops.prompts import SYSTEM_MESSAGE_ID
from agui_engine.loops.tool_calls import (
    TOOL_CALL_STATUS_EVENT,
    ToolCallArgumentsError,
    ToolCallArgumentsLimitError,
    WireWriter,
)
from agui_engine.protocol.errors import LimitExceededError, UsageError
from agui_engine.protocol.events import (
    CustomEvent,
    ReasoningEncryptedValueEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
    UserMessage,
)
from agui_engine.protocol.verify import Verifier
from tests.hypothesis_profiles import at_most

from ..scripted_llm import ScriptedLLM, call, counter_ids, text

CARD = Component(
    "WeatherCard",
    "Weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}, "note": {"type": "string"}},
        "required": ["city", "temperature"],
    },
)
LOOKUP = LLMTool(
    name="lookup",
    description="Look something up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["q"]},
    strict=True,
)
USER = [UserMessage(id="u1", content="Hi {there}, show me {weather}")]


async def run(llm: ScriptedLLM, **kw: Any) -> tuple[list[Any], Any]:
    kw.setdefault("components", [CARD])
    kw.setdefault("tools", [LOOKUP])
    kw.setdefault("id_factory", counter_ids())
    events: list[Any] = []
    decision = None
    async for item in run_decision_loop(llm, kw.pop("messages", USER), **kw):
        events.extend(item.events)
        decision = item.decision
    return events, decision


def verify(events: list[Any]) -> None:
    """The step's events, wrapped in a run, pass the engine's verifier."""
    v = Verifier()
    for e in [RunStartedEvent(thread_id="t", run_id="r"), *events, RunFinishedEvent(thread_id="t", run_id="r")]:
        v.feed(e)
    v.close()


def customs(events: list[Any], name: str) -> list[dict[str, Any]]:
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == name]


async def test_text_only_step() -> None:
    llm = ScriptedLLM(text("Hel", "", "lo!"))
    events, decision = await run(llm, message_id="m1")
    assert events == [
        TextMessageStartEvent(message_id="m1", role="assistant"),
        TextMessageContentEvent(message_id="m1", delta="Hel"),
        TextMessageContentEvent(message_id="m1", delta="lo!"),
        TextMessageEndEvent(message_id="m1"),
    ]
    assert decision.message == "Hello!" and decision.finish_reason == "stop"
    assert decision.tool_calls == () and decision.component_name is None
    verify(events)


async def test_prompt_first_tools_with_standard_parameters_and_user_braces_untouched() -> None:
    llm = ScriptedLLM(text("ok"))
    await run(llm, custom_instructions="Speak {formally}.", memories=["likes {tea}"])
    (sent,) = llm.calls
    assert isinstance(sent.messages[0], SystemMessage) and sent.messages[0].id == SYSTEM_MESSAGE_ID
    prompt = sent.messages[0].content
    assert "Speak {formally}." in prompt and "likes {tea}" in prompt and "WeatherCard" in prompt
    assert sent.messages[1:] == USER  # user text is never templated
    assert sent.tool_choice == "auto"
    by_name = {t.name: t for t in sent.tools}
    assert set(by_name) == {"show_component_WeatherCard", "lookup"}
    for tool in sent.tools:
        assert list(tool.parameters["properties"])[:2] == ["_tambo_statusMessage", "_tambo_completionStatusMessage"]
        assert tool.strict
    # strict form: every property required, the optional one nullable
    lookup = by_name["lookup"].parameters
    assert lookup["properties"]["limit"] == {"anyOf": [{"type": "null"}, {"type": "integer"}]}
    assert lookup["required"][-2:] == ["q", "limit"] and lookup["additionalProperties"] is False


@pytest.mark.parametrize(("given_choice", "sent"), [(None, "auto"), ("auto", "auto"), ("required", "required"),
                                                     ("none", "none"), ("lookup", "lookup"),
                                                     ("show_component_WeatherCard", "show_component_WeatherCard")])
async def test_tool_choice_passes(given_choice: str | None, sent: str) -> None:
    llm = ScriptedLLM(text("ok"))
    await run(llm, force_tool_choice=given_choice)
    assert llm.calls[0].tool_choice == sent


async def test_unknown_tool_choice_fails_before_the_model_is_called() -> None:
    llm = ScriptedLLM(text("never"))
    with pytest.raises(UnknownToolChoiceError, match="'WeatherCard'.*offered"):
        await run(llm, force_tool_choice="WeatherCard")
    assert llm.calls == []
    assert resolve_tool_choice(None, []).choice == "auto"


async def test_duplicate_tool_names_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="lookup"):
        await run(ScriptedLLM(text("x")), tools=[LOOKUP, LOOKUP])


async def test_reasoning_then_text_with_signature() -> None:
    llm = ScriptedLLM([ReasoningDelta(text="hmm "), ReasoningDelta(text="ok"), ReasoningDelta(signature="sig=="),
                       TextDelta(text="Answer"), Finish(reason="stop")])
    events, decision = await run(llm, message_id="m1")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ReasoningStartEvent", "ReasoningMessageStartEvent", "ReasoningMessageContentEvent",
        "ReasoningMessageContentEvent", "ReasoningEncryptedValueEvent", "ReasoningMessageEndEvent",
        "ReasoningEndEvent", "TextMessageStartEvent", "TextMessageContentEvent", "TextMessageEndEvent",
    ]
    enc = next(e for e in events if isinstance(e, ReasoningEncryptedValueEvent))
    assert enc.subtype == "message" and enc.entity_id == decision.reasoning_id and enc.encrypted_value == "sig=="
    assert decision.reasoning == "hmm ok" and decision.reasoning_encrypted == "sig=="
    verify(events)


async def test_each_reasoning_block_keeps_its_own_opaque_value() -> None:
    # Anthropic: a thinking block (text, then its signature), a redacted_thinking block
    # (data only), text, then another thinking block after the text
    llm = ScriptedLLM([ReasoningDelta(text="a "), ReasoningDelta(text="b"), ReasoningDelta(signature="SIG1"),
                       ReasoningDelta(encrypted="REDACTED"), TextDelta(text="Hi"),
                       ReasoningDelta(text="c"), ReasoningDelta(signature="SIG2"), Finish(reason="stop")])
    events, decision = await run(llm, message_id="m1")
    verify(events)
    messages = decision.reasoning_messages
    assert [(m.content, m.encrypted_value) for m in messages] == [("a b", "SIG1"), ("", "REDACTED"), ("c", "SIG2")]
    assert len({m.id for m in messages}) == 3 and decision.reasoning_id == messages[0].id
    assert decision.reasoning == "a bc" and decision.reasoning_encrypted == "SIG1"
    values = [e for e in events if isinstance(e, ReasoningEncryptedValueEvent)]
    assert [(v.subtype, v.entity_id, v.encrypted_value) for v in values] == [
        ("message", m.id, m.encrypted_value) for m in messages
    ]
    # each value is sent inside its own reasoning message, which it closes
    kinds = [type(e).__name__ for e in events]
    assert kinds[:10] == [
        "ReasoningStartEvent", "ReasoningMessageStartEvent", "ReasoningMessageContentEvent",
        "ReasoningMessageContentEvent", "ReasoningEncryptedValueEvent", "ReasoningMessageEndEvent",
        "ReasoningEndEvent", "ReasoningStartEvent", "ReasoningMessageStartEvent", "ReasoningEncryptedValueEvent",
    ]


async def test_earlier_decisions_keep_their_reasoning_blocks() -> None:
    llm = ScriptedLLM([ReasoningDelta(text="x"), ReasoningDelta(signature="S1"), ReasoningDelta(text="y"),
                       Finish(reason="stop")])
    decisions = [item.decision async for item in run_decision_loop(llm, USER, id_factory=counter_ids())]
    assert [(m.content, m.encrypted_value) for m in decisions[0].reasoning_messages] == [("x", None)]
    assert [(m.content, m.encrypted_value) for m in decisions[1].reasoning_messages] == [("x", "S1")]
    assert [(m.content, m.encrypted_value) for m in decisions[-1].reasoning_messages] == [("x", "S1"), ("y", None)]


async def test_a_tool_call_signature_is_sent_on_the_call() -> None:
    llm = ScriptedLLM([ToolCallStart(index=0, id="c1", name="lookup", signature="CALLSIG"),
                       ToolCallArgsDelta(index=0, delta='{"q":"tea"}'), ToolCallEnd(index=0),
                       *call(1, "c2", "lookup", '{"q":"milk"}'), Finish(reason="tool_calls")])
    events, decision = await run(llm, message_id="m1")
    verify(events)
    start = events.index(next(e for e in events if isinstance(e, ToolCallStartEvent)))
    value = events[start + 1]
    assert isinstance(value, ReasoningEncryptedValueEvent)
    assert (value.subtype, value.entity_id, value.encrypted_value) == ("tool-call", "c1", "CALLSIG")
    assert len([e for e in events if isinstance(e, ReasoningEncryptedValueEvent)]) == 1
    assert [c.signature for c in decision.tool_calls] == ["CALLSIG", None]
    assert decision.reasoning_messages == ()  # not a reasoning message: it belongs to the call


async def test_information_tool_call_filters_standard_parameters() -> None:
    args = ['{"_tambo_statusMessage":"Looking up', ' tea",', '"_tambo_completionStatusMessage":"Looked up tea",',
            '"q":"tea","limit":null}']
    llm = ScriptedLLM([TextDelta(text="Let me look."), *call(0, "c1", "lookup", *args), Finish(reason="tool_calls")])
    events, decision = await run(llm, message_id="m1")
    start = next(e for e in events if isinstance(e, ToolCallStartEvent))
    assert start == ToolCallStartEvent(tool_call_id="c1", tool_call_name="lookup", parent_message_id="m1")
    # text closes before the tool call starts
    assert events.index(TextMessageEndEvent(message_id="m1")) < events.index(start)
    # on the wire: no standard parameters, no strict-mode null for the optional "limit"
    assert "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent)) == '{"q":"tea"}'
    assert customs(events, TOOL_CALL_STATUS_EVENT) == [
        {"toolCallId": "c1", "statusMessage": "Looking up tea"},
        {"toolCallId": "c1", "statusMessage": "Looking up tea", "completionStatusMessage": "Looked up tea"},
    ]
    (request,) = decision.tool_calls
    assert request.done and request.arguments == {"q": "tea"}  # standard params out, strict null undone
    assert request.arguments_text == "".join(args)
    assert request.status.status_message == "Looking up tea"
    assert decision.status_message == "Looking up tea"
    assert decision.completion_status_message == "Looked up tea"
    assert decision.finish_reason == "tool_calls"
    verify(events)


async def test_component_call_streams_custom_events_inside_tool_call_events() -> None:
    args = ['{"_tambo_statusMessage":"Showing",', '"city":"Tok', 'yo","temperature":18', '.5,"note":null}']
    llm = ScriptedLLM([*call(0, "c1", "show_component_WeatherCard", *args), Finish(reason="tool_calls")])
    events, decision = await run(llm, message_id="m1")
    names = [e.name if isinstance(e, CustomEvent) else type(e).__name__ for e in events]
    assert names[:2] == ["ToolCallStartEvent", COMPONENT_START]
    assert names[-2:] == ["ToolCallEndEvent", COMPONENT_END]
    (start,) = customs(events, COMPONENT_START)
    assert start == {"messageId": "m1", "componentId": decision.component_id, "componentName": "WeatherCard"}
    for delta in customs(events, COMPONENT_PROPS_DELTA):
        assert not any("_tambo_" in op["path"] for op in delta["operations"])
    (end,) = customs(events, COMPONENT_END)
    assert end["finalProps"] == {"city": "Tokyo", "temperature": 18.5}
    assert decision.component_name == "WeatherCard" and decision.props == end["finalProps"]
    assert decision.tool_calls[0].component_id == decision.component_id
    assert decision.status_message == "Showing"
    verify(events)


async def test_parallel_components_interleave_each_with_its_own_id() -> None:
    a = ['{"city":"Tokyo",', '"temperature":18.5}']
    b = ['{"city":"Paris",', '"temperature":11}']
    items = [
        ToolCallStart(index=0, id="ca", name="show_component_WeatherCard"),
        ToolCallStart(index=1, id="cb", name="show_component_WeatherCard"),
        ToolCallStart(index=2, id="cc", name="lookup"),
        ToolCallArgsDelta(index=0, delta=a[0]), ToolCallArgsDelta(index=1, delta=b[0]),
        ToolCallArgsDelta(index=2, delta='{"q":"x"}'),
        ToolCallArgsDelta(index=1, delta=b[1]), ToolCallArgsDelta(index=0, delta=a[1]),
        ToolCallEnd(index=1), ToolCallEnd(index=2), ToolCallEnd(index=0), Finish(reason="tool_calls"),
    ]
    events, decision = await run(ScriptedLLM(items))
    starts = customs(events, COMPONENT_START)
    assert len({s["componentId"] for s in starts}) == 2
    finals = {e["componentId"]: e["finalProps"] for e in customs(events, COMPONENT_END)}
    by_call = {c.id: c for c in decision.tool_calls}
    assert finals[by_call["ca"].component_id] == {"city": "Tokyo", "temperature": 18.5}
    assert finals[by_call["cb"].component_id] == {"city": "Paris", "temperature": 11}
    assert by_call["cc"].arguments == {"q": "x"} and by_call["cc"].component_id is None
    assert [c.id for c in decision.components] == ["ca", "cb"]
    verify(events)


async def test_text_after_tool_calls_is_a_new_message() -> None:
    items = [TextDelta(text="a"), *call(0, "c1", "lookup", '{"q":"1"}'), TextDelta(text="b"), Finish(reason="stop")]
    events, decision = await run(ScriptedLLM(items), message_id="m1")
    starts = [e.message_id for e in events if isinstance(e, TextMessageStartEvent)]
    assert starts[0] == "m1" and len(starts) == 2 and starts[1] != "m1"
    assert decision.message == "ab"
    verify(events)


async def test_malformed_arguments_fail_at_the_bad_fragment_and_close_the_text() -> None:
    items = [TextDelta(text="x"), ToolCallStart(index=0, id="c1", name="lookup"),
             ToolCallArgsDelta(index=0, delta='{"q":'), ToolCallArgsDelta(index=0, delta="}oops"),
             ToolCallEnd(index=0)]
    events: list[Any] = []
    with pytest.raises(ToolCallArgumentsError) as info:
        async for item in run_decision_loop(ScriptedLLM(items), USER, tools=[LOOKUP]):
            events.extend(item.events)
    assert info.value.tool_call_id == "c1" and "lookup" in info.value.message
    args = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert args == "{"  # the bad fragment was never emitted (and "q" waits for its value)
    assert isinstance(events[2], TextMessageEndEvent)  # the text closed when the call started


async def test_arguments_past_a_limit_are_a_limit_error_and_malformed_ones_are_not() -> None:
    deep = '{"q":' + "[" * (MAX_DEPTH + 1)
    with pytest.raises(ToolCallArgumentsLimitError) as info:
        async for _ in run_decision_loop(ScriptedLLM(call(0, "c1", "lookup", deep)), USER, tools=[LOOKUP]):
            pass
    err = info.value
    assert isinstance(err, ToolCallArgumentsError) and isinstance(err, LimitExceededError)
    assert (err.http_status, err.ws_close_code, err.code) == (413, 4413, err.cause.code)
    assert err.tool_call_id == "c1" and isinstance(err.cause, LimitExceededError)
    with pytest.raises(ToolCallArgumentsError) as bad:
        async for _ in run_decision_loop(ScriptedLLM(call(0, "c1", "lookup", '{"q":}')), USER, tools=[LOOKUP]):
            pass
    assert not isinstance(bad.value, LimitExceededError)
    assert (bad.value.http_status, bad.value.ws_close_code) == (400, 4400)


async def test_component_root_must_be_an_object() -> None:
    items = call(0, "c1", "show_component_WeatherCard", "[1,2]")
    events: list[Any] = []
    with pytest.raises(ToolCallArgumentsError, match="object"):
        async for item in run_decision_loop(ScriptedLLM(items), USER, components=[CARD]):
            events.extend(item.events)
    assert not any(isinstance(e, ToolCallArgsEvent) for e in events)


async def test_stream_error_closes_open_text_then_raises() -> None:
    items = [ReasoningDelta(text="r"), TextDelta(text="part"),
             StreamError(message="overloaded", code="overloaded_error", retryable=True)]
    events: list[Any] = []
    with pytest.raises(ModelStreamError) as info:
        async for item in run_decision_loop(ScriptedLLM(items), USER, message_id="m1"):
            events.extend(item.events)
    assert events[-1] == TextMessageEndEvent(message_id="m1")
    assert info.value.code == "overloaded_error" and info.value.retryable


@pytest.mark.parametrize(
    "items",
    [
        [ToolCallArgsDelta(index=0, delta="{}")],
        [ToolCallStart(index=0, id="a", name="lookup"), ToolCallStart(index=0, id="b", name="lookup")],
        [ToolCallStart(index=0, id="a", name="lookup"), Finish(reason="tool_calls")],
        [*call(0, "a", "lookup", "{}"), ToolCallEnd(index=0)],
    ],
    ids=["args-before-start", "index-twice", "never-ended", "ended-twice"],
)
async def test_contract_violations_are_model_stream_errors(items: list[Any]) -> None:
    with pytest.raises(ModelStreamError):
        await run(ScriptedLLM(items))


@pytest.mark.parametrize(
    "items",
    [
        [ToolCallStart(index=0, id="a", name="lookup"), ToolCallStart(index=1, id="a", name="lookup")],
        [*call(0, "a", "lookup", "{}"), ToolCallStart(index=1, id="a", name="lookup"), ToolCallEnd(index=1)],
    ],
    ids=["while-open", "after-end"],
)
async def test_one_call_id_under_two_indexes_is_a_model_stream_error(items: list[Any]) -> None:
    # two STARTs of one id would break tool_call.already_open / tool_call.id_reused downstream
    events: list[Any] = []
    with pytest.raises(ModelStreamError, match="started tool call 'a' twice"):
        async for item in run_decision_loop(ScriptedLLM(items), USER, message_id="m1"):
            events.extend(item.events)
    assert sum(isinstance(e, ToolCallStartEvent) for e in events) == 1


async def test_too_many_calls_in_one_step() -> None:
    items = [ToolCallStart(index=i, id=f"c{i}", name="lookup") for i in range(MAX_TOOL_CALLS_PER_STEP + 1)]
    with pytest.raises(ModelStreamError, match="MAX_TOOL_CALLS_PER_STEP"):
        await run(ScriptedLLM(items))


async def test_call_without_arguments_is_an_empty_object() -> None:
    events, decision = await run(ScriptedLLM([*call(0, "c1", "lookup"), Finish(reason="tool_calls")]))
    assert decision.tool_calls[0].arguments == {} and decision.tool_calls[0].done
    verify(events)


async def test_unknown_tool_name_is_tracked_as_a_plain_call() -> None:
    events, decision = await run(ScriptedLLM([*call(0, "c1", "made_up", '{"a":1}'), Finish(reason="tool_calls")]))
    assert decision.tool_calls[0].name == "made_up" and decision.tool_calls[0].arguments == {"a": 1}
    verify(events)


async def test_usage_last_value_wins_per_field() -> None:
    items = [Usage(input_tokens=10, provider="p"), TextDelta(text="x"), Usage(output_tokens=3, input_tokens=12),
             Finish(reason="stop")]
    _, decision = await run(ScriptedLLM(items))
    assert decision.usage == Usage(input_tokens=12, output_tokens=3, provider="p")


async def test_server_tool_schema_from_a_callable() -> None:
    def weather(city: str, units: str = "C") -> dict[str, Any]:
        """Weather."""
        return {}

    llm = ScriptedLLM([*call(0, "c1", "weather", '{"city":"Oslo","units":null}'), Finish(reason="tool_calls")])
    _, decision = await run(llm, tools=[tool_from_callable(weather)])
    assert decision.tool_calls[0].arguments == {"city": "Oslo", "units": "C"}  # strict null -> the default


async def test_interactable_update_streams_on_the_existing_component() -> None:
    note = Interactable(id="Note-k3x", component_name="Note", props={"text": "old", "color": "red"},
                        props_schema={"type": "object", "properties": {"text": {"type": "string"},
                                                                       "color": {"type": "string"}}})
    args = '{"componentId":"Note-k3x","newProps":{"text":"new","color":null}}'
    llm = ScriptedLLM([*call(0, "c1", "update_component_props_Note-k3x", args), Finish(reason="tool_calls")])
    events, decision = await run(llm, interactables=[note])
    assert {t.name for t in llm.calls[0].tools} >= {"update_component_props_Note-k3x", "update_component_state_Note-k3x"}
    assert "Note-k3x" in llm.calls[0].messages[0].content
    (end,) = customs(events, COMPONENT_END)
    assert end == {"componentId": "Note-k3x", "finalProps": {"text": "new", "color": "red"}}
    assert all(d["componentId"] == "Note-k3x" for d in customs(events, COMPONENT_PROPS_DELTA))
    (request,) = decision.tool_calls
    assert request.interactable_id == "Note-k3x" and request.update_kind == "props"
    assert request.arguments == {"componentId": "Note-k3x", "newProps": {"text": "new"}}
    verify(events)


async def test_closing_the_loop_closes_the_model_stream() -> None:
    llm = ScriptedLLM(text(*["chunk"] * 50))
    loop = run_decision_loop(llm, USER)
    await loop.__anext__()
    await loop.aclose()
    assert llm.closed == 1 and llm.finished == 0


PROPS = st.fixed_dictionaries(
    {"city": st.text(max_size=12), "temperature": st.floats(allow_nan=False, allow_infinity=False, width=32)},
    optional={"note": st.one_of(st.none(), st.text(max_size=30))},
)


def _split(text_: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text_) + 1) for c in cuts} | {0, len(text_)})
    return [text_[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=at_most(60), deadline=None)
@given(a=PROPS, b=PROPS, cuts_a=st.lists(st.integers(0, 500), max_size=12),
       cuts_b=st.lists(st.integers(0, 500), max_size=12), order=st.randoms(use_true_random=False))
async def test_parallel_components_any_split_any_interleaving(a: dict[str, Any], b: dict[str, Any],
                                                              cuts_a: list[int], cuts_b: list[int],
                                                              order: Any) -> None:
    frags = {0: _split(json.dumps({"_tambo_statusMessage": "s", **a}), cuts_a), 1: _split(json.dumps(b), cuts_b)}
    queue = [(i, f) for i in (0, 1) for f in frags[i]]
    # keep each call's own order, interleave the two at random
    merged: list[tuple[int, str]] = []
    pos = {0: 0, 1: 0}
    while len(merged) < len(queue):
        i = order.choice([k for k in (0, 1) if pos[k] < len(frags[k])])
        merged.append((i, frags[i][pos[i]]))
        pos[i] += 1
    items: list[Any] = [ToolCallStart(index=0, id="ca", name="show_component_WeatherCard"),
                        ToolCallStart(index=1, id="cb", name="show_component_WeatherCard")]
    items += [ToolCallArgsDelta(index=i, delta=f) for i, f in merged]
    items += [ToolCallEnd(index=0), ToolCallEnd(index=1), Finish(reason="tool_calls")]
    events, decision = await run(ScriptedLLM(items))
    expected = {c.id: {k: v for k, v in (a if c.id == "ca" else b).items() if v is not None}
                for c in decision.tool_calls}
    finals = {e["componentId"]: e["finalProps"] for e in customs(events, COMPONENT_END)}
    for request in decision.tool_calls:
        assert finals[request.component_id] == expected[request.id] == request.props
    verify(events)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
KEYS = st.sampled_from(["_tambo_statusMessage", "_tambo_completionStatusMessage", "_tambo_other", "a", "b",
                        "opt", "dflt", 'q"uo\\te', "ключ"])
FILTER_POLICY_SCHEMA = {
    "type": "object",
    "properties": {"opt": {"type": "integer"}, "dflt": {"type": "string", "default": "D"}, "a": {"type": ["null", "string"]}},
    "required": ["a"],
}


def _wire(policy: Any, fragments: list[str]) -> tuple[str, dict[str, Any]]:
    """The wire text a WireWriter writes from one PatchStream parse of ``fragments``,
    and the standard parameters it reported."""
    from agui_engine.jsonstream import PatchStream

    stream = PatchStream(emit_root=False)
    writer = WireWriter(policy, stream.status_of, lambda: stream.value)
    out = [writer.write(stream.feed(part), part) for part in fragments]
    out.append(writer.write(stream.close(), "") + writer.finish())
    completed = dict(writer.completed)
    assert len(completed) == len(writer.completed)  # each reported once
    return "".join(out), completed


@settings(deadline=None)
@given(doc=st.dictionaries(KEYS, JSON_VALUES, max_size=6), cuts=st.lists(st.integers(0, 400), max_size=15),
       style=st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :  ")]))
def test_standard_parameter_filter_any_document_any_split(doc: dict[str, Any], cuts: list[int],
                                                          style: tuple[str, str]) -> None:
    from agui_engine.genui.components import DROP, NullDefault, NullPolicy

    policy = NullPolicy(FILTER_POLICY_SCHEMA)
    source = json.dumps(doc, separators=style, ensure_ascii=False)
    expected: dict[str, Any] = {}
    for key, value in doc.items():
        if key.startswith("_tambo_"):
            continue
        verdict = policy.decide((key,)) if value is None else None
        if verdict == DROP:
            continue
        expected[key] = verdict.value if isinstance(verdict, NullDefault) else value
    out, completed = _wire(policy, _split(source, cuts))
    assert json.loads(out) == expected
    assert completed == {k: v for k, v in doc.items() if k.startswith("_tambo_")}


#: A client tool with optional properties inside nested objects and in arrays of objects.
NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "opt": {"type": "integer"},
        "addr": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string"},
                "geo": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "note": {"type": ["string", "null"]}},
                    "required": ["lat"],
                },
            },
            "required": ["city"],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "default": 1}, "tag": {"type": "string"}},
                "required": ["sku"],
            },
        },
    },
    "required": ["name"],
}
NESTED_TOOL = LLMTool(name="order", description="Place an order", parameters=NESTED_SCHEMA, strict=True)


def _maybe_null(strategy: Any) -> Any:
    return st.none() | strategy


_WORD = st.text(max_size=5)
_GEO = st.fixed_dictionaries({"lat": _maybe_null(st.integers(-90, 90))},
                             optional={"note": _maybe_null(_WORD), "_tambo_inner": _WORD})
_ADDR = st.fixed_dictionaries({"city": _maybe_null(_WORD)},
                              optional={"zip": _maybe_null(_WORD), "geo": _maybe_null(_GEO)})
_ITEM = st.fixed_dictionaries({"sku": _maybe_null(_WORD)},
                              optional={"qty": _maybe_null(st.integers(0, 9)), "tag": _maybe_null(_WORD),
                                        "_tambo_x": JSON_VALUES})
NESTED_DOCS = st.fixed_dictionaries(
    {"name": _maybe_null(_WORD)},
    optional={"_tambo_statusMessage": _WORD, "opt": _maybe_null(st.integers()), "addr": _maybe_null(_ADDR),
              "items": _maybe_null(st.lists(_maybe_null(_ITEM), max_size=3)), "extra": JSON_VALUES},
)


@settings(deadline=None)
@given(doc=NESTED_DOCS, cuts=st.lists(st.integers(0, 600), max_size=20), order=st.randoms(use_true_random=False),
       style=st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :  ")]))
def test_filter_removes_strict_nulls_and_reserved_keys_at_every_depth(
    doc: dict[str, Any], cuts: list[int], order: Any, style: tuple[str, str]
) -> None:
    from agui_engine.genui.components import NullPolicy, strip_reserved_keys, unstrict_value

    items = list(doc.items())
    order.shuffle(items)  # the standard parameter anywhere among the members
    source = json.dumps(dict(items), separators=style, ensure_ascii=False)
    policy = NullPolicy(NESTED_SCHEMA)
    out, completed = _wire(policy, _split(source, cuts))
    # the one policy: the wire is what unstrict_value makes of the whole document
    assert json.loads(out) == unstrict_value(strip_reserved_keys(doc), policy)
    assert completed == {k: v for k, v in doc.items() if k.startswith("_tambo_")}


async def test_nested_strict_nulls_never_reach_tool_call_args_and_match_the_final_arguments() -> None:
    doc = {
        "_tambo_statusMessage": "Ordering",
        "name": "Ann",
        "opt": None,
        "addr": {"city": "Oslo", "zip": None, "geo": {"lat": 59, "note": None}},
        "items": [{"sku": "a", "qty": None, "tag": None}, None, {"sku": "b", "qty": 3, "tag": "x"}],
    }
    source = json.dumps(doc)
    for size in (1, 3, 7, len(source)):  # one character at a time up to whole
        fragments = [source[i : i + size] for i in range(0, len(source), size)]
        llm = ScriptedLLM([*call(0, "c1", "order", *fragments), Finish(reason="tool_calls")])
        events, decision = await run(llm, tools=[NESTED_TOOL])
        wire = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
        expected = {
            "name": "Ann",
            "addr": {"city": "Oslo", "geo": {"lat": 59, "note": None}},  # note is nullable: kept
            "items": [{"sku": "a", "qty": 1}, None, {"sku": "b", "qty": 3, "tag": "x"}],  # default written
        }
        assert json.loads(wire) == expected == decision.tool_calls[0].arguments
        verify(events)


async def test_no_standard_parameter_or_dropped_null_ever_reaches_tool_call_args() -> None:
    args = ['{"_tambo_statusMessage":"S","city":"Oslo","temperature":1,"no', 'te":nu', "ll}"]
    llm = ScriptedLLM([*call(0, "c1", "show_component_WeatherCard", *args), Finish(reason="tool_calls")])
    events, _ = await run(llm)
    wire = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert json.loads(wire) == {"city": "Oslo", "temperature": 1}
    verify(events)


async def test_a_model_stream_that_is_not_a_generator_works_and_is_released() -> None:
    class Plain:
        """An async iterator without aclose()."""

        def __init__(self, items: list[Any]) -> None:
            self.items = iter(items)

        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> Any:
            try:
                return next(self.items)
            except StopIteration:
                raise StopAsyncIteration from None

    class PlainLLM:
        def complete(self, messages: Any, tools: Any, tool_choice: str = "auto", **_: Any) -> Plain:
            return Plain(text("a", "b"))

    events: list[Any] = []
    async for item in run_decision_loop(PlainLLM(), USER):
        events.extend(item.events)
    assert [type(e).__name__ for e in events] == [
        "TextMessageStartEvent", "TextMessageContentEvent", "TextMessageContentEvent", "TextMessageEndEvent"]
