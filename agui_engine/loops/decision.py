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
(:class:`~agui_engine.loops.tool_calls.WireWriter`; the fragment is never scanned a second time):
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
:class:`~agui_engine.loops.tool_calls.ToolCallArgumentsError`, naming the call) for bad arguments. Closing the
iterator (``aclose()``) closes the model stream at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final

import msgspec

from ..genui.components import (
    Component,
    ServerTool,
    StatusMessages,
)
from ..genui.interactables import Interactable
from ..genui.uispec import UISpecTool
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
from ..protocol.errors import UpstreamError
from ..protocol.events import (
    Event,
    ReasoningMessage,
    SystemMessage,
)
from ..protocol.ids import Ids, new_id
from ..protocol.verify import TEXT, TOOL
from ..protocol.writer import EventWriter
from .observe import SpanHandle, model_span
from .prompts import SYSTEM_MESSAGE_ID, build_system_prompt
from .tool_calls import ToolCallRequest, ToolCallTransformer, ToolSpec, build_tools

__all__ = [
    "Decision",
    "DecisionStreamItem",
    "MAX_TOOL_CALLS_PER_STEP",
    "ModelStreamError",
    "ReasoningBlock",
    "run_decision_loop",
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
    :class:`~agui_engine.loops.tool_calls.ToolCallArgumentsError`, or whatever ``llm.complete`` raises.
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
