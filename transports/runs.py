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

Run states (``Run.state``)::

    running --agent ends / error / cancel--> finished --retention expires--> discarded
       |  \\__ last subscriber leaves, resumable --> (grace timer) --expires--> cancel("abandoned")
       |  \\__ last subscriber leaves, not resumable --> (disconnect grace, 0 s) --> cancel("disconnected")
       |  \\__ a subscriber arrives ---> grace timer stopped
       \\__ cancel(reason) -> producer task cancelled -> agent generator aclose()d
                           -> RUN_ERROR{code: reason} appended -> finished

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
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NamedTuple, Self

import msgspec

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
from agui_engine.protocol.verify import Verifier

from .clock import Clock, LoopClock, TimerHandle
from .common import MAX_SEQ_DIGITS, check_run_id
from .remote_agents import serving_agent
from .eventlog import (
    READ_MAX_BYTES,
    READ_MAX_EVENTS,
    BadCursorError,
    EventLog,
    EventLogUnavailableError,
    InMemoryEventLog,
    LogSlice,
    SharedEventLog,
    UnknownRunError,
)

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "Caller",
    "DEFAULT_DISCONNECT_GRACE_SECONDS",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_KEEPALIVE_SECONDS",
    "DEFAULT_MAX_RETAINED",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_RETENTION_SECONDS",
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
    "run_key_hash",
]

logger = logging.getLogger("agui_engine.transports")

_LIFECYCLE = frozenset({RunStartedEvent, RunFinishedEvent, RunErrorEvent})

#: Concurrent running runs per registry. Each holds an open model stream; 1,000
#: is what one gateway process on a 2-core machine streams comfortably (see the
#: transports benchmark) -- past it the server answers 503 + Retry-After.
DEFAULT_MAX_RUNS = 1000

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

#: WebSocket close/error codes for the registry's refusals.
WS_CLOSE_RUN_EXISTS = 4409

#: Random bytes of a run key, the capability that lets a client stream, resume
#: and cancel its run when tokens do not tell clients apart (spec/transports.md
#: §2.6). 16 bytes = 128 bits, more than a UUIDv4's 122: guessing one online at a
#: million requests a second would take ~10^25 years. 22 URL-safe characters.
RUN_KEY_BYTES = 16


def run_key_hash(key: str) -> str:
    """What a registry (and a shared event log) keeps of a run key: its SHA-256,
    hex. Holding only the hash, neither a heap dump nor a reader of the shared
    store can present the key."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


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
    Raises UsageError (at construction) for a value out of range.
    """

    max_runs: int = DEFAULT_MAX_RUNS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    disconnect_grace_seconds: float = DEFAULT_DISCONNECT_GRACE_SECONDS
    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    max_retained: int = DEFAULT_MAX_RETAINED
    verify: bool = True

    def __post_init__(self) -> None:
        if self.max_runs < 1:
            raise UsageError(f"RegistryOptions.max_runs must be >= 1, got {self.max_runs}")
        if self.max_retained < 0:
            raise UsageError(f"RegistryOptions.max_retained must be >= 0, got {self.max_retained}")
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


class RunFinishedError(RemoteInputError):
    """The run has already ended; there is nothing left to cancel."""

    http_status = 409
    ws_close_code = WS_CLOSE_RUN_EXISTS
    default_code = "run_finished"


class Run:
    """One run: its input, producer task, subscribers and state. Created by the registry."""

    __slots__ = (
        "__weakref__",
        "_cancel_reason",
        "_grace_handle",
        "_producing",
        "_started_sent",
        "_task",
        "_terminal_sent",
        "_waiters",
        "follower",
        "head",
        "input",
        "key",
        "key_hash",
        "owner",
        "run_id",
        "state",
        "subscribers",
        "terminal_code",
        "thread_id",
    )

    def __init__(self, input: RunAgentInput) -> None:
        self.run_id = input.run_id
        self.thread_id = input.thread_id
        self.input = input
        self.state = "running"
        #: seq of the newest event appended (0: none yet).
        self.head = 0
        self.subscribers = 0
        #: ``None`` for RUN_FINISHED, else the RUN_ERROR code, once finished.
        self.terminal_code: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[asyncio.Future[bool]] = []
        self._grace_handle: TimerHandle | None = None
        self._cancel_reason: tuple[str, str] | None = None
        self._started_sent = False
        self._terminal_sent = False
        self._producing = False
        #: True for a run this registry only follows: it runs on another gateway
        #: node, and its events come from the shared event log.
        self.follower = False
        #: The principal that started the run (see ``check_bearer``): ``None`` with
        #: auth off, ``""`` for the shared token (neither tells clients apart).
        self.owner: str | None = None
        #: The run key (RUN_KEY_BYTES random bytes, URL-safe text), handed to the
        #: client that started the run; None on a follower (only its hash travels).
        self.key: str | None = None
        #: ``run_key_hash(key)``; a follower's comes from the shared log ("": the
        #: node that started the run recorded none).
        self.key_hash = ""

    @classmethod
    def _following(cls, run_id: str) -> Run:
        run = cls(RunAgentInput(thread_id="", run_id=run_id, messages=[]))
        run.follower = True
        run.state = "following"
        return run

    @property
    def finished(self) -> bool:
        return self.state != "running"

    def _wake(self) -> None:
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    async def wait_finished(self) -> None:
        """Return once the producer has ended (the log holds the terminal event)."""
        if self._task is not None:
            await asyncio.shield(self._task)


