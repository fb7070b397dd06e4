"""compact_events against @ag-ui/client 1.0.0's compactEvents under node, field for field.

One node process (``tests/js/compact.mjs``, line in, line out) serves the whole module: the
hand-written streams (every branch of compact.ts), hypothesis threads from ``valid_streams``
(plain, and with state windows and metadata mixed in), the accumulator differential's seeded
threads and the recorded wire samples. For every generated stream the Accumulator must also
build the same thread (messages, state) from the compacted events as from the original.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.compact import compact_events
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    AddOperation,
    CustomEvent,
    RemoveOperation,
    ReplaceOperation,
    StateDeltaEvent,
    StateSnapshotEvent,
    TestOperation,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UnknownEvent,
)
from tests.helpers import node_with

from ..agui_streams import JSON_VALUES, event_soup, valid_streams
from ..event_samples import ALL_EVENT_SAMPLES
from .test_accumulator_differential import ThreadWriter

JS_DIR = Path(__file__).resolve().parents[2] / "js"
#: Seeded threads of the accumulator differential's writer (state patches with every op, metadata,
#: chunks, sub-agents, activities, messages snapshots, interrupts).
WRITER_THREADS = int(os.environ.get("COMPACT_THREADS", "150"))
WRITER_SEED = int(os.environ.get("COMPACT_SEED", "25"))
#: Hypothesis examples per generated-stream test (each a batch of 5 streams); COMPACT_EXAMPLES explores further.
EXAMPLES = int(os.environ.get("COMPACT_EXAMPLES", "15"))


class Client:
    """compactEvents in one long-lived node process: one line (a thread) in, one line out."""

    def __init__(self) -> None:
        node = node_with("@ag-ui/client")
        self.proc = subprocess.Popen([node, "compact.mjs"], cwd=JS_DIR, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def compact(self, wire: list[Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(wire, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"compact.mjs exited with {self.proc.wait(timeout=10)}"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    c = Client()
    yield c
    c.close()


def wire(event: Any) -> Any:
    """The event as its JSON object on the wire."""
    return json.loads(encode_event(event))


def decode(wire_event: dict[str, Any]) -> Any:
    return decode_event(json.dumps(wire_event), tolerant=True)


def assert_same(client: Client, events: list[Any]) -> list[Any]:
    """compact_events(events) == compactEvents(events), field for field; returns ours."""
    ours = compact_events(events)
    theirs = client.compact([wire(e) for e in events])
    assert "error" not in theirs, theirs
    assert [wire(e) for e in ours] == theirs["events"], json.dumps(
        {"input": [wire(e) for e in events], "ours": [wire(e) for e in ours], "theirs": theirs["events"]}, indent=1
    )
    return ours


def thread_of(events: list[Any]) -> dict[str, Any]:
    acc = Accumulator()
    for event in events:
        acc.apply(event)
    return {"messages": acc.messages, "state": acc.state}


# --------------------------------------------------------------------------------------------
# hand-written streams: every branch of compact.ts
# --------------------------------------------------------------------------------------------

RS = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
RF = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
RE = {"type": "RUN_ERROR", "message": "boom", "code": "x"}
CUSTOM = {"type": "CUSTOM", "name": "note", "value": {"n": 1}}
RAW = {"type": "RAW", "event": {"p": 1}}


def ts(mid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **kw}


def tc(mid: str, delta: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta, **kw}


def te(mid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": mid, **kw}


def cs(cid: str, name: str = "lookup", **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name, **kw}


def ca(cid: str, delta: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": delta, **kw}


def ce(cid: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_END", "toolCallId": cid, **kw}


def snap(value: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "STATE_SNAPSHOT", "snapshot": value, **kw}


def delta(*ops: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "STATE_DELTA", "delta": list(ops), **kw}


BASE = {"timestamp": 1767225600123, "rawEvent": {"provider": "native"}}
M1, M2, M3 = {"metadata": {"a": 1, "k": "first"}}, {"metadata": {"k": "second", "b": [1]}}, {"metadata": {}}

CASES: dict[str, list[dict[str, Any]]] = {
    "empty": [],
    "text folded: deltas joined, their timestamp/rawEvent/subagentRunId dropped": [
        RS, ts("m", **BASE), tc("m", "Hel", **BASE, subagentRunId="s"), tc("m", ""), tc("m", "lo 👋", **M1),
        te("m", **BASE), RF],
    "tool call folded": [RS, cs("c", parentMessageId="p", **M1), ca("c", '{"q":'), ca("c", '"x"}', **M2), ce("c"), RF],
    "one delta, no delta": [RS, ts("m"), tc("m", "x"), te("m"), ts("n"), te("n"), cs("c"), ce("c"), RF],
    "delta metadata merged last write wins, {} kept": [
        RS, ts("m"), tc("m", "a", **M1), tc("m", "b", **M2), tc("m", "c", **M3), te("m"), RF],
    "only {} metadata": [RS, ts("m"), tc("m", "a", **M3), te("m"), RF],
    "nested metadata values replaced wholesale": [
        RS, ts("m"), tc("m", "a", metadata={"ag-ui": {"x": 1, "y": 2}}), tc("m", "b", metadata={"ag-ui": {"z": 3}}),
        te("m"), RF],
    "START replayed before deltas merges metadata": [
        RS, ts("m", **M1), ts("m", **M2), ts("m"), tc("m", "x"), te("m"), cs("c", **M1), cs("c", "other"), ce("c"), RF],
    "START replayed before deltas, first without metadata": [RS, ts("m"), ts("m", role="user", **M2), te("m"), RF],
    "START replayed after deltas: its fields win, its metadata rides the delta": [
        RS, ts("m", **M1), tc("m", "a", **M2), ts("m", role="user", name="n", **BASE, metadata={"late": True}),
        tc("m", "b"), te("m"), cs("c", **M1), ca("c", "{"), cs("c", "renamed", metadata={"z": 0}), ca("c", "}"), ce("c"),
        RF],
    "START replayed after deltas without metadata keeps the first START's": [
        RS, ts("m", **M1), tc("m", "a"), ts("m", role="user"), te("m"), RF],
    "START first seen after deltas": [RS, tc("m", "a", **M1), ts("m", **M2), tc("m", "b"), te("m"), RF],
    "START after deltas twice": [RS, tc("m", "a"), ts("m", **M1), ts("m", **M2), ts("m"), te("m"), RF],
    "deltas and END with no START": [RS, tc("m", "a"), tc("m", "b"), te("m"), ca("c", "{}"), ce("c"), RF],
    "END alone": [RS, te("m"), ce("c"), RF],
    "an event inside an open message is held until its END": [
        RS, ts("m"), tc("m", "a"), CUSTOM, RAW, tc("m", "b"), te("m"), CUSTOM, RF],
    "inside an open tool call": [RS, cs("c"), CUSTOM, ca("c", "{}"), ce("c"), RF],
    "text message first, then tool call, each by first seen": [
        RS, cs("c1"), cs("c2"), ts("m1"), ts("m2"), CUSTOM, te("m2"), RAW, ce("c2"), {**CUSTOM, "name": "3"}, te("m1"),
        {**CUSTOM, "name": "4"}, ce("c1"), RF],
    "a stream without START holds nothing": [RS, tc("m", "a"), CUSTOM, ca("c", "x"), RAW, te("m"), ce("c"), RF],
    "a tool call inside an open message is written before it": [
        RS, ts("m"), tc("m", "a"), cs("c", parentMessageId="m"), ca("c", "{}"), ce("c"),
        {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c", "content": "ok"}, tc("m", "b"), te("m"), RF],
    "run boundaries are never held": [RS, ts("m"), tc("m", "a"), RE, CUSTOM],
    "RUN_FINISHED inside an open tool call, then a new run": [
        RS, cs("c"), ca("c", "{"), RF, {**RS, "runId": "r2"}, CUSTOM, ca("c", "}"), ce("c"), {**RF, "runId": "r2"}],
    "never ended: texts then tool calls, first seen first": [
        RS, cs("c1"), ts("m1"), ca("c1", "{"), cs("c2"), tc("m1", "x", **M1), ts("m2"), CUSTOM, RF],
    "an id used again after END": [RS, ts("m"), tc("m", "a"), te("m"), ts("m"), tc("m", "b"), te("m"), RF],
    "chunks, reasoning, steps, activity, snapshots pass through or are held": [
        RS, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "k", "delta": "a"}, {"type": "TEXT_MESSAGE_CHUNK", "delta": "b"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "kc", "toolCallName": "f", "delta": "{}"},
        {"type": "REASONING_START", "messageId": "rs"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "a"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "b"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rm"}, {"type": "REASONING_END", "messageId": "rs"},
        ts("m"), {"type": "STEP_STARTED", "stepName": "s"}, tc("m", "x"), {"type": "STEP_FINISHED", "stepName": "s"},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "PLAN", "content": {"s": 1}},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user", "content": "hi"}]}, te("m"), RF],
    # ---- state windows
    "snapshot and deltas folded to one snapshot, before RUN_FINISHED": [
        RS, snap({"n": 0, "items": []}, **BASE, subagentRunId="s"), ts("m"),
        delta({"op": "replace", "path": "/n", "value": 1}, {"op": "add", "path": "/items/-", "value": "a"}), te("m"),
        delta({"op": "add", "path": "/obj", "value": {"x": [1, 2]}}, {"op": "copy", "from": "/obj", "path": "/o2"},
              {"op": "move", "from": "/o2", "path": "/o3"}, {"op": "remove", "path": "/obj/x/0"},
              {"op": "test", "path": "/n", "value": 1}), CUSTOM, RF],
    "deltas alone pass through": [RS, delta({"op": "add", "path": "/a", "value": 1}, **M1), CUSTOM,
                                  delta({"op": "remove", "path": "/a"}), RF],
    "the last snapshot wins, metadata of the whole window": [
        RS, delta({"op": "add", "path": "/zz", "value": 1}, **M1), snap({"a": 1}, metadata={"k": "s1"}),
        delta({"op": "add", "path": "/b", "value": 2}), snap({"c": 3}), delta({"op": "add", "path": "/d", "value": 4}, **M2),
        RF],
    "a delta that does not apply is skipped whole": [
        RS, snap({"a": 1}), delta({"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/missing"}),
        delta({"op": "replace", "path": "/nope", "value": 0}), delta({"op": "test", "path": "/a", "value": 2}),
        delta({"op": "add", "path": "/x/y", "value": 0}), delta({"op": "add", "path": "/c", "value": 3}), RF],
    "a delta failing part way after others applied": [
        RS, snap({"a": 1}), delta({"op": "add", "path": "/b", "value": [1]}),
        delta({"op": "add", "path": "/b/-", "value": 2}, {"op": "remove", "path": "/missing"}),
        delta({"op": "add", "path": "/b/-", "value": 3}), RF],
    "windows flushed at RUN_STARTED, RUN_ERROR and the end": [
        snap({"pre": True}), delta({"op": "add", "path": "/p", "value": 1}), RS, snap({"in": 1}), RE,
        {**RS, "runId": "r2"}, delta({"op": "add", "path": "/q", "value": 1}), snap({"last": 1}), CUSTOM,
        delta({"op": "add", "path": "/t", "value": 1})],
    "snapshots of every JSON kind": [
        RS, snap(None), RF, RS, snap([1, 2]), delta({"op": "add", "path": "/-", "value": 3}), RF, RS, snap(7), RF,
        RS, snap("s"), delta({"op": "replace", "path": "", "value": {"root": 1}}), RF, RS, snap(None),
        delta({"op": "add", "path": "/a", "value": 1}), RF, RS, snap({}), delta(), RF],
    "state is not held by an open message": [RS, ts("m"), snap({"a": 1}), tc("m", "x"), te("m"), CUSTOM, RF],
    "unknown event types pass through or are held": [
        RS, {"type": "FUTURE_EVENT", "x": 1}, ts("m"), {"type": "FUTURE_EVENT", "y": 2}, te("m"), RF],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_written_streams_equal_compact_events(client: Client, name: str) -> None:
    events = [decode(w) for w in CASES[name]]
    assert_same(client, events)


def test_what_the_rules_give() -> None:
    """The module docstring's rules, spelled out on one stream (the differential proves equality)."""
    events = [decode(w) for w in [
        RS, ts("m", **M1), tc("m", "Hel", subagentRunId="s"), CUSTOM, tc("m", "lo", **M2), snap({"n": 0}),
        delta({"op": "replace", "path": "/n", "value": 1}), te("m"), RF]]
    out = [wire(e) for e in compact_events(events)]
    assert out == [
        RS, ts("m", **M1), {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hello",
                            "metadata": {"k": "second", "b": [1]}},
        te("m"), CUSTOM, snap({"n": 1}), RF]


