"""This node's side of an event log that several gateway nodes share (spec/transports.md §4.1):
what the shared log asks of the node (:class:`~transports.eventlog.RunControl`: cancel a run
owned here, wake its readers, note append latency), and what the node asks of the other nodes
through the log (who started a run it follows, a cancel for a run another node owns, whether
a run's readers moved to another node)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .eventlog import EventLogUnavailableError, SharedEventLog
from .registry_options import CANCEL_WAIT_SECONDS, RegistryOptions
from .run_lifecycle import Effect, RunEvent, RunFinishedError
from .run_record import Run

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = ["SharedRuns"]

_log = logging.getLogger("agui_engine.transports")


class SharedRuns:
    """The runs of one registry (``runs``, by id) as the shared ``log`` sees them; ``fire``
    fires an event at a run's lifecycle (the registry's). Attaches itself to the log."""

    def __init__(
        self,
        log: SharedEventLog,
        runs: Mapping[str, Run],
        fire: Callable[[Run, RunEvent, object], None],
        options: RegistryOptions,
        metrics: GatewayMetrics | None,
    ) -> None:
        self.log = log
        self._runs = runs
        self._fire = fire
        self._options = options
        self._metrics = metrics
        log.attach(self)

    # -- what the shared log asks of this node (eventlog.RunControl) -----------------------

    @property
    def retention_seconds(self) -> float:
        return self._options.retention_seconds

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
        if self._metrics is not None:
            self._metrics.note_log_append(seconds)

    def effects(self) -> dict[Effect, Callable[[Run], None]]:
        """The lifecycle effects this node's side of the shared log carries out."""
        return {
            Effect.FOLLOW: self.follow,
            Effect.UNFOLLOW: self.unfollow,
            Effect.CHECK_REMOTE_READERS: self.check_remote_readers,
        }

    @staticmethod
    def no_effects() -> dict[Effect, Callable[[Run], None]]:
        """The same effects without a shared log: nothing to do (a follower needs no wake-ups)."""
        return dict.fromkeys((Effect.FOLLOW, Effect.UNFOLLOW, Effect.CHECK_REMOTE_READERS), _nothing)

    # -- what this node asks of the others --------------------------------------------------

    async def reachable(self) -> bool:
        """Whether the shared log answers (it is pinged)."""
        try:
            await self.log.ping()
        except EventLogUnavailableError:
            return False
        return True

    async def follower(self, run_id: str) -> Run:
        """A follower of ``run_id`` (another node's run), with the principal and key hash its
        node recorded. Raises EventLogUnavailableError."""
        follower = Run.following(run_id)
        follower.owner, follower.key_hash = await self.log.run_access(run_id)
        return follower

    async def request_cancel(self, run_id: str) -> None:
        """Ask the node that owns ``run_id`` to cancel it. Raises RunFinishedError."""
        if not await self.log.request_cancel(run_id):
            raise RunFinishedError(f"run {run_id!r} has already finished")

    async def wait_ended(self, run_id: str) -> None:
        """Return once the run's terminal event is in the log, or after CANCEL_WAIT_SECONDS."""
        log = self.log
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

    def follow(self, run: Run) -> None:
        """Be told when ``run`` (another node's) advances: the log's wake-ups for its readers here."""
        self.log.follow(run.run_id)

    def unfollow(self, run: Run) -> None:
        self.log.unfollow(run.run_id)

    def check_remote_readers(self, run: Run) -> None:
        """Tell ``run``'s lifecycle (soon: the log is asked) how long ago a reader on another
        node last read it."""
        asyncio.get_running_loop().create_task(self._remote_readers(run))

    async def _remote_readers(self, run: Run) -> None:
        try:
            age = await self.log.remote_reader_age(run.run_id)
        except EventLogUnavailableError:
            age = None  # the run is being ended for the lost log anyway
        self._fire(run, RunEvent.REMOTE_READERS, age)


def _nothing(run: Run) -> None:
    """An effect with nothing to do here."""
