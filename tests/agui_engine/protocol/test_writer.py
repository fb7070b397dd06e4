"""The event writer: every open / append / close, the implicit closes, the ids, and the
property that any sequence of writer calls is a stream body the Verifier accepts."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Event,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agui_engine.protocol.ids import Ids, new_id, random_id
from agui_engine.protocol.verify import REASONING, REASONING_MESSAGE, STEP, TEXT, TOOL, Verifier, verify_events
from agui_engine.protocol.writer import EventWriter, WriterError, end_event, end_events, start_event


def counter_ids() -> Ids:
    counter = itertools.count(1)
    return Ids(lambda: f"id{next(counter)}")


def run(body: list[Event]) -> list[Event]:
    return [RunStartedEvent(thread_id="t", run_id="r"), *body, RunFinishedEvent(thread_id="t", run_id="r")]


# --------------------------------------------------------------------------- ids


def test_ids_policies() -> None:
    assert len(new_id()) == 32 and new_id() != new_id()
    call = random_id("call_", 24)
    assert call.startswith("call_") and len(call) == 29
    seq = Ids.sequential("run1")
    assert [seq.mint("msg"), seq.mint("call"), seq.mint("msg")] == ["run1-msg-1", "run1-call-2", "run1-msg-3"]
    assert counter_ids().mint("anything") == "id1"
    assert len(Ids().mint("msg")) == 32


# --------------------------------------------------------------------------- text and reasoning


def test_text_opens_appends_and_closes() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    assert w.text("Hel", out) == "id1"
    assert w.text("lo", out) == "id1"
    assert w.current() == (TEXT, "id1") and w.is_open(TEXT, "id1") and w.any_open()
    w.close_lane(out)
    assert out == [
        TextMessageStartEvent(message_id="id1", role="assistant"),
        TextMessageContentEvent(message_id="id1", delta="Hel"),
        TextMessageContentEvent(message_id="id1", delta="lo"),
        TextMessageEndEvent(message_id="id1"),
    ]
    assert not w.any_open() and w.current() is None
    w.close_lane(out)  # nothing open: nothing to close
    assert len(out) == 4


def test_empty_delta_opens_without_content() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.text("", out, message_id="m", role="user")
    assert out == [TextMessageStartEvent(message_id="m", role="user")]


def test_reasoning_is_a_span_and_a_message_with_one_id() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    assert w.reasoning("think", out) == "id1"
    assert w.open_ids(REASONING) == ["id1"] and w.open_ids(REASONING_MESSAGE) == ["id1"]
    w.close_lane(out)
    assert out == [
        ReasoningStartEvent(message_id="id1"),
        ReasoningMessageStartEvent(message_id="id1"),
        ReasoningMessageContentEvent(message_id="id1", delta="think"),
        ReasoningMessageEndEvent(message_id="id1"),
        ReasoningEndEvent(message_id="id1"),
    ]


def test_implicit_closes_between_text_and_reasoning() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.reasoning("a", out)
    w.text("b", out)  # closes the reasoning first
    w.reasoning("c", out)  # closes the text first
    w.text("d", out, message_id="named")  # another kind: close, open with the given id
    w.text("e", out, message_id="other")  # another id: close, open
    types = [type(e).__name__ for e in out]
    assert types == [
        "ReasoningStartEvent", "ReasoningMessageStartEvent", "ReasoningMessageContentEvent",
        "ReasoningMessageEndEvent", "ReasoningEndEvent",
        "TextMessageStartEvent", "TextMessageContentEvent", "TextMessageEndEvent",
        "ReasoningStartEvent", "ReasoningMessageStartEvent", "ReasoningMessageContentEvent",
        "ReasoningMessageEndEvent", "ReasoningEndEvent",
        "TextMessageStartEvent", "TextMessageContentEvent", "TextMessageEndEvent",
        "TextMessageStartEvent", "TextMessageContentEvent",
    ]
    assert [e.message_id for e in out if isinstance(e, TextMessageStartEvent)] == ["id2", "named", "other"]
    w.close_all(out)
    assert verify_events(run(out)) == []


def test_seal_reasoning_ends_the_block() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.reasoning("x", out)
    assert w.seal_reasoning("sig", out) == "id1"
    assert w.current() is None
    assert w.seal_reasoning("blob", out) == "id2"  # nothing open: a reasoning message of its own
    assert [e for e in out if isinstance(e, ReasoningEncryptedValueEvent)] == [
        ReasoningEncryptedValueEvent(subtype="message", entity_id="id1", encrypted_value="sig"),
        ReasoningEncryptedValueEvent(subtype="message", entity_id="id2", encrypted_value="blob"),
    ]
    assert out[-2:] == [ReasoningMessageEndEvent(message_id="id2"), ReasoningEndEvent(message_id="id2")]
    assert verify_events(run(out)) == []


def test_lanes_are_independent() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.text("a", out, lane="m1", message_id="m1")
    w.reasoning("b", out, lane="m2")
    w.text("c", out, lane="m1")  # continues m1: the other lane does not close it
    assert w.current("m1") == (TEXT, "m1") and w.current("m2") == (REASONING, "id1")
    w.close_lane(out, "m1")
    assert out[-1] == TextMessageEndEvent(message_id="m1") and w.current("m2") is not None


# --------------------------------------------------------------------------- tool calls


def test_tool_call_open_args_end() -> None:
    w = EventWriter(counter_ids())
    start = w.open_tool("search", parent_message_id="m")
    assert start == ToolCallStartEvent(tool_call_id="id1", tool_call_name="search", parent_message_id="m")
    assert w.tool_args("id1", '{"q":') == ToolCallArgsEvent(tool_call_id="id1", delta='{"q":')
    assert w.open_tool("x", tool_call_id="c2").tool_call_id == "c2"
    assert w.open_ids(TOOL) == ["id1", "c2"]
    assert w.end_tool("id1") == ToolCallEndEvent(tool_call_id="id1")
    assert w.open_ids(TOOL) == ["c2"]


def test_the_writer_says_where_a_tool_call_is_in_its_life() -> None:
    """Not opened, open, ended: what a translator asks instead of keeping flags of its own."""
    w = EventWriter(counter_ids())
    assert (w.is_open(TOOL, "c1"), w.tool_ended("c1")) == (False, False)
    w.open_tool("t", tool_call_id="c1")
    assert (w.is_open(TOOL, "c1"), w.tool_ended("c1")) == (True, False)
    w.end_tool("c1")
    assert (w.is_open(TOOL, "c1"), w.tool_ended("c1")) == (False, True)
    out: list[Event] = []
    w.open_tool("t", tool_call_id="c2")
    w.close_all(out)  # closing everything ends the call too
    assert w.tool_ended("c2") and not w.is_open(TOOL, "c2")


def test_a_tool_call_does_not_close_the_text() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.text("a", out)
    out.append(w.open_tool("t"))
    w.text("b", out)
    assert w.current() == (TEXT, "id1")


def test_close_all_order_and_tools_flag() -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.reasoning("r", out, lane="r")
    w.text("t", out, lane="t")
    out.append(w.open_tool("a", tool_call_id="c1"))
    out.append(w.open_tool("b", tool_call_id="c2"))
    out.append(w.tool_args("c1", "{}"))
    closing: list[Event] = []
    w.close_all(closing, tools=False)
    assert closing == [TextMessageEndEvent(message_id="id2"), ReasoningMessageEndEvent(message_id="id1"),
                       ReasoningEndEvent(message_id="id1")]
    assert w.open_ids(TOOL) == ["c1", "c2"]
    w.close_all(closing)
    assert closing[3:] == [ToolCallEndEvent(tool_call_id="c1"), ToolCallEndEvent(tool_call_id="c2")]
    assert not w.any_open()
    assert verify_events(run(out + closing)) == []


def test_end_events_of_a_verifier() -> None:
    v = Verifier()
    for e in run([TextMessageStartEvent(message_id="m"), ReasoningStartEvent(message_id="r"),
                  ReasoningMessageStartEvent(message_id="r")])[:-1]:
        v.feed(e)
    assert end_events(v.open_ids) == [TextMessageEndEvent(message_id="m"), ReasoningMessageEndEvent(message_id="r"),
                                      ReasoningEndEvent(message_id="r")]


def test_start_and_end_tables_are_the_writers_own() -> None:
    """start_event / end_event make exactly the events the writer makes (one table each), and
    carry a sub-agent's run id on a START; a tool call has no START from its id alone."""
    w, out = EventWriter(counter_ids()), list[Event]()
    w.text("", out, message_id="m", role="user")
    w.reasoning("", out, lane="thinking", message_id="r")
    assert out == [start_event(TEXT, "m", role="user"), start_event(REASONING, "r"),
                   start_event(REASONING_MESSAGE, "r")]
    closing: list[Event] = []
    w.close_all(closing)
    assert closing == [end_event(TEXT, "m"), end_event(REASONING_MESSAGE, "r"), end_event(REASONING, "r")]
    w.open_tool("t", tool_call_id="c")
    assert w.end_tool("c") == end_event(TOOL, "c") == ToolCallEndEvent(tool_call_id="c")
    assert end_event(STEP, "s") == StepFinishedEvent(step_name="s")
    assert start_event(TEXT, "m", subagent_run_id="sub") == TextMessageStartEvent(
        message_id="m", role="assistant", subagent_run_id="sub")
    assert start_event(REASONING_MESSAGE, "r", subagent_run_id="sub") == ReasoningMessageStartEvent(
        message_id="r", role="reasoning", subagent_run_id="sub")
    with pytest.raises(WriterError, match="tool call has no START"):
        start_event(TOOL, "c")


