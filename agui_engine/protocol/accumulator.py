"""Apply AG-UI events to a thread's state, as the reference client does: the Python client half of AG-UI.

Theory of operation
-------------------
An :class:`Accumulator` holds what a front end holds for one thread: the
conversation (:attr:`Accumulator.messages`), the shared state
(:attr:`Accumulator.state`), the runs seen so far, pending interrupts, running
steps and sub-agents. ``apply(event)`` folds one event in; nothing is raised for
bad remote input -- like the reference client, a patch that does not apply, a
delta for an unknown message or a chunk that cannot be expanded is *reported* in
:attr:`Accumulator.problems` and the previous value is kept, so one bad event
never loses what was accumulated before it.

* Messages are plain dicts in their wire shape (camelCase keys, exactly what
  decoding the ``Message`` JSON gives), so that handlers can add to them
  (component blocks, ...) and :meth:`Accumulator.messages_as_structs` turns
  them into :data:`~agui_engine.protocol.events.Message` Structs. A message's text and
  a tool call's arguments grow by appending fragments to a side buffer; the
  buffer is joined into the dict when anything reads messages, so streaming n
  deltas costs O(n), not O(n^2).
* Chunk events are expanded with the verifier's :class:`~agui_engine.protocol.verify.ChunkExpander`
  (feeding already-expanded events is fine: they pass through).
* The rules (parent resolution of tool calls, tool results placed after their
  owner, the MESSAGES_SNAPSHOT merge, activity replace, patch failure handling)
  are in ``spec/accumulator.md`` and follow ``@ag-ui/client``'s
  ``defaultApplyEvents``.
* Extension: ``Accumulator(custom_handlers=...)`` gives one accumulator its
  ``CUSTOM`` handlers by name (the component handlers are
  :data:`~agui_engine.genui.component_stream.COMPONENT_HANDLERS`: composed, never
  registered by importing a module); :meth:`Accumulator.register_custom_handler`
  adds a handler for a ``CUSTOM`` event name and
  :meth:`Accumulator.register_event_handler` a hook that runs after the built-in
  handling of any event type; both work on the class (every accumulator of it) or
  on one instance. The core never needs editing.

No IO, no clock.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Final

import jsonpatch
import jsonpointer
import msgspec

from .errors import RemoteInputError, UsageError
from .events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AnyEvent,
    CustomEvent,
    Message,
    MessagesSnapshotEvent,
    Metadata,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
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
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UnknownEvent,
)
from .verify import ChunkExpander, ProtocolViolation, event_type_of

__all__ = [
    "Accumulator",
    "CustomHandler",
    "EventHandler",
    "PatchError",
    "Problem",
    "RunRecord",
    "apply_json_patch",
    "grow_string",
    "merge_metadata",
]

#: ``handler(accumulator, event)`` for one CUSTOM event name.
CustomHandler = Callable[["Accumulator", CustomEvent], None]
#: ``handler(accumulator, event)`` run after the built-in handling of one event type.
EventHandler = Callable[["Accumulator", Any], None]


def grow_string(container: Any, key: Any, tail: str) -> None:
    """``container[key] += tail`` for a ``str`` value, without copying the string.

    ``container[key] + tail`` copies the whole string, so a string grown by n pieces
    (a message flushed before every CUSTOM event, a component prop streamed with
    ``append``) would cost O(n^2). Taken out of its container the string has one
    reference, the local ``current``, and CPython's ``+=`` then grows it in place (a
    realloc, not a copy): O(len(tail)) amortized. Raises what indexing ``container`` raises.
    """
    current = container[key]
    container[key] = None  # the container lets go: ``current`` is the one reference
    current += tail
    container[key] = current


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Something the accumulator could not apply; the run went on without it.

    ``kind``: ``"state_patch"``, ``"activity_patch"``, ``"unknown_message"``,
    ``"not_text"``, ``"unknown_tool_call"``, ``"chunk"``, ``"handler"``. ``pointer`` locates the
    failing part of the event (``/delta/2`` = the third patch operation).
    """

    kind: str
    message: str
    event_index: int
    event_type: str | None = None
    pointer: str | None = None

    def __str__(self) -> str:
        where = f"event {self.event_index}" + (f" ({self.event_type})" if self.event_type else "")
        at = f" at {self.pointer}" if self.pointer else ""
        return f"{where}{at}: [{self.kind}] {self.message}"


