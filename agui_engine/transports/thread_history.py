"""The registry's thread histories (spec/transports.md §4.4): which earlier run a new run
continues and what its agent is given, the branch a client reads back, and the record a
finished run leaves. :class:`ThreadHistory` does that over a
:class:`~transports.history.ThreadStore`, the small async interface a store implements
(keep one finished run's record; read a thread's records): the in-memory store
(:class:`~transports.history.MemoryThreadStore`, inside
:class:`~transports.eventlog.InMemoryEventLog`), the Redis log, or a store of your own
(``RunRegistry(threads=...)``). What a record holds and how branches are formed is
:mod:`~transports.history` (pure); who may read a thread is :func:`~transports.admission.may_touch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from agui_engine.protocol.events import RunAgentInput
from agui_engine.protocol.threads import check_resume, open_interrupts

from .admission import Caller, may_touch
from .eventlog import EventLog
from .history import (
    Branch,
    HistoryRun,
    ThreadStore,
    UnknownThreadError,
    branch,
    branch_payloads,
    decode_records,
    merge_input,
)
from .input_decoding import MAX_RUN_ID_LENGTH
from .run_record import Run

__all__ = ["ThreadHistory"]


class ThreadHistory:
    """Thread histories kept in ``store``. ``wall``: the wall clock retention is measured
    on (a shared store compares it across nodes)."""

    def __init__(self, store: ThreadStore, wall: Callable[[], float], *, apart: bool = False) -> None:
        self.store = store
        self._wall = wall
        #: The store is apart from the event log (a durable store: IO of its own), so a run's
        #: record is kept before its terminal event goes out (see RunProducer).
        self.apart = apart

    @classmethod
    def kept(cls, store: ThreadStore | None, log: EventLog, wall: Callable[[], float]) -> ThreadHistory | None:
        """The histories kept in ``store``, else in ``log`` when it keeps them (None: nowhere)."""
        if store is None and isinstance(log, ThreadStore):
            store = log
        return None if store is None else cls(store, wall, apart=store is not cast(object, log))

    async def _kept_runs(self, thread_id: str) -> list[HistoryRun]:
        held = await self.store.thread_runs(thread_id, self._wall())
        return decode_records(held.records)

    async def lineage(self, input: RunAgentInput, caller: Caller | None) -> tuple[bool, str | None, RunAgentInput]:
        """(kept, parent, the input the agent gets) of a run about to start: whether it joins
        its thread's history, the run it continues there (its ``parentRunId``, else the
        thread's latest kept run), and its input given that branch's messages
        (:func:`~transports.history.merge_input`). Another client's thread is served, but
        neither joined nor read. Raises ResumeRejectedError (422: ``input.resume`` does not
        answer the interrupts the branch it continues ended with), EventLogUnavailableError."""
        if len(input.thread_id) > MAX_RUN_ID_LENGTH:
            return False, None, input  # a thread id longer than a run id may be is not a store key
        runs = await self._kept_runs(input.thread_id)
        if runs and not any(may_touch(r.principal, r.key_hash, caller) for r in runs):
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

    async def read(self, thread_id: str, run_id: str | None, caller: Caller | None) -> tuple[Branch, list[bytes]]:
        """The branch of ``thread_id`` ending at ``run_id`` (default: its latest kept run)
        and its events as served (:func:`~transports.history.branch_payloads`). Raises
        UnknownThreadError (404) when the thread has no kept runs, none of them is
        ``caller``'s, or ``run_id`` is not one of them; EventLogUnavailableError."""
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

    async def keep_shielded(self, run: Run) -> None:
        """:meth:`keep`, carried to its end even when the run's task is cancelled meanwhile
        (its client left after the terminal event): an ended run's record is not lost to a
        store that awaits IO. Bounded by the store's own timeouts."""
        keep = asyncio.ensure_future(self.keep(run))
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

    async def keep(self, run: Run) -> None:
        """Keep the ended run in its thread's history: the record its
        :class:`~transports.history.RunRecorder` folded while it streamed (the producer fed it
        every event, its terminal one included), so nothing is read back from the log."""
        recorder = run.recorder
        if recorder is None:
            return
        run.recorder = None  # kept once; its folded events are let go
        record = recorder.record(
            principal=run.owner or "", key_hash=run.key_hash, max_bytes=self.store.history_budget.max_thread_bytes
        )
        await self.store.keep_run(run.thread_id, record, self._wall())
