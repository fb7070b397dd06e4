"""Component streaming: a component tool call's argument fragments in, component events out.

Theory of operation
-------------------
While the model writes the arguments of ``show_component_<Name>``, a
:class:`ComponentStream` turns each fragment into at most one
``CUSTOM tambo.component.props_delta`` event whose ``operations`` are RFC 6902
operations on the component's props. The fragments go through one
:class:`~agui_engine.jsonstream.PatchStream` (``emit_root=False``: the root must be
an object and starts as ``{}``), so the arguments are parsed exactly once, left to
right -- never re-parsed per chunk as the peer's tracker does. The tokenizer's
operations are then filtered, in order:

1. Any operation at or under a ``_tambo_*`` key is dropped. The standard
   parameters feed :attr:`ComponentStream.status_messages` instead.
2. A ``null`` that strict mode forced on an optional, non-nullable prop
   (:class:`~agui_engine.genui.components.NullPolicy` of the component's *original*
   schema) is held back -- or, if the prop has a ``default``, sent as the default.
   A later duplicate key that replaces a held-back ``null`` becomes an ``add``;
   a duplicate ``null`` replacing a shown value becomes a ``remove``.

Every path of the props, at any depth, has a status -- ``"started"`` while its
value is open, ``"done"`` from its closing token on -- followed by :class:`PathStatus`
in the same pass as the operations, and sent as changes only: a delta's
``statusChanges`` holds what its own operations do not imply (see ``PathStatus``
and spec/components.md, "Status"). A feed whose only effect is a status change
(the closing quote of a string) still emits a props_delta, with no operations.

Invariant (tested on random documents and random splits): after every event,
applying all operations so far to ``{}`` gives :attr:`ComponentStream.props`; at
``close()`` that equals ``finalProps`` of ``tambo.component.end``, which equals the
un-strict final parse (:meth:`Component.unstrict_props`). No ``_tambo_*`` key and no
held-back ``null`` ever appears in either.

Events, in order: ``tambo.component.start {messageId, componentId, componentName}``
(from :meth:`start`, or prepended by the first ``feed``/``close``), zero or more
``tambo.component.props_delta {componentId, operations, statusChanges?}``, then
``tambo.component.end {componentId, finalProps}`` from :meth:`close`. The decision
loop emits the ``TOOL_CALL_*`` events itself.

Errors (the run ends with ``RUN_ERROR``; every event already returned stays valid):
malformed JSON -> :class:`~agui_engine.jsonstream.JSONStreamError`; a root that
is not an object -> ``JSONStreamError`` (a :class:`RemoteInputError`) "tool
arguments must be a JSON object", before any operation; arguments longer than
:data:`MAX_COMPONENT_ARGS_CHARS` -> :class:`ComponentSizeError` (a
:class:`LimitExceededError`). Arguments that are empty or only whitespace are the
empty object ``{}`` (models send ``""`` for a call without arguments).

:class:`InteractableUpdateStream` streams ``update_component_props_<id>`` /
``update_component_state_<id>`` the same way, re-rooting ``/newProps/...`` (or
``/newState/...``) onto the component's props (or state): a shallow merge
expressed as operations on the existing instance.

The accumulator handlers (:data:`COMPONENT_HANDLERS`, given to an accumulator by
composition: ``Accumulator(custom_handlers=COMPONENT_HANDLERS)``; importing this module
registers nothing anywhere) turn these
events into content blocks ``{"type": "component", "id", "name", "props",
"streamingState", "propsStatus"}`` in the list :data:`BLOCKS_KEY` (``contentBlocks``)
of the assistant message; :func:`find_component` looks one up.

No IO happens here.
"""

from __future__ import annotations

import abc
import copy
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import jsonpatch
import jsonpointer

from ..jsonstream import PatchStream
from ..protocol.accumulator import Accumulator, CustomHandler, grow_string
from ..protocol.errors import LimitExceededError, RemoteInputError, UsageError
from ..protocol.events import CustomEvent
from ..protocol.pointer import escape_token, pointer_tokens
from .components import (
    COMPLETION_STATUS_MESSAGE_PARAMETER,
    DROP,
    STATUS_MESSAGE_PARAMETER,
    Component,
    NullDefault,
    StatusMessages,
    strip_reserved_keys,
    unstrict_value,
)
from .interactables import Interactable, UpdateKind, merge_update
from .schemas import STANDARD_PARAMETER_PREFIX

__all__ = [
    "ArgumentStream",
    "BLOCKS_KEY",
    "COMPONENT_END",
    "COMPONENT_EVENTS",
    "COMPONENT_HANDLERS",
    "COMPONENT_PROPS_DELTA",
    "COMPONENT_START",
    "COMPONENT_STATE_DELTA",
    "ComponentSizeError",
    "ComponentStream",
    "DONE",
    "InteractableUpdateStream",
    "MAX_COMPONENT_ARGS_CHARS",
    "PROPS_STATUS_KEY",
    "PathStatus",
    "PropsFilter",
    "STARTED",
    "STATUS_CHANGES_KEY",
    "StatusTracker",
    "apply_status_changes",
    "arguments_parser",
    "component_blocks",
    "done_statuses",
    "find_component",
    "implied_status",
    "implied_statuses",
    "seed_interactables",
]

