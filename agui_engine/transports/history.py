"""Thread history: each thread's finished runs, compacted, and the branches they form.

Theory of operation
-------------------
While a run streams, its producer feeds each event it logs to a :class:`RunRecorder`, which
folds them into one *record* (:class:`HistoryRun`) when the run ends: the run's events,
compacted as they pass by a :class:`~agui_engine.protocol.compact.Compactor` (the same output
as ``@ag-ui/client``'s ``compactEvents``; nothing is decoded or read back from the log), with a ``RUN_STARTED`` that carries the run's
``parentRunId`` and its exact ``input`` (AG-UI's serialization model: a thread is an
append-only log of runs whose ``parentRunId`` links form a tree). The input's ``state``,
when it has one, is written as a ``STATE_SNAPSHOT`` right after ``RUN_STARTED`` before
compaction, so the run's state events fold into one snapshot that starts from it. The event
log (:class:`ThreadStore`, implemented by the in-memory and the Redis logs) keeps the
records of each thread, oldest first, within a :class:`HistoryBudget`.

**Lineage.** A run's parent is the ``parentRunId`` of its input, or, when it names none,
the thread's latest kept run (a client that never branches gets one linear chain). The
*branch* of a run is the chain of records from the root down to it, following parent links;
a parent that is no longer kept (evicted by the budget, or never kept) ends the walk there:
the branch is *trimmed*.

**Serving a branch** (:func:`branch_payloads`): the records' events in chain order, with
each ``RUN_STARTED.input.messages`` reduced to the messages the branch did not already hold
(``input`` "may omit messages already in history"). Stored inputs stay whole, so evicting
the oldest runs loses no message a later input still carries.

**A run that names a parent** (:func:`merge_input`) is given, when its input leaves out
messages of the branch (root to parent), the branch's messages with the input's version of
any message of the same id, then the input's messages that the branch does not hold, in the
input's order; an input that holds every message of the branch is given as sent. Its
``state`` is the input's, or the branch's final state when the input has none (``null``).
Branch messages the input leaves out are kept: to drop messages, branch from an earlier run.

**A run compaction would change**: ``compactEvents`` moves the events of interleaved streams
(an event that arrives while a text message or tool call is open is written after that
stream's END); in rare orders an event lands before its own stream's START and an
accumulator drops it. A run that streamed anything interleaved is checked -- both forms
folded, the messages (each, by id) and the state compared -- and such a run is kept
uncompacted.

**A run too large to keep whole** (its log lost its first events to the log's bounds, or its
compacted record alone is over ``max_thread_bytes``) is kept as ``RUN_STARTED`` (with its
input when that fits), a ``CUSTOM`` event :data:`HISTORY_TRIMMED_EVENT` naming the run
and why, and its terminal event.

This module is pure (no IO): the stores do the keeping, the registry
(:mod:`transports.runs`) decides what is kept and who may read it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec

from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import EventDecodeError, decode_event, encode_event
from agui_engine.protocol.compact import Compactor
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import (
    CustomEvent,
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
)

__all__ = [
    "Branch",
    "HISTORY_MAX_RUNS_PER_THREAD",
    "HISTORY_MAX_RUN_BYTES",
    "HISTORY_MAX_THREAD_BYTES",
    "HISTORY_MAX_TOTAL_BYTES",
    "HISTORY_RETENTION_SECONDS",
    "HISTORY_TRIMMED_EVENT",
    "HistoryBudget",
    "HistoryRun",
    "MemoryThreadStore",
    "RunRecorder",
    "ThreadRuns",
    "ThreadStore",
    "UnknownThreadError",
    "WS_CLOSE_UNKNOWN_THREAD",
    "branch",
    "branch_payloads",
    "build_record",
    "decode_records",
    "merge_input",
]

#: Runs one thread keeps at most; the oldest is evicted first. A long chat is a few dozen
#: runs; every kept input holds the whole conversation so far, so the newest runs alone
#: restore it, and 100 leaves room for branches and tool rounds (each a run).
HISTORY_MAX_RUNS_PER_THREAD = 100

#: Bytes of compacted records one thread keeps at most (oldest runs evicted first). A
#: compacted answer is its text once (a long one ~10 KiB) plus its input; 1 MiB keeps
#: dozens of long turns while a thread cannot grow without bound.
HISTORY_MAX_THREAD_BYTES = 1024 * 1024

#: Bytes of records all threads of one store keep together; past it the threads written
#: least recently are evicted whole. 64 MiB is 64 full threads or thousands of ordinary
#: ones, an eighth of the run logs' default budget (DEFAULT_MAX_BUFFERED_BYTES).
HISTORY_MAX_TOTAL_BYTES = 64 * 1024 * 1024

#: How long a thread's history is kept after its last run ended: a user who reloads the
#: page the next day still gets the conversation; the store forgets idle threads after.
HISTORY_RETENTION_SECONDS = 24 * 3600.0

#: Encoded bytes of one run's events the history folds while the run streams, when its event
#: log names no per-run bounds (the in-memory and Redis logs do: a run is kept whole while its
#: log could hold it whole); past them the run is kept trimmed (``RUN_STARTED``, the marker, its
#: terminal event) and what was folded is let go. The log's default per-run bound
#: (DEFAULT_LOG_MAX_BYTES, 4 MiB).
HISTORY_MAX_RUN_BYTES = 4 * 1024 * 1024

#: The CUSTOM event that stands for the events of a run the history could not keep whole.
HISTORY_TRIMMED_EVENT = "agui_engine.history_trimmed"

#: WebSocket close / error code of an unknown (or not yours) thread.
WS_CLOSE_UNKNOWN_THREAD = 4404


class UnknownThreadError(RemoteInputError):
    """No history of this thread that the caller may read: it never ran here, its
    history expired, or it is another principal's (the same answer, so thread ids
    cannot be probed); or the ``runId`` asked for is not one of its kept runs."""

    http_status = 404
    ws_close_code = WS_CLOSE_UNKNOWN_THREAD
    default_code = "unknown_thread"


class HistoryBudget(msgspec.Struct, frozen=True, kw_only=True):
    """What a store keeps of thread histories (see the constants). Raises UsageError
    (at construction) for a bound below 1."""

    max_runs_per_thread: int = HISTORY_MAX_RUNS_PER_THREAD
    max_thread_bytes: int = HISTORY_MAX_THREAD_BYTES
    max_total_bytes: int = HISTORY_MAX_TOTAL_BYTES
    retention_seconds: float = HISTORY_RETENTION_SECONDS

    def __post_init__(self) -> None:
        for name in ("max_runs_per_thread", "max_thread_bytes", "max_total_bytes"):
            if getattr(self, name) < 1:
                raise UsageError(f"HistoryBudget.{name} must be >= 1, got {getattr(self, name)}")
        if not self.retention_seconds > 0:  # also rejects NaN
            raise UsageError(f"HistoryBudget.retention_seconds must be > 0, got {self.retention_seconds}")


class HistoryRun(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One kept run: its compacted events (JSON, as sent) and who may read it
    (the principal that started it and its run key's hash, as ``RunRegistry.check_owner``
    uses them). ``trimmed``: its events could not be kept whole (module docstring)."""

    run_id: str
    parent_run_id: str | None = None
    principal: str = ""
    key_hash: str = ""
    trimmed: bool = False
    events: list[msgspec.Raw] = msgspec.field(default_factory=list)


