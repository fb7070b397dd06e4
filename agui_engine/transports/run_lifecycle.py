"""The run lifecycle as one table: a sans-IO state machine that the registry
(:mod:`transports.runs`) drives.

Theory of operation
-------------------
A :class:`RunLifecycle` is told what happened to one run (:class:`RunEvent`:
the producer started, a lifecycle event was logged, a cancel was asked for, a
subscriber came or left, a timer fired ...) through :meth:`RunLifecycle.fire`
and answers with the :class:`Effect` s its front end must carry out (cancel the
producer task, append the ``RUN_STARTED`` prelude, arm the grace timer, discard
the log ...). It does no IO, holds no task, future or timer, and reads no clock:
the registry owns those and maps each effect to one of them, so every decision
about a run is made here, in one place, and is tested without an event loop.

A row of :data:`RUN_TRANSITIONS` is looked up by ``(phase, event)``; it names
the handler that updates the run's data (subscriber count, pending cancel,
pending grace, terminal code) and computes the effects, and the phase to move
to. A pair missing from the table is refused with :class:`IllegalTransition`
(the registry's own bug); a refusal that a client can cause is a row naming
the error to raise (cancelling a finished run: :class:`RunFinishedError`,
HTTP 409). Nothing changes on a refusal.

Phases (:class:`RunPhase`) and the main path::

    CREATED --producer started--> OPEN --RUN_STARTED logged--> STREAMING <-----+
                  (a cancel pending:   |                          |             | RUN_STARTED logged
                   END_AT_ONCE, then   |                          | terminal    | (the stream's
                   producer ended)     |                          v logged      |  next run)
                                       |                        ENDED ----------+
                                       |                          |
                                       +-- producer ended --------+-----------> FINISHING
                                           (from OPEN, STREAMING or ENDED)          |
                                                                                    | log finished
                                                                                    v
     DISCARDED <--last reader left-- LINGERING <--retention expired, still read-- FINISHED
         ^                                                                          |
         +--------------------- retention expired / evicted (unread) --------------+

    FOLLOWING: a run another gateway node runs (shared log); only subscribers change.

Orthogonal to the phase the machine keeps:

* ``subscribers``: how many cursors read the run. The last one leaving a live
  run (CREATED .. ENDED) with no cancel pending *orphans* it: the grace timer is
  armed for ``grace_seconds`` if it said it resumes, else for
  ``disconnect_grace_seconds``; a delay of 0 expires at once. Expiry cancels the
  run (code ``abandoned`` / ``disconnected``) -- with a shared log, after asking
  whether a reader on another node is still there (``CHECK_REMOTE_READERS``,
  answered by ``REMOTE_READERS``). A subscriber arriving stops the timer.
* ``cancel``: the pending cancellation ``(code, message)``; the first one wins,
  a second is a no-op. A run cancelled before its producer ran ends at once
  when the producer starts (``END_AT_ONCE``): a task cancelled before its first
  step would never run its own code, and the run would get no terminal event.
* ``terminal_code``: ``None`` for ``RUN_FINISHED``, else the ``RUN_ERROR`` code.

Every run ends with exactly one terminal event: ``PRODUCER_ENDED`` with an
error in OPEN asks for ``APPEND_STARTED`` then ``APPEND_ERROR``, in STREAMING
for ``APPEND_ERROR``, in ENDED for nothing (the agent's own terminal stands).

:class:`GatewayLifecycle` is the registry's admission, a second, smaller table
(:data:`GATEWAY_TRANSITIONS`): OPEN admits new runs, DRAINING (``drain()``) and
CLOSED (``shutdown()``) refuse them; CLOSED also arms no grace or retention timer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final, NamedTuple

from agui_engine.protocol.errors import RemoteInputError, UsageError

__all__ = [
    "Effect",
    "GATEWAY_TRANSITIONS",
    "GatewayEvent",
    "GatewayLifecycle",
    "GatewayPhase",
    "IllegalTransition",
    "RUN_TRANSITIONS",
    "Row",
    "RunEvent",
    "RunFinishedError",
    "RunLifecycle",
    "RunPhase",
    "TRUNCATED",
    "WS_CLOSE_RUN_EXISTS",
]

#: WebSocket close code for the registry's 409 refusals (run exists, run finished).
WS_CLOSE_RUN_EXISTS = 4409


class IllegalTransition(UsageError):
    """An event the run's phase does not accept: the front end's bug (it drove the
    machine out of order). Names the phase and the event."""

    default_code = "illegal_transition"

    def __init__(self, machine: str, phase: enum.Enum, event: enum.Enum) -> None:
        super().__init__(f"{machine}: {event.name} is not accepted in phase {phase.name}")
        self.phase = phase
        self.event = event


class RunFinishedError(RemoteInputError):
    """The run has already ended; there is nothing left to cancel."""

    http_status = 409
    ws_close_code = WS_CLOSE_RUN_EXISTS
    default_code = "run_finished"


class RunPhase(enum.Enum):
    CREATED = "created"  # the producer task is scheduled; the agent is not opened yet
    OPEN = "open"  # the agent's stream is open; no RUN_STARTED logged yet
    STREAMING = "streaming"  # RUN_STARTED is logged
    ENDED = "ended"  # the agent logged its terminal event; its generator may still be closing
    FINISHING = "finishing"  # the producer ended; what is missing is appended, the log finished
    FINISHED = "finished"  # the log is complete and kept for resume (retention)
    LINGERING = "lingering"  # retention is over but a subscriber still reads: discarded when it leaves
    DISCARDED = "discarded"  # the log is gone
    FOLLOWING = "following"  # run by another gateway node; read from the shared log


class RunEvent(enum.Enum):
    PRODUCER_STARTED = enum.auto()
    STARTED_LOGGED = enum.auto()  # a RUN_STARTED was appended
    TERMINAL_LOGGED = enum.auto()  # a RUN_FINISHED / RUN_ERROR was appended (arg: its code)
    CANCEL = enum.auto()  # arg: (code, message)
    PRODUCER_ENDED = enum.auto()  # arg: the RUN_ERROR code to end with, or None
    LOG_FINISHED = enum.auto()
    SUBSCRIBE = enum.auto()
    UNSUBSCRIBE = enum.auto()  # arg: whether the leaving subscriber resumes
    GRACE_EXPIRED = enum.auto()
    REMOTE_READERS = enum.auto()  # arg: seconds since a reader on another node read, or None
    RETENTION_EXPIRED = enum.auto()
    EVICTED = enum.auto()  # the max_retained queue pushed it out


class Effect(enum.Enum):
    CANCEL_PRODUCER = enum.auto()  # cancel the producer task (its agent generator gets CancelledError)
    END_AT_ONCE = enum.auto()  # the producer must not open the agent: end with the pending cancel
    APPEND_STARTED = enum.auto()  # append the RUN_STARTED prelude
    APPEND_ERROR = enum.auto()  # append RUN_ERROR{terminal_code}
    FINISH_LOG = enum.auto()
    RUN_ENDED = enum.auto()  # the run stopped running: count it out, wake every subscriber
    ARM_GRACE = enum.auto()  # start the grace timer for ``grace_delay`` seconds
    STOP_GRACE = enum.auto()
    CHECK_REMOTE_READERS = enum.auto()  # ask the shared log; answer with REMOTE_READERS
    START_RETENTION = enum.auto()
    STOP_RETENTION = enum.auto()
    QUEUE = enum.auto()  # join the max_retained eviction queue (nobody reads it)
    UNQUEUE = enum.auto()  # leave it (a subscriber reads it again)
    DISCARD = enum.auto()  # forget the run and discard its log
    FOLLOW = enum.auto()  # a follower's first reader here: watch the shared log
    UNFOLLOW = enum.auto()


_Handler = Callable[["RunLifecycle", object], tuple[Effect, ...]]


class Row(NamedTuple):
    """What ``(phase, event)`` does: ``handler`` updates the data and returns the
    effects; ``then`` is the next phase (None: stay, or where the handler moved it,
    for the rows whose next phase depends on the data); ``refuse`` an error to raise instead."""

    handler: _Handler | None = None
    then: RunPhase | None = None
    refuse: type[Exception] | None = None


_NONE: tuple[Effect, ...] = ()

#: The RUN_ERROR code of a run whose producer ended with no terminal event, no
#: error and no cancel (an unverified agent that just stopped).
TRUNCATED = "truncated"


def _start(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    return (Effect.END_AT_ONCE,) if m.cancel is not None else _NONE


def _started(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    m.terminal_code = None
    return _NONE


def _terminal(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    m.terminal_code = arg if isinstance(arg, str) else None
    return _NONE


def _cancel(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if m.cancel is not None:
        return _NONE  # the first reason wins
    code, message = arg if isinstance(arg, tuple) else ("cancelled", "the run was cancelled")
    m.cancel = (str(code), str(message))
    out = (Effect.STOP_GRACE,) if m.grace is not None else _NONE
    m.grace = None
    m.grace_delay = 0.0
    # An unstarted producer sees the pending cancel when it starts (END_AT_ONCE).
    return out if m.phase is RunPhase.CREATED else (*out, Effect.CANCEL_PRODUCER)


def _producer_ended(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    error = arg if isinstance(arg, str) else None
    if error is None and m.phase is not RunPhase.ENDED:
        # ended without a terminal event: cancelled, or the agent's stream was cut short
        error = m.cancel[0] if m.cancel is not None else TRUNCATED
    stop = (Effect.STOP_GRACE,) if m.grace is not None else _NONE
    m.grace = None
    if m.phase is RunPhase.ENDED or error is None:
        return (*stop, Effect.FINISH_LOG)
    m.terminal_code = error
    if m.phase is RunPhase.STREAMING:
        return (*stop, Effect.APPEND_ERROR, Effect.FINISH_LOG)
    return (*stop, Effect.APPEND_STARTED, Effect.APPEND_ERROR, Effect.FINISH_LOG)


def _log_finished(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if m.subscribers:
        return (Effect.RUN_ENDED, Effect.START_RETENTION)
    return (Effect.RUN_ENDED, Effect.START_RETENTION, Effect.QUEUE)


def _subscribe(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    m.subscribers += 1
    m.checking = False  # a remote-readers answer still on its way is stale now
    if m.phase is RunPhase.FOLLOWING:
        return (Effect.FOLLOW,)
    if m.phase is RunPhase.FINISHED and m.subscribers == 1:
        return (Effect.UNQUEUE,)
    if m.grace is not None:
        m.grace = None
        return (Effect.STOP_GRACE,)
    return _NONE


def _leave(m: RunLifecycle) -> None:
    if m.subscribers <= 0:
        raise IllegalTransition("RunLifecycle", m.phase, RunEvent.UNSUBSCRIBE)
    m.subscribers -= 1


def _unsubscribe_live(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    _leave(m)
    if m.subscribers or m.cancel is not None:
        return _NONE
    if arg is False:
        delay, code, message = (
            m.disconnect_grace_seconds,
            "disconnected",
            "the client closed the connection and did not declare it would resume",
        )
    else:
        delay, code, message = m.grace_seconds, "abandoned", f"no client was connected for {m.grace_seconds:g} s"
    m.grace = (code, message)
    m.grace_delay = delay
    if delay > 0:
        return (Effect.ARM_GRACE,)
    return _grace_expired(m, None)


def _unsubscribe_quiet(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    _leave(m)
    return _NONE


def _unsubscribe_finished(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    _leave(m)
    return _NONE if m.subscribers else (Effect.QUEUE,)


def _unsubscribe_lingering(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    _leave(m)
    if m.subscribers:
        return _NONE
    m.phase = RunPhase.DISCARDED
    return (Effect.DISCARD,)


def _unsubscribe_following(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    _leave(m)
    return (Effect.UNFOLLOW,)


def _grace_expired(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if m.grace is None or m.subscribers:
        return _NONE  # stopped meanwhile (a subscriber came back, or the run was cancelled)
    if m.shared:
        m.checking = True
        return (Effect.CHECK_REMOTE_READERS,)
    code, message = m.grace
    m.grace = None
    return _cancel(m, (code, message))


def _remote_readers(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if not m.checking:
        return _NONE
    m.checking = False
    if m.grace is None or m.subscribers:
        return _NONE  # a subscriber came back while the shared log was asked
    if isinstance(arg, (int, float)) and arg < m.grace_seconds:
        # A client reads this run on another node (or did, ``arg`` seconds ago):
        # that reader resumes across nodes, so its grace period is the one that counts.
        m.grace = ("abandoned", f"no client was connected for {m.grace_seconds:g} s")
        m.grace_delay = m.grace_seconds - float(arg)
        return (Effect.ARM_GRACE,)
    code, message = m.grace
    m.grace = None
    return _cancel(m, (code, message))


def _retention_expired(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if m.subscribers:
        m.phase = RunPhase.LINGERING
        return _NONE
    m.phase = RunPhase.DISCARDED
    return (Effect.UNQUEUE, Effect.DISCARD)


def _evicted(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    if m.subscribers:
        raise IllegalTransition("RunLifecycle", m.phase, RunEvent.EVICTED)  # a read run is never queued
    return (Effect.STOP_RETENTION, Effect.DISCARD)


def _noop(m: RunLifecycle, arg: object) -> tuple[Effect, ...]:
    return _NONE


#: The phases of a run still running here.
_LIVE: Final = (RunPhase.CREATED, RunPhase.OPEN, RunPhase.STREAMING, RunPhase.ENDED)
#: The phases of a run whose producer has ended.
_PRODUCER_DONE: Final = (RunPhase.FINISHING, RunPhase.FINISHED, RunPhase.LINGERING, RunPhase.DISCARDED)

#: THE run state machine. (phase, event) -> Row(handler, then, refuse). A missing
#: pair raises IllegalTransition.
RUN_TRANSITIONS: Final[dict[tuple[RunPhase, RunEvent], Row]] = {
    # -- the producer: the agent's stream
    (RunPhase.CREATED, RunEvent.PRODUCER_STARTED): Row(_start, then=RunPhase.OPEN),
    (RunPhase.OPEN, RunEvent.STARTED_LOGGED): Row(_started, then=RunPhase.STREAMING),
    # RUN_ERROR first (verify off, or an early failure)
    (RunPhase.OPEN, RunEvent.TERMINAL_LOGGED): Row(_terminal, then=RunPhase.ENDED),
    (RunPhase.STREAMING, RunEvent.TERMINAL_LOGGED): Row(_terminal, then=RunPhase.ENDED),
    # unverified stream: a nested RUN_STARTED changes nothing
    (RunPhase.STREAMING, RunEvent.STARTED_LOGGED): Row(_noop),
    # the stream's next run (AG-UI allows several)
    (RunPhase.ENDED, RunEvent.STARTED_LOGGED): Row(_started, then=RunPhase.STREAMING),
    (RunPhase.ENDED, RunEvent.TERMINAL_LOGGED): Row(_terminal),  # a late RUN_ERROR after RUN_FINISHED
    (RunPhase.OPEN, RunEvent.PRODUCER_ENDED): Row(_producer_ended, then=RunPhase.FINISHING),
    (RunPhase.STREAMING, RunEvent.PRODUCER_ENDED): Row(_producer_ended, then=RunPhase.FINISHING),
    (RunPhase.ENDED, RunEvent.PRODUCER_ENDED): Row(_producer_ended, then=RunPhase.FINISHING),
    (RunPhase.FINISHING, RunEvent.LOG_FINISHED): Row(_log_finished, then=RunPhase.FINISHED),
    # -- cancellation: while the run is live; a client's cancel of an ended run is a 409
    **{(p, RunEvent.CANCEL): Row(_cancel) for p in _LIVE},
    **{(p, RunEvent.CANCEL): Row(refuse=RunFinishedError) for p in _PRODUCER_DONE},
    # -- subscribers, grace
    **{
        (p, RunEvent.SUBSCRIBE): Row(_subscribe)
        for p in (*_LIVE, RunPhase.FINISHING, RunPhase.FINISHED, RunPhase.LINGERING, RunPhase.FOLLOWING)
    },
    **{(p, RunEvent.UNSUBSCRIBE): Row(_unsubscribe_live) for p in _LIVE},
    (RunPhase.FINISHING, RunEvent.UNSUBSCRIBE): Row(_unsubscribe_quiet),  # LOG_FINISHED decides about the queue
    (RunPhase.FINISHED, RunEvent.UNSUBSCRIBE): Row(_unsubscribe_finished),
    (RunPhase.LINGERING, RunEvent.UNSUBSCRIBE): Row(_unsubscribe_lingering),  # the handler moves to DISCARDED on the last
    (RunPhase.FOLLOWING, RunEvent.UNSUBSCRIBE): Row(_unsubscribe_following),
    **{(p, RunEvent.GRACE_EXPIRED): Row(_grace_expired) for p in _LIVE},
    **{(p, RunEvent.REMOTE_READERS): Row(_remote_readers) for p in _LIVE},
    # (a timer or a remote answer that raced with the end of the run: nothing to do)
    **{(p, e): Row(_noop) for p in _PRODUCER_DONE for e in (RunEvent.GRACE_EXPIRED, RunEvent.REMOTE_READERS)},
    # -- retention
    # -> LINGERING or DISCARDED (the handler decides)
    (RunPhase.FINISHED, RunEvent.RETENTION_EXPIRED): Row(_retention_expired),
    (RunPhase.FINISHED, RunEvent.EVICTED): Row(_evicted, then=RunPhase.DISCARDED),
    (RunPhase.LINGERING, RunEvent.RETENTION_EXPIRED): Row(_noop),
}


class RunLifecycle:
    """The state of one run (see the module docstring). ``grace_seconds`` /
    ``disconnect_grace_seconds``: the orphan delays; ``shared``: subscribers on
    other nodes count (a shared event log); ``following``: a follower run."""

    __slots__ = (
        "cancel",
        "checking",
        "disconnect_grace_seconds",
        "grace",
        "grace_delay",
        "grace_seconds",
        "phase",
        "shared",
        "subscribers",
        "terminal_code",
    )

    def __init__(
        self,
        *,
        grace_seconds: float = 0.0,
        disconnect_grace_seconds: float = 0.0,
        shared: bool = False,
        following: bool = False,
    ) -> None:
        self.phase = RunPhase.FOLLOWING if following else RunPhase.CREATED
        self.subscribers = 0
        #: The pending cancellation (code, message); None: none asked for.
        self.cancel: tuple[str, str] | None = None
        #: The armed (or expiring) grace period's (code, message); None: not orphaned.
        self.grace: tuple[str, str] | None = None
        #: Seconds for the ARM_GRACE just returned.
        self.grace_delay = 0.0
        #: True while a CHECK_REMOTE_READERS awaits its REMOTE_READERS.
        self.checking = False
        #: None for RUN_FINISHED, else the RUN_ERROR code (once an end is known).
        self.terminal_code: str | None = None
        self.grace_seconds = grace_seconds
        self.disconnect_grace_seconds = disconnect_grace_seconds
        self.shared = shared

    @property
    def live(self) -> bool:
        """The run is still running (the producer has not finished the log)."""
        return self.phase in _LIVE_OR_FINISHING

    @property
    def finished(self) -> bool:
        """The log holds the terminal event and is complete (or is already gone)."""
        return self.phase in _OVER

    @property
    def cancellable(self) -> bool:
        return self.phase in _LIVE and self.cancel is None

    def accepts(self, event: RunEvent) -> bool:
        """Whether ``event`` is in the table for the current phase (and not a refusal)."""
        row = RUN_TRANSITIONS.get((self.phase, event))
        return row is not None and row.refuse is None

    def fire(self, event: RunEvent, arg: object = None) -> tuple[Effect, ...]:
        """Apply ``event`` (``arg``: see :class:`RunEvent`) and return the effects to
        carry out, in order. Raises IllegalTransition for a pair the table lacks,
        the row's error (RunFinishedError) for a refusal; nothing changes then."""
        row = RUN_TRANSITIONS.get((self.phase, event))
        if row is None:
            raise IllegalTransition("RunLifecycle", self.phase, event)
        if row.refuse is not None:
            raise row.refuse(
                f"the run has already ended (phase {self.phase.value}); there is nothing to {event.name.lower()}"
            )
        effects = row.handler(self, arg) if row.handler is not None else _NONE
        if row.then is not None:
            self.phase = row.then
        return effects

    def __repr__(self) -> str:
        return f"RunLifecycle({self.phase.name}, subscribers={self.subscribers}, cancel={self.cancel})"


