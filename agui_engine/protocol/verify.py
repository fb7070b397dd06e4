"""Check an AG-UI event stream against the protocol's ordering rules, and expand chunk events.

Theory of operation
-------------------
A :class:`Verifier` is fed one decoded event at a time (``feed(event)``) and told
explicitly when the stream ends (``close()``). It does two jobs, in this order,
exactly like the reference TypeScript client's pipeline (``transformChunks`` then
``verifyEvents``):

1. **Chunk expansion** (:class:`ChunkExpander`). ``TEXT_MESSAGE_CHUNK``,
   ``TOOL_CALL_CHUNK`` and ``REASONING_MESSAGE_CHUNK`` are shorthand. Each
   attribution lane (the main agent, or one sub-agent, keyed by the event's
   ``subagentRunId``) has at most one open *chunk lane*: a text message, a tool
   call or a reasoning message opened by a chunk. The first chunk of a lane
   synthesises the ``*_START`` event, every chunk with a delta a
   ``*_CONTENT``/``*_ARGS`` event. A chunk naming an open entity joins that
   entity's lane whatever its own ``subagentRunId`` says (it may only agree);
   a bare chunk (no id, no ``subagentRunId``) joins the parent lane if that has
   its kind open, else the only lane that has (several: ``chunk.ambiguous``).
   The lane is closed (a synthesised
   ``*_END``) by the next chunk naming another id or kind, or by the next event
   that closes lanes (see ``_LANE_POLICY``). ``feed`` returns the expanded
   events; callers forward those, never the chunks.

2. **Verification** of every expanded event against :data:`TRANSITIONS`, the one
   table of the state machine. The machine has a *phase* (:class:`Phase`:
   nothing seen yet, a run is running, the last run finished, the last run
   errored) and, while a run is running, the set of open *entities* of six kinds
   (:data:`KINDS`: text messages, tool calls, reasoning spans, reasoning
   messages, steps, sub-agents), each a dict keyed by the entity's id. A table
   row is looked up by ``(phase, event type)`` (falling back to
   ``(phase, ANY)``) and names the action to run (open / continue / close an
   entity of a kind, start / finish / error a run, reject) and the phase to
   move to.

Cost: one dict lookup to find the row, one or two dict/set operations for the
entity, no allocation on the happy path except the returned one-element list;
``O(1)`` per event. The only per-event work proportional to the data is keeping
``TOOL_CALL_ARGS`` fragments of an open call so that ``TOOL_CALL_END`` can check
that they concatenate to JSON (``check_tool_args=False`` switches that off).

Violations. Each rule has an id (``"text.not_open"``), a severity and a
sentence in :data:`RULES`. An *error* makes ``feed``/``close`` raise
:class:`ProtocolViolation` (a :class:`~agui_engine.protocol.errors.RemoteInputError`)
naming the rule, the index of the fed event (0-based, chunks count as the one
event they were fed as) and the ids involved; a *warning* is appended to
:attr:`Verifier.warnings`. ``Verifier(collect=True)`` never raises for protocol
errors: it appends them to :attr:`Verifier.violations` instead (the
``validate`` command and :func:`verify_events` use this). In both modes the
machine *recovers* after an error so later events are judged sensibly: the
offending event does not change the entity sets (an END for an unknown id
closes nothing, a nested ``RUN_STARTED`` is ignored), a first event other than
``RUN_STARTED`` opens an implicit run, and a ``RUN_FINISHED`` with open
entities still finishes the run.

What is deliberately *not* checked here: state patches (the
:class:`~agui_engine.protocol.accumulator.Accumulator` applies them and reports
failures), event shapes (the codec), and rules where AG-UI 1.0 allows what the
0.x validator forbade (see ``spec/verifier.md``).
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple, cast, overload

import msgspec

from .errors import RemoteInputError, UsageError
from .events import (
    ActivityMessage,
    AnyEvent,
    Event,
    ReasoningMessage,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentFinishedSuspendedOutcome,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageRole,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

__all__ = [
    "ANY",
    "Action",
    "ChunkExpander",
    "KINDS",
    "Kind",
    "Phase",
    "ProtocolViolation",
    "REASONING",
    "REASONING_MESSAGE",
    "RULES",
    "Row",
    "Rule",
    "STEP",
    "SUBAGENT",
    "TEXT",
    "TOOL",
    "TRANSITIONS",
    "Verifier",
    "Violation",
    "event_type_of",
    "verify_events",
]


# --------------------------------------------------------------------------- rules


class Rule(NamedTuple):
    """One protocol rule: its stable id, severity and what it means."""

    id: str
    severity: str  # "error" | "warning"
    summary: str
    #: The ag-ui-validate 0.4.0 rule(s) checking the same thing, for cross-reference.
    agui: str = ""


_RULE_LIST: tuple[Rule, ...] = (
    Rule("lifecycle.first_event", "error", "the first event must be RUN_STARTED or RUN_ERROR", "AGUI001"),
    Rule("lifecycle.nested_run", "error", "RUN_STARTED while a run is still running", "AGUI002"),
    Rule("lifecycle.truncated", "error", "the stream ended without RUN_FINISHED or RUN_ERROR", "AGUI003"),
    Rule("lifecycle.after_finished", "error", "after RUN_FINISHED only RUN_ERROR or RUN_STARTED may follow", "AGUI004"),
    Rule("lifecycle.after_error", "error", "after RUN_ERROR only RUN_STARTED may follow", "AGUI004"),
    Rule("lifecycle.run_ids", "error", "RUN_FINISHED must carry RUN_STARTED's threadId and runId", "AGUI008"),
    Rule("lifecycle.thread_changed", "warning", "a later run in the stream names another threadId", ""),
    Rule("text.already_open", "error", "TEXT_MESSAGE_START for a message id that is open", "AGUI106"),
    Rule("text.not_open", "error", "TEXT_MESSAGE_CONTENT/END for a message id that is not open", "AGUI101 AGUI102"),
    Rule("text.unterminated", "error", "a text message is still open at RUN_FINISHED", "AGUI103"),
    Rule("text.reopen_conflict", "error", "a re-opened message must keep its role, name and sub-agent", ""),
    Rule("tool_call.already_open", "error", "TOOL_CALL_START for a tool call id that is open", "AGUI205"),
    Rule("tool_call.id_reused", "error", "TOOL_CALL_START for a tool call id that already ended in this run", "AGUI205"),
    Rule("tool_call.not_open", "error", "TOOL_CALL_ARGS/END for a tool call id that is not open", "AGUI201 AGUI202"),
    Rule("tool_call.unterminated", "error", "a tool call is still open at RUN_FINISHED", "AGUI203"),
    Rule("tool_call.args_not_json", "error", "the concatenated TOOL_CALL_ARGS are not one JSON value", "AGUI204"),
    Rule("tool_call.result_unknown", "error", "TOOL_CALL_RESULT for a tool call never started", "AGUI207"),
    Rule("tool_call.result_before_end", "warning", "TOOL_CALL_RESULT while the call is still open", "AGUI206"),
    Rule("reasoning.already_open", "error", "REASONING_START for a reasoning id that is open", ""),
    Rule("reasoning.not_open", "error", "REASONING_END for a reasoning id that is not open", ""),
    Rule("reasoning.unterminated", "error", "a reasoning span is still open at RUN_FINISHED", "AGUI402"),
    Rule("reasoning_message.already_open", "error", "REASONING_MESSAGE_START for an id that is open", ""),
    Rule("reasoning_message.not_open", "error", "REASONING_MESSAGE_CONTENT/END for an id that is not open", "AGUI401"),
    Rule("reasoning_message.unterminated", "error", "a reasoning message is still open at RUN_FINISHED", "AGUI402"),
    Rule("step.already_open", "error", "STEP_STARTED for a step name that is open", ""),
    Rule("step.not_open", "error", "STEP_FINISHED for a step name that is not open", "AGUI006"),
    Rule("step.unterminated", "error", "a step is still open at RUN_FINISHED", "AGUI007"),
    Rule("subagent.already_open", "error", "SUBAGENT_STARTED for a sub-agent that is running", "AGUI601"),
    Rule("subagent.id_reused", "error", "SUBAGENT_STARTED again after a finish that was not 'suspended'", "AGUI601"),
    Rule("subagent.not_open", "error", "SUBAGENT_FINISHED/ERROR for a sub-agent that is not running", "AGUI602 AGUI603"),
    Rule("subagent.unterminated", "error", "a sub-agent is still running at RUN_FINISHED", "AGUI604"),
    Rule("attribution.mismatch", "error", "a continuation names another sub-agent than the event that opened it", "AGUI606"),
    Rule("attribution.parent_mismatch", "error",
         "TOOL_CALL_START names another sub-agent than the owner of its parentMessageId", ""),
    Rule("chunk.missing_id", "error", "the first chunk of a lane must carry its id (and a tool call's name)", "AGUI504"),
    Rule("chunk.conflict", "error", "a continuation chunk restates a different role, name, parent or sub-agent", ""),
    Rule("chunk.ambiguous", "error", "a chunk without id or subagentRunId while several lanes of its kind are open", ""),
)

#: Every rule by id. The severity here is the default; ``Verifier(relax=...)``
#: downgrades chosen errors to warnings.
RULES: Final[dict[str, Rule]] = {r.id: r for r in _RULE_LIST}


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken rule, located in the stream.

    ``event_index`` is the 0-based index of the fed event (for end-of-stream
    findings: the number of events fed, i.e. where the missing event would
    have been). ``ids`` names the entities involved with their wire names
    (``{"messageId": "m1"}``); ``related_index`` points at the event that
    opened the entity or the run, when there is one.
    """

    rule: str
    message: str
    event_index: int
    event_type: str | None = None
    ids: dict[str, str] = {}
    related_index: int | None = None
    severity: str = "error"

    def __str__(self) -> str:
        where = f"event {self.event_index}" + (f" ({self.event_type})" if self.event_type else "")
        return f"{where}: [{self.rule}] {self.message}"


