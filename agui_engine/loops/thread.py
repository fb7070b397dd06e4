"""A thread client: one conversation across runs, over any Agent, with client tools and interrupts.

Theory of operation
-------------------
A :class:`Thread` holds what a front end holds for one conversation -- an
:class:`~agui_engine.protocol.accumulator.Accumulator` (messages, state, component blocks,
runs, pending interrupts) -- and drives an :class:`~agui_engine.protocol.agent.Agent` (in
process, or a transport client: ``SSEAgent``, ``WebSocketAgent``, ``StdioAgent``;
the thread does no IO itself, it awaits the agent's events).

:meth:`Thread.send` adds the user's message and runs the agent with the whole
thread (messages, state, the client tools' definitions, context). When a run ends,
the thread looks at how (a small table, evaluated after every run):

=====================================  ===============================================
the run ended with                     what the thread does
=====================================  ===============================================
client tool calls pending (the         runs each registered Python callable locally
``RUN_FINISHED`` outcome's             (``async def`` awaited, a sync function in a
``pendingToolCallIds``; without them,  worker thread), adds a tool message per call --
calls of registered tools that have    the result (a ``str`` as is, anything else as
no result yet)                         JSON), or the error the function raised, as
                                       ``"Error: <Type>: <message>"`` with ``error``
                                       set -- and starts a follow-up run
an interrupt and an ``on_interrupt``   asks it for each interrupt's
handler                                :class:`~agui_engine.protocol.events.ResumeEntry` and
                                       starts a follow-up run with ``resume``
anything else (a pending call of a     stops: the turn is returned; pending calls and
tool the thread does not know, an      interrupts stay on it (:meth:`resume`,
interrupt without a handler, an        :meth:`add_tool_result` + :meth:`run` continue)
error, plain success)
=====================================  ===============================================

Follow-up runs are bounded by ``max_tool_rounds`` (default :data:`MAX_TOOL_ROUNDS`),
like assistant-ui's automatic re-send: past it :class:`ToolRoundsExceededError` is
raised and everything accumulated so far stays on the thread.

Each call of :meth:`send` / :meth:`run` / :meth:`resume` returns a :class:`Turn`:
the runs it made, the events it received and what is still pending.

Every run names the thread's latest run as its ``parentRunId`` (AG-UI lineage), so a
gateway that keeps thread histories (``spec/transports.md`` §4.4) chains them, and a
thread restored from one branch (:meth:`Thread.restore`, the messages and state an agent
with a ``history`` method -- ``SSEAgent`` -- returns) continues that branch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from ..genui.a2ui import (
    A2UI_ACTIVITY_TYPE,
    A2UI_OPERATIONS_KEY,
    A2UIActionError,
    a2ui_data_model,
    a2ui_resource_bindings,
)
from ..genui.component_stream import COMPONENT_HANDLERS
from ..genui.components import ServerTool, tool_from_callable
from ..protocol.accumulator import Accumulator, RunRecord
from ..protocol.agent import Agent
from ..protocol.errors import LimitExceededError, UsageError
from ..protocol.events import (
    AnyEvent,
    Context,
    Event,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    Tool,
    ToolMessage,
    UserMessage,
)
from ..protocol.ids import new_id
from .tool_runner import (
    ToolRunner,
    format_tool_result,
    require_tool_runner,
    resolve_tool_runner,
    run_tool,
    supplying_tool_runner,
)

__all__ = [
    "HistorySource",
    "InterruptHandler",
    "MAX_TOOL_ROUNDS",
    "Thread",
    "ToolRoundsExceededError",
    "Turn",
]

#: Follow-up runs one turn may start by itself (client tool results, interrupt answers).
#: A real flow needs 1-3 (a lookup, then a component); 8 leaves room for chains of
#: client tools while stopping an agent that keeps asking for tools forever -- each
#: round is a full agent run (model calls included). assistant-ui bounds its automatic
#: re-send the same way.
MAX_TOOL_ROUNDS: Final = 8

#: ``handler(interrupt) -> ResumeEntry`` (or an awaitable of one) answers an interrupt.
InterruptHandler = Callable[[Interrupt], "ResumeEntry | Awaitable[ResumeEntry]"]


@runtime_checkable
class HistorySource(Protocol):
    """An agent that can read a thread's compacted history back (``SSEAgent``)."""

    async def history(
        self, thread_id: str, *, run_id: str | None = None, run_key: str | None = None
    ) -> Sequence[AnyEvent]:
        """The events of the thread's branch ending at ``run_id`` (default: its latest run)."""
        ...


