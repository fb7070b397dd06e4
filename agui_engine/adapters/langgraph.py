"""LangGraph behind the engine: a compiled graph as an AG-UI :class:`~agui_engine.protocol.agent.Agent`.

Theory of operation
-------------------
:class:`LangGraphAgent` wraps a compiled LangGraph graph (``StateGraph(...).compile()``,
a prebuilt ReAct agent, a graph with subgraphs). One call of :meth:`LangGraphAgent.run`
is one AG-UI run:

1. **Input** (before ``RUN_STARTED``; bad input raises
   :class:`~agui_engine.protocol.errors.RemoteInputError` naming the message path): the AG-UI
   messages become LangChain messages (:func:`to_langchain_messages`); ``state`` is
   merged into the graph input; the client's tools and context are put where the graph
   can read them (:data:`CONFIG_KEY` in ``config["configurable"]``, and the state keys
   ``tools`` / ``ag-ui`` when the graph's state declares them); ``threadId`` is the
   checkpointer's ``thread_id``. With a checkpointer, messages whose id the thread
   already holds are not sent again; ``RunAgentInput.resume`` becomes
   ``Command(resume={interrupt id: value})`` (ids checked against the thread's pending
   interrupts).
2. **Output**: the graph runs with ``astream(stream_mode=["messages", "values", "tasks",
   "updates", "custom"], subgraphs=True)`` -- LangGraph's own streams, not the
   callback-heavy ``astream_events`` -- and :class:`GraphStreamTranslator`, a per-run
   state machine with no IO, turns each stream item into AG-UI events (a mapping onto
   calls of one :class:`~agui_engine.protocol.writer.EventWriter`, one writer lane per
   model message: the writer keeps what is open and makes every START / END):

   =====================================  ================================================
   LangGraph stream item                  AG-UI events
   =====================================  ================================================
   ``tasks`` start / result of a node     ``STEP_STARTED`` / ``STEP_FINISHED`` (one step
                                          per node name while any task of it runs;
                                          subgraph nodes as ``parent/child``)
   ``messages`` ``AIMessageChunk``        text: ``TEXT_MESSAGE_START`` once, then
                                          ``TEXT_MESSAGE_CONTENT``; reasoning blocks
                                          (Anthropic ``thinking``, OpenAI ``reasoning``,
                                          ``reasoning_content``): ``REASONING_*``, the
                                          signature / encrypted content as
                                          ``REASONING_ENCRYPTED_VALUE``; every
                                          ``tool_call_chunks`` entry (keyed by index, or
                                          id) opens its call once id and name are known
                                          and streams its arguments -- name and arguments
                                          in one chunk, and the chunk that also carries
                                          ``finish_reason``, included; usage summed
   chunk with ``chunk_position="last"``   closes the model message (text, reasoning,
                                          every call of it: ``*_END``)
   ``messages`` whole ``AIMessage``       (a model that does not stream, or a node that
                                          returns one) the same events, at once
   ``messages`` ``ToolMessage``           ``TOOL_CALL_RESULT``
   ``messages`` Human/System message      ``TEXT_MESSAGE_*`` with its role
   made by a node
   ``values`` of the root graph           first ``STATE_SNAPSHOT`` (the state without
                                          ``messages`` and the keys this adapter fills),
                                          then ``STATE_DELTA`` (RFC 6902, between
                                          consecutive states) when it changed
   ``custom`` (``get_stream_writer()``)   ``CUSTOM`` (a ``{"name", "value"}`` dict as is,
                                          anything else as :data:`CUSTOM_EVENT_NAME`)
   ``adispatch_custom_event(name, data)`` ``CUSTOM {name, value}`` (routed into the custom
                                          stream by a callback, so it keeps its place)
   ``updates`` ``__interrupt__``          the run ends ``RUN_FINISHED`` with an interrupt
                                          outcome (one :class:`Interrupt` each)
   =====================================  ================================================

   At the end everything still open is closed; a tool call of a client tool
   (``RunAgentInput.tools``) with no result ends the run ``RUN_FINISHED`` with
   ``outcome {type: "success", pendingToolCallIds}``; ``MESSAGES_SNAPSHOT`` of the final
   ``messages`` is sent when the client's own list (its input plus what the events
   built) would differ from the graph's (a checkpointed history, ids the graph gave,
   messages a node removed or rewrote); token usage per (provider, model) goes on
   ``RUN_FINISHED`` / ``RUN_ERROR``.
3. **Errors**: a node that raises ends the run with ``RUN_ERROR`` (code
   ``graph_error``, the node and the exception's message; ``GraphRecursionError`` is
   ``step_limit_exceeded``) after everything open was closed, so all that was sent still
   verifies. Closing the event iterator closes LangGraph's stream, which cancels the
   running nodes (and their model HTTP streams) before ``aclose()`` returns.

Concurrency: the agent keeps no per-run state on itself (each run has its own
translator and config), so one instance serves concurrent runs; runs on the same
checkpointed thread at the same time are the graph's business (LangGraph does not lock a
thread).

langgraph and langchain-core are imported on first use; without them
:class:`LangGraphAgent` raises :class:`~agui_engine.protocol.errors.UsageError` naming the
``agui-engine[langgraph]`` extra. The conventions are in ``spec/langgraph.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

import jsonpatch
import msgspec

from agui_engine.protocol.capabilities import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    StateCapabilities,
    ToolsCapabilities,
)
from agui_engine.protocol.errors import (
    MAX_ERROR_MESSAGE_CHARS,
    AguiEngineError,
    RemoteInputError,
    UsageError,
)
from agui_engine.protocol.events import (
    PROTOCOL_VERSION,
    AssistantMessage,
    AudioPart,
    ContentPart,
    DataSource,
    DeveloperMessage,
    DocumentPart,
    Event,
    FileSource,
    FunctionCall,
    ImagePart,
    Interrupt,
    JsonPatchOperation,
    Message,
    MessagesSnapshotEvent,
    ReasoningMessage,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SystemMessage,
    TextMessageRole,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolCallResultEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
    VideoPart,
)
from agui_engine.protocol.ids import Ids, new_id
from agui_engine.protocol.verify import REASONING, TEXT, TOOL
from agui_engine.protocol.writer import EventWriter

__all__ = [
    "CANCELLED_RESUME_KEY",
    "CONFIG_KEY",
    "CUSTOM_EVENT_NAME",
    "GraphStreamTranslator",
    "IDENTITY_TYPE",
    "INTERRUPT_REASON",
    "LangGraphAgent",
    "STATE_CONTEXT_KEY",
    "STATE_TOOLS_KEY",
    "STREAM_MODES",
    "client_context",
    "client_tools",
    "to_agui_messages",
    "to_langchain_messages",
]

#: ``config["configurable"][CONFIG_KEY]`` holds what the client sent besides messages and
#: state: ``{"tools": [{name, description, parameters}], "context": [{description, value}],
#: "forwarded_props": ..., "thread_id": ..., "run_id": ...}``. A node reads it with
#: :func:`client_tools` / :func:`client_context` (or from its ``config`` argument).
CONFIG_KEY: Final = "agui"
#: A graph whose state declares this key receives the client's tools in it (the list of
#: ``{name, description, parameters}`` dicts ``bind_tools`` accepts) -- the convention of
#: ``ag-ui-langgraph``, so graphs written for it work unchanged.
STATE_TOOLS_KEY: Final = "tools"
#: A graph whose state declares this key receives ``{"tools": [...], "context": [...]}``.
STATE_CONTEXT_KEY: Final = "ag-ui"
#: The ``CUSTOM`` name of a stream-writer value that is not a ``{"name", "value"}`` dict.
CUSTOM_EVENT_NAME: Final = "langgraph.custom"
#: ``identity.type`` of a graph's capabilities.
IDENTITY_TYPE: Final = "langgraph"

#: ``Interrupt.reason`` of a LangGraph ``interrupt()`` whose value names no reason.
INTERRUPT_REASON: Final = "langgraph.interrupt"
#: The value a ``cancelled`` resume entry resumes its interrupt with:
#: ``{CANCELLED_RESUME_KEY: True, "interrupt_id": ..., "payload": ...}`` (the key
#: ``ag-ui-langgraph`` uses, so graphs written for it work unchanged).
CANCELLED_RESUME_KEY: Final = "__agui_cancelled__"
#: The LangGraph stream modes a run consumes (see the table above).
STREAM_MODES: Final = ("messages", "values", "tasks", "updates", "custom")

_EXTRA_HINT: Final = (
    "the LangGraph adapter needs langgraph and langchain-core: pip install 'agui-engine[langgraph]'"
)
#: State keys this adapter fills itself; they are not part of the client's state.
_OWN_STATE_KEYS: Final = frozenset({"messages", STATE_TOOLS_KEY, STATE_CONTEXT_KEY})


def _lc() -> Any:
    """The LangChain / LangGraph names the adapter uses, imported once, on first use.

    Raises :class:`UsageError` naming the ``agui-engine[langgraph]`` extra when missing."""
    global _LC
    if _LC is None:
        try:
            from langchain_core import messages as lc_messages
            from langchain_core.callbacks import BaseCallbackHandler
            from langgraph.config import get_stream_writer
            from langgraph.errors import GraphRecursionError
            from langgraph.types import Command
        except ImportError as exc:
            raise UsageError(f"{_EXTRA_HINT} ({exc})") from None

        class DispatchToStream(BaseCallbackHandler):
            """Puts ``adispatch_custom_event`` events into the run's custom stream, in place."""

            run_inline = True  # called in the dispatching node's context: its stream writer

            def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
                get_stream_writer()(_Dispatched(name, data))

        _LC = _Names(
            messages=lc_messages,
            command=Command,
            recursion_error=GraphRecursionError,
            dispatch_handler=DispatchToStream,
        )
    return _LC