# --------------------------------------------------------------------------- misuse


@pytest.mark.parametrize(
    "misuse",
    [
        lambda w, out: w.tool_args("nope", "{}"),
        lambda w, out: w.end_tool("nope"),
        lambda w, out: w.open_tool("t", tool_call_id="open"),
        lambda w, out: w.open_tool("t", tool_call_id="ended"),
        lambda w, out: w.text("x", out, lane="other", message_id="m"),
        lambda w, out: w.reasoning("x", out, lane="other", message_id="r"),
        lambda w, out: w.text("x", out, message_id="closed", role="user"),
    ],
    ids=["args-not-open", "end-not-open", "open-twice", "id-reused", "text-open-elsewhere",
         "reasoning-open-elsewhere", "reopen-other-role"],
)
def test_misuse_raises_and_emits_nothing(misuse: Any) -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    w.text("", out, lane="c", message_id="closed")
    w.close_lane(out, "c")
    w.open_tool("t", tool_call_id="open")
    w.open_tool("t", tool_call_id="ended")
    w.end_tool("ended")
    w.text("a", out, lane="m", message_id="m")
    w.reasoning("a", out, lane="r", message_id="r")
    before = list(out)
    with pytest.raises(WriterError) as info:
        misuse(w, out)
    assert isinstance(info.value, UsageError)
    assert out == before
    assert w.current("m") == (TEXT, "m") and w.open_ids(TOOL) == ["open"]


