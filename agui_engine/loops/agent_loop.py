"""The agent loop: any inner Agent's events in, verified, repaired, component-aware events out.

Theory of operation
-------------------
:class:`AgentLoop` wraps an inner :class:`~agui_engine.protocol.agent.Agent` -- an agent
framework behind its adapter (LangGraph), a remote AG-UI agent behind a transport
client (``SSEAgent``, ``WebSocketAgent``, ``StdioAgent``), or any object with
``run(input) -> AsyncIterator[Event]`` -- and is itself an Agent. Per run:

1. **Tools in.** The run's components (the loop's own ``components``, replaced by
   the client's of the same name: ``show_component_<Name>`` entries of
   ``RunAgentInput.tools`` and ``forwardedProps.availableComponents``) and
   interactables (the loop's own and the ``interactables`` context entry) become
   the same tools :class:`~agui_engine.loops.llm_agent.LLMAgent` offers a model
   (:func:`~agui_engine.loops.tool_calls.build_tools`: standard parameters first, strict
   form when the schema allows). They replace the client's ``show_component_*``
   entries in ``input.tools``; every other client tool passes unchanged. An
   invalid client component or interactable raises
   :class:`~agui_engine.protocol.errors.RemoteInputError` before any event (a transport
   answers 4xx), as ``LLMAgent`` does. The tools of ``mcp_servers`` are added as client
   tools with their servers' own schemas; the loop runs them (:meth:`AgentLoop._rounds`), and
   those with an MCP app are tracked like the loop's own tools so their calls' apps are announced
   at ``TOOL_CALL_START`` and get their input as it streams (``spec/mcp.md``).
2. **Events out.** Every event of the inner agent goes through one small state
   machine, :class:`_Run` (phase: before ``RUN_STARTED`` / running / ended; the
   open entities are the :class:`~agui_engine.protocol.verify.Verifier`'s own): chunk
   events are expanded (:class:`~agui_engine.protocol.verify.ChunkExpander`), the known
   breakages are repaired (table below), tool calls go through the same
   :class:`~agui_engine.loops.tool_calls.ToolCallTransformer` the decision loop uses (so a
   ``show_component_<Name>`` call gets the ``tambo.component.*`` events, an
   ``update_component_*_<id>`` call the interactable's, and no standard parameter
   or strict-mode ``null`` reaches ``TOOL_CALL_ARGS``), and every event that goes
   out is fed to the run's Verifier first.
3. **Answers.** A component or interactable-update call the inner agent did not
   answer itself gets a ``TOOL_CALL_RESULT`` (``Component <Name> is shown on the
   user's screen.``, with the schema problem if the final props do not fit; or
   ``Updated successfully``) just before ``RUN_FINISHED``, and its id leaves the
   outcome's ``pendingToolCallIds``: the client's history then holds a result for
   every call, so the next model call sees a valid conversation
   (``spec/agent-loop.md`` says how each framework continues).

Repairs (:data:`REPAIRS`; each one calls ``on_repair(id, detail)``)
---------------------------------------------------------------------

======================  ==========================================  ===============================================
id                      breakage                                    repair
======================  ==========================================  ===============================================
missing_run_started     first event is not RUN_STARTED (the stream  RUN_STARTED {threadId, runId, parentRunId} of
                        is empty, starts with RUN_ERROR, or the     the input first
                        agent raised before its first event)
duplicate_run_started   RUN_STARTED while the run is running        dropped
missing_run_finished    the stream ends without RUN_FINISHED or     what is open is closed (below), then
                        RUN_ERROR                                   RUN_FINISHED
run_ids                 RUN_FINISHED names other ids than its       the ids of RUN_STARTED
                        RUN_STARTED
after_terminal          events after RUN_FINISHED / RUN_ERROR       dropped (the inner stream is closed)
legacy_thinking         THINKING_* events (0.x names)               REASONING_* with fresh ids (the TS client's
                                                                    BackwardCompatibility_0_0_45 mapping)
missing_text_start      TEXT_MESSAGE_CONTENT for a message never    TEXT_MESSAGE_START {role: "assistant"} first
                        started
missing_reasoning_start REASONING_MESSAGE_CONTENT for a message     REASONING_MESSAGE_START {role: "reasoning"}
                        never started                               first
empty_delta             TEXT/REASONING_MESSAGE_CONTENT or           dropped (AGUI105; carries nothing)
                        TOOL_CALL_ARGS with an empty delta
end_not_open            *_END / STEP_FINISHED for an id that is     dropped (nothing to close: a framework that
                        not open (never opened, or closed twice)    closes at node exit and again at run end)
tool_call_parent        TOOL_CALL_START without parentMessageId     the current assistant message (the last
                                                                    TEXT_MESSAGE_START's id, else one fresh id for
                                                                    the calls until the next text message)
tool_call_chunk         a tool call delivered whole as one          expanded to START + ARGS (+ END): its args are
                        TOOL_CALL_CHUNK (name and args together)    streamed, a component shows
args_in_snapshot        a component / update call with START and    its component stays open at END; the arguments
                        END but no ARGS (the args only in a later   of the call in the next MESSAGES_SNAPSHOT fill
                        MESSAGES_SNAPSHOT: ag-ui-langgraph's        its props (props_delta + end); none by the end
                        whole-call bug)                             of the run: ``{}``
args_from_snapshot      a tool call whose arguments do not begin    its fragments are held (a component's dropped),
                        as a JSON object / array (the first         its END and results wait; the arguments of the
                        fragment lost: ag-ui-langgraph 0.0.47 with  call in the run's next MESSAGES_SNAPSHOT go out
                        a model that sends name and first           as one ARGS + END just before it; none: its own
                        fragment in one chunk)                      fragments, refused (protocol_violation)
result_before_end       TOOL_CALL_RESULT while its call is open     TOOL_CALL_END (and the component's end) first
open_at_finish          text, reasoning, tool calls or steps still  closed (TEXT_MESSAGE_END, REASONING_MESSAGE_END,
                        open at RUN_FINISHED / end of stream        REASONING_END, TOOL_CALL_END when the arguments
                                                                    are complete JSON, STEP_FINISHED) before it
======================  ==========================================  ===============================================

Not repairable -- the run ends with ``RUN_ERROR`` after the open text, reasoning
and steps are closed (tool calls stay open: their arguments may be partial JSON,
and a client may execute a call on its END), never with a Python exception: any
other rule the Verifier enforces (``TOOL_CALL_ARGS`` for a call never started: its
tool is unknown; a START for an id already open; a sub-agent left running;
malformed or truncated tool arguments, code of the parser's error), and an inner
agent that raises after its first event (``RUN_ERROR`` with its message, code
``agent_error`` -- an :class:`~agui_engine.protocol.errors.AguiEngineError` keeps its own
code -- logged with the traceback on the ``agui_engine.loops.agent_loop`` logger). An
inner agent that refuses its input before its first event with a
:class:`RemoteInputError` or :class:`UsageError` is let through, so a transport
refuses the request (the :class:`~agui_engine.protocol.agent.Agent` contract).
``RUN_ERROR`` of the inner agent passes after the same closing.

Cancellation: closing the loop's iterator (``aclose()``) closes the inner agent's
iterator before it returns. No IO happens here (the logger is the application's).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

import msgspec

from ..genui.a2ui import A2UICatalog, a2ui_catalog_option, a2ui_wire_tools
from ..genui.a2ui_clients import A2UISnapshots, a2ui_snapshots_option
from ..genui.components import Component, ServerTool, is_ui_tool
from ..genui.interactables import UPDATE_RESULT, Interactable, interactables_from_context
from ..genui.mcp_apps import AppToolResult, McpAppsProxy
from ..genui.resources import Resource, ResourceRegistry, collect_resources
from ..genui.uispec import UISpecTool
from ..jsonstream import MAX_BYTES
from ..llm import LLMTool
from ..protocol.accumulator import Accumulator
from ..protocol.agent import Agent, AgentFunction, agent_capabilities, as_agent
from ..protocol.capabilities import AgentCapabilities, ToolsCapabilities, merge_capabilities
from ..protocol.codec import LegacyThinkingMapper
from ..protocol.errors import MAX_ERROR_MESSAGE_CHARS, AguiEngineError, LimitExceededError, RemoteInputError, UsageError
from ..protocol.events import (
    PROTOCOL_VERSION,
    Event,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    Tool,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UnknownEvent,
)
from ..protocol.ids import new_id
from ..protocol.verify import REASONING, REASONING_MESSAGE, STEP, TEXT, TOOL, ChunkExpander, Kind, Verifier
from ..protocol.writer import end_event, end_events, start_event
from .a2ui_agent import a2ui_events
from .thread import MAX_TOOL_ROUNDS
from .tool_calls import (
    ToolCallRequest,
    ToolCallTransformer,
    ToolSpec,
    build_tools,
    client_tools_of,
    component_result,
    wire_tools,
)
from .tool_runner import resolve_tool_runner, tool_outcome
from .tool_sources import SourceToolCache, ToolSource, check_tool_sources, run_source_tools

__all__ = ["AGENT_ERROR_CODE", "AgentLoop", "REPAIRS", "RepairHook", "run_agent_loop"]

_log = logging.getLogger("agui_engine.loops.agent_loop")

#: ``RUN_ERROR.code`` when the inner agent raised something that is not an
#: :class:`~agui_engine.protocol.errors.AguiEngineError` (which keeps its own code).
AGENT_ERROR_CODE: Final = "agent_error"

#: Every repair the loop makes, by id: (what breaks, what the loop does). The
#: module docstring has the table; ``spec/agent-loop.md`` the same with examples.
REPAIRS: Final[Mapping[str, tuple[str, str]]] = {
    "missing_run_started": ("the first event is not RUN_STARTED", "RUN_STARTED of the input first"),
    "duplicate_run_started": ("RUN_STARTED while the run is running", "dropped"),
    "missing_run_finished": ("the stream ends without RUN_FINISHED or RUN_ERROR", "open things closed, RUN_FINISHED"),
    "run_ids": ("RUN_FINISHED names other ids than RUN_STARTED", "RUN_STARTED's ids"),
    "after_terminal": ("events after RUN_FINISHED / RUN_ERROR", "dropped"),
    "legacy_thinking": ("THINKING_* events", "REASONING_* with fresh ids"),
    "missing_text_start": ("TEXT_MESSAGE_CONTENT for a message never started", "TEXT_MESSAGE_START first"),
    "missing_reasoning_start": ("REASONING_MESSAGE_CONTENT for a message never started",
                                "REASONING_MESSAGE_START first"),
    "empty_delta": ("a content or args event with an empty delta", "dropped"),
    "end_not_open": ("an END / STEP_FINISHED for an id that is not open", "dropped"),
    "tool_call_parent": ("TOOL_CALL_START without parentMessageId", "the current assistant message id"),
    "tool_call_chunk": ("a tool call delivered as TOOL_CALL_CHUNK", "expanded to START + ARGS + END"),
    "args_in_snapshot": ("a component call with no ARGS, its arguments in MESSAGES_SNAPSHOT",
                         "props from the snapshot (else {} at the end of the run)"),
    "args_from_snapshot": ("a tool call whose streamed arguments do not begin as JSON (the first fragment lost)",
                           "its arguments from the run's next MESSAGES_SNAPSHOT naming it"),
    "result_before_end": ("TOOL_CALL_RESULT while its call is open", "TOOL_CALL_END first"),
    "open_at_finish": ("text, reasoning, tool calls or steps open at the end of the run", "closed before it"),
}

_LEGACY_TYPES: Final = frozenset(
    {"THINKING_START", "THINKING_END", "THINKING_TEXT_MESSAGE_START", "THINKING_TEXT_MESSAGE_CONTENT",
     "THINKING_TEXT_MESSAGE_END"}
)

# The run's phases.
_BEFORE, _RUNNING, _ENDED = 0, 1, 2


class RepairHook(Protocol):
    """Called once per repair: ``(repair id from REPAIRS, what was repaired)``."""

    def __call__(self, repair: str, detail: str) -> None: ...


def _no_hook(repair: str, detail: str) -> None:
    _log.debug("agent loop repair %s: %s", repair, detail)


class _Plan(msgspec.Struct, frozen=True):
    """What one run needs before the inner agent starts."""

    inner_input: RunAgentInput
    specs: dict[str, ToolSpec]


class AgentLoop:
    """An :class:`~agui_engine.protocol.agent.Agent` around an inner Agent: tools in, verified events out.

    ``AgentLoop(agent, *, components=(), interactables=(), strict=True,
    id_factory=new_id, on_repair=None, append_strings=True, resources=None)``. ``agent`` is anything with
    ``run(input) -> AsyncIterator[Event]``. ``components`` are offered on every run
    (a client component of the same name replaces one); ``interactables`` are
    components already on the screen (the run's ``interactables`` context adds
    more, and wins for an id given twice). ``strict`` sends the tools in strict form
    when their schemas allow. ``id_factory`` makes component, message and result
    ids. ``on_repair(id, detail)`` is told about every repair (default: a DEBUG
    log line). ``append_strings`` (default): component props grow their strings with
    ``append`` operations (linear bytes); ``False`` is strict RFC 6902 (see
    ``spec/components.md``). ``ui_spec`` (a :class:`~agui_engine.genui.uispec.UISpecTool`)
    adds the ``render_ui`` tool to every run's tools; the inner agent's calls of it
    stream their tree as the component ``generative-ui`` and are answered like
    component calls. ``resources``: data resources served beside those the
    components name; ``loop.resources`` holds them all for a gateway in front of it
    (``spec/components.md`` §9). See the module docstring for what a run does.

    Raises :class:`UsageError` for an ``agent`` without ``run`` or two components
    with one name; :meth:`run` raises :class:`RemoteInputError` for an invalid
    client component or interactable before any event.
    """

    def __init__(
        self,
        agent: Agent | AgentFunction,
        *,
        components: Sequence[Component] = (),
        interactables: Sequence[Interactable] = (),
        strict: bool = True,
        id_factory: Callable[[], str] = new_id,
        on_repair: RepairHook | None = None,
        append_strings: bool = True,
        resources: ResourceRegistry | Sequence[Resource] | None = None,
        ui_spec: UISpecTool | None = None,
        a2ui: A2UICatalog | bool | None = None,
        mcp_servers: Sequence[ToolSource] = (),
        a2ui_snapshots: A2UISnapshots = "auto",
    ) -> None:
        self.agent: Agent = as_agent(agent, where="AgentLoop(agent)")
        #: The remote tool sources (MCP servers) whose tools the inner agent gets as client
        #: tools, run by this loop (``spec/mcp.md`` §4).
        self.tool_sources: list[ToolSource] = check_tool_sources(mcp_servers)
        self._source_tools: SourceToolCache = {}  # the sources' server tools, rebuilt only when they change
        if ui_spec is not None and not isinstance(ui_spec, UISpecTool):
            raise UsageError(f"ui_spec must be a UISpecTool, got {type(ui_spec).__name__}")
        self.ui_spec = ui_spec
        #: The A2UI catalog ``render_a2ui`` draws with (``a2ui=True``: the basic one), or ``None``.
        self.a2ui = a2ui_catalog_option(a2ui, "AgentLoop")
        #: A2UI progress as whole ``ACTIVITY_SNAPSHOT`` events instead of deltas (``a2ui_snapshots=True``):
        #: for clients that do not apply ``ACTIVITY_DELTA`` (assistant-ui), still component by component;
        #: ``"auto"`` (the default): for the runs of such a client (``genui/a2ui_clients.py``).
        self.a2ui_snapshots = a2ui_snapshots_option(a2ui_snapshots, "AgentLoop")
        self.components = list(components)
        #: The data resources the components show (``resources`` plus those they name),
        #: served by a gateway in front of this loop (``POST <path>/data/query``).
        self.resources: ResourceRegistry = collect_resources(self.components, resources)
        self.interactables = list(interactables)
        self.strict = strict
        self.id_factory = id_factory
        self.on_repair: RepairHook = on_repair or _no_hook
        self.append_strings = bool(append_strings)
        # UsageError now, not per run
        build_tools(self.components, (), interactables=self.interactables, strict=strict, ui_spec=ui_spec)
        # The props checker (jsonschema, ~80 ms to import) loads at startup, not at the first component of a run.
        importlib.import_module("jsonschema")

    @property
    def mcp_apps(self) -> McpAppsProxy:
        """Answers the proxied MCP requests of the apps of :attr:`tool_sources` (the gateway's
        registry asks for it when it starts). Raises UsageError for two servers on one endpoint
        without distinct ``server_id``."""
        return McpAppsProxy.of_sources(self.tool_sources)

    def _plan(self, input: RunAgentInput) -> _Plan:
        """The run's tools and the input the inner agent gets. Raises RemoteInputError."""
        client_components, client_tools = client_tools_of(input)
        names = {c.name for c in client_components}
        components = [c for c in self.components if c.name not in names] + client_components
        from_context = interactables_from_context(input.context)
        ids = {i.id for i in from_context}
        interactables = [i for i in self.interactables if i.id not in ids] + from_context
        try:
            # the client tools take part only so that one of theirs named like an update tool wins
            specs = build_tools(components, client_tools, interactables=interactables, strict=self.strict,
                                ui_spec=self.ui_spec)
        except UsageError as exc:
            raise RemoteInputError(f"run tools: {exc.message}") from None
        ours = {name: spec for name, spec in specs.items()
                if spec.component is not None or spec.interactable is not None or spec.ui_spec is not None}
        tools = [t for t in input.tools if not is_ui_tool(t.name)]
        tools += wire_tools(ours.values())
        unchanged = not ours and len(tools) == len(input.tools)
        return _Plan(inner_input=input if unchanged else msgspec.structs.replace(input, tools=tools), specs=ours)

    async def capabilities(self) -> AgentCapabilities:
        """The inner agent's capabilities (``agent_capabilities``: a remote agent's are
        asked of its server) with the loop's own tools added to ``tools.items``: a
        ``show_component_<Name>`` tool per component, the update tools of the loop's
        interactables, ``render_ui`` with ``ui_spec``, ``render_a2ui`` with ``a2ui``, as the inner agent is
        offered them.
        The tools of ``mcp_servers`` are added too, as the inner agent is offered them now (from
        each server's cache; an unreachable server's are absent).
        Raises what the inner agent's ``capabilities()`` raises."""
        inner = await agent_capabilities(self.agent)
        specs = build_tools(self.components, (), interactables=self.interactables, strict=self.strict,
                            ui_spec=self.ui_spec)
        if self.tool_sources:
            remote = await run_source_tools(self.tool_sources, set(specs))
            specs = build_tools(self.components, remote, interactables=self.interactables, strict=self.strict,
                                ui_spec=self.ui_spec)
        items = wire_tools(specs.values()) + a2ui_wire_tools(self.a2ui, resources=self.resources)
        if not items:
            return inner
        return merge_capabilities(inner, AgentCapabilities(tools=ToolsCapabilities(supported=True, items=items)))

    @property
    def verifies_output(self) -> bool:
        """Whether every event :meth:`run` yields has been accepted by the run's Verifier (the
        loop's own, built on the run's input): true without ``a2ui``, whose surface events are
        added after the loop's stream. A gateway in front of the loop then verifies nothing
        again (``transports.agent_host.AgentHost.verifies``)."""
        return self.a2ui is None

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream one run's events; with ``a2ui`` through :func:`~agui_engine.loops.a2ui_agent.a2ui_events`
        (``render_a2ui`` offered, its calls drawn as ``a2ui-surface`` activities)."""
        if self.a2ui is None:
            return self._run(input)
        return a2ui_events(self._run, input, self.a2ui, ids=self.id_factory, resources=self.resources,
                           snapshots=self.a2ui_snapshots)

    async def _run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream one run's events (see the module docstring). Raises only before the first event."""
        plan = self._plan(input)
        inner_input, remote = plan.inner_input, {}
        if self.tool_sources:
            # the sources' tools give way by name to every tool the inner agent already gets
            taken = set(plan.specs) | {t.name for t in inner_input.tools}
            remote = {t.name: t for t in await run_source_tools(self.tool_sources, taken, cache=self._source_tools)}
            tools = [*inner_input.tools,
                     *(Tool(name=t.name, description=t.description, parameters=t.parameters) for t in remote.values())]
            inner_input = msgspec.structs.replace(inner_input, tools=tools)
        stream: AsyncIterator[Any] = self._rounds(inner_input, remote) if remote else self.agent.run(inner_input)
        state = _Run(input, {**plan.specs, **_app_specs(remote)}, self.id_factory, self.on_repair,
                     self.append_strings)
        received = False
        continues, passing = state.verifier.continues, state.passing
        try:
            try:
                async for event in stream:
                    received = True
                    cls = event.__class__
                    if (cls is TextMessageContentEvent or cls is ReasoningMessageContentEvent
                            or cls is ToolCallArgsEvent and event.tool_call_id in passing) \
                            and event.delta and not state.lanes and continues(event):
                        # the bulk of every stream -- text, reasoning, a foreign call's arguments --
                        # continuing an open entity: nothing to repair or transform, verified as it passes
                        yield event
                        continue
                    for out in state.feed(event):
                        yield out
                    if state.phase == _ENDED:
                        break
                closing = state.finish()
            except Exception as exc:  # noqa: BLE001 - the run ends with RUN_ERROR, never a traceback
                if not received and isinstance(exc, (RemoteInputError, UsageError)):
                    raise  # the inner agent refused its input: the caller refuses the request
                closing = state.crash(exc)
            for out in closing:
                yield out
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()


    async def _rounds(self, first: RunAgentInput, remote: Mapping[str, ServerTool]) -> AsyncIterator[Any]:
        """The inner agent's events when the loop runs tools of its own (``remote``): after an
        inner run that ends with calls of them and no result, the loop runs them (their
        ``TOOL_CALL_RESULT`` goes out as if the inner agent had sent it) and runs the inner
        agent again on the conversation so far -- a fresh run id, its ``RUN_STARTED`` dropped,
        its end given the first run's ids -- up to ``MAX_TOOL_ROUNDS`` follow-ups; one stream
        for the client."""
        conversation = Accumulator(input=first)
        inner = first
        runner = resolve_tool_runner(None)
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            stream: AsyncIterator[Any] = self.agent.run(inner)
            follow_up = False
            try:
                async for event in stream:
                    cls = event.__class__
                    if round_ and cls is RunStartedEvent:
                        continue
                    if cls is RunFinishedEvent:
                        calls = _unanswered_calls(conversation, remote)
                        for call_id, name, arguments in calls:
                            apps: list[AppToolResult] = []
                            if arguments is None:
                                content = f"Error: the arguments of {name} are not a JSON object"
                            else:  # the source bounds the call itself (MCP: call_timeout)
                                content, _ = await tool_outcome(runner, remote[name], arguments, inline=False,
                                                                timeout=None, on_app=apps.append, call_id=call_id)
                            result = ToolCallResultEvent(message_id=self.id_factory(), tool_call_id=call_id,
                                                         content=content, role="tool")
                            conversation.apply(result)
                            yield result
                            for app in apps:  # a tool with an MCP app: shown after its result
                                activity = app.activity(self.id_factory(), arguments)
                                conversation.apply(activity)
                                yield activity
                        if calls and round_ < MAX_TOOL_ROUNDS:
                            follow_up = True
                            break
                    if round_ and cls is RunFinishedEvent:
                        event = msgspec.structs.replace(event, thread_id=first.thread_id, run_id=first.run_id)
                    conversation.apply(event)
                    yield event
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            if not follow_up:
                return
            inner = msgspec.structs.replace(first, run_id=self.id_factory(), parent_run_id=first.run_id,
                                            messages=conversation.messages_as_structs(), state=conversation.state)