class Subscription:
    """A cursor into one run's log. Use as an async context manager (or call
    :meth:`close`) so that the registry knows when the last subscriber leaves."""

    __slots__ = ("_closed", "_registry", "cursor", "done", "resumable", "run")

    def __init__(self, registry: RunRegistry, run: Run, cursor: int, resumable: bool = True) -> None:
        self._registry = registry
        self.run = run
        #: Whether the client comes back after a drop (decides the grace period
        #: when it is the last subscriber to leave; see RunRegistry.subscribe).
        self.resumable = resumable
        #: seq of the last event handed out.
        self.cursor = cursor
        #: True once the slice holding the run's last event was returned.
        self.done = False
        self._closed = False

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
        registry = self._registry
        if run.follower:
            return await self._next_following(timeout)
        while True:
            if run.head > self.cursor or run.state != "running":
                read_nowait = registry._read_nowait
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
            run._waiters.append(fut)
            if timeout is not None:
                registry._keepalive.arm(fut, timeout)
            try:
                woke = await fut
            finally:
                if timeout is not None:
                    registry._keepalive.disarm(fut)
                if not fut.done() or not fut.result():
                    try:
                        run._waiters.remove(fut)
                    except ValueError:
                        pass
            if not woke:
                return None
            # Let the producer run more loop passes while it keeps producing
            # (a burst in progress): its next events join this write.
            for _ in range(COALESCE_MAX_PASSES):
                before = run.head
                await asyncio.sleep(0)
                if run.head == before or run.state != "running":
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
        log = self._registry.log
        run_id = self.run.run_id
        while True:
            try:
                sl = await log.read(run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES)
            except BadCursorError:
                # A cursor past what the log holds yet: like a local subscriber,
                # wait for the run to get there; refused once it ended short of it.
                head = await log.head(run_id)
                if (await log.read(run_id, head, max_events=1)).finished:
                    raise
                if (timeout is not None and timeout <= 0) or not await log.wait(run_id, head, timeout):
                    return None
                continue
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
        if not self._closed:
            self._closed = True
            self._registry._unsubscribe(self.run, self.resumable)

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