class _Names:
    __slots__ = ("messages", "command", "recursion_error", "dispatch_handler", "chunk_class")

    def __init__(self, *, messages: Any, command: Any, recursion_error: Any, dispatch_handler: Any) -> None:
        self.messages = messages
        self.command = command
        self.recursion_error = recursion_error
        self.dispatch_handler = dispatch_handler
        self.chunk_class = messages.AIMessageChunk


_LC: Any = None


class _Dispatched:
    """A custom event dispatched with ``adispatch_custom_event``, in the custom stream."""

    __slots__ = ("name", "data")

    def __init__(self, name: str, data: Any) -> None:
        self.name = name
        self.data = data


# ----------------------------------------------------------------------------- helpers


def client_tools(config: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The client's tools of this run (``{name, description, parameters}`` dicts, ready for
    ``model.bind_tools``), from a node's ``config``; ``[]`` outside an AG-UI run."""
    agui = ((config or {}).get("configurable") or {}).get(CONFIG_KEY) or {}
    return list(agui.get("tools") or [])


def client_context(config: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The client's context entries (``{description, value}``) of this run, from ``config``."""
    agui = ((config or {}).get("configurable") or {}).get(CONFIG_KEY) or {}
    return list(agui.get("context") or [])


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: containers walked, pydantic models dumped, the rest ``str``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _jsonable(dump(mode="json"))
        except Exception:  # noqa: BLE001 - a model that cannot dump itself is shown as text
            return str(value)
    return str(value)


def _text_of(content: Any) -> str:
    """The text of a LangChain message content (a string, or the ``text`` blocks of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else b.get("text", "") if isinstance(b, dict) and b.get("type") == "text" else ""
            for b in content
        )
    return ""


def _cut(message: str) -> str:
    return message if len(message) <= MAX_ERROR_MESSAGE_CHARS else message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


# ----------------------------------------------------------------------------- AG-UI -> LangChain


def _content_block(part: ContentPart, path: str) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    kind = {ImagePart: "image", AudioPart: "audio", VideoPart: "video", DocumentPart: "file"}[type(part)]
    source = part.source
    if isinstance(source, DataSource):
        return {"type": kind, "base64": source.value, "mime_type": source.mime_type}
    if isinstance(source, UrlSource):
        block = {"type": kind, "url": source.value}
    elif isinstance(source, FileSource):
        block = {"type": kind, "file_id": source.value}
    else:  # pragma: no cover - the union is closed
        raise RemoteInputError(f"{path}.source: unknown source")
    if source.mime_type:
        block["mime_type"] = source.mime_type
    return block


def _reasoning_block(message: ReasoningMessage) -> dict[str, Any]:
    """A reasoning message as the content block its provider reads back: OpenAI Responses
    reasoning items carry ``rs_`` ids; anything else is Anthropic-shaped thinking."""
    if message.id.startswith("rs_"):
        block: dict[str, Any] = {"type": "reasoning", "id": message.id, "summary": []}
        if message.content:
            block["summary"] = [{"type": "summary_text", "text": message.content}]
        if message.encrypted_value:
            block["encrypted_content"] = message.encrypted_value
        return block
    if not message.content and message.encrypted_value:
        return {"type": "redacted_thinking", "data": message.encrypted_value}
    block = {"type": "thinking", "thinking": message.content}
    if message.encrypted_value:
        block["signature"] = message.encrypted_value
    return block


def to_langchain_messages(messages: Sequence[Message]) -> list[Any]:
    """AG-UI messages -> LangChain messages (ids kept).

    Text and content parts (images, audio, video, documents as LangChain's standard blocks),
    tool calls (``function.arguments`` parsed; text that is not a JSON object becomes an
    ``invalid_tool_calls`` entry rather than failing the thread forever), tool results
    (``error`` -> ``status="error"``), reasoning messages (folded, with their encrypted
    value, into the next assistant message's content as the block their provider reads:
    Anthropic ``thinking`` / ``redacted_thinking``, OpenAI ``reasoning`` for ``rs_`` ids),
    developer messages as system messages with LangChain's developer-role marker.
    Activity messages are display-only and skipped.

    Raises :class:`UsageError` without langchain-core."""
    lc = _lc().messages
    out: list[Any] = []
    reasoning: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if isinstance(message, ReasoningMessage):
            reasoning.append(_reasoning_block(message))
            continue
        if isinstance(message, AssistantMessage):
            calls: list[dict[str, Any]] = []
            invalid: list[dict[str, Any]] = []
            for call in message.tool_calls or ():
                text = call.function.arguments
                try:
                    args = msgspec.json.decode(text) if text.strip() else {}
                except msgspec.DecodeError:
                    args = None
                if isinstance(args, dict):
                    calls.append({"name": call.function.name, "args": args, "id": call.id, "type": "tool_call"})
                else:
                    invalid.append(
                        {"name": call.function.name, "args": text, "id": call.id, "error": "arguments are not a JSON object",
                         "type": "invalid_tool_call"}
                    )
            content: Any = message.content or ""
            if reasoning:
                content = [*reasoning, *([{"type": "text", "text": message.content}] if message.content else [])]
                reasoning = []
            out.append(lc.AIMessage(id=message.id, content=content, tool_calls=calls, invalid_tool_calls=invalid,
                                    name=message.name))
            continue
        reasoning = []  # reasoning belongs to the assistant message right after it
        if isinstance(message, UserMessage):
            content = message.content
            if not isinstance(content, str):
                content = [_content_block(p, f"{path}.content[{j}]") for j, p in enumerate(content)]
            out.append(lc.HumanMessage(id=message.id, content=content, name=message.name))
        elif isinstance(message, SystemMessage):
            out.append(lc.SystemMessage(id=message.id, content=message.content, name=message.name))
        elif isinstance(message, DeveloperMessage):
            out.append(lc.SystemMessage(id=message.id, content=message.content, name=message.name,
                                        additional_kwargs={"__openai_role__": "developer"}))
        elif isinstance(message, ToolMessage):
            content = message.content
            if not isinstance(content, str):
                content = [_content_block(p, f"{path}.content[{j}]") for j, p in enumerate(content)]
            out.append(lc.ToolMessage(id=message.id, content=content, tool_call_id=message.tool_call_id,
                                      status="error" if message.error else "success"))
    return out


# ----------------------------------------------------------------------------- LangChain -> AG-UI


def _agui_parts(content: Any) -> str | list[ContentPart]:
    if isinstance(content, str):
        return content
    parts: list[ContentPart] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            parts.append(TextPart(text=block))
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(text=str(block.get("text", ""))))
            elif kind in ("image", "audio", "video", "file"):
                cls: Any = {"image": ImagePart, "audio": AudioPart, "video": VideoPart, "file": DocumentPart}[kind]
                mime = block.get("mime_type")
                if block.get("base64"):
                    source: Any = DataSource(value=block["base64"], mime_type=mime or "application/octet-stream")
                elif block.get("url"):
                    source = UrlSource(value=block["url"], mime_type=mime)
                elif block.get("file_id"):
                    source = FileSource(value=block["file_id"], mime_type=mime)
                else:
                    continue
                parts.append(cls(source=source))
            elif kind == "image_url":
                url = block.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                if isinstance(url, str):
                    parts.append(ImagePart(source=UrlSource(value=url)))
    return parts


def _reasoning_of(message_id: str, content: Any) -> list[ReasoningMessage]:
    """The reasoning blocks of an AI message's content, as the messages the stream made."""
    out: list[ReasoningMessage] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "thinking":
            text, blob = str(block.get("thinking") or ""), block.get("signature")
        elif kind == "redacted_thinking":
            text, blob = "", block.get("data")
        elif kind == "reasoning":
            summary = block.get("summary")
            text = "".join(s.get("text", "") for s in summary if isinstance(s, dict)) if isinstance(summary, list) else str(
                block.get("reasoning") or "")
            blob = block.get("encrypted_content") or (block.get("extras") or {}).get("signature")
        else:
            continue
        rid = str(block["id"]) if kind == "reasoning" and block.get("id") else f"{message_id}.r{len(out)}"
        out.append(ReasoningMessage(id=rid, content=text, encrypted_value=blob if isinstance(blob, str) and blob else None))
    return out


def to_agui_messages(messages: Iterable[Any]) -> list[Message]:
    """LangChain messages -> AG-UI messages, as :meth:`LangGraphAgent.run` streams them:
    an AI message's reasoning blocks become reasoning messages before it, with the same
    ids; tool results keep their ids; message kinds AG-UI has no role for are skipped."""
    lc = _lc().messages
    out: list[Message] = []
    for m in messages:
        mid = str(m.id) if m.id is not None else new_id()
        if isinstance(m, lc.AIMessage):
            out.extend(_reasoning_of(mid, m.content))
            calls = [
                ToolCall(id=str(c.get("id") or ""), function=FunctionCall(name=c["name"], arguments=msgspec.json.encode(
                    _jsonable(c.get("args") or {})).decode()))
                for c in m.tool_calls
            ] + [
                ToolCall(id=str(c.get("id") or ""), function=FunctionCall(name=str(c.get("name") or ""), arguments=str(
                    c.get("args") or "")))
                for c in m.invalid_tool_calls
            ]
            out.append(AssistantMessage(id=mid, content=_text_of(m.content) or None, tool_calls=calls or None,
                                        name=m.name))
        elif isinstance(m, lc.HumanMessage):
            out.append(UserMessage(id=mid, content=_agui_parts(m.content), name=m.name))
        elif isinstance(m, lc.SystemMessage):
            if m.additional_kwargs.get("__openai_role__") == "developer":
                out.append(DeveloperMessage(id=mid, content=_text_of(m.content), name=m.name))
            else:
                out.append(SystemMessage(id=mid, content=_text_of(m.content), name=m.name))
        elif isinstance(m, lc.ToolMessage):
            content = m.content if isinstance(m.content, str) else msgspec.json.encode(_jsonable(m.content)).decode()
            out.append(ToolMessage(id=mid, content=content, tool_call_id=m.tool_call_id,
                                   error=content if m.status == "error" else None))
    return out


# ----------------------------------------------------------------------------- the translator


#: The writer lane of the user / system messages a node makes (each opened and closed at once).
_NODE_LANE: Final = ("node messages",)


class _Call:
    """A tool call the model streams: its id and name as they come, and the argument fragments
    that came before both did. Whether it is open or ended is the run's writer's to say."""

    __slots__ = ("id", "name", "pending")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.pending: list[str] = []  # argument fragments before START could be sent


class _Message:
    """One model message being streamed (all the chunks of one model call)."""

    __slots__ = ("id", "task", "texts", "reasonings", "reasoning_block", "calls", "last_call")

    def __init__(self, id: str, task: str) -> None:
        self.id = id  # also its lane of the run's EventWriter: one text or reasoning open at a time
        self.task = task
        self.texts = 0
        self.reasonings = 0
        self.reasoning_block: Any = None
        self.calls: dict[Any, _Call] = {}
        self.last_call: _Call | None = None


class GraphStreamTranslator:
    """LangGraph stream items (``astream(..., subgraphs=True)``) -> AG-UI events, for one run.

    :meth:`feed` takes one ``(namespace, mode, payload)`` item and returns its events;
    :meth:`finish` closes what is open and returns the closing events (it does not make
    RUN_FINISHED: :meth:`outcome` and :attr:`usage` say what it carries). No IO; raises
    nothing for odd payloads (they are skipped).
    """

    def __init__(self, *, client_tool_names: Iterable[str] = (), known_ids: Iterable[str] = (),
                 id_factory: Callable[[], str] = new_id) -> None:
        names = _lc()
        self._lc = names.messages
        self._chunk = names.chunk_class
        self._new_id = id_factory
        self._writer = EventWriter(Ids(id_factory))
        self._client_tools = frozenset(client_tool_names)
        self._open: dict[str, _Message] = {}  # message id -> open message
        self._by_task: dict[str, list[_Message]] = {}
        self._closed: set[str] = set()
        self._steps: dict[str, int] = {}
        self._task_steps: dict[str, str] = {}
        self._state: Any = None
        self._state_sent = False
        self.values: Any = None
        self.interrupts: list[Any] = []
        self.usage: dict[tuple[str | None, str | None], TokenUsage] = {}
        self.calls: dict[str, str] = {}  # tool call id -> name, in stream order
        self.results: set[str] = set()
        #: message ids the client's list gains from the events, in order
        self.message_ids: list[str] = list(known_ids)
        self._seen_ids = set(self.message_ids)
        self.failed_node: str | None = None

    # -- items

    def feed(self, item: Any) -> list[Event]:
        ns, mode, payload = item
        out: list[Event] = []
        if mode == "messages":
            message, meta = payload
            self._on_message(message, meta, out)
        elif mode == "tasks":
            self._on_task(ns, payload, out)
        elif mode == "values":
            if not ns:
                self._on_values(payload, out)
        elif mode == "custom":
            if isinstance(payload, _Dispatched):
                out.append(_custom(payload.name, payload.data))
            elif isinstance(payload, dict) and isinstance(payload.get("name"), str) and "value" in payload and len(payload) == 2:
                out.append(_custom(payload["name"], payload["value"]))
            else:
                out.append(_custom(CUSTOM_EVENT_NAME, payload))
        elif mode == "updates":
            if not ns and isinstance(payload, dict) and "__interrupt__" in payload:
                self.interrupts.extend(payload["__interrupt__"])
        return out

    def _on_task(self, ns: tuple[str, ...], task: Any, out: list[Event]) -> None:
        if not isinstance(task, dict) or "name" not in task:
            return
        name = "/".join([*(part.split(":", 1)[0] for part in ns), str(task["name"])])
        task_id = str(task.get("id"))
        if "input" in task:  # a task starts
            self._task_steps[task_id] = name
            count = self._steps.get(name, 0)
            self._steps[name] = count + 1
            if count == 0:
                out.append(StepStartedEvent(step_name=name))
            return
        if task.get("error") is not None:
            self.failed_node = name
        if self._task_steps.pop(task_id, None) is None:
            return
        # the task's model messages are complete when it returns
        checkpoint_prefix = f"{task['name']}:{task_id}"
        for ns_key in [k for k in self._by_task if k.endswith(checkpoint_prefix)]:
            for message in list(self._by_task.get(ns_key, ())):
                self._close(message, out)
        count = self._steps.get(name, 0) - 1
        if count <= 0:
            self._steps.pop(name, None)
            out.append(StepFinishedEvent(step_name=name))
        else:
            self._steps[name] = count

    def _on_values(self, values: Any, out: list[Event]) -> None:
        self.values = values
        if not isinstance(values, Mapping):
            return
        state = {k: _jsonable(v) for k, v in values.items() if k not in _OWN_STATE_KEYS}
        if not self._state_sent:
            self._state_sent = True
            out.append(StateSnapshotEvent(snapshot=state))
        elif state != self._state:
            ops = jsonpatch.make_patch(self._state, state).patch
            if ops:
                out.append(StateDeltaEvent(delta=msgspec.convert(ops, list[JsonPatchOperation])))
        self._state = state

    # -- messages

    def _on_message(self, m: Any, meta: Any, out: list[Event]) -> None:
        task = str(meta.get("langgraph_checkpoint_ns", "")) if isinstance(meta, Mapping) else ""
        if isinstance(m, self._chunk):
            mid = str(m.id) if m.id is not None else ""
            message = self._open.get(mid)
            last = getattr(m, "chunk_position", None) == "last"
            if message is None:
                if last and self._by_task.get(task):
                    message = self._by_task[task][-1]  # the closing chunk carries the run's own id
                elif mid in self._closed or not mid:
                    mid = f"{mid or 'msg'}.{self._new_id()}"
                    message = self._start(mid, task)
                else:
                    message = self._start(mid, task)
            self._on_content(message, m, meta, out)
            if last:
                self._close(message, out)
            return
        lc = self._lc
        if isinstance(m, lc.AIMessage):
            mid = str(m.id) if m.id is not None else self._new_id()
            if mid in self._open or mid in self._closed:
                return
            message = self._start(mid, task)
            self._on_content(message, m, meta, out)
            self._close(message, out)
        elif isinstance(m, lc.ToolMessage):
            self._on_tool_result(m, out)
        elif isinstance(m, (lc.HumanMessage, lc.SystemMessage)):
            text = _text_of(m.content)
            mid = str(m.id) if m.id is not None else self._new_id()
            if not text or mid in self._seen_ids:
                return
            role: TextMessageRole = "user" if isinstance(m, lc.HumanMessage) else "system"
            self._writer.text(text, out, lane=_NODE_LANE, message_id=mid, role=role)
            self._writer.close_lane(out, _NODE_LANE)
            self._saw(mid)

    def _start(self, mid: str, task: str) -> _Message:
        message = _Message(mid, task)
        self._open[mid] = message
        self._by_task.setdefault(task, []).append(message)
        return message

    def _saw(self, mid: str) -> None:
        if mid not in self._seen_ids:
            self._seen_ids.add(mid)
            self.message_ids.append(mid)

    def _on_content(self, message: _Message, m: Any, meta: Any, out: list[Event]) -> None:
        content = m.content
        if content:
            if isinstance(content, str):
                self._text(message, content, out)
            else:
                for block in content:
                    if isinstance(block, str):
                        self._text(message, block, out)
                    elif isinstance(block, dict):
                        self._block(message, block, out)
        reasoning = m.additional_kwargs.get("reasoning_content") if m.additional_kwargs else None
        if isinstance(reasoning, str) and reasoning:
            self._reasoning(message, "reasoning_content", reasoning, None, out)
        if isinstance(m, self._chunk):
            for tcc in m.tool_call_chunks:
                self._tool_chunk(message, tcc, out)
        else:
            for call in m.tool_calls:
                args = msgspec.json.encode(_jsonable(call.get("args") or {})).decode()
                self._tool_chunk(message, {"id": call.get("id"), "name": call.get("name"), "args": args, "index": None}, out)
            for call in m.invalid_tool_calls:
                self._tool_chunk(message, {"id": call.get("id"), "name": call.get("name"), "args": call.get("args") or "",
                                           "index": None}, out)
        usage = m.usage_metadata
        if usage:
            provider = meta.get("ls_provider") if isinstance(meta, Mapping) else None
            model = (meta.get("ls_model_name") if isinstance(meta, Mapping) else None) or (
                m.response_metadata.get("model_name") if m.response_metadata else None)
            self._add_usage(provider, model, usage)

    def _block(self, message: _Message, block: dict[str, Any], out: list[Event]) -> None:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                self._text(message, text, out)
        elif kind == "thinking":
            key = ("thinking", block.get("index"))
            text = block.get("thinking")
            self._reasoning(message, key, text if isinstance(text, str) else "", block.get("signature"), out)
        elif kind == "redacted_thinking":
            self._reasoning(message, ("redacted", block.get("index")), "", block.get("data"), out, new=True)
        elif kind == "reasoning":
            summary = block.get("summary")
            if isinstance(summary, list):
                text = "".join(s.get("text", "") for s in summary if isinstance(s, dict))
            else:
                reasoning = block.get("reasoning")
                text = reasoning if isinstance(reasoning, str) else ""
            blob = block.get("encrypted_content") or (block.get("extras") or {}).get("signature")
            self._reasoning(message, ("reasoning", block.get("id") or block.get("index")), text, blob, out,
                            rid=block.get("id"))

    def _text(self, message: _Message, text: str, out: list[Event]) -> None:
        opened = self._writer.current(message.id)
        if opened is not None and opened[0] is TEXT:
            self._writer.text(text, out, lane=message.id)
            return
        tid = message.id if message.texts == 0 else f"{message.id}.{message.texts}"
        message.texts += 1
        self._writer.text(text, out, lane=message.id, message_id=tid)  # closes an open reasoning first
        self._saw(tid)

    def _reasoning(self, message: _Message, key: Any, text: str, blob: Any, out: list[Event], *,
                   new: bool = False, rid: Any = None) -> None:
        if not text and not blob:
            return
        opened = self._writer.current(message.id)
        if opened is None or opened[0] is not REASONING or message.reasoning_block != key or new:
            # another provider block: a reasoning message of its own (the open one is closed)
            reasoning_id = str(rid) if rid else f"{message.id}.r{message.reasonings}"
            message.reasonings += 1
            message.reasoning_block = key
            self._writer.close_lane(out, message.id)
            self._writer.reasoning(text, out, lane=message.id, message_id=reasoning_id)
            self._saw(reasoning_id)
        elif text:
            self._writer.reasoning(text, out, lane=message.id)
        if isinstance(blob, str) and blob:
            # an opaque value ends its provider block; the next block is a message of its own
            self._writer.seal_reasoning(blob, out, lane=message.id)

    def _tool_chunk(self, message: _Message, tcc: Any, out: list[Event]) -> None:
        index, call_id, name, args = tcc.get("index"), tcc.get("id"), tcc.get("name"), tcc.get("args")
        key = index if index is not None else call_id
        call = message.calls.get(key) if key is not None else message.last_call
        if call is None:
            call = _Call()
            message.calls[key if key is not None else len(message.calls)] = call
        message.last_call = call
        if call_id and call.id is None:
            call.id = str(call_id)
        if name and call.name is None:
            call.name = str(name)
        if not self._started(call):
            if isinstance(args, str) and args:
                call.pending.append(args)
            if call.id is not None and call.name is not None:
                self._start_call(message, call, out)
        elif isinstance(args, str) and args and call.id is not None and self._writer.is_open(TOOL, call.id):
            out.append(self._writer.tool_args(call.id, args))

    def _started(self, call: _Call) -> bool:
        """Whether the writer opened ``call`` (it may have ended since)."""
        return call.id is not None and (self._writer.is_open(TOOL, call.id) or self._writer.tool_ended(call.id))

    def _start_call(self, message: _Message, call: _Call, out: list[Event]) -> None:
        self._writer.close_lane(out, message.id)  # the message's text ends where its calls begin
        assert call.id is not None and call.name is not None
        out.append(self._writer.open_tool(call.name, tool_call_id=call.id, parent_message_id=message.id,
                                          lane=message.id))
        self._saw(message.id)
        self.calls[call.id] = call.name
        if call.pending:
            out.append(self._writer.tool_args(call.id, "".join(call.pending)))
            call.pending = []

    def _close(self, message: _Message, out: list[Event]) -> None:
        if self._open.pop(message.id, None) is None:
            return
        self._closed.add(message.id)
        siblings = self._by_task.get(message.task)
        if siblings is not None:
            siblings.remove(message)
            if not siblings:
                del self._by_task[message.task]
        self._writer.close_lane(out, message.id)
        for call in message.calls.values():
            if not self._started(call):  # a call whose id or name never came: finish it as well as we can
                call.id = call.id or f"call_{self._new_id()}"
                call.name = call.name or "unknown"
                self._start_call(message, call, out)
            if call.id is not None and self._writer.is_open(TOOL, call.id):
                out.append(self._writer.end_tool(call.id))

    def _on_tool_result(self, m: Any, out: list[Event]) -> None:
        call_id = str(m.tool_call_id)
        if call_id not in self.calls and call_id not in self._seen_ids:
            # a call this stream never showed (made outside a model stream): show it first
            call = self._find_call(call_id)
            name = str(call.get("name") if call else (m.name or "unknown"))
            out.append(self._writer.open_tool(name, tool_call_id=call_id))
            out.append(self._writer.tool_args(call_id, msgspec.json.encode(
                _jsonable(call.get("args") if call else {})).decode()))
            out.append(self._writer.end_tool(call_id))
            self.calls[call_id] = name
        for message in list(self._open.values()):  # a result means its call's message is complete
            if any(c.id == call_id for c in message.calls.values()):
                self._close(message, out)
        mid = str(m.id) if m.id is not None else self._new_id()
        content = m.content if isinstance(m.content, str) else msgspec.json.encode(_jsonable(m.content)).decode()
        out.append(ToolCallResultEvent(message_id=mid, tool_call_id=call_id, content=content, role="tool"))
        self.results.add(call_id)
        self._saw(mid)

    def _find_call(self, call_id: str) -> dict[str, Any] | None:
        messages = self.values.get("messages") if isinstance(self.values, Mapping) else None
        for message in reversed(messages or ()):
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("id") == call_id:
                    return dict(call)
        return None

    def _add_usage(self, provider: Any, model: Any, usage: Mapping[str, Any]) -> None:
        key = (provider if isinstance(provider, str) else None, model if isinstance(model, str) else None)
        old = self.usage.get(key)
        details_in = usage.get("input_token_details") or {}
        details_out = usage.get("output_token_details") or {}

        def add(a: int | None, b: Any) -> int | None:
            if not isinstance(b, int) or isinstance(b, bool):
                return a
            return b if a is None else a + b

        self.usage[key] = TokenUsage(
            provider=key[0],
            model=key[1],
            input_tokens=add(old.input_tokens if old else None, usage.get("input_tokens")),
            output_tokens=add(old.output_tokens if old else None, usage.get("output_tokens")),
            total_tokens=add(old.total_tokens if old else None, usage.get("total_tokens")),
            reasoning_tokens=add(old.reasoning_tokens if old else None, details_out.get("reasoning")),
            cached_input_tokens=add(old.cached_input_tokens if old else None, details_in.get("cache_read")),
            cache_write_input_tokens=add(old.cache_write_input_tokens if old else None, details_in.get("cache_creation")),
        )

    # -- the end

    def finish(self) -> list[Event]:
        """Close every open message, tool call and step (in that order)."""
        out: list[Event] = []
        for message in list(self._open.values()):
            self._close(message, out)
        for name in list(self._steps):
            out.append(StepFinishedEvent(step_name=name))
        self._steps.clear()
        self._task_steps.clear()
        return out

    def outcome(self) -> RunFinishedOutcome | None:
        """The RUN_FINISHED outcome: the interrupts, else the pending client tool calls."""
        if self.interrupts:
            return RunFinishedInterruptOutcome(interrupts=[_interrupt(i) for i in self.interrupts])
        pending = [cid for cid, name in self.calls.items() if name in self._client_tools and cid not in self.results]
        return RunFinishedSuccessOutcome(pending_tool_call_ids=pending) if pending else None

    def snapshot(self) -> MessagesSnapshotEvent | None:
        """MESSAGES_SNAPSHOT of the final ``messages`` when the client's list would differ."""
        messages = self.values.get("messages") if isinstance(self.values, Mapping) else None
        if not isinstance(messages, list):
            return None
        converted = to_agui_messages(messages)
        if [m.id for m in converted] == self.message_ids:
            return None
        return MessagesSnapshotEvent(messages=converted)


def _custom(name: str, value: Any) -> Event:
    from agui_engine.protocol.events import CustomEvent

    return CustomEvent(name=name, value=_jsonable(value))


def _interrupt(item: Any) -> Interrupt:
    value = getattr(item, "value", item)
    iid = str(getattr(item, "id", None) or new_id())
    reason, message, tool_call_id, schema = INTERRUPT_REASON, None, None, None
    if isinstance(value, str):
        message = value
    elif isinstance(value, Mapping):
        reason = value["reason"] if isinstance(value.get("reason"), str) else reason
        for key in ("message", "question"):
            if isinstance(value.get(key), str):
                message = value[key]
                break
        for key in ("toolCallId", "tool_call_id"):
            if isinstance(value.get(key), str):
                tool_call_id = value[key]
        for key in ("responseSchema", "response_schema"):
            if isinstance(value.get(key), dict):
                schema = value[key]
    return Interrupt(id=iid, reason=reason, message=message, tool_call_id=tool_call_id, response_schema=schema,
                     metadata={"value": _jsonable(value)})


# ----------------------------------------------------------------------------- the agent


class LangGraphAgent:
    """A compiled LangGraph graph as an AG-UI :class:`~agui_engine.protocol.agent.Agent` (see the module
    docstring for the mapping and ``spec/langgraph.md`` for the conventions).

    ``config`` is the base ``RunnableConfig`` of every run (copied per run; its
    ``configurable`` gains ``thread_id`` and :data:`CONFIG_KEY`; a ``recursion_limit``
    there bounds the graph's supersteps). ``id_factory`` makes the ids the graph leaves
    open. Raises :class:`UsageError` when langgraph / langchain-core are missing or
    ``graph`` is not a compiled graph.
    """

    def __init__(self, graph: Any, *, config: Mapping[str, Any] | None = None,
                 id_factory: Callable[[], str] = new_id) -> None:
        _lc()
        if not callable(getattr(graph, "astream", None)) or not callable(getattr(graph, "aget_state", None)):
            raise UsageError(f"LangGraphAgent needs a compiled LangGraph graph (.compile()), got {type(graph).__name__}")
        self.graph = graph
        self.config = dict(config or {})
        self.id_factory = id_factory
        channels = getattr(graph, "channels", None) or {}
        self._state_keys = frozenset(k for k in (STATE_TOOLS_KEY, STATE_CONTEXT_KEY) if k in channels)

    def _config(self, input: RunAgentInput, tools: list[dict[str, Any]], context: list[dict[str, str]]) -> dict[str, Any]:
        config = dict(self.config)
        configurable = dict(config.get("configurable") or {})
        configurable["thread_id"] = input.thread_id
        configurable[CONFIG_KEY] = {
            "tools": tools,
            "context": context,
            "forwarded_props": input.forwarded_props,
            "thread_id": input.thread_id,
            "run_id": input.run_id,
        }
        config["configurable"] = configurable
        callbacks = config.get("callbacks")
        handler = _lc().dispatch_handler()
        if callbacks is None:
            config["callbacks"] = [handler]
        elif isinstance(callbacks, list):
            config["callbacks"] = [*callbacks, handler]
        else:  # a callback manager: a copy of it with our handler added
            manager = callbacks.copy()
            manager.add_handler(handler, inherit=True)
            config["callbacks"] = manager
        return config

    async def capabilities(self) -> AgentCapabilities:
        """What the adapter gives this graph: ``STATE_SNAPSHOT`` / ``STATE_DELTA`` of its
        state (``persistentState`` and the interrupt protocol -- ``interrupt()`` ending the
        run with an interrupt outcome, ``resume`` continuing it -- with a checkpointer, which
        both need; ``memory`` with a store), client tools readable by the graph when its
        state declares ``tools`` or ``ag-ui`` (else not declared: the config carries them,
        whether the graph reads them is its code's business). ``identity``: the graph's
        name, ``type`` ``"langgraph"``. Raises nothing."""
        checkpointed = getattr(self.graph, "checkpointer", None) not in (None, False)
        name = getattr(self.graph, "name", None)
        return AgentCapabilities(
            identity=IdentityCapabilities(name=name if isinstance(name, str) else None, type=IDENTITY_TYPE),
            tools=ToolsCapabilities(client_provided=True) if self._state_keys else None,
            state=StateCapabilities(snapshots=True, deltas=True, persistent_state=checkpointed,
                                    memory=getattr(self.graph, "store", None) is not None),
            human_in_the_loop=HumanInTheLoopCapabilities(supported=checkpointed, interrupts=checkpointed),
        )

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream one run. Raises :class:`RemoteInputError` before ``RUN_STARTED`` for input
        the graph cannot take (a resume entry naming no pending interrupt, a state that is
        not an object); after it every failure is a ``RUN_ERROR`` event."""
        names = _lc()
        messages = to_langchain_messages(input.messages)
        if input.state is not None and not isinstance(input.state, Mapping):
            raise RemoteInputError("state: the graph state is an object; got " + type(input.state).__name__)
        tools = [{"name": t.name, "description": t.description,
                  "parameters": t.parameters if t.parameters is not None else {"type": "object", "properties": {}}}
                 for t in input.tools]
        context = [{"description": c.description, "value": c.value} for c in input.context]
        config = self._config(input, tools, context)
        checkpointed = getattr(self.graph, "checkpointer", None) not in (None, False)
        known: set[str] = set()
        pending_interrupts: dict[str, Any] = {}
        if checkpointed:
            snapshot = await self.graph.aget_state(config)
            for m in (snapshot.values or {}).get("messages", ()) if isinstance(snapshot.values, Mapping) else ():
                if m.id is not None:
                    known.add(str(m.id))
            for task in snapshot.tasks or ():
                for intr in getattr(task, "interrupts", ()) or ():
                    pending_interrupts[str(intr.id)] = intr
        new_messages = [m for m in messages if m.id is None or str(m.id) not in known]
        graph_input: Any
        if input.resume:
            graph_input = self._resume(input.resume, pending_interrupts, new_messages, checkpointed)
        else:
            state: dict[str, Any] = {k: v for k, v in (input.state or {}).items() if k not in _OWN_STATE_KEYS}
            state["messages"] = new_messages
            if STATE_TOOLS_KEY in self._state_keys:
                state[STATE_TOOLS_KEY] = tools
            if STATE_CONTEXT_KEY in self._state_keys:
                state[STATE_CONTEXT_KEY] = {"tools": tools, "context": context}
            graph_input = state

        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id, parent_run_id=input.parent_run_id,
                              protocol_version=PROTOCOL_VERSION)
        translator = GraphStreamTranslator(client_tool_names=[t.name for t in input.tools],
                                           known_ids=[m.id for m in input.messages], id_factory=self.id_factory)
        try:
            stream = self.graph.astream(graph_input, config, stream_mode=list(STREAM_MODES), subgraphs=True)
            async with aclosing(stream) as items:
                async for item in items:
                    for event in translator.feed(item):
                        yield event
        except Exception as exc:  # noqa: BLE001 - a run ends with RUN_ERROR, never a traceback
            for event in translator.finish():
                yield event
            usage = list(translator.usage.values()) or None
            if isinstance(exc, AguiEngineError):
                yield RunErrorEvent(message=exc.message, code=exc.code, usage=usage)
            elif isinstance(exc, names.recursion_error):
                yield RunErrorEvent(message=_cut(f"the graph hit its recursion limit: {exc}"), code="step_limit_exceeded",
                                    usage=usage)
            else:
                where = f"node {translator.failed_node!r}" if translator.failed_node else "the graph"
                yield RunErrorEvent(message=_cut(f"{where} raised {type(exc).__name__}: {exc}"), code="graph_error",
                                    usage=usage)
            return
        for event in translator.finish():
            yield event
        snapshot_event = translator.snapshot()
        if snapshot_event is not None:
            yield snapshot_event
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id, outcome=translator.outcome(),
                               usage=list(translator.usage.values()) or None)

    def _resume(self, entries: Sequence[ResumeEntry], pending: Mapping[str, Any], new_messages: list[Any],
                checkpointed: bool) -> Any:
        if not checkpointed:
            raise RemoteInputError("resume: this graph has no checkpointer, so it has no interrupt to resume")
        values: dict[str, Any] = {}
        for i, entry in enumerate(entries):
            if entry.interrupt_id not in pending:
                known = ", ".join(map(repr, pending)) or "none"
                raise RemoteInputError(f"resume[{i}].interruptId: {entry.interrupt_id!r} is not a pending interrupt of "
                                       f"this thread (pending: {known})")
            if entry.status == "resolved":
                values[entry.interrupt_id] = entry.payload
            else:
                values[entry.interrupt_id] = {CANCELLED_RESUME_KEY: True, "interrupt_id": entry.interrupt_id,
                                              "payload": entry.payload}
        command = _lc().command
        return command(resume=values, update={"messages": new_messages}) if new_messages else command(resume=values)

