"""The run lifecycle machine on its own: every row of the table, every refused
pair, and a property over random event sequences (no event loop, no registry)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.transports.run_lifecycle import (
    GATEWAY_TRANSITIONS,
    RUN_TRANSITIONS,
    TRUNCATED,
    Effect,
    GatewayEvent,
    GatewayLifecycle,
    GatewayPhase,
    IllegalTransition,
    RunEvent,
    RunFinishedError,
    RunLifecycle,
    RunPhase,
)
from tests.hypothesis_profiles import scaled

E, P, V = Effect, RunPhase, RunEvent


def machine(phase: RunPhase = P.CREATED, *, subscribers: int = 0, **kw: object) -> RunLifecycle:
    m = RunLifecycle(grace_seconds=30.0, disconnect_grace_seconds=0.0, **kw)  # type: ignore[arg-type]
    m.phase = phase
    m.subscribers = subscribers
    return m


def state(m: RunLifecycle) -> tuple[object, ...]:
    return tuple(getattr(m, name) for name in RunLifecycle.__slots__)


# -- the main paths, effect by effect -------------------------------------------------------


def test_a_run_that_ends_by_itself() -> None:
    m = machine()
    assert m.fire(V.PRODUCER_STARTED) == () and m.phase is P.OPEN
    assert m.fire(V.STARTED_LOGGED) == () and m.phase is P.STREAMING
    assert m.fire(V.TERMINAL_LOGGED) == () and m.phase is P.ENDED and m.terminal_code is None
    assert m.fire(V.PRODUCER_ENDED) == (E.FINISH_LOG,) and m.phase is P.FINISHING
    assert m.fire(V.LOG_FINISHED) == (E.RUN_ENDED, E.START_RETENTION, E.QUEUE) and m.phase is P.FINISHED
    assert m.fire(V.RETENTION_EXPIRED) == (E.UNQUEUE, E.DISCARD) and m.phase is P.DISCARDED
    assert m.finished and not m.live


def test_an_agent_failing_before_run_started_gets_the_prelude_and_one_run_error() -> None:
    m = machine(P.OPEN)
    assert m.fire(V.PRODUCER_ENDED, "agent_error") == (E.APPEND_STARTED, E.APPEND_ERROR, E.FINISH_LOG)
    assert m.terminal_code == "agent_error"
    streaming = machine(P.STREAMING)
    assert streaming.fire(V.PRODUCER_ENDED, "agent_error") == (E.APPEND_ERROR, E.FINISH_LOG)
    ended = machine(P.ENDED)  # the agent's own terminal event stands
    assert ended.fire(V.PRODUCER_ENDED, "agent_error") == (E.FINISH_LOG,) and ended.terminal_code is None


def test_a_producer_that_just_stops_gets_a_truncated_run_error() -> None:
    # found by the property below: an unverified agent ending with no terminal event
    m = machine(P.OPEN)
    assert m.fire(V.PRODUCER_ENDED) == (E.APPEND_STARTED, E.APPEND_ERROR, E.FINISH_LOG)
    assert m.terminal_code == TRUNCATED
    streaming = machine(P.STREAMING)
    assert streaming.fire(V.PRODUCER_ENDED) == (E.APPEND_ERROR, E.FINISH_LOG) and streaming.terminal_code == TRUNCATED


def test_the_second_run_of_a_stream_is_streaming_again_and_gets_its_error() -> None:
    m = machine(P.ENDED)
    m.fire(V.STARTED_LOGGED)
    assert m.phase is P.STREAMING
    assert m.fire(V.PRODUCER_ENDED, "agent_error") == (E.APPEND_ERROR, E.FINISH_LOG)


def test_cancel_before_the_producer_ran_ends_it_at_once_with_the_reason() -> None:
    m = machine()
    assert m.fire(V.CANCEL, ("shutdown", "bye")) == ()  # no task step ran: nothing to cancel yet
    assert m.fire(V.PRODUCER_STARTED) == (E.END_AT_ONCE,)
    assert m.fire(V.PRODUCER_ENDED) == (E.APPEND_STARTED, E.APPEND_ERROR, E.FINISH_LOG)
    assert m.terminal_code == "shutdown"


def test_cancel_of_a_live_run_cancels_the_producer_once_first_reason_wins() -> None:
    m = machine(P.STREAMING)
    assert m.fire(V.CANCEL, ("cancelled", "by the client")) == (E.CANCEL_PRODUCER,)
    assert m.fire(V.CANCEL, ("shutdown", "later")) == ()
    assert m.cancel == ("cancelled", "by the client") and not m.cancellable


@pytest.mark.parametrize("phase", [P.FINISHING, P.FINISHED, P.LINGERING, P.DISCARDED])
def test_cancel_of_an_ended_run_is_a_409(phase: RunPhase) -> None:
    m = machine(phase)
    before = state(m)
    with pytest.raises(RunFinishedError) as info:
        m.fire(V.CANCEL, ("cancelled", "x"))
    assert isinstance(info.value, RemoteInputError) and info.value.http_status == 409
    assert state(m) == before


def test_last_subscriber_leaving_arms_the_grace_by_what_it_declared() -> None:
    m = machine(P.STREAMING, subscribers=2)
    assert m.fire(V.UNSUBSCRIBE, True) == ()  # another one still reads
    assert m.fire(V.UNSUBSCRIBE, True) == (E.ARM_GRACE,) and m.grace_delay == 30.0
    assert m.grace is not None and m.grace[0] == "abandoned"
    assert m.fire(V.SUBSCRIBE) == (E.STOP_GRACE,) and m.grace is None
    # not resumable, disconnect grace 0: cancelled at once
    assert m.fire(V.UNSUBSCRIBE, False) == (E.CANCEL_PRODUCER,) and m.cancel is not None
    assert m.cancel[0] == "disconnected"


def test_grace_expiry_cancels_and_with_a_shared_log_asks_for_remote_readers_first() -> None:
    m = machine(P.STREAMING, subscribers=1)
    m.fire(V.UNSUBSCRIBE, True)
    assert m.fire(V.GRACE_EXPIRED) == (E.CANCEL_PRODUCER,) and m.cancel is not None and m.cancel[0] == "abandoned"
    shared = machine(P.STREAMING, subscribers=1, shared=True)
    shared.fire(V.UNSUBSCRIBE, True)
    assert shared.fire(V.GRACE_EXPIRED) == (E.CHECK_REMOTE_READERS,)
    assert shared.fire(V.REMOTE_READERS, 10.0) == (E.ARM_GRACE,) and shared.grace_delay == 20.0
    assert shared.fire(V.GRACE_EXPIRED) == (E.CHECK_REMOTE_READERS,)
    assert shared.fire(V.REMOTE_READERS, None) == (E.CANCEL_PRODUCER,)


def test_a_remote_answer_after_a_subscriber_came_back_changes_nothing() -> None:
    m = machine(P.STREAMING, subscribers=1, shared=True)
    m.fire(V.UNSUBSCRIBE, True)
    m.fire(V.GRACE_EXPIRED)
    m.fire(V.SUBSCRIBE)
    m.fire(V.UNSUBSCRIBE, True)  # a new grace period is armed
    assert m.fire(V.REMOTE_READERS, None) == () and m.cancel is None and m.grace is not None


def test_a_finished_run_still_read_lingers_past_its_retention_and_goes_with_its_last_reader() -> None:
    m = machine(P.FINISHING, subscribers=1)
    assert m.fire(V.LOG_FINISHED) == (E.RUN_ENDED, E.START_RETENTION)  # read: not in the eviction queue
    assert m.fire(V.SUBSCRIBE) == ()
    assert m.fire(V.UNSUBSCRIBE) == ()
    assert m.fire(V.RETENTION_EXPIRED) == () and m.phase is P.LINGERING
    assert m.fire(V.UNSUBSCRIBE) == (E.DISCARD,) and m.phase is P.DISCARDED


def test_the_eviction_queue_holds_only_unread_runs() -> None:
    m = machine(P.FINISHED)
    assert m.fire(V.SUBSCRIBE) == (E.UNQUEUE,)
    with pytest.raises(IllegalTransition):
        m.fire(V.EVICTED)
    assert m.fire(V.UNSUBSCRIBE) == (E.QUEUE,)
    assert m.fire(V.EVICTED) == (E.STOP_RETENTION, E.DISCARD) and m.phase is P.DISCARDED


def test_a_follower_only_counts_its_readers() -> None:
    m = RunLifecycle(following=True)
    assert m.fire(V.SUBSCRIBE) == (E.FOLLOW,)
    assert m.fire(V.UNSUBSCRIBE) == (E.UNFOLLOW,) and m.phase is P.FOLLOWING
    with pytest.raises(IllegalTransition):
        m.fire(V.CANCEL, ("cancelled", "x"))


def test_unsubscribe_without_a_subscriber_is_refused() -> None:
    for phase in (P.STREAMING, P.FINISHED, P.LINGERING, P.FOLLOWING):
        m = machine(phase)
        before = state(m)
        with pytest.raises(IllegalTransition, match="UNSUBSCRIBE"):
            m.fire(V.UNSUBSCRIBE, True)
        assert state(m) == before


# -- the table, exhaustively ----------------------------------------------------------------

#: What each row needs to be fired from a sensible state (the handler checks the data).
_ARGS: dict[RunEvent, object] = {V.CANCEL: ("cancelled", "x"), V.UNSUBSCRIBE: True, V.TERMINAL_LOGGED: None}


@pytest.mark.parametrize("key", list(RUN_TRANSITIONS), ids=lambda k: f"{k[0].name}-{k[1].name}")
def test_every_row_of_the_table(key: tuple[RunPhase, RunEvent]) -> None:
    phase, event = key
    row = RUN_TRANSITIONS[key]
    m = machine(phase, subscribers=1 if event is V.UNSUBSCRIBE else 0)
    if row.refuse is not None:
        before = state(m)
        with pytest.raises(row.refuse):
            m.fire(event, _ARGS.get(event))
        assert state(m) == before and not m.accepts(event)
        return
    assert m.accepts(event)
    effects = m.fire(event, _ARGS.get(event))
    assert all(isinstance(e, Effect) for e in effects)
    if row.then is not None:
        assert m.phase is row.then
    assert m.subscribers >= 0


_MISSING = [(p, e) for p in RunPhase for e in RunEvent if (p, e) not in RUN_TRANSITIONS]


@pytest.mark.parametrize("key", _MISSING, ids=lambda k: f"{k[0].name}-{k[1].name}")
def test_every_pair_missing_from_the_table_is_refused_and_changes_nothing(key: tuple[RunPhase, RunEvent]) -> None:
    phase, event = key
    m = machine(phase, subscribers=1)
    before = state(m)
    with pytest.raises(IllegalTransition) as info:
        m.fire(event, _ARGS.get(event))
    assert isinstance(info.value, UsageError)
    assert event.name in info.value.message and phase.name in info.value.message
    assert state(m) == before and not m.accepts(event)


def test_the_gateway_admits_until_drain_or_shutdown_and_never_reopens() -> None:
    assert {p for p, _ in GATEWAY_TRANSITIONS} == set(GatewayPhase)
    g = GatewayLifecycle()
    assert g.admits and not g.closed
    assert g.fire(GatewayEvent.DRAIN) is GatewayPhase.DRAINING and not g.admits and not g.closed
    assert g.fire(GatewayEvent.SHUTDOWN) is GatewayPhase.CLOSED and g.closed
    assert g.fire(GatewayEvent.DRAIN) is GatewayPhase.CLOSED


# -- a property over random event sequences --------------------------------------------------

_event_args = st.one_of(
    st.tuples(st.just(V.CANCEL), st.sampled_from([("cancelled", "c"), ("shutdown", "s")])),
    st.tuples(st.just(V.UNSUBSCRIBE), st.booleans()),
    st.tuples(st.just(V.TERMINAL_LOGGED), st.sampled_from([None, "boom"])),
    st.tuples(st.just(V.PRODUCER_ENDED), st.sampled_from([None, "agent_error"])),
    st.tuples(st.just(V.REMOTE_READERS), st.sampled_from([None, 1.0, 100.0])),
    st.tuples(st.sampled_from(list(RunEvent)), st.none()),
)


# twice the profile: sequences of up to 40 of the lifecycle's events, whose rare orders (a reader
# leaving during the grace, a terminal event after the producer ended) are the invariants' cases
@settings(max_examples=scaled(2), deadline=None)
@given(st.lists(_event_args, max_size=40), st.booleans(), st.sampled_from([0.0, 5.0]))
def test_random_event_sequences_keep_the_invariants(
    events: list[tuple[RunEvent, object]], shared: bool, disconnect_grace: float
) -> None:
    m = RunLifecycle(grace_seconds=30.0, disconnect_grace_seconds=disconnect_grace, shared=shared)
    log: list[str] = []  # the lifecycle events of the simulated log
    queued = False
    grace_armed = False
    cancels = discards = 0
    for event, arg in events:
        before = copy.copy(state(m))
        try:
            effects = m.fire(event, arg)
        except (IllegalTransition, RunFinishedError):
            assert state(m) == before  # a refusal changes nothing
            continue
        if event is V.STARTED_LOGGED:
            log.append("started")
        elif event is V.TERMINAL_LOGGED:
            log.append("terminal")
        for effect in effects:
            if effect is E.APPEND_STARTED:
                log.append("started")
            elif effect is E.APPEND_ERROR:
                log.append("terminal")
            elif effect is E.CANCEL_PRODUCER:
                cancels += 1
            elif effect is E.QUEUE:
                assert not queued and m.subscribers == 0
                queued = True
            elif effect is E.UNQUEUE:
                queued = False
            elif effect is E.DISCARD:
                discards += 1
                assert m.subscribers == 0
            elif effect is E.ARM_GRACE:
                assert m.subscribers == 0 and m.grace is not None and m.grace_delay > 0
                grace_armed = True
            elif effect is E.STOP_GRACE:
                grace_armed = False
        assert m.subscribers >= 0
        assert cancels <= 1 and discards <= 1
        if queued:
            assert m.phase is P.FINISHED and m.subscribers == 0
        if m.grace is None:
            grace_armed = False
        if grace_armed:
            assert m.live and m.cancel is None
        if m.phase in (P.FINISHED, P.LINGERING, P.DISCARDED):
            # exactly one terminal event ends the log, after the (last) RUN_STARTED
            assert log and log[-1] == "terminal"
        if m.phase is P.DISCARDED:
            assert not queued