# --------------------------------------------------------------------------- the property

_LANES = st.sampled_from([None, "a", "b"])
_IDS = st.one_of(st.none(), st.sampled_from(["x", "y", "z"]))
_DELTA = st.sampled_from(["", "hi", " there"])

_OPS = st.one_of(
    st.tuples(st.just("text"), _DELTA, _LANES, _IDS, st.sampled_from(["assistant", "user"])),
    st.tuples(st.just("reasoning"), _DELTA, _LANES, _IDS),
    st.tuples(st.just("seal"), _LANES, _IDS),
    st.tuples(st.just("close_lane"), _LANES),
    st.tuples(st.just("open_tool"), _IDS, _LANES),
    st.tuples(st.just("args"), st.integers(0, 3)),
    st.tuples(st.just("end"), st.integers(0, 3)),
    st.tuples(st.just("close_all"), st.booleans()),
)


def _apply(w: EventWriter, op: tuple[Any, ...], out: list[Event], known_calls: list[str]) -> None:
    name = op[0]
    if name == "text":
        w.text(op[1], out, lane=op[2], message_id=op[3], role=op[4])
    elif name == "reasoning":
        w.reasoning(op[1], out, lane=op[2], message_id=op[3])
    elif name == "seal":
        w.seal_reasoning("blob", out, lane=op[1], message_id=op[2])
    elif name == "close_lane":
        w.close_lane(out, op[1])
    elif name == "open_tool":
        start = w.open_tool("tool", tool_call_id=op[1], lane=op[2])
        known_calls.append(start.tool_call_id)
        out.append(start)
    elif name == "args" and known_calls:
        out.append(w.tool_args(known_calls[op[1] % len(known_calls)], '{"a":1}'))
    elif name == "end" and known_calls:
        out.append(w.end_tool(known_calls[op[1] % len(known_calls)]))
    elif name == "close_all":
        w.close_all(out, tools=op[1])


@settings(deadline=None)
@given(st.lists(_OPS, max_size=40))
def test_any_sequence_of_writer_calls_verifies(ops: list[tuple[Any, ...]]) -> None:
    w = EventWriter(counter_ids())
    out: list[Event] = []
    known_calls: list[str] = []
    for op in ops:
        before = len(out)
        try:
            _apply(w, op, out, known_calls)
        except WriterError:
            assert len(out) == before  # a refused call emits nothing
    w.close_all(out)
    assert not w.any_open()
    # the writer does not own argument text: several '{"a":1}' fragments are not one JSON value
    found = verify_events(run(out), check_tool_args=False)
    assert found == [], (found, [msgspec.json.encode(e).decode() for e in out])
