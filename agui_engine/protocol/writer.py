"""One event writer for every producer: open, append to and close text, reasoning and tool calls.

Theory of operation
-------------------
Every producer of AG-UI events -- the decision loop (model items), the LangGraph
and CrewAI translators (framework events), the agent loop's repairs -- has to
remember which text message, reasoning message or tool call it has open and
which ``*_END`` closes it. :class:`EventWriter` is that memory, written once. A
producer says *what* happens (``text("Hel")``, ``reasoning("hmm")``,
``open_tool("search")``, ``close_lane()``) and the writer makes the events, in
an order the :class:`~agui_engine.protocol.verify.Verifier` accepts.

Entities are the Verifier's own :class:`~agui_engine.protocol.verify.Kind`\\ s:

* **Lanes** (text and reasoning). A *lane* is a key the producer chooses (the
  default ``None``; the LangGraph translator uses one lane per model message, the
  CrewAI translator one for text and one for reasoning). A lane has at most one
  open entity: a text message (``TEXT``) or a reasoning message, which the writer
  always opens as a span and a message with one id (``REASONING_START`` +
  ``REASONING_MESSAGE_START``, closed by ``REASONING_MESSAGE_END`` +
  ``REASONING_END``). Appending text to a lane whose open entity is a reasoning
  message closes it first and opens a text message (and the other way round); so
  does naming another ``message_id`` than the open one. These are the *implicit
  closes*; :meth:`close_lane` and :meth:`close_all` are the explicit ones.
* **Tool calls** (``TOOL``), any number open at once, each remembered with the
  lane it belongs to. Their methods return the one event they make instead of
  appending it, so a producer can hand it to the
  :class:`~agui_engine.loops.tool_calls.ToolCallTransformer`, which places it among
  the component events it adds. Opening a tool call does not close the lane's
  text: a model message ends its text when its calls begin, so such a producer
  calls :meth:`close_lane` first; one whose text and calls interleave does not.
  The writer does not look inside arguments: whether they concatenate to JSON is
  the producer's (and the parser's) business.

:meth:`close_all` closes everything, in one order: text messages, reasoning
messages, reasoning spans (that is :data:`LANE_CLOSE_ORDER`, the same order
:func:`end_events` uses for any source of open ids, such as a Verifier), then the
tool calls in the order they opened (``tools=False`` leaves those open: after an
error their arguments may be partial JSON, and a client may execute a call on its
END).

The START and END events themselves come from two tables, :func:`start_event` and
:func:`end_event` (by :class:`~agui_engine.protocol.verify.Kind`), which the writer
uses and which a producer that tracks what is open elsewhere uses too: the agent
loop, whose memory is its Verifier (the inner agent opened the entities, with its
ids), opens a message its inner agent never started with :func:`start_event` and
closes what is left open with :func:`end_events` over the Verifier's open ids.
:func:`end_event` also knows a step's END (``STEP_FINISHED``); the writer itself
does not open steps.

Ids come from the writer's :class:`~agui_engine.protocol.ids.Ids` (the one id policy:
``mint("msg")``, ``mint("reasoning")``, ``mint("call")``) unless the producer names
one (a model's tool call id, a framework's message id).

Misuse -- appending to a tool call that is not open, opening an id that is open, a
tool call id that already ended, re-opening a closed text message with another role --
raises :class:`WriterError` (a :class:`~agui_engine.protocol.errors.UsageError`) and
emits nothing and changes nothing: every sequence of calls that does not raise,
followed by :meth:`close_all`, is a stream body the Verifier accepts
(``tests/agui_engine/protocol/test_writer.py`` checks this as a property). A producer
whose ids come from a remote (a model's tool call ids) turns a :class:`WriterError`
into its own remote-input error.

No IO; ``O(1)`` per call except :meth:`close_all` (linear in what is open).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Final

from .errors import UsageError
from .events import (
    Event,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StepFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageRole,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from .ids import Ids
from .verify import REASONING, REASONING_MESSAGE, STEP, TEXT, TOOL, Kind

__all__ = ["EventWriter", "LANE_CLOSE_ORDER", "WriterError", "end_event", "end_events", "start_event"]


class WriterError(UsageError):
    """An :class:`EventWriter` call that would break a protocol rule; nothing was emitted."""

    default_code = "writer_misuse"


def _tool_call_end(key: str) -> ToolCallEndEvent:
    return ToolCallEndEvent(tool_call_id=key)


#: Kind -> its END event for an id (the table :meth:`EventWriter.close_lane`,
#: :meth:`EventWriter.close_all`, :meth:`EventWriter.end_tool` and :func:`end_events` share).
_END_OF: Final[dict[Kind, Callable[[str], Event]]] = {
    TEXT: lambda key: TextMessageEndEvent(message_id=key),
    REASONING_MESSAGE: lambda key: ReasoningMessageEndEvent(message_id=key),
    REASONING: lambda key: ReasoningEndEvent(message_id=key),
    TOOL: _tool_call_end,
    STEP: lambda key: StepFinishedEvent(step_name=key),
}

#: Kind -> its START event for an id, a text message's role and the sub-agent run it belongs
#: to (the table :meth:`EventWriter.text`, :meth:`EventWriter.reasoning` and :func:`start_event`
#: share). A tool call is not here: its START needs a name (:meth:`EventWriter.open_tool`).
_START_OF: Final[dict[Kind, Callable[[str, TextMessageRole, str | None], Event]]] = {
    TEXT: lambda key, role, sub: TextMessageStartEvent(message_id=key, role=role, subagent_run_id=sub),
    REASONING: lambda key, role, sub: ReasoningStartEvent(message_id=key, subagent_run_id=sub),
    REASONING_MESSAGE: lambda key, role, sub: ReasoningMessageStartEvent(message_id=key, subagent_run_id=sub),
}

#: The order lanes close in when several are open: text messages, then reasoning
#: messages, then the reasoning spans around them.
LANE_CLOSE_ORDER: Final[tuple[Kind, ...]] = (TEXT, REASONING_MESSAGE, REASONING)


def start_event(kind: Kind, key: str, *, role: TextMessageRole = "assistant",
                subagent_run_id: str | None = None) -> Event:
    """The START event that opens the entity ``key`` of ``kind``: a text message of ``role``
    (``TEXT``), a reasoning span (``REASONING``) or a reasoning message (``REASONING_MESSAGE``).

    Raises :class:`WriterError` for another kind (a tool call opens with
    :meth:`EventWriter.open_tool`: its START needs a name).
    """
    make = _START_OF.get(kind)
    if make is None:
        raise WriterError(f"start_event: a {kind.label} has no START made from its id alone")
    return make(key, role, subagent_run_id)


def end_event(kind: Kind, key: str) -> Event:
    """The END event that closes the entity ``key`` of ``kind`` (text, reasoning, tool call, step)."""
    return _END_OF[kind](key)


def end_events(open_ids: Callable[[Kind], Iterable[str]], kinds: Iterable[Kind] = LANE_CLOSE_ORDER) -> list[Event]:
    """The END events for what ``open_ids(kind)`` says is open, kind by kind in ``kinds`` order.

    ``open_ids`` is :meth:`EventWriter.open_ids` or a
    :meth:`~agui_engine.protocol.verify.Verifier.open_ids` (a repairing producer closes what its
    Verifier saw open).
    """
    return [_END_OF[kind](key) for kind in kinds for key in open_ids(kind)]


class EventWriter:
    """Opens, appends to and closes text, reasoning and tool calls (see the module docstring).

    Text and reasoning methods append their events to ``out`` and return the entity's id;
    tool call methods return their one event.
    """

    __slots__ = ("_calls", "_ended_calls", "_lanes", "_roles", "ids")

    def __init__(self, ids: Ids | None = None) -> None:
        self.ids = ids if ids is not None else Ids()
        #: lane -> (TEXT or REASONING, id) of its open entity
        self._lanes: dict[Hashable, tuple[Kind, str]] = {}
        #: open tool call id -> its lane, in opening order
        self._calls: dict[str, Hashable] = {}
        self._ended_calls: set[str] = set()
        #: text message id -> its role (a re-opened message keeps it)
        self._roles: dict[str, TextMessageRole] = {}

    # -- what is open

    def current(self, lane: Hashable = None) -> tuple[Kind, str] | None:
        """The lane's open entity as ``(TEXT or REASONING, id)``, or ``None``."""
        return self._lanes.get(lane)

    def open_ids(self, kind: Kind) -> list[str]:
        """Ids of the open entities of ``kind`` (TEXT, REASONING, REASONING_MESSAGE, TOOL)."""
        if kind is TOOL:
            return list(self._calls)
        lane_kind = REASONING if kind is REASONING_MESSAGE else kind
        return [key for k, key in self._lanes.values() if k is lane_kind]

    def is_open(self, kind: Kind, key: str) -> bool:
        """Whether the entity ``key`` of ``kind`` is open now."""
        return key in self.open_ids(kind) if kind is not TOOL else key in self._calls

    def tool_ended(self, tool_call_id: str) -> bool:
        """Whether the tool call ``tool_call_id`` was opened and has ended (its id names no other
        call). With :meth:`is_open` this is the whole life of a call: not yet opened, open, ended;
        a producer asks the writer instead of keeping flags of its own."""
        return tool_call_id in self._ended_calls

    def any_open(self) -> bool:
        return bool(self._lanes or self._calls)

    # -- text and reasoning

    def text(self, delta: str, out: list[Event], *, lane: Hashable = None, message_id: str | None = None,
             role: TextMessageRole = "assistant") -> str:
        """Append ``delta`` to the lane's text message, opening one first (with ``message_id``,
        else a minted id) when the lane has none open or ``message_id`` names another.
        An empty ``delta`` opens but sends no CONTENT. Returns the message id."""
        key = self._enter(TEXT, lane, message_id, out, role)
        if delta:
            out.append(TextMessageContentEvent(message_id=key, delta=delta))
        return key

    def reasoning(self, delta: str, out: list[Event], *, lane: Hashable = None, message_id: str | None = None) -> str:
        """Append ``delta`` to the lane's reasoning message (opened like :meth:`text`)."""
        key = self._enter(REASONING, lane, message_id, out)
        if delta:
            out.append(ReasoningMessageContentEvent(message_id=key, delta=delta))
        return key

    def seal_reasoning(self, encrypted_value: str, out: list[Event], *, lane: Hashable = None,
                       message_id: str | None = None) -> str:
        """Attach a provider's opaque value to the lane's reasoning message (opening one when
        none is open) and close it: the value ends its provider block, and the next block
        is a message of its own (``REASONING_ENCRYPTED_VALUE {subtype: "message"}``)."""
        key = self._enter(REASONING, lane, message_id, out)
        out.append(ReasoningEncryptedValueEvent(subtype="message", entity_id=key, encrypted_value=encrypted_value))
        self.close_lane(out, lane)
        return key

    def close_lane(self, out: list[Event], lane: Hashable = None) -> None:
        """Close the lane's open text or reasoning message, if any (its tool calls stay open)."""
        entry = self._lanes.pop(lane, None)
        if entry is None:
            return
        kind, key = entry
        if kind is TEXT:
            out.append(_END_OF[TEXT](key))
        else:
            out.append(_END_OF[REASONING_MESSAGE](key))
            out.append(_END_OF[REASONING](key))

    def _enter(self, kind: Kind, lane: Hashable, message_id: str | None, out: list[Event],
               role: TextMessageRole = "assistant") -> str:
        entry = self._lanes.get(lane)
        if entry is not None and entry[0] is kind and (message_id is None or message_id == entry[1]):
            return entry[1]
        if message_id is not None:
            self._check_open(kind, message_id, role)
        else:
            message_id = self.ids.mint("msg" if kind is TEXT else "reasoning")
        self.close_lane(out, lane)
        if kind is TEXT:
            self._roles[message_id] = role
            out.append(_START_OF[TEXT](message_id, role, None))
        else:
            out.append(_START_OF[REASONING](message_id, role, None))
            out.append(_START_OF[REASONING_MESSAGE](message_id, role, None))
        self._lanes[lane] = (kind, message_id)
        return message_id

    def _check_open(self, kind: Kind, key: str, role: TextMessageRole) -> None:
        if any(k is kind and open_key == key for k, open_key in self._lanes.values()):
            raise WriterError(f"{kind.label} {key!r} is already open in another lane")
        if kind is TEXT:
            prior = self._roles.get(key)
            if prior is not None and prior != role:
                raise WriterError(f"text message {key!r} was a {prior!r} message; it cannot re-open as {role!r}")

    # -- tool calls

    def open_tool(self, name: str, *, tool_call_id: str | None = None, parent_message_id: str | None = None,
                  lane: Hashable = None) -> ToolCallStartEvent:
        """Open a tool call (``tool_call_id``, else a minted id); returns its START."""
        if tool_call_id is None:
            tool_call_id = self.ids.mint("call")
        elif tool_call_id in self._calls:
            raise WriterError(f"tool call {tool_call_id!r} is already open")
        elif tool_call_id in self._ended_calls:
            raise WriterError(f"tool call {tool_call_id!r} already ended; a tool call id names one call")
        self._calls[tool_call_id] = lane
        return ToolCallStartEvent(tool_call_id=tool_call_id, tool_call_name=name, parent_message_id=parent_message_id)

    def tool_args(self, tool_call_id: str, delta: str) -> ToolCallArgsEvent:
        """An argument fragment of an open tool call."""
        if tool_call_id not in self._calls:
            raise WriterError(f"TOOL_CALL_ARGS for tool call {tool_call_id!r}, which is not open")
        return ToolCallArgsEvent(tool_call_id=tool_call_id, delta=delta)

    def end_tool(self, tool_call_id: str) -> ToolCallEndEvent:
        """Close an open tool call; returns its END."""
        if self._calls.pop(tool_call_id, _NOT_OPEN) is _NOT_OPEN:
            raise WriterError(f"TOOL_CALL_END for tool call {tool_call_id!r}, which is not open")
        self._ended_calls.add(tool_call_id)
        return _tool_call_end(tool_call_id)

    # -- everything

    def close_all(self, out: list[Event], *, tools: bool = True) -> None:
        """Close every lane (text, then reasoning) and, with ``tools``, every open tool call."""
        if not self._lanes and not (tools and self._calls):
            return
        for event in end_events(self.open_ids):
            out.append(event)
        self._lanes.clear()
        if tools:
            for call_id in list(self._calls):
                out.append(self.end_tool(call_id))


_NOT_OPEN: Final = object()
