"""The timers of the registry's runs, and the retention queue: the grace timer of a run its
last subscriber left, the retention timer of a finished run, and the queue of finished runs
nobody reads (at most ``max_retained``, the oldest evicted first). Each method carries out
one effect of a run's :class:`~transports.run_lifecycle.RunLifecycle`; each timer fires an
event back at it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from .clock import Clock, TimerHandle
from .registry_options import RegistryOptions
from .run_lifecycle import Effect, GatewayLifecycle, RunEvent
from .run_record import Run

__all__ = ["RunTimers"]


class RunTimers:
    """Timers on ``clock``; ``fire`` fires an event at a run's lifecycle (the registry's);
    ``gateway``: once it is closed, no retention timer is started."""

    def __init__(
        self,
        options: RegistryOptions,
        clock: Clock,
        gateway: GatewayLifecycle,
        fire: Callable[[Run, RunEvent], None],
    ) -> None:
        self._options = options
        self._clock = clock
        self._gateway = gateway
        self._fire = fire
        # Finished runs nobody reads, oldest first: the max_retained eviction queue
        # (a run joins and leaves it when its lifecycle says QUEUE / UNQUEUE).
        self._retained: OrderedDict[str, Run] = OrderedDict()

    def effects(self) -> dict[Effect, Callable[[Run], None]]:
        """The lifecycle effects these timers carry out, each by its method."""
        return {
            Effect.ARM_GRACE: self.arm_grace,
            Effect.STOP_GRACE: self.stop_grace,
            Effect.START_RETENTION: self.start_retention,
            Effect.STOP_RETENTION: self.stop_retention,
            Effect.QUEUE: self.queue,
            Effect.UNQUEUE: self.unqueue,
        }

    def _timer(self, run: Run, delay: float, event: RunEvent) -> TimerHandle:
        return self._clock.call_later(delay, lambda: self._fire(run, event))

    def arm_grace(self, run: Run) -> None:
        _stop(run.grace_timer)
        run.grace_timer = self._timer(run, run.lifecycle.grace_delay, RunEvent.GRACE_EXPIRED)

    def stop_grace(self, run: Run) -> None:
        run.grace_timer = _stop(run.grace_timer)

    def start_retention(self, run: Run) -> None:
        if not self._gateway.closed:
            run.retention_timer = self._timer(run, self._options.retention_seconds, RunEvent.RETENTION_EXPIRED)

    def stop_retention(self, run: Run) -> None:
        run.retention_timer = _stop(run.retention_timer)

    def queue(self, run: Run) -> None:
        self._retained[run.run_id] = run
        while len(self._retained) > self._options.max_retained:
            _, old = self._retained.popitem(last=False)
            self._fire(old, RunEvent.EVICTED)

    def unqueue(self, run: Run) -> None:
        self._retained.pop(run.run_id, None)

    def stop_all(self, runs: Iterable[Run]) -> None:
        """Stop the retention timers of ``runs`` (shutdown)."""
        for run in runs:
            run.retention_timer = _stop(run.retention_timer)


def _stop(timer: TimerHandle | None) -> TimerHandle | None:
    """Cancel ``timer`` (if any); returns None, for ``run.x_timer = _stop(run.x_timer)``."""
    if timer is not None:
        timer.cancel()
    return None
