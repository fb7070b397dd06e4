"""The tool-call machinery every producer shares: the tools a step offers (:class:`ToolSpec`,
:func:`build_tools`, :func:`wire_tools`, :func:`client_tools_of`), and what a tool call's
events become for a client (:class:`ToolCallTransformer`, one :class:`ToolCallRequest` per call,
its arguments rewritten for the wire by :class:`WireWriter`, a component call's result by
:func:`component_result`).

Theory of operation
-------------------
Every argument fragment is parsed (a :class:`~agui_engine.genui.component_stream.ComponentStream`
for a component, an :class:`~agui_engine.genui.component_stream.InteractableUpdateStream` for an
interactable update, a :class:`~agui_engine.jsonstream.PatchStream` for any other tool) *before*
its ``TOOL_CALL_ARGS`` is emitted, so malformed or oversized arguments fail at the fragment that
broke them (:class:`ToolCallArgumentsError`, naming the call) and everything already emitted stays
valid JSON-so-far. The wire text of a fragment is written from that one parse's operations: no
``_tambo_*`` key and no strict-mode ``null``, at any depth, ever reaches a client (the standard
parameters surface as ``agui_engine.tool_call.status`` events). The decision loop
(:mod:`agui_engine.loops.decision`) and the agent loop (:mod:`agui_engine.loops.agent_loop`) both
feed their tool calls through :class:`ToolCallTransformer`; neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from ..genui.component_stream import ComponentStream, InteractableUpdateStream, PropsFilter, StatusTracker
from ..genui.components import (
    COMPLETION_STATUS_MESSAGE_PARAMETER,
    KEEP,
    STATUS_MESSAGE_PARAMETER,
    Component,
    NullPolicy,
    ServerTool,
    StatusMessages,
    build_llm_tool,
    check_tool_name,
    component_from_tool,
    components_from_available,
    is_ui_tool,
    split_standard_parameters,
    unstrict_value,
)
from ..genui.interactables import Interactable, UpdateKind, interactable_tools
from ..genui.mcp_apps import AppTool
from ..genui.schemas import STANDARD_PARAMETER_PREFIX
from ..genui.uispec import UI_SPEC_COMPONENT, UI_SPEC_TOOL, UISpecStream, UISpecTool, ui_spec_result
from ..jsonstream import PatchStream
from ..llm import (
    LLMTool,
)
from ..protocol.errors import AguiEngineError, LimitExceededError, RemoteInputError, UsageError
from ..protocol.events import (
    CustomEvent,
    Event,
    ReasoningEncryptedValueEvent,
    RunAgentInput,
    Tool,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..protocol.pointer import unescape_token

__all__ = [
    "TOOL_CALL_STATUS_EVENT",
    "ToolCallArgumentsError",
    "ToolCallArgumentsLimitError",
    "ToolCallRequest",
    "ToolCallTransformer",
    "ToolSpec",
    "WireWriter",
    "build_tools",
    "client_tools_of",
    "component_result",
    "wire_tools",
]

#: ``forwardedProps`` key of Tambo-style client components (spec/decision.md §2.1).
_AVAILABLE_COMPONENTS_KEY: Final = "availableComponents"


# --------------------------------------------------------------------------- errors


class ToolCallArgumentsError(RemoteInputError):
    """A tool call's arguments were malformed, too large, or not a JSON object.

    ``tool_call_id`` / ``tool_name`` name the call; ``cause`` is the parser's error
    (with its offset and JSON pointer). The code is the cause's code.
    """

    default_code = "invalid_tool_arguments"

    def __init__(self, message: str, *, tool_call_id: str, tool_name: str, cause: AguiEngineError) -> None:
        super().__init__(message, code=cause.code)
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.cause = cause

    @classmethod
    def wrapping(cls, message: str, *, tool_call_id: str, tool_name: str, cause: AguiEngineError) -> ToolCallArgumentsError:
        """The error for ``cause``: a :class:`ToolCallArgumentsLimitError` when it is a limit.

        A size or depth limit stays a limit for the transport (413 / 4413, and
        ``isinstance(err, LimitExceededError)``), any other cause is a 400 / 4400.
        """
        kind = ToolCallArgumentsLimitError if isinstance(cause, LimitExceededError) else cls
        return kind(message, tool_call_id=tool_call_id, tool_name=tool_name, cause=cause)


class ToolCallArgumentsLimitError(LimitExceededError, ToolCallArgumentsError):
    """A tool call's arguments crossed a limit (size, depth, a component's props size); ``cause`` says which."""

    default_code = "tool_arguments_limit_exceeded"


# --------------------------------------------------------------------------- tools and choice


class ToolSpec(msgspec.Struct, kw_only=True):
    """How the step treats one tool name."""

    llm_tool: LLMTool
    component: Component | None = None
    null_policy: NullPolicy | None = None
    interactable: Interactable | None = None
    update_kind: UpdateKind | None = None
    ui_spec: UISpecTool | None = None
    #: the tool's MCP app: its call is announced at its start and its input streamed (spec/mcp.md)
    app: AppTool | None = None


def build_tools(
    components: Sequence[Component],
    tools: Sequence[LLMTool | ServerTool],
    *,
    interactables: Sequence[Interactable] = (),
    strict: bool = True,
    ui_spec: UISpecTool | None = None,
) -> dict[str, ToolSpec]:
    """The tools the model is offered, by name: standard parameters added, strict when possible.

    ``tools`` are information tools as :class:`~agui_engine.llm.LLMTool` (original
    schema, e.g. a client tool) or :class:`~agui_engine.genui.components.ServerTool`;
    each interactable adds its two update tools, unless ``tools`` already has one
    of that name (the given tool wins). ``ui_spec`` adds ``render_ui``
    (:mod:`agui_engine.genui.uispec`), allowing ``components`` when its allowlist is
    ``None`` (not offered when that allows nothing). Raises :class:`UsageError` for
    two components or tools with one name, or an invalid schema.
    """
    specs: dict[str, ToolSpec] = {}

    def add(name: str, spec: ToolSpec) -> None:
        if name in specs:
            raise UsageError(f"two tools are named {name!r}; tool names must be unique in a step")
        specs[name] = spec

    for component in components:
        add(component.tool_name, ToolSpec(llm_tool=component.to_llm_tool(strict), component=component))
    for tool in tools:
        if isinstance(tool, ServerTool):
            add(tool.name, ToolSpec(llm_tool=tool.to_llm_tool(strict), null_policy=NullPolicy(tool.parameters),
                                    app=tool.app))
            continue
        parameters = tool.parameters or {"type": "object", "properties": {}}
        llm_tool, _ = build_llm_tool(tool.name, tool.description, parameters, strict=strict and tool.strict)
        add(tool.name, ToolSpec(llm_tool=llm_tool, null_policy=NullPolicy(parameters)))
    for interactable in interactables:
        for kind, (llm_tool, _) in zip(("props", "state"), interactable_tools(interactable, strict=strict)):
            if llm_tool.name in specs:
                # a tool given explicitly under this name wins (a Tambo front end sends its
                # update tools as client tools and runs them itself)
                continue
            add(llm_tool.name, ToolSpec(llm_tool=llm_tool, interactable=interactable, update_kind=kind))  # type: ignore[arg-type]
    bound = ui_spec.for_run(components) if ui_spec is not None else None
    if bound is not None:
        add(UI_SPEC_TOOL, ToolSpec(llm_tool=bound.to_llm_tool(strict), ui_spec=bound))
    return specs


def wire_tools(specs: Iterable[ToolSpec]) -> list[Tool]:
    """The AG-UI :class:`~agui_engine.protocol.events.Tool` of each spec, as a model is
    offered it (standard parameters, strict form): what the agent loop hands its inner
    agent in ``RunAgentInput.tools`` and what ``capabilities()`` lists in ``tools.items``."""
    return [Tool(name=s.llm_tool.name, description=s.llm_tool.description, parameters=s.llm_tool.parameters)
            for s in specs]


# --------------------------------------------------------------------------- standard parameters on the wire

#: CUSTOM event carrying a tool call's standard parameters once each is complete:
#: ``{toolCallId, statusMessage?, completionStatusMessage?}`` (cumulative). The
#: ``TOOL_CALL_ARGS`` stream never contains them (see :class:`WireWriter`).
TOOL_CALL_STATUS_EVENT: Final = "agui_engine.tool_call.status"

_STATUS_FIELDS: Final = {
    STATUS_MESSAGE_PARAMETER: "statusMessage",
    COMPLETION_STATUS_MESSAGE_PARAMETER: "completionStatusMessage",
}
#: Characters a JSON encoder must escape inside a string.
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f]').search
_encode_json: Final = msgspec.json.Encoder().encode


def _string_body(text: str) -> str:
    """``text`` as the inside of a JSON string (what goes between the quotes)."""
    return _encode_json(text).decode()[1:-1] if _NEEDS_ESCAPE(text) else text


def _keep_every_null(path: Sequence[str | int]) -> Any:
    return KEEP


class WireWriter:
    """A tool call's arguments for the wire, written from the one parse's operations.

    The arguments are parsed once, by the call's tokenizer (a
    :class:`~agui_engine.genui.component_stream.ComponentStream`,
    :class:`~agui_engine.genui.component_stream.InteractableUpdateStream` or a plain
    :class:`~agui_engine.jsonstream.PatchStream`); :meth:`write` takes the operations
    that parse produced for one fragment and returns the fragment's text for
    ``TOOL_CALL_ARGS`` -- no second scanner reads the fragment again. The operations
    go through the same filter as a component's props (``PropsFilter``): every
    ``_tambo_*`` member removed at any depth, every ``null`` judged by the tool's
    :class:`~agui_engine.genui.components.NullPolicy` at its path (``DROP`` removes it, a
    ``NullDefault`` writes the default, ``KEEP`` keeps it; an unknown tool keeps
    every ``null``). So the concatenated text parses to exactly
    ``unstrict_value(strip_reserved_keys(document), policy)`` -- the same verdict as
    the final arguments and the component streams.

    Theory of operation: the writer keeps the stack of open containers (pointer, is
    an object, members written) and the one open string (JSON is sequential). An
    operation closes the open string unless it grows it (``replace`` of the same
    path: only the new characters are written), closes the containers it is not
    inside (an ``append`` to it, the tokenizer's default for component props, writes exactly
    its characters), writes ``,`` and ``"key":`` as needed, then opens a container (``{`` /
    ``[``: the tokenizer announces containers empty), starts a string (no closing
    quote yet) or writes a complete scalar. After each fragment the tokenizer's
    status (``status_of``) says whether the open string and the innermost containers
    are done; those are closed at once, so the text of a finished document is
    complete when its last fragment is written. A member appears when its value
    begins (a number when it is complete): the key of a member that turns out to be
    dropped is never sent. The text is compact (no whitespace) and re-escaped
    (``ensure_ascii=False``): the same JSON value, not the same bytes. A duplicate
    key is written again (parsers keep the last); one whose ``null`` is dropped after
    a value was shown cannot be taken back from text already sent, and stays.

    ``completed`` collects ``(key, value)`` of each root-level ``_tambo_*`` member
    (the standard parameters) once its value has ended, read from ``document()``
    (the parse's value so far).
    """

    __slots__ = ("_document", "_filter", "_root", "_stack", "_status_of", "_std", "_string", "_string_len",
                 "completed")

    def __init__(self, policy: NullPolicy | None, status_of: Callable[[str], str | None],
                 document: Callable[[], Any]) -> None:
        self._filter = PropsFilter(policy.decide if policy is not None else _keep_every_null)
        self._status_of = status_of
        self._document = document
        self._stack: list[list[Any]] = []  # open containers: [pointer, is object, members written]
        self._string: str | None = None  # pointer of the open string
        self._string_len = 0  # its characters written so far
        self._root = False  # the root object has begun
        self._std: set[str] = set()  # root-level _tambo_* members begun, not yet ended
        self.completed: list[tuple[str, Any]] = []

    def write(self, raw_ops: list[dict[str, Any]], fragment: str) -> str:
        """The wire text for one fragment, from the tokenizer's (unfiltered) operations for it.

        ``fragment`` is only looked at, never scanned: whether it holds non-whitespace
        (the root object begins) and whether it holds a quote (without one, a string
        that is open stays open, and so does everything around it)."""
        out: list[str] = []
        if self._string is not None and '"' not in fragment:
            # the bulk of a long string value: at most its own growth (a path the filter
            # already let through), so the filter and the status checks are skipped
            if not raw_ops:
                return ""
            op = raw_ops[0]
            if len(raw_ops) == 1 and op["path"] == self._string:
                if op["op"] == "append":  # append mode (the default): exactly the new characters
                    self._string_len += len(op["value"])
                    return _string_body(op["value"])
                if op["op"] == "replace":
                    value = op["value"]
                    grown = value[self._string_len :]
                    self._string_len = len(value)
                    return _string_body(grown)
            for op in self._filter.filter(raw_ops):
                self._op(op, out)
            return "".join(out)
        if not self._root and fragment and not fragment.isspace():
            self._root = True
            self._stack.append(["", True, 0])
            out.append("{")
        if raw_ops:
            for op in raw_ops:
                path = op["path"]
                if path.startswith(_RESERVED_ROOT) and "/" not in path[1:]:
                    self._std.add(path[1:])
            for op in self._filter.filter(raw_ops):
                self._op(op, out)
        self._settle(out)
        return "".join(out)

    def finish(self) -> str:
        """The end of the arguments: whatever is still open, closed (nothing for a complete
        document, whose last fragment closed it; nothing for empty arguments)."""
        out: list[str] = []
        if self._string is not None:
            out.append('"')
            self._string = None
        while self._stack:
            out.append("}" if self._stack.pop()[1] else "]")
        return "".join(out)

    def _op(self, op: dict[str, Any], out: list[str]) -> None:
        path = op["path"]
        if self._string is not None:
            if path == self._string and op["op"] == "append":
                out.append(_string_body(op["value"]))
                self._string_len += len(op["value"])
                return
            if path == self._string and op["op"] != "remove" and op["value"].__class__ is str:
                value = op["value"]
                out.append(_string_body(value[self._string_len :]))
                self._string_len = len(value)
                return
            out.append('"')
            self._string = None
        if op["op"] == "remove":
            return  # text already sent cannot be taken back (see the class docstring)
        parent, _, token = path.rpartition("/")
        stack = self._stack
        while len(stack) > 1 and stack[-1][0] != parent:
            out.append("}" if stack.pop()[1] else "]")
        top = stack[-1]
        if top[2]:
            out.append(",")
        top[2] += 1
        if top[1]:
            key = unescape_token(token) if "~" in token else token
            out.append('"' + _string_body(key) + '":')
        value = op["value"]
        cls = value.__class__
        if cls is str:
            out.append('"' + _string_body(value))
            self._string = path
            self._string_len = len(value)
        elif (cls is dict or cls is list) and not value:
            # announced empty: its members follow (a complete default is closed by _settle)
            out.append("{" if cls is dict else "[")
            stack.append([path, cls is dict, 0])
        else:
            out.append(_encode_json(value).decode())

    def _settle(self, out: list[str]) -> None:
        """Close the open string and the innermost containers the tokenizer has seen end."""
        status_of = self._status_of
        if self._std:
            for key in [k for k in self._std if status_of("/" + k) == "done"]:
                self._std.discard(key)
                document = self._document()
                if isinstance(document, dict) and key in document:
                    self.completed.append((key, document[key]))
        if self._string is not None:
            if status_of(self._string) != "done":
                return  # still inside the string: nothing around it can have ended
            out.append('"')
            self._string = None
        stack = self._stack
        while stack and status_of(stack[-1][0]) == "done":
            out.append("}" if stack.pop()[1] else "]")


_RESERVED_ROOT: Final = "/" + STANDARD_PARAMETER_PREFIX


# --------------------------------------------------------------------------- per-call tracking


class ToolCallRequest:
    """One tool call of the step: a live view of the call as far as it has streamed.

    Created once per call when it starts and updated in place, so reading it
    costs nothing until a property is read. ``arguments`` has the standard
    parameters taken out and strict-mode nulls undone against the tool's
    original schema; while the call streams it is the partial object so far (a
    fresh copy on every read), once ``done`` the final arguments.
    ``arguments_text`` is the raw JSON text exactly as the model sent it (what
    goes into the message history); ``signature`` the call's own opaque provider
    value (``ToolCallStart.signature``), replayed as the call's ``encryptedValue``. A component call has ``component_id`` and
    ``component_name`` (its ``props`` are its ``arguments``); an interactable
    update has ``interactable_id`` and ``update_kind``.
    """

    __slots__ = (
        "_final",
        "_parser",
        "_parts",
        "_status",
        "_stream",
        "_update",
        "_wire",
        "_wire_status",
        "component_id",
        "done",
        "id",
        "index",
        "name",
        "signature",
        "spec",
        "status_changed",
    )

    def __init__(self, index: int, call_id: str, name: str, spec: ToolSpec | None, component_id: str | None,
                 message_id: str, signature: str | None = None, *, append_strings: bool = True) -> None:
        self.index = index
        self.id = call_id
        self.name = name
        self.signature = signature
        self.spec = spec
        self.component_id = component_id
        self._stream: ComponentStream | UISpecStream | None = None
        self._update: InteractableUpdateStream | None = None
        self._parser: PatchStream | None = None
        if spec is not None and spec.component is not None and component_id is not None:
            self._stream = ComponentStream(spec.component, message_id=message_id, component_id=component_id,
                                           append_strings=append_strings)
        elif spec is not None and spec.ui_spec is not None and component_id is not None:
            self._stream = UISpecStream(spec.ui_spec, message_id=message_id, component_id=component_id,
                                        append_strings=append_strings)
        elif spec is not None and spec.interactable is not None and spec.update_kind is not None:
            self._update = InteractableUpdateStream(spec.interactable, spec.update_kind, append_strings=append_strings)
        else:
            # Its ops go nowhere: append mode so that a long string costs O(chunk) per fragment
            # (replace mode joins the whole string on every fragment).
            self._parser = PatchStream(emit_root=False, append_strings=True)
            self._status = StatusTracker()
        #: whether the last fragment touched a standard parameter (the step re-reads ``status`` only then)
        self.status_changed = False
        self._parts: list[str] = []
        streamed = self._stream or self._update
        parser = streamed.parser if streamed is not None else self._parser
        assert parser is not None
        self._wire = WireWriter(_null_policy(spec), parser.status_of, lambda: parser.value)
        self._wire_status: dict[str, str] = {}
        self.done = False
        self._final: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ToolCallRequest(id={self.id!r}, name={self.name!r}, done={self.done})"

    # -- what consumers read

    @property
    def component(self) -> Component | None:
        """The component a UI tool call shows (``None`` for other calls)."""
        return self.spec.component if self.spec is not None else None

    @property
    def component_name(self) -> str | None:
        """The component a UI tool call shows (``generative-ui`` for ``render_ui``), else ``None``."""
        if self.spec is None:
            return None
        if self.spec.component is not None:
            return self.spec.component.name
        return UI_SPEC_COMPONENT if self.spec.ui_spec is not None else None

    @property
    def ui_spec(self) -> UISpecStream | None:
        """A ``render_ui`` call's stream (its tree, refusal and props problems); ``None`` for other calls."""
        return self._stream if isinstance(self._stream, UISpecStream) else None

    @property
    def interactable_id(self) -> str | None:
        return self.spec.interactable.id if self.spec is not None and self.spec.interactable is not None else None

    @property
    def update_kind(self) -> UpdateKind | None:
        return self.spec.update_kind if self.spec is not None else None

    @property
    def arguments_text(self) -> str:
        return "".join(self._parts)

    @property
    def arguments(self) -> dict[str, Any]:
        if self._final is not None:
            return self._final
        if self._stream is not None:
            return self._stream.props
        if self._update is not None:
            return {"componentId": self.interactable_id, _member(self.update_kind): self._update.update}
        assert self._parser is not None
        value = self._parser.value
        return split_standard_parameters(value)[0] if isinstance(value, dict) else {}

    @property
    def props(self) -> dict[str, Any] | None:
        """A component's props so far (``None`` for other calls)."""
        return self.arguments if self._stream is not None else None

    @property
    def status(self) -> StatusMessages:
        """The call's standard parameters as far as they have arrived."""
        if self._stream is not None:
            return self._stream.status_messages
        if self._update is not None:
            return self._update.status_messages
        return self._status.messages

    # -- driven by the step

    def _wrap(self, exc: AguiEngineError) -> ToolCallArgumentsError:
        return ToolCallArgumentsError.wrapping(
            f"tool call {self.id} ({self.name}): {exc.message}", tool_call_id=self.id, tool_name=self.name, cause=exc
        )

    def _start(self) -> list[Event]:
        if self._stream is not None:
            return list(self._stream.start())
        if self.spec is not None and self.spec.app is not None:  # a tool with an MCP app: shown at once
            return [self.spec.app.announce(self.id, self.name)]
        return []

    def _app_input(self, ops: list[dict[str, Any]], events: list[Event]) -> None:
        """A tool with an MCP app: this fragment's operations for its app (no second parse)."""
        if self.spec is not None and self.spec.app is not None and ops:
            event = self.spec.app.input(self.id, ops)
            if event is not None:
                events.append(event)

    def _feed(self, delta: str) -> tuple[str, list[Event]]:
        """Parse ``delta``: (its text without standard parameters, the CUSTOM events it causes).

        Raises ToolCallArgumentsError; nothing is recorded for a fragment that fails.
        """
        try:
            if self._stream is not None:
                events: list[Event] = list(self._stream.feed(delta))
                ops = self._stream.raw_ops
                self.status_changed = self._stream.status_changed
            elif self._update is not None:
                events = list(self._update.feed(delta))
                ops = self._update.raw_ops
                self.status_changed = self._update.status_changed
            else:
                assert self._parser is not None
                ops = self._parser.feed(delta)
                self.status_changed = self._status.observe(ops)
                events = []
                self._app_input(ops, events)
        except RemoteInputError as exc:
            raise self._wrap(exc) from exc
        self._parts.append(delta)
        wire = self._wire.write(ops, delta)
        completed = self._wire.completed
        if completed:
            for key, value in completed:
                if key in _STATUS_FIELDS and isinstance(value, str):
                    self._wire_status[_STATUS_FIELDS[key]] = value
            completed.clear()
            events.append(CustomEvent(name=TOOL_CALL_STATUS_EVENT, value={"toolCallId": self.id, **self._wire_status}))
        return wire, events

    def _close(self) -> tuple[str, list[Event]]:
        """End of arguments: (the last wire text, the last CUSTOM events); ``arguments`` becomes final.

        Raises ToolCallArgumentsError for truncated arguments (nothing is returned then).
        """
        ops: list[dict[str, Any]] = []
        try:
            if self._stream is not None:
                events: list[Event] = list(self._stream.close())
                ops = self._stream.raw_ops
                self._final = self._stream.final_props or {}
            elif self._update is not None:
                events = list(self._update.close())
                ops = self._update.raw_ops
                # The next update of this instance (this step, or this run's next call) merges into
                # what this one built: "add eggs" then "make it pink" keeps the eggs.
                assert self.spec is not None and self.spec.interactable is not None and self._update.final is not None
                self.spec.interactable = self.spec.interactable.updated(self._update.kind, self._update.final)
                self._final = {"componentId": self.interactable_id, _member(self.update_kind): self._update.update}
            else:
                assert self._parser is not None
                has_text = any(not p.isspace() for p in self._parts)
                if has_text:
                    ops = self._parser.close()
                    self._status.observe(ops)
                raw = self._parser.value if has_text else {}
                clean, _ = split_standard_parameters(raw)
                policy = _null_policy(self.spec)
                self._final = unstrict_value(clean, policy) if policy is not None else clean
                events = []
                self._app_input(ops, events)
        except RemoteInputError as exc:
            raise self._wrap(exc) from exc
        self.done = True
        return self._wire.write(ops, "") + self._wire.finish(), events


def _null_policy(spec: ToolSpec | None) -> NullPolicy | None:
    """What a ``null`` at a path of this tool's arguments means (``None``: keep every
    null -- an unknown tool). The one policy the wire, the final arguments and the
    component streams all use."""
    if spec is None:
        return None
    if spec.component is not None:
        return spec.component.null_policy
    if spec.interactable is not None and spec.update_kind is not None:
        return spec.interactable.update_policy(spec.update_kind)
    return spec.null_policy


def _member(kind: UpdateKind | None) -> str:
    return "newState" if kind == "state" else "newProps"

# --------------------------------------------------------------------------- tool call events -> client events


class ToolCallTransformer:
    """The one place where ``TOOL_CALL_*`` events become what a client gets, for every producer.

    The decision loop (model items turned into events) and the agent loop (events of
    any inner agent: a framework adapter, a remote AG-UI agent) both hand their tool
    call events to one of these, so a ``show_component_<Name>`` call drives a component
    and an ``update_component_*_<id>`` call updates an interactable the same way
    whoever produced it:

    ================  ==============================================================
    event in          events out
    ================  ==============================================================
    TOOL_CALL_START   the START (``parentMessageId`` as given), with ``signature`` a
                      ``REASONING_ENCRYPTED_VALUE {subtype: "tool-call"}``, for a
                      component ``CUSTOM tambo.component.start {messageId}``
    TOOL_CALL_ARGS    the fragment parsed first (:class:`ToolCallRequest`), then the
                      ARGS rewritten for the wire (omitted when empty: no standard
                      parameter, no strict-mode ``null``), then the component / update
                      delta and ``agui_engine.tool_call.status``
    TOOL_CALL_END     the END, then ``tambo.component.end {finalProps}``
    ================  ==============================================================

    Every other field of the events (``subagentRunId``, ``timestamp``, ``metadata``)
    is kept. State: the calls by id (:attr:`by_id`) and in start order
    (:attr:`call_list`, :attr:`component_list`). Raises
    :class:`ToolCallArgumentsError` from :meth:`args` / :meth:`close` for malformed,
    oversized or truncated arguments (the bad fragment is not emitted; the call stays
    open); the caller decides what that ends. ``append_strings`` (default): component props
    grow their strings with ``append`` operations (linear bytes); ``False`` is strict RFC 6902.
    """

    __slots__ = ("append_strings", "by_id", "call_list", "component_list", "make_id", "specs")

    def __init__(self, specs: Mapping[str, ToolSpec], make_id: Callable[[], str], *,
                 append_strings: bool = True) -> None:
        self.specs = specs
        self.make_id = make_id
        self.append_strings = append_strings
        self.by_id: dict[str, ToolCallRequest] = {}
        self.call_list: tuple[ToolCallRequest, ...] = ()
        self.component_list: tuple[ToolCallRequest, ...] = ()

    def open(self, event: ToolCallStartEvent, out: list[Event], *, index: int = 0,
             signature: str | None = None) -> ToolCallRequest:
        """Track the call ``event`` starts; append its events to ``out``. The component's
        ``messageId`` is the START's ``parentMessageId`` (a fresh id when it has none)."""
        spec = self.specs.get(event.tool_call_name)
        is_component = spec is not None and (spec.component is not None or spec.ui_spec is not None)
        component_id = self.make_id() if is_component else None
        message_id = event.parent_message_id or (self.make_id() if is_component else "")
        call = ToolCallRequest(index, event.tool_call_id, event.tool_call_name, spec, component_id, message_id, signature,
                               append_strings=self.append_strings)
        self.by_id[call.id] = call
        self.call_list = (*self.call_list, call)
        if component_id is not None:
            self.component_list = (*self.component_list, call)
        out.append(event)
        if signature:
            # the call's own opaque value, tied to the call: the client keeps it on the call
            # (ToolCall.encryptedValue) and it goes back on that call in the next request
            out.append(ReasoningEncryptedValueEvent(subtype="tool-call", entity_id=call.id, encrypted_value=signature))
        out.extend(call._start())
        return call

    def args(self, call: ToolCallRequest, event: ToolCallArgsEvent, out: list[Event]) -> None:
        """One argument fragment: parsed first (a bad fragment raises and is never emitted)."""
        wire, custom = call._feed(event.delta)
        if wire:
            out.append(event if wire == event.delta else msgspec.structs.replace(event, delta=wire))
        out.extend(custom)

    def close(self, call: ToolCallRequest, event: ToolCallEndEvent, out: list[Event]) -> None:
        """The end of the call's arguments (a truncated document raises; nothing is emitted then)."""
        wire, custom = call._close()
        if wire:
            out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=wire, subagent_run_id=event.subagent_run_id))
        out.append(event)
        out.extend(custom)  # tambo.component.end after the call's END: the props are final


# --------------------------------------------------------------------------- the tools a run's input brings


def client_tools_of(input: RunAgentInput) -> tuple[list[Component], list[LLMTool]]:
    """The components and the client tools a run's input brings (spec/decision.md §2.1).

    Components: ``forwardedProps.availableComponents`` entries and ``tools`` entries
    named ``show_component_<Name>`` (a ``tools`` entry wins over an
    ``availableComponents`` one of the same name); every other ``tools`` entry is a
    client tool (original schema, ``strict=True``: sent strict when its schema allows).
    Raises :class:`RemoteInputError` naming the entry (``tools[0].name: ...``).
    """
    client_components: dict[str, Component] = {}
    forwarded = input.forwarded_props
    if isinstance(forwarded, Mapping) and forwarded.get(_AVAILABLE_COMPONENTS_KEY) is not None:
        for component in components_from_available(forwarded[_AVAILABLE_COMPONENTS_KEY]):
            client_components[component.name] = component
    client_tools: dict[str, LLMTool] = {}
    for i, tool in enumerate(input.tools):
        if is_ui_tool(tool.name):
            component = component_from_tool(tool.name, tool.description, tool.parameters)
            client_components[component.name] = component
            continue
        try:
            check_tool_name(tool.name)
        except UsageError as exc:
            raise RemoteInputError(f"tools[{i}].name: {exc.message}") from None
        if tool.name in client_tools:
            raise RemoteInputError(f"tools[{i}].name: duplicate tool name {tool.name!r}")
        parameters = tool.parameters if tool.parameters is not None else {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
            raise RemoteInputError(f"tools[{i}].parameters: expected a JSON Schema of type object")
        client_tools[tool.name] = LLMTool(
            name=tool.name, description=tool.description, parameters=dict(parameters), strict=True
        )
    return list(client_components.values()), list(client_tools.values())


def component_result(call: ToolCallRequest) -> tuple[str, str | None]:
    """The tool result of a component call: shown, and whether its props fit its schema.

    Props that do not fit (a required prop missing, a wrong type) were still shown
    -- they streamed to the screen as they came -- so the model is told what is
    wrong, with the JSON path, and can show the component again; the run goes on.
    """
    if call.ui_spec is not None:
        return ui_spec_result(call.ui_spec)
    shown = f"Component {call.component_name} is shown on the user's screen."
    assert call.component is not None
    problem = call.component.props_problem(call.arguments)
    if problem is None:
        return shown, None
    error = f"the props of {call.component_name} do not match its schema: {problem}"
    return f"{shown} Error: {error}. Call {call.name} again with corrected props.", error