class _KeepAliveClock:
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
    ) -> None:
        # a remote AG-UI agent is served inside the agent loop (remote_agents.serving_agent)
        self.agent: Agent = serving_agent(as_agent(agent, where="RunRegistry(agent)"))
        self.options = options if options is not None else RegistryOptions()
        self.log: EventLog = log if log is not None else InMemoryEventLog()
        self.clock: Clock = clock if clock is not None else LoopClock()
        self._runs: dict[str, Run] = {}
        self._active = 0
        self._retained: OrderedDict[str, TimerHandle | None] = OrderedDict()
        # Finished runs kept out of the max_retained eviction while subscribers read them.
        self._reading: dict[str, TimerHandle | None] = {}
        # Finished runs whose retention expired while a subscriber was still reading
        # them: discarded when their last reader leaves, not under its feet.
        self._expired: set[str] = set()
        self._closing = False
        self._draining = False
        self._keepalive = _KeepAliveClock()
        #: The log when several gateway nodes share it (runs owned here are
        #: coordinated with the others through it; see spec/transports.md 4.1).
        self._shared: SharedEventLog | None = self.log if isinstance(self.log, SharedEventLog) else None
        if self._shared is not None:
            self._shared.attach(self)
        self.metrics = metrics
        if metrics is not None:
            metrics.bind(lambda: float(self._active), lambda: float(self._draining or self._closing))
        # Plain-function fast paths of a log that never suspends (InMemoryEventLog).
        self._appender = getattr(self.log, "appender", None)
        self._read_nowait = getattr(self.log, "read_nowait", None)
        self._discard_nowait = getattr(self.log, "discard_nowait", None)

    # -- queries -------------------------------------------------------------------------

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
        return self._draining or self._closing

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
        if run is not None and not run.follower:
            self._request_cancel(run, code, message)

    def log_advanced(self, run_id: str, seq: int) -> None:
        run = self._runs.get(run_id)
        if run is not None and seq > run.head:
            run.head = seq
        if run is not None and run._waiters:
            run._wake()

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
        follower = Run._following(run_id)
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
        if caller is None:
            return run
        if caller.key is not None and run.key_hash and hmac.compare_digest(run_key_hash(caller.key), run.key_hash):
            return run
        if run.owner and caller.principal == run.owner:
            return run
        if not run.key_hash and not run.owner:
            return run
        raise UnknownRunError(run.run_id)

    async def start(self, input: RunAgentInput, *, owner: str | None = None) -> Run:
        """Start a run owned by ``owner`` (a principal; see :meth:`check_owner`),
        with a new run key (``run.key``, for the transport to hand to the client).
        Raises ServerBusyError (limit reached or shutting down), RunExistsError
        (``runId`` already known)."""
        if self._closing or self._draining:
            raise ServerBusyError("the server is shutting down", retry_after=RETRY_AFTER_SHUTDOWN_SECONDS)
        check_run_id(input.run_id)
        if input.run_id in self._runs:
            raise RunExistsError(
                f"run {input.run_id!r} already exists here; start a run with a new runId, "
                "or resume this one with Last-Event-ID"
            )
        if self._active >= self.max_runs:
            raise ServerBusyError(f"the server is running its maximum of {self.max_runs} concurrent runs")
        run = Run(input)
        run.owner = owner
        run.key = secrets.token_urlsafe(RUN_KEY_BYTES)
        run.key_hash = run_key_hash(run.key)
        try:
            if self._shared is not None:
                await self._shared.open_run(run.run_id, run.thread_id, principal=owner or "", key_hash=run.key_hash)
            else:
                await self.log.create(run.run_id)
        except UsageError:
            # Another gateway node sharing the log has (or had) this run.
            raise RunExistsError(f"run {input.run_id!r} already exists in the shared event log") from None
        self._runs[run.run_id] = run
        self._active += 1
        run._task = asyncio.get_running_loop().create_task(self._produce(run), name=f"agui-run-{run.run_id}")
        return run

    def subscribe(self, run: Run, after: int = 0, *, resumable: bool = True) -> Subscription:
        """A subscription that starts after event ``after`` (0: from the beginning).
        The cursor is checked on the first ``next()`` (CursorExpiredError, BadCursorError).

        ``resumable``: the client reconnects after a drop (it said so, or it is
        resuming now). When the last subscriber leaves a running run, the run
        waits ``grace_seconds`` for it if that subscriber was resumable, else
        ``disconnect_grace_seconds`` (0: it is cancelled at once, code
        ``disconnected``): a client that will not come back has stopped the run."""
        run.subscribers += 1
        if run.follower and self._shared is not None:
            self._shared.follow(run.run_id)
        if run._grace_handle is not None:
            run._grace_handle.cancel()
            run._grace_handle = None
        return Subscription(self, run, after, resumable)

    def _unsubscribe(self, run: Run, resumable: bool) -> None:
        run.subscribers -= 1
        if run.follower and self._shared is not None:
            self._shared.unfollow(run.run_id)
        if run.subscribers == 0 and run.run_id in self._reading:
            self._retain_read(run)
        if run.subscribers == 0 and run.state == "running" and not self._closing and not run.follower:
            if resumable:
                grace, code = self.grace_seconds, "abandoned"
                message = f"no client was connected for {self.grace_seconds:g} s"
            else:
                grace, code = self.disconnect_grace_seconds, "disconnected"
                message = "the client closed the connection and did not declare it would resume"
            if grace <= 0:
                self._grace_expired(run, code, message)
            else:
                run._grace_handle = self.clock.call_later(grace, lambda: self._grace_expired(run, code, message))

    def _grace_expired(self, run: Run, code: str, message: str) -> None:
        run._grace_handle = None
        if run.subscribers == 0 and run.state == "running" and self._shared is not None:
            # Subscribers on other nodes count too: ask the shared log first.
            asyncio.get_running_loop().create_task(self._grace_check(run, code, message))
        elif run.subscribers == 0 and run.state == "running":
            logger.info("run %s: %s; cancelling", run.run_id, message)
            self._request_cancel(run, code, message)

    async def _grace_check(self, run: Run, code: str, message: str) -> None:
        assert self._shared is not None
        try:
            age = await self._shared.remote_reader_age(run.run_id)
        except EventLogUnavailableError:
            age = None  # the run is being ended for the lost log anyway
        if run.subscribers or run.state != "running" or run._grace_handle is not None:
            return  # a subscriber came back meanwhile
        if age is not None and age < self.grace_seconds:
            # A client reads this run on another node (or did, age seconds ago).
            # That reader resumes across nodes: its grace period is the one that counts.
            abandoned = f"no client was connected for {self.grace_seconds:g} s"
            run._grace_handle = self.clock.call_later(
                self.grace_seconds - age, lambda: self._grace_expired(run, "abandoned", abandoned)
            )
            return
        logger.info("run %s: %s (no subscriber on any node); cancelling", run.run_id, message)
        self._request_cancel(run, code, message)

    def _request_cancel(self, run: Run, code: str, message: str) -> None:
        if run.state == "running" and run._cancel_reason is None and run._task is not None:
            run._cancel_reason = (code, message)
            # A task cancelled before its first step never enters _produce (the
            # CancelledError hits the coroutine before any of its code runs), so
            # the run would get no terminal event: an unstarted producer instead
            # sees _cancel_reason when it starts.
            if run._producing:
                run._task.cancel()

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
            logger.warning("run %s: its owner did not end it within %.1f s of cancellation", run_id, CANCEL_WAIT_SECONDS)
        return Run._following(run_id)

    def cancel_nowait(
        self, run_id: str, *, code: str = "cancelled", message: str = "the run was cancelled", caller: Caller | None = None
    ) -> Run:
        """Start cancelling a running run and return at once (``run.wait_finished()``
        waits for the end). For message loops that must not block on one run.
        Raises UnknownRunError (also for a run ``caller`` may not touch), RunFinishedError."""
        run = self.check_owner(self.get(run_id), caller)
        if run.state != "running":
            raise RunFinishedError(f"run {run_id!r} has already finished")
        self._request_cancel(run, code, message)
        return run

    async def _wait(self, run: Run, timeout: float) -> None:
        if run._task is None:
            return
        done, _ = await asyncio.wait({run._task}, timeout=timeout)
        if not done:
            logger.warning("run %s: the agent did not stop within %.1f s of cancellation", run.run_id, timeout)

    async def drain(self, timeout: float) -> None:
        """Refuse new runs (503, and :meth:`ready` turns False) and wait up to
        ``timeout`` seconds for the running ones to end by themselves; then
        return (call :meth:`shutdown` to end the rest)."""
        self._draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._active and (left := deadline - loop.time()) > 0:
            tasks = {r._task for r in self._runs.values() if r.state == "running" and r._task is not None}
            if not tasks:
                break
            await asyncio.wait(tasks, timeout=left)

    async def shutdown(self, *, timeout: float = CANCEL_WAIT_SECONDS) -> None:
        """Refuse new runs, cancel every running run with ``RUN_ERROR{code:
        "shutdown"}`` and wait (up to ``timeout``) for their producers to end, so
        that open streams can send the terminal event before the server closes."""
        self._closing = True
        running = [r for r in self._runs.values() if r.state == "running"]
        for run in running:
            self._request_cancel(run, "shutdown", "the server is shutting down")
        tasks = {r._task for r in running if r._task is not None}
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for handle in [*self._retained.values(), *self._reading.values()]:
            if handle is not None:
                handle.cancel()
        self._keepalive.close()

    # -- the producer: the gateway path ---------------------------------------------------

    async def _append(self, run: Run, event: Any) -> None:
        # Synthetic events (RUN_STARTED prelude, RUN_ERROR) and agent events share this.
        seq = await self.log.append(run.run_id, encode_event(event))
        if seq > run.head:
            run.head = seq
        if run._waiters:
            run._wake()

    @staticmethod
    def _note_lifecycle(run: Run, ev: Any, cls: type) -> None:
        if cls is RunStartedEvent:
            run._started_sent = True
        else:
            run._terminal_sent = True
            if cls is RunErrorEvent:
                run.terminal_code = ev.code or "run_error"

    async def _produce(self, run: Run) -> None:
        run._producing = True
        if run._cancel_reason is not None:  # cancelled before the producer ran (see _request_cancel)
            code, message = run._cancel_reason
            await self._finish(run, RunErrorEvent(message=message, code=code))
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
                    seq = append_one(payload) if append_one is not None else await append(rid, payload)
                if seq > run.head:  # a write-behind log returns what is stored so far
                    run.head = seq
                    if run._waiters:
                        run._wake()
                count += 1
                if count % PRODUCER_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            if verifier is not None:
                verifier.close()
            elif not run._terminal_sent:
                raise RemoteInputError("the agent's stream ended without RUN_FINISHED or RUN_ERROR", code="truncated")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            code, message = run._cancel_reason or ("cancelled", "the run was cancelled")
            error = RunErrorEvent(message=message, code=code)
        except AguiEngineError as exc:
            logger.warning("run %s ended with %s: %s", run.run_id, type(exc).__name__, exc.message)
            error = RunErrorEvent.from_error(exc)
        except Exception as exc:  # noqa: BLE001 - an agent bug must not take the gateway down
            # The operator needs the message and the traceback to fix the agent
            # (logger.exception-style, at ERROR); the client gets neither: they
            # may carry secrets (URLs with keys, SQL, file paths).
            logger.error("run %s: the agent raised %s: %s", run.run_id, type(exc).__name__, exc, exc_info=exc)
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
                    logger.error("run %s: closing the agent's generator raised %s", run.run_id, type(exc).__name__)
        await self._finish(run, error)

    def _open_agent(self, input: RunAgentInput) -> Any:
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
        try:
            if error is not None and not run._terminal_sent:
                if not run._started_sent:
                    await self._append(run, RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
                await self._append(run, error)
                run._terminal_sent = True
                run.terminal_code = error.code
            await self.log.finish(run.run_id)
        finally:
            run.state = "finished"
            self._active -= 1
            if self.metrics is not None:
                self.metrics.note_run_ended(run.terminal_code)
            if run._grace_handle is not None:
                run._grace_handle.cancel()
                run._grace_handle = None
            run._wake()
            self._retain(run)

    def _retain(self, run: Run) -> None:
        rid = run.run_id
        handle = None if self._closing else self.clock.call_later(self.retention_seconds, lambda: self._discard_later(rid))
        self._queue_retained(run, handle)

    def _retain_read(self, run: Run) -> None:
        # The last reader of a finished run left: it now waits its turn for eviction,
        # or goes at once if its retention ran out while it was being read.
        handle = self._reading.pop(run.run_id)
        if run.run_id in self._expired:
            self._expired.discard(run.run_id)
            self._drop(run.run_id)
            return
        self._queue_retained(run, handle)

    def _queue_retained(self, run: Run, handle: TimerHandle | None) -> None:
        if run.subscribers > 0:
            # Still being read (a slow client, or a pump not yet scheduled since the
            # run ended): its log must outlive the read, so it joins the eviction
            # queue only when its last subscriber leaves (or its retention expires).
            self._reading[run.run_id] = handle
            return
        self._retained[run.run_id] = handle
        while len(self._retained) > self.max_retained:
            old_id, old_handle = self._retained.popitem(last=False)
            old = self._runs.get(old_id)
            if old is not None and old.subscribers > 0:  # resumed since it was queued
                self._reading[old_id] = old_handle
                continue
            if old_handle is not None:
                old_handle.cancel()
            self._drop(old_id)

    def _discard_later(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.subscribers > 0:
            # A slow reader is still on its way to the end: discarding the log now
            # would cut its stream short of the terminal event. The run stays until
            # its last reader leaves (_retain_read); a reader that stops reading
            # is cut by the transports' write timeout, so this is bounded too.
            self._retained.pop(run_id, None)
            self._reading[run_id] = None
            self._expired.add(run_id)
            return
        self._retained.pop(run_id, None)
        self._reading.pop(run_id, None)
        self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        if self._discard_nowait is not None:
            self._discard_nowait(run_id)
        else:
            asyncio.get_running_loop().create_task(self.log.discard(run_id))


def resume_cursor(last_event_id: str, run_id: str | None = None) -> tuple[str, int]:
    """Parse a ``<runId>:<seq>`` resume cursor (SSE ``Last-Event-ID``, the WebSocket
    ``lastEventId``). Raises BadCursorError naming what is wrong."""
    from .eventlog import BadCursorError

    rid, sep, seq_text = last_event_id.rpartition(":")
    # isascii(): str.isdigit() is also true for "²" or "١", which int() refuses.
    if not sep or not rid or not (seq_text.isascii() and seq_text.isdigit()) or len(seq_text) > MAX_SEQ_DIGITS:
        raise BadCursorError(f"resume cursor {last_event_id!r} is not of the form <runId>:<seq>")
    if run_id is not None and rid != run_id:
        raise BadCursorError(f"resume cursor {last_event_id!r} belongs to run {rid!r}, not {run_id!r}")
    return rid, int(seq_text)


def event_id(run_id: str, seq: int) -> str:
    """The id of event ``seq`` of a run, as carried by SSE ``id:`` and the WS envelope."""
    return f"{run_id}:{seq}"
