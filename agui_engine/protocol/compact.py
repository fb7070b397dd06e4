"""Compaction: a stored event history made small, equal to ``@ag-ui/client`` 1.0.0's ``compactEvents``.

Theory of operation
-------------------
:func:`compact_events` takes a finished (or interrupted) list of events -- one run or a
whole thread -- and returns the list a consumer should store or replay instead: what
``compactEvents`` (``src/compact/compact.ts``) returns for the same input, event for event
and field for field. ``spec/compaction.md`` has the rules with examples and the figures.

One pass over the events, three kinds of buffer:

* **Streams.** A text message (``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END``, keyed by
  ``messageId``) or a tool call (``TOOL_CALL_START`` / ``_ARGS`` / ``_END``, keyed by
  ``toolCallId``) is buffered until its END, then written as at most four parts: its START,
  *one* CONTENT / ARGS event whose ``delta`` is every delta joined, its END, and the events it
  held (below). The joined event carries only ``messageId`` / ``toolCallId``, ``delta`` and the
  folded metadata: the deltas' ``timestamp``, ``rawEvent`` and ``subagentRunId`` are dropped.
  A START repeated before any delta merges its metadata into the first START's; a START
  repeated after deltas replaces the START's other fields and adds its metadata to the joined
  delta's, so metadata merges in arrival order. A stream never ended is written, the same way,
  at the end of the input: text messages first, then tool calls, each in the order first seen.
* **Held events.** Any other event (tool results, chunks, reasoning, steps, activity, custom,
  raw, messages snapshots, unknown events, ...) that arrives while a text message -- else a
  tool call -- has a buffered START is held by the *first* such stream and written right after
  that stream's END. ``RUN_STARTED``, ``RUN_FINISHED`` and ``RUN_ERROR`` are never held: they
  are written at once (so a run that fails with a message open has that message written after
  its ``RUN_ERROR``). START / CONTENT / END of *another* stream are never held either: a tool
  call that starts and ends inside an open text message is written before that message.
* **State window.** ``STATE_SNAPSHOT`` and ``STATE_DELTA`` are collected until the next
  ``RUN_STARTED``, ``RUN_FINISHED`` or ``RUN_ERROR`` (written just before it) or the end of
  the input. A window with a snapshot becomes one ``STATE_SNAPSHOT``: the last snapshot with
  the deltas after it applied (RFC 6902 through :func:`~agui_engine.protocol.accumulator.apply_json_patch`;
  a delta that does not apply is skipped whole and the state before it kept, where
  ``compactEvents`` warns on the console), carrying the metadata of *every* state event of
  the window folded, and nothing else. A window of deltas alone is written unchanged (they are
  relative to a state it never saw), as are events before and after it.

Metadata folds as ``@ag-ui/core``'s ``mergeMetadata`` (:func:`~agui_engine.protocol.accumulator.merge_metadata`): key by key, last write wins, a value
replaced wholesale (never merged recursively); an event without metadata changes nothing, an
empty ``{}`` is kept as ``{}``.

What a Python user may not expect (kept, because equality with the reference is the point):
events move (held events after their stream's END, state to the end of its run, streams
interleaved inside an open message before it); the joined delta loses ``subagentRunId``,
``timestamp`` and ``rawEvent``; chunk events (``TEXT_MESSAGE_CHUNK``, ``TOOL_CALL_CHUNK``)
and reasoning streams are not folded; a window of deltas with no snapshot is not folded.
Output events are the input's own objects where they pass through unchanged, and share
their free-form values (``snapshot``, ``metadata`` values) with them: events are frozen,
but a caller that mutates a dict inside one sees it in the other.

Pure: no IO, no clock, no logging. Raises :class:`~agui_engine.protocol.errors.UsageError`
for an item that is not an event (naming its index); bad remote content (a delta that does
not apply) never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from .accumulator import PatchError, apply_json_patch, merge_metadata
from .errors import UsageError
from .events import (
    EVENT_CLASSES,
    Event,
    Metadata,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UnknownEvent,
)

__all__ = ["Compactor", "compact_events", "replay_order"]


class _Stream:
    """One text message or tool call being folded (``compact.ts``'s pending entry)."""

    __slots__ = ("start", "deltas", "held", "meta")

    def __init__(self) -> None:
        self.start: Any = None  # the START to write (already merged), or None if none arrived
        self.deltas: list[str] = []
        self.held: list[Any] = []  # other events that arrived while this stream was open
        self.meta: Metadata | None = None  # the joined delta's metadata ("postStartMetadata")


# Event class -> role: text START / CONTENT / END, tool START / ARGS / END, a run boundary, state,
# any other event. A class missing from the table (a subclass, or not an event) takes the slow path.
_TEXT_START, _TEXT_DELTA, _TEXT_END, _TOOL_START, _TOOL_DELTA, _TOOL_END, _RUN, _STATE, _OTHER = range(9)
_ROLE: Final[dict[type, int]] = {
    **{cls: _OTHER for cls in EVENT_CLASSES.values()},
    UnknownEvent: _OTHER,
    TextMessageStartEvent: _TEXT_START,
    TextMessageContentEvent: _TEXT_DELTA,
    TextMessageEndEvent: _TEXT_END,
    ToolCallStartEvent: _TOOL_START,
    ToolCallArgsEvent: _TOOL_DELTA,
    ToolCallEndEvent: _TOOL_END,
    RunStartedEvent: _RUN,
    RunFinishedEvent: _RUN,
    RunErrorEvent: _RUN,
    StateSnapshotEvent: _STATE,
    StateDeltaEvent: _STATE,
}


_ROLE_OF: Final = _ROLE.get


def _role(event: Any) -> int:
    """The role of an item whose class is not in the table: a subclass's, or UsageError."""
    for cls in type(event).__mro__:
        if cls in _ROLE:
            return _ROLE[cls]
    raise UsageError(f"a {type(event).__name__} is not an AG-UI event")


def _text_content(key: str, delta: str, meta: Metadata | None) -> Event:
    return TextMessageContentEvent(message_id=key, delta=delta, metadata=meta)


def _tool_args(key: str, delta: str, meta: Metadata | None) -> Event:
    return ToolCallArgsEvent(tool_call_id=key, delta=delta, metadata=meta)


_JOINED: Final[tuple[Callable[[str, str, Metadata | None], Event], ...]] = (_text_content, _tool_args)


def _flush_stream(lane: int, key: str, stream: _Stream, end: Any, out: list[Any]) -> None:
    if stream.start is not None:
        out.append(stream.start)
    if stream.deltas:
        out.append(_JOINED[lane](key, "".join(stream.deltas), stream.meta))
    if end is not None:
        out.append(end)
    out.extend(stream.held)


def _start(stream: _Stream, event: Any) -> None:
    previous = stream.start
    if not stream.deltas:
        # A START replayed before any delta: both merge into the message uncompacted, so the
        # kept START carries both metadata (compact.ts carryStartMetadata).
        if previous is None:
            stream.start = event
        else:
            merged = merge_metadata(previous.metadata, event.metadata)
            stream.start = event if merged is None else msgspec.structs.replace(event, metadata=merged)
        return
    # Replayed after deltas: its other fields win, its metadata rides the joined delta, which is
    # written after the START (compact.ts replaceStartFields + postStartMetadata).
    carried = previous.metadata if previous is not None else None
    stream.start = event if event.metadata is carried else msgspec.structs.replace(event, metadata=carried)
    stream.meta = merge_metadata(stream.meta, event.metadata)


def _flush_state(window: list[Any], out: list[Any]) -> None:
    last = -1
    for index in range(len(window) - 1, -1, -1):
        if isinstance(window[index], StateSnapshotEvent):
            last = index
            break
    if last == -1:
        out.extend(window)  # deltas alone are relative to a state this window never saw
        return
    base = window[last].snapshot
    state = base  # shared with the input until a delta applies (the output is never patched)
    if last + 1 < len(window):
        # One private copy patched in place; a delta that fails part way spoils it, so the copy is
        # made again from the snapshot with the deltas that applied (failures are rare; the
        # reference copies the whole state for every delta instead).
        state = apply_json_patch(base, ())
        applied: list[Any] = []
        for event in window[last + 1 :]:
            try:
                state = apply_json_patch(state, event.delta, in_place=True)
                applied.append(event.delta)
            except PatchError:  # skipped whole, as compactEvents does (it warns; the core does no IO)
                state = apply_json_patch(base, ())
                for delta in applied:
                    state = apply_json_patch(state, delta, in_place=True)
    meta: Metadata | None = None
    for event in window:
        meta = merge_metadata(meta, event.metadata)
    out.append(StateSnapshotEvent(snapshot=state, metadata=meta))


def compact_events(events: Iterable[Event]) -> list[Event]:
    """The compacted form of ``events``: what ``@ag-ui/client``'s ``compactEvents`` returns.

    Text messages and tool calls are folded to START, one joined delta, END; state windows
    with a snapshot to one ``STATE_SNAPSHOT``; metadata merged last-write-wins; events
    reordered as the module docstring says. ``events`` is read once and never modified.
    Raises :class:`~agui_engine.protocol.errors.UsageError` when an item is not an event
    (an :class:`~agui_engine.protocol.events.UnknownEvent` is one: it passes through).
    """
    compactor = Compactor()
    feed = compactor.feed
    index = -1
    try:
        for index, event in enumerate(events):  # noqa: B007 - the index names a bad item
            feed(event)
    except UsageError:
        raise UsageError(f"compact_events: events[{index}] is a {type(event).__name__}, not an AG-UI event") from None
    return compactor.close()


class Compactor:
    """:func:`compact_events` fed one event at a time, as a stream arrives (feed-style: the
    gateway folds a run while it streams, so keeping it costs no second pass). ``feed`` each
    event, then ``close()`` once for the compacted list (the same as ``compact_events`` of
    every event fed). ``moved``: whether compaction may have moved an event past another
    stream's or a held one (the conservative form of "the run streamed something
    interleaved": an open stream saw another stream start, a run boundary, an event it
    holds, a delta of a stream never started, or was never ended). A closed compactor
    raises UsageError."""

    __slots__ = ("_lanes", "_out", "_texts", "_tools", "_window", "moved")

    def __init__(self) -> None:
        self._out: list[Any] | None = []
        self._texts: dict[str, _Stream] = {}
        self._tools: dict[str, _Stream] = {}
        self._lanes = (self._texts, self._tools)
        self._window: list[Any] = []
        self.moved = False

    def feed(self, event: Event) -> None:
        """Fold one more event. Raises UsageError for an item that is not an event, or
        after :meth:`close`."""
        item: Any = event  # dispatched on the role table, not on the union's narrowing
        role = _ROLE_OF(type(item))
        # the bulk of any stream, first: a delta of an open stream without metadata, one append
        if role == _TEXT_DELTA:
            stream = self._texts.get(item.message_id)
            if stream is not None and item.metadata is None:
                stream.deltas.append(item.delta)
                return
        elif role == _TOOL_DELTA:
            stream = self._tools.get(item.tool_call_id)
            if stream is not None and item.metadata is None:
                stream.deltas.append(item.delta)
                return
        out = self._out
        if out is None:
            raise UsageError("Compactor.feed after close()")
        if role is None:
            role = _role(item)
        texts, tools = self._lanes
        if role == _TEXT_DELTA or role == _TOOL_DELTA:
            streams, key = (texts, item.message_id) if role == _TEXT_DELTA else (tools, item.tool_call_id)
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = _Stream()
                self.moved = True  # a delta of a stream never started
            stream.deltas.append(item.delta)
            if item.metadata is not None:
                stream.meta = merge_metadata(stream.meta, item.metadata)
        elif role < _RUN:
            lane = 0 if role < _TOOL_START else 1
            streams, key = (texts, item.message_id) if lane == 0 else (tools, item.tool_call_id)
            stream = streams.get(key)
            if stream is None:
                if texts or tools:
                    self.moved = True  # another stream is open
                stream = streams[key] = _Stream()
            if role == _TEXT_START or role == _TOOL_START:
                _start(stream, item)
            else:
                del streams[key]
                _flush_stream(lane, key, stream, item, out)
        elif role == _STATE:
            self._window.append(item)
        elif role == _RUN:
            if texts or tools:
                self.moved = True
            if self._window:
                _flush_state(self._window, out)
                self._window = []
            out.append(item)
        else:
            # Held by the first stream (text messages before tool calls) that has a START; an
            # entry exists only until its END, so "started and not ended" is "has a START".
            for stream in texts.values():
                if stream.start is not None:
                    stream.held.append(item)
                    self.moved = True
                    break
            else:
                for stream in tools.values():
                    if stream.start is not None:
                        stream.held.append(item)
                        self.moved = True
                        break
                else:
                    out.append(item)

    def close(self) -> list[Event]:
        """The compacted events (streams never ended written at the end, text messages
        first). Raises UsageError when already closed."""
        out = self._out
        if out is None:
            raise UsageError("Compactor.close() called twice")
        self._out = None
        for lane, streams in enumerate(self._lanes):
            for key, stream in streams.items():
                self.moved = True  # never ended
                _flush_stream(lane, key, stream, None, out)
            streams.clear()  # a feed after close finds no stream open: it raises
        if self._window:
            _flush_state(self._window, out)
        return out


class _TypeOnly(msgspec.Struct):
    """The fields :func:`replay_order` reads of a stored event."""

    type: str = ""
    messageId: str | None = None  # noqa: N815 -- the wire's name
    toolCallId: str | None = None  # noqa: N815 -- the wire's name


_TYPE_DECODER: Final = msgspec.json.Decoder(_TypeOnly)
#: START type -> (END type, the id's wire field) of the streams :func:`replay_order` closes.
_CLOSES: Final = {
    "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
    "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
}
_ENDS: Final = {end for end, _ in _CLOSES.values()}


def replay_order(payloads: Iterable[bytes]) -> list[bytes]:
    """Kept (compacted) JSON event payloads made a stream a client can replay run by run.

    Compaction writes ``RUN_ERROR`` at once, so the events of a message or tool call that was
    open when its run errored come *after* that ``RUN_ERROR`` (as ``compactEvents`` does), and
    a stream never ended has no END; a client's verifier (``@ag-ui/client`` 0.0.x, the
    project's ``Verifier``) rejects any event after ``RUN_ERROR``. Here each ``RUN_ERROR`` is
    moved after the events that follow it up to the next ``RUN_STARTED`` (or the end), and the
    text messages still open there are closed by their END just before it (a tool call's cut
    arguments are not JSON, so it stays open and the RUN_ERROR ends it): content kept, nothing
    dropped; runs that did not error are unchanged.
    """
    out: list[bytes] = []
    held: bytes | None = None
    open_: dict[str, tuple[str, str]] = {}  # stream id -> (END type, id field), in start order

    def release() -> None:
        nonlocal held
        if held is not None:
            for key, (end, field) in open_.items():
                # a tool call's cut arguments are not JSON: ended, they would fail the verifier;
                # left open, RUN_ERROR ends it (both verifiers accept that)
                if end == "TEXT_MESSAGE_END":
                    out.append(msgspec.json.encode({"type": end, field: key}))
            out.append(held)
            held = None
        open_.clear()

    for payload in payloads:
        try:
            ev = _TYPE_DECODER.decode(payload)
        except msgspec.DecodeError:
            ev = _TypeOnly()
        kind = ev.type
        if kind == "RUN_STARTED":
            release()
        elif kind == "RUN_ERROR":
            if held is not None:
                release()
            held = payload
            continue
        elif kind in _CLOSES or kind in _ENDS:
            key = ev.messageId if kind.startswith("TEXT") else ev.toolCallId
            if key is not None:
                if kind in _CLOSES:
                    open_[key] = _CLOSES[kind]
                else:
                    open_.pop(key, None)
        out.append(payload)
    release()
    return out