COMPONENT_START: Final = "tambo.component.start"
COMPONENT_PROPS_DELTA: Final = "tambo.component.props_delta"
COMPONENT_STATE_DELTA: Final = "tambo.component.state_delta"
COMPONENT_END: Final = "tambo.component.end"
COMPONENT_EVENTS: Final = (COMPONENT_START, COMPONENT_PROPS_DELTA, COMPONENT_STATE_DELTA, COMPONENT_END)

#: Longest argument text of one component call, in characters. The largest model
#: response today is about 128 K output tokens (~0.5 MB of text); 2 MiB is 4x
#: that, so only a runaway or hostile stream reaches it -- and every client
#: re-renders the component on every delta, so props that large are unusable
#: anyway. It sits below the tokenizer's own stream limit (4 MiB), so this clearer
#: error (naming the component) is the one raised.
MAX_COMPONENT_ARGS_CHARS: Final = 2 * 1024 * 1024

_RESERVED_TOKEN: Final = "/" + STANDARD_PARAMETER_PREFIX


class ComponentSizeError(LimitExceededError):
    """A component call's arguments crossed :data:`MAX_COMPONENT_ARGS_CHARS`."""

    default_code = "component_too_large"


_STATUS_PATHS: Final = {
    "/" + STATUS_MESSAGE_PARAMETER: "status_message",
    "/" + COMPLETION_STATUS_MESSAGE_PARAMETER: "completion_status_message",
}


class StatusTracker:
    """The standard parameters of a streaming call, followed from the tokenizer's ops.

    Reading them from the parsed document would bring the open string's slot up
    to date (a join of everything it holds) on every fragment: O(size of the
    arguments) per fragment, quadratic in all. Here each fragment costs one
    comparison per op; the two strings are kept as pieces and joined only when
    :attr:`messages` is read after an op touched them (:meth:`observe` says so).
    """

    __slots__ = ("_cache", "_parts")

    def __init__(self) -> None:
        self._parts: dict[str, list[str] | None] = {}
        self._cache: StatusMessages | None = StatusMessages()

    def observe(self, ops: Sequence[Mapping[str, Any]]) -> bool:
        """Follow raw tokenizer ops; True when one of them touched a standard parameter."""
        touched = False
        for op in ops:
            field = _STATUS_PATHS.get(op["path"])
            if field is None:
                continue
            touched = True
            value = op.get("value")
            if op["op"] == "append":
                parts = self._parts.get(field)
                if parts is not None and isinstance(value, str):
                    parts.append(value)
            else:  # add / replace (a duplicate key): the value so far; a non-string is ignored
                self._parts[field] = [value] if isinstance(value, str) else None
        if touched:
            self._cache = None
        return touched

    @property
    def messages(self) -> StatusMessages:
        """The standard parameters as far as they have arrived."""
        if self._cache is None:
            joined: dict[str, str] = {}
            for field, parts in self._parts.items():
                if parts is not None:
                    if len(parts) > 1:
                        parts[:] = ["".join(parts)]
                    joined[field] = parts[0]
            self._cache = StatusMessages(**joined)
        return self._cache


#: Key of a props delta's per-path status changes (see :class:`PathStatus`).
STATUS_CHANGES_KEY: Final = "statusChanges"
#: Status of a value that has begun and whose closing token has not arrived.
STARTED: Final = "started"
#: Status of a value whose closing token has arrived (a scalar: when it is complete).
DONE: Final = "done"