class ThreadRuns(NamedTuple):
    """What a store holds of one thread: its records, oldest first, and how many of its
    runs the budget evicted (0: none)."""

    records: list[bytes]
    dropped: int


class Branch(NamedTuple):
    """A branch of a thread: its runs from the root to ``tip``, and whether older runs of
    it are gone (its root names a parent that is not kept, or a run was kept trimmed)."""

    runs: list[HistoryRun]
    tip: str
    trimmed: bool


@runtime_checkable
class ThreadStore(Protocol):
    """Where an event log keeps thread histories (:class:`MemoryThreadStore`; the Redis log
    keeps them in Redis). ``now`` is the registry's clock, so retention follows it."""

    @property
    def history_budget(self) -> HistoryBudget:
        """The bounds this store keeps histories within."""
        ...

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        """Append one record to the thread, then evict: the thread's oldest runs past its
        run count or bytes (its newest record always stays), the least recently written
        threads past the store's total, threads idle past the retention.
        Raises EventLogUnavailableError (a shared store that does not answer)."""
        ...

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        """The thread's records (an empty list for an unknown or expired thread).
        Raises EventLogUnavailableError."""
        ...


class _Kept:
    __slots__ = ("dropped", "last", "nbytes", "records")

    def __init__(self) -> None:
        self.records: deque[bytes] = deque()
        self.nbytes = 0
        self.dropped = 0
        self.last = 0.0