class ProtocolViolation(RemoteInputError):
    """The stream broke an AG-UI rule.

    ``rule``, ``event_index`` and ``ids`` describe the first error found at
    this event; ``violations`` holds every error found at it (a ``RUN_FINISHED``
    can leave several entities open).
    """

    default_code = "protocol_violation"

    def __init__(self, violations: list[Violation]) -> None:
        if not violations:
            raise UsageError("ProtocolViolation needs at least one violation")
        first = violations[0]
        super().__init__(str(first))
        self.violation = first
        self.violations = violations
        self.rule = first.rule
        self.event_index = first.event_index
        self.ids = first.ids


# --------------------------------------------------------------------------- events


def _tag_of(cls: type) -> str:
    return str(cls.__struct_config__.tag)  # type: ignore[attr-defined]


_TYPE_BY_CLASS: dict[type, str] = {}
for _cls in Event.__args__:  # type: ignore[attr-defined]
    _TYPE_BY_CLASS[_cls] = _tag_of(_cls)


def event_type_of(event: Any) -> str | None:
    """The wire ``type`` of an event Struct, or None for an unknown/tolerated value."""
    return _TYPE_BY_CLASS.get(type(event))


# --------------------------------------------------------------------------- entities


class Kind(NamedTuple):
    """A kind of entity that opens and closes within a run."""

    slot: int  # index into the per-run list of open-entity dicts
    name: str  # rule prefix
    label: str  # for messages
    id_attr: str  # attribute holding the id on its events
    id_wire: str  # the id's wire name, for Violation.ids


TEXT: Final = Kind(0, "text", "text message", "message_id", "messageId")
TOOL: Final = Kind(1, "tool_call", "tool call", "tool_call_id", "toolCallId")
REASONING: Final = Kind(2, "reasoning", "reasoning span", "message_id", "messageId")
REASONING_MESSAGE: Final = Kind(3, "reasoning_message", "reasoning message", "message_id", "messageId")
STEP: Final = Kind(4, "step", "step", "step_name", "stepName")
SUBAGENT: Final = Kind(5, "subagent", "sub-agent", "subagent_run_id", "subagentRunId")

#: In the order RUN_FINISHED reports what is still open (steps first, as the reference client does).
KINDS: Final[tuple[Kind, ...]] = (STEP, TEXT, TOOL, REASONING_MESSAGE, REASONING, SUBAGENT)
_N_KINDS = 6


class _Open:
    """An open entity: where it opened, which sub-agent owns it, kind-specific data."""

    __slots__ = ("data", "index", "owner")

    def __init__(self, index: int, owner: str | None, data: Any = None) -> None:
        self.index = index
        self.owner = owner
        self.data = data  # TEXT: (role, name); TOOL: list of args fragments or None


# --------------------------------------------------------------------------- the table


class Phase(enum.IntEnum):
    """Where the stream is in the run lifecycle."""

    START = 0  # nothing seen yet
    RUNNING = 1  # RUN_STARTED seen, no terminal event yet
    FINISHED = 2  # the last run ended with RUN_FINISHED
    ERRORED = 3  # the last run ended with RUN_ERROR