def test_input_is_read_once_and_left_unchanged() -> None:
    events = [decode(w) for w in CASES["snapshot and deltas folded to one snapshot, before RUN_FINISHED"]]
    before = copy.deepcopy([wire(e) for e in events])
    out = compact_events(iter(events))  # any iterable
    assert [wire(e) for e in events] == before
    assert len(out) < len(events)
    assert compact_events(()) == []


def test_an_item_that_is_not_an_event_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"events\[1\] is a dict"):
        compact_events([decode(RS), {"type": "CUSTOM"}])  # type: ignore[list-item]


def test_a_subclass_of_an_event_takes_its_base_class_role() -> None:
    class Note(CustomEvent, frozen=True, kw_only=True, tag="CUSTOM"):
        pass

    class Piece(TextMessageContentEvent, frozen=True, kw_only=True, tag="TEXT_MESSAGE_CONTENT"):
        pass

    events = [decode(ts("m")), Piece(message_id="m", delta="a"), Note(name="n", value=1), Piece(message_id="m", delta="b"),
              decode(te("m"))]
    out = [wire(e) for e in compact_events(events)]
    assert out == [ts("m"), tc("m", "ab"), te("m"), {"type": "CUSTOM", "name": "n", "value": 1}]


def test_unknown_events_pass_through() -> None:
    unknown = UnknownEvent("FUTURE_EVENT", {"type": "FUTURE_EVENT", "x": 1})
    assert compact_events([unknown]) == [unknown]


