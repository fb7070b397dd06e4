"""The run registry: one producer per run, any number of subscribers, resume,
grace period, cancellation, concurrency limit, shutdown. Every transport (SSE,
WebSocket, stdio) serves agents through it, so the gateway path is one piece of
code.

Theory of operation
-------------------
``RunRegistry.start(input)`` opens the run's :mod:`event log
<transports.eventlog>` and starts a *producer* task that drives
``agent.run(input)``. Each event the agent yields goes through the gateway path:

1. the :class:`~agui_engine.protocol.verify.Verifier` (protocol rules; chunk events are
   expanded). A violation ends the run with ``RUN_ERROR`` (code of the error)
   and closes the agent's generator;
2. :func:`~agui_engine.protocol.codec.encode_event`, once, to compact JSON bytes;
3. ``log.append`` -- which numbers it (``seq``) and bounds the run's memory;
4. a wake-up of the subscribers waiting for it.

A *subscriber* (:class:`Subscription`) is a cursor into the log. It never has a
queue of its own: ``next()`` returns every event after its cursor that is
ready (up to the read batch limits), so a transport writes them all with one
socket write (write coalescing), and a slow subscriber's backlog is the log
itself, which is bounded. If the producer laps a subscriber (its cursor falls
out of the log), ``next()`` raises :class:`~transports.eventlog.CursorExpiredError`
and the transport ends that stream with a ``RUN_ERROR`` (code
``cursor_expired``): the client learns it lost events instead of seeing a gap.

A *follower* run (``RunRegistry.find``) is a run another gateway node runs,
found in a shared event log: its subscriptions read the log and wait on it
(``EventLog.wait``); it has no producer, grace timer or cancel here.

Every decision about a run -- what its log still lacks when the producer ends,
when the grace timer is armed or stopped, when a cancel is refused, when a
finished run joins the retention queue or is discarded -- is made by its
:class:`~transports.run_lifecycle.RunLifecycle`, the sans-IO state machine whose
one table is :data:`~transports.run_lifecycle.RUN_TRANSITIONS` (phases CREATED,
OPEN, STREAMING, ENDED, FINISHING, FINISHED, LINGERING, DISCARDED, FOLLOWING).
The registry is its asyncio front end: it fires the machine's events (the
producer started, a lifecycle event was logged, a subscriber came or left, a
timer fired) and carries out the effects it answers with (cancel the task, arm
a timer, append the prelude, discard the log). Admission (open / draining /
closed) is the machine's second table, ``GATEWAY_TRANSITIONS``.

Every run ends with exactly one terminal event in the log (``RUN_FINISHED`` or
``RUN_ERROR``): if the agent fails before ``RUN_STARTED``, the registry writes
``RUN_STARTED`` first, so the stream is always valid AG-UI.

Cancellation (explicit, grace expiry, shutdown) cancels the producer task; the
``CancelledError`` is raised inside the agent's generator at the point where it
is suspended (typically reading the model's HTTP stream), and the registry then
calls ``aclose()`` on the generator, so the upstream call is aborted before
``cancel()`` returns.

Finished runs stay resumable for ``retention_seconds`` (at most
``max_retained`` of them, not counting runs a subscriber is still reading), then
their logs are discarded.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Self, cast

import msgspec

from agui_engine.genui.mcp_apps import McpAppsProxy, is_proxied, proxied_request
from agui_engine.loops.observe import OBSERVER
from agui_engine.loops.tool_runner import supply_tool_runner
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent, check_event
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import WS_CLOSE_BUSY, AguiEngineError, CapacityError, RemoteInputError, UsageError
from agui_engine.protocol.events import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from agui_engine.protocol.threads import check_resume, open_interrupts
from agui_engine.protocol.verify import Verifier

from .clock import Clock, LoopClock, TimerHandle
from .eventlog import (
    READ_MAX_BYTES,
    READ_MAX_EVENTS,
    BadCursorError,
    CursorExpiredError,
    EventLog,
    EventLogUnavailableError,
    InMemoryEventLog,
    LogSlice,
    SharedEventLog,
    UnknownRunError,
)
from .history import (
    HISTORY_READ_TIMEOUT_SECONDS,
    Branch,
    HistoryRun,
    ThreadStore,
    UnknownThreadError,
    branch,
    branch_payloads,
    build_record,
    decode_records,
    merge_input,
)
from .input_decoding import MAX_RUN_ID_LENGTH, check_run_id
from .otel import OTelObserver, run_span
from .remote_agents import serving_agent
from .run_lifecycle import (
    WS_CLOSE_RUN_EXISTS,
    Effect,
    GatewayEvent,
    GatewayLifecycle,
    RunEvent,
    RunFinishedError,
    RunLifecycle,
    RunPhase,
)
from .tool_runner import STANDARD_TOOL_RUNNER

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "CANCEL_WAIT_SECONDS",
    "COALESCE_MAX_PASSES",
    "Caller",
    "DEFAULT_DISCONNECT_GRACE_SECONDS",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_KEEPALIVE_SECONDS",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "DEFAULT_MAX_RETAINED",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_MAX_RUNS_PER_CLIENT",
    "DEFAULT_RETENTION_SECONDS",
    "KEEPALIVE_MIN_TICK",
    "KEEPALIVE_RESOLUTION",
    "KeepAliveClock",
    "PRODUCER_YIELD_EVERY",
    "RETRY_AFTER_BUSY_SECONDS",
    "RETRY_AFTER_SHUTDOWN_SECONDS",
    "RUN_KEY_BYTES",
    "RegistryOptions",
    "Run",
    "RunExistsError",
    "RunFinishedError",
    "RunRegistry",
    "ServerBusyError",
    "Subscription",
    "WS_CLOSE_BUSY",
    "WS_CLOSE_RUN_EXISTS",
    "client_key",
    "may_touch",
    "run_key_hash",
]

_log = logging.getLogger("agui_engine.transports")

_LIFECYCLE = frozenset({RunStartedEvent, RunFinishedEvent, RunErrorEvent})
_TERMINALS = frozenset({RunFinishedEvent, RunErrorEvent})
#: How a terminal event's encoding starts: encode_event writes the tag (``type``) first.
_TERMINAL_PREFIXES = (b'{"type":"RUN_FINISHED"', b'{"type":"RUN_ERROR"')

#: Concurrent running runs per registry. Each holds an open model stream; 1,000
#: is what one gateway process on a 2-core machine streams comfortably (see the
#: transports benchmark) -- past it the server answers 503 + Retry-After.
DEFAULT_MAX_RUNS = 1000

#: Runs one client may hold at once: running, or finished but still being read
#: (a reader that stopped reading keeps its run's log until the send timeout
#: cuts it). A client is the principal its token names (per-client tokens), else
#: its address. 100 is a tenth of DEFAULT_MAX_RUNS: no single client can take
#: more than that of the server (300 stalled readers of one token took the
#: server from 418 MB to 1.9 GB), while a browser with many tabs or a backend
#: fanning out runs for a user stays far below it. Behind a reverse proxy every
#: client has the proxy's address: name the clients by token, raise it, or 0 (no cap).
DEFAULT_MAX_RUNS_PER_CLIENT = 100

#: Bytes of encoded events the run logs of one gateway may hold together (the
#: in-memory log's budget). Past it new runs are refused (503 + Retry-After) and a
#: run that keeps growing keeps only its newest eventlog.BUDGET_TRIM_FLOOR_BYTES,
#: so a server's logs hold at most this plus 256 KiB per run, whatever its
#: readers do. 512 MiB: 128 full 4 MiB logs, or thousands of ordinary runs (a
#: long answer is tens of KiB); with msgspec's allocation slack (~1.5x) about
#: 0.75 GiB of RAM. 0: no budget (each run is still bounded by DEFAULT_LOG_MAX_BYTES).
DEFAULT_MAX_BUFFERED_BYTES = 512 * 1024 * 1024

#: How long a run keeps going after its last subscriber left, so that a client
#: whose connection dropped can reconnect and resume. 30 s covers a mobile
#: network change or a laptop waking up, without paying for abandoned runs long.
DEFAULT_GRACE_SECONDS = 30.0

#: How long a run keeps going after its last subscriber left when that subscriber
#: did not declare it would resume (see ``RunRegistry.subscribe(resumable=...)``):
#: the official @ag-ui/client's abortRun() -- a chat UI's stop button -- only
#: closes the connection and never sends DELETE, and it never reconnects. Waiting
#: would only spend model tokens nobody reads, so the run is cancelled at once.
DEFAULT_DISCONNECT_GRACE_SECONDS = 0.0

#: How long a finished run's log stays available for resume (a client that lost
#: the connection just before the terminal event must still get it).
DEFAULT_RETENTION_SECONDS = 60.0

#: At most this many finished runs are retained; the oldest is discarded first.
#: Equal to DEFAULT_MAX_RUNS: a full server whose runs all finish at once keeps
#: every one resumable for DEFAULT_RETENTION_SECONDS, while the memory bound
#: stays the same as for live runs (each log <= eventlog.DEFAULT_LOG_MAX_BYTES).
DEFAULT_MAX_RETAINED = 1000

#: ``Retry-After`` (seconds) when the concurrent-run limit is reached. Runs end
#: all the time on a busy gateway, so a slot is likely free within a second;
#: longer makes clients idle while capacity is there.
RETRY_AFTER_BUSY_SECONDS = 1

#: ``Retry-After`` (seconds) while the server shuts down: a restart or a
#: load-balancer switch to another instance takes seconds, and shutdown itself
#: waits up to CANCEL_WAIT_SECONDS (5 s) for runs to end.
RETRY_AFTER_SHUTDOWN_SECONDS = 5

#: Idle interval before a keep-alive is sent. The WHATWG SSE authoring notes
#: recommend a comment "every 15 seconds or so" against idle-killing proxies.
DEFAULT_KEEPALIVE_SECONDS = 15.0

#: How long ``cancel()`` waits for the agent's generator to close before giving
#: up on it (a generator that ignores cancellation must not hang the server).
CANCEL_WAIT_SECONDS = 5.0

#: The producer yields to the event loop after this many events even if the
#: agent never suspended, so one agent that emits a burst cannot starve the
#: other streams. 256 events (~25 KiB) is well under one coalesced write, and
#: rare enough not to split the bursts a real model stream delivers.
PRODUCER_YIELD_EVERY = 256

#: After a waiting subscriber is woken it lets the event loop run up to this many
#: more passes before it reads, as long as each pass brought new events (a burst
#: in progress), so that they join the same write. A producer that went quiet
#: costs one pass. Fewer, larger writes are most of what the gateway saves per
#: event (see the transports benchmark); a pass is microseconds when idle.
COALESCE_MAX_PASSES = 4

#: Random bytes of a run key, the capability that lets a client stream, resume
#: and cancel its run when tokens do not tell clients apart (spec/transports.md
#: §2.6). 16 bytes = 128 bits, more than a UUIDv4's 122: guessing one online at a
#: million requests a second would take ~10^25 years. 22 URL-safe characters.
RUN_KEY_BYTES = 16


def client_key(principal: str | None, address: str | None) -> str | None:
    """Who a run counts against for max_runs_per_client: the principal a per-client
    token names, else the client's address (None: neither -- stdio's one client)."""
    if principal:
        return "principal:" + principal
    if address:
        return "address:" + address
    return None


def run_key_hash(key: str) -> str:
    """What a registry (and a shared event log) keeps of a run key: its SHA-256,
    hex. Holding only the hash, neither a heap dump nor a reader of the shared
    store can present the key."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def may_touch(owner: str | None, key_hash: str, caller: Caller | None) -> bool:
    """The one rule of spec/transports.md §2.6, for runs and for the kept runs of a thread:
    ``caller`` may touch what ``owner`` (a principal) started with a run key hashing to
    ``key_hash`` (None caller: the embedding program, always)."""
    if caller is None:
        return True
    if caller.key is not None and key_hash and hmac.compare_digest(run_key_hash(caller.key), key_hash):
        return True
    if owner and caller.principal == owner:
        return True
    return not key_hash and not owner


