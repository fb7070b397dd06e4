"""The decision loop: one model step, from prompt and tools to AG-UI events and a growing decision.

Theory of operation
-------------------
:func:`run_decision_loop` makes **one** model call and turns its stream into
:class:`DecisionStreamItem` values. Each item carries the decision *so far*
(:class:`Decision`: the assistant text, reasoning, every tool call with its
arguments so far, every component with its props so far, status messages,
finish reason, usage) and the AG-UI events caused by the model item that was
just consumed. Running several steps (server tools, tool results back to the
model, client tools ending the run) is :class:`agui_engine.loops.llm_agent.LLMAgent`'s
job; this module knows nothing about runs.

Before the model is called:

1. The tools are built: each component becomes ``show_component_<name>``, each
   information tool keeps its name, and all get the standard parameters
   (``_tambo_statusMessage``, ``_tambo_completionStatusMessage``) and, when
   ``strict`` and possible, the strict schema form (:mod:`agui_engine.genui.components`).
   Two tools with one name are a :class:`~agui_engine.protocol.errors.UsageError`.
2. ``force_tool_choice`` is resolved (:func:`agui_engine.llm.resolve_tool_choice`): ``None`` ->
   ``"auto"``; ``"auto"``, ``"required"``, ``"none"`` pass through; a tool name
   must be one of the tools, else :class:`~agui_engine.llm.UnknownToolChoiceError` -- before any
   model call.
3. The system prompt is rendered with every template variable filled
   (:func:`agui_engine.loops.prompts.build_system_prompt`) and put before the
   conversation; user text is never templated.

While the model streams, the step writes through one
:class:`~agui_engine.protocol.writer.EventWriter` (one lane: at most one of the
reasoning message and the text message is open; writing the other closes it) and keeps
a table of tool calls keyed by the model's ``index``. Every model item maps to events:

=====================  ==============================================================
model item             events
=====================  ==============================================================
ReasoningDelta text    (REASONING_START + REASONING_MESSAGE_START) REASONING_MESSAGE_CONTENT
ReasoningDelta sig.    (open as above) REASONING_ENCRYPTED_VALUE {subtype: "message"}, then
                       REASONING_MESSAGE_END + REASONING_END: the opaque value ends the
                       provider's block, so the next reasoning is a new message with its
                       own value (Anthropic thinking + redacted_thinking in one turn)
TextDelta              (close reasoning) (TEXT_MESSAGE_START) TEXT_MESSAGE_CONTENT
ToolCallStart          (close reasoning, close text) TOOL_CALL_START {parentMessageId}
                       + with a signature: REASONING_ENCRYPTED_VALUE {subtype: "tool-call",
                       entityId: toolCallId}
                       + for a component: CUSTOM tambo.component.start
ToolCallArgsDelta      TOOL_CALL_ARGS (the fragment rewritten for the wire, see below)
                       + for a component: CUSTOM tambo.component.props_delta
                       + when a standard parameter ended: CUSTOM agui_engine.tool_call.status
ToolCallEnd            TOOL_CALL_END; for a component then the last props_delta and
                       CUSTOM tambo.component.end {finalProps}
Usage / Finish         none (the decision records them)
StreamError            close reasoning and text -> :class:`ModelStreamError`
=====================  ==============================================================

Every argument fragment is parsed (a :class:`~agui_engine.genui.component_stream.ComponentStream`
for a component, a :class:`~agui_engine.jsonstream.PatchStream` for any other tool)
*before* its ``TOOL_CALL_ARGS`` is emitted, so malformed or oversized arguments
fail at the fragment that broke them and everything already emitted stays valid
JSON-so-far. The wire text of a fragment is written from that one parse's operations
(:class:`WireWriter`; the fragment is never scanned a second time):
no ``_tambo_*`` key and no strict-mode ``null``, at any depth, ever reaches a client
(the standard parameters surface as ``agui_engine.tool_call.status`` events and the decision's status
messages); the decision keeps the model's raw text for the history. ``parentMessageId`` of a tool call is the assistant message id of
the step (one id serves the text message, the tool calls and the components'
``messageId``, so a client groups them into one message). Empty text and
argument deltas are dropped (an empty ``TEXT_MESSAGE_CONTENT`` is legal in 1.0
but flagged by validators and carries nothing).

On any error the events that close what is open (reasoning span, text message;
tool calls are left open because their arguments are not valid JSON) are
yielded as a last item, then the error is raised: ``ModelStreamError``
(:class:`~agui_engine.protocol.errors.UpstreamError`) for a ``StreamError`` item or a
model that breaks the ``LLMClient`` contract, the parser's
:class:`~agui_engine.protocol.errors.RemoteInputError` (wrapped in
:class:`ToolCallArgumentsError`, naming the call) for bad arguments. Closing the
iterator (``aclose()``) closes the model stream at once.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final

import msgspec

from ..genui.component_stream import ComponentStream, InteractableUpdateStream, PropsFilter, StatusTracker
from ..genui.components import (
    COMPLETION_STATUS_MESSAGE_PARAMETER,
    KEEP,
    STANDARD_PARAMETER_PREFIX,
    STATUS_MESSAGE_PARAMETER,
    Component,
    NullPolicy,
    ServerTool,
    StatusMessages,
    build_llm_tool,
    split_standard_parameters,
    unstrict_value,
)
from ..genui.interactables import Interactable, UpdateKind, interactable_tools
from ..genui.mcp_apps import AppTool
from ..genui.uispec import UI_SPEC_COMPONENT, UI_SPEC_TOOL, UISpecStream, UISpecTool
from ..jsonstream import PatchStream
from ..llm import (
    Finish,
    FinishReason,
    LLMClient,
    LLMStreamItem,
    LLMTool,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    resolve_tool_choice,
)
from ..protocol.errors import AguiEngineError, LimitExceededError, RemoteInputError, UpstreamError, UsageError
from ..protocol.events import (
    CustomEvent,
    Event,
    ReasoningEncryptedValueEvent,
    ReasoningMessage,
    SystemMessage,
    Tool,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..protocol.ids import Ids, new_id
from ..protocol.pointer import unescape_token
from ..protocol.verify import TEXT, TOOL
from ..protocol.writer import EventWriter
from .observe import SpanHandle, model_span
from .prompts import SYSTEM_MESSAGE_ID, build_system_prompt

__all__ = [
    "Decision",
    "DecisionStreamItem",
    "MAX_TOOL_CALLS_PER_STEP",
    "ModelStreamError",
    "ReasoningBlock",
    "TOOL_CALL_STATUS_EVENT",
    "ToolCallArgumentsError",
    "ToolCallArgumentsLimitError",
    "ToolCallRequest",
    "ToolCallTransformer",
    "ToolSpec",
    "WireWriter",
    "build_tools",
    "run_decision_loop",
    "wire_tools",
]

#: Tool calls one model reply may open. Providers produce a handful of parallel
#: calls (OpenAI caps a request at 128 tools, so 128 distinct calls is already
#: every tool at once); the bound keeps a runaway or hostile stream from growing
#: the per-call bookkeeping without end.
MAX_TOOL_CALLS_PER_STEP: Final = 128


# --------------------------------------------------------------------------- errors


class ModelStreamError(UpstreamError):
    """The model's stream failed (a ``StreamError`` item) or broke the ``LLMClient`` contract."""

    default_code = "model_stream_error"


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


