"""Write coalescing (subscription.WriteWindow, WRITE_COALESCE_SECONDS): a stream's events that
arrive within the window of its last write join one write; the first after a quiet spell goes
at once; order is kept; cancelling mid-window loses nothing already accepted.

No wall-clock threshold anywhere: the window runs on a ManualClock that only the test moves,
and what is counted is the hand-outs (one hand-out is one write of the transports' pumps).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.transports.clock import ManualClock
from agui_engine.transports.eventlog import LogSlice
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry
from agui_engine.transports.subscription import WRITE_COALESCE_SECONDS, Subscription, WriteWindow

from ..waiting import eventually
from .scripted import make_input

WINDOW = WRITE_COALESCE_SECONDS


class Fed:
    """An agent whose events the test hands in one at a time (each after an await, as a
    model's tokens arrive); ``None`` ends the stream."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue()

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        while (event := await self.queue.get()) is not None:
            yield event

    def feed(self, *events: BaseEvent | None) -> None:
        for event in events:
            self.queue.put_nowait(event)


def token(n: int) -> TextMessageContentEvent:
    return TextMessageContentEvent(message_id="m", delta=f"t{n} ")


async def started(clock: ManualClock, run_id: str = "r") -> tuple[Fed, RunRegistry, Subscription]:
    agent = Fed()
    registry = RunRegistry(agent)
    registry.write_window = WriteWindow(WINDOW, clock)
    run = await registry.start(make_input(run_id))
    return agent, registry, registry.subscribe(run)


async def in_window(clock: ManualClock, tokens: int) -> tuple[Fed, RunRegistry, Subscription, asyncio.Future[LogSlice | None]]:
    """A run whose first write (RUN_STARTED, TEXT_MESSAGE_START) went out, then ``tokens``
    tokens accepted while the reader's next write waits for the window (``pending``)."""
    agent, registry, sub = await started(clock)
    run = sub.run
    agent.feed(RunStartedEvent(thread_id="thread-1", run_id="r"), TextMessageStartEvent(message_id="m", role="assistant"))
    await eventually(lambda: run.head == 2)
    first = await sub.next()
    assert first is not None and len(first.payloads) == 2  # both at once: the first write waits for nothing
    pending = asyncio.ensure_future(sub.next())
    agent.feed(*(token(n) for n in range(1, tokens + 1)))
    await eventually(lambda: run.head == 2 + tokens)
    return agent, registry, sub, pending


def deltas(sl: LogSlice) -> list[str]:
    return [getattr(decode_event(p), "delta", type(decode_event(p)).__name__) for p in sl.payloads]


async def test_a_lone_event_is_handed_out_without_waiting_for_the_window() -> None:
    clock = ManualClock()
    agent, registry, sub = await started(clock)
    agent.feed(RunStartedEvent(thread_id="thread-1", run_id="r"))
    first = await sub.next()  # the clock never moved: no window was waited for
    assert first is not None and [type(decode_event(p)) for p in first.payloads] == [RunStartedEvent]
    # A quiet spell (the window passes with nothing to write), then one token: at once again.
    clock.advance(WINDOW)
    agent.feed(TextMessageStartEvent(message_id="m", role="assistant"))
    second = await sub.next()
    assert second is not None and second.first_seq == 2 and len(second.payloads) == 1
    agent.feed(TextMessageEndEvent(message_id="m"), RunFinishedEvent(thread_id="thread-1", run_id="r"), None)
    clock.advance(WINDOW)
    rest = [sl async for sl in sub.events()]
    assert sum(len(sl.payloads) for sl in rest if sl is not None) == 2
    sub.close()


async def test_a_burst_within_the_window_joins_one_write_in_order() -> None:
    clock = ManualClock()
    # fifty tokens, each after an await, inside the window of the first write
    agent, registry, sub, pending = await in_window(clock, 50)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not pending.done()  # held for the window: nothing was written per token
    clock.advance(WINDOW)
    burst = await pending
    assert burst is not None and burst.first_seq == 3 and deltas(burst) == [f"t{n} " for n in range(1, 51)]
    agent.feed(TextMessageEndEvent(message_id="m"), RunFinishedEvent(thread_id="thread-1", run_id="r"), None)
    clock.advance(WINDOW)
    last = [sl async for sl in sub.events()]
    assert [s for sl in last if sl is not None for s in deltas(sl)] == ["TextMessageEndEvent", "RunFinishedEvent"]
    sub.close()


async def test_without_a_window_every_ready_batch_goes_at_once() -> None:
    agent = Fed()
    registry = RunRegistry(agent, options=RegistryOptions(write_coalesce_seconds=0))
    assert registry.write_window.seconds == 0
    run = await registry.start(make_input("z"))
    async with registry.subscribe(run) as sub:
        agent.feed(RunStartedEvent(thread_id="thread-1", run_id="z"))
        assert (await sub.next()) is not None
        agent.feed(TextMessageStartEvent(message_id="m", role="assistant"))
        nxt = await sub.next()  # the clock is the loop's: no wait, since there is no window
        assert nxt is not None and nxt.first_seq == 2
        agent.feed(None)


async def test_a_reader_cancelled_mid_window_loses_nothing_already_accepted() -> None:
    clock = ManualClock()
    agent, registry, sub, pending = await in_window(clock, 10)
    run = sub.run
    pending.cancel()  # the client went away while its write waited for the window
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert sub.cursor == 2  # nothing was handed out, so nothing was lost
    # It comes back from its cursor (Last-Event-ID r:2): every accepted event, in order.
    again = registry.subscribe(run, sub.cursor)
    sub.close()
    resumed = await again.next()
    assert resumed is not None and resumed.first_seq == 3 and deltas(resumed) == [f"t{n} " for n in range(1, 11)]
    agent.feed(TextMessageEndEvent(message_id="m"), RunFinishedEvent(thread_id="thread-1", run_id="r"), None)
    clock.advance(WINDOW)
    assert [s for sl in [x async for x in again.events()] if sl is not None for s in deltas(sl)] == [
        "TextMessageEndEvent", "RunFinishedEvent"]
    again.close()


async def test_a_run_cancelled_mid_window_still_delivers_what_it_accepted_then_its_error() -> None:
    clock = ManualClock()
    agent, registry, sub, pending = await in_window(clock, 5)
    run = sub.run
    await registry.cancel("r")
    assert run.finished and not pending.done()  # the end waits out the window like any event
    clock.advance(WINDOW)
    got = [await pending]
    got += [sl async for sl in sub.events()]
    events = [decode_event(p) for sl in got if sl is not None for p in sl.payloads]
    assert [getattr(e, "delta", None) for e in events[:5]] == [f"t{n} " for n in range(1, 6)]
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "cancelled"
    assert len(events) == 6  # the five tokens, then RUN_ERROR
    sub.close()


def test_the_window_refuses_a_negative_or_nan_length() -> None:
    for bad in (-0.001, float("nan")):
        with pytest.raises(UsageError):
            WriteWindow(bad)
        with pytest.raises(UsageError):
            RegistryOptions(write_coalesce_seconds=bad)
