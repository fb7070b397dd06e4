"""The run registry directly: subscriptions, keep-alive clock, cancellation, limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import Event, RunAgentInput, RunStartedEvent, TextMessageChunkEvent
from agui_engine.transports.admission import RunExistsError, ServerBusyError
from agui_engine.transports.clock import ManualClock
from agui_engine.transports.event_ids import resume_cursor
from agui_engine.transports.eventlog import CursorExpiredError, InMemoryEventLog, UnknownRunError
from agui_engine.transports.input_errors import InvalidInputError
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.run_lifecycle import RunFinishedError
from agui_engine.transports.runs import RunRegistry

from ..waiting import eventually
from .scripted import ScriptedAgent, make_input


async def drain(registry: RunRegistry, run_id: str, after: int = 0) -> list:
    run = registry.get(run_id)
    out = []
    async with registry.subscribe(run, after) as sub:
        async for sl in sub.events(timeout=5):
            if sl is not None:
                out += [decode_event(p) for p in sl.payloads]
    return out


async def test_every_subscriber_gets_the_whole_run_and_late_ones_from_their_cursor() -> None:
    reg = RunRegistry(ScriptedAgent(deltas=10, pause=0.001))
    run = await reg.start(make_input("r"))
    a, b = await asyncio.gather(drain(reg, "r"), drain(reg, "r"))
    late = await drain(reg, "r", after=5)
    assert a == b == [e async for e in ScriptedAgent(deltas=10).run(make_input("r"))]
    assert late == a[5:]
    assert run.finished and run.terminal_code is None and reg.active == 0


async def test_keepalive_returns_none_when_idle_and_not_when_busy() -> None:
    reg = RunRegistry(ScriptedAgent(deltas=2, silence=0.2))
    run = await reg.start(make_input("k"))
    results = []
    async with reg.subscribe(run) as sub:
        async for sl in sub.events(timeout=0.03):
            results.append(None if sl is None else len(sl.payloads))
    assert results.count(None) >= 3
    assert sum(r for r in results if r) == 10


async def test_chunks_are_expanded_by_the_verifier_before_they_are_logged() -> None:
    class Chunky:
        async def run(self, input: RunAgentInput):  # type: ignore[no-untyped-def]
            from agui_engine.protocol.events import RunFinishedEvent, RunStartedEvent

            yield RunStartedEvent(thread_id="t", run_id=input.run_id)
            yield TextMessageChunkEvent(message_id="m", role="assistant", delta="hi")
            yield RunFinishedEvent(thread_id="t", run_id=input.run_id)

    reg = RunRegistry(Chunky())
    await reg.start(make_input("c"))
    types = [e.type.value for e in await drain(reg, "c")]
    assert types == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]


async def test_limits_duplicates_and_bad_run_ids() -> None:
    reg = RunRegistry(ScriptedAgent(hang=True), options=RegistryOptions(max_runs=1))
    await reg.start(make_input("a"))
    with pytest.raises(ServerBusyError) as ei:
        await reg.start(make_input("b"))
    assert ei.value.http_status == 503 and ei.value.retry_after >= 1
    with pytest.raises(RunExistsError):  # 409 before 503: the more precise answer
        await reg.start(make_input("a"))
    with pytest.raises(InvalidInputError):
        await RunRegistry(ScriptedAgent()).start(make_input("bad\nid"))
    with pytest.raises(UnknownRunError):
        reg.get("zzz")
    await reg.shutdown(timeout=2)
    with pytest.raises(ServerBusyError):
        await reg.start(make_input("c"))
    with pytest.raises(UsageError):
        RunRegistry(object())  # type: ignore[arg-type]


async def test_cancel_closes_the_generator_and_ends_with_run_error() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    reg = RunRegistry(agent)
    started = await reg.start(make_input("x"))
    await eventually(lambda: started.head >= 3, what="the first text delta")  # the agent now hangs inside its loop
    run = await reg.cancel("x")
    assert "x" in agent.cancelled and run.terminal_code == "cancelled"
    events = await drain(reg, "x")
    assert events[-1].type.value == "RUN_ERROR" and events[-1].code == "cancelled"
    with pytest.raises(RunFinishedError):
        await reg.cancel("x")


async def test_a_subscriber_lapped_by_the_producer_gets_cursor_expired() -> None:
    reg = RunRegistry(ScriptedAgent(deltas=50), log=InMemoryEventLog(max_events=8))
    run = await reg.start(make_input("s"))
    sub = reg.subscribe(run)
    await run.wait_finished()
    with pytest.raises(CursorExpiredError):
        await sub.next(timeout=1)
    sub.close()


async def test_retention_discards_finished_runs() -> None:
    log = InMemoryEventLog()
    clock = ManualClock()
    options = RegistryOptions(retention_seconds=60, max_retained=1)
    reg = RunRegistry(ScriptedAgent(deltas=1), log=log, options=options, clock=clock)
    r1 = await reg.start(make_input("one"))
    await r1.wait_finished()
    r2 = await reg.start(make_input("two"))
    await r2.wait_finished()
    with pytest.raises(UnknownRunError):
        reg.get("one")  # over max_retained: dropped at once
    assert len(log) == 1  # its log too: the in-memory log is discarded without a task
    clock.advance(59.9)
    assert reg.get("two") is r2  # still within retention
    clock.advance(0.1)
    with pytest.raises(UnknownRunError):
        reg.get("two")  # retention expired
    assert len(log) == 0 and clock.pending == 0


async def test_the_grace_timer_runs_on_the_registry_clock() -> None:
    clock = ManualClock()
    agent = ScriptedAgent(deltas=1, hang=True)
    reg = RunRegistry(agent, options=RegistryOptions(grace_seconds=30), clock=clock)
    run = await reg.start(make_input("g"))
    reg.subscribe(run).close()  # the last subscriber leaves: the grace timer starts
    clock.advance(29)
    assert run.finished is False
    reg.subscribe(run).close()  # a reconnect within the grace period restarts it
    clock.advance(29)
    assert run.finished is False
    clock.advance(1)
    await asyncio.wait_for(run.wait_finished(), 5)
    assert run.terminal_code == "abandoned"


def test_registry_options_reject_values_out_of_range() -> None:
    for bad in ({"max_runs": 0}, {"grace_seconds": -1}, {"retention_seconds": float("nan")}, {"max_retained": -1}):
        with pytest.raises(UsageError):
            RegistryOptions(**bad)  # type: ignore[arg-type]


def test_resume_cursor() -> None:
    from agui_engine.transports.eventlog import BadCursorError

    assert resume_cursor("run:with:colons:12") == ("run:with:colons", 12)
    for bad in ("12", "run:", "run:x", ":3", "r:" + "9" * 30):
        with pytest.raises(BadCursorError):
            resume_cursor(bad)
    with pytest.raises(BadCursorError):
        resume_cursor("a:1", "b")


async def test_a_resumed_run_may_report_the_result_of_a_tool_call_from_an_earlier_run() -> None:
    """Human in the loop: run 1 ended with a client tool call; run 2 carries the
    call in its messages and its agent reports the result. The gateway's verifier
    knows the run's input, so the result is accepted, while a result for a call
    that is in neither the input nor the stream is still refused."""
    from agui_engine.protocol.events import (
        AssistantMessage,
        FunctionCall,
        RunFinishedEvent,
        RunStartedEvent,
        ToolCall,
        ToolCallResultEvent,
        UserMessage,
    )

    class Resuming:
        async def run(self, input: RunAgentInput):  # type: ignore[no-untyped-def]
            yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
            yield ToolCallResultEvent(message_id="res-1", tool_call_id=input.forwarded_props["call"], content="42")
            yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)

    earlier = AssistantMessage(
        id="a1", tool_calls=[ToolCall(id="call-1", function=FunctionCall(name="ask_user", arguments="{}"))]
    )
    reg = RunRegistry(Resuming())
    for run_id, call in (("hitl", "call-1"), ("stray", "call-unknown")):
        inp = RunAgentInput(
            thread_id="t", run_id=run_id, messages=[UserMessage(id="u1", content="hi"), earlier],
            forwarded_props={"call": call},
        )
        await reg.start(inp)
    ok, stray = await drain(reg, "hitl"), await drain(reg, "stray")
    assert [e.type for e in ok] == ["RUN_STARTED", "TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert [e.type for e in stray][-1] == "RUN_ERROR" and reg.get("stray").terminal_code != "cancelled"


async def test_a_finished_run_still_being_read_is_not_evicted() -> None:
    # max_retained evicts the oldest finished run -- never one whose subscriber has
    # not read its end yet; it queues for eviction once its last reader leaves.
    log = InMemoryEventLog()
    reg = RunRegistry(ScriptedAgent(deltas=1), log=log, options=RegistryOptions(max_retained=1))
    r1 = await reg.start(make_input("one"))
    sub = reg.subscribe(r1)
    await r1.wait_finished()
    for rid in ("two", "three"):
        run = await reg.start(make_input(rid))
        await run.wait_finished()
    assert reg.get("one") is r1
    payloads: list[bytes] = []
    async with sub:
        async for sl in sub.events():
            assert sl is not None
            payloads += sl.payloads
    assert b'"RUN_FINISHED"' in payloads[-1]
    assert reg.get("one") is r1  # now queued behind nothing older: "three" went first
    with pytest.raises(UnknownRunError):
        reg.get("three")
    run = await reg.start(make_input("four"))
    await run.wait_finished()
    with pytest.raises(UnknownRunError):
        reg.get("one")
    assert len(log) == 1
    await reg.shutdown()


async def test_an_async_generator_function_is_served_like_an_agent_object() -> None:
    async def agent(input: RunAgentInput):  # type: ignore[no-untyped-def]
        async for event in ScriptedAgent(deltas=2).run(input):
            yield event

    reg = RunRegistry(agent)
    await reg.start(make_input("f"))
    assert await drain(reg, "f") == [e async for e in ScriptedAgent(deltas=2).run(make_input("f"))]


@pytest.mark.parametrize(("bad", "index", "shown"), [({"type": "TEXT_MESSAGE_CONTENT"}, 3, "a dict"), ("hi", 0, "a str"),
                                                      (None, 3, "None")])
async def test_a_value_that_is_not_an_event_ends_the_run_naming_its_type_and_index(
    bad: object, index: int, shown: str
) -> None:
    """Nothing unchecked goes out, there is one RUN_STARTED, and what came before
    is sent and verifies."""
    from agui_engine.protocol.verify import Verifier

    closed: list[bool] = []

    async def agent(input: RunAgentInput):  # type: ignore[no-untyped-def]
        try:
            n = 0
            async for event in ScriptedAgent(deltas=5).run(input):
                if n == index:
                    yield bad
                yield event
                n += 1
        finally:
            closed.append(True)

    reg = RunRegistry(agent)
    await reg.start(make_input("d"))
    events = await drain(reg, "d")
    assert [e.type.value for e in events].count("RUN_STARTED") == 1
    assert events[:-1] == [e async for e in ScriptedAgent(deltas=5).run(make_input("d"))][: max(index, 1)]
    last = events[-1]
    assert last.type.value == "RUN_ERROR" and last.code == "not_an_event"
    assert last.message.startswith(f"the agent yielded {shown}") and f"at event index {index}" in last.message
    verifier = Verifier()
    for e in events:
        verifier.feed(e)
    verifier.close()
    assert closed == [True]


async def test_an_async_run_without_yield_is_a_clear_run_error() -> None:
    class Forgot:
        async def run(self, input: RunAgentInput) -> list:  # type: ignore[type-arg]
            return []

    reg = RunRegistry(Forgot())
    await reg.start(make_input("c"))
    events = await drain(reg, "c")
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "usage_error"
    assert "returned coroutine, not an async iterator" in events[-1].message
    assert "async def run(self, input): ... yield event" in events[-1].message


def test_every_server_refuses_a_non_agent_saying_what_it_got() -> None:
    from agui_engine.transports.gateway import GatewayAgent
    from agui_engine.transports.sse_server import create_app

    with pytest.raises(UsageError, match=r"^RunRegistry\(agent\): got a str"):
        RunRegistry("embedded")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^create_app\(agent\): got the class ScriptedAgent; pass an instance"):
        create_app(ScriptedAgent)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^GatewayAgent\(agent\): got a dict"):
        GatewayAgent({})  # type: ignore[arg-type]


async def test_start_websocket_server_and_serve_stdio_take_an_agent_function() -> None:
    from agui_engine.transports.stdio_server import serve_stdio
    from agui_engine.transports.websocket_client import WebSocketAgent
    from agui_engine.transports.websocket_server import start_websocket_server

    async def agent(input: RunAgentInput):  # type: ignore[no-untyped-def]
        async for event in ScriptedAgent(deltas=1).run(input):
            yield event

    async with await start_websocket_server(agent) as srv:
        got = [e async for e in WebSocketAgent(srv.url).run(make_input("w"))]
    assert got[-1].type.value == "RUN_FINISHED"
    with pytest.raises(UsageError, match=r"^serve_stdio\(agent\): got an int \(3\)"):
        await serve_stdio(3)  # type: ignore[arg-type]


async def test_a_plain_subscriber_leaving_stops_the_run_a_resumable_one_gets_the_grace_period() -> None:
    """What a client's abort means: a subscriber that did not declare it would
    resume (the official @ag-ui/client) stops the run when it goes, so the model
    stops spending; one that resumes keeps the run for grace_seconds."""
    agent = ScriptedAgent(deltas=3, hang=True)
    reg = RunRegistry(agent, options=RegistryOptions(grace_seconds=60))
    plain = await reg.start(make_input("plain"))
    kept = await reg.start(make_input("kept"))
    await eventually(lambda: plain.head >= 3 and kept.head >= 3, what="both runs to reach their first delta")
    reg.subscribe(plain, resumable=False).close()
    reg.subscribe(kept, resumable=True).close()
    await plain.wait_finished()
    assert plain.terminal_code == "disconnected" and "plain" in agent.cancelled
    assert kept.finished is False and "kept" not in agent.cancelled
    events = await drain(reg, "plain")
    assert events[-1].type.value == "RUN_ERROR" and "did not declare it would resume" in events[-1].message
    # another subscriber still reading keeps a run alive whoever leaves
    both = await reg.start(make_input("both"))
    reader = reg.subscribe(both, resumable=True)
    reg.subscribe(both, resumable=False).close()
    assert both.finished is False
    reader.close()
    assert both.finished is False  # the last to leave was resumable: grace
    await reg.shutdown(timeout=2)


async def test_a_disconnect_grace_delays_the_stop_and_a_return_cancels_it() -> None:
    agent = ScriptedAgent(deltas=3, hang=True)
    clock = ManualClock()
    reg = RunRegistry(agent, options=RegistryOptions(disconnect_grace_seconds=2), clock=clock)
    run = await reg.start(make_input("g"))
    reg.subscribe(run, resumable=False).close()
    clock.advance(1.9)
    back = reg.subscribe(run, resumable=False)  # came back within the grace: the timer stops
    clock.advance(10)
    assert run.finished is False
    back.close()
    clock.advance(1.9)
    assert run.finished is False
    clock.advance(0.1)
    await asyncio.wait_for(run.wait_finished(), 5)
    assert run.terminal_code == "disconnected"
    with pytest.raises(UsageError):
        RegistryOptions(disconnect_grace_seconds=-1)


async def test_an_unverified_agent_that_just_stops_ends_with_one_truncated_run_error() -> None:
    async def stops(input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)

    reg = RunRegistry(stops, options=RegistryOptions(verify=False))
    run = await reg.start(make_input("cut"))
    events = await drain(reg, "cut")
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "truncated" and run.terminal_code == "truncated"