# --------------------------------------------------------------------------- decision values


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """One reasoning message of a step: its id, where its text starts in the step's
    reasoning parts, its opaque provider value (``None`` until one arrives), and how
    many of the step's text parts came before it (``text_at``: where it sits in the
    step's text, so the history keeps the model's order).

    A provider's reasoning block (an Anthropic ``thinking`` or ``redacted_thinking``
    block, a Responses reasoning item, a Gemini thought) ends with its opaque value,
    so the value closes the block: the next reasoning opens a new one.
    """

    id: str
    start: int
    encrypted: str | None = None
    text_at: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Everything the step has decided so far.

    Building one per model item is O(1) in the length of the text: ``message``
    and ``reasoning`` are joined only when read (from the step's part lists,
    up to the parts that existed when this decision was made).
    """

    message_id: str
    text_parts: Sequence[str] = field(default=(), repr=False)
    text_count: int = field(default=0, repr=False)
    reasoning_parts: Sequence[str] = field(default=(), repr=False)
    reasoning_count: int = field(default=0, repr=False)
    reasoning_blocks: tuple[ReasoningBlock, ...] = ()
    tool_calls: tuple[ToolCallRequest, ...] = ()
    components: tuple[ToolCallRequest, ...] = ()
    status_message: str | None = None
    completion_status_message: str | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None

    @property
    def message(self) -> str:
        """The assistant text so far."""
        return "".join(islice(self.text_parts, self.text_count))

    @property
    def reasoning(self) -> str:
        """The reasoning text so far (every reasoning message of the step, joined)."""
        return "".join(islice(self.reasoning_parts, self.reasoning_count))

    @property
    def reasoning_messages(self) -> tuple[ReasoningMessage, ...]:
        """One ``ReasoningMessage`` per reasoning block, in order, each with its own
        ``encrypted_value`` byte-exact (what goes back to the model: a provider
        rejects a thinking block whose signature is not its own)."""
        blocks = self.reasoning_blocks
        out = []
        for i, block in enumerate(blocks):
            end = blocks[i + 1].start if i + 1 < len(blocks) else self.reasoning_count
            content = "".join(islice(self.reasoning_parts, block.start, end))
            out.append(ReasoningMessage(id=block.id, content=content, encrypted_value=block.encrypted))
        return tuple(out)

    @property
    def transcript(self) -> tuple[ReasoningMessage | str, ...]:
        """The step's reasoning messages and its text in the order the model produced
        them: the text between two reasoning messages is one string (it may span
        several text messages, e.g. around tool calls). Reasoning that came after
        text stays after it, as the providers' replay expects."""
        out: list[ReasoningMessage | str] = []
        pos = 0
        for block, message in zip(self.reasoning_blocks, self.reasoning_messages):
            if block.text_at > pos:
                out.append("".join(islice(self.text_parts, pos, block.text_at)))
                pos = block.text_at
            out.append(message)
        if self.text_count > pos:
            out.append("".join(islice(self.text_parts, pos, self.text_count)))
        return tuple(out)

    @property
    def reasoning_id(self) -> str | None:
        """The id of the step's first reasoning message (``None`` without reasoning)."""
        return self.reasoning_blocks[0].id if self.reasoning_blocks else None

    @property
    def reasoning_encrypted(self) -> str | None:
        """The first reasoning message's opaque value; a step may have several, see
        :attr:`reasoning_messages`."""
        return self.reasoning_blocks[0].encrypted if self.reasoning_blocks else None

    @property
    def component_name(self) -> str | None:
        """The latest component's name (Tambo's single-component view)."""
        return self.components[-1].component_name if self.components else None

    @property
    def component_id(self) -> str | None:
        return self.components[-1].component_id if self.components else None

    @property
    def props(self) -> dict[str, Any] | None:
        return self.components[-1].props if self.components else None