class MemoryThreadStore:
    """The in-memory :class:`ThreadStore` (:class:`~transports.eventlog.InMemoryEventLog` has one)."""

    def __init__(self, budget: HistoryBudget | None = None) -> None:
        self._budget = budget if budget is not None else HistoryBudget()
        # Least recently written first: the eviction and retention order.
        self._threads: OrderedDict[str, _Kept] = OrderedDict()
        self._total = 0

    @property
    def history_budget(self) -> HistoryBudget:
        return self._budget

    def held_bytes(self) -> int:
        """Bytes of records all threads hold now (what max_total_bytes counts)."""
        return self._total

    def _expire(self, now: float) -> None:
        horizon = now - self._budget.retention_seconds
        while self._threads:
            tid, kept = next(iter(self._threads.items()))
            if kept.last > horizon:
                break
            self._drop(tid)

    def _drop(self, thread_id: str) -> None:
        kept = self._threads.pop(thread_id)
        self._total -= kept.nbytes

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        self._expire(now)
        budget = self._budget
        kept = self._threads.get(thread_id)
        if kept is None:
            kept = self._threads[thread_id] = _Kept()
        self._threads.move_to_end(thread_id)
        kept.records.append(record)
        kept.nbytes += len(record)
        self._total += len(record)
        kept.last = now
        while len(kept.records) > 1 and (
            len(kept.records) > budget.max_runs_per_thread or kept.nbytes > budget.max_thread_bytes
        ):
            old = kept.records.popleft()
            kept.nbytes -= len(old)
            self._total -= len(old)
            kept.dropped += 1
        while self._total > budget.max_total_bytes and len(self._threads) > 1:
            self._drop(next(iter(self._threads)))

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        self._expire(now)
        kept = self._threads.get(thread_id)
        if kept is None:
            return ThreadRuns([], 0)
        return ThreadRuns(list(kept.records), kept.dropped)

    def __len__(self) -> int:
        """Threads kept (for tests and metrics)."""
        return len(self._threads)


_record_decoder = msgspec.json.Decoder(HistoryRun)
_TERMINAL = (RunFinishedEvent, RunErrorEvent)
_STATE_EVENTS = (StateSnapshotEvent, StateDeltaEvent)