class Action(enum.Enum):
    START_RUN = "start_run"
    FINISH_RUN = "finish_run"
    ERROR_RUN = "error_run"
    IMPLICIT_RUN = "implicit_run"  # a first event that is not RUN_STARTED: report, then run it
    OPEN = "open"
    CONTINUE = "continue"
    CLOSE = "close"
    TOOL_RESULT = "tool_result"
    SNAPSHOT = "messages_snapshot"
    ACCEPT = "accept"
    REJECT = "reject"


class Row(NamedTuple):
    action: Action
    kind: Kind | None = None
    then: Phase | None = None  # None: stay in the current phase
    rule: str | None = None  # for REJECT / IMPLICIT_RUN


#: Wildcard event type in TRANSITIONS.
ANY: Final = "*"

#: THE state machine. (phase, event type) -> what to do and which phase comes next.
#: Unknown event values (tolerant decoding) are neutral: they never reach this table.
TRANSITIONS: Final[dict[tuple[Phase, str], Row]] = {
    # -- before anything: a stream opens a run, or reports that it could not.
    (Phase.START, "RUN_STARTED"): Row(Action.START_RUN, then=Phase.RUNNING),
    (Phase.START, "RUN_ERROR"): Row(Action.ERROR_RUN, then=Phase.ERRORED),
    # (report, then judge the event as the body of a run that was never announced)
    (Phase.START, ANY): Row(Action.IMPLICIT_RUN, rule="lifecycle.first_event"),
    # -- inside a run.
    (Phase.RUNNING, "RUN_STARTED"): Row(Action.REJECT, rule="lifecycle.nested_run"),
    (Phase.RUNNING, "RUN_FINISHED"): Row(Action.FINISH_RUN, then=Phase.FINISHED),
    (Phase.RUNNING, "RUN_ERROR"): Row(Action.ERROR_RUN, then=Phase.ERRORED),  # open entities are debris of the failure: fine
    (Phase.RUNNING, "TEXT_MESSAGE_START"): Row(Action.OPEN, TEXT),
    (Phase.RUNNING, "TEXT_MESSAGE_CONTENT"): Row(Action.CONTINUE, TEXT),
    (Phase.RUNNING, "TEXT_MESSAGE_END"): Row(Action.CLOSE, TEXT),
    (Phase.RUNNING, "TOOL_CALL_START"): Row(Action.OPEN, TOOL),
    (Phase.RUNNING, "TOOL_CALL_ARGS"): Row(Action.CONTINUE, TOOL),
    (Phase.RUNNING, "TOOL_CALL_END"): Row(Action.CLOSE, TOOL),
    (Phase.RUNNING, "TOOL_CALL_RESULT"): Row(Action.TOOL_RESULT, TOOL),
    (Phase.RUNNING, "REASONING_START"): Row(Action.OPEN, REASONING),
    (Phase.RUNNING, "REASONING_END"): Row(Action.CLOSE, REASONING),
    (Phase.RUNNING, "REASONING_MESSAGE_START"): Row(Action.OPEN, REASONING_MESSAGE),
    (Phase.RUNNING, "REASONING_MESSAGE_CONTENT"): Row(Action.CONTINUE, REASONING_MESSAGE),
    (Phase.RUNNING, "REASONING_MESSAGE_END"): Row(Action.CLOSE, REASONING_MESSAGE),
    (Phase.RUNNING, "STEP_STARTED"): Row(Action.OPEN, STEP),
    (Phase.RUNNING, "STEP_FINISHED"): Row(Action.CLOSE, STEP),
    (Phase.RUNNING, "SUBAGENT_STARTED"): Row(Action.OPEN, SUBAGENT),
    (Phase.RUNNING, "SUBAGENT_FINISHED"): Row(Action.CLOSE, SUBAGENT),
    (Phase.RUNNING, "SUBAGENT_ERROR"): Row(Action.CLOSE, SUBAGENT),
    (Phase.RUNNING, "MESSAGES_SNAPSHOT"): Row(Action.SNAPSHOT),
    (Phase.RUNNING, ANY): Row(Action.ACCEPT),  # state, activity, custom, raw, encrypted values: no ordering rules
    # -- after RUN_FINISHED: a late RUN_ERROR (1.0 clients deliver it) or the next run.
    (Phase.FINISHED, "RUN_STARTED"): Row(Action.START_RUN, then=Phase.RUNNING),
    (Phase.FINISHED, "RUN_ERROR"): Row(Action.ERROR_RUN, then=Phase.ERRORED),
    (Phase.FINISHED, ANY): Row(Action.REJECT, rule="lifecycle.after_finished"),
    # -- after RUN_ERROR: only the next run.
    (Phase.ERRORED, "RUN_STARTED"): Row(Action.START_RUN, then=Phase.RUNNING),
    (Phase.ERRORED, ANY): Row(Action.REJECT, rule="lifecycle.after_error"),
}




# --------------------------------------------------------------------------- chunk expansion


class _Lane:
    """The chunk-opened entity of one attribution lane."""

    __slots__ = ("id", "kind", "name", "owner", "parent", "role")

    def __init__(self, kind: Kind, id: str, owner: str | None, *, role: Any = None, name: Any = None, parent: Any = None) -> None:
        self.kind, self.id, self.owner = kind, id, owner
        self.role, self.name, self.parent = role, name, parent


class _LanePolicy(enum.Enum):
    KEEP = "keep"  # passes without closing a chunk lane
    CLOSE_OWN = "close_own"  # closes the chunk lane of its own attribution (subagentRunId)
    CLOSE_ALL = "close_all"  # run boundaries close every lane
    DROP_ALL = "drop_all"  # RUN_ERROR: open lanes are debris, never presented as complete


#: How each non-chunk event affects open chunk lanes (reference client, §12 of the protocol notes):
#: RAW, ACTIVITY_*, REASONING_ENCRYPTED_VALUE and SUBAGENT_STARTED pass through; RUN_STARTED /
#: RUN_FINISHED / MESSAGES_SNAPSHOT close everything; everything else closes the lane it is attributed to. Unknown values pass through
#: like RAW. One deliberate difference: RUN_ERROR drops open lanes without a synthesised END, so
#: a half-streamed tool call is never presented as complete (a client may execute it on END).
_LANE_POLICY: Final[dict[str, _LanePolicy]] = {
    "RAW": _LanePolicy.KEEP,
    "ACTIVITY_SNAPSHOT": _LanePolicy.KEEP,
    "ACTIVITY_DELTA": _LanePolicy.KEEP,
    "REASONING_ENCRYPTED_VALUE": _LanePolicy.KEEP,
    "SUBAGENT_STARTED": _LanePolicy.KEEP,
    "MESSAGES_SNAPSHOT": _LanePolicy.CLOSE_ALL,
    "RUN_STARTED": _LanePolicy.CLOSE_ALL,
    "RUN_FINISHED": _LanePolicy.CLOSE_ALL,
    "RUN_ERROR": _LanePolicy.DROP_ALL,
}
_CHUNK_TYPES: Final = frozenset({TextMessageChunkEvent, ToolCallChunkEvent, ReasoningMessageChunkEvent})
_POLICY_BY_CLASS: dict[type, _LanePolicy] = {
    cls: _LANE_POLICY.get(name, _LanePolicy.CLOSE_OWN) for cls, name in _TYPE_BY_CLASS.items() if cls not in _CHUNK_TYPES
}