class Caller(NamedTuple):
    """Who asks, over the network, to stream, resume or cancel a run: the principal
    their bearer token names (``check_bearer``: None auth off, ``""`` the shared
    token, else a name) and the run key they presented (None: none)."""

    principal: str | None
    key: str | None = None


class RegistryOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The registry's limits and periods, in one value that servers pass through
    unchanged (``create_app(agent, options=RegistryOptions(max_runs=50))``).

    ``max_runs``: concurrent running runs (then 503 / 4503). ``grace_seconds``: how
    long a run outlives its last subscriber when that one declared it resumes;
    ``disconnect_grace_seconds``: when it did not (the official client's abort:
    0, it stops at once; see RunRegistry.subscribe). ``retention_seconds``: how long a
    finished run stays resumable. ``max_retained``: finished runs kept at most.
    ``verify``: run every event through the protocol Verifier (default on: the
    gateway never forwards a stream a client would reject).
    ``max_runs_per_client``: runs one client (its principal, else its address) may
    hold, running or still being read (then 503; 0: no cap). ``max_buffered_bytes``:
    the budget of event bytes all run logs hold (then 503, and growing runs are
    trimmed; 0: none; applies to the registry's own in-memory log).
    ``keep_history``: keep each thread's ended runs in the event log, when it is a
    :class:`~transports.history.ThreadStore` (spec/transports.md §4.4).
    ``tracing``: trace every run with OpenTelemetry (``transports/otel.py``: an
    ``invoke_agent`` span per run, chat and ``execute_tool`` spans under it; the
    ``[otel]`` extra, the application's configured tracer provider).
    Raises UsageError (at construction) for a value out of range.
    """

    max_runs: int = DEFAULT_MAX_RUNS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    disconnect_grace_seconds: float = DEFAULT_DISCONNECT_GRACE_SECONDS
    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    max_retained: int = DEFAULT_MAX_RETAINED
    verify: bool = True
    max_runs_per_client: int = DEFAULT_MAX_RUNS_PER_CLIENT
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    keep_history: bool = True
    tracing: bool = False

    def __post_init__(self) -> None:
        if self.max_runs < 1:
            raise UsageError(f"RegistryOptions.max_runs must be >= 1, got {self.max_runs}")
        for count in ("max_retained", "max_runs_per_client", "max_buffered_bytes"):
            if getattr(self, count) < 0:
                raise UsageError(f"RegistryOptions.{count} must be >= 0, got {getattr(self, count)}")
        for name in ("grace_seconds", "disconnect_grace_seconds", "retention_seconds"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise UsageError(f"RegistryOptions.{name} must be >= 0, got {value}")


class ServerBusyError(CapacityError):
    """The concurrent-run limit is reached; try again after ``retry_after`` seconds."""

    http_status = 503
    ws_close_code = WS_CLOSE_BUSY
    default_code = "server_busy"

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_BUSY_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RunExistsError(RemoteInputError):
    """A run with this ``runId`` is already known here (start it with a new id, or resume it)."""

    http_status = 409
    ws_close_code = WS_CLOSE_RUN_EXISTS
    default_code = "run_exists"


class Run:
    """The registry's record of one run: its input, identity and access (owner,
    key hash), the newest seq logged (``head``), its :class:`RunLifecycle`
    (every decision about it), and the IO handles the registry drives that
    machine with (``task``, ``waiters``, the grace and retention timers). Created
    by the registry."""

    __slots__ = (
        "__weakref__",
        "client",
        "grace_timer",
        "history_parent",
        "head",
        "kept_early",
        "input",
        "key",
        "key_hash",
        "kept",
        "lifecycle",
        "owner",
        "retention_timer",
        "run_id",
        "task",
        "thread_id",
        "waiters",
    )

    def __init__(self, input: RunAgentInput, lifecycle: RunLifecycle | None = None) -> None:
        self.run_id = input.run_id
        self.thread_id = input.thread_id
        self.input = input
        self.lifecycle = lifecycle if lifecycle is not None else RunLifecycle()
        #: seq of the newest event appended (0: none yet).
        self.head = 0
        #: The producer task (None: a follower, or not started yet).
        self.task: asyncio.Task[None] | None = None
        #: Futures of the subscribers waiting for the next event (see wake()).
        self.waiters: list[asyncio.Future[bool]] = []
        self.grace_timer: TimerHandle | None = None
        self.retention_timer: TimerHandle | None = None
        #: Who the run counts against for max_runs_per_client (None: nobody).
        self.client: str | None = None
        #: The principal that started the run (see ``check_bearer``): ``None`` with
        #: auth off, ``""`` for the shared token (neither tells clients apart).
        self.owner: str | None = None
        #: The run key (RUN_KEY_BYTES random bytes, URL-safe text), handed to the
        #: client that started the run; None on a follower (only its hash travels).
        self.key: str | None = None
        #: ``run_key_hash(key)``; a follower's comes from the shared log ("": the
        #: node that started the run recorded none).
        self.key_hash = ""
        #: Whether the run goes into its thread's history when it ends, and its parent
        #: there (the input's parentRunId, else the thread's latest kept run).
        self.kept = False
        self.history_parent: str | None = None
        #: Whether its record was kept before its terminal event went out (a durable store).
        self.kept_early = False

    @classmethod
    def following(cls, run_id: str) -> Run:
        """A follower: a run another gateway node runs, read from the shared log."""
        return cls(RunAgentInput(thread_id="", run_id=run_id, messages=[]), RunLifecycle(following=True))

    @property
    def phase(self) -> RunPhase:
        return self.lifecycle.phase

    @property
    def follower(self) -> bool:
        return self.lifecycle.phase is RunPhase.FOLLOWING

    @property
    def finished(self) -> bool:
        """No longer running here: its log is complete (or it is a follower)."""
        return not self.lifecycle.live

    @property
    def subscribers(self) -> int:
        return self.lifecycle.subscribers

    @property
    def terminal_code(self) -> str | None:
        """``None`` for RUN_FINISHED, else the RUN_ERROR code, once finished."""
        return self.lifecycle.terminal_code

    def wake(self) -> None:
        """Wake every subscriber waiting for the next event."""
        waiters = self.waiters
        if waiters:
            self.waiters = []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    async def wait_finished(self) -> None:
        """Return once the producer has ended (the log holds the terminal event)."""
        if self.task is not None:
            await asyncio.shield(self.task)


class Subscription:
    """A cursor into one run's log. Use as an async context manager (or call
    :meth:`close`) so that the registry knows when the last subscriber leaves."""

    __slots__ = ("closed", "cursor", "done", "registry", "resumable", "run")

    def __init__(self, registry: RunRegistry, run: Run, cursor: int, resumable: bool = True) -> None:
        self.registry = registry
        self.run = run
        #: Whether the client comes back after a drop (decides the grace period
        #: when it is the last subscriber to leave; see RunRegistry.subscribe).
        self.resumable = resumable
        #: seq of the last event handed out.
        self.cursor = cursor
        #: True once the slice holding the run's last event was returned.
        self.done = False
        self.closed = False

    async def next(self, timeout: float | None = None) -> LogSlice | None:
        """The events after the cursor that are ready (waiting until at least one
        is, or the run ends); ``None`` when ``timeout`` seconds passed without any
        (time for a keep-alive). A returned slice with ``finished`` set is the last.

        Raises CursorExpiredError when the producer lapped this subscriber, and
        UsageError after the last slice was returned.
        """
        if self.done:
            raise UsageError("Subscription.next() after the run's last events were returned")
        run = self.run
        registry = self.registry
        if run.follower:
            return await self._next_following(timeout)
        if self.cursor > run.head:
            # No client can hold a cursor past the stored head: every node hands out
            # only stored events. A live run used to wait here silently (issue 22).
            raise BadCursorError(f"run {run.run_id!r}: resume cursor {self.cursor} is ahead of its log (0..{run.head})")
        lifecycle = run.lifecycle
        while True:
            if run.head > self.cursor or not lifecycle.live:
                read_nowait = registry.read_nowait
                if read_nowait is not None:
                    sl: LogSlice = read_nowait(run.run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES)
                else:
                    sl = await registry.log.read(
                        run.run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES
                    )
                if self._took(sl):
                    return sl
            if timeout is not None and timeout <= 0:
                return None
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            run.waiters.append(fut)
            if timeout is not None:
                registry.keepalive.arm(fut, timeout)
            try:
                woke = await fut
            finally:
                if timeout is not None:
                    registry.keepalive.disarm(fut)
                if not fut.done() or not fut.result():
                    try:
                        run.waiters.remove(fut)
                    except ValueError:
                        pass
            if not woke:
                return None
            # Let the producer run more loop passes while it keeps producing
            # (a burst in progress): its next events join this write.
            for _ in range(COALESCE_MAX_PASSES):
                before = run.head
                await asyncio.sleep(0)
                if run.head == before or not lifecycle.live:
                    break

    def _took(self, sl: LogSlice) -> bool:
        """Move the cursor past ``sl``; True when it is worth returning (events, or the end)."""
        if sl.payloads:
            self.cursor = sl.first_seq + len(sl.payloads) - 1
        if sl.finished:
            self.done = True
        return bool(sl.payloads) or sl.finished

    async def _next_following(self, timeout: float | None) -> LogSlice | None:
        # A run on another node: the shared log is the only source, and its
        # ``wait`` the only wake-up (see EventLog.wait).
        log = self.registry.log
        run_id = self.run.run_id
        while True:
            try:
                sl = await log.read(run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES)
            except BadCursorError:
                # A cursor past what the shared log holds: no node handed it out
                # (each serves only stored events), so it is refused, live run or not.
                raise
            if self._took(sl):
                return sl
            if timeout is not None and timeout <= 0:
                return None
            if not await log.wait(run_id, self.cursor, timeout):
                return None

    async def events(self, timeout: float | None = None) -> AsyncIterator[LogSlice | None]:
        """Iterate :meth:`next` until the run's last slice (inclusive)."""
        while not self.done:
            yield await self.next(timeout)

    def close(self) -> None:
        """Leave the run (idempotent). The last subscriber leaving starts the grace timer."""
        if not self.closed:
            self.closed = True
            self.registry.leave(self.run, self.resumable)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