class RunRecord(msgspec.Struct, kw_only=True):
    """One run seen on the stream and how it ended.

    ``status``: ``"running"``, ``"finished"`` or ``"error"``; ``outcome`` the
    RUN_FINISHED outcome type (``"success"`` when absent, ``"interrupt"``,
    ``"cancelled"``).
    """

    thread_id: str | None
    run_id: str | None
    parent_run_id: str | None = None
    status: str = "running"
    outcome: str | None = None
    result: Any = None
    pending_tool_call_ids: list[str] | None = None
    error_message: str | None = None
    error_code: str | None = None
    usage: list[Any] | None = None


class PatchError(RemoteInputError):
    """A JSON Patch (RFC 6902) did not apply. ``op_index`` is the failing operation's index."""

    default_code = "patch_failed"

    def __init__(self, message: str, *, op_index: int) -> None:
        super().__init__(message)
        self.op_index = op_index


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (msgspec round trip: ~10x faster than copy.deepcopy)."""
    try:
        return msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, ValueError, msgspec.EncodeError):
        return copy.deepcopy(value)  # not plain JSON (a handler put something else there)


#: What jsonpatch / jsonpointer raise for a patch that does not apply to a document.
_PATCH_ERRORS: Final = (
    jsonpatch.JsonPatchException,
    jsonpointer.JsonPointerException,
    TypeError,
    KeyError,
    IndexError,
    ValueError,
)


def apply_json_patch(document: Any, operations: Iterable[Any], *, in_place: bool = False) -> Any:
    """Apply RFC 6902 operations to a *copy* of ``document`` and return the result.

    Operations are dicts or the event model's operation Structs. All or nothing:
    raises :class:`PatchError` naming the failing operation's index and why, and
    ``document`` is never modified. With ``in_place=True`` (for a caller that owns
    ``document``, such as a copy it made) ``document`` itself is patched and returned,
    saving the copy; after a :class:`PatchError` it may then be left partly patched.
    Values are copied from the operations either way, so the result never shares them.
    """
    ops = operations if isinstance(operations, list) else list(operations)
    if ops and not isinstance(ops[0], dict):
        ops = msgspec.to_builtins(ops)  # new containers: the result shares nothing with the Structs
    elif in_place:
        ops = _copy_json(ops)
    if in_place:
        return _apply_each(document, ops)
    try:
        return jsonpatch.JsonPatch(ops).apply(_copy_json(document), in_place=True)
    except _PATCH_ERRORS:
        pass
    _apply_each(_copy_json(document), ops)  # failed: one operation at a time, to say which one and why
    raise PatchError("the patch failed as a whole but every operation applies alone", op_index=0)


def _apply_each(doc: Any, ops: list[Any]) -> Any:
    """Apply ``ops`` to ``doc`` in place one by one; PatchError names the first that fails."""
    for index, op in enumerate(ops):
        try:
            doc = jsonpatch.apply_patch(doc, [op], in_place=True)
        except _PATCH_ERRORS as exc:
            name = op.get("op") if isinstance(op, dict) else None
            path = op.get("path") if isinstance(op, dict) else None
            raise PatchError(f"operation {index} ({name} {path!r}) failed: {exc}", op_index=index) from None
    return doc


class _Hybrid:
    """A method that works on the class (all instances) and on one instance alike."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj: Any, cls: type) -> Callable[..., Any]:
        return partial(self.func, obj if obj is not None else cls)


def _registry(target: Any, attr: str) -> dict[Any, Any]:
    """The handler dict owned by ``target`` itself (a class or an instance), created on first use."""
    own = target.__dict__.get(attr) if isinstance(target, type) else getattr(target, attr, None)
    if own is None:
        own = {}
        setattr(target, attr, own)
    return own