def decode_records(records: Sequence[bytes]) -> list[HistoryRun]:
    """The records a store holds, decoded; one that does not decode (written by another
    version) is skipped, as if it had been evicted."""
    out: list[HistoryRun] = []
    for raw in records:
        try:
            out.append(_record_decoder.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return out


#: A run's logged events decoded in one call (one JSON array): half the cost of one call each.
_events_decoder = msgspec.json.Decoder(list[Event])


def _decode_all(payloads: Sequence[bytes]) -> list[Any]:
    try:
        return list(_events_decoder.decode(b"[" + b",".join(payloads) + b"]"))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass  # one of them does not decode (not expected: the gateway encoded them): each alone
    events: list[Any] = []
    for p in payloads:
        try:
            events.append(decode_event(p))
        except EventDecodeError:  # the log holds what the gateway encoded: not expected
            continue
    return events


class RunRecorder:
    """Folds one run's events into its record while the run streams (module docstring): the
    gateway feeds each event it logs (:meth:`feed`), then :meth:`record` once. Nothing is
    decoded or read back from the log, and compaction (:class:`~agui_engine.protocol.compact.Compactor`)
    happens as the events pass. ``parent_run_id``: the run's parent in its thread.
    :meth:`overflow` (the run is over :data:`HISTORY_MAX_RUN_BYTES`, or its first events are
    lost) lets go of what was folded: the run is kept trimmed."""

    __slots__ = (
        "_compactor", "_encoded", "_events", "_fold_one", "_input", "_keep_one", "_last", "_parent", "_reason", "feed",
    )

    def __init__(self, input: RunAgentInput, parent_run_id: str | None) -> None:
        self._input = input
        self._parent = parent_run_id
        self._compactor: Compactor | None = Compactor()
        #: the events as fed (a run compaction moved is checked against them, and kept so)
        self._events: list[Any] = []
        self._keep_one = self._events.append
        self._fold_one = self._compactor.feed
        #: encodings the gateway already made, by the event's id (the event is in _events)
        self._encoded: dict[int, bytes] = {}
        self._last: Any = None
        self._reason = ""
        #: Fold one more event (the run's first must be its RUN_STARTED, else it is kept trimmed).
        self.feed: Any = self._first

    def _first(self, event: Any) -> None:
        if not isinstance(event, RunStartedEvent):
            self.overflow("the event log had dropped its first events (the run was longer than the log's bound)")
            self.feed(event)
            return
        input = self._input
        self.feed = self._fold
        self._fold(msgspec.structs.replace(event, parent_run_id=self._parent, input=input))
        if input.state is not None:
            self._fold(StateSnapshotEvent(snapshot=input.state))

    def _fold(self, event: Any) -> None:
        self._keep_one(event)
        self._fold_one(event)

    def _tail(self, event: Any) -> None:
        self._last = event

    def encoded(self, event: Any, payload: bytes) -> None:
        """``payload`` is ``event``'s encoding (the gateway logged it): a record that keeps the
        event unchanged writes it as is instead of encoding it again (worth it for large events:
        snapshots, component props). Call after feeding it."""
        if self._compactor is not None:
            self._encoded[id(event)] = payload

    def overflow(self, reason: str = "") -> None:
        """Keep the run trimmed, for ``reason`` (default: over HISTORY_MAX_RUN_BYTES), and
        let go of what was folded; later events only say how it ended."""
        if self._compactor is None:
            return
        self._last = self._events[-1] if self._events else None
        self._events, self._compactor, self._encoded = [], None, {}
        self._keep_one = self._fold_one = self._tail  # the folded events are let go
        self._reason = reason or (
            "the run was longer than its event log holds (the log's max_events / max_bytes, else HISTORY_MAX_RUN_BYTES)"
        )
        self.feed = self._tail

    def record(self, *, principal: str = "", key_hash: str = "", max_bytes: int = HISTORY_MAX_THREAD_BYTES) -> bytes:
        """The run's record (module docstring), at most ``max_bytes`` unless even the trimmed
        form (without the input) is larger, which only a run id near its length limit can make.
        Call once, after the run's terminal event."""
        input, parent = self._input, self._parent
        compactor = self._compactor
        if compactor is not None and self._events:
            whole = self._events
            compacted: list[Any] = compactor.close()
            self._compactor = None
            if compactor.moved and not _same_thread(whole, compacted):
                # compactEvents moves the events of interleaved streams; in rare orders a held
                # event lands before its stream's START and an accumulator drops it: keep the run
                # uncompacted rather than lose what it said.
                compacted = whole
            done = self._encoded
            encoded = [done.get(id(e)) or encode_event(e) for e in compacted]
            self._encoded = {}
            record = _encode(input.run_id, parent, principal, key_hash, False, encoded)
            if len(record) <= max_bytes:
                return record
            reason = f"its compacted events ({len(record)} bytes) are over the thread's budget of {max_bytes} bytes"
            last = whole[-1]
        else:
            reason = self._reason or "the event log had dropped its first events (the run was longer than the log's bound)"
            last = self._last
        started = RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id, parent_run_id=parent, input=input)
        terminal = last if isinstance(last, _TERMINAL) else None
        marker = CustomEvent(name=HISTORY_TRIMMED_EVENT, value={"runId": input.run_id, "reason": reason})
        tail = [encode_event(marker)] + ([encode_event(terminal)] if terminal is not None else [])
        record = _encode(input.run_id, parent, principal, key_hash, True, [encode_event(started), *tail])
        if len(record) > max_bytes:
            bare = msgspec.structs.replace(started, input=None)
            record = _encode(input.run_id, parent, principal, key_hash, True, [encode_event(bare), *tail])
        return record


