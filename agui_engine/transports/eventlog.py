"""The per-run event log that makes a stream resumable.

Theory of operation
-------------------
Every event a run emits is encoded once (compact JSON bytes) and appended to the
run's log, which numbers it: the first event of a run has ``seq`` 1, the next 2,
and so on. Transports frame the stored bytes for their wire (SSE ``id:
<runId>:<seq>``, the WebSocket envelope, an NDJSON line) and keep, per
subscriber, a *cursor*: the ``seq`` of the last event that subscriber was sent.
``read(run_id, after=cursor)`` returns what follows the cursor, so a subscriber
that reconnects with ``Last-Event-ID: <runId>:<seq>`` gets the rest of the run
with no event lost and none repeated, then the live tail.

The log is bounded per run, by event count and by bytes (the two named
constants below). When an append crosses either bound the oldest events are
dropped; a cursor that points before the oldest retained event can no longer be
served and ``read`` raises :class:`CursorExpiredError` -- a clear answer (HTTP
410, WebSocket close code 4410) rather than a silent gap. The log is also the
buffer between the producer and a slow subscriber (see ``spec/transports.md``,
"Backpressure"): a subscriber's backlog is exactly the span of the log after its
cursor, so a slow reader never makes the server buffer without bound.

The interface (:class:`EventLog`) is async and keyed by run id only, so that a
shared store (Redis streams, a database) can implement it and serve several
gateway nodes: the node that runs a run appends, and any node can serve a
resume by reading and ``wait``-ing on the log (the registry's *follower* runs;
``spec/transports.md`` lists what a shared store must guarantee).
:class:`InMemoryEventLog` is the default; it never suspends except in ``wait``,
and one instance shared by several registries in a process behaves as a shared
store (the tests run two gateways on one log that way). A
log that never suspends may also offer ``appender(run_id)`` (a plain function
appending to one run), ``read_nowait`` and ``discard_nowait`` (same contracts as
``append`` / ``read`` / ``discard``); the registry then uses them on its hot path.

States of one run's log::

    (absent) --create--> open --append*--> open --finish--> finished --discard--> (absent)
                           \\------------------------discard---------------------/

``append`` on a finished log and ``create`` of an existing run raise
:class:`~agui_engine.protocol.errors.UsageError` (a gateway bug, not a peer's fault).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agui_engine.protocol.errors import CapacityError, RemoteInputError, UsageError

from .history import HistoryBudget, MemoryThreadStore, ThreadRuns

__all__ = [
    "BUDGET_TRIM_FLOOR_BYTES",
    "BadCursorError",
    "COMPACT_AFTER_DROPPED",
    "CursorExpiredError",
    "DEFAULT_LOG_MAX_BYTES",
    "DEFAULT_LOG_MAX_EVENTS",
    "EventLog",
    "EventLogUnavailableError",
    "InMemoryEventLog",
    "LogSlice",
    "MAX_HELD_PER_STALLED_RUN_FACTOR",
    "READ_MAX_BYTES",
    "READ_MAX_EVENTS",
    "RunControl",
    "SharedEventLog",
    "UnknownRunError",
    "WS_CLOSE_CURSOR_EXPIRED",
    "WS_CLOSE_UNKNOWN_RUN",
]

#: Events kept per run. A long LLM run with tool calls emits a few thousand
#: events (one per token delta); 20,000 keeps a whole run of that size so that a
#: reconnect at any point can resume, while bounding a pathological agent.
DEFAULT_LOG_MAX_EVENTS = 20_000

#: Bytes of encoded events kept per run. 4 MiB holds a very long answer with
#: large state snapshots; with the default of 1,000 concurrent runs the log's
#: worst case is 4 GiB, which an operator lowers with ``max_bytes`` (or by
#: lowering the concurrent-run limit) on smaller machines.
DEFAULT_LOG_MAX_BYTES = 4 * 1024 * 1024
#: What one run's log, and a client that never reads it, cost the server at most,
#: as a multiple of DEFAULT_LOG_MAX_BYTES (which counts the events' encoded bytes):
#: msgspec's encoder returns bytes with ~50 % allocation slack (a 1,058-byte event
#: takes 1,618 bytes), and the connection adds one coalesced read (READ_MAX_BYTES)
#: and its transport buffers. Measured 6.6-7.2 MiB for a 4 MiB log, SSE and
#: WebSocket (tests/transports/test_slow_readers.py); 2x is the bound we promise.
MAX_HELD_PER_STALLED_RUN_FACTOR = 2

#: What a run's log keeps at least when the log's budget of buffered bytes
#: (``InMemoryEventLog(max_total_bytes=)``, ``RegistryOptions.max_buffered_bytes``)
#: is spent: a run appending while the logs hold more than the budget drops its
#: oldest events down to this many bytes (readers further behind get
#: ``cursor_expired``). One coalesced read (READ_MAX_BYTES): a reader that keeps
#: up is never lapped by the budget, while the logs stay within the budget plus
#: this per run (1,000 runs: 256 MiB).
BUDGET_TRIM_FLOOR_BYTES = 256 * 1024

#: At most this many events per ``read``: the unit of write coalescing. 512
#: frames of a typical 100-byte delta is ~50 KiB, one socket write that the
#: kernel takes in one go, and short enough that one slow batch does not delay
#: the event loop noticeably.
READ_MAX_EVENTS = 512

#: At most this many bytes per ``read`` (the first event is always returned,
#: even when it alone is larger), for the same reason.
READ_MAX_BYTES = 256 * 1024

#: Dropped events at the front of the log's list before it is compacted (and then
#: only when they are more than half of it). Deleting the front moves the whole
#: list, so doing it once half is dead makes it amortised O(1) per event; below
#: 64 the dead slots (empty bytes) cost less than the move.
COMPACT_AFTER_DROPPED = 64

#: WebSocket close / error codes for the two resume failures (application range).
WS_CLOSE_CURSOR_EXPIRED = 4410
WS_CLOSE_UNKNOWN_RUN = 4404


class CursorExpiredError(RemoteInputError):
    """The resume cursor points before the oldest event the log still holds.

    ``first_available`` is the ``seq`` of the oldest retained event; the events
    ``cursor + 1 .. first_available - 1`` are gone for good.
    """

    http_status = 410
    ws_close_code = WS_CLOSE_CURSOR_EXPIRED
    default_code = "cursor_expired"

    def __init__(self, run_id: str, cursor: int, first_available: int) -> None:
        super().__init__(
            f"run {run_id!r}: cannot resume after event {cursor}; the event log now starts at "
            f"event {first_available} (events {cursor + 1}..{first_available - 1} were dropped "
            "because the log is bounded)"
        )
        self.run_id = run_id
        self.cursor = cursor
        self.first_available = first_available


class UnknownRunError(RemoteInputError):
    """No log exists for this run id (never started here, or already discarded)."""

    http_status = 404
    ws_close_code = WS_CLOSE_UNKNOWN_RUN
    default_code = "unknown_run"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"unknown run {run_id!r}: it never ran here or its event log was discarded")
        self.run_id = run_id


class EventLogUnavailableError(CapacityError):
    """The shared event log (Redis) cannot be reached: new runs are refused with
    503 + ``Retry-After`` and running runs end with ``RUN_ERROR{code:
    "event_log_unavailable"}``; the node recovers by itself when the store returns."""

    default_code = "event_log_unavailable"

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BadCursorError(RemoteInputError):
    """A resume cursor that cannot be valid: malformed, or ahead of the log's head."""

    default_code = "bad_cursor"