def _violation(
    rule: str, message: str, index: int, event_type: str | None, ids: dict[str, str], related: int | None = None
) -> Violation:
    return Violation(
        rule=rule,
        message=message,
        event_index=index,
        event_type=event_type,
        ids=ids,
        related_index=related,
        severity=RULES[rule].severity,
    )


class ChunkExpander:
    """Expands ``*_CHUNK`` events into START/CONTENT/END (see the module docstring).

    ``feed(event)`` returns the events to forward, in order: a synthesised END
    closing a lane comes before the event that closed it. Raises
    :class:`ProtocolViolation` (``chunk.missing_id``, ``chunk.conflict``) for a
    chunk it cannot expand; the lanes are then unchanged and the chunk is
    dropped. ``pending()`` returns the END events that would close the open
    lanes (what a terminal event would flush).
    """

    __slots__ = ("_index", "_lanes")

    def __init__(self) -> None:
        self._lanes: dict[str | None, _Lane] = {}
        self._index = -1

    @property
    def open_lanes(self) -> int:
        return len(self._lanes)

    @overload
    def feed(self, event: Event, index: int | None = None) -> list[Event]: ...
    @overload
    def feed(self, event: AnyEvent, index: int | None = None) -> list[AnyEvent]: ...

    def feed(self, event: AnyEvent, index: int | None = None) -> list[Any]:  # the overloads say which
        """Expand one event (``index``: its position in the stream, for errors; default: counted
        here). What comes out of a known event is known events; an unknown one passes through."""
        self._index = self._index + 1 if index is None else index
        cls = type(event)
        policy = _POLICY_BY_CLASS.get(cls)
        if policy is not None:
            if not self._lanes or policy is _LanePolicy.KEEP:
                return [event]
            if policy is _LanePolicy.CLOSE_ALL:
                out = [self._end(lane) for lane in self._lanes.values()]
                self._lanes.clear()
            elif policy is _LanePolicy.DROP_ALL:
                self._lanes.clear()
                return [event]
            else:
                lane = self._lanes.pop(getattr(event, "subagent_run_id", None), None)
                if lane is None:
                    return [event]
                out = [self._end(lane)]
            out.append(event)
            return out
        if type(event) is TextMessageChunkEvent:
            return self._chunk(event, TEXT, event.message_id)
        if type(event) is ToolCallChunkEvent:
            return self._chunk(event, TOOL, event.tool_call_id)
        if type(event) is ReasoningMessageChunkEvent:
            return self._chunk(event, REASONING_MESSAGE, event.message_id)
        return [event]  # an unknown (tolerated) value: neutral, like RAW

    def pending(self) -> list[Event]:
        return [self._end(lane) for lane in self._lanes.values()]

    # -- internals

    def _owner(self, event: Any, kind: Kind, chunk_id: str | None) -> str | None:
        """The lane key (``subagentRunId``) a chunk belongs to, as the reference client resolves it.

        A chunk naming an open entity of its kind goes to that entity's lane (its
        ``subagentRunId``, if given, must agree); otherwise its ``subagentRunId``
        decides; a bare chunk (neither) goes to the parent lane if that has its kind
        open, else to the only lane that has. Raises :class:`ProtocolViolation`
        (``chunk.conflict``, ``chunk.ambiguous``); nothing changes then.
        """
        given: str | None = event.subagent_run_id
        if chunk_id is not None:
            for key, lane in self._lanes.items():
                if lane.kind is kind and lane.id == chunk_id:
                    if given is not None and given != key:
                        raise self._refuse(
                            "chunk.conflict",
                            f"{_tag_of(type(event))} for {kind.label} {chunk_id!r} says subagentRunId={given!r}, "
                            f"but the open stream belongs to {key or 'the parent agent'!r}",
                            event,
                            {kind.id_wire: chunk_id},
                        )
                    return key
            return given
        if given is not None:
            return given
        parent = self._lanes.get(None)
        if parent is not None and parent.kind is kind:
            return None
        open_keys = [key for key, lane in self._lanes.items() if lane.kind is kind]
        if len(open_keys) > 1:
            raise self._refuse(
                "chunk.ambiguous",
                f"{_tag_of(type(event))} carries neither {kind.id_wire} nor subagentRunId, "
                f"but {len(open_keys)} lanes have an open {kind.label}",
                event,
                {},
            )
        return open_keys[0] if open_keys else None

    def _refuse(self, rule: str, message: str, event: Any, ids: dict[str, str]) -> ProtocolViolation:
        return ProtocolViolation([_violation(rule, message, self._index, _tag_of(type(event)), ids)])

    def _chunk(self, event: Any, kind: Kind, chunk_id: str | None) -> list[Any]:
        key = self._owner(event, kind, chunk_id)
        lane = self._lanes.get(key)
        if lane is not None and lane.kind is kind and (chunk_id is None or chunk_id == lane.id):
            self._check_continuation(event, lane)
            return self._content(event, lane, started=False)
        # A new lane: the first chunk must say what it opens.
        if chunk_id is None or (kind is TOOL and event.tool_call_name is None):
            missing = "toolCallName" if chunk_id is not None else kind.id_wire
            raise ProtocolViolation(
                [
                    _violation(
                        "chunk.missing_id",
                        f"the first {_tag_of(type(event))} of a {kind.label} must carry {missing}",
                        self._index,
                        _tag_of(type(event)),
                        {kind.id_wire: chunk_id} if chunk_id is not None else {},
                    )
                ]
            )
        out: list[Any] = []
        if lane is not None:
            out.append(self._end(lane))
        common = {kind.id_attr: chunk_id, "timestamp": event.timestamp, "metadata": event.metadata, "subagent_run_id": key}
        if kind is TEXT:
            role: TextMessageRole = event.role or "assistant"
            new = _Lane(kind, chunk_id, key, role=role, name=event.name)
            out.append(TextMessageStartEvent(role=role, name=event.name, **common))
        elif kind is TOOL:
            new = _Lane(kind, chunk_id, key, name=event.tool_call_name, parent=event.parent_message_id)
            out.append(
                ToolCallStartEvent(tool_call_name=event.tool_call_name, parent_message_id=event.parent_message_id, **common)
            )
        else:
            new = _Lane(kind, chunk_id, key)
            out.append(ReasoningMessageStartEvent(**common))
        self._lanes[key] = new
        out.extend(self._content(event, new, started=True))
        return out

    def _check_continuation(self, event: Any, lane: _Lane) -> None:
        # 1.1 clients: a continuation that restates a different role/name/parent is fatal;
        # restating the same value is fine.
        if lane.kind is TEXT:
            pairs = (("role", event.role, lane.role), ("name", event.name, lane.name))
        elif lane.kind is TOOL:
            pairs = (
                ("toolCallName", event.tool_call_name, lane.name),
                ("parentMessageId", event.parent_message_id, lane.parent),
            )
        else:
            return
        for field, given, have in pairs:
            if given is not None and given != have:
                raise ProtocolViolation(
                    [
                        _violation(
                            "chunk.conflict",
                            f"{_tag_of(type(event))} for {lane.kind.label} {lane.id!r} says {field}={given!r}, "
                            f"but the open stream has {field}={have!r}",
                            self._index,
                            _tag_of(type(event)),
                            {lane.kind.id_wire: lane.id},
                        )
                    ]
                )

    def _content(self, event: Any, lane: _Lane, *, started: bool) -> list[Any]:
        delta = event.delta
        # A continuation without its own attribution is the lane's (the reference client's rule).
        owner = lane.owner if event.subagent_run_id is None else event.subagent_run_id
        if delta is None:
            # Nothing to say -- unless the chunk carries metadata that a START did not take.
            if event.metadata is None or started:
                return []
            delta = ""
        # Metadata goes on the synthesised START; a CONTENT made by the same chunk carries it too.
        content_cls = _CHUNK_CLASSES[lane.kind.slot][0]
        fields = {
            lane.kind.id_attr: lane.id,
            "delta": delta,
            "timestamp": event.timestamp,
            "metadata": event.metadata,
            "subagent_run_id": owner,
        }
        return [content_cls(**fields)]

    @staticmethod
    def _end(lane: _Lane) -> Any:
        end_cls = _CHUNK_CLASSES[lane.kind.slot][1]
        return end_cls(**{lane.kind.id_attr: lane.id, "subagent_run_id": lane.owner})