def _app_specs(remote: Mapping[str, ServerTool]) -> dict[str, ToolSpec]:
    """The loop's own tools whose MCP app is known before they run, as the run's
    :class:`~agui_engine.loops.tool_calls.ToolCallTransformer` tracks them: each call is announced at
    its ``TOOL_CALL_START`` and its arguments' operations stream to the app as the inner agent sends
    them, from the call's one parse (:class:`~agui_engine.loops.tool_calls.ToolCallRequest`, the
    code ``LLMAgent`` runs; spec/mcp.md "Tool input while the model types"). No null policy: the
    inner agent was offered the server's own schema (not the strict form), so a ``null`` it sends
    is meant and stays."""
    return {name: ToolSpec(llm_tool=LLMTool(name=name, description=tool.description, parameters=tool.parameters),
                           app=tool.app)
            for name, tool in remote.items() if tool.app is not None}


def _unanswered_calls(
    conversation: Accumulator, remote: Mapping[str, ServerTool]
) -> list[tuple[str, str, dict[str, Any] | None]]:
    """``(call id, tool name, arguments or None when not a JSON object)`` of the calls of
    ``remote`` tools in the conversation that have no tool message yet, in order."""
    answered = {m.get("toolCallId") for m in conversation.messages if m.get("role") == "tool"}
    out: list[tuple[str, str, dict[str, Any] | None]] = []
    for message in conversation.messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("toolCalls") or ():
            function = call.get("function") or {}
            name, call_id = function.get("name"), call.get("id")
            if not isinstance(name, str) or name not in remote or not isinstance(call_id, str) or call_id in answered:
                continue
            try:
                arguments = msgspec.json.decode(function.get("arguments") or "{}")
            except msgspec.DecodeError:
                arguments = None
            out.append((call_id, name, arguments if isinstance(arguments, dict) else None))
    return out