# --------------------------------------------------------------------------------------------
# generated threads
# --------------------------------------------------------------------------------------------

_META = st.none() | st.dictionaries(st.sampled_from(["a", "k", "ag-ui"]), JSON_VALUES, max_size=2)
_OPS = st.one_of(
    st.builds(AddOperation, path=st.sampled_from(["/a", "/b", "/list/-", "/obj/x"]), value=JSON_VALUES),
    st.builds(ReplaceOperation, path=st.sampled_from(["/a", "/b", "/missing"]), value=JSON_VALUES),
    st.builds(RemoveOperation, path=st.sampled_from(["/a", "/b", "/list/0", "/missing"])),
    st.builds(TestOperation, path=st.sampled_from(["/a", "/b"]), value=st.sampled_from([None, 1, "x"])),
)
_STATE_EVENTS = st.one_of(
    st.builds(StateSnapshotEvent, snapshot=st.fixed_dictionaries(
        {"a": JSON_VALUES, "list": st.lists(JSON_VALUES, max_size=2), "obj": st.just({})}), metadata=_META),
    st.builds(StateDeltaEvent, delta=st.lists(_OPS, max_size=3), metadata=_META),
)
_CHUNKS = (TextMessageChunkEvent, ToolCallChunkEvent)
_METADATA_TYPES = (TextMessageStartEvent, TextMessageContentEvent, ToolCallStartEvent, ToolCallArgsEvent,
                   CustomEvent)


