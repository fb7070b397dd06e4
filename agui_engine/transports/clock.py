"""The registry's clock: when the grace period and the retention time run out.

Theory of operation
-------------------
The run registry schedules two kinds of timers: a run's *grace* timer (its last
subscriber left; cancel it if nobody returns in time) and a finished run's
*retention* timer (discard its log). Both go through a :class:`Clock` instead of
the event loop directly, so that a test can move time forward by hand
(:class:`ManualClock`) instead of sleeping through 30 real seconds -- or, worse,
shortening the periods until the test depends on the machine's speed.

:class:`LoopClock` (the default) is the asyncio loop's monotonic clock and its
``call_later``. :class:`ManualClock` starts at 0 and only moves when
:meth:`ManualClock.advance` is called; ``advance`` runs every callback that came
due, oldest deadline first (ties in scheduling order), synchronously -- exactly
what ``loop.call_later`` would have run, minus the waiting.

Keep-alive timing, reconnect backoff and cancellation deadlines stay on the
event loop's own clock: they bound waits on real sockets and real tasks.
Thread histories' retention counts wall-clock seconds (``wall_time``, when the clock
has one), since a shared store compares them across machines.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "LoopClock", "ManualClock", "TimerHandle"]


@runtime_checkable
class TimerHandle(Protocol):
    """What :meth:`Clock.call_later` returns: a timer that can be cancelled."""

    def cancel(self) -> None:
        """Stop the timer; the callback will not run. Idempotent."""
        ...


@runtime_checkable
class Clock(Protocol):
    """Monotonic time and one-shot timers (see the module docstring)."""

    def time(self) -> float:
        """Seconds on a monotonic clock (only differences are meaningful)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback()`` once, ``delay`` seconds from now, on the event loop's thread."""
        ...


class LoopClock:
    """The running asyncio loop's clock (the default)."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def wall_time(self) -> float:
        """Seconds since the epoch: what thread histories' retention counts in, since a
        shared store compares it across nodes (a monotonic clock is per machine)."""
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(delay, callback)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], object]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told to (for tests).

    ``advance(seconds)`` moves the time forward and runs, in deadline order,
    every timer that came due (a callback scheduling a new timer that is also
    due runs in the same call). Raises ValueError for a negative step.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = itertools.count()
        self._heap: list[tuple[float, int, _ManualTimer]] = []

    def time(self) -> float:
        return self._now

    def wall_time(self) -> float:
        """The same moved-by-hand time (see LoopClock.wall_time)."""
        return self._now

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        timer = _ManualTimer(self._now + max(0.0, delay), callback)
        heapq.heappush(self._heap, (timer.deadline, next(self._seq), timer))
        return timer

    @property
    def pending(self) -> int:
        """Timers scheduled and neither run nor cancelled."""
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"ManualClock.advance: cannot go back in time ({seconds} s)")
        target = self._now + seconds
        heap = self._heap
        while heap and heap[0][0] <= target:
            deadline, _, timer = heapq.heappop(heap)
            self._now = max(self._now, deadline)
            if not timer.cancelled:
                timer.cancelled = True  # ran: a later cancel() is a no-op
                timer.callback()
        self._now = target
