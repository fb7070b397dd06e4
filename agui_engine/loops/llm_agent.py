"""``LLMAgent``: the decision loop as an AG-UI agent, a whole run from RUN_STARTED to the end.

Theory of operation
-------------------
:meth:`LLMAgent.run` takes a ``RunAgentInput`` and drives the model step by step
with :func:`agui_engine.loops.decision.run_decision_loop`, passing every event of every
step through. Between steps it does what the model asked for:

==========================  ==================================================================
tool call of a step         what happens
==========================  ==================================================================
component                   ``TOOL_CALL_RESULT`` "shown" (keeps the client's message history
(``show_component_<Name>``) valid: every tool call has its result); props that do not match
                            the component's schema add the error with its JSON path (the
                            props were shown; the model may show it again) -> the model continues
interactable update         ``TOOL_CALL_RESULT`` :data:`~agui_engine.genui.interactables.UPDATE_RESULT`
                            -> the model continues
server tool                 the Python function runs (``async def`` awaited on the loop, a
                            sync function in a worker thread, see below; parallel calls of
                            one step run concurrently); its result, or the error it raised,
                            becomes ``TOOL_CALL_RESULT`` -> the model continues
client tool                 pending: after the step the run ends with ``RUN_FINISHED``
(``RunAgentInput.tools``)   ``outcome {type: "success", pendingToolCallIds}``; the client runs
                            the tools and starts the next run with their results
unknown tool                ``TOOL_CALL_RESULT`` with an error naming the tool -> the model
                            continues (it can recover; a hallucinated name is not fatal)
==========================  ==================================================================

A step without tool calls ends the run (``RUN_FINISHED``). More than
``max_steps`` model calls end it with ``RUN_ERROR`` code ``step_limit_exceeded``
(results already emitted stay valid).

Components and tools of a run: the server's (constructor) merged with the
client's -- ``RunAgentInput.tools`` entries named ``show_component_<Name>`` and
``forwardedProps.availableComponents`` (Tambo's ``name``, ``description``,
``propsSchema``) are components; every other ``RunAgentInput.tools`` entry is a
client tool. On a name clash the client wins (the client renders the component
or runs the tool); within the client, a ``tools`` entry beats an
``availableComponents`` entry. Interactables come from the ``interactables``
context entry; other context entries go into the system prompt.

Errors: an invalid input (bad client tool or component, bad interactables) is a
:class:`~agui_engine.protocol.errors.RemoteInputError` raised *before* ``RUN_STARTED``,
so a transport can refuse it with a 4xx. After ``RUN_STARTED`` every failure is
a ``RUN_ERROR`` event that ends the stream (``RunErrorEvent.from_error(error)``; an
unexpected exception becomes code ``internal_error`` with no traceback), after
the decision loop has closed the open text and reasoning. Usage of all steps is
summed per (provider, model) into ``RUN_FINISHED.usage`` / ``RUN_ERROR.usage``.

Server tools run through a :class:`~agui_engine.loops.tool_runner.ToolRunner`
(``tool_runner``; the standard one is :class:`agui_engine.transports.ThreadedToolRunner`):
worker threads for sync tools and deadlines are IO, which the core leaves to the
layer that owns the event loop. A gateway serves many runs on one loop, and a
blocking function (a database driver, ``requests``, a CPU-bound helper) run
inline would stall every other stream, so a sync tool runs in a worker thread --
except the tools named in ``inline_tools`` (known to return at once; they skip the
thread hop, tens of microseconds). Without a ``tool_runner`` a run uses the one whoever
runs the agent supplies (every server, ``agui_engine.transports.run_agent``, a ``Thread``;
see :mod:`~agui_engine.loops.tool_runner`); when there is none and a tool needs one, the run
is refused before ``RUN_STARTED`` with a :class:`UsageError` saying what to do: never a
loop silently blocked.

Tool timeout: each server tool call gets ``tool_timeout`` seconds (default
:data:`DEFAULT_TOOL_TIMEOUT_SECONDS`; ``None`` waits forever). A tool that does
not return in time becomes an error tool result (like a raising tool) and the
run goes on: the model is told and can answer without it. An ``async def`` tool
is cancelled; a sync tool in its worker thread cannot be killed, so the run stops
waiting, the thread runs the function to its end and its result is discarded
(it still holds one executor thread until then). An ``inline_tools`` tool runs
on the loop and blocks it, so no timeout can interrupt it.

Cancellation: closing the event iterator (``aclose()``, or cancelling the task
awaiting it) closes the decision loop, which closes the model stream at once;
running tool coroutines are cancelled with it. A sync tool already running in
its thread cannot be stopped (Python cannot kill a thread): the run stops
waiting for it at once, the thread runs the function to its end, and its result
or exception is discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

import msgspec

from ..genui.a2ui import A2UICatalog, a2ui_catalog_option, a2ui_wire_tools
from ..genui.a2ui_clients import A2UISnapshots, a2ui_snapshots_option
from ..genui.components import (
    Component,
    ServerTool,
    tool_from_callable,
)
from ..genui.interactables import (
    INTERACTABLES_CONTEXT,
    UPDATE_RESULT,
    Interactable,
    interactables_from_context,
)
from ..genui.mcp_apps import AppToolResult, McpAppsProxy
from ..genui.resources import Resource, ResourceRegistry, collect_resources
from ..genui.uispec import UISpecTool
from ..llm import LLMClient, LLMTool, Usage, model_reasoning, resolve_tool_choice
from ..protocol.capabilities import (
    AgentCapabilities,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    StateCapabilities,
    ToolsCapabilities,
)
from ..protocol.errors import AguiEngineError, LimitExceededError, RemoteInputError, UsageError
from ..protocol.events import (
    PROTOCOL_VERSION,
    AssistantMessage,
    Event,
    FunctionCall,
    Message,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TokenUsage,
    ToolCall,
    ToolCallResultEvent,
    ToolMessage,
)
from ..protocol.ids import new_id
from .a2ui_agent import a2ui_events
from .decision import Decision, run_decision_loop
from .tool_calls import ToolCallRequest, build_tools, client_tools_of, component_result, wire_tools
from .tool_runner import ToolRunner, require_tool_runner, resolve_tool_runner, tool_outcome
from .tool_sources import SourceToolCache, ToolSource, check_tool_sources, run_source_tools

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TOOL_TIMEOUT_SECONDS",
    "IDENTITY_TYPE",
    "LLMAgent",
    "StepLimitExceededError",
]

#: Model calls one run may make. The longest built-in flow -- tools, then a
#: component, then text, one city at a time for a few cities without parallel
#: calls -- takes 7; 10 leaves headroom while stopping a model that keeps
#: calling tools forever (each step costs a full model call).
DEFAULT_MAX_STEPS: Final = 10

#: Seconds one server tool call may take before it becomes an error result.
#: A user is watching the run stream: a tool slower than a minute (a slow query,
#: a nested HTTP call with its own retries) is rare and better run as a client or
#: background job, while a hung one (a lost connection with no timeout of its
#: own) would otherwise hold the run -- and its model stream -- forever.
DEFAULT_TOOL_TIMEOUT_SECONDS: Final = 60.0

#: ``identity.type`` of the capabilities of the agents this engine runs itself (the
#: framework field: ``"langgraph"`` and ``"crewai"`` for the adapters' agents).
IDENTITY_TYPE: Final = "agui-engine"


class StepLimitExceededError(LimitExceededError):
    """The model was still calling tools after ``max_steps`` model calls."""

    default_code = "step_limit_exceeded"


class _RunSetup(msgspec.Struct, kw_only=True):
    components: list[Component]
    server_tools: list[ServerTool]
    client_tools: list[LLMTool]
    interactables: list[Interactable]
    context: list[tuple[str, str]]
    #: the runner of this run's server tools (the agent's own, else the supplied one)
    tool_runner: ToolRunner | None = None


def _carry_updates(setup: _RunSetup, decision: Decision) -> None:
    """The step's interactable updates become the instances' current props (state) for the next step:
    its update tools merge into them and its system prompt shows them."""
    by_id = {item.id: n for n, item in enumerate(setup.interactables)}
    for call in decision.tool_calls:
        spec, kind = call.spec, call.update_kind
        if call.done and spec is not None and spec.interactable is not None and kind is not None:
            n = by_id.get(spec.interactable.id)
            if n is not None:
                setup.interactables[n] = setup.interactables[n].updated(kind, spec.interactable.current(kind))


class LLMAgent:
    """An :class:`~agui_engine.protocol.agent.Agent` that runs the decision loop over an :class:`LLMClient`.

    ``tools`` are :class:`~agui_engine.genui.components.ServerTool` values or plain
    functions (sync or ``async def``; their schema comes from the signature,
    see :func:`~agui_engine.genui.components.tool_from_callable`). An ``async def``
    function is awaited on the event loop; a sync function runs in a worker
    thread of ``tool_runner`` so that a blocking call never stalls other runs on
    the loop, except the tools named in ``inline_tools`` (sync tools known to
    return at once, which then skip the thread hop). A cancelled run stops
    waiting for a sync tool at once; the thread finishes on its own and its
    result is discarded. ``tool_runner`` (a
    :class:`~agui_engine.loops.tool_runner.ToolRunner`) is optional: without one a run
    uses the runner whoever runs the agent supplies (the standard
    ``agui_engine.transports.ThreadedToolRunner``: the servers, ``agui_engine.transports.run_agent``;
    a ``Thread``'s own).

    ``tool_timeout`` (seconds, default :data:`DEFAULT_TOOL_TIMEOUT_SECONDS`,
    ``None`` for none) bounds each server tool call: a late tool becomes an error
    tool result and the run goes on; an async tool is cancelled, a sync tool's
    thread finishes on its own and its result is discarded (inline tools block
    the loop and cannot be timed out).

    ``append_strings`` (default ``True``): component props grow their strings on
    the wire with ``append`` operations carrying only the new characters (linear
    bytes); ``False`` is strict RFC 6902 (``replace`` of the whole string per
    fragment, quadratic bytes -- for consumers that apply only standard ops).

    ``ui_spec`` (a :class:`~agui_engine.genui.uispec.UISpecTool`) offers the ``render_ui``
    tool on every step: the model composes a tree of the allowed components (by
    default the run's components), streamed as the component ``generative-ui``;
    a refused tree or props that do not fit a component's schema are told to the
    model in the tool result, and the run goes on.

    ``resources`` (a :class:`~agui_engine.genui.resources.ResourceRegistry` or a list of
    :class:`~agui_engine.genui.resources.Resource`): data resources to serve beside those
    the components name (``Component(resources=...)``); ``agent.resources`` holds
    them all, and a gateway in front of the agent serves them at
    ``POST <path>/data/query`` (``spec/components.md`` §9).

    ``force_tool_choice`` applies to the first model call of each run only (the
    forced tool then runs and the model continues freely). ``id_factory`` makes
    every message, component and result id (default: random uuid4 hex).

    Raises :class:`UsageError` for a tool that cannot be described, two
    server tools / components with one name, an ``inline_tools`` name that is
    not a server tool, or a ``tool_timeout`` that is not a positive number; :meth:`run`
    raises, before ``RUN_STARTED``, :class:`~agui_engine.llm.UnknownToolChoiceError` when
    ``force_tool_choice`` names no tool of that run, and :class:`UsageError` when its server
    tools need a runner and neither ``tool_runner`` nor a supplied runner is there.
    """

    def __init__(
        self,
        llm: LLMClient,
        *,
        components: Sequence[Component] = (),
        tools: Sequence[ServerTool | Callable[..., Any]] = (),
        max_steps: int = DEFAULT_MAX_STEPS,
        strict: bool = True,
        parallel_tool_calls: bool = True,
        force_tool_choice: str | None = None,
        custom_instructions: str | None = None,
        memories: Sequence[str] | None = None,
        max_output_tokens: int | None = None,
        id_factory: Callable[[], str] = new_id,
        inline_tools: Collection[str] = (),
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT_SECONDS,
        append_strings: bool = True,
        tool_runner: ToolRunner | None = None,
        resources: ResourceRegistry | Sequence[Resource] | None = None,
        ui_spec: UISpecTool | None = None,
        a2ui: A2UICatalog | bool | None = None,
        mcp_servers: Sequence[ToolSource] = (),
        a2ui_snapshots: A2UISnapshots = "auto",
    ) -> None:
        if not isinstance(max_steps, int) or max_steps < 1:
            raise UsageError(f"max_steps must be a positive int, got {max_steps!r}")
        if tool_timeout is not None and (
            isinstance(tool_timeout, bool) or not isinstance(tool_timeout, (int, float)) or not tool_timeout > 0
        ):
            raise UsageError(f"tool_timeout must be a positive number of seconds or None, got {tool_timeout!r}")
        self.tool_timeout = tool_timeout
        self.llm = llm
        self.components = list(components)
        #: The data resources this agent's components show, served by a gateway in front of
        #: it (``POST <path>/data/query``): ``resources`` plus those the components name.
        self.resources: ResourceRegistry = collect_resources(self.components, resources)
        self.tools = [t if isinstance(t, ServerTool) else tool_from_callable(t) for t in tools]
        _unique([c.tool_name for c in self.components] + [t.name for t in self.tools], "server")
        if isinstance(inline_tools, str):
            raise UsageError("inline_tools must be a collection of tool names, not one string")
        unknown = sorted(set(inline_tools) - {t.name for t in self.tools})
        if unknown:
            raise UsageError(f"inline_tools names no server tool: {', '.join(map(repr, unknown))}")
        self.inline_tools = frozenset(inline_tools)
        self.tool_runner = tool_runner
        self.max_steps = max_steps
        self.strict = strict
        self.parallel_tool_calls = parallel_tool_calls
        self.force_tool_choice = force_tool_choice
        self.custom_instructions = custom_instructions
        self.memories = list(memories) if memories else None
        self.max_output_tokens = max_output_tokens
        self.id_factory = id_factory
        self.append_strings = bool(append_strings)
        if ui_spec is not None and not isinstance(ui_spec, UISpecTool):
            raise UsageError(f"ui_spec must be a UISpecTool, got {type(ui_spec).__name__}")
        self.ui_spec = ui_spec
        #: The A2UI catalog ``render_a2ui`` draws with (``a2ui=True``: the basic one), or ``None``.
        self.a2ui = a2ui_catalog_option(a2ui, "LLMAgent")
        #: A2UI progress as whole ``ACTIVITY_SNAPSHOT`` events instead of deltas (``a2ui_snapshots=True``):
        #: for clients that do not apply ``ACTIVITY_DELTA`` (assistant-ui), still component by component;
        #: ``"auto"`` (the default): for the runs of such a client (``genui/a2ui_clients.py``).
        self.a2ui_snapshots = a2ui_snapshots_option(a2ui_snapshots, "LLMAgent")
        #: The remote tool sources (MCP servers) whose tools every run offers (``spec/mcp.md``).
        self.tool_sources: list[ToolSource] = check_tool_sources(mcp_servers)
        self._source_tools: SourceToolCache = {}  # the sources' server tools, rebuilt only when they change
        # The props checker (jsonschema, ~80 ms to import) loads now, at startup, rather
        # than stalling the event loop at the first component call of the first run.
        import jsonschema  # noqa: F401

    @property
    def mcp_apps(self) -> McpAppsProxy:
        """Answers the proxied MCP requests of the apps of :attr:`tool_sources` (the gateway's
        registry asks for it when it starts). Raises UsageError for two servers on one endpoint
        without distinct ``server_id``."""
        return McpAppsProxy.of_sources(self.tool_sources)

    # ------------------------------------------------------------------ setup

    def _setup(self, input: RunAgentInput) -> _RunSetup:
        """Merge the server's and the client's components and tools. Raises RemoteInputError."""
        client_components, client_tool_list = client_tools_of(input)
        client_tools = {t.name: t for t in client_tool_list}
        client_names = {c.name for c in client_components}
        components = [c for c in self.components if c.name not in client_names]
        components.extend(client_components)
        server_tools = [t for t in self.tools if t.name not in client_tools]
        context = [(c.description, c.value) for c in input.context if c.description != INTERACTABLES_CONTEXT]
        return _RunSetup(
            components=components,
            server_tools=server_tools,
            client_tools=list(client_tools.values()),
            interactables=interactables_from_context(input.context),
            context=context,
        )

    def _tool_names(self, setup: _RunSetup) -> set[str]:
        """Every tool name the run offers before the sources' tools. Raises RemoteInputError."""
        try:
            specs = build_tools(setup.components, [*setup.server_tools, *setup.client_tools],
                                interactables=setup.interactables, strict=self.strict, ui_spec=self.ui_spec)
        except UsageError as exc:
            raise RemoteInputError(f"run tools: {exc.message}") from None
        return set(specs)
    # ------------------------------------------------------------------ capabilities

    async def capabilities(self) -> AgentCapabilities:
        """What this agent has, from its configuration (the same on every call):

        * ``tools``: the model's server-side tools as it is offered them -- the server
          tools, a ``show_component_<Name>`` tool per component, ``render_ui`` with
          ``ui_spec``, ``render_a2ui`` with ``a2ui`` -- in ``items``; client tools are used (``clientProvided``),
          ``parallelCalls`` as configured;
        * ``reasoning``: what the model client declares (``model_reasoning``: the
          provider adapters say whether thinking / reasoning summaries reach the client);
        * ``state``: no ``STATE_SNAPSHOT`` / ``STATE_DELTA`` events and nothing kept
          between runs (the conversation comes in each input); ``memory`` when
          ``memories`` are given;
        * ``execution``: at most ``max_steps`` model calls a run;
        * ``humanInTheLoop``: no interrupts (a client tool call ends the run with
          ``pendingToolCallIds`` instead);
        * ``identity.type``: ``"agui-engine"``.

        The tools of ``mcp_servers`` are among the ``items`` as a run offers them now (from each
        server's cache; an unreachable server's are absent).

        Raises UsageError when the model client's ``reasoning_capabilities()`` is malformed."""
        specs = build_tools(self.components, self.tools, strict=self.strict, ui_spec=self.ui_spec)
        if self.tool_sources:
            remote = await run_source_tools(self.tool_sources, set(specs))
            specs = build_tools(self.components, [*self.tools, *remote], strict=self.strict, ui_spec=self.ui_spec)
        return AgentCapabilities(
            identity=IdentityCapabilities(type=IDENTITY_TYPE),
            tools=ToolsCapabilities(
                supported=True,
                items=wire_tools(specs.values()) + a2ui_wire_tools(self.a2ui, resources=self.resources),
                parallel_calls=self.parallel_tool_calls,
                client_provided=True,
            ),
            state=StateCapabilities(snapshots=False, deltas=False, memory=bool(self.memories), persistent_state=False),
            reasoning=model_reasoning(self.llm),
            execution=ExecutionCapabilities(max_iterations=self.max_steps),
            human_in_the_loop=HumanInTheLoopCapabilities(interrupts=False),
        )

    # ------------------------------------------------------------------ the run

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream one run's events; with ``a2ui`` through :func:`~agui_engine.loops.a2ui_agent.a2ui_events`
        (``render_a2ui`` offered, its calls drawn as ``a2ui-surface`` activities)."""
        if self.a2ui is None:
            return self._run(input)
        return a2ui_events(self._run, input, self.a2ui, ids=self.id_factory, resources=self.resources,
                           snapshots=self.a2ui_snapshots)

    async def _run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream one run's events. Raises only before the first event (invalid input)."""
        setup = self._setup(input)
        if self.tool_sources:
            # the sources' tools (cached by each source; an unreachable one offers none) give way
            # to every tool of the run by name (spec/mcp.md §3)
            taken = self._tool_names(setup)
            setup.server_tools.extend(await run_source_tools(self.tool_sources, taken, cache=self._source_tools))
        # a client tool list or schema that cannot be turned into model tools is the client's fault
        try:
            specs = build_tools(
                setup.components,
                [*setup.server_tools, *setup.client_tools],
                interactables=setup.interactables,
                strict=self.strict,
                ui_spec=self.ui_spec,
            )
        except UsageError as exc:
            raise RemoteInputError(f"run tools: {exc.message}") from None
        # a forced tool this run does not offer is the server's misconfiguration: refuse before any event
        resolve_tool_choice(self.force_tool_choice, specs)
        # so is a sync tool with no runner to put it in a thread (spec/decision.md §2)
        setup.tool_runner = resolve_tool_runner(self.tool_runner)
        require_tool_runner(setup.tool_runner, setup.server_tools, what="server tools", inline=self.inline_tools,
                            timeout=self.tool_timeout)

        yield RunStartedEvent(
            thread_id=input.thread_id,
            run_id=input.run_id,
            parent_run_id=input.parent_run_id,
            # the SDK leaves it to the producer; a 1.x client warns on a newer peer, older ones ignore it
            protocol_version=PROTOCOL_VERSION,
        )
        usage: dict[tuple[str | None, str | None], TokenUsage] = {}
        try:
            pending: list[str] = []
            async with aclosing(self._steps(input, setup, usage, pending)) as events:
                async for event in events:
                    yield event
            yield RunFinishedEvent(
                thread_id=input.thread_id,
                run_id=input.run_id,
                outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=pending) if pending else None,
                usage=list(usage.values()) or None,
            )
        except AguiEngineError as exc:
            yield RunErrorEvent(message=exc.message, code=exc.code, usage=list(usage.values()) or None)
        except Exception as exc:  # noqa: BLE001 - a run must end with RUN_ERROR, never a traceback
            yield RunErrorEvent(
                message=f"internal error in the agent ({type(exc).__name__})",
                code="internal_error",
                usage=list(usage.values()) or None,
            )

    async def _steps(
        self,
        input: RunAgentInput,
        setup: _RunSetup,
        usage: dict[tuple[str | None, str | None], TokenUsage],
        pending: list[str],
    ) -> AsyncGenerator[Event, None]:
        """The events of every step; fills ``usage`` and the ``pending`` client tool call ids."""
        history: list[Message] = list(input.messages)
        server = {t.name: t for t in setup.server_tools}
        client = {t.name for t in setup.client_tools}
        for step in range(self.max_steps):
            decision: Decision | None = None
            loop = run_decision_loop(
                self.llm,
                history,
                components=setup.components,
                tools=[*setup.server_tools, *setup.client_tools],
                interactables=setup.interactables,
                context=setup.context,
                force_tool_choice=self.force_tool_choice if step == 0 else None,
                custom_instructions=self.custom_instructions,
                memories=self.memories,
                id_factory=self.id_factory,
                append_strings=self.append_strings,
                strict=self.strict,
                parallel_tool_calls=self.parallel_tool_calls,
                max_output_tokens=self.max_output_tokens,
                ui_spec=self.ui_spec,
            )
            try:
                async with aclosing(loop) as items:
                    async for item in items:
                        decision = item.decision
                        for event in item.events:
                            yield event
            finally:
                if decision is not None and decision.usage is not None:
                    _add_usage(usage, decision.usage)
            assert decision is not None  # the loop always yields a final item
            history.extend(_assistant_messages(decision))
            if not decision.tool_calls:
                return
            _carry_updates(setup, decision)
            runnable: list[ToolCallRequest] = []
            for call in decision.tool_calls:
                if call.component_id is not None or call.interactable_id is not None:
                    continue
                if call.name in server:
                    runnable.append(call)
                elif call.name in client:
                    pending.append(call.id)
            apps: dict[str, AppToolResult] = {}
            results = await self._run_tools(runnable, server, setup.tool_runner, apps)
            for call in decision.tool_calls:
                if call.id in pending:
                    continue
                if call.component_id is not None:
                    content, error = component_result(call)
                elif call.interactable_id is not None:
                    content, error = UPDATE_RESULT, None
                elif call.name in server:
                    content, error = results[call.id]
                else:
                    error = f"unknown tool {call.name!r}: it is not one of the tools offered"
                    content = f"Error: {error}"
                message_id = self.id_factory()
                yield ToolCallResultEvent(message_id=message_id, tool_call_id=call.id, content=content, role="tool")
                history.append(ToolMessage(id=message_id, tool_call_id=call.id, content=content, error=error))
                app = apps.get(call.id)
                if app is not None:  # a tool with an MCP app: the front end is told to show it
                    yield app.activity(self.id_factory(), call.arguments)
            if pending:
                return
        raise StepLimitExceededError(
            f"the model was still calling tools after max_steps={self.max_steps} model calls"
        )

    async def _run_tools(
        self, calls: Sequence[ToolCallRequest], server: Mapping[str, ServerTool], runner: ToolRunner | None,
        apps: dict[str, AppToolResult],
    ) -> dict[str, tuple[str, str | None]]:
        """Run the server tool calls of one step concurrently -> {call id: (content, error)}; the
        results of tools with an MCP app are put in ``apps`` (by call id) as well."""

        async def one(call: ToolCallRequest) -> tuple[str, str | None]:
            tool = server[call.name]
            return await tool_outcome(runner, tool, call.arguments, inline=tool.name in self.inline_tools,
                                      timeout=self.tool_timeout, on_app=lambda app: apps.__setitem__(call.id, app),
                                      call_id=call.id)

        if not calls:
            return {}
        outcomes = await asyncio.gather(*(one(call) for call in calls))
        return {call.id: outcome for call, outcome in zip(calls, outcomes)}


def _assistant_messages(decision: Decision) -> list[Message]:
    """The messages the step adds to the history (what the model said, for the next call).

    In the model's order: each reasoning message where it came (one per reasoning
    block, each with its own value byte-exact: providers reject a thinking block
    whose signature was changed), the text between them as assistant messages, and
    the tool calls on the last assistant message -- one of their own when reasoning
    came after the last text, so they stay after that reasoning. The first text
    keeps the step's message id; later pieces get ``<id>.<n>`` (the history is the
    model's input; a client builds its own messages from the events).
    """
    tool_calls = [
        ToolCall(
            id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments_text or "{}"), encrypted_value=c.signature
        )
        for c in decision.tool_calls
    ]
    parts = list(decision.transcript)
    if tool_calls and (not parts or not isinstance(parts[-1], str)):
        parts.append("")  # the calls' own message, after the last reasoning
    out: list[Message] = []
    texts = 0
    for i, part in enumerate(parts):
        if not isinstance(part, str):
            out.append(part)
            continue
        message_id = decision.message_id if texts == 0 else f"{decision.message_id}.{texts}"
        texts += 1
        calls = tool_calls if i == len(parts) - 1 and tool_calls else None
        out.append(AssistantMessage(id=message_id, content=part or None, tool_calls=calls))
    return out


def _add_usage(totals: dict[tuple[str | None, str | None], TokenUsage], usage: Usage) -> None:
    key = (usage.provider, usage.model)
    old = totals.get(key)

    def add(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else a + b

    totals[key] = TokenUsage(
        provider=usage.provider,
        model=usage.model,
        input_tokens=add(old.input_tokens if old else None, usage.input_tokens),
        output_tokens=add(old.output_tokens if old else None, usage.output_tokens),
        total_tokens=add(old.total_tokens if old else None, usage.total_tokens),
        reasoning_tokens=add(old.reasoning_tokens if old else None, usage.reasoning_tokens),
        cached_input_tokens=add(old.cached_input_tokens if old else None, usage.cached_input_tokens),
    )


def _unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"two {what} tools or components are named {name!r}")
        seen.add(name)
