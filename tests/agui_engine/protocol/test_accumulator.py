"""The accumulator: the reference client's apply rules, problems instead of crashes, extension points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import jsonpointer
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.protocol.accumulator import Accumulator, PatchError, apply_json_patch
from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import (
    ActivityDeltaEvent,
    ActivityMessage,
    ActivitySnapshotEvent,
    AddOperation,
    AssistantMessage,
    CustomEvent,
    Event,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessage,
    ReplaceOperation,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UnknownEvent,
    UserMessage,
)
from agui_engine.protocol.verify import Verifier

from ..agui_streams import JSON_VALUES, valid_streams

CORPUS = Path(__file__).resolve().parents[2] / "data" / "ag_ui_validate"


def accumulate(events: list[Any], acc: Accumulator | None = None) -> Accumulator:
    acc = acc or Accumulator()
    acc.apply_all(events)
    return acc


def load(name: str) -> list[Any]:
    return [decode_event(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def call(cid: str, name: str, arguments: str = "") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


# ----------------------------------------------------------------------------- recorded streams

def test_backend_tool_rendering_fixture() -> None:
    acc = accumulate(load("valid/backend-tool-rendering.jsonl"))
    assert acc.messages == [
        {"id": "msg_001", "role": "assistant", "content": "Checking the weather…",
         "toolCalls": [call("call_001", "get_weather", '{"city":"Berlin"}')]},
        {"id": "msg_002", "role": "tool", "content": '{"tempC":21}', "toolCallId": "call_001"},
        {"id": "msg_003", "role": "assistant", "content": "It is 21°C in Berlin."},
    ]
    assert acc.problems == [] and acc.run is not None and acc.run.status == "finished"
    assert acc.run.outcome == "success"


def test_agentic_chat_fixture_with_reasoning_and_chunks() -> None:
    acc = accumulate(load("valid/agentic-chat.jsonl"))
    assert [(m["id"], m["role"], m["content"]) for m in acc.messages] == [
        ("rmsg_001", "reasoning", "The user greeted me; respond warmly."),
        ("msg_001", "assistant", "Hello! How can I help you today?"),
        ("msg_002", "assistant", "Chunked messages work too."),
    ]


def test_shared_state_fixture() -> None:
    acc = accumulate(load("valid/shared-state.jsonl"))
    assert acc.state == {"recipe": {"title": "Garlic Pasta", "ingredients": ["tomato", "garlic"]}}


def test_human_in_the_loop_fixture_interrupt_then_resume() -> None:
    events = load("valid/human-in-the-loop.jsonl")
    acc = accumulate(events[:8])
    assert acc.run is not None and acc.run.outcome == "interrupt"
    assert acc.pending_interrupts == [{"id": "int_001", "reason": "approval_required", "toolCallId": "call_001"}]
    accumulate(events[8:], acc)
    assert [r.run_id for r in acc.runs] == ["run_001", "run_002"] and acc.runs[1].parent_run_id == "run_001"
    assert acc.pending_interrupts == []
    assert [m["id"] for m in acc.messages] == ["msg_001", "msg_002"]


def test_failed_state_delta_keeps_state_and_is_reported() -> None:
    acc = accumulate(load("invalid/AGUI302-delta-failed-to-apply/stream.jsonl"))
    assert acc.state == {"items": []}
    (problem,) = acc.problems
    assert (problem.kind, problem.event_index, problem.event_type, problem.pointer) == (
        "state_patch", 2, "STATE_DELTA", "/delta/0")
    assert "'/items/3'" in problem.message and "at /delta/0" in str(problem)


def test_a_patch_is_all_or_nothing_and_the_run_goes_on() -> None:
    acc = accumulate([
        StateSnapshotEvent(snapshot={"a": 1}),
        StateDeltaEvent(delta=[ReplaceOperation(path="/a", value=2), ReplaceOperation(path="/missing", value=3)]),
        StateDeltaEvent(delta=[AddOperation(path="/b", value=[1])]),
    ])
    assert acc.state == {"a": 1, "b": [1]}
    assert [(p.kind, p.pointer) for p in acc.problems] == [("state_patch", "/delta/1")]


def test_state_snapshot_replaces_with_any_json_and_is_not_aliased() -> None:
    snapshot = {"nested": {"x": [1]}}
    acc = accumulate([StateSnapshotEvent(snapshot=snapshot), StateDeltaEvent(delta=[AddOperation(path="/nested/x/-",
                                                                                                 value=2)])])
    assert snapshot == {"nested": {"x": [1]}} and acc.state == {"nested": {"x": [1, 2]}}
    assert accumulate([StateSnapshotEvent(snapshot=None)]).state is None
    assert accumulate([StateSnapshotEvent(snapshot=0)]).state == 0


# ----------------------------------------------------------------------------- tool calls

def test_tool_call_parent_resolution() -> None:
    acc = accumulate([
        TextMessageStartEvent(message_id="a1"), TextMessageEndEvent(message_id="a1"),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="a1"),  # assistant: attach
        TextMessageStartEvent(message_id="u1", role="user"), TextMessageEndEvent(message_id="u1"),
        ToolCallStartEvent(tool_call_id="c2", tool_call_name="g", parent_message_id="u1"),  # not assistant: new id=c2
        ToolCallStartEvent(tool_call_id="c3", tool_call_name="h", parent_message_id="later"),  # unknown: new id=parent
        ToolCallStartEvent(tool_call_id="c4", tool_call_name="i"),  # no parent: new id=c4
        TextMessageStartEvent(message_id="later"),  # the text then lands in the tool call's message
        TextMessageContentEvent(message_id="later", delta="text after"), TextMessageEndEvent(message_id="later"),
    ])
    assert acc.messages == [
        {"id": "a1", "role": "assistant", "content": "", "toolCalls": [call("c1", "f")]},
        {"id": "u1", "role": "user", "content": ""},
        {"id": "c2", "role": "assistant", "toolCalls": [call("c2", "g")]},
        {"id": "later", "role": "assistant", "toolCalls": [call("c3", "h")], "content": "text after"},
        {"id": "c4", "role": "assistant", "toolCalls": [call("c4", "i")]},
    ]


def test_replayed_tool_call_start_only_renames() -> None:
    acc = accumulate([ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
                      ToolCallArgsEvent(tool_call_id="c", delta="{}"),
                      ToolCallStartEvent(tool_call_id="c", tool_call_name="g")])
    assert acc.messages == [{"id": "c", "role": "assistant", "toolCalls": [call("c", "g", "{}")]}]


def test_tool_results_go_right_after_their_owner() -> None:
    acc = accumulate([
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="a"),
        ToolCallStartEvent(tool_call_id="c2", tool_call_name="f", parent_message_id="a"),
        TextMessageStartEvent(message_id="b"), TextMessageEndEvent(message_id="b"),
        ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="one"),
        ToolCallResultEvent(message_id="r2", tool_call_id="c2", content=[TextPart(text="two")]),
        ToolCallResultEvent(message_id="r3", tool_call_id="nobody", content="orphan"),
    ])
    assert [(m["id"], m["role"]) for m in acc.messages] == [
        ("a", "assistant"), ("r1", "tool"), ("r2", "tool"), ("b", "assistant"), ("r3", "tool")]
    assert acc.get_message("r2") == {"id": "r2", "role": "tool", "content": [{"type": "text", "text": "two"}],
                                     "toolCallId": "c2"}


def test_encrypted_values_attach_to_tool_calls_and_messages() -> None:
    acc = accumulate([
        TextMessageStartEvent(message_id="m"), ToolCallStartEvent(tool_call_id="c", tool_call_name="f",
                                                                  parent_message_id="m"),
        ReasoningEncryptedValueEvent(subtype="tool-call", entity_id="c", encrypted_value="sig1"),
        ReasoningEncryptedValueEvent(subtype="message", entity_id="m", encrypted_value="sig2"),
        ReasoningEncryptedValueEvent(subtype="message", entity_id="ghost", encrypted_value="sig3"),
    ])
    (message,) = acc.messages
    assert message["encryptedValue"] == "sig2" and message["toolCalls"][0]["encryptedValue"] == "sig1"
    assert acc.problems == []


def test_deltas_for_unknown_entities_are_problems() -> None:
    acc = accumulate([TextMessageContentEvent(message_id="x", delta="a"), ToolCallArgsEvent(tool_call_id="y", delta="{")])
    assert [(p.kind, p.event_index) for p in acc.problems] == [("unknown_message", 0), ("unknown_tool_call", 1)]
    assert acc.messages == []


def test_text_for_a_message_whose_content_is_not_text_is_a_problem_and_keeps_the_message() -> None:
    user = UserMessage(id="u1", content=[TextPart(text="hi")])
    acc = Accumulator(messages=[user])
    acc.apply_all([
        RunStartedEvent(thread_id="t", run_id="r"),
        ActivitySnapshotEvent(message_id="act", activity_type="PLAN", content={"step": 1}),
    ])
    for message_id in ("u1", "act"):
        acc.apply_all([
            TextMessageStartEvent(message_id=message_id),
            TextMessageContentEvent(message_id=message_id, delta="x"),
            TextMessageEndEvent(message_id=message_id),
        ])
    acc.apply(TextMessageChunkEvent(message_id="a1", delta="still fine"))
    assert [(p.kind, p.event_index) for p in acc.problems] == [("not_text", 3), ("not_text", 6)]
    assert acc.messages_as_structs()[0] == user
    assert acc.get_message("act")["content"] == {"step": 1}
    assert acc.get_message("a1")["content"] == "still fine"


# ----------------------------------------------------------------------------- snapshots and activity

def test_messages_snapshot_merge() -> None:
    acc = Accumulator(messages=[
        UserMessage(id="u1", content="hi"),
        AssistantMessage(id="a1", content="draft"),
        ActivityMessage(id="act", activity_type="progress", content={"p": 1}),
        ReasoningMessage(id="r", content="thinking"),
        AssistantMessage(id="local_only", content="dropped"),
    ])
    acc.apply(MessagesSnapshotEvent(messages=[
        UserMessage(id="u1", content="hi"), AssistantMessage(id="a1", content="final"),
        AssistantMessage(id="new", content="appended")]))
    assert [(m["id"], m.get("content")) for m in acc.messages] == [
        ("u1", "hi"), ("a1", "final"), ("act", {"p": 1}), ("r", "thinking"), ("new", "appended")]
    # A snapshot that has activity (reasoning) messages takes over those too.
    acc.apply(MessagesSnapshotEvent(messages=[ActivityMessage(id="act2", activity_type="x", content={}),
                                              UserMessage(id="u1", content="hi")]))
    assert [m["id"] for m in acc.messages] == ["u1", "r", "act2"]


def test_messages_snapshot_then_streaming_continues_on_the_new_message() -> None:
    acc = accumulate([TextMessageStartEvent(message_id="a"), TextMessageContentEvent(message_id="a", delta="x"),
                      MessagesSnapshotEvent(messages=[AssistantMessage(id="a", content="snap")]),
                      TextMessageContentEvent(message_id="a", delta="+more")])
    assert acc.messages == [{"id": "a", "role": "assistant", "content": "snap+more"}]


def test_activity_snapshot_and_delta() -> None:
    acc = accumulate([
        ActivitySnapshotEvent(message_id="act", activity_type="plan", content={"steps": []}),
        ActivityDeltaEvent(message_id="act", activity_type="plan", patch=[AddOperation(path="/steps/-", value="a")]),
        ActivitySnapshotEvent(message_id="act", activity_type="plan", content={"ignored": True}, replace=False),
        ActivityDeltaEvent(message_id="act", activity_type="plan", patch=[ReplaceOperation(path="/nope", value=1)]),
        ActivityDeltaEvent(message_id="ghost", activity_type="plan", patch=[]),
        TextMessageStartEvent(message_id="text"),
        ActivityDeltaEvent(message_id="text", activity_type="plan", patch=[]),
        ActivitySnapshotEvent(message_id="text", activity_type="card", content={"v": 1}),  # overwrites (ag-ui#1350)
    ])
    assert acc.messages == [
        {"id": "act", "role": "activity", "activityType": "plan", "content": {"steps": ["a"]}},
        {"id": "text", "role": "activity", "activityType": "card", "content": {"v": 1}},
    ]
    assert [(p.kind, p.event_index, p.pointer) for p in acc.problems] == [
        ("activity_patch", 3, "/patch/0"), ("unknown_message", 4, None), ("activity_patch", 6, None)]


# ----------------------------------------------------------------------------- runs

def test_run_outcomes_errors_usage_steps_and_subagents() -> None:
    usage = [TokenUsage(provider="openai", input_tokens=10, output_tokens=5)]
    acc = accumulate([
        RunStartedEvent(thread_id="t", run_id="r1"), StepStartedEvent(step_name="plan"),
        SubagentStartedEvent(subagent_run_id="s1", name="researcher", parent_tool_call_id="c"),
        SubagentFinishedEvent(subagent_run_id="s1", result={"found": 3},
                              outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=["i"])),
        SubagentStartedEvent(subagent_run_id="s2", name="writer"), SubagentErrorEvent(subagent_run_id="s2", message="x"),
        RunFinishedEvent(thread_id="t", run_id="r1", outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c9"]),
                         usage=usage, result={"ok": True}),
        RunErrorEvent(message="late failure", code="late"),
        RunStartedEvent(thread_id="t", run_id="r2"),
        RunFinishedEvent(thread_id="t", run_id="r2", outcome=RunFinishedCancelledOutcome()),
        RunErrorEvent(message="late for r2", code="x"),
        RunErrorEvent(message="orphan", code="x"),  # no run to attach to: recorded as a run of its own
    ])
    r1, r2, r3 = acc.runs
    assert (r1.status, r1.outcome, r1.result, r1.pending_tool_call_ids, r1.error_message) == (
        "error", "success", {"ok": True}, ["c9"], "late failure")
    assert r1.usage == [{"provider": "openai", "inputTokens": 10, "outputTokens": 5}]
    assert (r2.status, r2.outcome, r2.error_message) == ("error", "cancelled", "late for r2")
    assert (r3.run_id, r3.status, r3.error_message) == (None, "error", "orphan")
    assert acc.steps == []  # a new run starts with no open steps
    assert acc.subagents["s1"]["status"] == "suspended" and acc.subagents["s1"]["result"] == {"found": 3}
    assert acc.subagents["s2"]["status"] == "error"


def test_steps_track_what_is_running() -> None:
    acc = accumulate([StepStartedEvent(step_name="a"), StepStartedEvent(step_name="b"), StepFinishedEvent(step_name="a")])
    assert acc.steps == ["b"]


def test_resume_answers_pending_interrupts_and_input_messages_are_added() -> None:
    acc = accumulate([RunStartedEvent(thread_id="t", run_id="r1"), RunFinishedEvent(
        thread_id="t", run_id="r1", outcome=RunFinishedInterruptOutcome(
            interrupts=[Interrupt(id="i1", reason="approve"), Interrupt(id="i2", reason="approve")]))])
    run_input = RunAgentInput(thread_id="t", run_id="r2", messages=[UserMessage(id="u", content="yes")],
                              resume=[ResumeEntry(interrupt_id="i1", status="resolved")])
    acc.apply(RunStartedEvent(thread_id="t", run_id="r2", input=run_input))
    # As @ag-ui/client: the resume is only done when its run finishes (see test_accumulator_parity).
    assert [i["id"] for i in acc.pending_interrupts] == ["i1", "i2"]
    assert acc.messages == [{"id": "u", "role": "user", "content": "yes"}]
    acc.apply(RunFinishedEvent(thread_id="t", run_id="r2"))
    assert acc.pending_interrupts == []


def test_initial_input_is_copied() -> None:
    state = {"k": [1]}
    run_input = RunAgentInput(thread_id="t", run_id="r", state=state, messages=[UserMessage(id="u", content="q")])
    acc = Accumulator(input=run_input)
    acc.apply(StateDeltaEvent(delta=[AddOperation(path="/k/-", value=2)]))
    assert state == {"k": [1]} and acc.state == {"k": [1, 2]}
    assert acc.messages_as_structs() == [UserMessage(id="u", content="q")]


# ----------------------------------------------------------------------------- chunks and structs

def test_chunks_applied_directly_equal_their_expansion() -> None:
    chunks = [RunStartedEvent(thread_id="t", run_id="r"), TextMessageChunkEvent(message_id="m", delta="Hel"),
              TextMessageChunkEvent(delta="lo"), ToolCallChunkEvent(tool_call_id="c", tool_call_name="f",
                                                                    parent_message_id="m", delta='{"a":'),
              ToolCallChunkEvent(delta="1}"), RunFinishedEvent(thread_id="t", run_id="r")]
    verifier = Verifier()
    expanded = [e for event in chunks for e in verifier.feed(event)]
    assert accumulate(chunks).messages == accumulate(expanded).messages == [
        {"id": "m", "role": "assistant", "content": "Hello", "toolCalls": [call("c", "f", '{"a":1}')]}]
    bad = accumulate([TextMessageChunkEvent(delta="no id")])
    assert [p.kind for p in bad.problems] == ["chunk"]


def test_messages_as_structs() -> None:
    acc = accumulate(load("valid/backend-tool-rendering.jsonl"))
    structs = acc.messages_as_structs()
    assert structs[0] == AssistantMessage(id="msg_001", content="Checking the weather…", tool_calls=[
        ToolCall(id="call_001", function=FunctionCall(name="get_weather", arguments='{"city":"Berlin"}'))])


# ----------------------------------------------------------------------------- extension

class Tambo(Accumulator):
    """A subclass, so that class-level registrations do not leak into other tests."""


def test_class_level_custom_handler_and_helpers() -> None:
    def on_start(acc: Accumulator, event: CustomEvent) -> None:
        message = acc.ensure_message(event.value["messageId"])
        message.setdefault("components", []).append({"id": event.value["componentId"], "props": {}})

    Tambo.register_custom_handler("acme.card.start", on_start)
    try:
        acc = accumulate([TextMessageStartEvent(message_id="m"), TextMessageContentEvent(message_id="m", delta="Here:"),
                          CustomEvent(name="acme.card.start", value={"messageId": "m", "componentId": "c1"}),
                          CustomEvent(name="acme.card.start", value={"messageId": "m2", "componentId": "c2"}),
                          CustomEvent(name="other.event", value=1)], Tambo())
        assert acc.messages == [
            {"id": "m", "role": "assistant", "content": "Here:", "components": [{"id": "c1", "props": {}}]},
            {"id": "m2", "role": "assistant", "components": [{"id": "c2", "props": {}}]},
        ]
        assert [e.name for e in acc.unhandled_custom] == ["other.event"]
        # Not registered on the base class.
        assert [e.name for e in accumulate([CustomEvent(name="acme.card.start", value={})]).unhandled_custom] == [
            "acme.card.start"]
        with pytest.raises(UsageError):
            Tambo.register_custom_handler("acme.card.start", lambda acc, event: None)
        Tambo.register_custom_handler("acme.card.start", on_start)  # the same handler again: fine
    finally:
        Tambo.unregister_custom_handler("acme.card.start")


def test_instance_handlers_win_and_decorator_form() -> None:
    seen: list[str] = []
    acc = Tambo()
    Tambo.register_custom_handler("x.y", lambda a, e: seen.append("class"))
    try:
        @acc.register_custom_handler("x.y")
        def mine(a: Accumulator, e: CustomEvent) -> None:
            seen.append("instance")

        acc.apply(CustomEvent(name="x.y", value=None))
        Tambo().apply(CustomEvent(name="x.y", value=None))
        assert seen == ["instance", "class"]
    finally:
        Tambo.unregister_custom_handler("x.y")


def test_handler_remote_input_errors_become_problems_other_errors_propagate() -> None:
    acc = Accumulator()

    def strict(a: Accumulator, e: CustomEvent) -> None:
        raise RemoteInputError(f"bad value {e.value!r}")

    acc.register_custom_handler("a.b", strict)
    acc.apply(CustomEvent(name="a.b", value=3))
    (problem,) = acc.problems
    assert problem.kind == "handler" and "bad value 3" in problem.message and problem.event_type == "CUSTOM"

    acc.register_custom_handler("a.b", lambda a, e: 1 / 0, replace=True)
    with pytest.raises(ZeroDivisionError):
        acc.apply(CustomEvent(name="a.b", value=3))


def test_event_hooks_run_after_the_core_and_see_flushed_messages() -> None:
    seen: list[Any] = []

    @Tambo.register_event_handler("TOOL_CALL_END")
    def on_end(acc: Accumulator, event: ToolCallEndEvent) -> None:
        owner = acc.messages[-1]
        seen.append(owner["toolCalls"][0]["function"]["arguments"])

    acc = Tambo()
    acc.register_event_handler("FUTURE_EVENT", lambda a, e: seen.append(e.data["x"]))
    accumulate([ToolCallStartEvent(tool_call_id="c", tool_call_name="f"), ToolCallArgsEvent(tool_call_id="c", delta='{"a"'),
                ToolCallArgsEvent(tool_call_id="c", delta=":1}"), ToolCallEndEvent(tool_call_id="c"),
                UnknownEvent("FUTURE_EVENT", {"type": "FUTURE_EVENT", "x": 42})], acc)
    assert seen == ['{"a":1}', 42]
    Tambo.__dict__["_event_handlers"].clear()


def test_custom_handlers_are_composed_per_accumulator() -> None:
    seen: list[Any] = []
    acc = Accumulator(custom_handlers={"a.b": lambda a, e: seen.append(e.value)})
    acc.apply(CustomEvent(name="a.b", value=1))
    other = accumulate([CustomEvent(name="a.b", value=2)])  # another accumulator: not its handler
    assert seen == [1] and [e.value for e in other.unhandled_custom] == [2]
    # the instance handler is an instance registration: replaced like one
    acc.register_custom_handler("a.b", lambda a, e: seen.append(-e.value), replace=True)
    acc.apply(CustomEvent(name="a.b", value=3))
    assert seen == [1, -3]


@pytest.mark.parametrize("handlers", [{1: lambda a, e: None}, {"a.b": "not callable"}])
def test_custom_handlers_that_are_not_name_to_callable_are_a_usage_error(handlers: Any) -> None:
    with pytest.raises(UsageError, match="custom_handlers maps a CUSTOM event name"):
        Accumulator(custom_handlers=handlers)


def test_an_event_hook_is_looked_up_only_where_it_was_registered() -> None:
    class Hooked(Accumulator):
        pass

    seen: list[str] = []
    Hooked.register_event_handler("STEP_STARTED", lambda a, e: seen.append("class"))
    plain = Accumulator()
    plain.register_event_handler("STEP_STARTED", lambda a, e: seen.append("instance"))
    for acc in (Hooked(), plain, Accumulator()):
        acc.apply(StepStartedEvent(step_name="s"))
    assert seen == ["class", "instance"]
    # the flag lives on the class or instance that has the hook, not in a module-level global
    assert Hooked._has_hooks and plain._has_hooks and not Accumulator._has_hooks and not Accumulator()._has_hooks


def test_add_message_replaces_in_place() -> None:
    acc = Accumulator(messages=[UserMessage(id="u", content="a"), AssistantMessage(id="b", content="x")])
    acc.add_message({"id": "u", "role": "user", "content": "edited"})
    assert [m["content"] for m in acc.messages] == ["edited", "x"]


# ----------------------------------------------------------------------------- properties

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _expected_text(stream: list[Any]) -> dict[str, str]:
    """Per message id, the concatenation of every delta the stream sent for it (explicit or chunk)."""
    verifier = Verifier(collect=True)
    text: dict[str, str] = {}
    for event in stream:
        for e in verifier.feed(event):
            if isinstance(e, TextMessageStartEvent):
                text.setdefault(e.message_id, "")
            elif isinstance(e, TextMessageContentEvent):
                text[e.message_id] += e.delta
    return text


@PROPERTY
@given(valid_streams(), st.data())
def test_text_equals_the_concatenated_deltas_however_often_messages_are_read(stream: list[Any], data: st.DataObject) -> None:
    reads = data.draw(st.sets(st.integers(0, len(stream))))
    acc = Accumulator()
    for i, event in enumerate(stream):
        if i in reads:
            _ = acc.messages  # forces a flush mid-stream
        acc.apply(event)
    contents = {m["id"]: m.get("content") for m in acc.messages if m["role"] in ("assistant", "user", "system",
                                                                                 "developer")}
    for message_id, text in _expected_text(stream).items():
        assert contents[message_id] == text
    assert acc.problems == []
    assert accumulate(stream).messages == acc.messages


@PROPERTY
@given(valid_streams())
def test_accumulating_chunks_or_their_expansion_is_the_same(stream: list[Any]) -> None:
    verifier = Verifier(collect=True)
    expanded = [e for event in stream for e in verifier.feed(event)]
    assert accumulate(stream).messages == accumulate(expanded).messages
    # Every accumulated conversation is valid AG-UI message data.
    accumulate(stream).messages_as_structs()


PATCH_OPS = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "test", "move", "copy"]),
     "path": st.sampled_from(["", "/a", "/a/0", "/a/-", "/b", "/b/c", "/x~1y"]),
     "from": st.sampled_from(["/a", "/b", "/a/0"]), "value": JSON_VALUES})


@PROPERTY
@given(st.dictionaries(st.sampled_from(["a", "b", "x/y"]), JSON_VALUES, max_size=3), st.lists(PATCH_OPS, max_size=4))
def test_apply_json_patch_is_atomic_and_agrees_with_jsonpatch(document: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    import copy

    before = copy.deepcopy(document)
    try:
        reference: Any = jsonpatch.apply_patch(copy.deepcopy(document), ops)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, IndexError,
            ValueError):
        reference = PatchError
    try:
        ours: Any = apply_json_patch(document, ops)
    except PatchError as exc:
        assert 0 <= exc.op_index < len(ops)
        ours = PatchError
    assert document == before
    assert ours == reference


@PROPERTY
@given(st.dictionaries(st.sampled_from(["a", "b", "x/y"]), JSON_VALUES, max_size=3), st.lists(PATCH_OPS, max_size=4))
def test_apply_json_patch_in_place_gives_the_same_result_on_the_document_itself(
    document: dict[str, Any], ops: list[dict[str, Any]]
) -> None:
    """in_place=True: the same result or the same failing operation, on ``document`` itself."""
    import copy

    try:
        expected: Any = apply_json_patch(document, ops)
    except PatchError as exc:
        expected = exc.op_index
    mine = copy.deepcopy(document)
    ops_before = copy.deepcopy(ops)
    try:
        result: Any = apply_json_patch(mine, ops, in_place=True)
    except PatchError as exc:
        assert exc.op_index == expected
        return
    assert result == expected
    if isinstance(result, dict) and isinstance(mine, dict) and ops and all(op["path"] for op in ops):
        assert result is mine  # patched where it lies (no root replacement)
    # values come from copies of the operations: patching the result never reaches them
    if isinstance(result, dict):
        result.clear()
    assert ops == ops_before


_IDS = st.sampled_from(["m1", "u1", "call_1", "act-1", "r1"])
_ID_FIELDS = ("messageId", "toolCallId", "parentMessageId", "entityId")


@st.composite
def _any_events(draw: st.DrawFn) -> list[Any]:
    """Every sample event in any order, its ids drawn from a small pool so that they collide."""
    from ..event_samples import ALL_EVENT_SAMPLES

    events = []
    for sample in draw(st.lists(st.sampled_from(ALL_EVENT_SAMPLES), min_size=1, max_size=14)):
        wire = dict(sample)
        for key in _ID_FIELDS:
            if key in wire:
                wire[key] = draw(_IDS)
        events.append(msgspec.convert(wire, Event))
    return events


@PROPERTY
@given(_any_events())
def test_any_order_of_valid_events_never_raises_and_keeps_messages_valid(events: list[Any]) -> None:
    acc = Accumulator()
    acc.apply_all(events)  # bad ordering is reported as problems, never raised
    acc.messages_as_structs()
