"""The verifier: the ag-ui-validate 0.4.0 fixture corpus, every rule, chunk expansion, and properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.protocol import verify as verify_module
from agui_engine.protocol.codec import EventDecodeError, decode_event, encode_event
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import (
    ActivityDeltaEvent,
    AssistantMessage,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
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
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UnknownEvent,
)
from agui_engine.protocol.verify import (
    KINDS,
    RULES,
    TRANSITIONS,
    ChunkExpander,
    Phase,
    ProtocolViolation,
    Verifier,
    Violation,
    verify_events,
)
from tests.hypothesis_profiles import at_most

from ..agui_streams import event_soup, valid_streams

CORPUS = Path(__file__).resolve().parents[2] / "data" / "ag_ui_validate"

START = RunStartedEvent(thread_id="t1", run_id="r1")
FINISH = RunFinishedEvent(thread_id="t1", run_id="r1")


def load(path: Path) -> list[Any]:
    return [decode_event(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def errors(events: list[Any], **options: Any) -> list[tuple[str, int]]:
    return [(v.rule, v.event_index) for v in verify_events(events, **options)]


# ----------------------------------------------------------------------------- the corpus

VALID = sorted((CORPUS / "valid").glob("*.jsonl"))


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_fixture_streams_pass(path: Path) -> None:
    assert verify_events(load(path), include_warnings=True) == []


# Validator rule -> our rule for the fixtures that fail here for the same reason.
SAME_REASON = {
    "AGUI001": "lifecycle.first_event",
    "AGUI002": "lifecycle.nested_run",
    "AGUI003": "lifecycle.truncated",
    "AGUI004": "lifecycle.after_finished",
    "AGUI006": "step.not_open",
    "AGUI007": "step.unterminated",
    "AGUI008": "lifecycle.run_ids",  # a warning there, an error here (the issue requires equal ids)
    "AGUI101": "text.not_open",
    "AGUI102": "text.not_open",
    "AGUI103": "text.unterminated",
    "AGUI106": "text.already_open",
    "AGUI201": "tool_call.not_open",
    "AGUI202": "tool_call.not_open",
    "AGUI203": "tool_call.unterminated",
    "AGUI204": "tool_call.args_not_json",
    "AGUI205": "tool_call.id_reused",
    "AGUI207": "tool_call.result_unknown",
    "AGUI401": "reasoning_message.not_open",
    "AGUI402": "reasoning.unterminated",  # a warning there: 1.0 says nothing may stay open
    "AGUI601": "subagent.already_open",
    "AGUI602": "subagent.not_open",
    "AGUI603": "subagent.not_open",
    "AGUI604": "subagent.unterminated",
    "AGUI606": "attribution.mismatch",  # a warning there, fatal in 1.1 clients
}
# Findings that are warnings here too.
SAME_WARNING = {"AGUI206": "tool_call.result_before_end"}
# 0.x rules that AG-UI 1.0 does not have (spec/verifier.md, "Where we differ from ag-ui-validate").
ACCEPTED_BY_1_0 = {
    "AGUI005",  # RUN_ERROR after RUN_FINISHED: 1.0 clients deliver it
    "AGUI105",  # empty delta: allowed by the 1.0 schema
    "AGUI208",  # unknown parentMessageId: info; the accumulator creates the parent
    "AGUI605",  # unknown parentSubagentRunId: warning there, no 1.0 rule
    "AGUI901",  # hygiene (info)
    "AGUI902",
    "AGUI903",
}
# State rules belong to the accumulator (STATE_DELTA application), not to ordering.
STATE_RULES = {"AGUI301", "AGUI302", "AGUI304", "AGUI305"}
# Shape errors: our codec refuses the event before any verifier sees it.
DECODE_ERRORS = {"AGUI303": "$.delta[0].op", "AGUI502": None, "AGUI503": "$.type", "AGUI504": "$"}

INVALID = sorted(p for p in (CORPUS / "invalid").iterdir() if p.is_dir())


def test_every_invalid_fixture_is_classified() -> None:
    classified = set(SAME_REASON) | set(SAME_WARNING) | ACCEPTED_BY_1_0 | STATE_RULES | set(DECODE_ERRORS)
    classified.add("AGUI104")
    assert {p.name[:7] for p in INVALID} == classified
    assert len(INVALID) == 41


@pytest.mark.parametrize("path", [p for p in INVALID if p.name[:7] in SAME_REASON], ids=lambda p: p.name)
def test_invalid_fixture_fails_for_the_same_reason(path: Path) -> None:
    events = load(path / "stream.jsonl")
    (expected,) = json.loads((path / "expected.json").read_text())
    found = verify_events(events)
    assert found, "the stream must be rejected"
    first = found[0]
    assert first.rule == SAME_REASON[path.name[:7]]
    # End-of-stream findings are at -1 there and at "after the last event" here.
    assert first.event_index == (expected["eventIndex"] if expected["eventIndex"] >= 0 else len(events))
    if "relatedEventIndex" in expected:
        assert first.related_index == expected["relatedEventIndex"]
    for value in first.ids.values():
        assert repr(value) in first.message
    # Raising mode reports the same thing.
    verifier = Verifier()
    with pytest.raises(ProtocolViolation) as info:
        for event in events:
            verifier.feed(event)
        verifier.close()
    assert info.value.violation == first


@pytest.mark.parametrize("path", [p for p in INVALID if p.name[:7] in SAME_WARNING], ids=lambda p: p.name)
def test_invalid_fixture_warning_stays_a_warning(path: Path) -> None:
    (expected,) = json.loads((path / "expected.json").read_text())
    found = verify_events(load(path / "stream.jsonl"), include_warnings=True)
    assert [(v.rule, v.severity, v.event_index) for v in found] == [
        (SAME_WARNING[path.name[:7]], "warning", expected["eventIndex"])
    ]


@pytest.mark.parametrize("path", [p for p in INVALID if p.name[:7] in ACCEPTED_BY_1_0 | STATE_RULES], ids=lambda p: p.name)
def test_fixture_for_a_rule_ag_ui_1_0_does_not_have_passes(path: Path) -> None:
    assert verify_events(load(path / "stream.jsonl"), include_warnings=True) == []


@pytest.mark.parametrize("path", [p for p in INVALID if p.name[:7] in DECODE_ERRORS], ids=lambda p: p.name)
def test_fixture_with_a_malformed_event_is_refused_by_the_codec(path: Path) -> None:
    with pytest.raises(EventDecodeError) as info:
        load(path / "stream.jsonl")
    if DECODE_ERRORS[path.name[:7]] is not None:
        assert info.value.path == DECODE_ERRORS[path.name[:7]]


def test_reopening_a_closed_message_is_allowed_in_1_0() -> None:
    # AGUI104 (0.x) forbids it; 1.0/1.1 say "closed, not sealed". The fixture still fails here,
    # because the re-opened message is never closed again.
    events = load(CORPUS / "invalid" / "AGUI104-duplicate-message-id" / "stream.jsonl")
    assert errors(events) == [("text.unterminated", 5)]
    closed_again = events[:5] + [TextMessageContentEvent(message_id="msg_001", delta=" more"),
                                 TextMessageEndEvent(message_id="msg_001"), events[5]]
    assert errors(closed_again) == []


def test_list_valued_tool_result_is_1_0() -> None:
    # ag-ui-validate's 0.x schema rejects it (AGUI504); 1.0 allows content parts.
    event = decode_event(
        '{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":[{"type":"text","text":"ok"}]}'
    )
    stream = [START, ToolCallStartEvent(tool_call_id="c", tool_call_name="f"), ToolCallEndEvent(tool_call_id="c"),
              event, FINISH]
    assert errors(stream) == []


# ----------------------------------------------------------------------------- every rule

def _text(mid: str = "m", **kw: Any) -> list[Any]:
    return [TextMessageStartEvent(message_id=mid, **kw), TextMessageContentEvent(message_id=mid, delta="hi"),
            TextMessageEndEvent(message_id=mid)]


def _tool(cid: str = "c", args: str = "{}") -> list[Any]:
    return [ToolCallStartEvent(tool_call_id=cid, tool_call_name="f"), ToolCallArgsEvent(tool_call_id=cid, delta=args),
            ToolCallEndEvent(tool_call_id=cid)]


# rule -> (stream, index of the violation, ids it names)
RULE_CASES: dict[str, tuple[list[Any], int, dict[str, str]]] = {
    "lifecycle.first_event": ([TextMessageStartEvent(message_id="m"), TextMessageEndEvent(message_id="m"), FINISH], 0, {}),
    "lifecycle.nested_run": ([START, RunStartedEvent(thread_id="t1", run_id="r2"), FINISH], 1,
                             {"runId": "r2", "threadId": "t1"}),
    "lifecycle.truncated": ([START, *_text()], 4, {"threadId": "t1", "runId": "r1"}),
    "lifecycle.after_finished": ([START, FINISH, CustomEvent(name="a.b", value=1)], 2, {}),
    "lifecycle.after_error": ([START, RunErrorEvent(message="x"), RunErrorEvent(message="y")], 2, {}),
    "lifecycle.run_ids": ([START, RunFinishedEvent(thread_id="t1", run_id="r9")], 1,
                          {"threadId": "t1", "runId": "r9", "expectedThreadId": "t1", "expectedRunId": "r1"}),
    "lifecycle.thread_changed": ([START, FINISH, RunStartedEvent(thread_id="t2", run_id="r2")], 2,
                                 {"threadId": "t2", "runId": "r2"}),
    "text.already_open": ([START, TextMessageStartEvent(message_id="m"), TextMessageStartEvent(message_id="m")], 2,
                          {"messageId": "m"}),
    "text.not_open": ([START, TextMessageContentEvent(message_id="m", delta="x"), FINISH], 1, {"messageId": "m"}),
    "text.unterminated": ([START, TextMessageStartEvent(message_id="m"), FINISH], 2, {"messageId": "m"}),
    "text.reopen_conflict": ([START, *_text(), TextMessageStartEvent(message_id="m", role="user")], 4,
                             {"messageId": "m"}),
    "tool_call.already_open": ([START, ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
                                ToolCallStartEvent(tool_call_id="c", tool_call_name="f")], 2, {"toolCallId": "c"}),
    "tool_call.id_reused": ([START, *_tool(), ToolCallStartEvent(tool_call_id="c", tool_call_name="f")], 4,
                            {"toolCallId": "c"}),
    "tool_call.not_open": ([START, ToolCallEndEvent(tool_call_id="c")], 1, {"toolCallId": "c"}),
    "tool_call.unterminated": ([START, ToolCallStartEvent(tool_call_id="c", tool_call_name="f"), FINISH], 2,
                               {"toolCallId": "c"}),
    "tool_call.args_not_json": ([START, *_tool(args='{"a": tru')], 3, {"toolCallId": "c"}),
    "tool_call.result_unknown": ([START, ToolCallResultEvent(message_id="r", tool_call_id="c", content="x")], 1,
                                 {"toolCallId": "c", "messageId": "r"}),
    "tool_call.result_before_end": ([START, ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
                                     ToolCallResultEvent(message_id="r", tool_call_id="c", content="x")], 2,
                                    {"toolCallId": "c", "messageId": "r"}),
    "reasoning.already_open": ([START, ReasoningStartEvent(message_id="s"), ReasoningStartEvent(message_id="s")], 2,
                               {"messageId": "s"}),
    "reasoning.not_open": ([START, ReasoningEndEvent(message_id="s")], 1, {"messageId": "s"}),
    "reasoning.unterminated": ([START, ReasoningStartEvent(message_id="s"), FINISH], 2, {"messageId": "s"}),
    "reasoning_message.already_open": ([START, ReasoningMessageStartEvent(message_id="s"),
                                        ReasoningMessageStartEvent(message_id="s")], 2, {"messageId": "s"}),
    "reasoning_message.not_open": ([START, ReasoningMessageEndEvent(message_id="s")], 1, {"messageId": "s"}),
    "reasoning_message.unterminated": ([START, ReasoningMessageStartEvent(message_id="s"), FINISH], 2,
                                       {"messageId": "s"}),
    "step.already_open": ([START, StepStartedEvent(step_name="p"), StepStartedEvent(step_name="p")], 2,
                          {"stepName": "p"}),
    "step.not_open": ([START, StepFinishedEvent(step_name="p")], 1, {"stepName": "p"}),
    "step.unterminated": ([START, StepStartedEvent(step_name="p"), FINISH], 2, {"stepName": "p"}),
    "subagent.already_open": ([START, SubagentStartedEvent(subagent_run_id="s", name="n"),
                               SubagentStartedEvent(subagent_run_id="s", name="n")], 2, {"subagentRunId": "s"}),
    "subagent.id_reused": ([START, SubagentStartedEvent(subagent_run_id="s", name="n"),
                            SubagentErrorEvent(subagent_run_id="s", message="x"),
                            SubagentStartedEvent(subagent_run_id="s", name="n")], 3, {"subagentRunId": "s"}),
    "subagent.not_open": ([START, SubagentFinishedEvent(subagent_run_id="s")], 1, {"subagentRunId": "s"}),
    "subagent.unterminated": ([START, SubagentStartedEvent(subagent_run_id="s", name="n"), FINISH], 2,
                              {"subagentRunId": "s"}),
    "attribution.mismatch": ([START, TextMessageStartEvent(message_id="m", subagent_run_id="s1"),
                              TextMessageContentEvent(message_id="m", delta="x", subagent_run_id="s2")], 2,
                             {"messageId": "m", "subagentRunId": "s2"}),
    # the snapshot's version of m has no subagentRunId: from then on m belongs to the run itself
    "attribution.parent_mismatch": ([START, SubagentStartedEvent(subagent_run_id="s", name="n"),
                                     MessagesSnapshotEvent(messages=[AssistantMessage(id="m", content="hi")]),
                                     ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m",
                                                        subagent_run_id="s")], 3,
                                    {"toolCallId": "c", "parentMessageId": "m", "subagentRunId": "s"}),
    "chunk.missing_id": ([START, TextMessageChunkEvent(delta="x")], 1, {}),
    "chunk.conflict": ([START, TextMessageChunkEvent(message_id="m", role="assistant", delta="a"),
                        TextMessageChunkEvent(role="user", delta="b")], 2, {"messageId": "m"}),
    "chunk.ambiguous": ([START, SubagentStartedEvent(subagent_run_id="s1", name="a"),
                         SubagentStartedEvent(subagent_run_id="s2", name="b"),
                         TextMessageChunkEvent(message_id="m1", subagent_run_id="s1", delta="a"),
                         TextMessageChunkEvent(message_id="m2", subagent_run_id="s2", delta="b"),
                         TextMessageChunkEvent(delta="c")], 5, {}),
}


def test_every_rule_has_a_case() -> None:
    assert set(RULE_CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_rule(rule: str) -> None:
    stream, index, ids = RULE_CASES[rule]
    found = [v for v in verify_events(stream, include_warnings=True) if v.rule == rule]
    assert found, f"{rule} not reported"
    violation = found[0]
    assert (violation.event_index, violation.ids, violation.severity) == (index, ids, RULES[rule].severity)
    assert violation.message and str(index) in str(violation)


def test_protocol_violation_is_a_remote_input_error_with_location() -> None:
    verifier = Verifier()
    verifier.feed(START)
    with pytest.raises(ProtocolViolation) as info:
        verifier.feed(TextMessageEndEvent(message_id="ghost"))
    exc = info.value
    assert isinstance(exc, RemoteInputError)
    assert (exc.rule, exc.event_index, exc.ids) == ("text.not_open", 1, {"messageId": "ghost"})
    assert exc.http_status == 400 and exc.code == "protocol_violation"
    run_error = RunErrorEvent.from_error(exc)
    assert "text.not_open" in run_error.message and "'ghost'" in run_error.message and "event 1" in run_error.message


def test_run_finished_reports_everything_left_open_in_one_exception() -> None:
    verifier = Verifier()
    for event in [START, StepStartedEvent(step_name="p"), TextMessageStartEvent(message_id="m"),
                  ToolCallStartEvent(tool_call_id="c", tool_call_name="f")]:
        verifier.feed(event)
    with pytest.raises(ProtocolViolation) as info:
        verifier.feed(FINISH)
    assert [v.rule for v in info.value.violations] == ["step.unterminated", "text.unterminated", "tool_call.unterminated"]
    assert verifier.phase is Phase.FINISHED  # recovered: the run did finish


def test_verifier_recovers_and_keeps_judging_after_a_violation() -> None:
    verifier = Verifier()
    verifier.feed(START)
    with pytest.raises(ProtocolViolation):
        verifier.feed(TextMessageContentEvent(message_id="m", delta="x"))
    for event in [*_text(), FINISH]:
        verifier.feed(event)
    verifier.close()


def test_collect_mode_lists_every_violation_in_order() -> None:
    stream = [TextMessageContentEvent(message_id="m", delta="x"), StepFinishedEvent(step_name="s"),
              RunFinishedEvent(thread_id="t", run_id="r"), CustomEvent(name="a.b", value=None)]
    assert errors(stream) == [("lifecycle.first_event", 0), ("text.not_open", 0), ("step.not_open", 1),
                              ("lifecycle.after_finished", 3)]


def test_relax_downgrades_an_error_to_a_warning() -> None:
    stream = [START, RunFinishedEvent(thread_id="t1", run_id="other")]
    verifier = Verifier(relax={"lifecycle.run_ids"})
    for event in stream:
        verifier.feed(event)
    verifier.close()
    assert [(w.rule, w.severity) for w in verifier.warnings] == [("lifecycle.run_ids", "warning")]
    with pytest.raises(UsageError):
        Verifier(relax={"no.such_rule"})


# ----------------------------------------------------------------------------- lifecycle

def test_sequential_runs_and_late_run_error_are_fine() -> None:
    stream = [START, *_text(), FINISH, RunErrorEvent(message="late"), RunStartedEvent(thread_id="t1", run_id="r2"),
              RunFinishedEvent(thread_id="t1", run_id="r2")]
    assert errors(stream) == []


def test_a_stream_may_be_only_a_run_error() -> None:
    assert errors([RunErrorEvent(message="input rejected")]) == []


def test_run_error_leaves_debris_and_a_new_run_starts_clean() -> None:
    stream = [START, TextMessageStartEvent(message_id="m"), ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
              RunErrorEvent(message="boom"), RunStartedEvent(thread_id="t1", run_id="r2"), *_text(),
              RunFinishedEvent(thread_id="t1", run_id="r2")]
    assert errors(stream) == []


def test_after_error_only_run_started() -> None:
    assert errors([START, RunErrorEvent(message="x"), FINISH]) == [("lifecycle.after_error", 2)]


def test_truncated_and_empty_streams() -> None:
    verifier = Verifier()
    verifier.feed(START)
    verifier.feed(TextMessageStartEvent(message_id="m"))
    with pytest.raises(ProtocolViolation) as info:
        verifier.close()
    assert info.value.rule == "lifecycle.truncated" and "text message 'm'" in info.value.message
    verifier.close()  # idempotent
    with pytest.raises(UsageError):
        verifier.feed(FINISH)
    assert errors([]) == [("lifecycle.truncated", 0)]


def test_ids_are_scoped_per_run() -> None:
    # The same tool call id in the next run is a new call; the same message id continues it.
    stream = [START, *_tool(), FINISH, RunStartedEvent(thread_id="t1", run_id="r2"), *_tool(),
              RunFinishedEvent(thread_id="t1", run_id="r2")]
    assert errors(stream) == []


def test_tool_result_for_a_call_from_the_input_or_a_snapshot() -> None:
    call = ToolCall(id="c_prev", function=FunctionCall(name="approve", arguments="{}"))
    prior = AssistantMessage(id="a1", tool_calls=[call])
    result = ToolCallResultEvent(message_id="res", tool_call_id="c_prev", content="approved")
    assert errors([START, result, FINISH]) == [("tool_call.result_unknown", 1)]
    run_input = RunAgentInput(thread_id="t1", run_id="r1", messages=[prior])
    assert errors([START, result, FINISH], input=run_input) == []
    echoed = RunStartedEvent(thread_id="t1", run_id="r1", input=run_input)
    assert errors([echoed, result, FINISH]) == []
    assert errors([START, MessagesSnapshotEvent(messages=[prior]), result, FINISH]) == []


def test_subagent_may_restart_after_suspension() -> None:
    stream = [START, SubagentStartedEvent(subagent_run_id="s", name="n"),
              SubagentFinishedEvent(subagent_run_id="s", outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=["i"])),
              SubagentStartedEvent(subagent_run_id="s", name="n"), SubagentFinishedEvent(subagent_run_id="s"), FINISH]
    assert errors(stream) == []


def test_tool_args_check_can_be_switched_off_and_empty_args_are_fine() -> None:
    assert errors([START, *_tool(args="{"), FINISH], check_tool_args=False) == []
    assert errors([START, *_tool(args=""), FINISH]) == []
    assert errors([START, ToolCallStartEvent(tool_call_id="c", tool_call_name="f"), ToolCallEndEvent(tool_call_id="c"),
                   FINISH]) == []


def test_unknown_events_are_neutral() -> None:
    ping = UnknownEvent("AGUI_PING", {"type": "AGUI_PING"})
    verifier = Verifier()
    assert verifier.feed(ping) == [ping]  # before the run: does not count as the first event
    for event in [START, ping, FINISH, ping]:
        assert verifier.feed(event)[-1] is event
    verifier.close()


def test_event_types_without_ordering_rules_pass_inside_a_run() -> None:
    stream = [START, StateDeltaEvent(delta=[]), ActivityDeltaEvent(message_id="x", activity_type="a", patch=[]),
              ReasoningEncryptedValueEvent(subtype="message", entity_id="m", encrypted_value="e"),
              RawEvent(event=None), FINISH]
    assert errors(stream) == []


def test_the_table_covers_every_phase_with_a_default() -> None:
    for phase in Phase:
        assert (phase, "*") in TRANSITIONS
    assert [k.name for k in KINDS] == ["step", "text", "tool_call", "reasoning_message", "reasoning", "subagent"]


# ----------------------------------------------------------------------------- chunk expansion

def expand(events: list[Any]) -> list[Any]:
    expander = ChunkExpander()
    return [out for event in events for out in expander.feed(event)]


def test_text_chunks_expand_to_start_content_end() -> None:
    out = expand([START, TextMessageChunkEvent(message_id="m", delta="Hel", timestamp=5),
                  TextMessageChunkEvent(delta="lo"), FINISH])
    assert out == [START, TextMessageStartEvent(message_id="m", role="assistant", timestamp=5),
                   TextMessageContentEvent(message_id="m", delta="Hel", timestamp=5),
                   TextMessageContentEvent(message_id="m", delta="lo"), TextMessageEndEvent(message_id="m"), FINISH]


def test_tool_and_reasoning_chunks() -> None:
    out = expand([ToolCallChunkEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m", delta='{"a"'),
                  ToolCallChunkEvent(delta=":1}"), ReasoningMessageChunkEvent(message_id="r", delta="hmm"),
                  ReasoningMessageChunkEvent(delta=""), CustomEvent(name="x.y", value=1)])
    assert out == [
        ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m"),
        ToolCallArgsEvent(tool_call_id="c", delta='{"a"'), ToolCallArgsEvent(tool_call_id="c", delta=":1}"),
        ToolCallEndEvent(tool_call_id="c"),  # another kind of chunk closes the lane
        ReasoningMessageStartEvent(message_id="r"), ReasoningMessageContentEvent(message_id="r", delta="hmm"),
        # The reference client does not close a reasoning lane on an empty delta; it is content.
        ReasoningMessageContentEvent(message_id="r", delta=""),
        ReasoningMessageEndEvent(message_id="r"),  # CUSTOM closes a chunk lane
        CustomEvent(name="x.y", value=1),
    ]


def test_raw_activity_and_encrypted_values_do_not_close_a_lane() -> None:
    keep = [RawEvent(event={}), ActivityDeltaEvent(message_id="a", activity_type="x", patch=[]),
            ReasoningEncryptedValueEvent(subtype="message", entity_id="m", encrypted_value="e")]
    out = expand([TextMessageChunkEvent(message_id="m", delta="a"), *keep, TextMessageChunkEvent(delta="b")])
    assert out[-1] == TextMessageContentEvent(message_id="m", delta="b")
    assert TextMessageEndEvent(message_id="m") not in out


def test_a_chunk_naming_another_id_closes_the_lane() -> None:
    out = expand([TextMessageChunkEvent(message_id="a", delta="1"), TextMessageChunkEvent(message_id="b", delta="2")])
    assert [type(e).__name__ for e in out] == ["TextMessageStartEvent", "TextMessageContentEvent",
                                               "TextMessageEndEvent", "TextMessageStartEvent",
                                               "TextMessageContentEvent"]
    assert out[2].message_id == "a" and out[3].message_id == "b"


def test_chunk_metadata_goes_on_start_and_content_never_on_end() -> None:
    out = expand([TextMessageChunkEvent(message_id="a", metadata={"k": 1}),
                  TextMessageChunkEvent(metadata={"k": 2}), TextMessageChunkEvent(message_id="b", delta="x")])
    assert out[0] == TextMessageStartEvent(message_id="a", role="assistant", metadata={"k": 1})
    # A chunk with nothing but metadata becomes an empty CONTENT carrying it.
    assert out[1] == TextMessageContentEvent(message_id="a", delta="", metadata={"k": 2})
    assert out[2] == TextMessageEndEvent(message_id="a")


def test_chunk_lanes_are_per_subagent() -> None:
    out = expand([TextMessageChunkEvent(message_id="main", delta="a"),
                  TextMessageChunkEvent(message_id="sub", delta="b", subagent_run_id="s1"),
                  TextMessageChunkEvent(delta="c"), TextMessageChunkEvent(delta="d", subagent_run_id="s1"),
                  SubagentFinishedEvent(subagent_run_id="s1"), FINISH])
    contents = [(e.message_id, e.delta) for e in out if isinstance(e, TextMessageContentEvent)]
    assert contents == [("main", "a"), ("sub", "b"), ("main", "c"), ("sub", "d")]
    ends = [(type(e).__name__, getattr(e, "message_id", None), getattr(e, "subagent_run_id", None)) for e in out[-4:]]
    # The sub-agent's own terminal event closes its lane; RUN_FINISHED closes the rest.
    assert ends == [("TextMessageEndEvent", "sub", "s1"), ("SubagentFinishedEvent", None, "s1"),
                    ("TextMessageEndEvent", "main", None), ("RunFinishedEvent", None, None)]


def test_chunk_errors_leave_lanes_unchanged() -> None:
    expander = ChunkExpander()
    with pytest.raises(ProtocolViolation) as info:
        expander.feed(ToolCallChunkEvent(tool_call_id="c", delta="{}"))
    assert info.value.rule == "chunk.missing_id" and "toolCallName" in info.value.message
    assert expander.open_lanes == 0
    expander.feed(ToolCallChunkEvent(tool_call_id="c", tool_call_name="f"))
    with pytest.raises(ProtocolViolation) as info:
        expander.feed(ToolCallChunkEvent(tool_call_name="g", delta="x"))
    assert info.value.rule == "chunk.conflict"
    # Restating the same values is fine.
    assert expander.feed(ToolCallChunkEvent(tool_call_name="f", delta="{}")) == [ToolCallArgsEvent(tool_call_id="c",
                                                                                                    delta="{}")]
    assert expander.pending() == [ToolCallEndEvent(tool_call_id="c")]


def test_mixing_explicit_start_and_chunks_on_one_open_id_is_a_violation() -> None:
    stream = [START, TextMessageStartEvent(message_id="m"), TextMessageChunkEvent(message_id="m", delta="x")]
    assert errors(stream)[0] == ("text.already_open", 2)


def test_feed_returns_the_expanded_events() -> None:
    verifier = Verifier()
    assert verifier.feed(START) == [START]
    assert [type(e).__name__ for e in verifier.feed(TextMessageChunkEvent(message_id="m", delta="x"))] == [
        "TextMessageStartEvent", "TextMessageContentEvent"]
    assert [type(e).__name__ for e in verifier.feed(FINISH)] == ["TextMessageEndEvent", "RunFinishedEvent"]


# ----------------------------------------------------------------------------- properties

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(valid_streams())
def test_generated_valid_streams_pass(stream: list[Any]) -> None:
    assert verify_events(stream, include_warnings=True) == []


@settings(max_examples=at_most(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams())
def test_generated_valid_streams_also_pass_ag_ui_validate(stream: list[Any]) -> None:
    # Cross-check of the generator (and of us) against the third-party validator. Its 0.x schema
    # rejects list-valued tool results (1.0 allows them); everything else must agree.
    from ag_ui_validate import create_validator

    validator = create_validator()
    for event in stream:
        validator.feed(json.loads(encode_event(event)))
    validator.finalize()
    # It also closes a chunk lane cut by RUN_ERROR and judges its partial arguments (AGUI204 at the
    # RUN_ERROR); we drop such a lane (spec/verifier.md section 4).
    run_error_at = {i for i, e in enumerate(stream) if isinstance(e, RunErrorEvent)}
    errors_there = [d for d in validator.report().diagnostics if d.severity == "error"
                    and not (d.rule == "AGUI504" and "'content' must be a string" in d.message)
                    and not (d.rule == "AGUI204" and d.event_index in run_error_at)]
    assert errors_there == []


CLOSERS = (TextMessageEndEvent, ToolCallEndEvent, ReasoningMessageEndEvent, ReasoningEndEvent, StepFinishedEvent,
           SubagentFinishedEvent, RunFinishedEvent)


@PROPERTY
@given(valid_streams(allow_error_end=False), st.data())
def test_dropping_any_closing_event_is_detected(stream: list[Any], data: st.DataObject) -> None:
    positions = [i for i, event in enumerate(stream) if isinstance(event, CLOSERS)]
    drop = data.draw(st.sampled_from(positions))
    broken = stream[:drop] + stream[drop + 1:]
    assert verify_events(broken), f"dropping {stream[drop]!r} went unnoticed"


@PROPERTY
@given(event_soup())
def test_any_sequence_gives_the_same_first_error_in_both_modes(stream: list[Any]) -> None:
    collected = verify_events(stream)
    verifier = Verifier()
    raised: Violation | None = None
    try:
        for event in stream:
            verifier.feed(event)
        verifier.close()
    except ProtocolViolation as exc:
        raised = exc.violation
    assert raised == (collected[0] if collected else None)


@PROPERTY
@given(event_soup())
def test_chunk_free_output_and_one_row_per_event(stream: list[Any]) -> None:
    verifier = Verifier(collect=True)
    for event in stream:
        out = verifier.feed(event)
        assert not any(isinstance(e, (TextMessageChunkEvent, ToolCallChunkEvent, ReasoningMessageChunkEvent))
                       for e in out)
    verifier.close()
    assert all(v.event_index <= len(stream) for v in verifier.violations)


@PROPERTY
@given(event_soup())
def test_fast_path_agrees_with_the_table(stream: list[Any]) -> None:
    # feed() takes a shortcut for the bulk events (CONTENT / ARGS); switched off,
    # every event goes through the table: outputs, violations and warnings must match.
    def run(fast: dict[type, Any]) -> tuple[list[list[Any]], list[Violation], list[Violation], list[list[str]]]:
        saved = verify_module._FAST_CONTINUE
        verify_module._FAST_CONTINUE = fast  # type: ignore[misc]
        try:
            verifier = Verifier(collect=True)
            outs = [verifier.feed(event) for event in stream]
            verifier.close()
            return outs, verifier.violations, verifier.warnings, [verifier.open_ids(k) for k in KINDS]
        finally:
            verify_module._FAST_CONTINUE = saved  # type: ignore[misc]

    assert run(verify_module._FAST_CONTINUE) == run({})


def test_fast_path_covers_the_continue_rows() -> None:
    assert set(verify_module._FAST_CONTINUE) == {
        TextMessageContentEvent,
        ToolCallArgsEvent,
        ReasoningMessageContentEvent,
    }


def test_spec_lists_every_rule_with_its_severity() -> None:
    spec = (Path(__file__).resolve().parents[3] / "spec" / "verifier.md").read_text(encoding="utf-8")
    for rule in RULES.values():
        assert f"| `{rule.id}` | {rule.severity} |" in spec, rule.id


@PROPERTY
@given(valid_streams())
def test_expanded_output_is_a_fixed_point(stream: list[Any]) -> None:
    # What the verifier forwards verifies again, unchanged: downstream verifiers agree with us.
    first = Verifier()
    expanded = [e for event in stream for e in first.feed(event)]
    second = Verifier()
    assert [e for event in expanded for e in second.feed(event)] == expanded
    first.close()
    second.close()


# ----------------------------------------------------------------------------- an independent oracle

_OPEN = {"TEXT_MESSAGE_START": "text", "TOOL_CALL_START": "tool_call", "REASONING_START": "reasoning",
         "REASONING_MESSAGE_START": "reasoning_message", "STEP_STARTED": "step", "SUBAGENT_STARTED": "subagent"}
_CONTINUE = {"TEXT_MESSAGE_CONTENT": "text", "TOOL_CALL_ARGS": "tool_call", "REASONING_MESSAGE_CONTENT":
             "reasoning_message"}
_CLOSE = {"TEXT_MESSAGE_END": "text", "TOOL_CALL_END": "tool_call", "REASONING_END": "reasoning",
          "REASONING_MESSAGE_END": "reasoning_message", "STEP_FINISHED": "step", "SUBAGENT_FINISHED": "subagent",
          "SUBAGENT_ERROR": "subagent"}
_ORDER = ["step", "text", "tool_call", "reasoning_message", "reasoning", "subagent"]


def _key(event: Any) -> str:
    # In this order: every attributable event also has a subagent_run_id, which is only the key
    # of the SUBAGENT_* events.
    for attr in ("tool_call_id", "step_name", "message_id", "subagent_run_id"):
        if hasattr(event, attr):
            return getattr(event, attr)
    raise AssertionError(event)


def oracle(stream: list[Any]) -> list[tuple[str, int]]:
    """spec/verifier.md section 2 restated as straight-line code, for chunk-free streams of the soup
    (no sub-agent attribution, no tool arguments that could be JSON-checked differently)."""
    found: list[tuple[str, int]] = []
    phase, ids = "start", None
    opened: dict[str, dict[str, int]] = {}
    ended_tools: set[str] = set()
    ended_subagents: set[str] = set()
    ended_text: dict[str, str] = {}  # id -> role (closed, not sealed: a re-open must keep it)
    roles: dict[str, str] = {}
    known_tools: set[str] = set()
    args: dict[str, str] = {}

    def new_scope() -> None:
        nonlocal opened, ended_tools, ended_subagents, ended_text
        opened = {kind: {} for kind in _ORDER}
        ended_tools, ended_subagents, ended_text = set(), set(), {}

    new_scope()
    for i, event in enumerate(stream):
        t = event.type.value
        if phase == "start":
            if t == "RUN_STARTED":
                phase, ids = "running", (event.thread_id, event.run_id)
                continue
            if t == "RUN_ERROR":
                phase = "errored"
                continue
            found.append(("lifecycle.first_event", i))
            phase, ids = "running", None
        if phase in ("finished", "errored"):
            if t == "RUN_STARTED":
                phase, ids = "running", (event.thread_id, event.run_id)
                new_scope()
            elif t == "RUN_ERROR" and phase == "finished":
                phase = "errored"
            else:
                found.append(("lifecycle.after_finished" if phase == "finished" else "lifecycle.after_error", i))
            continue
        if t == "RUN_STARTED":
            found.append(("lifecycle.nested_run", i))
        elif t == "RUN_ERROR":
            phase = "errored"
        elif t == "RUN_FINISHED":
            if ids is not None and (event.thread_id, event.run_id) != ids:
                found.append(("lifecycle.run_ids", i))
            found += [(f"{kind}.unterminated", i) for kind in _ORDER for _ in opened[kind]]
            phase = "finished"
        elif t in _OPEN:
            kind, key = _OPEN[t], _key(event)
            if key in opened[kind]:
                found.append((f"{kind}.already_open", i))
            elif kind == "tool_call" and key in ended_tools:
                found.append(("tool_call.id_reused", i))
            elif kind == "subagent" and key in ended_subagents:
                found.append(("subagent.id_reused", i))
            elif kind == "text" and ended_text.get(key, event.role or "assistant") != (event.role or "assistant"):
                found.append(("text.reopen_conflict", i))
            else:
                opened[kind][key] = i
                if kind == "text":
                    ended_text.pop(key, None)
                    roles[key] = event.role or "assistant"
                if kind == "tool_call":
                    known_tools.add(key)
                    args[key] = ""
        elif t in _CONTINUE:
            kind, key = _CONTINUE[t], _key(event)
            if key not in opened[kind]:
                found.append((f"{kind}.not_open", i))
            elif kind == "tool_call":
                args[key] += event.delta
        elif t in _CLOSE:
            kind, key = _CLOSE[t], _key(event)
            if key not in opened[kind]:
                found.append((f"{kind}.not_open", i))
                continue
            del opened[kind][key]
            if kind == "tool_call":
                ended_tools.add(key)
                if args[key]:
                    try:
                        json.loads(args[key])
                    except ValueError:
                        found.append(("tool_call.args_not_json", i))
            elif kind == "subagent":
                ended_subagents.add(key)
            elif kind == "text":
                ended_text[key] = roles[key]
        elif t == "TOOL_CALL_RESULT" and event.tool_call_id not in opened["tool_call"] and \
                event.tool_call_id not in known_tools:
            found.append(("tool_call.result_unknown", i))
    if phase == "running" or not stream:
        found.append(("lifecycle.truncated", len(stream)))
    return found


@PROPERTY
@given(event_soup(max_size=30))
def test_the_verifier_agrees_with_a_straight_line_oracle(stream: list[Any]) -> None:
    chunk_free = [e for e in stream if not isinstance(e, (TextMessageChunkEvent, ToolCallChunkEvent,
                                                          ReasoningMessageChunkEvent))]
    assert errors(chunk_free) == oracle(chunk_free)
