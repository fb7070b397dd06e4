"""CrewAI behind the engine: a ``Crew`` or a ``Flow`` as an AG-UI :class:`~agui_engine.protocol.agent.Agent`.

Theory of operation
-------------------
CrewAI runs synchronously (``kickoff``) and reports what happens on a process-global
event bus. :class:`CrewAIAgent` runs one kickoff per AG-UI run on a thread of its own
and listens through a **stream sink scoped to that run**: CrewAI publishes every event
to the sinks registered in the *context* of the code that emits it
(``crewai.events.stream_context``, a ``ContextVar``), synchronously, before any bus
handler runs. The kickoff runs inside a copy of the context holding this run's sink,
so two concurrent runs never see each other's events, and the events arrive in the
order they were emitted (no bus thread pool, no ``flush``).

Each CrewAI event is handed to the asyncio loop (``call_soon_threadsafe``) and
:class:`CrewEventTranslator`, a per-run state machine with no IO, turns it into AG-UI
events (the table is :data:`CrewEventTranslator.HANDLERS`):

=================================================  ==============================================
CrewAI event (``type``)                            AG-UI events
=================================================  ==============================================
``crew_kickoff_started`` / ``_completed``          ``STEP_STARTED`` / ``STEP_FINISHED``
                                                   ``crew:<name>``
``task_started`` / ``task_completed``              ``STEP_*`` ``task:<name>`` (nested)
``agent_execution_started`` / ``_completed``       ``STEP_*`` ``agent:<role>`` (nested)
``method_execution_started`` / ``_finished``       ``STEP_*`` ``method:<name>``; on finish the
(Flow)                                             flow state: ``STATE_SNAPSHOT`` the first
                                                   time, then ``STATE_DELTA`` (RFC 6902)
``llm_call_started`` / ``llm_call_completed``      one assistant message per LLM call: opened
                                                   by its first text chunk, closed at the end
                                                   of the call (or by the next other event)
``llm_stream_chunk`` text                          ``TEXT_MESSAGE_START`` once, then
                                                   ``TEXT_MESSAGE_CONTENT`` per chunk
``llm_stream_chunk`` with ``tool_call``            ``TOOL_CALL_START`` (once id and name are
(native function calling)                          known) and ``TOOL_CALL_ARGS`` per fragment,
                                                   keyed by the call's index: the chunk's new
                                                   part only (crewai's ``arguments`` may be
                                                   cumulative: :func:`_new_arguments`)
``llm_thinking_chunk``                             ``REASONING_START`` / ``REASONING_MESSAGE_*``
``tool_usage_started``                             the tool call, whole: ``TOOL_CALL_START``,
                                                   ``TOOL_CALL_ARGS`` (its arguments as JSON),
                                                   ``TOOL_CALL_END`` -- unless the model
                                                   already streamed that call
``tool_usage_finished`` / ``tool_usage_error``     ``TOOL_CALL_RESULT`` (an error is a result
                                                   too: ``Error: <message>``)
``*_failed`` / ``agent_execution_error``           closes its step; the run ends ``RUN_ERROR``
                                                   with the reason (no traceback)
``method_execution_paused`` (``@human_feedback``)  the flow state, ``STEP_FINISHED``
``TEXT_MESSAGE_CHUNK`` / ``TOOL_CALL_CHUNK`` /     what ``ag-ui-crewai``'s helpers publish (a
``STATE_SNAPSHOT`` / ``TOOL_CALL_RESULT`` /        flow written for it): re-issued in this run
``CUSTOM``
kickoff returns ``HumanFeedbackPending``           ``RUN_FINISHED`` with an interrupt outcome
                                                   (one :class:`Interrupt`); the next run's
                                                   ``resume`` resumes the flow
kickoff returns                                    the output as the closing assistant
                                                   message, then ``RUN_FINISHED``
=================================================  ==============================================

Everything still open at the end (a message, a tool call, steps) is closed in order,
so the stream always verifies.

**Input** (:func:`kickoff_inputs`): ``message`` (the latest user message's text),
``history`` (the conversation as ``role: text`` lines), ``context`` (the client's
context entries as ``description: value`` lines), ``tools`` (the client's tools as a
JSON list of ``{name, description, parameters}``), the run's ``state`` (when it is an
object: its keys), and ``forwardedProps["inputs"]`` (an object: its keys, last). A
crew's task descriptions interpolate them (``"Answer: {message}"``); a flow gets them as
its initial state (:func:`flow_inputs`: a structured state only the keys it declares and
accepts, plus ``messages`` / ``copilotkit`` in ``ag-ui-crewai``'s shape when it declares them).

**Human feedback** (``spec/crewai.md``): inside a run, a ``@human_feedback`` method pauses
the flow (the adapter's default provider raises ``HumanFeedbackPending``; CrewAI keeps the
paused flow in the agent's in-memory persistence); the run ends with an interrupt outcome,
and a run whose ``resume`` answers it rebuilds the flow (``from_pending``) and resumes it
with the answer as feedback. ``Task(human_input=True)`` cannot pause a crew (CrewAI 1.15
has no resume point inside a task): such a task fails the run, saying so.

**Targets**: a ``Crew`` (copied for every run: ``crew.copy()``, so runs share no
agent or task state), a ``Flow`` *class* (instantiated per run), or a callable
``factory(input) -> Crew | Flow`` (a factory may attach :func:`client_tools` to its
agents, so a crew can call the client's tools and components).

**Stopping.** Closing the event iterator (the client went away, the run was
cancelled) marks the run closed. CrewAI cannot be interrupted from outside a thread,
so the sink raises :class:`KickoffCancelled` inside the kickoff at the next event it
emits (the next LLM chunk, tool use, task boundary): the kickoff unwinds there, and
nothing it does afterwards reaches the finished run. A blocking LLM request or tool
call in progress finishes first (it emits nothing while it blocks). The thread is a
daemon: a kickoff stuck forever in a tool does not keep the process alive.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, ClassVar, Final

import jsonpatch
import msgspec

from agui_engine.protocol.capabilities import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultiAgentCapabilities,
    StateCapabilities,
    SubagentInfo,
)
from agui_engine.protocol.errors import MAX_ERROR_MESSAGE_CHARS, RemoteInputError, UsageError
from agui_engine.protocol.events import (
    CustomEvent,
    Event,
    Interrupt,
    JsonPatch,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)
from agui_engine.protocol.ids import Ids, new_id
from agui_engine.protocol.verify import TOOL
from agui_engine.protocol.writer import EventWriter

__all__ = [
    "CREWAI_MISSING",
    "CrewAIAgent",
    "CrewEventTranslator",
    "FEEDBACK_INTERRUPT_REASON",
    "Handler",
    "IDENTITY_TYPE",
    "KickoffCancelled",
    "MAX_PAUSED_CREWAI_FLOWS",
    "MAX_PENDING_CREWAI_EVENTS",
    "STEP_NAME_CHARS",
    "TASK_HUMAN_INPUT_UNSUPPORTED",
    "client_tools",
    "feedback_of",
    "flow_inputs",
    "kickoff_inputs",
]

_log = logging.getLogger(__name__)

#: The one line a user gets when crewai is not installed.
CREWAI_MISSING: Final = "CrewAI is not installed: pip install 'agui-engine[crewai]'"

#: CrewAI events a run may hold before the consumer reads them. The registry drains an
#: agent into its event log as fast as it can, so this is only reached when the loop is
#: starved; then the kickoff is stopped (RUN_ERROR) rather than growing without bound.
#: 100,000 events is ~100x a long crew's whole run (a 1,000-token answer is ~1,000 chunks).
MAX_PENDING_CREWAI_EVENTS: Final = 100_000

#: Longest step name taken from a task description (descriptions are prompts, often long).
STEP_NAME_CHARS: Final = 80

#: Paused flows (``@human_feedback``) one :class:`CrewAIAgent` keeps for a resume, oldest
#: dropped first. A paused flow is its state plus the pending review (a few KB); a client
#: that never answers must not grow the process without bound, and 10,000 open reviews
#: is far more than one server has users waiting on at once.
MAX_PAUSED_CREWAI_FLOWS: Final = 10_000

#: ``identity.type`` of a crew's or flow's capabilities.
IDENTITY_TYPE: Final = "crewai"

#: ``Interrupt.reason`` of a flow paused by ``@human_feedback`` (the LangGraph adapter's
#: is ``langgraph.interrupt``).
FEEDBACK_INTERRUPT_REASON: Final = "crewai.human_feedback"

#: Why a ``Task(human_input=True)`` ends an AG-UI run with ``RUN_ERROR`` (spec/crewai.md).
TASK_HUMAN_INPUT_UNSUPPORTED: Final = (
    "Task(human_input=True) cannot pause a crew over AG-UI: crewai 1.15 asks for the review inside the "
    "agent executor and has no way to resume a crew from there; use a Flow method with @human_feedback"
)


class KickoffCancelled(Exception):
    """Raised inside a kickoff, at its next event, once its run was closed."""


def _import_crewai() -> Any:
    try:
        import crewai
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise UsageError(CREWAI_MISSING) from exc
    return crewai


# ----------------------------------------------------------------------------- input


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [getattr(part, "text", None) for part in content or ()]
    return "\n".join(p for p in parts if isinstance(p, str))


def kickoff_inputs(input: RunAgentInput) -> dict[str, Any]:
    """The kickoff inputs of a run (the mapping is in the module docstring)."""
    latest = ""
    history: list[str] = []
    for message in input.messages:
        # an AG-UI message's role is its Struct tag, not a field
        role = str(getattr(type(message).__struct_config__, "tag", "") or "")
        text = _text_of(getattr(message, "content", None))
        if role == "user":
            latest = text
        if text:
            history.append(f"{role}: {text}")
    tools = [
        {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        for tool in input.tools
    ]
    inputs: dict[str, Any] = {
        "message": latest,
        "history": "\n".join(history),
        "context": "\n".join(f"{c.description}: {c.value}" for c in input.context),
        "tools": json.dumps(tools, ensure_ascii=False),
    }
    if isinstance(input.state, Mapping):
        inputs.update(input.state)
    forwarded = input.forwarded_props
    if isinstance(forwarded, Mapping) and isinstance(forwarded.get("inputs"), Mapping):
        inputs.update(forwarded["inputs"])
    return inputs


def flow_inputs(input: RunAgentInput, state_type: Any = None) -> dict[str, Any]:
    """The initial state a Flow gets: :func:`kickoff_inputs`, and for a structured (pydantic)
    state only the keys it declares whose values it accepts (the others keep their defaults);
    such a state that declares ``messages`` gets the conversation as Chat Completions messages
    and one that declares ``copilotkit`` gets ``{"actions": [<the client's tools as functions>]}``
    -- the shape of ``ag-ui-crewai``'s ``CopilotKitState``, so flows written for it run
    unchanged."""
    import pydantic

    inputs = kickoff_inputs(input)
    fields = getattr(state_type, "model_fields", None)
    if not isinstance(fields, Mapping):
        return inputs
    from agui_engine.adapters.openai_chat import build_chat_messages

    inputs["messages"] = build_chat_messages(input.messages, developer_role=False)
    inputs["copilotkit"] = {"actions": [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in input.tools
    ]}
    kept: dict[str, Any] = {}
    for key, value in inputs.items():
        field = fields.get(key)
        if field is None:
            continue
        try:
            pydantic.TypeAdapter(field.annotation).validate_python(value)
        except pydantic.ValidationError:
            continue  # e.g. a list-typed `context`: the state's own default stays
        kept[key] = value
    return kept


def client_tools(input: RunAgentInput) -> list[Any]:
    """The client's tools (``input.tools``, components' ``show_component_*`` included) as
    CrewAI tools an agent can be given. Calling one does not run anything on the server:
    the call streams to the client as a tool call (the client renders or runs it), and
    the agent is told so, so it can go on or finish."""
    _import_crewai()
    from crewai.tools import BaseTool

    made: list[Any] = []
    for tool in input.tools:
        schema = tool.parameters if isinstance(tool.parameters, Mapping) else {"type": "object"}

        def _run(self: Any, **kwargs: Any) -> str:
            return f"{self.name} was sent to the user's screen with {json.dumps(kwargs, ensure_ascii=False)}."

        cls = type(
            f"ClientTool_{tool.name}",
            (BaseTool,),
            {
                "__annotations__": {"name": str, "description": str},
                "name": tool.name,
                "description": tool.description or tool.name,
                "_run": _run,
            },
        )
        instance = cls()
        instance.args_schema = _args_model(tool.name, schema)
        made.append(instance)
    return made


def _args_model(name: str, schema: Mapping[str, Any]) -> Any:
    """A pydantic model of a JSON Schema's top-level properties (CrewAI validates tool
    arguments with pydantic); nested values stay free-form."""
    import pydantic

    fields: dict[str, Any] = {}
    required = set(schema.get("required") or ())
    for prop in schema.get("properties") or {}:
        fields[prop] = (Any, ... if prop in required else None)
    return pydantic.create_model(f"{name}_args", **fields)


# ----------------------------------------------------------------------------- translation


def _short(text: Any) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= STEP_NAME_CHARS else value[: STEP_NAME_CHARS - 1] + "…"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _with_state_now(event: Any) -> Any:
    """``event`` with its flow ``state`` as JSON taken now, on the kickoff's thread.

    CrewAI's method events carry the flow's live state object; the loop translates them
    later, by which time the next method may have changed it -- a delta would then be lost
    into the snapshot (or two deltas merged). A copy made at emit time is what the state
    was when the method finished. ``model_copy(update=)`` does not validate, so the copy
    holds the JSON value as is.
    """
    state = getattr(event, "state", None)
    if state is None or not hasattr(event, "model_copy"):
        return event
    return event.model_copy(update={"state": _jsonable(state)})


class _StreamedCall:
    """A tool call the model streams in the open message: its id and name as they come and the
    arguments so far. Whether it is open is the run's writer's to say (``is_open(TOOL, id)``)."""

    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.id = call_id
        self.name = name
        #: the arguments received so far (sent as TOOL_CALL_ARGS once the call started)
        self.args = ""


def _new_arguments(sent: str, chunk: Any, arguments: str) -> str:
    """The part of a streamed tool call's arguments that one CrewAI chunk adds.

    What crewai 1.15.30 reports in an ``LLMStreamChunkEvent`` with a ``tool_call``
    (``crewai/events/types/llm_events.py``; emitted by ``BaseLLM._emit_stream_chunk_event``,
    whose docstring calls ``chunk`` "the text content of the chunk"):

    - ``chunk`` is always the new fragment, in every provider: the native OpenAI, Azure,
      Anthropic and Bedrock streams (``llms/providers/*/completion.py``) pass the delta's
      ``arguments`` / ``partial_json`` / ``toolUse.input``, LiteLLM's
      (``llm.py``, ``LLM._handle_streaming_tool_calls``) ``tool_call.function.arguments``
      of the delta, Gemini the whole arguments of its one chunk per call;
    - ``tool_call.function.arguments`` is **cumulative** in the native providers (they pass
      their accumulator: ``tool_calls[i]["arguments"] += ...`` then the whole string) but
      **incremental** through LiteLLM (``tool_call.to_dict()`` of the delta itself).

    So ``chunk`` is the fragment whenever it is non-empty. An emitter that leaves it empty
    and reports only ``arguments`` (a custom ``BaseLLM``) is told apart by prefix: arguments
    that begin with everything received so far are cumulative (the rest is new), others are
    a fragment.
    """
    if isinstance(chunk, str) and chunk:
        return chunk
    if arguments.startswith(sent):
        return arguments[len(sent):]
    return arguments


Handler = Callable[["CrewEventTranslator", Any], list[Event]]

#: The translator's writer lanes: CrewAI streams text and thinking side by side.
_TEXT_LANE: Final = "text"
_REASONING_LANE: Final = "reasoning"


class CrewEventTranslator:
    """CrewAI events of one run -> AG-UI events (no IO; see the module's table).

    ``feed(event)`` takes one CrewAI event (any object with a ``type`` attribute) and
    returns the AG-UI events it causes; ``finish(output)`` and ``fail(message)`` close
    what is open and end the run. Unknown event types are skipped: CrewAI adds events
    in minor releases.
    """

    def __init__(self, *, run_id: str, thread_id: str) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        #: what is open (text and reasoning on lanes of their own: both may be open while the
        #: model streams) and the ids: ``{runId}-{kind}-{n}``
        self._writer = EventWriter(Ids.sequential(run_id))
        #: the text of the last assistant message streamed (the closing output is compared with it)
        self._last_message: list[str] = []
        self._steps: list[str] = []
        #: calls the model is streaming: by index (CrewAI's chunks) or by id (ag-ui-crewai's)
        self._streamed: dict[int | str, _StreamedCall] = {}
        self._chunk_call: str | None = None
        #: tool name -> ids of calls awaiting their result, oldest first
        self._awaiting: dict[str, list[str]] = {}
        self._state: Any = None
        self._state_sent = False
        self.error: str | None = None
        self.text_seen = False

    def _id(self, kind: str) -> str:
        return self._writer.ids.mint(kind)

    # -- closing what is open
    def _close_message(self) -> list[Event]:
        out: list[Event] = []
        self._writer.close_all(out, tools=False)  # the text, then the reasoning
        for call in self._streamed.values():
            if self._is_open(call):
                assert call.id is not None
                out.append(self._writer.end_tool(call.id))
                self._awaiting.setdefault(call.name or "", []).append(call.id)
        self._streamed.clear()
        self._chunk_call = None
        return out

    def _is_open(self, call: _StreamedCall) -> bool:
        """Whether the writer has ``call`` open (a streamed call is open from its START until its
        message closes, when its record is dropped)."""
        return call.id is not None and self._writer.is_open(TOOL, call.id)

    def _open_step(self, name: str) -> list[Event]:
        self._steps.append(name)
        return [StepStartedEvent(step_name=name)]

    def _close_step(self, prefix: str) -> list[Event]:
        """Closes the innermost open step of this kind (and any left open inside it)."""
        for i in range(len(self._steps) - 1, -1, -1):
            if self._steps[i].startswith(prefix):
                closing = self._steps[i:]
                del self._steps[i:]
                return [StepFinishedEvent(step_name=name) for name in reversed(closing)]
        return []

    # -- events
    def feed(self, event: Any) -> list[Event]:
        """The AG-UI events one CrewAI event causes."""
        kind = getattr(event, "type", None)
        handler = self.HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return []
        if kind in self.CHUNKS:
            return handler(self, event)
        return self._close_message() + handler(self, event)

    def _on_crew_started(self, event: Any) -> list[Event]:
        return self._open_step(f"crew:{_short(getattr(event, 'crew_name', None) or 'crew')}")

    def _on_crew_finished(self, event: Any) -> list[Event]:
        return self._close_step("crew:")

    def _on_crew_failed(self, event: Any) -> list[Event]:
        self.error = self.error or f"the crew failed: {getattr(event, 'error', '')}"
        return self._close_step("crew:")

    def _on_task_started(self, event: Any) -> list[Event]:
        name = getattr(event, "task_name", None) or getattr(getattr(event, "task", None), "description", None)
        return self._open_step(f"task:{_short(name or 'task')}")

    def _on_task_finished(self, event: Any) -> list[Event]:
        return self._close_step("task:")

    def _on_task_failed(self, event: Any) -> list[Event]:
        self.error = self.error or f"a task failed: {getattr(event, 'error', '')}"
        return self._close_step("task:")

    def _on_agent_started(self, event: Any) -> list[Event]:
        role = getattr(getattr(event, "agent", None), "role", None) or getattr(event, "agent_role", None)
        return self._open_step(f"agent:{_short(role or 'agent')}")

    def _on_agent_finished(self, event: Any) -> list[Event]:
        return self._close_step("agent:")

    def _on_agent_error(self, event: Any) -> list[Event]:
        self.error = self.error or f"an agent failed: {getattr(event, 'error', '')}"
        return self._close_step("agent:")

    def _on_method_started(self, event: Any) -> list[Event]:
        return self._open_step(f"method:{getattr(event, 'method_name', 'method')}")

    def _on_method_finished(self, event: Any) -> list[Event]:
        return self.state_events(getattr(event, "state", None)) + self._close_step("method:")

    def _on_method_paused(self, event: Any) -> list[Event]:
        # @human_feedback paused the flow after this method: its state so far, then its step ends
        return self._on_method_finished(event)

    def _on_method_failed(self, event: Any) -> list[Event]:
        self.error = self.error or f"flow method {getattr(event, 'method_name', '?')} failed: {getattr(event, 'error', '')}"
        return self._close_step("method:")

    def _on_text_chunk(self, event: Any) -> list[Event]:
        tool_call = getattr(event, "tool_call", None)
        if tool_call is not None:
            return self._on_tool_call_chunk(tool_call, getattr(event, "chunk", None))
        return self._text(getattr(event, "chunk", ""))

    def _text(self, chunk: Any) -> list[Event]:
        if not isinstance(chunk, str) or not chunk:
            return []
        out: list[Event] = []
        self._writer.text(chunk, out, lane=_TEXT_LANE)
        if any(isinstance(e, TextMessageStartEvent) for e in out):
            self._last_message.clear()
        self._last_message.append(chunk)
        self.text_seen = True
        return out

    def _on_tool_call_chunk(self, tool_call: Any, chunk: Any) -> list[Event]:
        """One chunk of a call the model streams (keyed by its index): ``TOOL_CALL_START``
        once its name is known (arguments received before it follow at once), then each new
        fragment of its arguments (:func:`_new_arguments`) once, as ``TOOL_CALL_ARGS``."""
        index = getattr(tool_call, "index", 0)
        function = getattr(tool_call, "function", None)
        name = getattr(function, "name", None)
        arguments = getattr(function, "arguments", None) or ""
        call = self._streamed.get(index)
        if call is None:
            call = self._streamed[index] = _StreamedCall(getattr(tool_call, "id", None), name)
        call.id = call.id or getattr(tool_call, "id", None)
        call.name = call.name or name
        new = _new_arguments(call.args, chunk, arguments)
        call.args += new
        out: list[Event] = []
        if not self._is_open(call) and call.name:
            start = self._writer.open_tool(call.name, tool_call_id=call.id)  # no id: one is minted
            call.id = start.tool_call_id
            out.append(start)
            new = call.args  # what arrived before the name, and this chunk's
        if self._is_open(call) and new:
            assert call.id is not None
            out.append(self._writer.tool_args(call.id, new))
        return out

    # -- what a flow written for ag-ui-crewai publishes on CrewAI's bus (its copilotkit_* helpers):
    #    AG-UI events wrapped as CrewAI events, re-issued here in this run's own message
    def _on_bridged_text(self, event: Any) -> list[Event]:
        return self._text(getattr(event, "delta", None))

    def _on_bridged_tool_call(self, event: Any) -> list[Event]:
        call_id = getattr(event, "tool_call_id", None) or self._chunk_call
        if call_id is None:
            return []
        self._chunk_call = call_id
        call = self._streamed.get(call_id)
        if call is None:
            call = self._streamed[call_id] = _StreamedCall(call_id, getattr(event, "tool_call_name", None))
        call.name = call.name or getattr(event, "tool_call_name", None)
        out: list[Event] = []
        if not self._is_open(call) and call.name:
            out.append(self._writer.open_tool(call.name, tool_call_id=call_id))
        delta = getattr(event, "delta", None)
        if self._is_open(call) and isinstance(delta, str) and delta:
            out.append(self._writer.tool_args(call_id, delta))
        return out

    def _on_bridged_tool_result(self, event: Any) -> list[Event]:
        call_id = str(getattr(event, "tool_call_id", ""))
        for waiting in self._awaiting.values():
            if call_id in waiting:
                waiting.remove(call_id)
        return [ToolCallResultEvent(message_id=str(getattr(event, "message_id", None) or self._id("result")),
                                    tool_call_id=call_id, content=str(getattr(event, "content", "")), role="tool")]

    def _on_bridged_state(self, event: Any) -> list[Event]:
        value = _jsonable(getattr(event, "snapshot", None))
        self._state, self._state_sent = value, True
        return [StateSnapshotEvent(snapshot=value)]

    def _on_bridged_custom(self, event: Any) -> list[Event]:
        return [CustomEvent(name=str(getattr(event, "name", "")), value=_jsonable(getattr(event, "value", None)))]

    def _on_thinking_chunk(self, event: Any) -> list[Event]:
        chunk = getattr(event, "chunk", "")
        if not isinstance(chunk, str) or not chunk:
            return []
        out: list[Event] = []
        self._writer.reasoning(chunk, out, lane=_REASONING_LANE)
        return out

    def _on_llm_call_boundary(self, event: Any) -> list[Event]:
        return []  # feed() already closed the message of the previous call

    def _on_tool_started(self, event: Any) -> list[Event]:
        name = str(getattr(event, "tool_name", "") or "tool")
        if self._awaiting.get(name):
            return []  # the model streamed this call already (native function calling)
        start = self._writer.open_tool(name)
        call_id = start.tool_call_id
        args = getattr(event, "tool_args", None)
        text = args if isinstance(args, str) else json.dumps(_jsonable(args or {}), ensure_ascii=False)
        self._awaiting.setdefault(name, []).append(call_id)
        out: list[Event] = [start]
        if text:
            out.append(self._writer.tool_args(call_id, text))
        out.append(self._writer.end_tool(call_id))
        return out

    def _result(self, event: Any, content: str) -> list[Event]:
        name = str(getattr(event, "tool_name", "") or "tool")
        waiting = self._awaiting.get(name)
        if not waiting:
            return []
        call_id = waiting.pop(0)
        return [ToolCallResultEvent(message_id=self._id("result"), tool_call_id=call_id, content=content, role="tool")]

    def _on_tool_finished(self, event: Any) -> list[Event]:
        output = getattr(event, "output", "")
        return self._result(event, output if isinstance(output, str) else json.dumps(_jsonable(output)))

    def _on_tool_error(self, event: Any) -> list[Event]:
        return self._result(event, f"Error: {getattr(event, 'error', '')}")

    HANDLERS: ClassVar[Mapping[str, Handler]] = {
        "crew_kickoff_started": _on_crew_started,
        "crew_kickoff_completed": _on_crew_finished,
        "crew_kickoff_failed": _on_crew_failed,
        "task_started": _on_task_started,
        "task_completed": _on_task_finished,
        "task_failed": _on_task_failed,
        "agent_execution_started": _on_agent_started,
        "agent_execution_completed": _on_agent_finished,
        "agent_execution_error": _on_agent_error,
        "method_execution_started": _on_method_started,
        "method_execution_finished": _on_method_finished,
        "method_execution_failed": _on_method_failed,
        "method_execution_paused": _on_method_paused,
        "llm_call_started": _on_llm_call_boundary,
        "llm_call_completed": _on_llm_call_boundary,
        "llm_call_failed": _on_llm_call_boundary,
        "llm_stream_chunk": _on_text_chunk,
        "llm_thinking_chunk": _on_thinking_chunk,
        "tool_usage_started": _on_tool_started,
        "tool_usage_finished": _on_tool_finished,
        "tool_usage_error": _on_tool_error,
        "TEXT_MESSAGE_CHUNK": _on_bridged_text,
        "TOOL_CALL_CHUNK": _on_bridged_tool_call,
        "TOOL_CALL_RESULT": _on_bridged_tool_result,
        "STATE_SNAPSHOT": _on_bridged_state,
        "CUSTOM": _on_bridged_custom,
    }
    #: Event types that continue the model message being streamed (all others close it).
    CHUNKS: ClassVar[frozenset[str]] = frozenset(
        {"llm_stream_chunk", "llm_thinking_chunk", "TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK"})

    # -- state and the end
    def state_events(self, state: Any) -> list[Event]:
        """``STATE_SNAPSHOT`` the first time, then ``STATE_DELTA`` when the state changed."""
        if state is None:
            return []
        value = _jsonable(state)
        if isinstance(value, dict):
            value.pop("id", None)  # CrewAI's per-instance flow id, not application state
        if not self._state_sent:
            self._state_sent = True
            self._state = value
            return [StateSnapshotEvent(snapshot=value)]
        patch = jsonpatch.make_patch(self._state, value).patch
        self._state = value
        return [StateDeltaEvent(delta=msgspec.convert(patch, JsonPatch))] if patch else []

    def _close_all(self) -> list[Event]:
        out = self._close_message()
        while self._steps:
            out.append(StepFinishedEvent(step_name=self._steps.pop()))
        return out

    def finish(self, output: Any, state: Any = None, outcome: RunFinishedOutcome | None = None) -> list[Event]:
        """Closes what is open, the output as the closing assistant message, ``RUN_FINISHED``
        carrying ``outcome`` (or ``RUN_ERROR`` when a failure was seen on the way)."""
        out = self._close_all() + self.state_events(state)
        if self.error is not None:
            return out + [RunErrorEvent(message=self.error[:MAX_ERROR_MESSAGE_CHARS], code="crewai_error")]
        text = getattr(output, "raw", output)
        if text is not None and not isinstance(text, str):
            text = json.dumps(_jsonable(text), ensure_ascii=False)
        if text and text.strip() != "".join(self._last_message).strip():
            # (the output the last message already streamed word for word is not said twice)
            self._writer.text(text, out, lane=_TEXT_LANE)  # the lanes were closed: a new message
            self._writer.close_lane(out, _TEXT_LANE)
        return out + [RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]

    def fail(self, message: str, code: str = "crewai_error") -> list[Event]:
        """Closes what is open and ends the run with ``RUN_ERROR`` (the first failure seen
        on the way, if any, is the reason)."""
        reason = self.error or message
        return self._close_all() + [RunErrorEvent(message=reason[:MAX_ERROR_MESSAGE_CHARS], code=code)]


# ----------------------------------------------------------------------------- human feedback

#: Set (to True) in the context of every kickoff this adapter runs: the feedback provider
#: below pauses only those, and leaves CrewAI's console prompt to everything else.
_IN_AGUI_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("agui_crewai_run", default=False)


class _RunFeedbackProvider:
    """CrewAI's process-wide default ``HumanFeedbackProvider`` while a :class:`CrewAIAgent`
    exists (installed only when none was set). Inside an AG-UI run a ``@human_feedback``
    method pauses the flow (``HumanFeedbackPending``: CrewAI persists it, the kickoff
    returns it, the run ends with an interrupt); anywhere else it does exactly what CrewAI
    does without a provider (asks on the console)."""

    def request_feedback(self, context: Any, flow: Any) -> str:
        if _IN_AGUI_RUN.get():
            from crewai.flow.async_feedback import HumanFeedbackPending

            raise HumanFeedbackPending(context=context)
        return str(flow._request_human_feedback(message=context.message, output=context.method_output,
                                                metadata=context.metadata, emit=context.emit,
                                                method_name=context.method_name))


def _install_feedback_provider() -> None:
    """Make :class:`_RunFeedbackProvider` CrewAI's default feedback provider, unless one is set.

    This is the one process-wide setting the adapter makes, because CrewAI 1.15 offers no
    narrower one: ``Flow._resolve_feedback_provider`` takes the ``@human_feedback``
    decorator's own ``provider=`` (part of the user's flow class) and otherwise the singleton
    ``flow_config.hitl_provider``; there is no per-flow-instance attribute and no context
    variable to set for one kickoff. What is scoped to the run is the behaviour: the provider
    pauses only inside a kickoff of this adapter (:data:`_IN_AGUI_RUN`, set in the run's own
    context), holds no agent's state (each agent keeps its own paused flows and persistence),
    and is installed once: a second agent, or a provider the application set first, changes
    nothing (tests/adapters/test_crewai.py: two agents with different flows pause and resume
    side by side)."""
    from crewai.flow.flow_config import flow_config

    if flow_config.hitl_provider is None:
        flow_config.hitl_provider = _RunFeedbackProvider()


@functools.cache
def _refusing_input_type() -> Any:
    """CrewAI's ``HumanInputProvider`` that refuses (built on first use: crewai is imported lazily)."""
    from crewai.core.providers.human_input import SyncHumanInputProvider

    class RefuseHumanInput(SyncHumanInputProvider):
        def handle_feedback(self, formatted_answer: Any, context: Any) -> Any:
            raise UsageError(TASK_HUMAN_INPUT_UNSUPPORTED)

        async def handle_feedback_async(self, formatted_answer: Any, context: Any) -> Any:
            raise UsageError(TASK_HUMAN_INPUT_UNSUPPORTED)

    return RefuseHumanInput


def _refuse_task_human_input() -> None:
    """In the run's context: a ``Task(human_input=True)`` fails the task with
    :data:`TASK_HUMAN_INPUT_UNSUPPORTED` instead of reading the server's stdin (which, under
    ``serve --transport stdio``, is the protocol itself). CrewAI keeps this provider in a
    context variable: set in the run's copied context, it is the run's alone."""
    from crewai.core.providers.human_input import set_provider

    set_provider(_refusing_input_type()())


def _memory_persistence() -> Any:
    """A CrewAI ``FlowPersistence`` in this process's memory, for the flows one agent paused
    (CrewAI's default would write a SQLite file under the user's data directory). It keeps
    paused flows only (their state and pending review, until resumed or dropped: bounded by
    :data:`MAX_PAUSED_CREWAI_FLOWS`); other state saves (``Flow.ask`` checkpoints) are not kept."""
    return _memory_persistence_type()()


@functools.cache
def _memory_persistence_type() -> Any:
    """The class of :func:`_memory_persistence` (built on first use: crewai is imported lazily)."""
    import pydantic
    from crewai.flow.persistence.base import FlowPersistence

    class AgentMemoryPersistence(FlowPersistence):
        persistence_type: str = "agui-engine-memory"
        _saved: dict[str, tuple[dict[str, Any], Any]] = pydantic.PrivateAttr(default_factory=dict)

        def init_db(self) -> None:
            pass

        @staticmethod
        def _dump(state: Any) -> dict[str, Any]:
            return dict(state) if isinstance(state, Mapping) else dict(state.model_dump())

        def save_state(self, flow_uuid: str, method_name: str, state_data: Any) -> None:
            pass  # only pauses are kept (above): anything else would grow with every flow run

        def load_state(self, flow_uuid: str) -> dict[str, Any] | None:
            saved = self._saved.get(flow_uuid)
            return saved[0] if saved else None

        def save_pending_feedback(self, flow_uuid: str, context: Any, state_data: Any) -> None:
            self._saved[flow_uuid] = (self._dump(state_data), context)

        def load_pending_feedback(self, flow_uuid: str) -> tuple[dict[str, Any], Any] | None:
            saved = self._saved.get(flow_uuid)
            return saved if saved and saved[1] is not None else None

        def clear_pending_feedback(self, flow_uuid: str) -> None:
            self._saved.pop(flow_uuid, None)

    return AgentMemoryPersistence


class _Paused:
    """A flow paused in a run of this agent, waiting for the answer to ``interrupt_id``."""

    __slots__ = ("flow_id", "flow_type", "persistence", "thread_id")

    def __init__(self, thread_id: str, flow_type: Any, flow_id: str, persistence: Any) -> None:
        self.thread_id = thread_id
        self.flow_type = flow_type
        self.flow_id = flow_id
        self.persistence = persistence


def feedback_of(entry: ResumeEntry) -> str:
    """The feedback string a ``resume`` entry hands to ``Flow.resume``: a string payload as
    is, any other payload as JSON, none (or a ``cancelled`` entry) as ``""`` -- which CrewAI
    resolves to the review's ``default_outcome`` (or its first ``emit`` outcome)."""
    if entry.status == "cancelled" or entry.payload is None:
        return ""
    if isinstance(entry.payload, str):
        return entry.payload
    return json.dumps(entry.payload, ensure_ascii=False)


def _interrupt(interrupt_id: str, pending: Any) -> Interrupt:
    context = pending.context
    emit = list(context.emit) if context.emit else None
    return Interrupt(
        id=interrupt_id,
        reason=FEEDBACK_INTERRUPT_REASON,
        message=context.message or None,
        response_schema={"type": "string", "enum": emit} if emit else {"type": "string"},
        metadata={"method": context.method_name, "output": _jsonable(context.method_output), "emit": emit},
    )


# ----------------------------------------------------------------------------- the agent

_DONE: Final = object()


class _Handoff:
    """Items from the kickoff's thread to the event loop, one loop wake-up per batch.

    Waking the loop (``call_soon_threadsafe``) costs more than translating an event, and a
    model streams a chunk every few hundred microseconds; so the thread appends to a deque
    and wakes the loop only when the loop is not already due to look. The loop clears
    ``_scheduled`` *before* it drains: an item appended after the drain then finds the
    flag clear and wakes it again, so none is stranded.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.items: collections.deque[tuple[Any, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._ready = asyncio.Event()

    def put(self, item: tuple[Any, Any]) -> None:
        """From the kickoff's thread."""
        self.items.append(item)
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._ready.set)

    async def take(self) -> list[tuple[Any, Any]]:
        """On the loop: every item so far (at least one), oldest first."""
        while True:
            with self._lock:
                self._scheduled = False
            batch = []
            while self.items:
                batch.append(self.items.popleft())
            if batch:
                return batch
            await self._ready.wait()
            self._ready.clear()


class CrewAIAgent:
    """A CrewAI ``Crew``, ``Flow`` class or ``factory(input) -> Crew | Flow`` as an Agent.

    Safe for concurrent runs: each run kicks off its own copy (a Crew is copied, a Flow
    class instantiated, a factory called) on its own thread, listening through a sink
    scoped to that run (module docstring). Raises :class:`UsageError` at construction
    for a target that is none of these.
    """

    def __init__(self, target: Any) -> None:
        crewai = _import_crewai()
        self._crew_type: Any = crewai.Crew
        self._flow_type: Any = crewai.Flow
        if isinstance(target, crewai.Crew) or (isinstance(target, type) and issubclass(target, crewai.Flow)):
            self.target = target
        elif isinstance(target, crewai.Flow):
            raise UsageError("pass the Flow class (or a factory), not an instance: each run needs its own flow state")
        elif callable(target):
            self.target = target
        else:
            raise UsageError(f"CrewAIAgent needs a Crew, a Flow class or a factory(input), got {type(target).__name__}")
        _install_feedback_provider()
        self._persistence = _memory_persistence()
        #: interrupt id -> the flow it paused, oldest first (bounded: MAX_PAUSED_CREWAI_FLOWS)
        self._paused: collections.OrderedDict[str, _Paused] = collections.OrderedDict()
        self._paused_lock = threading.Lock()

    def _take_paused(self, input: RunAgentInput) -> _Paused:
        """The paused flow ``input.resume`` answers, no longer pending. Raises
        :class:`RemoteInputError` (before ``RUN_STARTED``) unless it is exactly one entry
        naming an interrupt this thread is waiting on."""
        entries = input.resume or []
        with self._paused_lock:
            waiting = [iid for iid, p in self._paused.items() if p.thread_id == input.thread_id]
            if len(entries) != 1:
                raise RemoteInputError(f"resume: a paused CrewAI flow waits for one answer, got {len(entries)} "
                                       f"entries (pending: {', '.join(map(repr, waiting)) or 'none'})")
            entry = entries[0]
            if entry.interrupt_id not in waiting:
                raise RemoteInputError(f"resume[0].interruptId: {entry.interrupt_id!r} is not a pending interrupt of "
                                       f"this thread (pending: {', '.join(map(repr, waiting)) or 'none'})")
            return self._paused.pop(entry.interrupt_id)

    def _pause(self, thread_id: str, instance: Any, pending: Any) -> RunFinishedInterruptOutcome:
        """Keeps a flow the run paused for its resume; the interrupt outcome that says so."""
        interrupt_id = new_id()
        paused = _Paused(thread_id, type(instance), pending.context.flow_id, instance.persistence)
        with self._paused_lock:
            self._paused[interrupt_id] = paused
            while len(self._paused) > MAX_PAUSED_CREWAI_FLOWS:
                _, dropped = self._paused.popitem(last=False)
                dropped.persistence.clear_pending_feedback(dropped.flow_id)
        return RunFinishedInterruptOutcome(interrupts=[_interrupt(interrupt_id, pending)])

    def _instance(self, input: RunAgentInput) -> Any:
        target: Any = self.target
        if isinstance(target, self._crew_type):
            return target.copy()
        if isinstance(target, type) and issubclass(target, self._flow_type):
            return target()
        made = target(input)
        if not isinstance(made, (self._crew_type, self._flow_type)):
            raise UsageError(f"the CrewAI factory returned {type(made).__name__}, not a Crew or a Flow")
        return made

    async def capabilities(self) -> AgentCapabilities:
        """What the adapter gives this target. A Flow class: its state as ``STATE_SNAPSHOT``
        / ``STATE_DELTA`` (a fresh state each run) and ``@human_feedback`` as the interrupt
        protocol (``feedback``, ``interrupts``). A Crew: no state events, no interrupts
        (``Task(human_input=True)`` cannot pause a crew), its agents as ``subagents`` (role,
        goal) and ``delegation`` when one allows it. A factory: only what holds for both
        (``identity``). ``identity.type``: ``"crewai"``. Raises nothing."""
        target: Any = self.target
        identity = IdentityCapabilities(type=IDENTITY_TYPE)
        if isinstance(target, type) and issubclass(target, self._flow_type):
            return AgentCapabilities(
                identity=msgspec.structs.replace(identity, name=target.__name__),
                state=StateCapabilities(snapshots=True, deltas=True, persistent_state=False),
                human_in_the_loop=HumanInTheLoopCapabilities(supported=True, feedback=True, interrupts=True),
            )
        if not isinstance(target, self._crew_type):
            return AgentCapabilities(identity=identity)
        agents = list(getattr(target, "agents", None) or ())
        subagents = [SubagentInfo(name=str(a.role), description=str(a.goal) if getattr(a, "goal", None) else None)
                     for a in agents if isinstance(getattr(a, "role", None), str)]
        name = getattr(target, "name", None)
        return AgentCapabilities(
            identity=msgspec.structs.replace(identity, name=name if isinstance(name, str) else None),
            state=StateCapabilities(snapshots=False, deltas=False, persistent_state=False),
            multi_agent=MultiAgentCapabilities(
                supported=len(agents) > 1,
                delegation=any(bool(getattr(a, "allow_delegation", False)) for a in agents),
                subagents=subagents or None,
            ),
            human_in_the_loop=HumanInTheLoopCapabilities(interrupts=False),
        )

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """One kickoff as one AG-UI run (module docstring), or the resume of a flow a run of
        this agent paused (``input.resume``). Raises :class:`RemoteInputError` before
        ``RUN_STARTED`` for a resume that answers no pending interrupt of the thread; never
        raises after it: failures end the run with RUN_ERROR, the kickoff's exception logged
        with its traceback."""
        from crewai.events.stream_context import add_stream_sink
        from crewai.flow.async_feedback import HumanFeedbackPending

        resumed = self._take_paused(input) if input.resume else None
        answer = input.resume[0] if resumed is not None and input.resume else None
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        translator = CrewEventTranslator(run_id=input.run_id, thread_id=input.thread_id)
        kickoff: Callable[[], Any]
        try:
            if resumed is not None:
                instance = resumed.flow_type.from_pending(resumed.flow_id, persistence=resumed.persistence)
                feedback = feedback_of(answer) if answer is not None else ""
                kickoff = lambda: instance.resume(feedback)  # noqa: E731
            else:
                instance = self._instance(input)
                inputs = kickoff_inputs(input)
                if isinstance(instance, self._flow_type):
                    inputs = flow_inputs(input, type(instance.state))
                    if instance.persistence is None:  # where a @human_feedback pause is kept
                        instance.persistence = self._persistence
                kickoff = lambda: instance.kickoff(inputs=inputs)  # noqa: E731
        except Exception as exc:
            _log.exception("CrewAI run %s could not start", input.run_id)
            for event in translator.fail(f"the CrewAI target could not start: {exc}"):
                yield event
            return

        handoff = _Handoff(asyncio.get_running_loop())
        closed = threading.Event()

        def sink(source: Any, event: Any) -> None:
            # Runs on the kickoff's thread, inside CrewAI's emit: raising here unwinds the kickoff.
            if closed.is_set():
                raise KickoffCancelled(f"run {input.run_id} was closed")
            if len(handoff.items) >= MAX_PENDING_CREWAI_EVENTS:
                raise KickoffCancelled(f"run {input.run_id}: {MAX_PENDING_CREWAI_EVENTS} events unread")
            handoff.put(("event", _with_state_now(event)))

        def work() -> None:
            try:
                output = kickoff()
                state = getattr(instance, "state", None) if isinstance(instance, self._flow_type) else None
                if isinstance(output, HumanFeedbackPending):
                    # kept here, not on the loop: a run closed meanwhile still leaves it bounded
                    output = self._pause(input.thread_id, instance, output)
                handoff.put((_DONE, (output, state)))
            except BaseException as exc:  # the kickoff's failure is the run's, reported below
                if not closed.is_set():
                    handoff.put(("error", exc))

        context = contextvars.copy_context()
        context.run(add_stream_sink, sink)
        context.run(_IN_AGUI_RUN.set, True)
        context.run(_refuse_task_human_input)
        thread = threading.Thread(target=context.run, args=(work,), name=f"crewai-{input.run_id}", daemon=True)
        thread.start()
        try:
            while True:
                for kind, value in await handoff.take():
                    if kind == "event":
                        for event in translator.feed(value):
                            yield event
                    elif kind is _DONE:
                        output, state = value
                        if isinstance(output, RunFinishedInterruptOutcome):
                            for event in translator.finish(None, state, output):
                                yield event
                        else:
                            for event in translator.finish(output, state):
                                yield event
                        return
                    else:
                        _log.error("CrewAI run %s failed", input.run_id, exc_info=value)
                        for event in translator.fail(f"{type(value).__name__}: {value}"):
                            yield event
                        return
        finally:
            closed.set()