#: The keep-alive clock's resolution, as a fraction of the interval: a keep-alive
#: goes out between 1x and 1.25x the interval after the last write. One shared
#: timer instead of one per waiting stream keeps the timer heap small at 1,000s
#: of streams (re-arming a per-stream timer on every batch cost ~3% CPU).
KEEPALIVE_RESOLUTION = 0.25
#: Floor of the keep-alive clock's tick (seconds), for very short test intervals.
KEEPALIVE_MIN_TICK = 0.005


class KeepAliveClock:
    """Wakes waiting subscribers whose keep-alive deadline passed, with one timer
    for all of them (see KEEPALIVE_RESOLUTION)."""

    def __init__(self) -> None:
        self._deadlines: dict[asyncio.Future[bool], float] = {}
        self._task: asyncio.Task[None] | None = None
        self._tick = 0.0

    def arm(self, fut: asyncio.Future[bool], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._deadlines[fut] = loop.time() + timeout
        tick = max(KEEPALIVE_MIN_TICK, timeout * KEEPALIVE_RESOLUTION)
        if self._task is None or tick < self._tick:
            if self._task is not None:
                self._task.cancel()
            self._tick = tick
            self._task = loop.create_task(self._run(tick))

    def disarm(self, fut: asyncio.Future[bool]) -> None:
        self._deadlines.pop(fut, None)

    async def _run(self, tick: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._deadlines:
                await asyncio.sleep(tick)
                now = loop.time()
                for fut in [f for f, deadline in self._deadlines.items() if deadline <= now]:
                    del self._deadlines[fut]
                    if not fut.done():
                        fut.set_result(False)
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


class RunRegistry:
    """Runs served by one gateway (one per server / app). See the module docstring.

    ``options``: limits and periods (:class:`RegistryOptions`; defaults when None).
    ``log``: the event log (an :class:`~transports.eventlog.InMemoryEventLog` when
    None). ``clock``: schedules the grace and retention timers
    (:class:`~transports.clock.LoopClock` when None; tests pass a
    :class:`~transports.clock.ManualClock`). Raises UsageError for a non-Agent.
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
        # a remote AG-UI agent is served inside the agent loop (remote_agents.serving_agent)
        self.agent: Agent = serving_agent(as_agent(agent, where="RunRegistry(agent)"))
        self.options = options if options is not None else RegistryOptions()
        self.log: EventLog = (
            log if log is not None else InMemoryEventLog(max_total_bytes=self.options.max_buffered_bytes or None)
        )
        # Per client (see client_key): the ids of its runs not yet discarded.
        self._clients: dict[str, set[str]] = {}
        self.clock: Clock = clock if clock is not None else LoopClock()
        self._runs: dict[str, Run] = {}
        self._active = 0
        # Finished runs nobody reads, oldest first: the max_retained eviction queue
        # (a run joins and leaves it when its lifecycle says QUEUE / UNQUEUE).
        self._retained: OrderedDict[str, Run] = OrderedDict()
        #: Whether new runs are admitted (open / draining / closed).
        self.gateway = GatewayLifecycle()
        #: Wakes waiting subscribers for their keep-alives, one timer for all.
        self.keepalive = KeepAliveClock()
        #: The log when several gateway nodes share it (runs owned here are
        #: coordinated with the others through it; see spec/transports.md 4.1).
        self._shared: SharedEventLog | None = self.log if isinstance(self.log, SharedEventLog) else None
        if self._shared is not None:
            self._shared.attach(self)
        self.metrics = metrics
        if metrics is not None:
            metrics.bind(lambda: float(self._active), lambda: float(self.draining))
        # Plain-function fast paths of a log that never suspends (InMemoryEventLog).
        self._appender = getattr(self.log, "appender", None)
        #: The log's non-suspending read (InMemoryEventLog.read_nowait), or None.
        self.read_nowait: Callable[..., LogSlice] | None = getattr(self.log, "read_nowait", None)
        self._held_bytes: Callable[[], int] | None = getattr(self.log, "held_bytes", None)
        self._discard_nowait = getattr(self.log, "discard_nowait", None)
        #: Answers proxied MCP requests: the agent's MCP servers (its ``mcp_apps``), else none (every
        #: request then names an unknown server, as the middleware with no servers answers).
        proxy = getattr(self.agent, "mcp_apps", None)
        self.mcp_apps: McpAppsProxy = proxy if isinstance(proxy, McpAppsProxy) else McpAppsProxy()
        #: Where thread histories are kept (``threads``, a durable store, else the log when it
        #: keeps them; none without keep_history).
        self.threads: ThreadStore | None = (
            None if not self.options.keep_history
            else threads if threads is not None
            else self.log if isinstance(self.log, ThreadStore) else None
        )
        #: Whether the history is kept apart from the log (a durable store: IO of its own).
        self._store_apart = self.threads is not None and self.threads is not cast(object, self.log)
        # History retention is wall-clock time: a shared store compares it across nodes.
        self._wall: Callable[[], float] = getattr(self.clock, "wall_time", time.time)
        #: Traces the runs (RegistryOptions.tracing; loops/observe.py's hook), else None.
        self.observer: OTelObserver | None = None
        if self.options.tracing:
            self.observer = OTelObserver()

    # -- queries -------------------------------------------------------------------------

    def wall_time(self) -> float:
        """Wall-clock Unix seconds of the registry's clock (what history retention counts)."""
        return self._wall()

    @property
    def max_runs(self) -> int:
        return self.options.max_runs

    @property
    def grace_seconds(self) -> float:
        return self.options.grace_seconds

    @property
    def disconnect_grace_seconds(self) -> float:
        return self.options.disconnect_grace_seconds

    @property
    def retention_seconds(self) -> float:
        return self.options.retention_seconds

    @property
    def max_retained(self) -> int:
        return self.options.max_retained

    @property
    def verify(self) -> bool:
        return self.options.verify

    @property
    def active(self) -> int:
        """Number of runs still running."""
        return self._active

    @property
    def shared_log(self) -> SharedEventLog | None:
        """The log when it is shared by several gateway nodes (else None)."""
        return self._shared

    @property
    def draining(self) -> bool:
        """True once :meth:`drain` or :meth:`shutdown` began: new runs are refused."""
        return not self.gateway.admits

    async def ready(self) -> bool:
        """Whether a load balancer should send new runs here: not draining, and
        the event log reachable (a shared log is pinged)."""
        if self.draining:
            return False
        if self._shared is not None:
            try:
                await self._shared.ping()
            except EventLogUnavailableError:
                return False
        return True

    # -- what a shared event log asks of us (eventlog.RunControl) --------------------------

    def log_cancel(self, run_id: str, code: str, message: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.lifecycle.cancellable:
            self._fire(run, RunEvent.CANCEL, (code, message))

    def log_advanced(self, run_id: str, seq: int) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            if seq > run.head:
                run.head = seq
            run.wake()

    def log_append_latency(self, seconds: float, events: int) -> None:
        if self.metrics is not None:
            self.metrics.note_log_append(seconds)

    def get(self, run_id: str) -> Run:
        """The run with this id. Raises UnknownRunError."""
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRunError(run_id)
        return run

    async def find(self, run_id: str) -> Run:
        """The run with this id for a resume: this registry's own run, else -- when
        the event log (a shared store) holds the run, started by another gateway
        node -- a *follower* run served from the log alone, carrying the principal
        and key hash its node recorded. Raises UnknownRunError."""
        run = self._runs.get(run_id)
        if run is not None:
            return run
        await self.log.head(run_id)  # raises UnknownRunError when no node has it
        follower = Run.following(run_id)
        if self._shared is not None:
            follower.owner, follower.key_hash = await self._shared.run_access(run_id)
        return follower

    # -- lifecycle -----------------------------------------------------------------------

    def check_owner(self, run: Run, caller: Caller | None) -> Run:
        """``run`` if ``caller`` may stream, resume or cancel it (spec/transports.md
        §2.6): it presents the run's key, or it is the named principal that started
        the run (per-client tokens). ``caller`` None: the transport itself (stdio's
        one client, shutdown), always allowed. A run whose node recorded no key hash
        (a shared log written before run keys) is checked by principal alone.
        Raises UnknownRunError otherwise -- the same 404 as for a run that does not
        exist, so ids cannot be probed."""
        if may_touch(run.owner, run.key_hash, caller):
            return run
        raise UnknownRunError(run.run_id)

    async def start(
        self, input: RunAgentInput, *, owner: str | None = None, address: str | None = None, key: str | None = None
    ) -> Run:
        """Start a run owned by ``owner`` (a principal; see :meth:`check_owner`),
        with a new run key (``run.key``, for the transport to hand to the client).
        ``address``: the client's network address; the run counts against
        max_runs_per_client for the named principal, else for the address.
        ``key``: a run key the client presented, of an earlier run of the thread: with
        it (or as the thread's named principal) the run joins the thread's history, and
        a ``parentRunId`` it names gives the agent that branch's messages
        (:func:`~transports.history.merge_input`; spec/transports.md §4.4).
        Raises ServerBusyError (a limit reached -- concurrent runs, the client's
        runs, the buffered-bytes budget -- or shutting down), RunExistsError
        (``runId`` already known), ResumeRejectedError (422: ``input.resume`` does not
        answer the interrupts the thread's branch ended with; spec/transports.md §4.4),
        EventLogUnavailableError."""
        if not self.gateway.admits:
            raise ServerBusyError("the server is shutting down", retry_after=RETRY_AFTER_SHUTDOWN_SECONDS)
        check_run_id(input.run_id)
        if input.run_id in self._runs:
            raise RunExistsError(
                f"run {input.run_id!r} already exists here; start a run with a new runId, "
                "or resume this one with Last-Event-ID"
            )
        if self._active >= self.max_runs:
            raise ServerBusyError(f"the server is running its maximum of {self.max_runs} concurrent runs")
        client = client_key(owner, address)
        cap = self.options.max_runs_per_client
        if cap and client is not None and self._client_runs(client) >= cap:
            raise ServerBusyError(
                f"this client already holds {cap} runs (running or still being read); "
                "let one finish, or read the ones it started"
            )
        budget = self.options.max_buffered_bytes
        if budget and self._held_bytes is not None and self._held_bytes() >= budget:
            raise ServerBusyError(f"the runs' logs hold their budget of {budget} bytes of undelivered events")
        # No principal and no address: the embedding program or stdio's one client, never checked.
        caller = None if owner is None and address is None else Caller(owner, key)
        # A proxied MCP request (an app calling its server) is no turn of its thread's conversation:
        # it joins no history and gets no branch's messages, whatever thread it names.
        kept, parent, input = (False, None, input) if is_proxied(input.forwarded_props) else (
            await self._lineage(input, caller))
        if input.run_id in self._runs:  # started meanwhile, while the history was read
            raise RunExistsError(f"run {input.run_id!r} already exists here; start a run with a new runId")
        run = Run(
            input,
            RunLifecycle(
                grace_seconds=self.grace_seconds,
                disconnect_grace_seconds=self.disconnect_grace_seconds,
                shared=self._shared is not None,
            ),
        )
        run.owner = owner
        run.client = client
        run.key = secrets.token_urlsafe(RUN_KEY_BYTES)
        run.key_hash = run_key_hash(run.key)
        run.kept, run.history_parent = kept, parent
        try:
            if self._shared is not None:
                await self._shared.open_run(run.run_id, run.thread_id, principal=owner or "", key_hash=run.key_hash)
            else:
                await self.log.create(run.run_id)
        except UsageError:
            # Another gateway node sharing the log has (or had) this run.
            raise RunExistsError(f"run {input.run_id!r} already exists in the shared event log") from None
        self._runs[run.run_id] = run
        if client is not None:
            self._clients.setdefault(client, set()).add(run.run_id)
        self._active += 1
        run.task = asyncio.get_running_loop().create_task(self._produce(run), name=f"agui-run-{run.run_id}")
        return run

    # -- thread history (spec/transports.md §4.4) ------------------------------------------

    async def _kept_runs(self, thread_id: str) -> list[HistoryRun]:
        assert self.threads is not None
        held = await self.threads.thread_runs(thread_id, self._wall())
        return decode_records(held.records)

    async def _lineage(self, input: RunAgentInput, caller: Caller | None) -> tuple[bool, str | None, RunAgentInput]:
        """(kept, parent, the input the agent gets) of a run about to start."""
        if self.threads is None or len(input.thread_id) > MAX_RUN_ID_LENGTH:
            return False, None, input  # a thread id longer than a run id may be is not a store key
        runs = await self._kept_runs(input.thread_id)
        if runs and not any(may_touch(r.principal, r.key_hash, caller) for r in runs):
            # Another client's thread: served, but neither kept there nor given its messages.
            return False, None, input
        named = input.parent_run_id
        if named is None:
            if runs:
                check_resume(open_interrupts(runs[-1].events), input, self._wall())
            return True, runs[-1].run_id if runs else None, input
        for r in runs:
            if r.run_id == named:
                # AG-UI 1.0: a resume answers the interrupts the branch it continues ended with
                check_resume(open_interrupts(r.events), input, self._wall())
                return True, named, merge_input(branch(runs, named).runs, input)
        return True, named, input  # a parent not kept (evicted, or never ran here): the input as sent

    async def thread_history(
        self, thread_id: str, *, run_id: str | None = None, caller: Caller | None = None
    ) -> tuple[Branch, list[bytes]]:
        """The branch of ``thread_id`` ending at ``run_id`` (default: its latest kept
        run) and its events as served (:func:`~transports.history.branch_payloads`).
        Raises UnknownThreadError (404) when the thread has no kept runs, none of them
        is ``caller``'s (:meth:`check_owner`'s rule: its principal, or the run key of one
        of them), or ``run_id`` is not one of them; EventLogUnavailableError."""
        if self.threads is None:
            raise UnknownThreadError("this gateway keeps no thread history (it runs with keep_history=False: serve --no-history)")
        if len(thread_id) > MAX_RUN_ID_LENGTH:
            raise UnknownThreadError(f"no thread id is longer than {MAX_RUN_ID_LENGTH} characters here (MAX_RUN_ID_LENGTH)")
        if run_id is not None and len(run_id) > MAX_RUN_ID_LENGTH:  # nor echoed back whole
            raise UnknownThreadError(f"no run id is longer than {MAX_RUN_ID_LENGTH} characters here (MAX_RUN_ID_LENGTH)")
        runs = await self._kept_runs(thread_id)
        if not any(may_touch(r.principal, r.key_hash, caller) for r in runs):
            # the same words whether the thread is unknown or another's: thread ids cannot be probed
            raise UnknownThreadError(
                f"unknown thread {thread_id!r}: it has no history here that you may read (present the run key "
                "of one of its runs, X-AGUI-Run-Key or ?runKey=, or the bearer token of the principal that ran them)"
            )
        found = branch(runs, run_id)
        return found, branch_payloads(found.runs)

    async def _keep_shielded(self, run: Run, terminal: bytes | None) -> None:
        """:meth:`_keep`, carried to its end even when the run's task is cancelled meanwhile
        (its client left after the terminal event): an ended run's record is not lost to a
        store that awaits IO. Bounded by the store's own timeouts."""
        keep = asyncio.ensure_future(self._keep(run, terminal))
        while True:
            try:
                await asyncio.shield(keep)
                return
            except asyncio.CancelledError:
                if keep.done():
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()

    async def _keep(self, run: Run, terminal: bytes | None = None) -> None:
        """Read the ended run's log whole -- up to its terminal event, the last one, which a
        write-behind log may still be storing -- and keep it in its thread's history.
        ``terminal``: the terminal event about to be appended (the log holds the rest)."""
        assert self.threads is not None
        log, rid = self.log, run.run_id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HISTORY_READ_TIMEOUT_SECONDS
        payloads: list[bytes] = []
        after, complete = 0, True
        while True:
            try:
                sl = await log.read(rid, after)
            except CursorExpiredError as exc:
                complete, after = False, exc.first_available - 1
                continue
            payloads.extend(sl.payloads)
            if sl.payloads:
                after = sl.last_seq
                if sl.payloads[-1].startswith(_TERMINAL_PREFIXES):
                    break
            if sl.finished:
                break
            if not sl.payloads:
                if terminal is not None:  # everything appended so far is read: add the terminal
                    payloads.append(terminal)
                    break
                left = deadline - loop.time()
                if left <= 0 or not await log.wait(rid, after, left):
                    break
        record = build_record(
            run.input,
            run.history_parent,
            payloads,
            complete=complete,
            principal=run.owner or "",
            key_hash=run.key_hash,
            max_bytes=self.threads.history_budget.max_thread_bytes,
        )
        await self.threads.keep_run(run.thread_id, record, self._wall())

    def subscribe(self, run: Run, after: int = 0, *, resumable: bool = True) -> Subscription:
        """A subscription that starts after event ``after`` (0: from the beginning).
        The cursor is checked on the first ``next()`` (CursorExpiredError, BadCursorError).

        ``resumable``: the client reconnects after a drop (it said so, or it is
        resuming now). When the last subscriber leaves a running run, the run
        waits ``grace_seconds`` for it if that subscriber was resumable, else
        ``disconnect_grace_seconds`` (0: it is cancelled at once, code
        ``disconnected``): a client that will not come back has stopped the run.
        Raises UnknownRunError for a run already discarded."""
        if run.phase is RunPhase.DISCARDED:
            raise UnknownRunError(run.run_id)
        self._fire(run, RunEvent.SUBSCRIBE)
        return Subscription(self, run, after, resumable)

    def leave(self, run: Run, resumable: bool) -> None:
        """A subscriber of ``run`` left (Subscription.close calls this): the last one
        leaving a live run orphans it (grace timer), a finished one may go."""
        self._fire(run, RunEvent.UNSUBSCRIBE, resumable)

    # -- the lifecycle's effects ---------------------------------------------------------

    def _fire(self, run: Run, event: RunEvent, arg: object = None) -> None:
        self._apply(run, run.lifecycle.fire(event, arg))

    def _apply(self, run: Run, effects: tuple[Effect, ...]) -> None:
        """Carry out what the run's lifecycle asked for (those that need no await;
        the producer does END_AT_ONCE, APPEND_* and FINISH_LOG itself)."""
        lifecycle = run.lifecycle
        for effect in effects:
            if effect is Effect.CANCEL_PRODUCER:
                assert lifecycle.cancel is not None
                _log.info("run %s: cancelling (%s)", run.run_id, lifecycle.cancel[1])
                if run.task is not None:
                    run.task.cancel()
            elif effect is Effect.ARM_GRACE:
                _stop(run.grace_timer)
                run.grace_timer = self._timer(run, lifecycle.grace_delay, RunEvent.GRACE_EXPIRED)
            elif effect is Effect.STOP_GRACE:
                run.grace_timer = _stop(run.grace_timer)
            elif effect is Effect.CHECK_REMOTE_READERS:
                asyncio.get_running_loop().create_task(self._check_remote_readers(run))
            elif effect is Effect.RUN_ENDED:
                self._active -= 1
                if self.metrics is not None:
                    self.metrics.note_run_ended(lifecycle.terminal_code)
                run.wake()
            elif effect is Effect.START_RETENTION:
                if not self.gateway.closed:
                    run.retention_timer = self._timer(run, self.retention_seconds, RunEvent.RETENTION_EXPIRED)
            elif effect is Effect.STOP_RETENTION:
                run.retention_timer = _stop(run.retention_timer)
            elif effect is Effect.QUEUE:
                self._retained[run.run_id] = run
                while len(self._retained) > self.max_retained:
                    _, old = self._retained.popitem(last=False)
                    self._fire(old, RunEvent.EVICTED)
            elif effect is Effect.UNQUEUE:
                self._retained.pop(run.run_id, None)
            elif effect is Effect.DISCARD:
                self._drop(run)
            elif effect is Effect.FOLLOW:
                if self._shared is not None:
                    self._shared.follow(run.run_id)
            elif effect is Effect.UNFOLLOW:
                if self._shared is not None:
                    self._shared.unfollow(run.run_id)
            else:  # pragma: no cover - END_AT_ONCE, APPEND_*, FINISH_LOG come only from the producer's events
                raise UsageError(f"run {run.run_id}: effect {effect.name} outside the producer")

    def _timer(self, run: Run, delay: float, event: RunEvent) -> TimerHandle:
        """A timer on the registry's clock that fires ``event`` at ``run``'s lifecycle."""
        return self.clock.call_later(delay, lambda: self._fire(run, event))

    async def _check_remote_readers(self, run: Run) -> None:
        # Subscribers on other nodes count too: the shared log knows when one last read.
        assert self._shared is not None
        try:
            age = await self._shared.remote_reader_age(run.run_id)
        except EventLogUnavailableError:
            age = None  # the run is being ended for the lost log anyway
        self._fire(run, RunEvent.REMOTE_READERS, age)

    async def cancel(
        self, run_id: str, *, code: str = "cancelled", message: str = "the run was cancelled", caller: Caller | None = None
    ) -> Run:
        """Cancel a running run at once: the agent's generator is closed (the upstream
        call aborted) and ``RUN_ERROR{code}`` ends the stream. Returns when that is
        done (or after CANCEL_WAIT_SECONDS). Raises UnknownRunError (also for a run
        ``caller`` may not touch: :meth:`check_owner`), RunFinishedError."""
        if run_id not in self._runs and self._shared is not None:
            return await self.cancel_remote(run_id, caller)
        run = self.cancel_nowait(run_id, code=code, message=message, caller=caller)
        await self._wait(run, CANCEL_WAIT_SECONDS)
        return run

    async def request_remote_cancel(self, run_id: str, caller: Caller | None) -> None:
        """Ask the node that owns ``run_id`` (shared log) to cancel it and return at
        once, after checking ``caller`` against the principal and key hash that node
        recorded. Raises UnknownRunError (also for a caller who may not), RunFinishedError."""
        assert self._shared is not None
        self.check_owner(await self.find(run_id), caller)
        if not await self._shared.request_cancel(run_id):
            raise RunFinishedError(f"run {run_id!r} has already finished")

    async def cancel_remote(self, run_id: str, caller: Caller | None) -> Run:
        """:meth:`request_remote_cancel`, then wait (up to CANCEL_WAIT_SECONDS)
        until the run's terminal event is in the shared log."""
        assert self._shared is not None
        await self.request_remote_cancel(run_id, caller)
        log = self._shared
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT_SECONDS
        after = await log.head(run_id)
        while (left := deadline - loop.time()) > 0:
            sl = await log.read(run_id, after)
            if sl.finished:
                break
            after = sl.last_seq if sl.payloads else after
            await log.wait(run_id, after, left)
        else:
            _log.warning("run %s: its owner did not end it within %.1f s of cancellation", run_id, CANCEL_WAIT_SECONDS)
        return Run.following(run_id)

    def cancel_nowait(
        self, run_id: str, *, code: str = "cancelled", message: str = "the run was cancelled", caller: Caller | None = None
    ) -> Run:
        """Start cancelling a running run and return at once (``run.wait_finished()``
        waits for the end). For message loops that must not block on one run.
        Raises UnknownRunError (also for a run ``caller`` may not touch), RunFinishedError."""
        run = self.check_owner(self.get(run_id), caller)
        try:
            self._fire(run, RunEvent.CANCEL, (code, message))
        except RunFinishedError:
            raise RunFinishedError(f"run {run_id!r} has already finished") from None
        return run

    async def _wait(self, run: Run, timeout: float) -> None:
        if run.task is None:
            return
        done, _ = await asyncio.wait({run.task}, timeout=timeout)
        if not done:
            _log.warning("run %s: the agent did not stop within %.1f s of cancellation", run.run_id, timeout)

    async def drain(self, timeout: float) -> None:
        """Refuse new runs (503, and :meth:`ready` turns False) and wait up to
        ``timeout`` seconds for the running ones to end by themselves; then
        return (call :meth:`shutdown` to end the rest)."""
        self.gateway.fire(GatewayEvent.DRAIN)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._active and (left := deadline - loop.time()) > 0:
            tasks = {r.task for r in self._runs.values() if r.lifecycle.live and r.task is not None}
            if not tasks:
                break
            await asyncio.wait(tasks, timeout=left)

    async def shutdown(self, *, timeout: float = CANCEL_WAIT_SECONDS) -> None:
        """Refuse new runs, cancel every running run with ``RUN_ERROR{code:
        "shutdown"}`` and wait (up to ``timeout``) for their producers to end, so
        that open streams can send the terminal event before the server closes."""
        self.gateway.fire(GatewayEvent.SHUTDOWN)
        running = [r for r in self._runs.values() if r.lifecycle.live]
        for run in running:
            if run.lifecycle.cancellable:
                self._fire(run, RunEvent.CANCEL, ("shutdown", "the server is shutting down"))
        tasks = {r.task for r in running if r.task is not None}
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for run in self._runs.values():
            run.retention_timer = _stop(run.retention_timer)
        self.keepalive.close()

    # -- the producer: the gateway path ---------------------------------------------------

    async def _append(self, run: Run, event: Any) -> None:
        # Synthetic events (RUN_STARTED prelude, RUN_ERROR) and agent events share this.
        seq = await self.log.append(run.run_id, encode_event(event))
        if seq > run.head:
            run.head = seq
        run.wake()

    @staticmethod
    def _note_lifecycle(run: Run, ev: Any, cls: type) -> None:
        if cls is RunStartedEvent:
            run.lifecycle.fire(RunEvent.STARTED_LOGGED)
        else:
            run.lifecycle.fire(RunEvent.TERMINAL_LOGGED, (ev.code or "run_error") if cls is RunErrorEvent else None)

    async def _produce(self, run: Run) -> None:
        lifecycle = run.lifecycle
        if Effect.END_AT_ONCE in lifecycle.fire(RunEvent.PRODUCER_STARTED):
            await self._finish(run, None)  # cancelled before the producer ran: the pending cancel ends it
            return
        gen: Any = None
        metrics = self.metrics
        started_at = asyncio.get_running_loop().time() if metrics is not None else 0.0
        # The input lets the verifier accept TOOL_CALL_RESULTs for calls made in an
        # earlier run (human in the loop: the client sends them back in the messages).
        verifier = Verifier(input=run.input) if self.verify else None
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
            span = run_span(self.observer, run.input, self.agent)
        try:
            gen = self._open_agent(run.input)
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
                    payload = encode_event(ev)
                    if cls in _TERMINALS and run.kept and self._store_apart:
                        # A durable store writes with IO: keep the record before the terminal event
                        # goes out, so a client that saw the end reads the history with it.
                        await self._keep_shielded(run, payload)
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

    def _open_agent(self, input: RunAgentInput) -> Any:
        # A proxied MCP request (an MCP app's iframe calling its server) is answered here, for
        # every agent and transport, never by the agent: the run was admitted, authenticated and
        # owned like any other (spec/mcp.md, the proxy). Raises ProxiedRequestError when malformed.
        request = proxied_request(input.forwarded_props)
        if request is not None:
            return self.mcp_apps.run(input, request)
        # What agent.run(input) returned, checked: an ``async def run`` without a
        # yield returns a coroutine, which ``async for`` would refuse with a bare
        # TypeError. Raises UsageError saying what to write instead.
        gen = self.agent.run(input)
        if not hasattr(gen, "__anext__"):
            close = getattr(gen, "close", None)
            if inspect.iscoroutine(gen) and close is not None:
                close()  # never awaited on purpose: no "never awaited" warning
            raise UsageError(
                f"{self.agent!r}.run(input) returned {type(gen).__name__}, not an async iterator: "
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
                    if run.kept and not run.kept_early:
                        # Kept before the log ends: a client that saw the end reads the history with it.
                        # Whatever happens here, the log must still end (its readers wait for that).
                        try:
                            await self._keep_shielded(run, None)
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
            self._fire(run, RunEvent.LOG_FINISHED)

    def _client_runs(self, client: str) -> int:
        """How many runs ``client`` holds: running, or finished and still being read."""
        runs = self._runs
        held = 0
        for rid in self._clients.get(client, ()):
            run = runs.get(rid)
            if run is not None and (run.lifecycle.live or run.subscribers):
                held += 1
        return held

    def _drop(self, run: Run) -> None:
        self._runs.pop(run.run_id, None)
        if run.client is not None:
            ids = self._clients.get(run.client)
            if ids is not None:
                ids.discard(run.run_id)
                if not ids:
                    del self._clients[run.client]
        run.retention_timer = _stop(run.retention_timer)
        if self._discard_nowait is not None:
            self._discard_nowait(run.run_id)
        else:
            asyncio.get_running_loop().create_task(self.log.discard(run.run_id))


def _stop(timer: TimerHandle | None) -> TimerHandle | None:
    """Cancel ``timer`` (if any); returns None, for ``run.x_timer = _stop(run.x_timer)``."""
    if timer is not None:
        timer.cancel()
    return None