@dataclass(slots=True)
class LogSlice:
    """What :meth:`EventLog.read` returns.

    ``payloads[i]`` is the encoded event with ``seq == first_seq + i``.
    ``finished`` is true when the run has ended and these are its last events
    (nothing will follow ``first_seq + len(payloads) - 1``).
    """

    first_seq: int
    payloads: list[bytes]
    finished: bool

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.payloads) - 1


@runtime_checkable
class EventLog(Protocol):
    """Storage of encoded events per run; see the module docstring."""

    async def create(self, run_id: str) -> None:
        """Open an empty log. Raises UsageError if one exists for ``run_id``."""
        ...

    async def append(self, run_id: str, payload: bytes) -> int:
        """Store one encoded event; return its ``seq``. May drop the oldest events.
        Raises UnknownRunError, or UsageError after ``finish``."""
        ...

    async def read(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        """Events with ``seq > after``, oldest first, at most ``max_events`` /
        ``max_bytes`` (at least one event when any is available). Raises
        UnknownRunError, CursorExpiredError, BadCursorError (``after`` < 0 or past the head)."""
        ...

    async def head(self, run_id: str) -> int:
        """The ``seq`` of the newest event (0 when empty). Raises UnknownRunError."""
        ...

    async def wait(self, run_id: str, after: int, timeout: float | None) -> bool:
        """Return True as soon as the log holds an event with ``seq > after`` or the
        run is finished; False when ``timeout`` seconds passed first (None: no
        limit). This is how a gateway node that does not run the run follows it
        (resume on another node); a shared store implements it with its own
        notification (Redis ``XREAD BLOCK``, PostgreSQL ``LISTEN``) or by polling.
        Raises UnknownRunError."""
        ...

    async def finish(self, run_id: str) -> None:
        """Mark the run ended: no more appends. Idempotent. Raises UnknownRunError."""
        ...

    async def discard(self, run_id: str) -> None:
        """Forget the run's log. Idempotent."""
        ...


class RunControl(Protocol):
    """What a :class:`SharedEventLog` may ask of the registry it serves (the
    :class:`~transports.runs.RunRegistry` implements it)."""

    @property
    def retention_seconds(self) -> float:
        """How long a finished run stays resumable (the store's TTL after finish)."""
        ...

    def log_cancel(self, run_id: str, code: str, message: str) -> None:
        """End a run owned here with ``RUN_ERROR{code}`` (a DELETE on another
        node, the store lost, this node's ownership lapsed). No-op for an unknown
        or finished run."""
        ...

    def log_advanced(self, run_id: str, seq: int) -> None:
        """Events up to ``seq`` of a run owned here became readable (stored):
        wake its subscribers."""
        ...

    def log_append_latency(self, seconds: float, events: int) -> None:
        """One batch of ``events`` appends took ``seconds`` to be stored (metrics)."""
        ...


@runtime_checkable
class SharedEventLog(EventLog, Protocol):
    """An :class:`EventLog` that several gateway nodes share, with what the
    registry needs to coordinate runs across them (``spec/transports.md`` §4.1).

    A node *owns* the runs it started (``open_run``): it alone appends to them,
    its grace timer, DELETE and shutdown decide their end. Other nodes *follow*
    them for resumes. A shared log writes behind: its ``appender`` returns the
    highest seq already stored (readable by every node), and calls
    ``RunControl.log_advanced`` as batches are stored.
    """

    def attach(self, control: RunControl) -> None:
        """Bind the registry that owns this node's runs. Raises UsageError when
        another registry is bound already."""
        ...

    async def open_run(self, run_id: str, thread_id: str, *, principal: str = "", key_hash: str = "") -> None:
        """``create`` for a run this node owns, recording who may touch it from any
        node: the ``principal`` that started it and its run key's hash (see
        ``RunRegistry.check_owner``). Raises UsageError (exists) and
        EventLogUnavailableError."""
        ...

    async def run_access(self, run_id: str) -> tuple[str, str]:
        """``(principal, key_hash)`` recorded by ``open_run`` (``""`` for what was not
        recorded). Raises UnknownRunError, EventLogUnavailableError."""
        ...

    async def request_cancel(self, run_id: str) -> bool:
        """Ask the node that owns a run to cancel it; False when it has already
        finished. Raises UnknownRunError, EventLogUnavailableError."""
        ...

    async def live_run(self, thread_id: str) -> str | None:
        """The latest run any node started on ``thread_id`` while the log still holds it
        (running, or finished within the retention), None when there is none: what a
        client reloading a thread reattaches to on whichever node it lands. Raises
        EventLogUnavailableError."""
        ...

    def follow(self, run_id: str) -> None:
        """A subscriber on this node started reading a run another node owns
        (keeps the owner's grace timer from expiring)."""
        ...

    def unfollow(self, run_id: str) -> None:
        """That subscriber left."""
        ...

    async def remote_reader_age(self, run_id: str) -> float | None:
        """Seconds since a subscriber on another node last read this run (0 while
        one reads); None when none ever did."""
        ...

    async def ping(self) -> None:
        """Check the store is reachable. Raises EventLogUnavailableError."""
        ...

    async def aclose(self) -> None:
        """Stop this node's background work and its connections."""
        ...


class _Budget:
    """The bytes all the runs of one InMemoryEventLog hold, and their limit (0: none)."""

    __slots__ = ("limit", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0


class _RunLog:
    __slots__ = (
        "budget",
        "finished",
        "first_seq",
        "head",
        "max_bytes",
        "max_events",
        "nbytes",
        "payloads",
        "run_id",
        "start",
        "waiters",
    )

    def __init__(self, run_id: str, max_events: int, max_bytes: int, budget: _Budget | None = None) -> None:
        self.run_id = run_id
        self.budget = budget if budget is not None else _Budget(0)
        # payloads[start:] are live; the dead prefix is compacted lazily so that
        # dropping the oldest event is O(1) amortised.
        self.payloads: list[bytes] = []
        self.start = 0
        self.first_seq = 1  # seq of payloads[start]
        self.head = 0  # seq of the newest event
        self.nbytes = 0
        self.finished = False
        self.max_events = max_events
        self.max_bytes = max_bytes
        # Futures of ``wait`` callers (followers on other "nodes" sharing this log).
        self.waiters: list[asyncio.Future[None]] = []

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def append(self, payload: bytes) -> int:
        if self.finished:
            raise UsageError(f"append to the finished event log of run {self.run_id!r}")
        self.payloads.append(payload)
        nbytes = self.nbytes = self.nbytes + len(payload)
        budget = self.budget
        budget.total += len(payload)
        seq = self.head = self.head + 1
        if (
            seq - self.first_seq >= self.max_events
            or nbytes > self.max_bytes
            or (budget.limit and budget.total > budget.limit and nbytes > BUDGET_TRIM_FLOOR_BYTES)
        ):
            self.trim()
        if self.waiters:
            self.wake()
        return seq

    def trim(self) -> None:
        payloads = self.payloads
        start = self.start
        first = self.first_seq
        nbytes = before = self.nbytes
        head = self.head
        budget = self.budget
        # Over the logs' budget, this run (the one growing) keeps BUDGET_TRIM_FLOOR_BYTES.
        keep = BUDGET_TRIM_FLOOR_BYTES if budget.limit and budget.total > budget.limit else self.max_bytes
        keep = min(keep, self.max_bytes)
        # Always keep the newest event, even if it alone is over max_bytes:
        # a subscriber must be able to receive every event at least live.
        while first < head and (head - first >= self.max_events or nbytes > keep):
            nbytes -= len(payloads[start])
            payloads[start] = b""
            start += 1
            first += 1
        self.nbytes = nbytes
        budget.total -= before - nbytes
        self.first_seq = first
        if start > COMPACT_AFTER_DROPPED and start * 2 > len(payloads):
            del payloads[:start]
            start = 0
        self.start = start


class InMemoryEventLog:
    """The default :class:`EventLog`: per-run lists in this process's memory.

    Never suspends, so a transport pays no more than a function call per event.
    ``max_events`` / ``max_bytes``: one run's bound; ``max_total_bytes``: the budget
    of all runs together (None: none) -- past it a growing run keeps only its newest
    BUDGET_TRIM_FLOOR_BYTES, so the logs hold at most the budget plus that per run.
    ``history``: the bounds of the thread histories it keeps (a
    :class:`~transports.history.ThreadStore`; default :class:`~transports.history.HistoryBudget`).
    """

    def __init__(
        self,
        *,
        max_events: int = DEFAULT_LOG_MAX_EVENTS,
        max_bytes: int = DEFAULT_LOG_MAX_BYTES,
        max_total_bytes: int | None = None,
        history: HistoryBudget | None = None,
    ) -> None:
        if max_events < 1 or max_bytes < 1:
            raise UsageError("InMemoryEventLog: max_events and max_bytes must be >= 1")
        if max_total_bytes is not None and max_total_bytes < 0:
            raise UsageError(f"InMemoryEventLog: max_total_bytes must be >= 0 or None, got {max_total_bytes}")
        #: What all the runs' logs hold together, and its budget (0 / None: no budget);
        #: see BUDGET_TRIM_FLOOR_BYTES.
        self._budget = _Budget(max_total_bytes or 0)
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._runs: dict[str, _RunLog] = {}
        #: The thread histories (spec/transports.md §4.4).
        self.threads = MemoryThreadStore(history)

    @property
    def history_budget(self) -> HistoryBudget:
        return self.threads.history_budget

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        await self.threads.keep_run(thread_id, record, now)

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        return await self.threads.thread_runs(thread_id, now)

    def _get(self, run_id: str) -> _RunLog:
        log = self._runs.get(run_id)
        if log is None:
            raise UnknownRunError(run_id)
        return log

    async def create(self, run_id: str) -> None:
        if run_id in self._runs:
            raise UsageError(f"event log for run {run_id!r} already exists")
        self._runs[run_id] = _RunLog(run_id, self.max_events, self.max_bytes, self._budget)

    async def append(self, run_id: str, payload: bytes) -> int:
        return self.append_nowait(run_id, payload)

    def append_nowait(self, run_id: str, payload: bytes) -> int:
        """:meth:`append` without the coroutine: the registry's hot path uses it
        when a log provides it (one fewer coroutine per event)."""
        return self._get(run_id).append(payload)

    def appender(self, run_id: str) -> Callable[[bytes], int]:
        """``append_nowait`` bound to one run: the registry's producer calls it once
        per event, so the run is looked up once per run instead."""
        return self._get(run_id).append

    async def read(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        return self.read_nowait(run_id, after, max_events=max_events, max_bytes=max_bytes)

    def read_nowait(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        """:meth:`read` without the coroutine (see :meth:`append_nowait`)."""
        log = self._get(run_id)
        first = log.first_seq
        head = log.head
        if after < 0 or after > head:
            raise BadCursorError(f"run {run_id!r}: resume cursor {after} is outside 0..{head}")
        if after < first - 1:
            raise CursorExpiredError(run_id, after, first)
        begin = log.start + (after - first + 1)
        end = min(len(log.payloads), begin + max_events)
        out = log.payloads[begin:end]
        if sum(map(len, out)) > max_bytes:  # rare: counted in C first, cut in Python only when needed
            total = 0
            for i, p in enumerate(out):
                total += len(p)
                if total > max_bytes and i > 0:
                    del out[i:]
                    break
        finished = log.finished and begin + len(out) == len(log.payloads)
        return LogSlice(after + 1, out, finished)

    async def head(self, run_id: str) -> int:
        return self._get(run_id).head

    async def finish(self, run_id: str) -> None:
        log = self._get(run_id)
        log.finished = True
        log.wake()

    async def wait(self, run_id: str, after: int, timeout: float | None) -> bool:
        log = self._get(run_id)
        if log.head > after or log.finished:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        log.waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        finally:
            if fut in log.waiters:
                log.waiters.remove(fut)
        return True

    async def discard(self, run_id: str) -> None:
        self.discard_nowait(run_id)

    def discard_nowait(self, run_id: str) -> None:
        """:meth:`discard` without the coroutine: the registry drops a run's log
        without starting a task for it (one per finished run)."""
        log = self._runs.pop(run_id, None)
        if log is not None:
            self._budget.total -= log.nbytes

    def held_bytes(self) -> int:
        """The encoded event bytes all the runs' logs hold now (what the budget counts)."""
        return self._budget.total

    def __len__(self) -> int:
        """Number of runs with a log (for tests and metrics)."""
        return len(self._runs)
