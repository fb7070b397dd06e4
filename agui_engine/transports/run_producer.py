"""The producer of a run: the task that drives ``agent.run(input)`` and puts each event it
yields through the gateway path into the run's log.

Theory of operation
-------------------
Each event the agent yields goes through:

1. the :class:`~agui_engine.protocol.verify.Verifier` (protocol rules; chunk events are
   expanded). A violation ends the run with ``RUN_ERROR`` (code of the error)
   and closes the agent's generator. Not for an ``AgentLoop``'s events (a remote AG-UI
   agent's too): its own Verifier has seen each (``AgentHost.verifies``);
2. :func:`~agui_engine.protocol.codec.encode_event`, once, to compact JSON bytes;
3. ``log.append`` -- which numbers it (``seq``) and bounds the run's memory;
4. a wake-up of the subscribers waiting for it.

Every run ends with exactly one terminal event in the log (``RUN_FINISHED`` or
``RUN_ERROR``): if the agent fails before ``RUN_STARTED``, the producer writes
``RUN_STARTED`` first, so the stream is always valid AG-UI. What the log still lacks when the
agent's stream ends is the run's :class:`~transports.run_lifecycle.RunLifecycle`'s answer;
the effects that need no await go back to the registry (``apply``).

Cancellation cancels the producer task; the ``CancelledError`` is raised inside the agent's
generator where it is suspended (typically reading the model's HTTP stream), and the
producer then calls ``aclose()`` on the generator, so the upstream call is aborted before
``cancel()`` returns. A run that joins its thread's history has its record folded while it
streams (a :class:`~transports.history.RunRecorder` fed each event as it is logged: compaction
as the events pass, nothing decoded or read back) and is kept
(:class:`~transports.thread_history.ThreadHistory`) before its log ends.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agui_engine.loops.observe import OBSERVER
from agui_engine.loops.tool_runner import supply_tool_runner
from agui_engine.protocol.agent import check_event
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import AguiEngineError, UsageError
from agui_engine.protocol.events import BaseEvent, RunAgentInput, RunErrorEvent, RunFinishedEvent, RunStartedEvent
from agui_engine.protocol.verify import Verifier

from .agent_host import APP_EVENTS, AgentHost
from .eventlog import EventLog
from .history import HISTORY_MAX_RUN_BYTES, RunRecorder
from .otel import OTelObserver, run_span
from .run_lifecycle import Effect, RunEvent
from .run_record import Run
from .thread_history import ThreadHistory
from .tool_runner import STANDARD_TOOL_RUNNER

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = ["PRODUCER_YIELD_EVERY", "RECORD_REUSE_MIN_BYTES", "RunProducer"]

_log = logging.getLogger("agui_engine.transports")

_LIFECYCLE = frozenset({RunStartedEvent, RunFinishedEvent, RunErrorEvent})
_TERMINALS = frozenset({RunFinishedEvent, RunErrorEvent})

#: The producer yields to the event loop after this many events even if the
#: agent never suspended, so one agent that emits a burst cannot starve the
#: other streams. 256 events (~25 KiB) is well under one coalesced write, and
#: rare enough not to split the bursts a real model stream delivers.
PRODUCER_YIELD_EVERY = 256

#: An event encoded in more bytes than this is written into its run's history record with the
#: encoding already made (a snapshot, a component's props), not encoded again; smaller ones
#: cost less to encode again than to remember.
RECORD_REUSE_MIN_BYTES = 256



class RunProducer:
    """Produces runs of ``host`` into ``log``. ``verify``: every event through the
    Verifier. ``threads``: where finished runs that join their thread are kept (None: none).
    ``observer``: traces each run (RegistryOptions.tracing), else None. ``apply``: carries out
    the lifecycle's effects that need no await (the registry's)."""

    def __init__(
        self,
        host: AgentHost,
        log: EventLog,
        *,
        verify: bool,
        metrics: GatewayMetrics | None,
        threads: ThreadHistory | None,
        observer: OTelObserver | None,
        apply: Callable[[Run, tuple[Effect, ...]], None],
    ) -> None:
        self.host = host
        self.log = log
        self.verify = verify
        self.metrics = metrics
        self.threads = threads
        self.observer = observer
        self._apply = apply
        # Plain-function fast path of a log that never suspends (InMemoryEventLog).
        self._appender = getattr(log, "appender", None)
        # A run is kept whole while the log could hold it whole (its per-run bounds), as when
        # its record was read back from the log; a log that names no bounds: HISTORY_MAX_RUN_BYTES.
        self._record_bounds: tuple[int, int] = (
            getattr(log, "max_events", None) or sys.maxsize, getattr(log, "max_bytes", None) or HISTORY_MAX_RUN_BYTES
        )

    async def _append(self, run: Run, event: Any) -> None:
        # Synthetic events (RUN_STARTED prelude, RUN_ERROR) and agent events share this.
        if run.recorder is not None:
            run.recorder.feed(event)
        seq = await self.log.append(run.run_id, encode_event(event))
        if seq > run.head:
            run.head = seq
        run.wake()

    @staticmethod
    def cancel(run: Run) -> None:
        """Cancel ``run``'s producer task (its lifecycle holds the cancel's code and message)."""
        assert run.lifecycle.cancel is not None
        _log.info("run %s: cancelling (%s)", run.run_id, run.lifecycle.cancel[1])
        if run.task is not None:
            run.task.cancel()

    @staticmethod
    async def stopped(run: Run, timeout: float) -> None:
        """Return once ``run``'s producer has ended, or after ``timeout`` seconds (logged)."""
        if run.task is not None:
            done, _ = await asyncio.wait({run.task}, timeout=timeout)
            if not done:
                _log.warning("run %s: the agent did not stop within %.1f s of cancellation", run.run_id, timeout)

    @staticmethod
    def _note_lifecycle(run: Run, ev: Any, cls: type) -> None:
        if cls is RunStartedEvent:
            run.lifecycle.fire(RunEvent.STARTED_LOGGED)
        else:
            run.lifecycle.fire(RunEvent.TERMINAL_LOGGED, (ev.code or "run_error") if cls is RunErrorEvent else None)

    async def produce(self, run: Run) -> None:
        """Drive the run's agent to the end of its log (the run's task)."""
        lifecycle = run.lifecycle
        if run.kept and self.threads is not None:
            # its history record is folded as the run streams (nothing is read back at its end)
            run.recorder = RunRecorder(run.input, run.history_parent)
        recorder = run.recorder
        recorded = recorded_events = 0
        max_events, max_bytes = self._record_bounds
        if Effect.END_AT_ONCE in lifecycle.fire(RunEvent.PRODUCER_STARTED):
            await self._finish(run, None)  # cancelled before the producer ran: the pending cancel ends it
            return
        gen: Any = None
        metrics = self.metrics
        started_at = asyncio.get_running_loop().time() if metrics is not None else 0.0
        # The input lets the verifier accept TOOL_CALL_RESULTs for calls made in an
        # earlier run (human in the loop: the client sends them back in the messages).
        # An AgentLoop's events (a remote AG-UI agent's among them) were verified inside it:
        # once is enough (agent_host.AgentHost.verifies).
        verifier = Verifier(input=run.input) if self.verify and not self.host.verifies(run.input) else None
        error: RunErrorEvent | None = None
        count = 0
        feed = verifier.feed if verifier is not None else None
        rid = run.run_id
        append_one = self._appender(rid) if self._appender is not None else None
        append = self.log.append
        # this task runs this one agent: it gets the standard runner (sync tools in threads)
        supply_tool_runner(STANDARD_TOOL_RUNNER)
        span = None
        if self.observer is not None:  # the run's invoke_agent span; its model and tool calls trace under it
            OBSERVER.set(self.observer)
            span = run_span(self.observer, run.input, self.host.agent)
        threads = self.threads if run.kept and self.threads is not None and self.threads.apart else None
        saw, owner = self.host.saw, run.owner
        try:
            gen = self._open_agent(run.input, owner)
            async for event in gen:
                if not isinstance(event, BaseEvent):
                    check_event(event, count)  # raises NotAnEventError: nothing unchecked goes out
                out = feed(event) if feed is not None else (event,)
                seq = 0
                for ev in out:
                    cls = type(ev)
                    if cls in _LIFECYCLE:
                        self._note_lifecycle(run, ev, cls)
                    elif metrics is not None:
                        metrics.note_first_token(asyncio.get_running_loop().time() - started_at)
                        metrics = None
                    if cls in APP_EVENTS:  # an MCP app shown: the owner's proxied requests may reach it
                        saw(owner, ev)
                    payload = encode_event(ev)
                    if recorder is not None:
                        size = len(payload)
                        recorded += size
                        recorded_events += 1
                        if recorded > max_bytes or recorded_events > max_events:
                            recorder.overflow()  # longer than its log holds: kept trimmed, the fold let go
                        recorder.feed(ev)
                        if size > RECORD_REUSE_MIN_BYTES:
                            recorder.encoded(ev, payload)
                    if cls in _TERMINALS and threads is not None:
                        # A durable store writes with IO: keep the record before the terminal event
                        # goes out, so a client that saw the end reads the history with it.
                        await threads.keep_shielded(run)
                        run.kept_early = True
                    seq = append_one(payload) if append_one is not None else await append(rid, payload)
                if seq > run.head:  # a write-behind log returns what is stored so far
                    run.head = seq
                    if run.waiters:
                        run.wake()
                count += 1
                if count % PRODUCER_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            if verifier is not None:
                verifier.close()  # raises for a stream cut short; unverified, the lifecycle sees it (TRUNCATED)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            code, message = lifecycle.cancel or ("cancelled", "the run was cancelled")
            error = RunErrorEvent(message=message, code=code)
        except AguiEngineError as exc:
            _log.warning("run %s ended with %s: %s", run.run_id, type(exc).__name__, exc.message)
            error = RunErrorEvent.from_error(exc)
        except Exception as exc:  # noqa: BLE001 - an agent bug must not take the gateway down
            # The operator needs the message and the traceback to fix the agent
            # (logger.exception-style, at ERROR); the client gets neither: they
            # may carry secrets (URLs with keys, SQL, file paths).
            _log.error("run %s: the agent raised %s: %s", run.run_id, type(exc).__name__, exc, exc_info=exc)
            error = RunErrorEvent(message=f"the agent failed ({type(exc).__name__})", code="agent_error")
        finally:
            # An Agent returns an async iterator; an async generator (the usual
            # case) must be closed so that it releases the model stream now.
            aclose = getattr(gen, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except asyncio.CancelledError:
                    # Cancelled again while closing: the generator is closed as far
                    # as it lets us; the run must still get its terminal event.
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                except Exception as exc:  # noqa: BLE001 - failing on close is the agent's bug; the run is over anyway
                    _log.error("run %s: closing the agent's generator raised %s", run.run_id, type(exc).__name__)
        try:
            await self._finish(run, error)
        finally:
            if span is not None:
                span.end(run.lifecycle.terminal_code)  # the RUN_ERROR code is the span's error.type

    def _open_agent(self, input: RunAgentInput, owner: str | None) -> Any:
        # What the served agent's run(input) returned (a proxied MCP request's answer, or the
        # agent's stream: agent_host.AgentHost), checked: an ``async def run`` without a
        # yield returns a coroutine, which ``async for`` would refuse with a bare
        # TypeError. Raises UsageError saying what to write instead.
        gen = self.host.run(input, owner)
        if not hasattr(gen, "__anext__"):
            close = getattr(gen, "close", None)
            if inspect.iscoroutine(gen) and close is not None:
                close()  # never awaited on purpose: no "never awaited" warning
            raise UsageError(
                f"{self.host.agent!r}.run(input) returned {type(gen).__name__}, not an async iterator: "
                "write run as an async generator (async def run(self, input): ... yield event)"
            )
        return gen

    async def _finish(self, run: Run, error: RunErrorEvent | None) -> None:
        # The lifecycle says what the log still lacks: the RUN_STARTED prelude, the
        # RUN_ERROR (exactly one terminal event per run), then the end of the log.
        lifecycle = run.lifecycle
        try:
            ended_with = None if error is None else (error.code or "run_error")
            for effect in lifecycle.fire(RunEvent.PRODUCER_ENDED, ended_with):
                if effect is Effect.APPEND_STARTED:
                    await self._append(run, RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
                elif effect is Effect.APPEND_ERROR:
                    if error is None and lifecycle.cancel is not None:
                        error = RunErrorEvent(message=lifecycle.cancel[1], code=lifecycle.cancel[0])
                    elif error is None:
                        message = "the agent's stream ended without RUN_FINISHED or RUN_ERROR"
                        _log.warning("run %s ended: %s", run.run_id, message)
                        error = RunErrorEvent(message=message, code=lifecycle.terminal_code)
                    await self._append(run, error)
                elif effect is Effect.FINISH_LOG:
                    if run.kept and not run.kept_early and self.threads is not None:
                        # Kept before the log ends: a client that saw the end reads the history with it.
                        # Whatever happens here, the log must still end (its readers wait for that).
                        try:
                            await self.threads.keep_shielded(run)
                        except AguiEngineError as exc:  # the store is away: the run is served, not kept
                            _log.warning("run %s: not kept in its thread's history: %s", run.run_id, exc.message)
                        except asyncio.CancelledError:
                            task = asyncio.current_task()
                            if task is not None:
                                task.uncancel()
                        except Exception as exc:  # noqa: BLE001 - a bug here must not leave the run's stream open
                            _log.error("run %s: keeping it in its thread's history failed", run.run_id, exc_info=exc)
                    await self.log.finish(run.run_id)
                else:
                    self._apply(run, (effect,))
        finally:
            self._apply(run, lifecycle.fire(RunEvent.LOG_FINISHED))