class PathStatus:
    """Per-path streaming status of the props, sent as changes only.

    Theory of operation
    -------------------
    Every RFC 6901 pointer present in the props (the root excluded) has a status:
    ``"started"`` while its value is open -- a string before its closing quote, an
    object or array before its closing bracket -- and ``"done"`` from its closing
    token on (a number or literal is complete when it appears, so it is ``done`` at
    once). The statuses come from the same single pass as the operations, with no
    re-parsing: JSON is sequential, so the open values always form one chain from
    the root down (a stack), and

    ==========================================  =====================================
    event                                       status change
    ==========================================  =====================================
    an op creates a value at ``p``              every open value that does not contain
    (``add``/``replace``; ``remove`` deletes)   ``p`` is ``done`` (it must have closed
                                                first); the old value at ``p`` and
                                                everything under it is forgotten; ``p``
                                                is ``started`` (string, object, array:
                                                pushed) or ``done`` (other scalars)
    ``append`` / ``replace`` growing the open   none
    string
    the end of a feed                           from the top, every value on the stack
                                                that the tokenizer no longer has open at
                                                that level closed in this feed: ``done``
    ==========================================  =====================================

    The ops are the filtered ones (no ``_tambo_*`` key, no held-back null): the
    values shown are a prefix of the tokenizer's chain of open values (whatever is
    open under a reserved key is deeper than all of them), so comparing the top of
    the stack with the tokenizer's open value at the same level
    (:meth:`~agui_engine.jsonstream.PatchStream.open_pointer`) is exact, and costs one
    comparison per value closed. A complete value an op carries whole (a schema
    default) is ``done`` with everything inside it.

    :meth:`observe` returns the changes since the previous call that the delta's own
    operations do not imply: ``{pointer: "started" | "done" | None}``, ``None``
    meaning the path left the props. A consumer first gives the path of every
    ``add`` / ``replace`` the status its value implies (:func:`implied_status`:
    ``started`` for a string, ``[]``, ``{}``; ``done`` otherwise), then applies these
    (:func:`implied_statuses`, :func:`apply_status_changes`); so what travels is mostly the ``done`` of strings
    and containers at their closing token, and nothing for a path whose status ends
    where it began. Work per op is O(length of its
    path) amortised (each path is pushed, popped and forgotten once); memory is one
    entry per path of the props. Raises nothing.
    """

    __slots__ = ("_children", "_stack", "_string", "status")

    def __init__(self) -> None:
        #: The full status map: pointer -> ``"started"`` | ``"done"``.
        self.status: dict[str, str] = {}
        self._stack: list[str] = []  # open values (pointer + "/"), outermost first
        self._string = False  # the innermost open value is a string
        #: pointer + "/" -> its children's pointers (an ordered set), to forget a replaced subtree
        self._children: dict[str, dict[str, None]] = {}

    def observe(self, ops: Sequence[Mapping[str, Any]],
                open_pointer: Callable[[int], str | None]) -> dict[str, str | None]:
        """Follow one feed's (filtered) ops; ``open_pointer(level)`` = the pointer the tokenizer
        has open at that level below the root after the feed (``None``: nothing that deep).
        Returns the status changes (see the class docstring)."""
        status, stack = self.status, self._stack  # stack entries are pointers + "/": prefixes of what is inside
        if not ops or (len(ops) == 1 and ops[0]["op"] == "append"):
            # The bulk of a stream: a string grows (or nothing shows). Only a close can change a status.
            if not stack or open_pointer(len(stack) - 1) == stack[-1][:-1]:
                return {}
        # The status a path had before this feed, for the paths a pop, a forget or a default
        # changed after (or instead of) their op; every other path this feed touched has exactly
        # the status its op implies, which the consumer derives itself.
        before: dict[str, str | None] = {}
        implied: dict[str, str] = {}
        children = self._children
        for op in ops:
            kind = op["op"]
            if kind == "append":
                continue
            path = op["path"]
            value = op.get("value")
            cls = value.__class__
            if self._string and kind == "replace" and cls is str and stack[-1][:-1] == path:
                continue  # the open string grows (strict RFC 6902 mode re-sends it whole)
            while stack and not path.startswith(stack[-1]):
                self._set(stack.pop()[:-1], DONE, before)
            self._string = False
            if path in status:
                self._forget(path, kind == "remove", before)
            if kind == "remove":
                continue
            if stack:  # JSON is sequential: the parent is the innermost open container
                kids = children.get(stack[-1])
                if kids is None:
                    children[stack[-1]] = {path: None}
                else:
                    kids[path] = None
            if cls is str or ((cls is dict or cls is list) and not value):
                status[path] = implied[path] = STARTED
                stack.append(path + "/")
                self._string = cls is str
            else:
                status[path] = implied[path] = DONE
                if cls is dict or cls is list:
                    self._complete(path, value, before)
        while stack and open_pointer(len(stack) - 1) != stack[-1][:-1]:
            self._set(stack.pop()[:-1], DONE, before)
            self._string = False
        out: dict[str, str | None] = {}
        for path, old in before.items():
            now = status.get(path)
            if now != implied.get(path, old):
                out[path] = now
        return out

    def finish(self) -> dict[str, str | None]:
        """The end of the call: everything still open is ``done``; returns the changes."""
        return self.observe((), _NOTHING_OPEN)

    def _set(self, path: str, value: str, before: dict[str, str | None]) -> None:
        status = self.status
        if path not in before:
            before[path] = status.get(path)
        status[path] = value

    def _forget(self, path: str, itself: bool, before: dict[str, str | None]) -> None:
        """Drop what was under ``path`` (and ``path`` itself if ``itself``)."""
        status, children = self.status, self._children  # children: keyed by pointer + "/"
        todo = list(children.pop(path + "/", ()))
        if itself:
            todo.append(path)
        while todo:
            gone = todo.pop()
            if gone in status:
                if gone not in before:
                    before[gone] = status[gone]
                del status[gone]
            todo.extend(children.pop(gone + "/", ()))

    def _complete(self, path: str, value: Any, before: dict[str, str | None]) -> None:
        """A whole container arrived in one op: every path inside it is ``done``."""
        todo = [(path, value)]
        while todo:
            base, node = todo.pop()
            items = node.items() if node.__class__ is dict else enumerate(node)
            kids = self._children.setdefault(base + "/", {})
            for key, child in items:
                sub = base + "/" + escape_token(str(key))
                kids[sub] = None
                self._set(sub, DONE, before)
                if child.__class__ in (dict, list):
                    todo.append((sub, child))