#: kind slot -> (the CONTENT/ARGS class, the END class) a chunk lane synthesises.
_CHUNK_CLASSES: Final[dict[int, tuple[type, type]]] = {
    TEXT.slot: (TextMessageContentEvent, TextMessageEndEvent),
    TOOL.slot: (ToolCallArgsEvent, ToolCallEndEvent),
    REASONING_MESSAGE.slot: (ReasoningMessageContentEvent, ReasoningMessageEndEvent),
}


# --------------------------------------------------------------------------- the verifier


def _tool_call_ids_of(messages: Iterable[Any]) -> Iterable[str]:
    for message in messages:
        for call in getattr(message, "tool_calls", None) or ():
            yield call.id


class Verifier:
    """Checks a stream of AG-UI events, one ``feed`` at a time (see the module docstring).

    Parameters:
        collect: never raise for protocol errors; append them to :attr:`violations`.
        check_tool_args: check at ``TOOL_CALL_END`` that the call's ``TOOL_CALL_ARGS``
            concatenate to one JSON value (a call with no arguments is fine).
        relax: rule ids to downgrade from error to warning (e.g. ``{"lifecycle.run_ids"}``
            for a producer known to restate other ids).
        input: the run's ``RunAgentInput`` if the caller has it: the tool calls in its
            messages may receive a ``TOOL_CALL_RESULT`` in this stream (human in the loop).
    """

    __slots__ = (
        "_check_args",
        "_closed",
        "_closed_subagents",
        "_closed_text",
        "_closed_tools",
        "_collect",
        "_expander",
        "_index",
        "_known_tool_calls",
        "_message_owners",
        "_open",
        "_pending",
        "_phase",
        "_relax",
        "_run_ids",
        "_run_index",
        "_terminal_index",
        "_thread_id",
        "violations",
        "warnings",
    )

    def __init__(
        self,
        *,
        collect: bool = False,
        check_tool_args: bool = True,
        relax: Iterable[str] = (),
        input: RunAgentInput | None = None,
    ) -> None:
        relax = frozenset(relax)
        unknown = relax - RULES.keys()
        if unknown:
            raise UsageError(f"unknown rule id(s) in relax: {sorted(unknown)}")
        self._relax = relax
        self._collect = collect
        self._check_args = check_tool_args
        self._phase = Phase.START
        self._index = -1
        self._expander = ChunkExpander()
        self._pending: list[Violation] = []
        self._closed = False
        self._known_tool_calls: set[str] = set()
        self._new_run_scope()
        if input is not None:
            self._known_tool_calls.update(_tool_call_ids_of(input.messages))
            self._register_owners(input.messages, replace=False)
        self._run_ids: tuple[str, str] | None = None
        self._thread_id: str | None = None  # of the latest run
        self._run_index = -1
        self._terminal_index = -1
        #: Errors found so far (only filled with ``collect=True``).
        self.violations: list[Violation] = []
        #: Warnings found so far (always collected, never raised).
        self.warnings: list[Violation] = []

    # -- public API

    @property
    def phase(self) -> Phase:
        return self._phase

    def open_ids(self, kind: Kind) -> list[str]:
        """Ids of the open entities of one kind, in opening order."""
        return list(self._open[kind.slot])

    def continues(self, event: AnyEvent) -> bool:
        """Accept ``event`` if it is a plain continuation of an open entity; else change nothing.

        The fast path for the stream's bulk (TEXT_MESSAGE_CONTENT, TOOL_CALL_ARGS,
        REASONING_MESSAGE_CONTENT), used by :meth:`feed` and by producers that check
        their own bulk: exactly ``_do_continue``'s happy path, taken only when the
        table's (RUNNING, type) row is CONTINUE with no phase change (``_FAST_CONTINUE``
        is compiled from it), no chunk lane is open and the entity is open with a
        matching owner. ``False`` -- for anything else, a violation included -- means
        the event was not recorded: :meth:`feed` it.
        """
        fast = _FAST_CONTINUE.get(type(event))
        if fast is not None and self._phase is _RUNNING and not self._closed and not self._expander._lanes:
            slot, get_id, is_tool = fast
            entry = self._open[slot].get(get_id(event))
            if entry is not None:
                bulk = cast(_Continuation, event)  # _FAST_CONTINUE holds only these types
                sub = bulk.subagent_run_id
                if sub is None or sub == entry.owner:
                    self._index += 1
                    if is_tool and entry.data is not None:
                        entry.data.append(bulk.delta)
                    return True
        return False

    def any_open(self) -> bool:
        """Whether any entity of any kind is open in the current run."""
        return any(self._open)

    def is_open(self, kind: Kind, key: str) -> bool:
        """Whether the entity ``key`` of ``kind`` is open (O(1); a repairing producer asks
        before it feeds an event that would break a rule)."""
        return key in self._open[kind.slot]

    @overload
    def feed(self, event: Event) -> list[Event]: ...
    @overload
    def feed(self, event: AnyEvent) -> list[AnyEvent]: ...

    def feed(self, event: AnyEvent) -> list[Any]:  # the overloads say which
        """Verify one event; return the events to forward (chunks expanded).

        Raises :class:`ProtocolViolation` for a broken rule (unless ``collect``),
        after recovering (see the module docstring); :class:`UsageError` after close().
        """
        if self.continues(event):
            return [event]
        if self._closed:
            raise UsageError("Verifier.feed() called after close()")
        self._index += 1
        if self._expander._lanes or type(event) in _CHUNK_TYPES:
            try:
                out = self._expander.feed(event, self._index)
            except ProtocolViolation as exc:
                self._pending.extend(exc.violations)
                self._flush()
                return []
        else:
            out = [event]  # the common case: nothing to expand, no lane to close
        for ev in out:
            self._step(ev)
        if self._pending:
            self._flush()
        return out

    def close(self) -> None:
        """Declare the end of the stream.

        Raises :class:`ProtocolViolation` (``lifecycle.truncated``) when a run is
        still running or no event came at all: a truncated run must never look
        like a success. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        count = self._index + 1
        if self._phase is Phase.RUNNING:
            run = f"run {self._run_ids[1]!r} of thread {self._run_ids[0]!r}" if self._run_ids else "the run"
            still_open = [
                f"{kind.label} {key!r}" for kind in KINDS for key in self._open[kind.slot]
            ]
            detail = f"; still open: {', '.join(still_open)}" if still_open else ""
            ids = {"threadId": self._run_ids[0], "runId": self._run_ids[1]} if self._run_ids else {}
            self._report(
                "lifecycle.truncated",
                f"the stream ended after {count} event(s) without RUN_FINISHED or RUN_ERROR: "
                f"{run} (started at event {self._run_index}) is truncated{detail}",
                None,
                ids,
                self._run_index,
                index=count,
            )
        elif self._phase is Phase.START:
            self._report(
                "lifecycle.truncated",
                "the stream ended before any event: no run was reported",
                None,
                {},
                index=0,
            )
        if self._pending:
            self._flush()

    # -- machinery

    def _new_run_scope(self) -> None:
        self._open: list[dict[str, _Open]] = [{} for _ in range(_N_KINDS)]
        self._closed_text: dict[str, _Open] = {}
        self._closed_tools: dict[str, int] = {}
        self._closed_subagents: dict[str, tuple[int, bool]] = {}
        #: message id -> the sub-agent that owns it (None: the run itself), as the reference
        #: client keeps it: a TEXT_MESSAGE_START registers its message if unknown, a
        #: TOOL_CALL_RESULT and a MESSAGES_SNAPSHOT (re)assign theirs, the run's input
        #: registers its messages if unknown. A TOOL_CALL_START's parentMessageId is judged
        #: against it. Reasoning and activity messages are not in it (the client keeps them
        #: apart).
        self._message_owners: dict[str, str | None] = {}

    def _register_owners(self, messages: Iterable[Any], *, replace: bool) -> None:
        owners = self._message_owners
        for message in messages:
            if isinstance(message, (ReasoningMessage, ActivityMessage)):
                continue
            if replace or message.id not in owners:
                owners[message.id] = message.subagent_run_id

    def _report(
        self,
        rule: str,
        message: str,
        event_type: str | None,
        ids: dict[str, str],
        related: int | None = None,
        *,
        index: int | None = None,
    ) -> None:
        self._pending.append(
            Violation(
                rule=rule,
                message=message,
                event_index=self._index if index is None else index,
                event_type=event_type,
                ids=ids,
                related_index=related,
                severity=RULES[rule].severity,
            )
        )

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        errors: list[Violation] = []
        for v in pending:
            if v.severity == "error" and v.rule in self._relax:
                v = msgspec.structs.replace(v, severity="warning")
            (errors if v.severity == "error" else self.warnings).append(v)
        if errors:
            if self._collect:
                self.violations.extend(errors)
            else:
                raise ProtocolViolation(errors)

    def _step(self, ev: Any) -> None:
        """Look the event up in the table, run the row's action, move to the row's phase."""
        entry = _DISPATCH[self._phase].get(type(ev))
        if entry is None:
            if type(ev) not in _TYPE_BY_CLASS:
                return  # an unknown (tolerated) value: neutral
            entry = _DEFAULT[self._phase]
        handler, row = entry
        handler(self, row, ev)
        if row.then is not None:
            self._phase = row.then

    # -- one method per Action; the table's rows are compiled to (method, row) pairs below.

    def _do_accept(self, row: Row, ev: Any) -> None:
        pass

    def _do_error_run(self, row: Row, ev: Any) -> None:
        self._run_ids = None
        self._terminal_index = self._index

    def _do_messages_snapshot(self, row: Row, ev: Any) -> None:
        self._known_tool_calls.update(_tool_call_ids_of(ev.messages))
        # The snapshot's versions are the truth: a message it lists without subagentRunId
        # belongs to the run itself from now on.
        self._register_owners(ev.messages, replace=True)

    def _do_implicit_run(self, row: Row, ev: Any) -> None:
        type_name = _TYPE_BY_CLASS[type(ev)]
        self._report(
            row.rule,  # type: ignore[arg-type]
            f"the first event is {type_name}; a stream must begin with RUN_STARTED or RUN_ERROR",
            type_name,
            {},
        )
        # Recover: judge the rest as the body of a run that was never announced.
        self._phase = Phase.RUNNING
        self._run_ids = None
        self._run_index = self._index
        self._step(ev)

    def _do_reject(self, row: Row, ev: Any) -> None:
        type_name = _TYPE_BY_CLASS[type(ev)]
        if row.rule == "lifecycle.nested_run":
            running = self._run_ids[1] if self._run_ids else "(unannounced)"
            self._report(
                "lifecycle.nested_run",
                f"RUN_STARTED (threadId {ev.thread_id!r}, runId {ev.run_id!r}) while run {running!r} is still running; "
                "runs may follow each other but not nest",
                type_name,
                {"runId": ev.run_id, "threadId": ev.thread_id},
                self._run_index,
            )
        elif row.rule == "lifecycle.after_finished":
            self._report(
                "lifecycle.after_finished",
                f"{type_name} after RUN_FINISHED; only RUN_ERROR or a new RUN_STARTED may follow",
                type_name,
                {},
                self._terminal_index,
            )
        else:
            self._report(
                "lifecycle.after_error",
                f"{type_name} after RUN_ERROR; only a new RUN_STARTED may follow",
                type_name,
                {},
                self._terminal_index,
            )

    def _do_start_run(self, row: Row, ev: RunStartedEvent) -> None:
        if self._thread_id is not None and ev.thread_id != self._thread_id:
            # The draft spec makes this fatal ("carries the input's threadId"); 1.0 says nothing.
            self._report(
                "lifecycle.thread_changed",
                f"RUN_STARTED for thread {ev.thread_id!r}, but the stream's earlier runs were on thread "
                f"{self._thread_id!r}",
                "RUN_STARTED",
                {"threadId": ev.thread_id, "runId": ev.run_id},
                self._run_index,
            )
        self._thread_id = ev.thread_id
        self._run_ids = (ev.thread_id, ev.run_id)
        if self._run_index >= 0:  # an earlier run (or an implicit one) may have left entities
            self._new_run_scope()
        self._run_index = self._index
        if ev.input is not None:
            self._known_tool_calls.update(_tool_call_ids_of(ev.input.messages))
            self._register_owners(ev.input.messages, replace=False)

    def _do_finish_run(self, row: Row, ev: RunFinishedEvent) -> None:
        if self._run_ids is not None and (ev.thread_id, ev.run_id) != self._run_ids:
            thread_id, run_id = self._run_ids
            self._report(
                "lifecycle.run_ids",
                f"RUN_FINISHED carries threadId {ev.thread_id!r} / runId {ev.run_id!r}, "
                f"but RUN_STARTED said threadId {thread_id!r} / runId {run_id!r}",
                "RUN_FINISHED",
                {"threadId": ev.thread_id, "runId": ev.run_id, "expectedThreadId": thread_id, "expectedRunId": run_id},
                self._run_index,
            )
        for kind in KINDS:
            for key, entry in self._open[kind.slot].items():
                self._report(
                    f"{kind.name}.unterminated",
                    f"{kind.label} {key!r} (opened at event {entry.index}) is still open at RUN_FINISHED",
                    "RUN_FINISHED",
                    {kind.id_wire: key},
                    entry.index,
                )
        self._terminal_index = self._index

    def _do_open(self, row: Row, ev: Any) -> None:
        kind: Kind = row.kind  # type: ignore[assignment]
        key = getattr(ev, kind.id_attr)
        opened = self._open[kind.slot]
        if key in opened:
            self._report(
                f"{kind.name}.already_open",
                f"{_TYPE_BY_CLASS[type(ev)]} for {kind.label} {key!r}, which is already open "
                f"(since event {opened[key].index})",
                _TYPE_BY_CLASS[type(ev)],
                {kind.id_wire: key},
                opened[key].index,
            )
            return
        owner = None if kind is SUBAGENT else ev.subagent_run_id
        data: Any = None
        if kind is TEXT:
            data = (ev.role or "assistant", ev.name)
            prior = self._closed_text.pop(key, None)
            if prior is not None and (prior.data != data or prior.owner != owner):
                # Closed, not sealed (1.x): a re-opened message continues -- as the same message.
                self._report(
                    "text.reopen_conflict",
                    f"TEXT_MESSAGE_START re-opens message {key!r} with role/name {data} and sub-agent "
                    f"{owner!r}, but it was {prior.data} / {prior.owner!r} (opened at event {prior.index})",
                    "TEXT_MESSAGE_START",
                    {"messageId": key},
                    prior.index,
                )
                self._closed_text[key] = prior
                return
        elif kind is TOOL:
            if key in self._closed_tools:
                self._report(
                    "tool_call.id_reused",
                    f"TOOL_CALL_START for tool call {key!r}, which already ended at event "
                    f"{self._closed_tools[key]}; a tool call id names one call",
                    "TOOL_CALL_START",
                    {"toolCallId": key},
                    self._closed_tools[key],
                )
                return
            data = [] if self._check_args else None
            self._known_tool_calls.add(key)
            parent = ev.parent_message_id
            if parent is not None and parent in self._message_owners:
                parent_owner = self._message_owners[parent]
                if owner is None:
                    owner = parent_owner  # a call belongs to the message that carries it
                elif owner != parent_owner:
                    shown = repr(parent_owner) if parent_owner is not None else "the run itself"
                    self._report(
                        "attribution.parent_mismatch",
                        f"TOOL_CALL_START for tool call {key!r} names sub-agent {owner!r}, but its parent "
                        f"message {parent!r} belongs to {shown}; a tool call belongs to the message that "
                        "carries it",
                        "TOOL_CALL_START",
                        {"toolCallId": key, "parentMessageId": parent, "subagentRunId": owner},
                    )
        elif kind is SUBAGENT:
            prior_sub = self._closed_subagents.get(key)
            if prior_sub is not None:
                if not prior_sub[1]:
                    self._report(
                        "subagent.id_reused",
                        f"SUBAGENT_STARTED for sub-agent {key!r}, which already ended at event {prior_sub[0]} "
                        "without being suspended",
                        "SUBAGENT_STARTED",
                        {"subagentRunId": key},
                        prior_sub[0],
                    )
                    return
                del self._closed_subagents[key]  # resuming a suspended sub-agent
        opened[key] = _Open(self._index, owner, data)
        if kind is TEXT and key not in self._message_owners:
            self._message_owners[key] = owner

    def _do_continue(self, row: Row, ev: Any) -> None:
        kind: Kind = row.kind  # type: ignore[assignment]
        key = getattr(ev, kind.id_attr)
        entry = self._open[kind.slot].get(key)
        if entry is None:
            self._not_open(kind, ev, key)
            return
        sub = ev.subagent_run_id
        if sub is not None and sub != entry.owner:
            self._mismatch(kind, ev, key, entry)
        if entry.data is not None and kind is TOOL:
            entry.data.append(ev.delta)

    def _do_close(self, row: Row, ev: Any) -> None:
        kind: Kind = row.kind  # type: ignore[assignment]
        key = getattr(ev, kind.id_attr)
        entry = self._open[kind.slot].pop(key, None)
        if entry is None:
            self._not_open(kind, ev, key)
            return
        if kind is SUBAGENT:
            # SUBAGENT_ERROR has no outcome: an errored sub-agent is not resumable.
            suspended = isinstance(getattr(ev, "outcome", None), SubagentFinishedSuspendedOutcome)
            self._closed_subagents[key] = (self._index, suspended)
            return
        sub = ev.subagent_run_id
        if sub is not None and sub != entry.owner:
            self._mismatch(kind, ev, key, entry)
        if kind is TEXT:
            self._closed_text[key] = entry
        elif kind is TOOL:
            self._closed_tools[key] = self._index
            if entry.data:
                self._check_json_args(key, entry)

    def _check_json_args(self, key: str, entry: _Open) -> None:
        text = "".join(entry.data)
        if not text:
            return  # a call whose ARGS were all empty: a tool without arguments
        try:
            msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            self._report(
                "tool_call.args_not_json",
                f"the TOOL_CALL_ARGS of tool call {key!r} (opened at event {entry.index}) concatenate to "
                f"{len(text)} characters that are not one JSON value: {exc}",
                "TOOL_CALL_END",
                {"toolCallId": key},
                entry.index,
            )

    def _do_tool_result(self, row: Row, ev: ToolCallResultEvent) -> None:
        self._message_owners[ev.message_id] = ev.subagent_run_id  # the result message is its sender's
        key = ev.tool_call_id
        entry = self._open[TOOL.slot].get(key)
        if entry is not None:
            self._report(
                "tool_call.result_before_end",
                f"TOOL_CALL_RESULT (messageId {ev.message_id!r}) for tool call {key!r} arrived while the call is still open "
                f"(since event {entry.index})",
                "TOOL_CALL_RESULT",
                {"toolCallId": key, "messageId": ev.message_id},
                entry.index,
            )
        elif key not in self._known_tool_calls:
            self._report(
                "tool_call.result_unknown",
                f"TOOL_CALL_RESULT (messageId {ev.message_id!r}) for tool call {key!r}, which was never started in this stream "
                "nor present in the run's input or a MESSAGES_SNAPSHOT",
                "TOOL_CALL_RESULT",
                {"toolCallId": key, "messageId": ev.message_id},
            )

    def _not_open(self, kind: Kind, ev: Any, key: str) -> None:
        type_name = _TYPE_BY_CLASS[type(ev)]
        self._report(
            f"{kind.name}.not_open",
            f"{type_name} for {kind.label} {key!r}, which is not open",
            type_name,
            {kind.id_wire: key},
        )

    def _mismatch(self, kind: Kind, ev: Any, key: str, entry: _Open) -> None:
        type_name = _TYPE_BY_CLASS[type(ev)]
        owner = repr(entry.owner) if entry.owner is not None else "the run itself"
        self._report(
            "attribution.mismatch",
            f"{type_name} for {kind.label} {key!r} names sub-agent {ev.subagent_run_id!r}, "
            f"but the {kind.label} belongs to {owner} (opened at event {entry.index})",
            type_name,
            {kind.id_wire: key, "subagentRunId": ev.subagent_run_id},
            entry.index,
        )


_Entry = tuple[Callable[[Verifier, Row, Any], None], Row]


#: Each action of the table -> the Verifier method that performs it (a table of functions, so
#: type checkers and IDEs see every route; a new Action without a method fails at import).
_ACTION_METHODS: Final[dict[Action, Callable[[Verifier, Row, Any], None]]] = {
    Action.START_RUN: Verifier._do_start_run,
    Action.FINISH_RUN: Verifier._do_finish_run,
    Action.ERROR_RUN: Verifier._do_error_run,
    Action.IMPLICIT_RUN: Verifier._do_implicit_run,
    Action.OPEN: Verifier._do_open,
    Action.CONTINUE: Verifier._do_continue,
    Action.CLOSE: Verifier._do_close,
    Action.TOOL_RESULT: Verifier._do_tool_result,
    Action.SNAPSHOT: Verifier._do_messages_snapshot,
    Action.ACCEPT: Verifier._do_accept,
    Action.REJECT: Verifier._do_reject,
}
assert set(_ACTION_METHODS) == set(Action), "every Action needs a method"


def _compile(table: dict[tuple[Phase, str], Row]) -> tuple[list[dict[type, _Entry]], list[_Entry]]:
    """Per phase, event class -> (the action's method, the row): feed() does one dict lookup."""
    by_class: list[dict[type, _Entry]] = []
    default: list[_Entry] = []
    for phase in Phase:
        fallback = table[(phase, ANY)]
        default.append((_ACTION_METHODS[fallback.action], fallback))
        entries: dict[type, _Entry] = {}
        for cls, type_name in _TYPE_BY_CLASS.items():
            row = table.get((phase, type_name))
            if row is not None:
                entries[cls] = (_ACTION_METHODS[row.action], row)
        by_class.append(entries)
    return by_class, default


_DISPATCH, _DEFAULT = _compile(TRANSITIONS)
_RUNNING: Final = Phase.RUNNING


def _compile_fast_continue(table: dict[tuple[Phase, str], Row]) -> dict[type, tuple[int, Callable[[Any], Any], bool]]:
    """The event classes ``Verifier.feed`` may take on its fast path: those whose
    RUNNING row continues an entity and stays RUNNING -> (slot, id getter, is a tool call)."""
    fast: dict[type, tuple[int, Callable[[Any], Any], bool]] = {}
    for cls, type_name in _TYPE_BY_CLASS.items():
        row = table.get((Phase.RUNNING, type_name))
        if row is not None and row.action is Action.CONTINUE and row.then is None and row.kind is not None:
            fast[cls] = (row.kind.slot, operator.attrgetter(row.kind.id_attr), row.kind is TOOL)
    return fast


_FAST_CONTINUE: Final = _compile_fast_continue(TRANSITIONS)
#: What the fast path continues (the CONTINUE rows of the RUNNING phase).
_Continuation = TextMessageContentEvent | ToolCallArgsEvent | ReasoningMessageContentEvent


def verify_events(
    events: Iterable[AnyEvent], *, include_warnings: bool = False, **options: Any
) -> list[Violation]:
    """Verify a whole stream; return its violations in stream order (empty: valid).

    ``options`` are :class:`Verifier`'s keyword arguments (``collect`` is implied).
    Warnings are included only when asked for.
    """
    verifier = Verifier(collect=True, **options)
    for event in events:
        verifier.feed(event)
    verifier.close()
    found = verifier.violations
    if include_warnings:
        found = sorted(found + verifier.warnings, key=lambda v: v.event_index)
    return found