class ToolRoundsExceededError(LimitExceededError):
    """A turn needed more follow-up runs than ``max_tool_rounds``."""

    default_code = "tool_rounds_exceeded"


@dataclass
class Turn:
    """What one :meth:`Thread.send` (or :meth:`Thread.run`) did.

    ``runs``: the records of the runs it made, in order; ``events``: every event
    received; ``tool_results``: ``(tool call id, content, error)`` of the client tools
    run locally; ``pending_tool_call_ids`` / ``interrupts``: what the last run left
    for the caller.
    """

    runs: list[RunRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    tool_results: list[tuple[str, str, str | None]] = field(default_factory=list)
    pending_tool_call_ids: list[str] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The last run's status: ``"finished"``, ``"error"`` or ``"running"`` (no terminal event)."""
        return self.runs[-1].status if self.runs else "running"


class Thread:
    """One conversation with ``agent`` across runs (see the module docstring).

    ``Thread(agent, *, thread_id=None, tools=(), on_interrupt=None, context=(),
    state=None, forwarded_props=None, max_tool_rounds=MAX_TOOL_ROUNDS,
    id_factory=uuid4 hex, on_event=None, tool_runner=None)``. ``tools`` are client
    tools: Python callables (their schema from the signature, like server tools) or
    :class:`~agui_engine.genui.components.ServerTool` values; their definitions go to the
    agent in ``RunAgentInput.tools`` and they run here: ``async def`` ones on the
    event loop, sync ones through ``tool_runner`` (a
    :class:`~agui_engine.loops.tool_runner.ToolRunner`: a worker thread, so that a blocking
    tool does not stall the loop; default: the runner supplied to the caller's context, else
    the ``tool_runner`` the agent carries -- ``SSEAgent``, ``WebSocketAgent`` and ``StdioAgent``
    carry the standard ``ThreadedToolRunner``). The thread supplies that runner to an
    in-process agent it runs (an ``LLMAgent`` with sync tools and no runner of its own).
    ``on_event(event)`` sees every event as it arrives (to render live). Raises
    :class:`UsageError` for an ``agent`` without ``run``, two tools with one name, a bad
    ``max_tool_rounds``; :meth:`run` (and :meth:`send`) for a sync tool when there is no
    runner at all.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        thread_id: str | None = None,
        tools: Sequence[Callable[..., Any] | ServerTool] = (),
        on_interrupt: InterruptHandler | None = None,
        context: Sequence[Context] = (),
        state: Any = None,
        forwarded_props: Any = None,
        max_tool_rounds: int = MAX_TOOL_ROUNDS,
        id_factory: Callable[[], str] = new_id,
        on_event: Callable[[Event], None] | None = None,
        tool_runner: ToolRunner | None = None,
    ) -> None:
        if not callable(getattr(agent, "run", None)):
            raise UsageError(f"Thread needs an agent with run(input), got {type(agent).__name__}")
        if isinstance(max_tool_rounds, bool) or not isinstance(max_tool_rounds, int) or max_tool_rounds < 0:
            raise UsageError(f"max_tool_rounds must be a non-negative int, got {max_tool_rounds!r}")
        self.agent = agent
        self.id_factory = id_factory
        self.thread_id = thread_id or id_factory()
        self.tools: dict[str, ServerTool] = {}
        for tool in tools:
            st = tool if isinstance(tool, ServerTool) else tool_from_callable(tool)
            if st.name in self.tools:
                raise UsageError(f"two client tools are named {st.name!r}")
            self.tools[st.name] = st
        self.tool_runner = tool_runner
        self.on_interrupt = on_interrupt
        self.context = list(context)
        self.forwarded_props = forwarded_props
        self.max_tool_rounds = max_tool_rounds
        self.on_event = on_event
        self.accumulator = Accumulator(custom_handlers=COMPONENT_HANDLERS)
        self._action: dict[str, Any] | None = None  # the A2UI user action the next run carries
        if state is not None:
            self.accumulator.state = state

    @classmethod
    async def restore(
        cls, agent: Agent, thread_id: str, *, run_id: str | None = None, run_key: str | None = None, **options: Any
    ) -> Thread:
        """A thread rebuilt from the history ``agent`` reads back (a :class:`HistorySource`:
        ``SSEAgent`` reads ``GET <url>/threads/<threadId>``): its messages, state, runs and
        pending interrupts are those of the branch ending at ``run_id`` (default: the
        thread's latest run), and its next run continues that branch. ``run_key``: a run
        key of one of the thread's runs, for a gateway without per-client tokens.
        ``options``: the other :class:`Thread` arguments (tools, on_interrupt, ...).
        Raises UsageError for an agent without ``history``, and what ``history`` raises
        (``RemoteAgentError`` 404 ``unknown_thread``: none, or not yours)."""
        if not isinstance(agent, HistorySource):
            raise UsageError(f"Thread.restore needs an agent with history(thread_id), got {type(agent).__name__}")
        events = await agent.history(thread_id, run_id=run_id, run_key=run_key)
        thread = cls(agent, thread_id=thread_id, **options)
        thread.accumulator.apply_all(events)
        return thread

    async def rename(self, title: str) -> str:
        """Set this thread's title where the agent keeps it (``SSEAgent.rename_thread``:
        ``PATCH <url>/threads/<threadId>``); the title as kept. Raises UsageError for an
        agent that keeps no threads, and what the agent raises (404 ``unknown_thread``)."""
        rename = getattr(self.agent, "rename_thread", None)
        if rename is None:
            raise UsageError(f"{type(self.agent).__name__} keeps no threads: rename needs an SSEAgent, WebSocketAgent or StdioAgent")
        return str(await rename(self.thread_id, title))

    async def delete(self) -> None:
        """Delete this thread where the agent keeps it (``SSEAgent.delete_thread``). Raises
        UsageError for an agent that keeps no threads, and what the agent raises."""
        delete = getattr(self.agent, "delete_thread", None)
        if delete is None:
            raise UsageError(f"{type(self.agent).__name__} keeps no threads: delete needs an SSEAgent, WebSocketAgent or StdioAgent")
        await delete(self.thread_id)

    # ------------------------------------------------------------------ reading

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as wire-shaped dicts (component blocks under ``contentBlocks``)."""
        return self.accumulator.messages

    @property
    def state(self) -> Any:
        return self.accumulator.state

    @property
    def pending_interrupts(self) -> list[Interrupt]:
        return msgspec.convert(self.accumulator.pending_interrupts, list[Interrupt])

    @property
    def a2ui_surfaces(self) -> dict[str, dict[str, Any]]:
        """The A2UI surfaces on the thread: ``{surfaceId: {"messageId", "operations"}}`` from its
        ``a2ui-surface`` activity messages (the last painted state of each; a surface whose last
        operation is ``deleteSurface`` is gone). Lifecycle-only activities (building, retrying,
        failed) name no surface and are not listed."""
        out: dict[str, dict[str, Any]] = {}
        for message in self.accumulator.messages:
            content = message.get("content")
            if message.get("role") != "activity" or message.get("activityType") != A2UI_ACTIVITY_TYPE \
                    or not isinstance(content, dict):
                continue
            for op in content.get(A2UI_OPERATIONS_KEY) or ():
                for kind, body in op.items() if isinstance(op, dict) else ():
                    if not isinstance(body, dict) or not isinstance(body.get("surfaceId"), str):
                        continue
                    if kind == "deleteSurface":
                        out.pop(body["surfaceId"], None)
                    else:
                        out[body["surfaceId"]] = {"messageId": message["id"],
                                                  "operations": content[A2UI_OPERATIONS_KEY]}
        return out

    # ------------------------------------------------------------------ driving

    async def a2ui_action(self, name: str, surface_id: str, *, source_component_id: str | None = None,
                          context: dict[str, Any] | None = None) -> Turn:
        """Send an A2UI user action (a button press, a form submit) the way a front end does:
        ``forwardedProps.a2uiAction.userAction`` on the next run, which an A2UI loop turns into a
        ``log_a2ui_event`` call and result for the model. ``context``: the action's resolved
        context (bound paths already read). Raises :class:`~agui_engine.genui.a2ui.A2UIActionError`
        for a surface this thread does not show, :class:`UsageError` for an empty name."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"a2ui_action() takes the action's name, got {name!r}")
        if surface_id not in self.a2ui_surfaces:
            raise A2UIActionError(f"the A2UI action {name!r} names surface {surface_id!r}, which this thread "
                                  f"does not show (it shows {sorted(self.a2ui_surfaces)})")
        action: dict[str, Any] = {"name": name, "surfaceId": surface_id}
        if source_component_id is not None:
            action["sourceComponentId"] = source_component_id
        if context is not None:
            action["context"] = context
        self._action = action
        try:
            return await self.run()
        finally:
            self._action = None

    async def send(self, text: str) -> Turn:
        """Add a user message and run the agent (with automatic follow-up runs, see the table)."""
        if not isinstance(text, str):
            raise UsageError(f"send() takes the message text, got {type(text).__name__}")
        self.accumulator.add_message(UserMessage(id=self.id_factory(), content=text))
        return await self.run()

    async def resume(self, entries: Sequence[ResumeEntry]) -> Turn:
        """Answer pending interrupts yourself and run again with ``resume``."""
        return await self.run(resume=list(entries))

    def add_tool_result(self, tool_call_id: str, content: str, *, error: str | None = None) -> None:
        """Answer a pending tool call yourself (then :meth:`run`)."""
        self.accumulator.add_message(ToolMessage(id=self.id_factory(), tool_call_id=tool_call_id, content=content,
                                                 error=error))

    async def run(self, *, resume: list[ResumeEntry] | None = None) -> Turn:
        """Run the agent on the thread as it is, then follow up (see the table). Raises
        :class:`ToolRoundsExceededError` past ``max_tool_rounds`` follow-ups, and what the
        agent raises before its first event."""
        # the sync client tools need a worker thread: the given runner, else the supplied one,
        # else the one the agent carries (a transport client's); an in-process agent gets it too
        runner = resolve_tool_runner(self.tool_runner) or getattr(self.agent, "tool_runner", None)
        require_tool_runner(runner, self.tools.values(), what="sync client tools")
        with supplying_tool_runner(runner):
            return await self._turn(resume)

    async def _turn(self, resume: list[ResumeEntry] | None) -> Turn:
        runner = resolve_tool_runner(None)
        turn = Turn()
        rounds = 0
        while True:
            record = await self._one_run(turn, resume)
            resume = None
            pending = self._pending_calls(record)
            interrupts = self.pending_interrupts if record is not None and record.outcome == "interrupt" else []
            turn.pending_tool_call_ids = pending
            turn.interrupts = interrupts
            follow_up = False
            known = [call_id for call_id in pending if self._tool_of(call_id) is not None]
            if known and len(known) == len(pending):
                for call_id in known:
                    turn.tool_results.append(await self._run_tool(call_id, runner))
                turn.pending_tool_call_ids = []
                follow_up = True
            elif interrupts and not pending and self.on_interrupt is not None:
                resume = [await self._answer(i) for i in interrupts]
                follow_up = True
            if not follow_up:
                return turn
            rounds += 1
            if rounds > self.max_tool_rounds:
                raise ToolRoundsExceededError(
                    f"the agent still asked for client tools or interrupt answers after "
                    f"max_tool_rounds={self.max_tool_rounds} follow-up runs (MAX_TOOL_ROUNDS)"
                )

    async def query(self, resource_id: str, params: Any = None) -> Any:
        """A resource's data, asked of the gateway behind the thread's agent
        (``SSEAgent.query``: ``POST <url>/data/query``; ``WebSocketAgent.query``: a
        ``query`` message): what a resource-bound component of this thread shows.

        Returns the data; raises the typed errors of :mod:`agui_engine.genui.resources`
        (404, 422 with ``path``, 403, 503, 504, 502) and the client's connection
        errors; :class:`UsageError` when the agent cannot query (an in-process agent,
        stdio: no gateway serves resources there).
        """
        ask = getattr(self.agent, "query", None)
        if not callable(ask):
            raise UsageError(
                f"{type(self.agent).__name__} cannot answer data queries: use SSEAgent or WebSocketAgent "
                "(the gateway serves the resources)"
            )
        return await ask(resource_id, params)

    async def a2ui_data(self, surface_id: str) -> dict[str, Any]:
        """The data model of a surface the thread shows, with every resource-bound path
        (``{"$resource": {resourceId, params}}``) filled by a data query through the gateway
        (:meth:`query`, one per binding, in document order): what a front end binds the
        surface's components to. Raises :class:`~agui_engine.genui.a2ui.A2UIActionError` for a
        surface the thread does not show, and the first query's typed error
        (:mod:`agui_engine.genui.resources`: 403 ``forbidden``, 404, 422 ...) as :meth:`query`
        does. Changes nothing on the thread."""
        surface = self.a2ui_surfaces.get(surface_id)
        if surface is None:
            raise A2UIActionError(f"the thread does not show A2UI surface {surface_id!r} "
                                  f"(it shows {sorted(self.a2ui_surfaces)})")
        operations = surface["operations"]
        filled = {b.path: await self.query(b.resource_id, b.params) for b in a2ui_resource_bindings(operations)}
        return a2ui_data_model(operations, filled)

    # ------------------------------------------------------------------ internals

    def _input(self, resume: list[ResumeEntry] | None) -> RunAgentInput:
        tools = [Tool(name=t.name, description=t.description, parameters=t.parameters) for t in self.tools.values()]
        parent = next((r.run_id for r in reversed(self.accumulator.runs) if r.run_id), None)
        return RunAgentInput(
            thread_id=self.thread_id,
            run_id=self.id_factory(),
            parent_run_id=parent,
            messages=self.accumulator.messages_as_structs(),
            tools=tools,
            context=self.context,
            state=self.accumulator.state,
            forwarded_props=self._forwarded_props(),
            resume=resume,
        )

    def _forwarded_props(self) -> Any:
        action, self._action = self._action, None  # the first run of the turn carries it, not the follow-ups
        if action is None:
            return self.forwarded_props
        base = self.forwarded_props if isinstance(self.forwarded_props, dict) else {}
        return {**base, "a2uiAction": {"userAction": action}}

    async def _one_run(self, turn: Turn, resume: list[ResumeEntry] | None) -> RunRecord | None:
        before = len(self.accumulator.runs)
        events: AsyncIterator[Event] = self.agent.run(self._input(resume))
        try:
            async for event in events:
                self.accumulator.apply(event)
                turn.events.append(event)
                if self.on_event is not None:
                    self.on_event(event)
        finally:
            # closed on every way out (a caller that stopped, an error): a remote run is cancelled
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        new = self.accumulator.runs[before:]
        turn.runs.extend(new)
        return new[-1] if new else None

    def _answered(self) -> set[str]:
        return {m["toolCallId"] for m in self.accumulator.messages if m.get("role") == "tool" and "toolCallId" in m}

    def _calls(self) -> dict[str, dict[str, Any]]:
        return {c["id"]: c for m in self.accumulator.messages for c in m.get("toolCalls") or ()}

    def _pending_calls(self, record: RunRecord | None) -> list[str]:
        if record is None or record.status != "finished":
            return []
        answered = self._answered()
        if record.pending_tool_call_ids is not None:
            return [i for i in record.pending_tool_call_ids if i not in answered]
        # an agent that does not say: calls of our tools without a result are ours to run
        return [i for i, c in self._calls().items()
                if i not in answered and c.get("function", {}).get("name") in self.tools]

    def _tool_of(self, call_id: str) -> ServerTool | None:
        call = self._calls().get(call_id)
        return self.tools.get(call.get("function", {}).get("name", "")) if call is not None else None

    async def _run_tool(self, call_id: str, runner: ToolRunner | None) -> tuple[str, str, str | None]:
        call = self._calls()[call_id]
        tool = self._tool_of(call_id)
        assert tool is not None
        error: str | None = None
        try:
            raw = call["function"].get("arguments") or "{}"
            args = msgspec.json.decode(raw) if raw.strip() else {}
            arguments = args if isinstance(args, dict) else {}
            result = await run_tool(runner, tool, arguments, inline=False, timeout=None)
            content = format_tool_result(result)
        except Exception as exc:  # noqa: BLE001 - a failing client tool is a result the agent sees
            error = f"{type(exc).__name__}: {exc}"
            content = f"Error: {error}"
        self.add_tool_result(call_id, content, error=error)
        return call_id, content, error

    async def _answer(self, interrupt: Interrupt) -> ResumeEntry:
        assert self.on_interrupt is not None
        answer = self.on_interrupt(interrupt)
        if not isinstance(answer, ResumeEntry):
            answer = await answer
        if not isinstance(answer, ResumeEntry):
            raise UsageError(f"on_interrupt must return a ResumeEntry, got {type(answer).__name__}")
        return answer