def _NOTHING_OPEN(level: int) -> None:
    return None


#: Operations whose path gets the status their value implies (:func:`implied_status`).
_IMPLYING_OPS: Final = frozenset(("add", "replace"))


def implied_status(value: Any) -> str:
    """The status an ``add`` / ``replace`` of ``value`` gives its path, unsent: ``"started"``
    for a string, ``[]`` or ``{}`` (the tokenizer announces them when they open), ``"done"``
    for anything else (a number or literal appears complete; a non-empty container is a
    whole value, such as a schema default)."""
    if value.__class__ is str or (value.__class__ in (dict, list) and not value):
        return STARTED
    return DONE


def done_statuses(value: Any) -> dict[str, str]:
    """``{pointer: "done"}`` for every path inside ``value`` (the root excluded): the full
    status map of a component whose call has ended. O(size of ``value``)."""
    out: dict[str, str] = {}
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        base, node = todo.pop()
        items = node.items() if node.__class__ is dict else enumerate(node) if node.__class__ is list else ()
        for key, child in items:
            path = base + "/" + escape_token(str(key))
            out[path] = DONE
            if child.__class__ is dict or child.__class__ is list:
                todo.append((path, child))
    return out


def implied_statuses(operations: Any) -> list[tuple[str, str]]:
    """``(path, status)`` that each ``add`` / ``replace`` of a props delta implies, in order.

    Take them *before* applying the operations: applying puts an op's ``{}`` or ``[]`` into
    the props, and the ops after it fill that very object in. Anything that is not an
    operation object is skipped (applying the operations reports it).
    """
    out: list[tuple[str, str]] = []
    if isinstance(operations, list):
        for op in operations:
            if isinstance(op, dict) and op.get("op") in _IMPLYING_OPS and isinstance(op.get("path"), str) and op["path"]:
                out.append((op["path"], implied_status(op.get("value"))))
    return out


def apply_status_changes(status: dict[str, str], implied: Sequence[tuple[str, str]], changes: Any) -> None:
    """Rebuild the full map ``status`` (in place) from one props delta whose operations just
    applied: first each ``(path, status)`` of ``implied`` (:func:`implied_statuses` of the
    operations, taken before they applied), then ``changes`` (the delta's ``statusChanges``,
    may be ``None``) on top: ``None`` removes the path, ``"started"`` / ``"done"`` set it.

    Raises :class:`RemoteInputError` (``status`` untouched) when ``changes`` is not an
    object of pointer -> one of those three (the root ``""`` has no status: the block's
    ``streamingState`` is the whole component's).
    """
    if changes is None:
        changes = {}
    if not isinstance(changes, Mapping):
        raise RemoteInputError(f"{STATUS_CHANGES_KEY} must be an object, got {type(changes).__name__}")
    for path, value in changes.items():
        if not isinstance(path, str) or not path.startswith("/") or value not in (STARTED, DONE, None):
            raise RemoteInputError(f"{STATUS_CHANGES_KEY}[{path!r}]: expected a JSON pointer -> "
                                   f"'started' | 'done' | null, got {value!r}")
    for path, implied_value in implied:
        status[path] = implied_value
    for path, value in changes.items():
        if value is None:
            status.pop(path, None)
        else:
            status[path] = value


