"""The Accumulator and Verifier agree with ``@ag-ui/client`` 1.0: one minimal stream per difference once found.

Each stream is written in wire form and decoded, as a client would receive it;
the expected values are what the real client's ``defaultApplyEvents`` (after
its ``transformChunks``) gives for the same bytes (checked against it by
``test_accumulator_differential.py``).
"""

from __future__ import annotations

import json
from typing import Any

from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.verify import Verifier


def events(*wire: dict[str, Any]) -> list[Any]:
    return [decode_event(json.dumps(w)) for w in wire]


def accumulate(*wire: dict[str, Any]) -> Accumulator:
    acc = Accumulator()
    acc.apply_all(events(*wire))
    return acc


RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


def test_event_metadata_is_merged_into_tool_calls_key_by_key() -> None:
    acc = accumulate(
        RUN,
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "metadata": {"a": 1, "b": 1}},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}", "metadata": {"trace": True, "b": 2}},
        {"type": "TOOL_CALL_END", "toolCallId": "c", "metadata": {"end": [1]}},
    )
    assert acc.messages[0]["toolCalls"][0]["metadata"] == {"a": 1, "b": 2, "trace": True, "end": [1]}
    assert "metadata" not in acc.messages[0]


def test_event_metadata_is_merged_into_text_reasoning_and_tool_result_messages() -> None:
    acc = accumulate(
        RUN,
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "metadata": {"model": "x"}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "metadata": {"tokens": 1}},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"finish": "stop", "tokens": 2}},
        {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning", "metadata": {"k": 1}},
        {"type": "REASONING_MESSAGE_END", "messageId": "r1", "metadata": {"k": 2}},
        {"type": "TOOL_CALL_RESULT", "messageId": "tr", "toolCallId": "c", "content": "ok", "metadata": {"ms": 3}},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "delta": "y", "metadata": {"chunk": True}},
    )
    by_id = {m["id"]: m for m in acc.messages}
    assert by_id["m"]["metadata"] == {"model": "x", "tokens": 2, "finish": "stop"}
    assert by_id["r1"]["metadata"] == {"k": 2}
    assert by_id["tr"]["metadata"] == {"ms": 3}
    assert by_id["m2"]["metadata"] == {"chunk": True}


def test_activity_metadata_merges_and_a_replaced_non_activity_message_loses_its_metadata() -> None:
    acc = accumulate(
        RUN,
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {}, "metadata": {"x": 1}},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {"n": 1},
         "replace": False, "metadata": {"y": 2}},
        {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "PLAN",
         "patch": [{"op": "remove", "path": "/missing"}], "metadata": {"z": 3}},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "metadata": {"old": True}},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "P", "content": {}, "metadata": {"new": True}},
    )
    by_id = {m["id"]: m for m in acc.messages}
    # replace:false keeps the content but still merges metadata; a failing patch still merges it.
    assert by_id["a"] == {"id": "a", "role": "activity", "activityType": "PLAN", "content": {},
                          "metadata": {"x": 1, "y": 2, "z": 3}}
    assert by_id["m"] == {"id": "m", "role": "activity", "activityType": "P", "content": {}, "metadata": {"new": True}}


def test_activity_delta_updates_the_activity_type() -> None:
    acc = accumulate(
        RUN,
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {"n": 0}},
        {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "SEARCH",
         "patch": [{"op": "replace", "path": "/n", "value": 1}]},
    )
    assert acc.messages == [{"id": "a", "role": "activity", "activityType": "SEARCH", "content": {"n": 1}}]


def test_a_replacing_activity_snapshot_states_the_attribution_afresh() -> None:
    acc = accumulate(
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {}, "subagentRunId": "s"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {"n": 1}},
    )
    assert acc.messages == [{"id": "a", "role": "activity", "activityType": "PLAN", "content": {"n": 1}}]


def test_a_bare_chunk_continues_the_only_open_lane() -> None:
    acc = accumulate(
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "smsg", "subagentRunId": "s", "delta": "x"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "x"},
    )
    assert acc.messages == [{"id": "smsg", "role": "assistant", "content": "xx", "subagentRunId": "s"}]
    assert acc.problems == []


def test_a_chunk_naming_an_open_message_joins_its_sub_agent_lane() -> None:
    wire = (
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "smsg", "subagentRunId": "s", "delta": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "smsg", "delta": ""},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "smsg", "delta": "b"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    )
    verifier = Verifier(collect=True)
    for ev in events(*wire):
        verifier.feed(ev)
    verifier.close()
    assert verifier.violations == []
    acc = accumulate(*wire)
    assert acc.messages == [{"id": "smsg", "role": "assistant", "content": "ab", "subagentRunId": "s"}]


def test_a_bare_chunk_with_two_open_lanes_is_ambiguous() -> None:
    verifier = Verifier(collect=True)
    for ev in events(
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s2", "name": "b"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s1", "delta": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "subagentRunId": "s2", "delta": "b"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "?"},
    ):
        verifier.feed(ev)
    assert [v.rule for v in verifier.violations] == ["chunk.ambiguous"]
    assert verifier.violations[0].event_index == 5


def test_a_chunk_contradicting_its_message_owner_is_a_conflict() -> None:
    verifier = Verifier(collect=True)
    for ev in events(
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s2", "name": "b"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s1", "delta": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s2", "delta": "b"},
    ):
        verifier.feed(ev)
    assert [v.rule for v in verifier.violations] == ["chunk.conflict"]


def test_messages_snapshot_closes_sub_agent_chunk_lanes() -> None:
    acc = accumulate(
        RUN,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "subagentRunId": "s", "delta": "a"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user", "content": "q"}]},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "subagentRunId": "s", "delta": "b"},
    )
    assert acc.messages == [
        {"id": "u", "role": "user", "content": "q"},
        {"id": "m", "role": "assistant", "content": "b", "subagentRunId": "s"},
    ]
    assert acc.problems == []


def test_a_resume_whose_run_errors_leaves_the_interrupt_pending() -> None:
    interrupted = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                   "outcome": {"type": "interrupt", "interrupts": [{"id": "int6", "reason": "approve"}]}}
    resume = {"type": "RUN_STARTED", "threadId": "t", "runId": "r2", "input": {
        "threadId": "t", "runId": "r2", "state": {}, "messages": [], "tools": [], "context": [],
        "forwardedProps": {}, "resume": [{"interruptId": "int6", "status": "resolved"}]}}
    acc = accumulate(RUN, interrupted, resume, {"type": "RUN_ERROR", "message": "boom"})
    assert [i["id"] for i in acc.pending_interrupts] == ["int6"]
    acc.apply_all(events({**resume, "runId": "r3"}, {"type": "RUN_FINISHED", "threadId": "t", "runId": "r3"}))
    assert acc.pending_interrupts == []