def run_agent_loop(
    agent: Agent | AgentFunction,
    input: RunAgentInput,
    *,
    components: Sequence[Component] = (),
    interactables: Sequence[Interactable] = (),
    **options: Any,
) -> AsyncIterator[Event]:
    """``AgentLoop(agent, components=..., interactables=..., **options).run(input)``."""
    return AgentLoop(agent, components=components, interactables=interactables, **options).run(input)


# --------------------------------------------------------------------------- the run's state machine


class _Run:
    """One run's event transformer (no IO): :meth:`feed` per inner event, then
    :meth:`finish` (the inner stream ended) or :meth:`crash` (it raised). Every
    event returned has been accepted by :attr:`verifier`."""

    __slots__ = (
        "answered",
        "awaiting",
        "expander",
        "foreign",
        "held",
        "input",
        "lanes",
        "legacy",
        "make_id",
        "message_id",
        "on_repair",
        "passing",
        "phase",
        "run_ids",
        "skipping",
        "tools",
        "verifier",
    )

    def __init__(self, input: RunAgentInput, specs: Mapping[str, ToolSpec], make_id: Callable[[], str],
                 on_repair: RepairHook, append_strings: bool = True) -> None:
        self.input = input
        self.make_id = make_id
        self.on_repair = on_repair
        self.verifier = Verifier(input=input)
        self.expander = ChunkExpander()
        self.lanes = False  # the expander has an open chunk lane
        self.tools = ToolCallTransformer(specs, make_id, append_strings=append_strings)
        self.foreign: set[str] = set()  # calls of tools that are not ours: verified, passed unchanged
        self.passing: set[str] = set()  # foreign calls whose arguments began as JSON: the fast path
        self.held: dict[str, _Held] = {}  # foreign calls whose arguments did not (args_from_snapshot)
        self.skipping: set[str] = set()  # our calls whose first fragment was not JSON: fragments dropped
        self.legacy: LegacyThinkingMapper | None = None
        self.phase = _BEFORE
        self.run_ids = (input.thread_id, input.run_id)
        self.message_id: str | None = None  # the assistant message tool calls without a parent belong to
        self.awaiting: dict[str, ToolCallRequest] = {}  # component calls ended without ARGS
        self.answered: set[str] = set()  # tool calls with a TOOL_CALL_RESULT

    # -- entry points

    def feed(self, event: Any) -> list[Event]:
        """The events one inner event becomes (a RUN_ERROR ends them when it cannot be repaired)."""
        out: list[Event] = []
        try:
            if self.phase == _RUNNING and not self.lanes and event.__class__ not in _ROUTED:
                # nothing to repair or transform (state, custom, steps, activity ...): verified, passed
                self.verifier.feed(event)
                out.append(event)
            else:
                self._route(event, out)
        except AguiEngineError as exc:  # a ProtocolViolation, a tool call's bad arguments
            self._fail(RunErrorEvent.from_error(exc), out)
        return out

    def finish(self) -> list[Event]:
        """The inner stream ended: the missing end of the run (nothing when it ended properly)."""
        out: list[Event] = []
        if self.phase == _ENDED:
            return out
        try:
            if self.phase == _BEFORE:
                self._start(out, "the inner agent sent no event")
            self.on_repair("missing_run_finished", "the inner stream ended while the run was running")
            self._on_run_finished(RunFinishedEvent(thread_id=self.run_ids[0], run_id=self.run_ids[1]), out)
        except AguiEngineError as exc:
            self._fail(RunErrorEvent.from_error(exc), out)
        return out

    def crash(self, exc: Exception) -> list[Event]:
        """The inner agent raised: close what is open, ``RUN_ERROR`` with its message."""
        out: list[Event] = []
        if self.phase == _ENDED:
            return out
        if isinstance(exc, AguiEngineError):
            # a typed failure (an upstream unreachable or refusing): its message says what happened,
            # so one line a run; the traceback (the HTTP library's, three chained parts) only at DEBUG
            _log.error("the inner agent of run %s failed: %s", self.input.run_id, exc.message)
            _log.debug("the inner agent of run %s failed", self.input.run_id, exc_info=exc)
        else:  # anything else is a bug in the agent: its traceback is what finds it
            _log.error("the inner agent of run %s failed", self.input.run_id, exc_info=exc)
        if isinstance(exc, AguiEngineError):
            error = RunErrorEvent.from_error(exc)
        else:
            message = f"the agent failed: {type(exc).__name__}: {exc}"
            error = RunErrorEvent(message=message[:MAX_ERROR_MESSAGE_CHARS], code=AGENT_ERROR_CODE)
        self._fail(error, out)
        return out

    # -- emitting

    def _emit(self, event: Event, out: list[Event]) -> None:
        """Verify, then send (raises ProtocolViolation: the event is not sent)."""
        self.verifier.feed(event)
        out.append(event)

    def _start(self, out: list[Event], why: str) -> None:
        self.on_repair("missing_run_started", why)
        self._emit(RunStartedEvent(thread_id=self.input.thread_id, run_id=self.input.run_id,
                                   parent_run_id=self.input.parent_run_id, protocol_version=PROTOCOL_VERSION), out)
        self.phase = _RUNNING

    def _fail(self, error: RunErrorEvent, out: list[Event]) -> None:
        """End the run with ``error`` after closing the open text, reasoning and steps."""
        if self.phase == _ENDED:
            return
        if self.phase == _BEFORE:
            self._start(out, "the run failed before its first event")
        elif self.lanes or self.verifier.any_open():
            try:
                self._close_lanes(out)
            except AguiEngineError:  # pragma: no cover - closing what the verifier says is open is valid
                _log.exception("agent loop: closing run %s before its RUN_ERROR failed", self.input.run_id)
        self.phase = _ENDED
        self.verifier.feed(error)  # accepted in every phase but _ENDED
        out.append(error)

    def _close_lanes(self, out: list[Event]) -> None:
        """Close the open text messages, reasoning and steps (tool calls stay: partial JSON)."""
        verifier = self.verifier
        # a chunk-opened lane is open in the verifier too (its START went out): closed below
        self.expander = ChunkExpander()
        self.lanes = False
        # the writer's close order and END events, for what the verifier saw open
        for event in end_events(verifier.open_ids):
            self._emit(event, out)
        for step in reversed(verifier.open_ids(STEP)):  # innermost first
            self._emit(end_event(STEP, step), out)

    # -- routing

    def _route(self, event: Any, out: list[Event]) -> None:
        cls = event.__class__
        if self.phase != _RUNNING or cls is UnknownEvent:
            event = self._outside(event, out)
            if event is None:
                return
            cls = event.__class__
        if self.lanes or cls in _CHUNKS:
            expanded = self.expander.feed(event)
            self.lanes = self.expander.open_lanes > 0
            for one in expanded:
                if one.__class__ is ToolCallStartEvent and cls is ToolCallChunkEvent:
                    self.on_repair("tool_call_chunk", f"tool call {one.tool_call_id!r} delivered as TOOL_CALL_CHUNK")
                handler = _HANDLERS.get(one.__class__)
                if handler is None:
                    self._emit(one, out)
                else:
                    handler(self, one, out)
            return
        handler = _HANDLERS.get(cls)
        if handler is None:
            self._emit(event, out)
        else:
            handler(self, event, out)

    def _outside(self, event: Any, out: list[Event]) -> Any:
        """The rarer cases: an unknown event, the run's start and its end. Returns the event
        to route on (``None``: nothing more to do)."""
        if self.phase == _ENDED:
            self.on_repair("after_terminal", f"{_name(event)} after the end of the run, dropped")
            return None
        if event.__class__ is UnknownEvent:
            if event.type not in _LEGACY_TYPES:
                # a newer protocol's event: neutral for the verifier, relayed whole (the codec
                # writes it back unchanged)
                cast(list[Any], out).append(event)
                return None
            if self.legacy is None:
                self.legacy = LegacyThinkingMapper(self.make_id)
            self.on_repair("legacy_thinking", f"{event.type} mapped to REASONING_*")
            event = msgspec.convert(self.legacy.map(event.data), Event)
        if self.phase == _BEFORE:
            if event.__class__ is RunStartedEvent:
                self._emit(event, out)
                self.phase = _RUNNING
                self.run_ids = (event.thread_id, event.run_id)
                return None
            # (a RUN_ERROR too: the protocol allows it first, ag-ui-validate does not -- AGUI001)
            self._start(out, f"the first event is {_name(event)}")
        return event

    def _handle(self, event: Any, out: list[Event]) -> None:
        handler = _HANDLERS.get(event.__class__)
        if handler is None:
            self._emit(event, out)
        else:
            handler(self, event, out)

    # -- lifecycle

    def _on_run_started(self, event: RunStartedEvent, out: list[Event]) -> None:
        self.on_repair("duplicate_run_started", f"RUN_STARTED {event.run_id!r} inside the run, dropped")

    def _on_run_finished(self, event: RunFinishedEvent, out: list[Event]) -> None:
        self._close_all(out)
        answered = self._answer(out)
        outcome = event.outcome
        if answered and isinstance(outcome, RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            pending = [i for i in outcome.pending_tool_call_ids if i not in answered]
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending) if pending else None
            event = msgspec.structs.replace(event, outcome=outcome)
        if (event.thread_id, event.run_id) != self.run_ids:
            self.on_repair("run_ids", f"RUN_FINISHED named {event.thread_id!r}/{event.run_id!r}")
            event = msgspec.structs.replace(event, thread_id=self.run_ids[0], run_id=self.run_ids[1])
        self._emit(event, out)
        self.phase = _ENDED

    def _on_run_error(self, event: RunErrorEvent, out: list[Event]) -> None:
        self._fail(event, out)

    def _close_all(self, out: list[Event]) -> None:
        """Everything open at the end of the run, closed (tool calls need complete arguments)."""
        verifier = self.verifier
        if not self.lanes and not self.awaiting and not verifier.any_open():
            return  # the common case: a run that closed what it opened
        if self.expander.open_lanes:
            for event in self.expander.pending():
                self._handle(event, out)
            self.expander = ChunkExpander()
            self.lanes = False
        open_calls = verifier.open_ids(TOOL)
        if open_calls or any(verifier.open_ids(kind) for kind in (TEXT, REASONING, REASONING_MESSAGE, STEP)):
            self.on_repair("open_at_finish", "closing what is still open at the end of the run")
        for call_id in open_calls:
            # the writer's END, handed to _on_tool_end as if the inner agent had sent it: the
            # transformer puts the component's events around it (see _tool_end)
            self._on_tool_end(_tool_end(call_id), out)
        for call_id in list(self.held):
            # no snapshot named it: its own arguments go out and the verifier refuses them
            # (protocol_violation tool_call.args_not_json), as without the repair
            self._release(call_id, None, out)
        for call_id, call in list(self.awaiting.items()):
            del self.awaiting[call_id]
            self.on_repair("args_in_snapshot", f"no arguments for {call_id!r} arrived: {{}}")
            self._emit_all(call._close()[1], out)
        self._close_lanes(out)

    def _answer(self, out: list[Event]) -> set[str]:
        """TOOL_CALL_RESULT for the component and update calls the inner agent left unanswered."""
        answered: set[str] = set()
        for call in self.tools.call_list:
            if call.id in self.answered or not call.done:
                continue
            if call.component_id is not None:
                content, _ = component_result(call)
            elif call.interactable_id is not None:
                content = UPDATE_RESULT
            else:
                continue
            self._emit(ToolCallResultEvent(message_id=self.make_id(), tool_call_id=call.id, content=content,
                                           role="tool"), out)
            answered.add(call.id)
        self.answered |= answered
        return answered

    # -- text and reasoning

    def _on_text_start(self, event: TextMessageStartEvent, out: list[Event]) -> None:
        self._emit(event, out)
        if event.role in (None, "assistant"):
            self.message_id = event.message_id

    def _on_content(self, event: TextMessageContentEvent | ReasoningMessageContentEvent, out: list[Event]) -> None:
        """A text or reasoning CONTENT (the Kind of its message: :data:`_CONTENT_KINDS`) that is
        not the plain continuation of an open message: an empty delta is dropped, a message
        never started gets the writer's START first (``missing_text_start`` /
        ``missing_reasoning_start``)."""
        if event.delta and self.verifier.continues(event):
            out.append(event)
            return
        if not event.delta:
            self.on_repair("empty_delta", f"empty {_name(event)} of {event.message_id!r}")
            return
        kind = _CONTENT_KINDS[event.__class__]
        if not self.verifier.is_open(kind, event.message_id):
            self.on_repair(_MISSING_START[kind], f"{kind.label} {event.message_id!r}")
            # a text START goes through _on_text_start: tool calls without a parent belong to it
            self._handle(start_event(kind, event.message_id, subagent_run_id=event.subagent_run_id), out)
        self._emit(event, out)

    def _on_end(self, event: Any, out: list[Event]) -> None:
        kind = _END_KINDS[event.__class__]
        key = getattr(event, kind.id_attr)
        if not self.verifier.is_open(kind, key):
            self.on_repair("end_not_open", f"{_name(event)} for {key!r}, which is not open")
            return
        self._emit(event, out)

    # -- tool calls

    def _emit_all(self, events: list[Any], out: list[Event]) -> None:
        for event in events:
            self._emit(event, out)

    def _on_tool_start(self, event: ToolCallStartEvent, out: list[Event]) -> None:
        call_id = event.tool_call_id
        if call_id in self.tools.by_id or call_id in self.foreign:
            self._emit(event, out)  # the verifier names the rule (already open / id reused)
            return
        if event.parent_message_id is None:
            if self.message_id is None:
                self.message_id = self.make_id()
            self.on_repair("tool_call_parent", f"tool call {call_id!r} -> message {self.message_id!r}")
            event = msgspec.structs.replace(event, parent_message_id=self.message_id)
        self.verifier.feed(event)  # first: a rejected START must not be tracked
        if event.tool_call_name not in self.tools.specs:
            # not a tool this loop added: its arguments are the inner agent's business and pass
            # unchanged (the verifier still checks that they end as one JSON value)
            self.foreign.add(call_id)
            out.append(event)
            return
        temp: list[Event] = []
        self.tools.open(event, temp)
        out.append(temp[0])
        self._emit_all(temp[1:], out)

    def _on_tool_args(self, event: ToolCallArgsEvent, out: list[Event]) -> None:
        if not event.delta:
            self.on_repair("empty_delta", f"empty TOOL_CALL_ARGS of {event.tool_call_id!r}")
            return
        call_id = event.tool_call_id
        call = self.tools.by_id.get(call_id)
        if call is None:
            if call_id in self.foreign and call_id not in self.passing and self.verifier.is_open(TOOL, call_id):
                self._first_foreign_args(event, out)
            else:
                self._emit(event, out)  # a foreign call's arguments; else the verifier names the rule (not open)
            return
        if call_id in self.skipping:
            return  # its arguments come from the run's MESSAGES_SNAPSHOT (args_from_snapshot)
        if call.done or call.id in self.awaiting:
            self._emit(event, out)  # the verifier names the rule (not open)
            return
        if not call._parts and event.delta.lstrip()[:1] not in ("{", ""):
            # broken from its first fragment (ag-ui-langgraph loses the fragment that came with the
            # tool name): the component waits for the snapshot's arguments, as a call without ARGS does
            self.on_repair("args_from_snapshot", f"the arguments of {call_id!r} do not begin as an object: dropped")
            self.skipping.add(call_id)
            return
        temp: list[Event] = []
        self.tools.args(call, event, temp)
        self._emit_all(temp, out)

    def _first_foreign_args(self, event: ToolCallArgsEvent, out: list[Event]) -> None:
        """Arguments of a foreign call before they began as JSON: passed once they begin a
        JSON object or array (the call takes the fast path from then on), held when they
        begin with anything else (a lost first fragment: args_from_snapshot)."""
        held = self.held.get(event.tool_call_id)
        if held is not None:
            held.size += len(event.delta)
            if held.size > MAX_BYTES:
                raise LimitExceededError(
                    f"tool call {event.tool_call_id!r}: its arguments, held for a MESSAGES_SNAPSHOT "
                    f"(args_from_snapshot), exceed {MAX_BYTES} characters", code="json_limit_exceeded")
            held.parts.append(event.delta)
            return
        text = event.delta.lstrip()
        if not text:
            self._emit(event, out)  # whitespace: the next fragment decides
        elif text[0] in "{[":
            self.passing.add(event.tool_call_id)
            self._emit(event, out)
        else:
            self.held[event.tool_call_id] = _Held(event.delta)

    def _release(self, call_id: str, arguments: str | None, out: list[Event]) -> None:
        """A held call's ARGS (its own fragments, or ``arguments`` from a snapshot), END and the
        results that came for it meanwhile. The verifier checks the arguments are one JSON value."""
        held = self.held.pop(call_id)
        end = held.end or _tool_end(call_id)
        text = "".join(held.parts) if arguments is None else arguments
        if text:
            self._emit(ToolCallArgsEvent(tool_call_id=call_id, delta=text, subagent_run_id=end.subagent_run_id), out)
        self._emit(end, out)
        self._emit_all(held.results, out)

    def _on_tool_end(self, event: ToolCallEndEvent, out: list[Event]) -> None:
        call_id = event.tool_call_id
        if call_id in self.foreign and self.verifier.is_open(TOOL, call_id):
            held = self.held.get(call_id)
            if held is None:
                self._emit(event, out)  # the verifier checks the arguments are one JSON value
            elif held.end is not None:
                self.on_repair("end_not_open", f"TOOL_CALL_END for {call_id!r}, which is not open")
            else:
                held.end = event
                if _is_json("".join(held.parts)):
                    self._release(call_id, None, out)  # late, not broken: nothing to repair
                # else: it waits for a MESSAGES_SNAPSHOT naming it (args_from_snapshot)
            return
        call = self.tools.by_id.get(call_id)
        if call is None or call.done or call.id in self.awaiting:
            self.on_repair("end_not_open", f"TOOL_CALL_END for {call_id!r}, which is not open")
            return
        if not call.arguments_text and (call.component_id is not None or call.interactable_id is not None):
            # a whole call whose arguments travel elsewhere (a later MESSAGES_SNAPSHOT): the
            # component waits for them instead of ending with no props
            self._emit(event, out)
            self.awaiting[call.id] = call
            return
        temp: list[Event] = []
        self.tools.close(call, event, temp)
        self._emit_all(temp, out)

    def _on_tool_result(self, event: ToolCallResultEvent, out: list[Event]) -> None:
        call_id = event.tool_call_id
        held = self.held.get(call_id)
        if held is not None:
            held.results.append(event)  # sent after its call's END
            self.answered.add(call_id)
            return
        if self.verifier.is_open(TOOL, call_id) and call_id not in self.awaiting:
            self.on_repair("result_before_end", f"TOOL_CALL_RESULT for open call {call_id!r}")
            self._on_tool_end(_tool_end(call_id), out)
        self._emit(event, out)
        self.answered.add(event.tool_call_id)

    def _on_messages_snapshot(self, event: MessagesSnapshotEvent, out: list[Event]) -> None:
        if self.held:
            # before the snapshot: a client applying ARGS after it would append them to the
            # arguments the snapshot gave the call
            for message in event.messages:
                for tool_call in getattr(message, "tool_calls", None) or ():
                    held = self.held.get(tool_call.id)
                    if held is not None and held.end is not None:
                        self.on_repair("args_from_snapshot", f"arguments of {tool_call.id!r} from MESSAGES_SNAPSHOT")
                        self._release(tool_call.id, tool_call.function.arguments, out)
        self._emit(event, out)
        if not self.awaiting:
            return
        for message in event.messages:
            for tool_call in getattr(message, "tool_calls", None) or ():
                call = self.awaiting.pop(tool_call.id, None)
                if call is None:
                    continue
                self.on_repair("args_in_snapshot", f"arguments of {call.id!r} from MESSAGES_SNAPSHOT")
                # (the wire text is not sent: the call's END went out; the snapshot carries the arguments)
                custom = call._feed(tool_call.function.arguments)[1] if tool_call.function.arguments else []
                self._emit_all([*custom, *call._close()[1]], out)