class Accumulator:
    """A thread's messages and state, built from AG-UI events.

    Parameters:
        input: the ``RunAgentInput`` the client sent; its state and messages are the starting point.
        state: the starting state when there is no input (default ``{}``).
        messages: starting messages (Structs or wire dicts) when there is no input.
        custom_handlers: ``CUSTOM`` event name -> ``handler(accumulator, event)`` for this
            accumulator (as :meth:`register_custom_handler` on the instance); e.g.
            :data:`~agui_engine.genui.component_stream.COMPONENT_HANDLERS`. UsageError for a
            name that is not a ``str`` or a handler that is not callable.
    """

    # Class-level registries live in each class's own __dict__ (see _registry); these
    # annotations only document them.
    _custom_handlers: dict[str, CustomHandler]
    _event_handlers: dict[str, list[EventHandler]]
    #: True on a class (and its subclasses) or an instance once an event hook is registered
    #: there, so that apply() skips the hook lookup of an accumulator that has none.
    _has_hooks: bool = False

    def __init__(
        self,
        *,
        input: RunAgentInput | None = None,
        state: Any = None,
        messages: Iterable[Any] | None = None,
        custom_handlers: Mapping[str, CustomHandler] | None = None,
    ) -> None:
        self._messages: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}
        self._tool_calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._text_parts: dict[str, list[str]] = {}
        self._args_parts: dict[str, list[str]] = {}
        self._expander = ChunkExpander()
        self._instance_custom: dict[str, CustomHandler] = {}
        for name, handler in (custom_handlers or {}).items():
            if not isinstance(name, str) or not callable(handler):
                raise UsageError(
                    f"custom_handlers maps a CUSTOM event name (str) to a callable, got {name!r}: {handler!r}"
                )
            self._instance_custom[name] = handler
        self._instance_events: dict[str, list[EventHandler]] = {}
        #: The shared state (any JSON value; starts as the input's state or ``{}``).
        self.state: Any = {}
        #: What could not be applied, in stream order.
        self.problems: list[Problem] = []
        #: Every run seen, in order.
        self.runs: list[RunRecord] = []
        #: Interrupts of the last RUN_FINISHED with an ``interrupt`` outcome, not yet resumed.
        self.pending_interrupts: list[dict[str, Any]] = []
        #: Steps started and not finished, in order.
        self.steps: list[str] = []
        #: Sub-agents by ``subagentRunId``: name, status, parent ids, result or error.
        self.subagents: dict[str, dict[str, Any]] = {}
        #: CUSTOM events no handler took (name and value), in order.
        self.unhandled_custom: list[CustomEvent] = []
        #: Index of the event being (or last) applied.
        self.event_index = -1
        if input is not None:
            state = input.state
            messages = input.messages
        if state is not None:
            self.state = _copy_json(state)
        for message in messages or ():
            self.add_message(message)

    # ------------------------------------------------------------------ reading

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation, in order, as wire-shaped dicts (live: handlers may edit them)."""
        self._flush()
        return self._messages

    def messages_as_structs(self) -> list[Message]:
        """The conversation as :data:`~agui_engine.protocol.events.Message` Structs.

        Raises msgspec.ValidationError if a handler made a message invalid.
        """
        return msgspec.convert(self.messages, list[Message])

    def get_message(self, message_id: str) -> dict[str, Any] | None:
        """The message with this id, or None."""
        message = self._by_id.get(message_id)
        if message is not None:
            self._flush()
        return message

    @property
    def run(self) -> RunRecord | None:
        """The latest run, or None before the first RUN_STARTED."""
        return self.runs[-1] if self.runs else None

    # ------------------------------------------------------------------ for handlers

    def ensure_message(self, message_id: str, role: str = "assistant") -> dict[str, Any]:
        """The message with this id; a new empty one of ``role`` appended if there is none."""
        message = self.get_message(message_id)
        if message is None:
            message = {"id": message_id, "role": role}
            if role != "assistant":
                message["content"] = {} if role == "activity" else ""
            self._append(message)
        return message

    def add_message(self, message: Any) -> dict[str, Any]:
        """Append a message (a Struct or a wire dict); one with the same id is replaced in place."""
        as_dict = msgspec.to_builtins(message) if not isinstance(message, dict) else message
        existing = self._by_id.get(as_dict["id"])
        if existing is not None:
            self._flush()
            existing.clear()
            existing.update(as_dict)
            self._index_tool_calls(existing)
            return existing
        self._append(as_dict)
        return as_dict

    def report_problem(self, kind: str, message: str, *, pointer: str | None = None, event: Any = None) -> None:
        """Record something that could not be applied to the current event."""
        self.problems.append(
            Problem(
                kind=kind,
                message=message,
                event_index=self.event_index,
                event_type=_type_name(event),
                pointer=pointer,
            )
        )

    # ------------------------------------------------------------------ extension

    @_Hybrid
    def register_custom_handler(
        target: Any, name: str, handler: CustomHandler | None = None, *, replace: bool = False
    ) -> Any:
        """Handle ``CUSTOM`` events named ``name`` with ``handler(accumulator, event)``.

        Called on the class, every accumulator of that class (and subclasses) gets
        it; called on an instance, only that one (instance handlers win). Usable as
        a decorator when ``handler`` is omitted. A handler that raises
        :class:`~agui_engine.protocol.errors.RemoteInputError` has its message recorded as a
        problem and the run goes on; any other exception propagates (a bug).
        Raises UsageError when ``name`` already has a different handler there
        (unless ``replace``).
        """
        if handler is None:

            def decorate(fn: CustomHandler) -> CustomHandler:
                _register_custom(target, name, fn, replace)
                return fn

            return decorate
        _register_custom(target, name, handler, replace)
        return handler

    @_Hybrid
    def register_event_handler(target: Any, event_type: str, handler: EventHandler | None = None) -> Any:
        """Run ``handler(accumulator, event)`` after the built-in handling of every
        event of ``event_type`` (a wire type such as ``"TOOL_CALL_END"``; unknown
        types seen by a tolerant decoder work too). Class or instance, like
        :meth:`register_custom_handler`; hooks run class-level first, in
        registration order. Usable as a decorator.
        """
        if handler is None:

            def decorate(fn: EventHandler) -> EventHandler:
                _registry_list(target, event_type).append(fn)
                return fn

            return decorate
        _registry_list(target, event_type).append(handler)
        return handler

    @_Hybrid
    def unregister_custom_handler(target: Any, name: str) -> None:
        """Remove the handler for ``name`` registered on this class or instance (no error if none)."""
        _registry(target, _CUSTOM_ATTR).pop(name, None)

    # ------------------------------------------------------------------ applying

    def apply(self, event: AnyEvent) -> None:
        """Fold one event in. Never raises for bad remote input (see :attr:`problems`)."""
        self.event_index += 1
        try:
            expanded = self._expander.feed(event)
        except ProtocolViolation as exc:
            self.report_problem("chunk", exc.violation.message, event=event)
            return
        for ev in expanded:
            handler = _HANDLERS.get(type(ev))
            if handler is not None:
                handler(self, ev)
            hooks = self._hooks_for(ev) if self._has_hooks else None
            if hooks:
                self._flush()
                for hook in hooks:
                    self._call(hook, ev)

    def apply_all(self, events: Iterable[AnyEvent]) -> None:
        for event in events:
            self.apply(event)

    # ------------------------------------------------------------------ internals

    def _append(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self._by_id[message["id"]] = message
        self._index_tool_calls(message)

    def _index_tool_calls(self, message: dict[str, Any]) -> None:
        for call in message.get("toolCalls") or ():
            self._tool_calls[call["id"]] = (message, call)

    def _flush(self) -> None:
        if self._text_parts:
            for message_id, parts in self._text_parts.items():
                message = self._by_id.get(message_id)
                if message is not None:
                    if not isinstance(message.get("content"), str):
                        message["content"] = ""
                    grow_string(message, "content", "".join(parts))
            self._text_parts.clear()
        if self._args_parts:
            for call_id, parts in self._args_parts.items():
                found = self._tool_calls.get(call_id)
                if found is not None:
                    grow_string(found[1]["function"], "arguments", "".join(parts))
            self._args_parts.clear()

    def _hooks_for(self, ev: Any) -> list[EventHandler]:
        type_name = _type_name(ev) or ""
        found: list[EventHandler] = []
        for klass in reversed(type(self).__mro__):
            found.extend(klass.__dict__.get(_EVENT_ATTR, {}).get(type_name, ()))
        found.extend(self._instance_events.get(type_name, ()))
        return found

    def _call(self, handler: Callable[[Accumulator, Any], None], ev: Any) -> None:
        try:
            handler(self, ev)
        except RemoteInputError as exc:
            self.report_problem("handler", f"{getattr(handler, '__name__', handler)!s}: {exc}", event=ev)

    def _find_custom(self, name: str) -> CustomHandler | None:
        handler = self._instance_custom.get(name)
        if handler is not None:
            return handler
        for klass in type(self).__mro__:
            inherited: CustomHandler | None = klass.__dict__.get(_CUSTOM_ATTR, {}).get(name)
            if inherited is not None:
                return inherited
        return None

    # -- run lifecycle

    def _on_run_started(self, ev: RunStartedEvent) -> None:
        self.runs.append(RunRecord(thread_id=ev.thread_id, run_id=ev.run_id, parent_run_id=ev.parent_run_id))
        self.steps.clear()
        if ev.input is not None:
            for message in ev.input.messages:
                if message.id not in self._by_id:
                    self.add_message(message)
        # Pending interrupts are NOT cleared by a resuming RUN_STARTED: as in the reference
        # client, only the run's RUN_FINISHED replaces them, so a resume whose run ends in
        # RUN_ERROR did not happen and the interrupts stay pending.

    def _current_run(self) -> RunRecord:
        if not self.runs or self.runs[-1].status != "running":
            # A terminal event without RUN_STARTED (or a late RUN_ERROR): record it anyway.
            self.runs.append(RunRecord(thread_id=None, run_id=None))
        return self.runs[-1]

    def _on_run_finished(self, ev: RunFinishedEvent) -> None:
        run = self._current_run()
        run.status = "finished"
        run.result = ev.result
        run.usage = msgspec.to_builtins(ev.usage) if ev.usage is not None else None
        outcome = ev.outcome
        run.outcome = "success" if outcome is None else str(outcome.__struct_config__.tag)
        if isinstance(outcome, RunFinishedInterruptOutcome):
            self.pending_interrupts = msgspec.to_builtins(outcome.interrupts)
        else:
            self.pending_interrupts = []
        if isinstance(outcome, RunFinishedSuccessOutcome):
            run.pending_tool_call_ids = outcome.pending_tool_call_ids

    def _on_run_error(self, ev: RunErrorEvent) -> None:
        if self.runs and self.runs[-1].status == "finished":
            run = self.runs[-1]  # a RUN_ERROR right after RUN_FINISHED is about that run
        else:
            run = self._current_run()
        run.status = "error"
        run.error_message = ev.message
        run.error_code = ev.code
        if ev.usage is not None:
            run.usage = msgspec.to_builtins(ev.usage)

    # -- text and reasoning messages

    def _start_message(self, message_id: str, role: str, ev: Any, name: str | None = None) -> None:
        message = self._by_id.get(message_id)
        if message is not None and message.get("role") == "activity":
            return  # ids are unique across kinds; the reference client ignores this START too
        if message is None:
            message = {"id": message_id, "role": role, "content": ""}
            if name is not None:
                message["name"] = name
            if ev.subagent_run_id is not None:
                message["subagentRunId"] = ev.subagent_run_id
            self._append(message)
        elif message.get("content") is None:
            message["content"] = ""  # an assistant message created by a tool call now gets text
        _merge_metadata(message, ev)

    def _on_text_start(self, ev: TextMessageStartEvent) -> None:
        self._start_message(ev.message_id, ev.role or "assistant", ev, ev.name)

    def _on_content(self, ev: TextMessageContentEvent | ReasoningMessageContentEvent) -> None:
        parts = self._text_parts.get(ev.message_id)
        if parts is None:
            message = self._by_id.get(ev.message_id)
            if message is None:
                self.report_problem(
                    "unknown_message", f"content for message {ev.message_id!r}, which was never started", event=ev
                )
                return
            if not isinstance(message.get("content", ""), str | None):
                # A user message of content parts or an activity message re-opened as text:
                # appending would corrupt it (the reference client string-concatenates).
                self.report_problem(
                    "not_text",
                    f"content for {message.get('role')} message {ev.message_id!r}, whose content is not text",
                    event=ev,
                )
                return
            parts = self._text_parts[ev.message_id] = []
        parts.append(ev.delta)
        if ev.metadata is not None:
            _merge_metadata(self._by_id[ev.message_id], ev)

    def _on_message_end(self, ev: TextMessageEndEvent | ReasoningMessageEndEvent) -> None:
        if ev.message_id in self._text_parts:
            self._flush()
        message = self._by_id.get(ev.message_id)
        if message is not None and message.get("role") != "activity":
            _merge_metadata(message, ev)

    def _on_reasoning_start(self, ev: ReasoningMessageStartEvent) -> None:
        self._start_message(ev.message_id, "reasoning", ev)

    def _on_encrypted_value(self, ev: ReasoningEncryptedValueEvent) -> None:
        if ev.subtype == "tool-call":
            found = self._tool_calls.get(ev.entity_id)
            target = found[1] if found is not None else None
        else:
            target = self._by_id.get(ev.entity_id)
        if target is not None:  # an unknown entity is a no-op, as in the reference client
            target["encryptedValue"] = ev.encrypted_value

    # -- tool calls

    def _on_tool_start(self, ev: ToolCallStartEvent) -> None:
        found = self._tool_calls.get(ev.tool_call_id)
        if found is not None:
            found[1]["function"]["name"] = ev.tool_call_name  # a replayed start only renames
            _merge_metadata(found[1], ev)
            return
        parent = self._owner_for(ev)
        call = {"id": ev.tool_call_id, "type": "function", "function": {"name": ev.tool_call_name, "arguments": ""}}
        _merge_metadata(call, ev)
        parent.setdefault("toolCalls", []).append(call)
        self._tool_calls[ev.tool_call_id] = (parent, call)

    def _owner_for(self, ev: ToolCallStartEvent) -> dict[str, Any]:
        """The assistant message a new tool call attaches to (reference client rules)."""
        parent_id = ev.parent_message_id
        if parent_id is not None:
            parent = self._by_id.get(parent_id)
            if parent is not None and parent.get("role") == "assistant":
                return parent
            new_id = ev.tool_call_id if parent is not None else parent_id
        else:
            new_id = ev.tool_call_id
        existing = self._by_id.get(new_id)
        if existing is not None and existing.get("role") == "assistant":
            return existing
        message: dict[str, Any] = {"id": new_id, "role": "assistant"}
        if ev.subagent_run_id is not None:
            message["subagentRunId"] = ev.subagent_run_id
        self._append(message)
        return message

    def _on_tool_args(self, ev: ToolCallArgsEvent) -> None:
        parts = self._args_parts.get(ev.tool_call_id)
        if parts is None:
            if ev.tool_call_id not in self._tool_calls:
                self.report_problem(
                    "unknown_tool_call", f"arguments for tool call {ev.tool_call_id!r}, which was never started", event=ev
                )
                return
            parts = self._args_parts[ev.tool_call_id] = []
        parts.append(ev.delta)
        if ev.metadata is not None:
            _merge_metadata(self._tool_calls[ev.tool_call_id][1], ev)

    def _on_tool_end(self, ev: ToolCallEndEvent) -> None:
        if ev.tool_call_id in self._args_parts:
            self._flush()
        found = self._tool_calls.get(ev.tool_call_id)
        if found is not None:
            _merge_metadata(found[1], ev)

    def _on_tool_result(self, ev: ToolCallResultEvent) -> None:
        self._flush()
        content = ev.content if isinstance(ev.content, str) else msgspec.to_builtins(ev.content)
        result: dict[str, Any] = {"id": ev.message_id, "role": "tool", "content": content, "toolCallId": ev.tool_call_id}
        if ev.subagent_run_id is not None:
            result["subagentRunId"] = ev.subagent_run_id
        _merge_metadata(result, ev)
        existing = self._by_id.get(ev.message_id)
        if existing is not None:
            existing.clear()
            existing.update(result)
            return
        found = self._tool_calls.get(ev.tool_call_id)
        position = len(self._messages)
        if found is not None:
            owner = found[0]
            for i, message in enumerate(self._messages):
                if message is owner:
                    position = i + 1
                    while position < len(self._messages) and self._messages[position].get("role") == "tool":
                        position += 1
                    break
        self._messages.insert(position, result)
        self._by_id[ev.message_id] = result

    # -- snapshots and state

    def _on_messages_snapshot(self, ev: MessagesSnapshotEvent) -> None:
        self._flush()
        snapshot: list[dict[str, Any]] = msgspec.to_builtins(ev.messages)
        by_id = {m["id"]: m for m in snapshot}
        keep_activity = not any(m["role"] == "activity" for m in snapshot)
        keep_reasoning = not any(m["role"] == "reasoning" for m in snapshot)
        merged: list[dict[str, Any]] = []
        present: set[str] = set()
        for message in self._messages:
            role = message.get("role")
            if message["id"] in by_id:  # the snapshot's version wins, whatever the local role
                merged.append(by_id[message["id"]])
            elif (role == "activity" and keep_activity) or (role == "reasoning" and keep_reasoning):
                merged.append(message)
            else:
                continue
            present.add(message["id"])
        merged.extend(m for m in snapshot if m["id"] not in present)
        self._messages = []
        self._by_id = {}
        self._tool_calls = {}
        for message in merged:
            self._append(message)

    def _on_state_snapshot(self, ev: StateSnapshotEvent) -> None:
        self.state = _copy_json(ev.snapshot)

    def _on_state_delta(self, ev: StateDeltaEvent) -> None:
        try:
            self.state = apply_json_patch(self.state, ev.delta)
        except PatchError as exc:
            self.report_problem(
                "state_patch",
                f"STATE_DELTA not applied, state kept: {exc.message}",
                pointer=f"/delta/{exc.op_index}",
                event=ev,
            )

    def _on_activity_snapshot(self, ev: ActivitySnapshotEvent) -> None:
        replace = ev.replace is None or ev.replace
        existing = self._by_id.get(ev.message_id)
        content = _copy_json(ev.content)
        if existing is None:
            message: dict[str, Any] = {
                "id": ev.message_id,
                "role": "activity",
                "activityType": ev.activity_type,
                "content": content,
            }
            if ev.subagent_run_id is not None:
                message["subagentRunId"] = ev.subagent_run_id
            _merge_metadata(message, ev)
            self._append(message)
        elif existing.get("role") == "activity":
            if replace:
                # A replacing snapshot states the attribution afresh: no subagentRunId drops the old one.
                existing["activityType"] = ev.activity_type
                existing["content"] = content
                if ev.subagent_run_id is not None:
                    existing["subagentRunId"] = ev.subagent_run_id
                else:
                    existing.pop("subagentRunId", None)
            _merge_metadata(existing, ev)
        elif replace:
            # The reference client overwrites a non-activity message with this id (ag-ui#1350),
            # keeping nothing of it (not its metadata either).
            self._flush()
            existing.clear()
            existing.update({"id": ev.message_id, "role": "activity", "activityType": ev.activity_type, "content": content})
            if ev.subagent_run_id is not None:
                existing["subagentRunId"] = ev.subagent_run_id
            _merge_metadata(existing, ev)

    def _on_activity_delta(self, ev: ActivityDeltaEvent) -> None:
        message = self._by_id.get(ev.message_id)
        if message is None:
            self.report_problem(
                "unknown_message", f"ACTIVITY_DELTA for message {ev.message_id!r}, which does not exist", event=ev
            )
            return
        if message.get("role") != "activity":
            self.report_problem(
                "activity_patch",
                f"ACTIVITY_DELTA for message {ev.message_id!r}, which is a {message.get('role')} message",
                event=ev,
            )
            return
        _merge_metadata(message, ev)  # merged even when the patch then fails, as the reference client does
        try:
            message["content"] = apply_json_patch(message.get("content", {}), ev.patch)
            message["activityType"] = ev.activity_type
        except PatchError as exc:
            self.report_problem(
                "activity_patch",
                f"ACTIVITY_DELTA for {ev.message_id!r} not applied, content kept: {exc.message}",
                pointer=f"/patch/{exc.op_index}",
                event=ev,
            )

    # -- steps, sub-agents, custom

    def _on_step_started(self, ev: StepStartedEvent) -> None:
        self.steps.append(ev.step_name)

    def _on_step_finished(self, ev: StepFinishedEvent) -> None:
        if ev.step_name in self.steps:
            self.steps.remove(ev.step_name)

    def _on_subagent_started(self, ev: SubagentStartedEvent) -> None:
        record = self.subagents.setdefault(ev.subagent_run_id, {})
        record.update(
            {
                "name": ev.name,
                "status": "running",
                "description": ev.description,
                "parentSubagentRunId": ev.parent_subagent_run_id,
                "parentToolCallId": ev.parent_tool_call_id,
                "parentMessageId": ev.parent_message_id,
            }
        )

    def _on_subagent_finished(self, ev: SubagentFinishedEvent) -> None:
        record = self.subagents.setdefault(ev.subagent_run_id, {})
        outcome = ev.outcome
        record["status"] = "suspended" if outcome is not None and outcome.__struct_config__.tag == "suspended" else "finished"
        record["result"] = ev.result
        if outcome is not None:
            record["outcome"] = msgspec.to_builtins(outcome)

    def _on_subagent_error(self, ev: SubagentErrorEvent) -> None:
        record = self.subagents.setdefault(ev.subagent_run_id, {})
        record.update({"status": "error", "errorMessage": ev.message, "errorCode": ev.code})

    def _on_custom(self, ev: CustomEvent) -> None:
        handler = self._find_custom(ev.name)
        if handler is None:
            self.unhandled_custom.append(ev)
            return
        self._flush()
        self._call(handler, ev)

    def _ignore(self, ev: Any) -> None:
        pass


_CUSTOM_ATTR: Final = "_custom_handlers"
_EVENT_ATTR: Final = "_event_handlers"


def merge_metadata(existing: Metadata | None, incoming: Metadata | None) -> Metadata | None:
    """``@ag-ui/core``'s ``mergeMetadata``: ``incoming``'s keys over ``existing``'s, last write wins.

    ``None`` (absent) ``incoming`` returns ``existing`` itself; otherwise a new dict (neither
    argument is modified). Shallow: a key's value is replaced wholesale, never merged recursively.
    """
    if incoming is None:
        return existing
    if existing is None:
        return dict(incoming)
    return {**existing, **incoming}


def _merge_metadata(target: dict[str, Any], ev: Any) -> None:
    """Fold ``ev.metadata`` into ``target["metadata"]`` (:func:`merge_metadata`), as a copy of the
    event's object, and nothing at all when the event has none."""
    incoming = ev.metadata
    if incoming is None:
        return
    target["metadata"] = merge_metadata(target.get("metadata") or None, _copy_json(msgspec.to_builtins(incoming)))