@st.composite
def stateful_streams(draw: st.DrawFn, interleave: bool = True) -> list[Any]:
    """``valid_streams()`` with state snapshots and deltas (some failing) dropped in anywhere, and
    metadata added to text, tool and custom events."""
    events: list[Any] = []
    for event in draw(valid_streams(interleave=interleave)):
        if isinstance(event, _METADATA_TYPES) and draw(st.booleans()):
            event = msgspec.structs.replace(event, metadata=draw(_META))
        events.append(event)
    for _ in range(draw(st.integers(0, 8))):
        # never inside a run of chunk events: any other event closes a chunk lane
        at = draw(st.integers(0, len(events)))
        if at == len(events) or not isinstance(events[at], _CHUNKS):
            events.insert(at, draw(_STATE_EVENTS))
    return events


_STREAM_IDS = {TextMessageStartEvent: "message_id", TextMessageContentEvent: "message_id",
               TextMessageEndEvent: "message_id", ToolCallStartEvent: "tool_call_id",
               ToolCallArgsEvent: "tool_call_id", ToolCallEndEvent: "tool_call_id"}


def overlapping(events: list[Any]) -> bool:
    """Whether a text message or tool call starts while another one is open (compactEvents then
    writes the inner one first: the messages it builds come in another order)."""
    open_: set[tuple[type, str]] = set()
    for event in events:
        attr = _STREAM_IDS.get(type(event))
        if attr is None:
            continue
        key = (_STREAM_IDS[type(event)] == "message_id", getattr(event, attr))
        if isinstance(event, (TextMessageStartEvent, ToolCallStartEvent)):
            if open_ - {key}:
                return True
            open_.add(key)
        elif isinstance(event, (TextMessageEndEvent, ToolCallEndEvent)):
            open_.discard(key)
    return False


