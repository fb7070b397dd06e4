from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.errors import UsageError
from agui_engine.transports.eventlog import (
    BadCursorError,
    CursorExpiredError,
    EventLog,
    InMemoryEventLog,
    UnknownRunError,
)


async def test_append_numbers_from_one_and_reads_after_a_cursor() -> None:
    log = InMemoryEventLog()
    assert isinstance(log, EventLog)
    await log.create("r")
    seqs = [await log.append("r", f"e{i}".encode()) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    sl = await log.read("r", 2)
    assert (sl.first_seq, sl.payloads, sl.finished, sl.last_seq) == (3, [b"e2", b"e3", b"e4"], False, 5)
    assert (await log.read("r", 5)).payloads == []
    await log.finish("r")
    assert (await log.read("r", 5)).finished
    assert not (await log.read("r", 3, max_events=1)).finished
    assert await log.head("r") == 5


async def test_bounds_drop_the_oldest_and_an_old_cursor_is_refused_clearly() -> None:
    log = InMemoryEventLog(max_events=3, max_bytes=1000)
    await log.create("r")
    for i in range(10):
        await log.append("r", b"x%d" % i)
    with pytest.raises(CursorExpiredError) as ei:
        await log.read("r", 5)
    assert ei.value.http_status == 410 and ei.value.first_available == 8
    assert "event 8" in str(ei.value)
    assert (await log.read("r", 7)).payloads == [b"x7", b"x8", b"x9"]

    small = InMemoryEventLog(max_events=100, max_bytes=10)
    await small.create("r")
    for i in range(5):
        await small.append("r", b"abcd")
    assert (await small.read("r", 3)).payloads == [b"abcd", b"abcd"]
    big = b"y" * 50  # larger than the byte bound on its own: still delivered
    await small.append("r", big)
    assert (await small.read("r", 5)).payloads == [big]


async def test_read_batches_are_bounded_but_never_empty() -> None:
    log = InMemoryEventLog()
    await log.create("r")
    for _ in range(10):
        await log.append("r", b"z" * 100)
    assert len((await log.read("r", 0, max_events=4)).payloads) == 4
    assert len((await log.read("r", 0, max_bytes=250)).payloads) == 2
    assert len((await log.read("r", 0, max_bytes=1)).payloads) == 1


async def test_misuse_and_unknown_runs() -> None:
    log = InMemoryEventLog()
    with pytest.raises(UnknownRunError):
        await log.read("nope", 0)
    await log.create("r")
    with pytest.raises(UsageError):
        await log.create("r")
    with pytest.raises(BadCursorError):
        await log.read("r", 1)
    with pytest.raises(BadCursorError):
        await log.read("r", -1)
    await log.finish("r")
    with pytest.raises(UsageError):
        await log.append("r", b"x")
    await log.discard("r")
    await log.discard("r")
    assert len(log) == 0
    await log.create("s")
    log.discard_nowait("s")
    log.discard_nowait("s")
    assert len(log) == 0
    with pytest.raises(UsageError):
        InMemoryEventLog(max_events=0)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), max_size=80),
    max_events=st.integers(1, 20),
    max_bytes=st.integers(1, 300),
    cursor=st.integers(0, 80),
)
def test_property_reads_are_exact_suffixes_or_a_clear_refusal(
    sizes: list[int], max_events: int, max_bytes: int, cursor: int
) -> None:
    async def scenario() -> None:
        log = InMemoryEventLog(max_events=max_events, max_bytes=max_bytes)
        await log.create("r")
        payloads = [bytes([65 + i % 26]) * n + b"%d" % i for i, n in enumerate(sizes)]
        for p in payloads:
            await log.append("r", p)
        head = len(payloads)
        if cursor > head:
            with pytest.raises(BadCursorError):
                await log.read("r", cursor)
            return
        try:
            got: list[bytes] = []
            after = cursor
            while True:
                sl = await log.read("r", after, max_events=3)
                if not sl.payloads:
                    break
                assert sl.first_seq == after + 1
                got += sl.payloads
                after = sl.last_seq
        except CursorExpiredError as exc:
            assert exc.first_available > cursor + 1
            # what is retained respects both bounds (the newest event always stays)
            kept = head - exc.first_available + 1
            assert kept <= max_events
            assert kept == 1 or sum(map(len, payloads[-kept:])) <= max_bytes
            return
        assert got == payloads[cursor:]

    asyncio.run(scenario())


async def test_wait_wakes_on_append_and_finish_and_times_out() -> None:
    """``wait``: how a node that does not run a run follows it in a shared log."""
    log = InMemoryEventLog()
    await log.create("w")
    assert await log.wait("w", 0, 0.01) is False  # nothing yet
    waiting = asyncio.create_task(log.wait("w", 0, 5))
    await asyncio.sleep(0)
    await log.append("w", b"{}")
    assert await waiting is True
    assert await log.wait("w", 0, 0) is True  # already past the cursor
    waiting = asyncio.create_task(log.wait("w", 1, 5))
    await asyncio.sleep(0)
    await log.finish("w")
    assert await waiting is True
    with pytest.raises(UnknownRunError):
        await log.wait("nope", 0, 0.01)
