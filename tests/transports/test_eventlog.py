"""One conformance suite for every event log backend.

Each test gets a *writer* and a *reader* log (the ``logs`` fixture):

* ``memory``: one InMemoryEventLog (the default backend);
* ``async-only``: the same behind a wrapper that has only the EventLog protocol's
  async methods, so the run registry takes its async fallback paths (no
  ``appender`` / ``read_nowait`` / ``discard_nowait``);
* ``redis-owner``: one RedisEventLog writing and reading (the owning node, which
  serves reads from its mirror);
* ``redis-follower``: two RedisEventLogs on one real redis-server, the second
  reading what the first wrote (another gateway node).

Bounds are per backend where the backends differ by design (documented in
spec/transports.md 4.1): Redis bounds a run by events (MINID trimming), the
byte bound applies to the owner's copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.transports.eventlog import (
    READ_MAX_BYTES,
    READ_MAX_EVENTS,
    BadCursorError,
    CursorExpiredError,
    EventLog,
    InMemoryEventLog,
    LogSlice,
    UnknownRunError,
)
from agui_engine.transports.redislog import RedisEventLog
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry
from tests.hypothesis_profiles import at_most

from .scripted import ScriptedAgent, make_input

BACKENDS = ["memory", "async-only", "redis-owner", "redis-follower"]


class AsyncOnlyLog:
    """Only the EventLog protocol's async methods of another log (no fast paths)."""

    def __init__(self, inner: EventLog) -> None:
        self._inner = inner

    async def create(self, run_id: str) -> None:
        await self._inner.create(run_id)

    async def append(self, run_id: str, payload: bytes) -> int:
        return await self._inner.append(run_id, payload)

    async def read(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        return await self._inner.read(run_id, after, max_events=max_events, max_bytes=max_bytes)

    async def head(self, run_id: str) -> int:
        return await self._inner.head(run_id)

    async def wait(self, run_id: str, after: int, timeout: float | None) -> bool:
        return await self._inner.wait(run_id, after, timeout)

    async def finish(self, run_id: str) -> None:
        await self._inner.finish(run_id)

    async def discard(self, run_id: str) -> None:
        await self._inner.discard(run_id)


@dataclass
class Logs:
    kind: str
    writer: Any
    reader: Any

    @property
    def bytes_bounded(self) -> bool:
        return self.kind != "redis-follower"


@pytest.fixture(params=BACKENDS)
async def make_logs(
    request: pytest.FixtureRequest, redis_logs: Callable[..., Awaitable[RedisEventLog]]
) -> AsyncIterator[Callable[..., Awaitable[Logs]]]:
    kind = request.param

    async def make(**bounds: int) -> Logs:
        if kind == "memory":
            log: Any = InMemoryEventLog(**bounds)
            return Logs(kind, log, log)
        if kind == "async-only":
            log = AsyncOnlyLog(InMemoryEventLog(**bounds))
            return Logs(kind, log, log)
        writer = await redis_logs(**bounds)
        reader = writer if kind == "redis-owner" else await redis_logs(**bounds)
        return Logs(kind, writer, reader)

    yield make


async def test_every_backend_is_an_event_log(make_logs: Any) -> None:
    logs = await make_logs()
    assert isinstance(logs.writer, EventLog) and isinstance(logs.reader, EventLog)


async def test_append_numbers_from_one_and_reads_after_a_cursor(make_logs: Any) -> None:
    logs = await make_logs()
    w, r = logs.writer, logs.reader
    await w.create("r")
    seqs = [await w.append("r", f"e{i}".encode()) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    sl = await r.read("r", 2)
    assert (sl.first_seq, sl.payloads, sl.finished, sl.last_seq) == (3, [b"e2", b"e3", b"e4"], False, 5)
    assert (await r.read("r", 5)).payloads == []
    await w.finish("r")
    assert (await r.read("r", 5)).finished
    assert not (await r.read("r", 3, max_events=1)).finished
    assert await r.head("r") == 5


async def test_bounds_drop_the_oldest_and_an_old_cursor_is_refused_clearly(make_logs: Any) -> None:
    logs = await make_logs(max_events=3, max_bytes=1000)
    await logs.writer.create("r")
    for i in range(10):
        await logs.writer.append("r", b"x%d" % i)
    with pytest.raises(CursorExpiredError) as ei:
        await logs.reader.read("r", 5)
    assert ei.value.http_status == 410 and ei.value.first_available == 8
    assert "event 8" in str(ei.value)
    assert (await logs.reader.read("r", 7)).payloads == [b"x7", b"x8", b"x9"]


async def test_the_byte_bound(make_logs: Any) -> None:
    logs = await make_logs(max_events=100, max_bytes=10)
    await logs.writer.create("r")
    for _ in range(5):
        await logs.writer.append("r", b"abcd")
    big = b"y" * 50  # larger than the byte bound on its own: still delivered
    await logs.writer.append("r", big)
    assert (await logs.reader.read("r", 5)).payloads == [big]
    if logs.bytes_bounded:
        with pytest.raises(CursorExpiredError):
            await logs.reader.read("r", 3)
    else:  # a follower of Redis: bounded by events only
        assert (await logs.reader.read("r", 3)).payloads == [b"abcd", b"abcd", big]


async def test_read_batches_are_bounded_but_never_empty(make_logs: Any) -> None:
    logs = await make_logs()
    await logs.writer.create("r")
    for _ in range(10):
        await logs.writer.append("r", b"z" * 100)
    assert len((await logs.reader.read("r", 0, max_events=4)).payloads) == 4
    assert len((await logs.reader.read("r", 0, max_bytes=250)).payloads) == 2
    assert len((await logs.reader.read("r", 0, max_bytes=1)).payloads) == 1


async def test_misuse_and_unknown_runs(make_logs: Any) -> None:
    logs = await make_logs()
    w, r = logs.writer, logs.reader
    with pytest.raises(UnknownRunError) as unknown:
        await r.read("nope", 0)
    assert unknown.value.http_status == 404
    with pytest.raises(UnknownRunError):
        await r.head("nope")
    await w.create("r")
    with pytest.raises(UsageError):
        await w.create("r")
    with pytest.raises(BadCursorError):
        await r.read("r", 1)
    with pytest.raises(BadCursorError):
        await r.read("r", -1)
    await w.finish("r")
    await w.finish("r")  # idempotent
    with pytest.raises(UsageError):
        await w.append("r", b"x")
    await w.discard("r")
    await w.discard("r")
    with pytest.raises(UnknownRunError):
        await r.read("r", 0)


def test_in_memory_extras() -> None:
    async def scenario() -> None:
        log = InMemoryEventLog()
        await log.create("s")
        log.discard_nowait("s")
        log.discard_nowait("s")
        assert len(log) == 0

    asyncio.run(scenario())
    with pytest.raises(UsageError):
        InMemoryEventLog(max_events=0)
    with pytest.raises(UsageError):
        RedisEventLog("redis://127.0.0.1:1/0", max_bytes=0)
    with pytest.raises(UsageError):
        RedisEventLog()


@settings(max_examples=at_most(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 40), max_size=60),
    max_events=st.integers(1, 20),
    cursor=st.integers(0, 60),
    batch=st.integers(1, 7),
)
def test_property_reads_are_exact_suffixes_or_a_clear_refusal(
    redis_server: Any, sizes: list[int], max_events: int, cursor: int, batch: int
) -> None:
    """Every backend, the same answer: the exact suffix after the cursor, or
    CursorExpiredError naming a first event that really is the first one kept,
    or BadCursorError past the head. ``batch``: events appended per write tick."""

    async def scenario(kind: str) -> None:
        import uuid

        prefix = f"p{uuid.uuid4().hex[:8]}:"
        nodes: list[RedisEventLog] = []
        if kind == "memory":
            w: Any = InMemoryEventLog(max_events=max_events, max_bytes=10**9)
            r: Any = w
        else:
            w = RedisEventLog(redis_server.url, prefix=prefix, max_events=max_events)
            r = RedisEventLog(redis_server.url, prefix=prefix, max_events=max_events)
            nodes = [w, r]
            for n in nodes:
                await n.connect()
        try:
            await w.create("r")
            payloads = [bytes([65 + i % 26]) * n + b"%d" % i for i, n in enumerate(sizes)]
            if kind == "memory":
                for p in payloads:
                    await w.append("r", p)
            else:
                append = w.appender("r")
                for i in range(0, len(payloads), batch):  # one write tick per batch
                    for p in payloads[i : i + batch]:
                        append(p)
                    await asyncio.sleep(0)
                await w.finish("r")
            head = len(payloads)
            if cursor > head:
                with pytest.raises(BadCursorError):
                    await r.read("r", cursor)
                return
            got: list[bytes] = []
            after = cursor
            try:
                while True:
                    sl = await r.read("r", after, max_events=3)
                    if not sl.payloads:
                        break
                    assert sl.first_seq == after + 1
                    got += sl.payloads
                    after = sl.last_seq
            except CursorExpiredError as exc:
                assert exc.first_available > cursor + 1
                assert (await r.read("r", exc.first_available - 1)).payloads[0] == payloads[exc.first_available - 1]
                kept = head - exc.first_available + 1
                assert kept >= min(head, max_events)  # never fewer than the bound
                return
            assert got == payloads[cursor:]
        finally:
            for n in nodes:
                await n.aclose()

    for kind in ("memory", "redis"):
        asyncio.run(scenario(kind))


async def test_wait_wakes_on_append_and_finish_and_times_out(make_logs: Any) -> None:
    """``wait``: how a node that does not run a run follows it in a shared log."""
    logs = await make_logs()
    w, r = logs.writer, logs.reader
    await w.create("w")
    assert await r.wait("w", 0, 0.01) is False  # nothing yet
    waiting = asyncio.create_task(r.wait("w", 0, 5))
    await asyncio.sleep(0.05)
    await w.append("w", b"{}")
    assert await asyncio.wait_for(waiting, 5) is True
    assert await r.wait("w", 0, 0) is True  # already past the cursor
    waiting = asyncio.create_task(r.wait("w", 1, 5))
    await asyncio.sleep(0.05)
    await w.finish("w")
    assert await asyncio.wait_for(waiting, 5) is True
    with pytest.raises(UnknownRunError):
        await r.wait("nope", 0, 0.01)


# -- the registry over every backend (the async fallback paths included) -------------------


async def _drain(registry: RunRegistry, run_id: str, after: int = 0) -> list[Any]:
    run = await registry.find(run_id)
    out: list[Any] = []
    async with registry.subscribe(run, after) as sub:
        async for sl in sub.events(timeout=5):
            if sl is not None:
                out += [decode_event(p) for p in sl.payloads]
    return out


async def test_the_registry_streams_and_resumes_on_every_backend(make_logs: Any) -> None:
    logs = await make_logs()
    owner = RunRegistry(ScriptedAgent(deltas=30, pause=0.001), log=logs.writer)
    reader = owner if logs.reader is logs.writer else RunRegistry(ScriptedAgent(), log=logs.reader)
    await owner.start(make_input("reg"))
    expected = [e async for e in ScriptedAgent(deltas=30).run(make_input("reg"))]
    # A resume at 7 once the log holds 7 events (a cursor ahead of a live run's log is a
    # bad_cursor since issue 22: test_sse's cursor_ahead tests).
    whole_task = asyncio.create_task(_drain(reader, "reg"))
    while await reader.log.head("reg") < 7:
        await asyncio.sleep(0.001)
    tail = await _drain(reader, "reg", after=7)
    whole = await whole_task
    assert whole == expected and tail == expected[7:]
    assert await _drain(reader, "reg", after=len(expected)) == []
    with pytest.raises(UnknownRunError):
        await reader.find("never")
    await owner.shutdown()
    if reader is not owner:
        await reader.shutdown()


async def test_the_registry_reports_an_expired_cursor_on_every_backend(make_logs: Any) -> None:
    logs = await make_logs(max_events=4)
    # Paced: the Redis log trims whole write ticks, so each event gets its own tick here.
    owner = RunRegistry(ScriptedAgent(deltas=20, pause=0.002), log=logs.writer, options=RegistryOptions(max_retained=10))
    run = await owner.start(make_input("exp"))
    await run.wait_finished()
    reader = owner if logs.reader is logs.writer else RunRegistry(ScriptedAgent(), log=logs.reader)
    sub = reader.subscribe(await reader.find("exp"), 1)
    with pytest.raises(CursorExpiredError):
        await sub.next(timeout=1)
    sub.close()
    await owner.shutdown()