class _Held:
    """A foreign call held by args_from_snapshot: its fragments, END and results, not yet sent."""

    __slots__ = ("end", "parts", "results", "size")

    def __init__(self, first: str) -> None:
        self.parts = [first]
        self.size = len(first)  # characters held: at most jsonstream.MAX_BYTES
        self.end: ToolCallEndEvent | None = None
        self.results: list[ToolCallResultEvent] = []


def _tool_end(call_id: str) -> ToolCallEndEvent:
    """The writer's TOOL_CALL_END for ``call_id`` (:func:`~agui_engine.protocol.writer.end_event`).

    The loop closes a tool call its inner agent left open (``open_at_finish``,
    ``result_before_end``, a held call with no END) with this event, but not through an
    :class:`~agui_engine.protocol.writer.EventWriter`: the inner agent opened the call (its
    id, its START passed through), so what is open is the Verifier's to know, and the END
    must go through :meth:`_Run._on_tool_end`, where the
    :class:`~agui_engine.loops.tool_calls.ToolCallTransformer` puts events around it (the
    argument text its parser held back before, the component's closing ``tambo.component.*``
    events after), or the component waits (``args_in_snapshot``), or the END and results are
    held (``args_from_snapshot``). The writer's ``end_tool`` / ``close_all`` only return or
    append the bare END.
    """
    return cast(ToolCallEndEvent, end_event(TOOL, call_id))


