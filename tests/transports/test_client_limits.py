"""Issue 22, hole 3, in-process: what one client may hold (max_runs_per_client) and
what all run logs may hold together (the buffered-bytes budget)."""

from __future__ import annotations

import asyncio

import pytest

from agui_engine.protocol.errors import UsageError
from agui_engine.transports.admission import ServerBusyError, client_key
from agui_engine.transports.eventlog import BUDGET_TRIM_FLOOR_BYTES, CursorExpiredError, InMemoryEventLog
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry
from tests.transports.flood_agent import FloodAgent

from .scripted import ScriptedAgent, make_input


async def test_a_client_holds_at_most_its_cap_of_runs_and_the_refusal_is_a_503_to_retry() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    reg = RunRegistry(agent, options=RegistryOptions(max_runs_per_client=2))
    a1 = await reg.start(make_input("a1"), owner="", address="10.0.0.1")  # shared token: by address
    await reg.start(make_input("a2"), owner="", address="10.0.0.1")
    with pytest.raises(ServerBusyError) as info:
        await reg.start(make_input("a3"), owner="", address="10.0.0.1")
    assert info.value.http_status == 503 and info.value.retry_after >= 1 and "holds 2 runs" in info.value.message
    await reg.start(make_input("b1"), owner="", address="10.0.0.2")  # another address: its own cap
    # per-client tokens: the principal is the client, whatever the address
    await reg.start(make_input("alice-1"), owner="alice", address="10.0.0.1")
    await reg.start(make_input("alice-2"), owner="alice", address="10.0.0.9")
    with pytest.raises(ServerBusyError):
        await reg.start(make_input("alice-3"), owner="alice", address="10.0.0.8")
    # a finished run still being read counts; once its reader leaves, it does not
    sub = reg.subscribe(a1)
    await reg.cancel("a1")
    with pytest.raises(ServerBusyError):
        await reg.start(make_input("a3"), owner="", address="10.0.0.1")
    sub.close()
    await reg.start(make_input("a3"), owner="", address="10.0.0.1")
    await reg.shutdown()


async def test_stdio_s_one_client_and_a_cap_of_zero_are_not_limited() -> None:
    assert client_key(None, None) is None and client_key("", None) is None
    assert client_key("alice", "1.2.3.4") == "principal:alice" and client_key("", "1.2.3.4") == "address:1.2.3.4"
    reg = RunRegistry(ScriptedAgent(deltas=1, hang=True), options=RegistryOptions(max_runs_per_client=0))
    for i in range(5):
        await reg.start(make_input(f"r{i}"), address="10.0.0.1")
    await reg.shutdown()


def test_the_log_budget_holds_the_logs_to_the_budget_plus_a_floor_per_run() -> None:
    budget = 1024 * 1024
    log = InMemoryEventLog(max_total_bytes=budget)
    payload = b"x" * 1024
    runs = [f"r{i}" for i in range(10)]
    async def fill() -> None:
        for rid in runs:
            await log.create(rid)
        cursors = dict.fromkeys(runs, 0)
        for _ in range(400):  # 10 runs x 400 KiB = 4 MiB offered
            for rid in runs:
                log.append_nowait(rid, payload)
                sl = log.read_nowait(rid, cursors[rid])  # a reader that keeps up is never lapped
                cursors[rid] = sl.first_seq + len(sl.payloads) - 1
                assert log.held_bytes() <= budget + len(runs) * BUDGET_TRIM_FLOOR_BYTES + len(payload)
        with pytest.raises(CursorExpiredError):  # a reader that stopped at the start was
            log.read_nowait("r9", 0)
        for rid in runs:
            log.discard_nowait(rid)
        assert log.held_bytes() == 0

    asyncio.run(fill())


async def test_past_the_budget_new_runs_get_503() -> None:
    reg = RunRegistry(FloodAgent(300), options=RegistryOptions(max_buffered_bytes=200 * 1024))
    first = await reg.start(make_input("big"))
    await first.wait_finished()  # retained for resume: its log still holds ~256 KiB
    with pytest.raises(ServerBusyError, match="budget of 204800 bytes"):
        await reg.start(make_input("next"))
    await reg.shutdown()


def test_registry_options_refuse_negative_caps() -> None:
    for name in ("max_runs_per_client", "max_buffered_bytes"):
        with pytest.raises(UsageError, match=name):
            RegistryOptions(**{name: -1})
    with pytest.raises(UsageError, match="max_total_bytes"):
        InMemoryEventLog(max_total_bytes=-1)
