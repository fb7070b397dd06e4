"""A subscriber's cursor into one run's log (:class:`Subscription`), and the one timer that
wakes every waiting subscriber for its keep-alive (:class:`KeepAliveClock`).

A subscriber never has a queue of its own: ``next()`` returns every event after its cursor
that is ready (up to the read batch limits), so a transport writes them all with one socket
write (write coalescing), and a slow subscriber's backlog is the log itself, which is
bounded. If the producer laps a subscriber (its cursor falls out of the log), ``next()``
raises :class:`~transports.eventlog.CursorExpiredError`. A *follower* run (another gateway
node runs it, spec/transports.md §4.1) is read from the shared log and waited on with
``EventLog.wait``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from typing import Protocol, Self

from agui_engine.protocol.errors import UsageError

from .clock import Clock, LoopClock
from .eventlog import READ_MAX_BYTES, READ_MAX_EVENTS, BadCursorError, EventLog, LogSlice
from .run_record import Run

__all__ = [
    "COALESCE_MAX_PASSES",
    "DEFAULT_KEEPALIVE_SECONDS",
    "KEEPALIVE_MIN_TICK",
    "KEEPALIVE_RESOLUTION",
    "KeepAliveClock",
    "RunSource",
    "Subscription",
    "WRITE_COALESCE_SECONDS",
    "WriteWindow",
]

#: Idle interval before a keep-alive is sent. The WHATWG SSE authoring notes
#: recommend a comment "every 15 seconds or so" against idle-killing proxies.
DEFAULT_KEEPALIVE_SECONDS = 15.0

#: After a waiting subscriber is woken past its write window it lets the event loop run up
#: to this many more passes before it reads, as long as each pass brought new events (a
#: burst in progress), so that they join the same write. A producer that went quiet costs
#: one pass. On a busy server a loop pass outlasts the window, and these passes are what
#: still joins a fast stream's events; a pass is microseconds when idle.
COALESCE_MAX_PASSES = 4

#: Seconds a subscriber waits after handing out events before it hands out the next ones:
#: the events that arrive meanwhile join one write. The first events after a quiet spell
#: (nothing handed out for this long) go at once, so a lone token or a slow model stream
#: gains no latency; a fast stream is written at most once per window, each write carrying
#: everything produced since. 1 ms: far under what a reader can tell (a frame at 60 Hz is
#: 16.7 ms), while a stream of a token every few microseconds writes hundreds per write.
WRITE_COALESCE_SECONDS = 0.001


class WriteWindow:
    """When a subscriber may hand out its next events (see WRITE_COALESCE_SECONDS):
    ``seconds`` after the last hand-out, on ``clock`` (default: the event loop's; a test
    moves a :class:`~transports.clock.ManualClock` by hand). ``seconds`` 0: no window."""

    __slots__ = ("clock", "seconds")

    def __init__(self, seconds: float = WRITE_COALESCE_SECONDS, clock: Clock | None = None) -> None:
        if not seconds >= 0:  # also rejects NaN
            raise UsageError(f"WriteWindow: seconds must be >= 0, got {seconds}")
        self.seconds = seconds
        self.clock: Clock = clock if clock is not None else LoopClock()

    def time(self) -> float:
        return self.clock.time()

    async def wait(self, delay: float) -> None:
        """Return ``delay`` seconds from now (on the window's clock)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.clock.call_later(delay, functools.partial(_resolve, fut))
        try:
            await fut
        finally:
            timer.cancel()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class RunSource(Protocol):
    """What a subscription reads its run from (the :class:`~transports.runs.RunRegistry`)."""

    @property
    def log(self) -> EventLog:
        """The event log the run's events are in."""
        ...

    @property
    def read_nowait(self) -> Callable[..., LogSlice] | None:
        """The log's non-suspending read, or None."""
        ...

    @property
    def keepalive(self) -> KeepAliveClock:
        """Wakes waiting subscribers for their keep-alives."""
        ...

    @property
    def write_window(self) -> WriteWindow:
        """How long after a hand-out the next one waits (write coalescing)."""
        ...

    def leave(self, run: Run, resumable: bool) -> None:
        """A subscriber of ``run`` left."""
        ...


class Subscription:
    """A cursor into one run's log. Use as an async context manager (or call
    :meth:`close`) so that the registry knows when the last subscriber leaves."""

    __slots__ = ("closed", "cursor", "done", "handed_at", "registry", "resumable", "run")

    def __init__(self, registry: RunSource, run: Run, cursor: int, resumable: bool = True) -> None:
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
        #: When events were last handed out (the write window's clock; -inf: never).
        self.handed_at = float("-inf")

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
        window = registry.write_window
        while True:
            if run.head > self.cursor or not lifecycle.live:
                if window.seconds and lifecycle.live:
                    # Events within the window of the last hand-out wait for its end, and
                    # whatever arrives meanwhile joins them (the first after a quiet spell goes now).
                    wait = self.handed_at + window.seconds - window.time()
                    if wait > 0:
                        await window.wait(wait)
                        continue
                read_nowait = registry.read_nowait
                if read_nowait is not None:
                    sl: LogSlice = read_nowait(run.run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES)
                else:
                    sl = await registry.log.read(
                        run.run_id, self.cursor, max_events=READ_MAX_EVENTS, max_bytes=READ_MAX_BYTES
                    )
                if self._took(sl):
                    if window.seconds:
                        self.handed_at = window.time()
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
            if window.seconds and self.handed_at + window.seconds > window.time():
                continue  # within the window: its wait (above) gathers what comes meanwhile
            # Past the window (a quiet spell, or a loop pass longer than the window: a busy
            # server): let the producer run more loop passes while it keeps producing (a burst
            # in progress), so that its next events join this write.
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