class PropsFilter:
    """Tokenizer ops -> component ops (shared by components and interactable updates).

    ``prefix`` re-roots: only ops under it are kept, with the prefix removed
    (``/newProps/title`` -> ``/title``); the op that creates the prefix itself is
    dropped (an update merges into the existing object, it does not replace it).
    """

    __slots__ = ("_plen", "decide", "dropped", "prefix")

    def __init__(self, decide: Callable[[tuple[str, ...]], Any], prefix: str = "") -> None:
        self.decide = decide
        self.prefix = prefix
        self._plen = len(prefix)
        #: Pointers (in the output space) of nulls held back.
        self.dropped: set[str] = set()

    def filter(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        prefix, plen = self.prefix, self._plen
        for op in ops:
            path = op["path"]
            if plen:
                if not path.startswith(prefix) or (len(path) > plen and path[plen] != "/"):
                    continue
                path = path[plen:]
                if not path:
                    continue
                op = {**op, "path": path}
            if _RESERVED_TOKEN in path:
                continue
            if op.get("value", 0) is None and op["op"] != "append":
                verdict = self.decide(tuple(pointer_tokens(path)))
                if verdict is DROP:
                    if op["op"] == "replace" and path not in self.dropped:
                        out.append({"op": "remove", "path": path})
                    self.dropped.add(path)
                    continue
                if isinstance(verdict, NullDefault):
                    op = {"op": "add", "path": path, "value": copy.deepcopy(verdict.value)}
                    self.dropped.discard(path)
                    out.append(op)
                    continue
            if self.dropped and path in self.dropped:
                # A duplicate key brings back a value for a held-back null.
                self.dropped.discard(path)
                if op["op"] == "replace":
                    op = {**op, "op": "add"}
            out.append(op)
        return out


def arguments_parser(max_chars: int, *, append_strings: bool) -> PatchStream:
    """The tokenizer for one call's arguments, bounded by ``max_chars`` characters.

    Its own size limit (UTF-8 bytes, at most 4 per character) is set just above ours so
    that ours, which names the component, is the one that fires. Raises UsageError for a
    ``max_chars`` that is not a positive int.
    """
    if not isinstance(max_chars, int) or max_chars < 1:
        raise UsageError(f"max_chars must be a positive int, got {max_chars!r}")
    return PatchStream(emit_root=False, append_strings=append_strings, max_bytes=4 * max_chars + 1)


class ArgumentStream(abc.ABC):
    """What both streams share: size limit, sticky errors, whitespace-only input as ``{}``."""

    #: ``raw_ops``: the tokenizer's operations for the latest fragment (or close), before any
    #: filtering: what the wire text of the arguments is written from (agui_engine.loops.decision).
    __slots__ = ("_closed", "_content", "_error", "_size", "_status", "_status_changed", "_stream",
                 "max_chars", "raw_ops")
    _status: StatusTracker
    _status_changed: bool
    _stream: PatchStream
    _size: int
    _content: bool
    _closed: bool
    _error: Exception | None
    max_chars: int
    raw_ops: list[dict[str, Any]]

    @abc.abstractmethod
    def _describe(self) -> str:  # pragma: no cover - abstract
        """Which stream this is, for messages (e.g. ``"component WeatherCard (c1)"``)."""

    @property
    def status_messages(self) -> StatusMessages:
        """The standard parameters as far as they have arrived (O(1) unless they changed)."""
        return self._status.messages

    @property
    def status_changed(self) -> bool:
        """Whether the last :meth:`feed` / :meth:`close` touched a standard parameter."""
        return self._status_changed

    def _feed_ops(self, fragment: str) -> list[dict[str, Any]]:
        """Raw tokenizer ops for one fragment.

        Raises the stream's earlier error again, :class:`UsageError` after ``close()``
        or for a non-``str`` fragment, and what the tokenizer or the size limit raises.
        """
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError(f"{self._describe()}: feed() after close()")
        if not isinstance(fragment, str):
            raise UsageError(f"feed() takes str, got {type(fragment).__name__}")
        size = self._size + len(fragment)
        if size > self.max_chars:
            self._error = ComponentSizeError(
                f"{self._describe()}: arguments exceed {self.max_chars} characters (MAX_COMPONENT_ARGS_CHARS)"
            )
            raise self._error
        self._size = size
        if not self._content and fragment and not fragment.isspace():
            self._content = True
        try:
            # Leading whitespace goes in too, so that error offsets count it.
            ops = self._parse(fragment)
        except Exception as exc:
            self._error = exc
            raise
        self.raw_ops = ops
        self._status_changed = self._status.observe(ops)
        return ops

    def _parse(self, fragment: str) -> list[dict[str, Any]]:
        """The tokenizer's ops for one fragment (a subclass may follow the parse piece by piece)."""
        return self._stream.feed(fragment)

    def _close_ops(self) -> list[dict[str, Any]]:
        """The tokenizer's last ops; nothing for empty arguments (they are ``{}``)."""
        self._closed = True
        if not self._content:
            return []
        try:
            ops = self._stream.close()
        except Exception as exc:
            self._error = exc
            raise
        self.raw_ops = ops
        self._status_changed = self._status.observe(ops)
        return ops

    @property
    def parser(self) -> PatchStream:
        """The one tokenizer of these arguments (its status and value; feed through this stream)."""
        return self._stream


class ComponentStream(ArgumentStream):
    """Stream one component call's props as ``tambo.component.*`` CUSTOM events.

    ``ComponentStream(component, *, message_id, component_id, append_strings=True,
    max_chars=MAX_COMPONENT_ARGS_CHARS)``. By default growing strings travel as
    ``{"op": "append"}`` operations carrying only the new characters, so the bytes
    of the props deltas stay linear in the arguments (the accumulator and the
    shipped JavaScript applier understand them). ``append_strings=False`` is strict
    RFC 6902 for consumers that can apply only standard operations: each fragment
    re-sends its growing string whole with ``replace`` -- quadratic bytes (a 50 KB
    markdown prop: about 500x the argument text; see ``spec/components.md``).
    """

    __slots__ = (
        "_filter",
        "_final_props",
        "_paths",
        "_started",
        "component",
        "component_id",
        "message_id",
    )

    def __init__(
        self,
        component: Component,
        *,
        message_id: str,
        component_id: str,
        append_strings: bool = True,
        max_chars: int = MAX_COMPONENT_ARGS_CHARS,
    ) -> None:
        if not isinstance(component, Component):
            raise UsageError(f"ComponentStream needs a Component, got {type(component).__name__}")
        self.component = component
        self.message_id = message_id
        self.component_id = component_id
        self.max_chars = max_chars
        self._stream = arguments_parser(max_chars, append_strings=append_strings)
        self._filter = PropsFilter(component.null_policy.decide)
        self._status = StatusTracker()
        self._status_changed = False
        self._size = 0
        self._content = False  # a non-whitespace character has arrived
        self._started = False
        self._closed = False
        self._error: Exception | None = None
        self._paths = PathStatus()
        self._final_props: dict[str, Any] | None = None
        self.raw_ops = []

    # ------------------------------------------------------------------ public API
    def start(self) -> list[CustomEvent]:
        """``[tambo.component.start]``. Raises :class:`UsageError` if already started."""
        if self._started:
            raise UsageError(f"component stream {self.component_id} already started")
        self._started = True
        return [
            CustomEvent(
                name=COMPONENT_START,
                value={
                    "messageId": self.message_id,
                    "componentId": self.component_id,
                    "componentName": self.component.name,
                },
            )
        ]

    def feed(self, args_fragment: str) -> list[CustomEvent]:
        """The next fragment of the arguments -> ``[props_delta]`` or ``[]``.

        The start event is prepended if :meth:`start` was not called. Raises
        :class:`~agui_engine.jsonstream.JSONStreamError` (malformed JSON, or a root
        that is not an object), :class:`ComponentSizeError` (too long), and
        :class:`UsageError` after :meth:`close`; after an error every call raises it again.
        """
        raw = self._feed_ops(args_fragment)
        events = [] if self._started else self.start()
        delta = self._delta(raw)
        if delta is not None:
            events.append(delta)
        return events

    def close(self) -> list[CustomEvent]:
        """End of the arguments -> ``[props_delta?, tambo.component.end]``.

        Raises :class:`~agui_engine.jsonstream.JSONStreamError` if the arguments
        are incomplete or invalid. A second call returns ``[]``.
        """
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        events = [] if self._started else self.start()
        raw = self._close_ops()
        delta = self._delta(raw)
        if delta is not None:
            events.append(delta)
        self._final_props = self.props
        events.append(
            CustomEvent(name=COMPONENT_END, value={"componentId": self.component_id, "finalProps": self._final_props})
        )
        return events

    @property
    def props(self) -> dict[str, Any]:
        """The props so far: what the operations emitted so far build.

        A fresh copy on every access (O(size of the props)): read it when it is
        needed, not after every fragment.
        """
        value = self._stream.value if self._content else {}
        result: dict[str, Any] = unstrict_value(strip_reserved_keys(value), self.component.null_policy)
        return result

    @property
    def final_props(self) -> dict[str, Any] | None:
        """``finalProps`` of the end event, ``None`` before :meth:`close`."""
        return self._final_props

    @property
    def status(self) -> dict[str, str]:
        """Status of every path of the props as sent so far (``{pointer: "started" | "done"}``, a copy)."""
        return dict(self._paths.status)

    # ------------------------------------------------------------------ internals
    def _describe(self) -> str:
        return f"component {self.component.name} ({self.component_id})"

    def _open_below_root(self, level: int) -> str | None:
        return self._stream.open_pointer(level + 1)

    def _delta(self, raw: list[dict[str, Any]]) -> CustomEvent | None:
        ops = self._filter.filter(raw)
        changes = self._paths.observe(ops, self._open_below_root)
        if not ops and not changes:
            return None
        value: dict[str, Any] = {"componentId": self.component_id, "operations": ops}
        if changes:
            value[STATUS_CHANGES_KEY] = changes
        return CustomEvent(name=COMPONENT_PROPS_DELTA, value=value)


class InteractableUpdateStream(ArgumentStream):
    """Stream an ``update_component_props_<id>`` / ``update_component_state_<id>`` call.

    Operations under ``/newProps`` (``/newState``) are re-rooted onto the
    component's props (state) and sent as ``tambo.component.props_delta``
    (``tambo.component.state_delta``) with ``componentId`` = the interactable's
    id; an ``add`` of a top-level key replaces it, which is the shallow merge.
    :meth:`close` sends ``tambo.component.end`` with ``finalProps`` (or
    ``finalState``): the current values from the context merged with the update.
    Nulls of keys not being changed (strict mode) are held back as for components.
    """

    __slots__ = (
        "_filter",
        "_final",
        "_member",
        "_policy",
        "interactable",
        "kind",
    )

    def __init__(
        self,
        interactable: Interactable,
        kind: UpdateKind,
        *,
        append_strings: bool = True,
        max_chars: int = MAX_COMPONENT_ARGS_CHARS,
    ) -> None:
        if kind not in ("props", "state"):
            raise UsageError(f"kind must be 'props' or 'state', got {kind!r}")
        self.interactable = interactable
        self.kind: UpdateKind = kind
        self.max_chars = max_chars
        self._member = "/newProps" if kind == "props" else "/newState"
        self._policy = interactable.update_policy(kind)
        self._stream = arguments_parser(max_chars, append_strings=append_strings)
        self._status = StatusTracker()
        self._status_changed = False
        member = self._member[1:]
        policy = self._policy
        self._filter = PropsFilter(lambda path: policy.decide((member, *path)), self._member)
        self._closed = False
        self._error: Exception | None = None
        self._size = 0
        self._content = False
        self._final: dict[str, Any] | None = None
        self.raw_ops = []

    def _describe(self) -> str:
        return f"update of component {self.interactable.id}"

    @property
    def _event_name(self) -> str:
        return COMPONENT_PROPS_DELTA if self.kind == "props" else COMPONENT_STATE_DELTA

    def feed(self, args_fragment: str) -> list[CustomEvent]:
        """Like :meth:`ComponentStream.feed`; the delta carries no ``statusChanges``."""
        ops = self._filter.filter(self._feed_ops(args_fragment))
        if not ops:
            return []
        return [CustomEvent(name=self._event_name, value={"componentId": self.interactable.id, "operations": ops})]

    def close(self) -> list[CustomEvent]:
        """End of the arguments -> ``[delta?, tambo.component.end]``."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        events: list[CustomEvent] = []
        content = self._content
        ops = self._filter.filter(self._close_ops())
        if content:
            if ops:
                events.append(
                    CustomEvent(name=self._event_name, value={"componentId": self.interactable.id, "operations": ops})
                )
            args = self._stream.value
        else:
            args = {}
        self._final = merge_update(self.interactable.current(self.kind),
                                   self.interactable.prepare_update(self.kind, args))
        key = "finalProps" if self.kind == "props" else "finalState"
        events.append(CustomEvent(name=COMPONENT_END, value={"componentId": self.interactable.id, key: self._final}))
        return events

    @property
    def update(self) -> dict[str, Any]:
        """The partial update so far (held-back nulls and ``_tambo_*`` keys removed)."""
        value = self._stream.value if self._content else {}
        member = value.get(self._member[1:]) if isinstance(value, Mapping) else None
        if not isinstance(member, dict):
            return {}
        result: dict[str, Any] = unstrict_value(strip_reserved_keys({self._member[1:]: member}), self._policy)
        update: dict[str, Any] = result.get(self._member[1:], {})
        return update

    @property
    def final(self) -> dict[str, Any] | None:
        """The merged props (or state) sent in the end event; ``None`` before :meth:`close`."""
        return self._final



# --------------------------------------------------------------------------- accumulator

#: Key of the list of component blocks on an accumulated message dict. The
#: message's ``content`` stays the AG-UI text string; blocks live beside it, so
#: ``Accumulator.messages_as_structs()`` still validates (unknown keys are dropped).
BLOCKS_KEY: Final = "contentBlocks"
#: Key of a component block's per-path props status, rebuilt from the deltas' ``statusChanges``.
PROPS_STATUS_KEY: Final = "propsStatus"

_INDEX_ATTR: Final = "_component_blocks"


def _index(acc: Accumulator) -> dict[str, tuple[dict[str, Any] | None, dict[str, Any]]]:
    index: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] | None = acc.__dict__.get(_INDEX_ATTR)
    if index is None:
        index = {}
        setattr(acc, _INDEX_ATTR, index)
    return index


def find_component(acc: Accumulator, component_id: str) -> dict[str, Any] | None:
    """The component block with this id (on a message, or a seeded interactable), else ``None``."""
    index = _index(acc)
    found = index.get(component_id)
    if found is not None:
        message, block = found
        if message is None or any(b is block for b in message.get(BLOCKS_KEY) or ()):
            return block
    # The message was replaced (MESSAGES_SNAPSHOT, add_message): look again.
    for message in acc.messages:
        blocks: list[dict[str, Any]] = message.get(BLOCKS_KEY) or []
        for candidate in blocks:
            if candidate.get("id") == component_id:
                index[component_id] = (message, candidate)
                return candidate
    index.pop(component_id, None)
    return None


def component_blocks(acc: Accumulator) -> list[dict[str, Any]]:
    """Every component block on the accumulated messages, in message order."""
    return [block for message in acc.messages for block in message.get(BLOCKS_KEY) or ()]


def seed_interactables(acc: Accumulator, interactables: Sequence[Interactable]) -> None:
    """Make components that live on the front end's screen known to ``acc``.

    A seeded component is not on any message; update events for it apply to it
    like to a component shown by this thread. An id already known is left alone.
    """
    index = _index(acc)
    for item in interactables:
        if find_component(acc, item.id) is None:
            block = {
                "type": "component",
                "id": item.id,
                "name": item.component_name,
                "props": copy.deepcopy(item.props),
                "streamingState": "done",
            }
            if item.state is not None:
                block["state"] = copy.deepcopy(item.state)
            index[item.id] = (None, block)


def _value(ev: CustomEvent, *keys: str) -> Mapping[str, Any]:
    value = ev.value
    if not isinstance(value, Mapping):
        raise RemoteInputError(f"CUSTOM {ev.name}: value must be an object")
    for key in keys:
        if not isinstance(value.get(key), str):
            raise RemoteInputError(f"CUSTOM {ev.name}: value.{key} must be a string")
    return value


def _block(acc: Accumulator, ev: CustomEvent, value: Mapping[str, Any]) -> dict[str, Any]:
    block = find_component(acc, value["componentId"])
    if block is None:
        raise RemoteInputError(f"CUSTOM {ev.name}: unknown component {value['componentId']!r} (no start event)")
    return block


def _on_start(acc: Accumulator, ev: CustomEvent) -> None:
    value = _value(ev, "messageId", "componentId", "componentName")
    if find_component(acc, value["componentId"]) is not None:
        raise RemoteInputError(f"CUSTOM {ev.name}: component {value['componentId']!r} already started")
    message = acc.ensure_message(value["messageId"], "assistant")
    block = {
        "type": "component",
        "id": value["componentId"],
        "name": value["componentName"],
        "props": {},
        "streamingState": "started",
        PROPS_STATUS_KEY: {},
    }
    message.setdefault(BLOCKS_KEY, []).append(block)
    _index(acc)[block["id"]] = (message, block)


_INDEX: Final = re.compile(r"0|[1-9][0-9]*")


def _append_in_place(doc: Any, op: Any) -> bool:
    """Apply one string ``append`` without copying the string; False when it is not one
    that applies as written (the jsonpatch path then applies it or says why).

    ``container[key] + value`` copies the whole string, so a prop streamed in n appends
    would cost O(n^2) here (a 2 MiB string: minutes); :func:`grow_string` grows it in
    place: O(new characters) per append.
    """
    if op.__class__ is not dict or op.get("op") != "append":
        return False
    value, path = op.get("value"), op.get("path")
    if value.__class__ is not str or path.__class__ is not str or not path.startswith("/"):
        return False
    tokens = pointer_tokens(path)
    last = len(tokens) - 1
    parent: Any = doc
    key: Any = None
    for depth, token in enumerate(tokens):
        key = token
        if parent.__class__ is list:
            if not _INDEX.fullmatch(token) or int(token) >= len(parent):
                return False
            key = int(token)
        elif parent.__class__ is not dict or token not in parent:
            return False
        if depth == last:
            break
        parent = parent[key]
    if parent[key].__class__ is not str:
        return False
    grow_string(parent, key, value)
    return True


def _apply_ops(block: dict[str, Any], member: str, ev: CustomEvent, value: Mapping[str, Any]) -> None:
    ops = value.get("operations")
    if not isinstance(ops, list):
        raise RemoteInputError(f"CUSTOM {ev.name}: value.operations must be a list")
    target = block.get(member)
    if not isinstance(target, (dict, list)):
        target = {}
    block["streamingState"] = "streaming"
    try:
        # In place: a copy per delta would make a long stream quadratic. On a
        # failure the end event's final value repairs what was half applied.
        for index, op in enumerate(ops):
            if not _append_in_place(target, op):
                target = jsonpatch.JsonPatchWithAppend(ops[index:]).apply(target, in_place=True)
                break
        block[member] = target
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, ValueError) as exc:
        block[member] = target
        raise RemoteInputError(
            f"CUSTOM {ev.name}: operations for component {block['id']!r} did not apply: {exc}"
        ) from None


def _on_props_delta(acc: Accumulator, ev: CustomEvent) -> None:
    value = _value(ev, "componentId")
    block = _block(acc, ev, value)
    implied = implied_statuses(value.get("operations"))
    _apply_ops(block, "props", ev, value)
    status = block.get(PROPS_STATUS_KEY)
    if status is not None:  # a component streamed here, not a seeded interactable
        try:
            apply_status_changes(status, implied, value.get(STATUS_CHANGES_KEY))
        except RemoteInputError as exc:
            raise RemoteInputError(f"CUSTOM {ev.name}: component {block['id']!r}: {exc}") from None


def _on_state_delta(acc: Accumulator, ev: CustomEvent) -> None:
    value = _value(ev, "componentId")
    _apply_ops(_block(acc, ev, value), "state", ev, value)


def _on_end(acc: Accumulator, ev: CustomEvent) -> None:
    value = _value(ev, "componentId")
    block = _block(acc, ev, value)
    block["streamingState"] = "done"
    for key, member in (("finalProps", "props"), ("finalState", "state")):
        final = value.get(key)
        if isinstance(final, dict) and final != block.get(member):
            # The server guarantees equality; a difference means a delta was lost
            # or failed, and the final value is the truth.
            block[member] = copy.deepcopy(final)
            acc.report_problem(
                "component_final_mismatch",
                f"component {block['id']!r}: {member} built from the deltas differ from {key}; {key} kept",
                event=ev,
            )
    if block.get(PROPS_STATUS_KEY) is not None:
        # The end of the call: every path of the final props is done (whatever was still open,
        # and nothing an interactable update replaced or a repair removed is left behind).
        block[PROPS_STATUS_KEY] = done_statuses(block.get("props"))


#: The ``tambo.component.*`` accumulator handlers by CUSTOM event name, read-only:
#: ``Accumulator(custom_handlers=COMPONENT_HANDLERS)`` keeps component blocks in its
#: messages (a Thread's accumulator has them). Nothing is registered by importing this module.
COMPONENT_HANDLERS: Final[Mapping[str, CustomHandler]] = MappingProxyType({
    COMPONENT_START: _on_start,
    COMPONENT_PROPS_DELTA: _on_props_delta,
    COMPONENT_STATE_DELTA: _on_state_delta,
    COMPONENT_END: _on_end,
})