class DecisionStreamItem(msgspec.Struct, frozen=True):
    """The decision so far plus the AG-UI events of the model item just consumed.

    (A Struct, not a dataclass: one is made per model chunk, and a Struct is ~5x
    cheaper to build than a frozen dataclass.)
    """

    decision: Decision
    events: tuple[Event, ...] = ()


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


# --------------------------------------------------------------------------- the step state machine


class _Step:
    """One model step's events (through one :class:`~agui_engine.protocol.writer.EventWriter`:
    it keeps the text / reasoning lane, at most one of them open, and the tool calls) and its
    decision so far."""

    def __init__(self, specs: Mapping[str, ToolSpec], message_id: str, make_id: Callable[[], str],
                 append_strings: bool = True) -> None:
        self.specs = specs
        self.append_strings = append_strings
        self.message_id = message_id  # the assistant message of this step
        self.writer = EventWriter(Ids(make_id))
        self.texts = 0  # text messages opened so far
        self.make_id = make_id
        self.reasoning_id: str | None = None  # the reasoning message written last
        self.reasoning_parts: list[str] = []
        self.reasoning_blocks: tuple[ReasoningBlock, ...] = ()
        self.text_parts: list[str] = []
        self.calls: dict[int, ToolCallRequest] = {}
        self.tools = ToolCallTransformer(specs, make_id, append_strings=append_strings)
        self.status: StatusMessages = StatusMessages()
        self.finish: FinishReason | None = None
        self.usage: Usage | None = None
        self._decision: Decision | None = None
        self._decision_key: tuple[Any, ...] = ()

    def _reasoning_block(self, reasoning_id: str) -> None:
        """The writer opened reasoning message ``reasoning_id``: a block of the decision starts."""
        if reasoning_id != self.reasoning_id:
            self.reasoning_id = reasoning_id
            self.reasoning_blocks = (*self.reasoning_blocks, ReasoningBlock(reasoning_id, len(self.reasoning_parts),
                                                                     text_at=len(self.text_parts)))

    # -- items

    def on_item(self, item: LLMStreamItem) -> list[Event]:
        out: list[Event] = []
        if isinstance(item, TextDelta):
            if item.text:
                # the first text of the step is the step's message; text after tool calls is a
                # new message (a closed id is not reopened: validators reject it)
                first = None if self.texts else self.message_id
                opened = self.writer.current()
                if opened is None or opened[0] is not TEXT:
                    self.texts += 1
                self.writer.text(item.text, out, message_id=first)
                self.text_parts.append(item.text)
        elif isinstance(item, ToolCallArgsDelta):
            call = self._call(item.index, "ToolCallArgsDelta")
            if item.delta:
                out.extend(self._args(call, item.delta))
        elif isinstance(item, ReasoningDelta):
            if item.text:
                self._reasoning_block(self.writer.reasoning(item.text, out))
                self.reasoning_parts.append(item.text)
            if item.text or item.signature or item.encrypted:
                for blob in (item.signature, item.encrypted):
                    if blob:
                        self._seal_reasoning(blob, out)
        elif isinstance(item, ToolCallStart):
            out.extend(self._start_call(item))
        elif isinstance(item, ToolCallEnd):
            call = self._call(item.index, "ToolCallEnd")
            if call.done:
                raise ModelStreamError(f"model stream ended tool call index {item.index} twice")
            self.tools.close(call, self.writer.end_tool(call.id), out)
            self._refresh(call)
        elif isinstance(item, Usage):
            self.usage = _merge_usage(self.usage, item)
        elif isinstance(item, Finish):
            self.finish = item.reason
        elif isinstance(item, StreamError):
            raise ModelStreamError(item.message, code=item.code, retryable=item.retryable)
        else:  # pragma: no cover - the LLMStreamItem union is closed
            raise ModelStreamError(f"model stream produced an unknown item {type(item).__name__}")
        return out

    def _seal_reasoning(self, blob: str, out: list[Event]) -> None:
        """Attach ``blob`` to the open reasoning message (opening one if a previous blob
        closed it) and close it: an opaque value ends its provider block, and the
        next block needs its own message and its own value."""
        self._reasoning_block(self.writer.seal_reasoning(blob, out))
        last = self.reasoning_blocks[-1]
        self.reasoning_blocks = (*self.reasoning_blocks[:-1], ReasoningBlock(last.id, last.start, blob, last.text_at))

    def _call(self, index: int, what: str) -> ToolCallRequest:
        call = self.calls.get(index)
        if call is None:
            raise ModelStreamError(f"model stream sent {what} for tool call index {index} before its ToolCallStart")
        return call

    def _start_call(self, item: ToolCallStart) -> list[Event]:
        if item.index in self.calls:
            raise ModelStreamError(f"model stream started tool call index {item.index} twice")
        if len(self.calls) >= MAX_TOOL_CALLS_PER_STEP:
            raise ModelStreamError(
                f"model reply opened more than MAX_TOOL_CALLS_PER_STEP={MAX_TOOL_CALLS_PER_STEP} tool calls"
            )
        if self.writer.is_open(TOOL, item.id) or item.id in self.tools.by_id:
            raise ModelStreamError(f"model stream started tool call {item.id!r} twice (index {item.index})")
        out: list[Event] = []
        self.writer.close_lane(out)  # the message's text ends where its tool calls begin
        start = self.writer.open_tool(item.name, tool_call_id=item.id, parent_message_id=self.message_id)
        call = self.tools.open(start, out, index=item.index, signature=item.signature)
        self.calls[item.index] = call
        self._refresh(call)
        return out

    def _args(self, call: ToolCallRequest, delta: str) -> list[Event]:
        if call.done:
            raise ModelStreamError(f"model stream sent arguments for tool call {call.id} after its end")
        out: list[Event] = []
        self.tools.args(call, self.writer.tool_args(call.id, delta), out)
        if call.status_changed:  # reading the status joins its pieces: only when it moved
            self._refresh(call)
        return out

    def _refresh(self, call: ToolCallRequest) -> None:
        status = call.status
        if status.status_message is not None or status.completion_status_message is not None:
            self.status = status

    def end(self) -> list[Event]:
        """Normal end of the model stream: close the lanes; every call must have ended."""
        open_calls = [c.id for c in self.calls.values() if not c.done]
        out: list[Event] = []
        self.writer.close_all(out, tools=False)
        if open_calls:
            raise ModelStreamError(f"model stream ended with tool calls still open: {', '.join(open_calls)}")
        return out

    def abort(self) -> list[Event]:
        """Error path: close what can be closed cleanly (tool calls with partial JSON stay open)."""
        out: list[Event] = []
        self.writer.close_all(out, tools=False)
        return out

    def decision(self) -> Decision:
        """The decision so far; the previous one is reused when nothing it holds changed
        (an argument fragment only moves the live tool call views)."""
        key = (len(self.text_parts), len(self.reasoning_parts), self.reasoning_blocks, len(self.tools.call_list),
               self.status, self.finish, self.usage)
        if self._decision is not None and key == self._decision_key:
            return self._decision
        self._decision_key = key
        self._decision = Decision(
            message_id=self.message_id,
            text_parts=self.text_parts,
            text_count=len(self.text_parts),
            reasoning_parts=self.reasoning_parts,
            reasoning_count=len(self.reasoning_parts),
            reasoning_blocks=self.reasoning_blocks,
            tool_calls=self.tools.call_list,
            components=self.tools.component_list,
            status_message=self.status.status_message,
            completion_status_message=self.status.completion_status_message,
            finish_reason=self.finish,
            usage=self.usage,
        )
        return self._decision