_LIVE_OR_FINISHING: Final = frozenset((*_LIVE, RunPhase.FINISHING))
_OVER: Final = frozenset((RunPhase.FINISHED, RunPhase.LINGERING, RunPhase.DISCARDED))


# --------------------------------------------------------------------------- the gateway


class GatewayPhase(enum.Enum):
    OPEN = "open"  # new runs are admitted
    DRAINING = "draining"  # new runs refused (503); running ones end by themselves
    CLOSED = "closed"  # shutting down: running runs are cancelled, no timers armed


class GatewayEvent(enum.Enum):
    DRAIN = enum.auto()
    SHUTDOWN = enum.auto()


#: The registry's admission: (phase, event) -> next phase. Both events are
#: idempotent; nothing reopens a gateway.
GATEWAY_TRANSITIONS: Final[dict[tuple[GatewayPhase, GatewayEvent], GatewayPhase]] = {
    (GatewayPhase.OPEN, GatewayEvent.DRAIN): GatewayPhase.DRAINING,
    (GatewayPhase.DRAINING, GatewayEvent.DRAIN): GatewayPhase.DRAINING,
    (GatewayPhase.CLOSED, GatewayEvent.DRAIN): GatewayPhase.CLOSED,
    (GatewayPhase.OPEN, GatewayEvent.SHUTDOWN): GatewayPhase.CLOSED,
    (GatewayPhase.DRAINING, GatewayEvent.SHUTDOWN): GatewayPhase.CLOSED,
    (GatewayPhase.CLOSED, GatewayEvent.SHUTDOWN): GatewayPhase.CLOSED,
}


class GatewayLifecycle:
    """Whether the registry admits new runs (see :data:`GATEWAY_TRANSITIONS`)."""

    __slots__ = ("phase",)

    def __init__(self) -> None:
        self.phase = GatewayPhase.OPEN

    @property
    def admits(self) -> bool:
        return self.phase is GatewayPhase.OPEN

    @property
    def closed(self) -> bool:
        return self.phase is GatewayPhase.CLOSED

    def fire(self, event: GatewayEvent) -> GatewayPhase:
        """Move on ``event``; returns the new phase. Raises IllegalTransition for a pair the table lacks."""
        then = GATEWAY_TRANSITIONS.get((self.phase, event))
        if then is None:  # pragma: no cover - the table is total
            raise IllegalTransition("GatewayLifecycle", self.phase, event)
        self.phase = then
        return then