def _register_custom(target: Any, name: str, handler: CustomHandler, replace: bool) -> None:
    attr = _CUSTOM_ATTR if isinstance(target, type) else "_instance_custom"
    registry = _registry(target, attr)
    current = registry.get(name)
    if current is not None and current is not handler and not replace:
        raise UsageError(f"CUSTOM event {name!r} already has a handler ({current!r}); pass replace=True")
    registry[name] = handler


def _registry_list(target: Any, event_type: str) -> list[EventHandler]:
    target._has_hooks = True  # this class and its subclasses, or this instance
    attr = _EVENT_ATTR if isinstance(target, type) else "_instance_events"
    handlers: list[EventHandler] = _registry(target, attr).setdefault(str(event_type), [])
    return handlers


def _type_name(event: Any) -> str | None:
    if event is None:
        return None
    if isinstance(event, UnknownEvent):
        return event.type
    return event_type_of(event)


#: Built-in handling per event class. Chunk events never get here (expanded first).
_HANDLERS: Final[dict[type, Callable[[Accumulator, Any], None]]] = {
    RunStartedEvent: Accumulator._on_run_started,
    RunFinishedEvent: Accumulator._on_run_finished,
    RunErrorEvent: Accumulator._on_run_error,
    TextMessageStartEvent: Accumulator._on_text_start,
    TextMessageContentEvent: Accumulator._on_content,
    TextMessageEndEvent: Accumulator._on_message_end,
    ToolCallStartEvent: Accumulator._on_tool_start,
    ToolCallArgsEvent: Accumulator._on_tool_args,
    ToolCallEndEvent: Accumulator._on_tool_end,
    ToolCallResultEvent: Accumulator._on_tool_result,
    StateSnapshotEvent: Accumulator._on_state_snapshot,
    StateDeltaEvent: Accumulator._on_state_delta,
    MessagesSnapshotEvent: Accumulator._on_messages_snapshot,
    ActivitySnapshotEvent: Accumulator._on_activity_snapshot,
    ActivityDeltaEvent: Accumulator._on_activity_delta,
    RawEvent: Accumulator._ignore,
    CustomEvent: Accumulator._on_custom,
    StepStartedEvent: Accumulator._on_step_started,
    StepFinishedEvent: Accumulator._on_step_finished,
    ReasoningStartEvent: Accumulator._ignore,
    ReasoningEndEvent: Accumulator._ignore,
    ReasoningMessageStartEvent: Accumulator._on_reasoning_start,
    ReasoningMessageContentEvent: Accumulator._on_content,
    ReasoningMessageEndEvent: Accumulator._on_message_end,
    ReasoningEncryptedValueEvent: Accumulator._on_encrypted_value,
    SubagentStartedEvent: Accumulator._on_subagent_started,
    SubagentFinishedEvent: Accumulator._on_subagent_finished,
    SubagentErrorEvent: Accumulator._on_subagent_error,
}