def _is_json(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True


def _name(event: Any) -> str:
    kind = getattr(event, "type", None)
    return str(getattr(kind, "value", kind) or type(event).__name__)


_CHUNKS: Final = frozenset({TextMessageChunkEvent, ToolCallChunkEvent, ReasoningMessageChunkEvent})
#: A CONTENT event's class -> the Kind of the message it belongs to.
_CONTENT_KINDS: Final[dict[type, Kind]] = {
    TextMessageContentEvent: TEXT,
    ReasoningMessageContentEvent: REASONING_MESSAGE,
}
#: The Kind of a message a CONTENT arrived for before its START -> the repair (REPAIRS) that opens it.
_MISSING_START: Final[dict[Kind, str]] = {TEXT: "missing_text_start", REASONING_MESSAGE: "missing_reasoning_start"}
_END_KINDS: Final[dict[type, Kind]] = {
    TextMessageEndEvent: TEXT,
    ReasoningMessageEndEvent: REASONING_MESSAGE,
    ReasoningEndEvent: REASONING,
    StepFinishedEvent: STEP,
}
#: Event classes :meth:`_Run.feed` cannot simply verify and pass: those with a handler, chunks,
#: unknown events (filled in below).
_ROUTED: frozenset[type] = frozenset()
#: Event class -> how the run treats it; every other event is verified and passed.
_HANDLERS: Final[dict[type, Callable[[_Run, Any, list[Event]], None]]] = {
    RunStartedEvent: _Run._on_run_started,
    RunFinishedEvent: _Run._on_run_finished,
    RunErrorEvent: _Run._on_run_error,
    TextMessageStartEvent: _Run._on_text_start,
    TextMessageContentEvent: _Run._on_content,
    TextMessageEndEvent: _Run._on_end,
    ReasoningMessageContentEvent: _Run._on_content,
    ReasoningMessageEndEvent: _Run._on_end,
    ReasoningEndEvent: _Run._on_end,
    StepFinishedEvent: _Run._on_end,
    ToolCallStartEvent: _Run._on_tool_start,
    ToolCallArgsEvent: _Run._on_tool_args,
    ToolCallEndEvent: _Run._on_tool_end,
    ToolCallResultEvent: _Run._on_tool_result,
    MessagesSnapshotEvent: _Run._on_messages_snapshot,
}
_ROUTED = frozenset({*_HANDLERS, *_CHUNKS, UnknownEvent})
