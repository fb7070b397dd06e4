"""The registry's record of one run (:class:`Run`): its input, who may touch it, the newest
event logged, its :class:`~transports.run_lifecycle.RunLifecycle`, and the IO handles the
registry drives that machine with (the producer task, the waiting subscribers' futures, the
grace and retention timers)."""

from __future__ import annotations

import asyncio

from agui_engine.protocol.events import RunAgentInput

from .clock import TimerHandle
from .history import RunRecorder
from .run_lifecycle import RunLifecycle, RunPhase

__all__ = ["Run"]


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
        "input",
        "key",
        "key_hash",
        "kept",
        "kept_early",
        "lifecycle",
        "owner",
        "recorder",
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
        #: What folds its events into its history record while it streams (a kept run's,
        #: from its producer's start until it is kept; else None).
        self.recorder: RunRecorder | None = None

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
