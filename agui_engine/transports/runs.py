"""The run registry: the run front end every transport (SSE, WebSocket, stdio) serves agents
through. It starts runs, hands out subscriptions (:meth:`RunRegistry.resume` for a client that
comes back), cancels, drains and shuts down; the pieces beside it, one job each, do the rest
(spec/transports.md §1.1): :mod:`~transports.admission`, :mod:`~transports.run_producer`,
:mod:`~transports.subscription`, :mod:`~transports.run_timers`, :mod:`~transports.thread_history`,
:mod:`~transports.shared_runs`, :mod:`~transports.agent_host`.

Every decision about a run (what its log still lacks when the producer ends, when a timer is
armed, when a cancel is refused, when a finished run is discarded) is made by its
:class:`~transports.run_lifecycle.RunLifecycle` (one table, ``RUN_TRANSITIONS``; admission:
``GATEWAY_TRANSITIONS``); the registry fires its events and carries out the effects it answers
with. A *follower* run (:meth:`RunRegistry.find`) is a run another gateway node runs, read from
a shared log: no producer, grace timer or cancel here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import RunAgentInput

from .admission import Admission, Caller, RunExistsError, may_touch, new_run_key
from .agent_host import AgentHost
from .clock import Clock, LoopClock
from .event_ids import resume_cursor
from .eventlog import EventLog, InMemoryEventLog, LogSlice, SharedEventLog, UnknownRunError
from .history import Branch, ThreadStore, UnknownThreadError
from .otel import OTelObserver
from .registry_options import CANCEL_WAIT_SECONDS, RegistryOptions
from .run_lifecycle import Effect, GatewayEvent, GatewayLifecycle, RunEvent, RunFinishedError, RunLifecycle, RunPhase
from .run_producer import RunProducer
from .run_record import Run
from .run_timers import RunTimers
from .shared_runs import SharedRuns
from .subscription import KeepAliveClock, Subscription, WriteWindow
from .thread_history import ThreadHistory

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = ["RunRegistry"]

_log = logging.getLogger("agui_engine.transports")


class RunRegistry:
    """Runs served by one gateway (one per server / app). See the module docstring.

    ``options``: limits and periods (:class:`~transports.registry_options.RegistryOptions`).
    ``log``: the event log (an :class:`~transports.eventlog.InMemoryEventLog` when None).
    ``clock``: schedules the grace and retention timers (:class:`~transports.clock.LoopClock`
    when None; tests pass a :class:`~transports.clock.ManualClock`). ``threads``: where thread
    histories are kept (default: the log, when it is a :class:`~transports.history.ThreadStore`;
    none with ``options.keep_history`` off). Raises UsageError for a non-Agent.
    """

    def __init__(
        self,
        agent: Agent | AgentFunction,
        *,
        options: RegistryOptions | None = None,
        log: EventLog | None = None,
        clock: Clock | None = None,
        metrics: GatewayMetrics | None = None,
        threads: ThreadStore | None = None,
    ) -> None:
        self.host = AgentHost(as_agent(agent, where="RunRegistry(agent)"))
        #: The agent served (a remote AG-UI agent inside the agent loop: agent_host.serving_agent).
        self.agent: Agent = self.host.agent
        self.options = options if options is not None else RegistryOptions()
        self.log: EventLog = (
            log if log is not None else InMemoryEventLog(max_total_bytes=self.options.max_buffered_bytes or None)
        )
        self.clock: Clock = clock if clock is not None else LoopClock()
        self._runs: dict[str, Run] = {}
        self._active = 0
        #: Whether new runs are admitted (open / draining / closed).
        self.gateway = GatewayLifecycle()
        self.admission = Admission(self.options, self.gateway, getattr(self.log, "held_bytes", None))
        self.timers = RunTimers(self.options, self.clock, self.gateway, self._fire)
        #: Wakes waiting subscribers for their keep-alives, one timer for all.
        self.keepalive = KeepAliveClock()
        #: How long after a stream's hand-out its next one waits (write coalescing).
        self.write_window = WriteWindow(self.options.write_coalesce_seconds)
        self.metrics = metrics
        if metrics is not None:
            metrics.bind(lambda: float(self._active), lambda: float(self.draining))
        #: This node's side of a log several gateway nodes share (spec/transports.md 4.1), else None.
        self.shared = (
            SharedRuns(self.log, self._runs, self._fire, self.options, metrics)
            if isinstance(self.log, SharedEventLog) else None
        )
        #: The log's non-suspending read (InMemoryEventLog.read_nowait), or None.
        self.read_nowait: Callable[..., LogSlice] | None = getattr(self.log, "read_nowait", None)
        self._discard_nowait = getattr(self.log, "discard_nowait", None)
        #: Wall-clock Unix seconds of the registry's clock: what history retention counts (a
        #: shared store compares it across nodes).
        self.wall_time: Callable[[], float] = getattr(self.clock, "wall_time", time.time)
        #: The thread histories (``threads``, a durable store, else the log when it keeps them;
        #: none without keep_history).
        self.history = ThreadHistory.kept(threads, self.log, self.wall_time) if self.options.keep_history else None
        #: Traces the runs (RegistryOptions.tracing; loops/observe.py's hook), else None.
        self.observer = OTelObserver() if self.options.tracing else None
        self.producer = RunProducer(
            self.host, self.log, verify=self.options.verify, metrics=metrics, threads=self.history,
            observer=self.observer, apply=self._apply,
        )
        #: What carries out each effect of a run's lifecycle that needs no await (the producer
        #: does END_AT_ONCE, APPEND_* and FINISH_LOG itself).
        self._effects: dict[Effect, Callable[[Run], object]] = {
            Effect.CANCEL_PRODUCER: RunProducer.cancel,
            Effect.RUN_ENDED: self._ended,
            Effect.DISCARD: self._drop,
            **self.timers.effects(),
            **(self.shared.effects() if self.shared is not None else SharedRuns.no_effects()),
        }

    # -- queries -------------------------------------------------------------------------

    @property
    def threads(self) -> ThreadStore | None:
        """Where thread histories are kept (None: nowhere)."""
        return self.history.store if self.history is not None else None

    @property
    def active(self) -> int:
        """Number of runs still running."""
        return self._active

    @property
    def draining(self) -> bool:
        """True once :meth:`drain` or :meth:`shutdown` began: new runs are refused."""
        return not self.gateway.admits

    async def ready(self) -> bool:
        """Whether a load balancer should send new runs here: not draining, and
        the event log reachable (a shared log is pinged)."""
        return not self.draining and (self.shared is None or await self.shared.reachable())

    def get(self, run_id: str) -> Run:
        """The run with this id. Raises UnknownRunError."""
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRunError(run_id)
        return run

    async def find(self, run_id: str) -> Run:
        """The run with this id: this registry's own, else a *follower* of another node's run
        in a shared log (with the principal and key hash its node recorded). Raises UnknownRunError."""
        run = self._runs.get(run_id)
        if run is not None:
            return run
        await self.log.head(run_id)  # raises UnknownRunError when no node has it
        return await self.shared.follower(run_id) if self.shared is not None else Run.following(run_id)

    async def live_run(self, thread_id: str) -> str | None:
        """The latest run any node of a shared log started on ``thread_id`` while the log
        holds it (None: none, or a log of this node alone, where the transport remembers its
        own). Raises EventLogUnavailableError."""
        if self.shared is None:
            return None
        return await self.shared.log.live_run(thread_id)

    def check_owner(self, run: Run, caller: Caller | None) -> Run:
        """``run`` if ``caller`` may stream, resume or cancel it (:func:`~transports.admission.may_touch`),
        else UnknownRunError: the same 404 as for a run that does not exist, so ids cannot be probed."""
        if may_touch(run.owner, run.key_hash, caller):
            return run
        raise UnknownRunError(run.run_id)

    # -- starting, reading -----------------------------------------------------------------

    async def start(
        self, input: RunAgentInput, *, owner: str | None = None, address: str | None = None, key: str | None = None
    ) -> Run:
        """Start a run owned by ``owner`` (a principal; :meth:`check_owner`) with a new run key
        (``run.key``, for the transport to hand to the client); it counts against
        ``max_runs_per_client`` for the principal, else for the client's ``address``. ``key``: a
        run key of an earlier run of the thread, presented by the client: the run joins that
        thread's history (spec/transports.md §4.4). Raises ServerBusyError, RunExistsError,
        ResumeRejectedError (``input.resume`` answers not the interrupts its branch ended with),
        EventLogUnavailableError."""
        client = self.admission.admit(
            input.run_id, exists=input.run_id in self._runs, active=self._active, owner=owner, address=address
        )
        # No principal and no address: the embedding program or stdio's one client, never checked.
        caller = None if owner is None and address is None else Caller(owner, key)
        kept, parent = False, None
        if self.history is not None and self.host.joins_history(input):
            kept, parent, input = await self.history.lineage(input, caller)
        run = Run(input, RunLifecycle(
            grace_seconds=self.options.grace_seconds,
            disconnect_grace_seconds=self.options.disconnect_grace_seconds,
            shared=self.shared is not None,
        ))
        run.owner, run.client, run.kept, run.history_parent = owner, client, kept, parent
        run.key, run.key_hash = new_run_key()
        if run.run_id in self._runs:  # started meanwhile, while the history was read
            raise RunExistsError(f"run {run.run_id!r} already exists here; start a run with a new runId")
        try:
            if self.shared is not None:
                await self.shared.log.open_run(run.run_id, run.thread_id, principal=owner or "", key_hash=run.key_hash)
            else:
                await self.log.create(run.run_id)
        except UsageError:
            # Another gateway node sharing the log has (or had) this run.
            raise RunExistsError(f"run {run.run_id!r} already exists in the shared event log") from None
        self._runs[run.run_id] = run
        self.admission.hold(run)
        self._active += 1
        run.task = asyncio.get_running_loop().create_task(self.producer.produce(run), name=f"agui-run-{run.run_id}")
        return run

    async def thread_history(
        self, thread_id: str, *, run_id: str | None = None, caller: Caller | None = None
    ) -> tuple[Branch, list[bytes]]:
        """The branch of ``thread_id`` ending at ``run_id`` (default: its latest kept run) and
        its events as served (:meth:`~transports.thread_history.ThreadHistory.read`); the MCP apps
        among them count as shown to ``caller``'s principal (:meth:`AgentHost.saw_kept`). Raises
        UnknownThreadError (404: no history here that ``caller`` may read), EventLogUnavailableError."""
        if self.history is None:
            raise UnknownThreadError("this gateway keeps no thread history (it runs with keep_history=False: serve --no-history)")
        branch, payloads = await self.history.read(thread_id, run_id, caller)
        # the apps in it are shown to the reader again (a restarted gateway, another node)
        self.host.saw_kept(caller.principal if caller is not None else None, payloads)
        return branch, payloads

    def subscribe(self, run: Run, after: int = 0, *, resumable: bool = True) -> Subscription:
        """A subscription after event ``after`` (0: from the start; checked by its first ``next()``).
        ``resumable``: the client reconnects after a drop; when the last subscriber leaves a
        running run, it waits ``grace_seconds`` if that one was resumable, else
        ``disconnect_grace_seconds`` (0: cancelled at once, ``disconnected``). Raises
        UnknownRunError for a run already discarded."""
        if run.phase is RunPhase.DISCARDED:
            raise UnknownRunError(run.run_id)
        self._fire(run, RunEvent.SUBSCRIBE)
        return Subscription(self, run, after, resumable)

    async def resume(
        self, run_id: str, last_event_id: str | None, caller: Caller | None, *, resumable: bool = True, via: str = ""
    ) -> tuple[Subscription, LogSlice | None]:
        """A client comes back to run ``run_id`` (this node's, or another's in a shared log):
        a subscription after the event ``last_event_id`` names (``<runId>:<seq>``; None: from
        the start), and the events ready now -- read at once, so a cursor the log no longer
        holds is refused before any stream starts. ``caller`` must be allowed
        (:meth:`check_owner`); ``via`` names the transport for the resume metric (counted
        when ``last_event_id`` is given). Raises BadCursorError, UnknownRunError,
        CursorExpiredError, EventLogUnavailableError."""
        cursor = resume_cursor(last_event_id, run_id)[1] if last_event_id is not None else 0
        sub = self.subscribe(self.check_owner(await self.find(run_id), caller), cursor, resumable=resumable)
        try:
            first = await sub.next(timeout=0.0)
        except BaseException:
            sub.close()
            raise
        if last_event_id is not None and self.metrics is not None:
            self.metrics.note_resume(via)
        return sub, first

    def leave(self, run: Run, resumable: bool) -> None:
        """A subscriber of ``run`` left (Subscription.close calls this): the last one
        leaving a live run orphans it (grace timer), a finished one may go."""
        self._fire(run, RunEvent.UNSUBSCRIBE, resumable)

    # -- the lifecycle's effects ---------------------------------------------------------

    def _fire(self, run: Run, event: RunEvent, arg: object = None) -> None:
        self._apply(run, run.lifecycle.fire(event, arg))

    def _apply(self, run: Run, effects: tuple[Effect, ...]) -> None:
        """Carry out what the run's lifecycle asked for (those that need no await)."""
        for effect in effects:
            do = self._effects.get(effect)
            if do is None:  # pragma: no cover - END_AT_ONCE, APPEND_*, FINISH_LOG come only from the producer's events
                raise UsageError(f"run {run.run_id}: effect {effect.name} outside the producer")
            do(run)

    def _ended(self, run: Run) -> None:
        self._active -= 1
        if self.metrics is not None:
            self.metrics.note_run_ended(run.lifecycle.terminal_code)
        run.wake()

    def _drop(self, run: Run) -> None:
        self._runs.pop(run.run_id, None)
        self.admission.release(run)
        self.timers.stop_retention(run)
        if self._discard_nowait is not None:
            self._discard_nowait(run.run_id)
        else:
            asyncio.get_running_loop().create_task(self.log.discard(run.run_id))

    # -- cancelling, stopping --------------------------------------------------------------

    async def cancel(
        self, run_id: str, *, code: str = "cancelled", message: str = "the run was cancelled", caller: Caller | None = None
    ) -> Run:
        """Cancel a running run at once: the agent's generator is closed (the upstream
        call aborted) and ``RUN_ERROR{code}`` ends the stream. Returns when that is
        done (or after CANCEL_WAIT_SECONDS). Raises UnknownRunError (also for a run
        ``caller`` may not touch: :meth:`check_owner`), RunFinishedError."""
        if run_id not in self._runs and self.shared is not None:
            await self.request_remote_cancel(run_id, caller)
            await self.shared.wait_ended(run_id)
            return Run.following(run_id)
        run = self.cancel_nowait(run_id, code=code, message=message, caller=caller)
        await RunProducer.stopped(run, CANCEL_WAIT_SECONDS)
        return run

    async def request_remote_cancel(self, run_id: str, caller: Caller | None) -> None:
        """Ask the node that owns ``run_id`` (shared log) to cancel it, once ``caller`` is checked
        against what that node recorded; return at once. Raises UnknownRunError, RunFinishedError."""
        assert self.shared is not None
        self.check_owner(await self.find(run_id), caller)
        await self.shared.request_cancel(run_id)

    def cancel_nowait(
        self, run_id: str, *, code: str = "cancelled", message: str = "the run was cancelled", caller: Caller | None = None
    ) -> Run:
        """Start cancelling a running run and return at once (``run.wait_finished()`` waits for the
        end), for message loops. Raises UnknownRunError (also for a run ``caller`` may not touch),
        RunFinishedError."""
        run = self.check_owner(self.get(run_id), caller)
        try:
            self._fire(run, RunEvent.CANCEL, (code, message))
        except RunFinishedError:
            raise RunFinishedError(f"run {run_id!r} has already finished") from None
        return run

    async def drain(self, timeout: float) -> None:
        """Refuse new runs (503; :meth:`ready` turns False) and wait up to ``timeout`` seconds for
        the running ones to end by themselves (:meth:`shutdown` ends the rest)."""
        self.gateway.fire(GatewayEvent.DRAIN)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._active and (left := deadline - loop.time()) > 0:
            tasks = {r.task for r in self._runs.values() if r.lifecycle.live and r.task is not None}
            if not tasks:
                break
            await asyncio.wait(tasks, timeout=left)

    async def shutdown(self, *, timeout: float = CANCEL_WAIT_SECONDS) -> None:
        """Refuse new runs, cancel every running run with ``RUN_ERROR{code: "shutdown"}`` and wait
        (up to ``timeout``) for their producers to end, so open streams send the terminal event."""
        self.gateway.fire(GatewayEvent.SHUTDOWN)
        running = [r for r in self._runs.values() if r.lifecycle.live]
        for run in running:
            if run.lifecycle.cancellable:
                self._fire(run, RunEvent.CANCEL, ("shutdown", "the server is shutting down"))
        tasks = {r.task for r in running if r.task is not None}
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        self.timers.stop_all(self._runs.values())
        self.keepalive.close()