def _merge_usage(old: Usage | None, new: Usage) -> Usage:
    """Usage may arrive more than once; the last value wins per field."""
    if old is None:
        return new
    fields = {f: getattr(new, f) if getattr(new, f) is not None else getattr(old, f) for f in new.__struct_fields__}
    return Usage(**fields)


# --------------------------------------------------------------------------- the loop


async def run_decision_loop(
    llm: LLMClient,
    messages: Sequence[Any],
    *,
    components: Sequence[Component] = (),
    tools: Sequence[LLMTool | ServerTool] = (),
    force_tool_choice: str | None = None,
    custom_instructions: str | None = None,
    memories: Sequence[str] | None = None,
    context: Sequence[tuple[str, str]] | None = None,
    interactables: Sequence[Interactable] = (),
    message_id: str | None = None,
    id_factory: Callable[[], str] = new_id,
    strict: bool = True,
    parallel_tool_calls: bool = True,
    max_output_tokens: int | None = None,
    system_prompt: str | None = None,
    append_strings: bool = True,
    ui_spec: UISpecTool | None = None,
) -> AsyncGenerator[DecisionStreamItem, None]:
    """Run one model step; yield the decision so far and the AG-UI events of each model item.

    ``messages`` are AG-UI message Structs (the conversation; the system prompt is
    added here, or ``system_prompt`` replaces the built one). ``message_id`` is the
    assistant message id of this step (default: a fresh id). The last item's
    decision is complete (``finish_reason`` set when the model sent one).
    ``append_strings`` (default): component props (and interactable updates) grow
    their strings with ``append`` operations carrying only the new characters;
    ``False`` sends strict RFC 6902 (``replace`` of the whole string per fragment:
    quadratic bytes, see ``spec/components.md``). ``ui_spec`` offers the ``render_ui``
    tool (:mod:`agui_engine.genui.uispec`): its tree streams as the component ``generative-ui``.

    Raises, before the model is called: :class:`UsageError` for clashing tool
    names, :class:`~agui_engine.llm.UnknownToolChoiceError`. While streaming (after yielding the
    events that close the open text/reasoning): :class:`ModelStreamError`,
    :class:`ToolCallArgumentsError`, or whatever ``llm.complete`` raises.
    """
    specs = build_tools(components, tools, interactables=interactables, strict=strict, ui_spec=ui_spec)
    choice = resolve_tool_choice(force_tool_choice, specs).choice
    prompt = system_prompt
    if prompt is None:
        prompt = build_system_prompt(
            component_names=[c.name for c in components],
            # the schemas are in the update tools already; the prompt lists ids, props and state
            interactables=[
                {k: v for k, v in msgspec.to_builtins(i).items() if not k.endswith("Schema")} for i in interactables
            ],
            context=context,
            memories=memories,
            custom_instructions=custom_instructions,
        )
    prompt_messages = [SystemMessage(id=SYSTEM_MESSAGE_ID, content=prompt), *messages]
    step = _Step(specs, message_id or id_factory(), id_factory, append_strings)
    llm_tools = [spec.llm_tool for spec in specs.values()]

    span = model_span(llm)  # None unless the run is traced (loops/observe.py)
    failure: str | None = None
    try:
        stream = llm.complete(
            prompt_messages,
            llm_tools,
            choice,
            parallel_tool_calls=parallel_tool_calls,
            max_output_tokens=max_output_tokens,
        )
        # an async generator closes itself; any other iterator is wrapped so that aclose() reaches it
        async with aclosing(stream if hasattr(stream, "aclose") else _closable(stream)) as items:  # type: ignore[type-var]
            async for item in items:
                events = step.on_item(item)
                yield DecisionStreamItem(decision=step.decision(), events=tuple(events))
        yield DecisionStreamItem(decision=step.decision(), events=tuple(step.end()))
    except Exception as exc:
        failure = getattr(exc, "code", None) or type(exc).__name__
        # close the text and reasoning lanes for the consumer, then let the error through
        closing = step.abort()
        if closing:
            yield DecisionStreamItem(decision=step.decision(), events=tuple(closing))
        raise
    finally:
        if span is not None:
            _end_model_span(span, step, failure)


def _end_model_span(span: SpanHandle, step: _Step, failure: str | None) -> None:
    """The GenAI response attributes of one model call (model, token usage, finish reason), then its end."""
    usage = step.usage
    if usage is not None:
        if usage.provider:
            span.set("gen_ai.provider.name", usage.provider)
        if usage.model:
            span.set("gen_ai.response.model", usage.model)
        if usage.input_tokens is not None:
            span.set("gen_ai.usage.input_tokens", usage.input_tokens)
        if usage.output_tokens is not None:
            span.set("gen_ai.usage.output_tokens", usage.output_tokens)
    if step.finish is not None:
        span.set("gen_ai.response.finish_reasons", [step.finish])
    span.end(failure)


async def _closable(stream: AsyncIterator[LLMStreamItem]) -> AsyncIterator[LLMStreamItem]:
    """Wrap any async iterator so ``aclose()`` reaches the model's own ``aclose()``."""
    try:
        async for item in stream:
            yield item
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