def build_record(
    input: RunAgentInput,
    parent_run_id: str | None,
    payloads: Sequence[bytes],
    *,
    complete: bool,
    principal: str = "",
    key_hash: str = "",
    max_bytes: int = HISTORY_MAX_THREAD_BYTES,
) -> bytes:
    """The record of one ended run from its logged events (encoded): a :class:`RunRecorder`
    fed them. ``complete``: they start at the run's first event (False: the log dropped its
    beginning, and the run is kept trimmed)."""
    recorder = RunRecorder(input, parent_run_id)
    if not complete:
        recorder.overflow("the event log had dropped its first events (the run was longer than the log's bound)")
    for event in _decode_all(payloads):
        recorder.feed(event)
    return recorder.record(principal=principal, key_hash=key_hash, max_bytes=max_bytes)


def _same_thread(events: Sequence[Any], compacted: Sequence[Any]) -> bool:
    """Whether both build the same messages (each, by id) and state in an accumulator."""
    built = []
    for seq in (events, compacted):
        acc = Accumulator()
        acc.apply_all(seq)
        built.append(({m["id"]: m for m in acc.messages}, acc.state))
    return built[0] == built[1]


def _encode(
    run_id: str, parent: str | None, principal: str, key_hash: str, trimmed: bool, events: list[bytes]
) -> bytes:
    return msgspec.json.encode(
        HistoryRun(
            run_id=run_id,
            parent_run_id=parent,
            principal=principal,
            key_hash=key_hash,
            trimmed=trimmed,
            events=[msgspec.Raw(e) for e in events],
        )
    )


def branch(runs: Sequence[HistoryRun], tip: str | None = None) -> Branch:
    """The branch ending at run ``tip`` (default: the latest kept run).
    Raises UnknownThreadError when there are no runs or ``tip`` is not one of them."""
    if not runs:
        raise UnknownThreadError("no history of this thread is kept here")
    by_id = {r.run_id: r for r in runs}
    end = by_id.get(tip) if tip is not None else runs[-1]
    if end is None:
        raise UnknownThreadError(f"run {tip!r} is not a kept run of this thread")
    chain = [end]
    seen = {end.run_id}
    trimmed = end.trimmed
    node = end
    while node.parent_run_id is not None:
        parent = by_id.get(node.parent_run_id)
        if parent is None:
            # The parent was evicted, or never kept (a run of another client, a bad id).
            trimmed = True
            break
        if parent.run_id in seen:  # a cycle only a hand-written store could hold
            break
        chain.append(parent)
        seen.add(parent.run_id)
        trimmed = trimmed or parent.trimmed
        node = parent
    chain.reverse()
    return Branch(chain, end.run_id, trimmed)


def _fold(chain: Sequence[HistoryRun], out: list[bytes] | None) -> Accumulator:
    """Fold a branch's events into an accumulator, each RUN_STARTED's input reduced to the
    messages not held yet; ``out`` (if given) receives the events as served."""
    acc = Accumulator()
    for run in chain:
        for raw in run.events:
            payload = bytes(raw)
            event = decode_event(payload)
            if isinstance(event, RunStartedEvent) and event.input is not None:
                fresh = [m for m in event.input.messages if acc.get_message(m.id) is None]
                if len(fresh) != len(event.input.messages):
                    event = msgspec.structs.replace(event, input=msgspec.structs.replace(event.input, messages=fresh))
                    payload = encode_event(event)
            if out is not None:
                out.append(payload)
                if isinstance(event, _STATE_EVENTS):
                    continue  # which messages the branch holds does not depend on its state
            acc.apply(event)
    return acc


def branch_payloads(chain: Sequence[HistoryRun]) -> list[bytes]:
    """The encoded events of a branch as served (module docstring, "Serving a branch")."""
    out: list[bytes] = []
    _fold(chain, out)
    return out


def merge_input(chain: Sequence[HistoryRun], input: RunAgentInput) -> RunAgentInput:
    """The input a run that names a parent is given (module docstring): the branch's
    messages, each replaced by the input's message of the same id, then the input's new
    messages; the input's state, or the branch's when the input has none."""
    acc = _fold(chain, None)
    given = {m.id: m for m in input.messages}
    held = acc.messages_as_structs()
    messages = input.messages
    if any(m.id not in given for m in held):  # the input omits some: the branch's order, then the new
        held_ids = {m.id for m in held}
        messages = [given.get(m.id, m) for m in held]
        messages.extend(m for m in input.messages if m.id not in held_ids)
    state = input.state if input.state is not None else acc.state
    return msgspec.structs.replace(input, messages=messages, state=state)