def assert_same_thread(compacted: list[Any], events: list[Any]) -> None:
    """The Accumulator builds the same thread (messages in order, state) from the compacted events."""
    assert thread_of(compacted) == thread_of(events)


def _check_threads(client: Client, streams: list[list[Any]], *, sequential: bool) -> None:
    """Each stream: equal to compactEvents; the same thread from the compacted events when no two
    streams overlap (every stream of a ``sequential`` batch). Where they overlap compactEvents moves
    the inner stream, and the events the outer one held, ahead: the thread may then differ
    (spec/compaction.md), and only equality with compactEvents is asserted."""
    for events in streams:
        compacted = assert_same(client, events)
        if sequential:
            assert not overlapping(events)
        if not overlapping(events):
            assert_same_thread(compacted, events)


_SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(st.lists(valid_streams(), min_size=5, max_size=5))
def test_interleaved_streams_equal_compact_events(client: Client, streams: list[list[Any]]) -> None:
    _check_threads(client, streams, sequential=False)


@_SETTINGS
@given(st.lists(valid_streams(interleave=False), min_size=5, max_size=5))
def test_sequential_streams_equal_compact_events_and_build_the_same_thread(
    client: Client, streams: list[list[Any]]
) -> None:
    _check_threads(client, streams, sequential=True)


@_SETTINGS
@given(st.lists(stateful_streams(), min_size=5, max_size=5))
def test_interleaved_streams_with_state_and_metadata_equal_compact_events(
    client: Client, streams: list[list[Any]]
) -> None:
    _check_threads(client, streams, sequential=False)


@_SETTINGS
@given(st.lists(stateful_streams(interleave=False), min_size=5, max_size=5))
def test_sequential_streams_with_state_and_metadata_build_the_same_thread(
    client: Client, streams: list[list[Any]]
) -> None:
    _check_threads(client, streams, sequential=True)


@_SETTINGS
@given(st.lists(event_soup(40), min_size=5, max_size=5), st.lists(_STATE_EVENTS, min_size=5, max_size=5), st.data())
def test_event_soup_equals_compact_events(client: Client, soups: list[list[Any]], state: list[Any],
                                          data: st.DataObject) -> None:
    """Arbitrary sequences (ids colliding, streams opened twice, ended twice or never, state anywhere):
    still equal to compactEvents, event for event."""
    for soup in soups:
        for event in state:
            soup.insert(data.draw(st.integers(0, len(soup))), event)
        assert_same(client, soup)


def test_the_accumulator_differentials_threads(client: Client) -> None:
    rng = random.Random(WRITER_SEED)
    threads = [[decode(w) for w in ThreadWriter(rng, n).thread()] for n in range(WRITER_THREADS)]
    before = sum(len(t) for t in threads)
    after = 0
    for events in threads:
        compacted = assert_same(client, events)
        assert_same_thread(compacted, events)
        after += len(compacted)
    assert after < before


def test_the_recorded_wire_samples(client: Client) -> None:
    """Every sample of every event type as one stream, and in shuffled orders."""
    events = [decode(s) for s in ALL_EVENT_SAMPLES]
    assert_same(client, events)
    rng = random.Random(25)
    for _ in range(30):
        shuffled = events[:]
        rng.shuffle(shuffled)
        assert_same(client, shuffled)


# --------------------------------------------------------------------------------------------
# where compactEvents changes the thread (kept for equality; spec/compaction.md)
# --------------------------------------------------------------------------------------------

RMS = {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"}
RMC = {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "thinking"}
RME = {"type": "REASONING_MESSAGE_END", "messageId": "rm"}
OVERLAPS: dict[str, tuple[list[dict[str, Any]], str]] = {
    # the inner stream is written first: its message comes first
    "a tool call inside an open message": (
        [RS, ts("m"), tc("m", "a"), cs("c"), ca("c", "{}"), ce("c"), te("m"), RF], "order"),
    # one reasoning message's events held by two streams: its content is written before its START
    "events of one message held by two streams": (
        [RS, cs("c"), RMS, ts("m"), RMC, te("m"), RME, ce("c"), RF], "content"),
}


@pytest.mark.parametrize("name", sorted(OVERLAPS))
def test_overlapping_streams_can_change_the_thread(client: Client, name: str) -> None:
    stream, what = OVERLAPS[name]
    events = [decode(w) for w in stream]
    assert overlapping(events)
    compacted = assert_same(client, events)
    ours, original = thread_of(compacted), thread_of(events)
    assert ours != original
    if what == "order":
        assert sorted(ours["messages"], key=lambda m: m["id"]) == sorted(original["messages"], key=lambda m: m["id"])
    else:
        reasoning = {m["id"]: m.get("content") for m in ours["messages"] if m["role"] == "reasoning"}
        assert reasoning == {"rm": ""}
        assert {m["id"]: m.get("content") for m in original["messages"] if m["role"] == "reasoning"} == {"rm": "thinking"}


def test_replay_order_puts_an_errored_runs_open_streams_before_its_run_error_closed() -> None:
    """compactEvents' order (the open message after RUN_ERROR, never ended) made a stream the
    Verifier accepts run by run, content kept; a run that finished is unchanged (issue 31)."""
    import json

    from agui_engine.protocol.codec import decode_event, encode_event
    from agui_engine.protocol.compact import replay_order
    from agui_engine.protocol.events import (
        RunErrorEvent,
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallStartEvent,
    )
    from agui_engine.protocol.verify import Verifier

    cut = [
        RunStartedEvent(thread_id="t", run_id="r1"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="f"),
        ToolCallArgsEvent(tool_call_id="c", delta="{"),
        TextMessageContentEvent(message_id="m", delta="par"),
        TextMessageContentEvent(message_id="m", delta="tial"),
        RunErrorEvent(message="disconnected", code="disconnected"),
    ]
    second = [RunStartedEvent(thread_id="t", run_id="r2"), RunFinishedEvent(thread_id="t", run_id="r2")]
    kept = compact_events(cut) + compact_events(second)  # a gateway compacts each run's record alone
    assert [e.type for e in kept].index("RUN_ERROR") < [e.type for e in kept].index("TEXT_MESSAGE_START")
    replay = [json.loads(p) for p in replay_order([encode_event(e) for e in kept])]
    types = [e["type"] for e in replay]
    assert types[types.index("RUN_ERROR") + 1:] == ["RUN_STARTED", "RUN_FINISHED"]
    assert "TEXT_MESSAGE_END" in types and "TOOL_CALL_END" not in types  # cut args stay open: not JSON
    assert any(e.get("delta") == "partial" for e in replay)
    for run in (replay[: types.index("RUN_ERROR") + 1], replay[types.index("RUN_ERROR") + 1:]):
        verifier = Verifier()
        for e in run:
            verifier.feed(decode_event(json.dumps(e)))
        verifier.close()
