"""Thread history (spec/transports.md §4.4): each thread's ended runs kept compacted in the
event log, served at ``GET <path>/threads/<threadId>``, branched by ``parentRunId``, and
restored by ``Thread.restore`` and agui-engine.js. Every store test runs on the in-memory log
and on a real redis-server (one suite, ``store`` parametrized), with real SSE servers."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.loops.thread import Thread
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event_list, encode_event
from agui_engine.protocol.compact import compact_events
from agui_engine.protocol.events import (
    AssistantMessage,
    CustomEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)
from agui_engine.protocol.proto import PROTO_CONTENT_TYPE, ProtoEventDecoder, encode_proto_frame
from agui_engine.protocol.verify import Verifier
from agui_engine.transports.clock import ManualClock
from agui_engine.transports.content_negotiation import negotiate_history
from agui_engine.transports.eventlog import InMemoryEventLog
from agui_engine.transports.history import (
    HISTORY_TRIMMED_EVENT,
    HistoryBudget,
    HistoryRun,
    MemoryThreadStore,
    branch,
    branch_payloads,
    build_record,
    decode_records,
    merge_input,
)
from agui_engine.transports.http_headers import HISTORY_TRIMMED_HEADER
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import start_sse_server

from ..agui_engine.agui_streams import valid_streams
from ..agui_engine.protocol.test_accumulator_differential import run_client
from .scripted import ScriptedAgent
from .stop_measure import node

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


TOKENS = {"token-alice": "alice", "token-bob": "bob"}
ALICE = {"Authorization": "Bearer token-alice"}
BOB = {"Authorization": "Bearer token-bob"}
JSON = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class EchoAgent:
    """Answers each run with ``echo: <last user text>`` in three deltas and appends the
    text to the state's ``turns`` (a STATE_DELTA relative to the input's state); records
    every input it was given."""

    def __init__(self) -> None:
        self.inputs: list[RunAgentInput] = []

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        self.inputs.append(input)
        rid = input.run_id
        text = next((m.content for m in reversed(input.messages) if isinstance(m, UserMessage)), "")
        yield RunStartedEvent(thread_id=input.thread_id, run_id=rid)
        yield TextMessageStartEvent(message_id=f"{rid}-a", role="assistant")
        for part in ("echo", ": ", str(text)):
            yield TextMessageContentEvent(message_id=f"{rid}-a", delta=part)
            await asyncio.sleep(0)
        yield TextMessageEndEvent(message_id=f"{rid}-a")
        if isinstance(input.state, dict) and "turns" in input.state:
            yield StateDeltaEvent(delta=[{"op": "add", "path": "/turns/-", "value": text}])
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=rid)


StoreFactory = Callable[..., Awaitable[Any]]


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, redis_logs: StoreFactory) -> StoreFactory:
    """A factory of event logs that keep histories, in memory or on the session's real
    redis-server (conftest's ``redis_logs``): ``await store(history=..., max_events=...)``."""
    if request.param == "redis":
        return redis_logs

    async def memory(**kw: Any) -> InMemoryEventLog:
        return InMemoryEventLog(**kw)

    return memory


def _input(run_id: str, *messages: Any, thread: str = "t", parent: str | None = None, state: Any = None) -> bytes:
    return msgspec.json.encode(
        RunAgentInput(thread_id=thread, run_id=run_id, parent_run_id=parent, messages=list(messages), state=state)
    )


async def _post(http: httpx.AsyncClient, url: str, body: bytes, **headers: str) -> httpx.Response:
    r = await http.post(url, content=body, headers={**JSON, **headers})
    assert r.status_code == 200, r.text
    assert b"RUN_FINISHED" in r.content, r.content[-300:]
    return r


async def _history(http: httpx.AsyncClient, url: str, thread: str, **params: str) -> httpx.Response:
    headers = {k.replace("_", "-"): v for k, v in params.items() if k not in ("runId",)}
    query = {"runId": params["runId"]} if "runId" in params else None
    return await http.get(url + f"threads/{thread}", params=query, headers=headers)


def _messages(events: list[Any]) -> list[tuple[str, str, Any]]:
    acc = Accumulator()
    acc.apply_all(events)
    return [(m["id"], m["role"], m.get("content")) for m in acc.messages]


# ----------------------------------------------------------------------------------- the server


async def test_two_runs_then_restore_equals_the_live_thread(store: StoreFactory) -> None:
    """Thread over SSEAgent, two turns; Thread.restore over a fresh SSEAgent (JSON, then
    protobuf) rebuilds the same messages, state and runs as the live accumulator -- at
    once: a run is kept before its stream ends, so a client that saw the end reads it."""
    log = await store()
    async with await start_sse_server(EchoAgent(), log=log) as srv:
        live_agent = SSEAgent(srv.url)
        live = Thread(live_agent, thread_id="chat-1", state={"turns": []})
        await live.send("hello")
        await live.send("and again")
        key = live_agent._thread_keys["chat-1"]
        for binary in (False, True):
            restored = await Thread.restore(SSEAgent(srv.url, binary=binary), "chat-1", run_key=key)
            assert restored.messages == live.messages
            assert restored.state == live.state == {"turns": ["hello", "and again"]}
            assert [r.run_id for r in restored.accumulator.runs] == [r.run_id for r in live.accumulator.runs]
            assert [r.status for r in restored.accumulator.runs] == ["finished", "finished"]
        # the restored thread continues the branch: its next run names the last one as parent
        follow = Thread.restore(SSEAgent(srv.url), "chat-1", run_key=key)
        again = await follow
        await again.send("third")
        async with httpx.AsyncClient(timeout=10) as http:
            r = await _history(http, srv.url, "chat-1", X_AGUI_Run_Key=key)
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
            assert r.headers[HISTORY_TRIMMED_HEADER] == "false"
            events = decode_event_list(r.content)
            starts = [e for e in events if isinstance(e, RunStartedEvent)]
            assert len(starts) == 3
            assert starts[2].parent_run_id == starts[1].run_id and starts[1].parent_run_id == starts[0].run_id
            assert r.headers["X-AGUI-Run-Id"] == starts[2].run_id
            # compacted: one CONTENT per message; each input holds only what was new
            assert sum(isinstance(e, TextMessageContentEvent) for e in events) == 3
            assert [len(s.input.messages) for s in starts if s.input is not None] == [1, 1, 1]
            assert _messages(events) == [(m["id"], m["role"], m.get("content")) for m in again.messages]


async def test_a_run_that_names_a_parent_branches_from_it(store: StoreFactory) -> None:
    """r1, r2 on one thread; r3 names r1 as parent and sends only its new message: the agent
    gets r1's branch plus it, the default history is r3's branch, ?runId=r2 the other one; a
    parent whose messages differ (an edited message) gives the agent the edited version."""
    agent = EchoAgent()
    log = await store()
    async with await start_sse_server(agent, log=log) as srv, httpx.AsyncClient(timeout=10) as http:
        first = await _post(http, srv.url, _input("r1", UserMessage(id="u1", content="one")))
        key = first.headers["X-AGUI-Run-Key"]
        await _post(http, srv.url, _input("r2", UserMessage(id="u1", content="one"),
                                          AssistantMessage(id="r1-a", content="echo: one"),
                                          UserMessage(id="u2", content="two")), **{"X-AGUI-Run-Key": key})
        await _post(http, srv.url, _input("r3", UserMessage(id="u3", content="three"), parent="r1"),
                    **{"X-AGUI-Run-Key": key})
        assert [m.id for m in agent.inputs[2].messages] == ["u1", "r1-a", "u3"]
        r = await _history(http, srv.url, "t", X_AGUI_Run_Key=key)
        assert r.status_code == 200 and r.headers["X-AGUI-Run-Id"] == "r3"
        assert _messages(decode_event_list(r.content)) == [
            ("u1", "user", "one"), ("r1-a", "assistant", "echo: one"),
            ("u3", "user", "three"), ("r3-a", "assistant", "echo: three"),
        ]
        r = await _history(http, srv.url, "t", runId="r2", X_AGUI_Run_Key=key)
        assert r.status_code == 200 and r.headers["X-AGUI-Run-Id"] == "r2"
        assert [m[0] for m in _messages(decode_event_list(r.content))] == ["u1", "r1-a", "u2", "r2-a"]
        # an edited message on a branch: the input's version of u1 replaces the branch's
        await _post(http, srv.url, _input("r4", UserMessage(id="u1", content="ONE, edited"), parent="r1"),
                    **{"X-AGUI-Run-Key": key})
        assert [(m.id, m.content) for m in agent.inputs[3].messages] == [
            ("u1", "ONE, edited"), ("r1-a", "echo: one")]
        # a parent that is not kept here: the input as sent, and the branch is trimmed
        await _post(http, srv.url, _input("r5", UserMessage(id="u9", content="nine"), parent="gone"),
                    **{"X-AGUI-Run-Key": key})
        assert [m.id for m in agent.inputs[4].messages] == ["u9"]
        r = await _history(http, srv.url, "t", X_AGUI_Run_Key=key)
        assert r.headers["X-AGUI-Run-Id"] == "r5" and r.headers[HISTORY_TRIMMED_HEADER] == "true"
        # the protobuf answer holds the same events
        proto = await http.get(srv.url + "threads/t", params={"runId": "r3"},
                               headers={"X-AGUI-Run-Key": key, "Accept": f"application/json;q=0.5, {PROTO_CONTENT_TYPE}"})
        assert proto.headers["content-type"] == PROTO_CONTENT_TYPE
        frames = ProtoEventDecoder()
        from_proto = frames.feed(proto.content)
        frames.close()
        from_json = decode_event_list((await _history(http, srv.url, "t", runId="r3", X_AGUI_Run_Key=key)).content)
        # (protobuf has no absent list: an input's missing ``resume`` comes back as [])
        assert [type(e) for e in from_proto] == [type(e) for e in from_json]
        assert _messages(from_proto) == _messages(from_json)


async def test_trimmed_history_keeps_the_newest_runs_and_says_so(store: StoreFactory) -> None:
    """A budget of two runs per thread: after three runs the history holds r2 and r3, says it
    is trimmed, and r2's input still restores u1. A total budget evicts the least recently
    written thread whole; the retention forgets idle threads (the registry's clock)."""
    clock = ManualClock(start=1_000.0)
    log = await store(history=HistoryBudget(max_runs_per_thread=2, max_total_bytes=6_000, retention_seconds=3600))
    async with await start_sse_server(EchoAgent(), log=log, clock=clock) as srv, httpx.AsyncClient(timeout=10) as http:
        first = await _post(http, srv.url, _input("r1", UserMessage(id="u1", content="one")))
        key = first.headers["X-AGUI-Run-Key"]
        msgs: list[Any] = [UserMessage(id="u1", content="one")]
        for n in (2, 3):
            msgs = [*msgs, AssistantMessage(id=f"r{n - 1}-a", content="..."), UserMessage(id=f"u{n}", content=str(n))]
            clock.advance(1)
            latest = (await _post(http, srv.url, _input(f"r{n}", *msgs), **{"X-AGUI-Run-Key": key})).headers
        # r1 is evicted, and its key with it: a key of a kept run (the latest is always kept) reads
        assert (await _history(http, srv.url, "t", X_AGUI_Run_Key=key)).status_code == 404
        key = latest["X-AGUI-Run-Key"]
        r = await _history(http, srv.url, "t", X_AGUI_Run_Key=key)
        assert r.status_code == 200 and r.headers[HISTORY_TRIMMED_HEADER] == "true"
        events = decode_event_list(r.content)
        starts = [e for e in events if isinstance(e, RunStartedEvent)]
        assert [s.run_id for s in starts] == ["r2", "r3"] and starts[0].parent_run_id == "r1"  # r1 named, not sent
        assert [m[0] for m in _messages(events)] == ["u1", "r1-a", "u2", "r2-a", "u3", "r3-a"]
        assert (await _history(http, srv.url, "t", runId="r1", X_AGUI_Run_Key=key)).status_code == 404
        # another thread, big enough that both no longer fit the 6,000-byte total: the older goes
        clock.advance(1)
        big = await _post(http, srv.url, _input("b1", UserMessage(id="x", content="y" * 3_000), thread="other"))
        gone = await _history(http, srv.url, "t", X_AGUI_Run_Key=key)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_thread"
        other_key = big.headers["X-AGUI-Run-Key"]
        assert (await _history(http, srv.url, "other", X_AGUI_Run_Key=other_key)).status_code == 200
        clock.advance(3601)  # idle past the retention
        assert (await _history(http, srv.url, "other", X_AGUI_Run_Key=other_key)).status_code == 404


async def test_a_run_longer_than_its_log_is_kept_trimmed(store: StoreFactory) -> None:
    """A run whose log dropped its first events (max_events=5, 60 events): its record is its
    RUN_STARTED with the input, the history_trimmed CUSTOM event and its terminal event."""
    log = await store(max_events=5)
    async with await start_sse_server(ScriptedAgent(deltas=50), log=log) as srv, httpx.AsyncClient(timeout=10) as http:
        r = await http.post(srv.url, content=_input("long", UserMessage(id="u1", content="go")), headers=JSON)
        key = r.headers["X-AGUI-Run-Key"]
        # the client was lapped (cursor_expired) before the run ended: wait for its end, bounded
        for _ in range(500):
            h = await _history(http, srv.url, "t", X_AGUI_Run_Key=key)
            if h.status_code != 404:
                break
            await asyncio.sleep(0.02)
        assert h.status_code == 200 and h.headers[HISTORY_TRIMMED_HEADER] == "true"
        events = decode_event_list(h.content)
        assert [type(e).__name__ for e in events] == ["RunStartedEvent", "CustomEvent", "RunFinishedEvent"]
        assert isinstance(events[1], CustomEvent) and events[1].name == HISTORY_TRIMMED_EVENT
        assert _messages(events) == [("u1", "user", "go")]


async def test_unknown_or_foreign_threads_are_404_never_500(store: StoreFactory) -> None:
    """Per-client tokens: bob gets alice's thread as 404, the same answer as for a thread
    that never ran; bob's run on alice's thread id is served but not kept there. Auth off:
    no key or a wrong key is 404, a run key of the thread is 200. A bad Accept is 406."""
    log = await store()
    async with await start_sse_server(EchoAgent(), log=log, auth_token=TOKENS) as srv, httpx.AsyncClient(timeout=10) as http:
        await _post(http, srv.url, _input("a1", UserMessage(id="u1", content="secret")), **ALICE)
        mine = await _history(http, srv.url, "t", Authorization=ALICE["Authorization"])
        assert mine.status_code == 200
        theirs = await _history(http, srv.url, "t", Authorization=BOB["Authorization"])
        never = await _history(http, srv.url, "no-such-thread", Authorization=BOB["Authorization"])
        assert theirs.status_code == never.status_code == 404
        assert theirs.json()["error"]["code"] == never.json()["error"]["code"] == "unknown_thread"
        # the same words for both (nothing to probe), saying what would open a thread
        assert theirs.json()["error"]["message"].replace("'t'", "'no-such-thread'") == never.json()["error"]["message"]
        assert "X-AGUI-Run-Key" in theirs.json()["error"]["message"]
        # bob's run with alice's thread id and her run as parent: served, given nothing of hers, not kept
        await _post(http, srv.url, _input("b1", UserMessage(id="x", content="mine?"), parent="a1"), **BOB)
        assert (await _history(http, srv.url, "t", Authorization=BOB["Authorization"])).status_code == 404
        again = await _history(http, srv.url, "t", Authorization=ALICE["Authorization"])
        assert [e.run_id for e in decode_event_list(again.content) if isinstance(e, RunStartedEvent)] == ["a1"]
        assert (await _history(http, srv.url, "t", runId="nope", Authorization=ALICE["Authorization"])).status_code == 404
        bad = await http.get(srv.url + "threads/t", headers={**ALICE, "Accept": "text/html"})
        assert bad.status_code == 406 and "admits none of application/json" in bad.json()["error"]["message"]
        # odd ids and queries: a 404 or the branch, never a 500
        for thread, query in [("%ff%fe", {}), ("t%2F2", {}), ("x" * 300, {}), ("t", {"runId": ""}),
                              ("t", {"runId": "a1\x00"}), ("t", {"runKey": ""}), ("\u2028", {}),
                              ("t", {"runId": "r" * 5000})]:
            odd = await http.get(srv.url + "threads/" + thread, params=query, headers=ALICE)
            assert odd.status_code in (200, 404) and odd.headers["content-type"].startswith("application/json"), (
                thread, query, odd.status_code, odd.text)
            assert len(odd.content) < 1000 or odd.status_code == 200  # an error never echoes a long id whole
    log = await store()
    async with await start_sse_server(EchoAgent(), log=log) as srv, httpx.AsyncClient(timeout=10) as http:
        r = await _post(http, srv.url, _input("k1", UserMessage(id="u1", content="hi"), thread="open"))
        assert (await _history(http, srv.url, "open")).status_code == 404
        assert (await _history(http, srv.url, "open", X_AGUI_Run_Key="not-the-key")).status_code == 404
        assert (await _history(http, srv.url, "open", X_AGUI_Run_Key=r.headers["X-AGUI-Run-Key"])).status_code == 200
        # a run on that thread without a key of it: served, not kept (the history still holds k1 alone)
        await _post(http, srv.url, _input("k2", UserMessage(id="u2", content="who?"), thread="open"))
        h = await _history(http, srv.url, "open", X_AGUI_Run_Key=r.headers["X-AGUI-Run-Key"])
        assert h.headers["X-AGUI-Run-Id"] == "k1"


# --------------------------------------------------------------------------- the stores themselves


async def test_the_stores_evict_alike(store: StoreFactory) -> None:
    """The same keeps on both stores give the same answers: a thread's oldest runs past its
    count and bytes (its newest always stays), the least recently kept thread past the
    total, idle threads past the retention."""
    budget = HistoryBudget(max_runs_per_thread=3, max_thread_bytes=100, max_total_bytes=250, retention_seconds=50)
    log = await store(history=budget)
    reference = MemoryThreadStore(budget)
    steps = [("a", 30, 1), ("a", 30, 2), ("a", 30, 3), ("a", 30, 4), ("b", 60, 5), ("a", 60, 6),
             ("c", 120, 7), ("b", 200, 8), ("a", 10, 60), ("c", 10, 61)]
    for n, (thread, size, now) in enumerate(steps):
        record = f"{n:03d}".encode() + b"x" * (size - 3)
        for s in (log, reference):
            await s.keep_run(thread, record, float(now))
        for t in "abc":
            assert await log.thread_runs(t, float(now)) == await reference.thread_runs(t, float(now)), (n, t)
    assert (await log.thread_runs("b", 200.0)).records == []


# ------------------------------------------------------------------------- the pure record functions


def test_build_record_compacts_and_carries_lineage() -> None:
    inp = RunAgentInput(thread_id="t", run_id="r2", messages=[UserMessage(id="u", content="x")], state={"n": 1})
    events = [
        RunStartedEvent(thread_id="t", run_id="r2"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        *[TextMessageContentEvent(message_id="m", delta=c) for c in "hello"],
        TextMessageEndEvent(message_id="m"),
        StateDeltaEvent(delta=[{"op": "replace", "path": "/n", "value": 2}]),
        RunFinishedEvent(thread_id="t", run_id="r2"),
    ]
    raw = build_record(inp, "r1", [encode_event(e) for e in events], complete=True, principal="p", key_hash="h")
    (run,) = decode_records([raw])
    assert (run.run_id, run.parent_run_id, run.principal, run.key_hash, run.trimmed) == ("r2", "r1", "p", "h", False)
    kept = decode_event_list(b"[" + b",".join(bytes(e) for e in run.events) + b"]")
    started = kept[0]
    assert isinstance(started, RunStartedEvent) and started.parent_run_id == "r1" and started.input == inp
    # exactly what compact_events gives for the run started from the input's state
    lead = [msgspec.structs.replace(events[0], parent_run_id="r1", input=inp), StateSnapshotEvent(snapshot={"n": 1})]
    assert kept == compact_events([*lead, *events[1:]])
    assert [type(e).__name__ for e in kept] == [
        "RunStartedEvent", "TextMessageStartEvent", "TextMessageContentEvent", "TextMessageEndEvent",
        "StateSnapshotEvent", "RunFinishedEvent"]
    assert kept[4].snapshot == {"n": 2}  # type: ignore[union-attr]
    # over the budget: the trimmed form
    small = build_record(inp, "r1", [encode_event(e) for e in events], complete=True, max_bytes=400)
    (cut,) = decode_records([small])
    assert cut.trimmed and len(small) <= 400
    assert [json.loads(bytes(e))["type"] for e in cut.events] == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]


def _run(run_id: str, parent: str | None) -> HistoryRun:
    return HistoryRun(run_id=run_id, parent_run_id=parent)


def test_branch_walks_parents_and_stops_at_gaps_and_cycles() -> None:
    runs = [_run("r1", None), _run("r2", "r1"), _run("r3", "r1"), _run("r4", "r3")]
    assert [r.run_id for r in branch(runs).runs] == ["r1", "r3", "r4"]
    assert [r.run_id for r in branch(runs, "r2").runs] == ["r1", "r2"]
    assert not branch(runs).trimmed
    cut = branch(runs[1:], "r4")
    assert [r.run_id for r in cut.runs] == ["r3", "r4"] and cut.trimmed
    loop = branch([_run("a", "b"), _run("b", "a")], "a")
    assert [r.run_id for r in loop.runs] == ["b", "a"]
    with pytest.raises(Exception, match="not a kept run"):
        branch(runs, "r9")
    with pytest.raises(Exception, match="no history"):
        branch([])


def test_merge_input_keeps_the_branch_and_takes_the_inputs_versions() -> None:
    inp = RunAgentInput(thread_id="t", run_id="r1", messages=[UserMessage(id="u1", content="a")], state={"s": 1})
    events = [RunStartedEvent(thread_id="t", run_id="r1"), TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="b"), TextMessageEndEvent(message_id="m1"),
              RunFinishedEvent(thread_id="t", run_id="r1")]
    (rec,) = decode_records([build_record(inp, None, [encode_event(e) for e in events], complete=True)])
    new = RunAgentInput(thread_id="t", run_id="r2", parent_run_id="r1",
                        messages=[UserMessage(id="u2", content="c"), UserMessage(id="u1", content="A")])
    merged = merge_input([rec], new)
    assert [(m.id, m.content) for m in merged.messages] == [("u1", "A"), ("m1", "b"), ("u2", "c")]
    assert merged.state == {"s": 1} and merged.parent_run_id == "r1"
    assert merge_input([rec], msgspec.structs.replace(new, state={"s": 9})).state == {"s": 9}
    # an input that holds the whole branch is given as sent, in its own order
    whole = msgspec.structs.replace(new, messages=[AssistantMessage(id="m1", content="b"), UserMessage(id="u1", content="a")])
    assert merge_input([rec], whole).messages == whole.messages


async def test_another_node_restores_and_continues_the_thread(redis_logs: StoreFactory) -> None:
    """Two gateways on one real Redis: a run kept by node A is read on node B, and a run on B
    that names it as parent gets its branch (every node reads every thread)."""
    agent_b = EchoAgent()
    log_a, log_b = await redis_logs(), await redis_logs()
    async with await start_sse_server(EchoAgent(), log=log_a) as a, await start_sse_server(agent_b, log=log_b) as b:
        async with httpx.AsyncClient(timeout=10) as http:
            first = await _post(http, a.url, _input("n1", UserMessage(id="u1", content="from A")))
            key = first.headers["X-AGUI-Run-Key"]
            r = await _history(http, b.url, "t", X_AGUI_Run_Key=key)
            assert r.status_code == 200 and r.headers["X-AGUI-Run-Id"] == "n1"
            await _post(http, b.url, _input("n2", UserMessage(id="u2", content="on B"), parent="n1"),
                        **{"X-AGUI-Run-Key": key})
            assert [m.id for m in agent_b.inputs[0].messages] == ["u1", "n1-a", "u2"]
            r = await _history(http, a.url, "t", X_AGUI_Run_Key=key)
            assert [m[0] for m in _messages(decode_event_list(r.content))] == ["u1", "n1-a", "u2", "n2-a"]
            long_id = "x" * 300
            assert (await _history(http, a.url, long_id, X_AGUI_Run_Key=key)).status_code == 404


@pytest.mark.parametrize(
    ("accept", "kind"),
    [(None, "json"), ("*/*", "json"), ("application/json", "json"), (PROTO_CONTENT_TYPE, "proto"),
     (f"application/json;q=0.4, {PROTO_CONTENT_TYPE};q=0.9", "proto"), (f"{PROTO_CONTENT_TYPE}, */*", "json"),
     (f"application/json;q=0.9, {PROTO_CONTENT_TYPE};q=0.9", "json"),
     # RFC 9110 12.5.1: a type's own range gives its q, a wildcard does not undo a refusal
     ("application/json;q=0, */*", "proto"), ("application/json;q=0, application/*", "proto"),
     (f"application/*;q=0.3, {PROTO_CONTENT_TYPE};q=0.2", "json"), ("text/*, application/*;q=0.1", "json")],
)
def test_negotiate_history(accept: str | None, kind: str) -> None:
    assert negotiate_history(accept) == kind


def test_negotiate_history_refuses_what_it_cannot_give() -> None:
    with pytest.raises(Exception, match="admits none of application/json"):
        negotiate_history("text/html, application/json;q=0")
    with pytest.raises(Exception, match="admits none of application/json"):
        negotiate_history(f"application/json;q=0, {PROTO_CONTENT_TYPE};q=0, */*")


# -------------------------------------------------------------------------------- the JS client


async def test_agui_engine_js_restores_the_thread_it_ran(store: StoreFactory) -> None:
    """agui-engine.js under node: two runSSE runs on one thread (the second presents the
    first's run key), then restoreThread into a fresh ThreadStore: the same messages and
    state as the store that saw the runs live; an unknown thread rejects with a 404."""
    script = Path(__file__).resolve().parent.parent / "js" / "restore_thread.mjs"
    applier = Path(__file__).resolve().parents[2] / "agui_engine" / "static" / "agui-engine.js"
    log = await store()
    async with await start_sse_server(EchoAgent(), log=log) as srv:
        proc = await asyncio.create_subprocess_exec(
            node(), str(script), str(applier), srv.url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (out + err).decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["restored"]["messages"] == report["live"]["messages"], report
    assert report["restored"]["state"] == report["live"]["state"] == {"turns": ["hi", "more"]}
    assert len(report["live"]["messages"]) == 4 and report["runId"] == "js-2" and report["trimmed"] is False
    assert report["unknown"] == {"status": 404, "code": "unknown_thread"}
    print(f"js restore: {len(report['events'])} events", file=sys.stderr)


# --------------------------------------------------------------------- property: restore == live


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=valid_streams(allow_error_end=True))
def test_a_restored_branch_builds_the_live_thread(stream: list[Any]) -> None:
    """Random runs (agui_streams.valid_streams, the last one maybe cut by a RUN_ERROR with
    entities open; expanded by the verifier as the gateway logs them), each started by a new user message: keeping each run (build_record, parent = the
    run before) and serving the branch (branch_payloads) builds, in an accumulator, the
    messages (each equal, by id) and state an accumulator built live from the user messages
    and the events."""
    runs: list[list[Any]] = []
    for event in stream:
        if isinstance(event, RunStartedEvent):
            runs.append([])
        runs[-1].append(event)
    live = Accumulator()
    records: list[bytes] = []
    parent = None
    for n, events in enumerate(runs):
        verifier = Verifier()
        expanded = [e for ev in events for e in verifier.feed(ev)]
        rid = expanded[0].run_id
        user = UserMessage(id=f"user-{n}", content=f"turn {n}")
        live.add_message(user)
        inp = RunAgentInput(thread_id="thread", run_id=rid, parent_run_id=parent, messages=live.messages_as_structs())
        live.apply_all(expanded)
        records.append(build_record(inp, parent, [encode_event(e) for e in expanded], complete=True))
        parent = rid
    chain = branch(decode_records(records)).runs
    restored = Accumulator()
    restored.apply_all(decode_event_list(b"[" + b",".join(branch_payloads(chain)) + b"]"))
    # compact_events writes a stream that started inside an open text message before that
    # message (as compactEvents does), so interleaved messages may come back in another order
    assert {m["id"]: m for m in restored.messages} == {m["id"]: m for m in live.messages}
    assert restored.state == live.state


@settings(deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 120), st.integers(0, 30)), max_size=40),
    runs=st.integers(1, 4), thread_bytes=st.integers(1, 200), total=st.integers(1, 400),
)
def test_the_memory_store_stays_within_its_budget(
    steps: list[tuple[str, int, int]], runs: int, thread_bytes: int, total: int
) -> None:
    """Any sequence of keeps: a thread holds at most max_runs_per_thread runs and
    max_thread_bytes (or its one newest record), all threads at most max_total_bytes (or the
    one just written), nothing idle past the retention, and the newest record is always there."""
    budget = HistoryBudget(max_runs_per_thread=runs, max_thread_bytes=thread_bytes, max_total_bytes=total,
                           retention_seconds=40)
    kept = MemoryThreadStore(budget)
    now = 0.0
    last: dict[str, float] = {}

    async def play() -> None:
        nonlocal now
        for n, (thread, size, gap) in enumerate(steps):
            now += gap
            record = str(n).encode().ljust(size, b".")
            await kept.keep_run(thread, record, now)
            last[thread] = now
            held = {t: await kept.thread_runs(t, now) for t in "abcd"}
            assert held[thread].records[-1] == record
            for t, got in held.items():
                if now - last.get(t, now) >= budget.retention_seconds:
                    assert got.records == []
                assert len(got.records) <= runs
                assert sum(map(len, got.records)) <= thread_bytes or len(got.records) == 1
            assert kept.held_bytes() == sum(sum(map(len, g.records)) for g in held.values())
            assert kept.held_bytes() <= total or len(kept) == 1

    asyncio.run(play())


async def test_the_official_client_builds_the_same_thread_from_the_history(store: StoreFactory) -> None:
    """A served history (three turns and a branch, state included) through @ag-ui/client 1.0's
    own pipeline (transformChunks -> verifyEvents -> defaultApplyEvents, under node): it
    accepts the stream and builds the messages and state the Python accumulator builds."""
    log = await store()
    async with await start_sse_server(EchoAgent(), log=log) as srv:
        agent = SSEAgent(srv.url)
        thread = Thread(agent, thread_id="diff", state={"turns": []})
        for text in ("one", "two", "three"):
            await thread.send(text)
        async with httpx.AsyncClient(timeout=10) as http:
            key = agent.thread_key("diff") or ""
            first_run = thread.accumulator.runs[0].run_id or ""
            await _post(http, srv.url, _input("side", UserMessage(id="s", content="side"), thread="diff",
                                              parent=first_run, state={"turns": ["one"]}), **{"X-AGUI-Run-Key": key})
            served = [(await _history(http, srv.url, "diff", X_AGUI_Run_Key=key)).json(),
                      (await _history(http, srv.url, "diff", runId=thread.accumulator.runs[-1].run_id or "",
                                      X_AGUI_Run_Key=key)).json()]
    theirs = run_client(served)
    for wire, client in zip(served, theirs, strict=True):
        ours = Accumulator()
        ours.apply_all(decode_event_list(json.dumps(wire).encode()))
        assert client["error"] is None, client
        assert client["messages"] == ours.messages and client["state"] == ours.state
    assert [m["content"] for m in theirs[0]["messages"]] == ["one", "echo: one", "side", "echo: side"]
    assert theirs[1]["messages"] == thread.messages and theirs[1]["state"] == {"turns": ["one", "two", "three"]}


async def test_keep_history_false_keeps_nothing() -> None:
    async with await start_sse_server(EchoAgent(), options=RegistryOptions(keep_history=False)) as srv:
        async with httpx.AsyncClient(timeout=10) as http:
            r = await _post(http, srv.url, _input("n1", UserMessage(id="u1", content="hi")))
            h = await _history(http, srv.url, "t", X_AGUI_Run_Key=r.headers["X-AGUI-Run-Key"])
            assert h.status_code == 404 and h.json()["error"]["code"] == "unknown_thread"
            assert len(srv.registry.log.threads) == 0  # type: ignore[attr-defined]


async def test_a_thread_over_websocket_is_kept_and_restored_over_sse(store: StoreFactory) -> None:
    """One registry behind a WebSocket and an SSE server, auth off: a Thread over
    WebSocketAgent runs two turns (the second run message carries the first's key, so both
    are kept), and Thread.restore over SSEAgent gets the same messages and state."""
    from agui_engine.transports.runs import RunRegistry
    from agui_engine.transports.websocket_client import WebSocketAgent
    from agui_engine.transports.websocket_server import start_websocket_server

    registry = RunRegistry(EchoAgent(), log=await store())
    async with await start_websocket_server(registry=registry) as ws, await start_sse_server(registry=registry) as srv:
        agent = WebSocketAgent(ws.url)
        live = Thread(agent, thread_id="over-ws", state={"turns": []})
        await live.send("one")
        await live.send("two")
        restored = await Thread.restore(SSEAgent(srv.url), "over-ws", run_key=agent.thread_key("over-ws"))
        assert restored.messages == live.messages and len(restored.accumulator.runs) == 2
        assert restored.state == {"turns": ["one", "two"]}


# --------------------------------------------------------------------------- a hostile history server


@asynccontextmanager
async def _history_server(answer: Callable[[Any], Awaitable[Any]]) -> AsyncIterator[tuple[str, list[int]]]:
    """A real aiohttp server on loopback whose ``GET /threads/<id>`` is ``answer(request)``;
    yields its URL and a list holding the bytes it managed to write."""
    from aiohttp import web

    written: list[int] = [0]

    async def handler(request: web.Request) -> Any:
        return await answer((request, written))

    app = web.Application()
    app.router.add_get("/threads/{thread}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/", written
    finally:
        await runner.cleanup()


def _fixed(status: int, body: bytes, content_type: str) -> Callable[[Any], Awaitable[Any]]:
    from aiohttp import web

    async def answer(_: Any) -> Any:
        return web.Response(status=status, body=body, headers={"Content-Type": content_type})

    return answer


GOOD_FRAME = encode_proto_frame(RunStartedEvent(thread_id="t", run_id="r1"))


@pytest.mark.parametrize(
    ("status", "body", "content_type", "error", "says"),
    [
        (404, b'{"error": {"code": "unknown_thread", "message": "unknown thread"}}', "application/json",
         "RemoteAgentError", "unknown_thread"),
        (200, b"<html>a login page</html>", "text/html", "EventDecodeError", "not a JSON array"),
        (200, b'[{"type": "RUN_STARTED", "threadId": 1}]', "application/json", "EventDecodeError", "threadId"),
        (200, GOOD_FRAME + b"\x00\x00", PROTO_CONTENT_TYPE, "ProtoDecodeError", "length prefix: 2 of 4"),
        (200, GOOD_FRAME + b"\xff\xff\xff\xff", PROTO_CONTENT_TYPE, "FrameTooLargeError", "at byte 17"),
        (200, GOOD_FRAME + b"\x00\x00\x00\x02\x08\x01", PROTO_CONTENT_TYPE, "ProtoDecodeError",
         "frame 1 at byte 21: event arm 1: wire type varint"),
        (500, b"Internal Server Error", "text/plain", "RemoteAgentError", "500"),
    ],
)
async def test_restore_from_a_bad_history_answer_is_a_typed_error(
    status: int, body: bytes, content_type: str, error: str, says: str
) -> None:
    """What SSEAgent.history and Thread.restore raise for each bad answer: the error of the
    error tree naming where, never a crash or a thread built from half an answer."""
    from agui_engine.protocol.errors import AguiEngineError

    async with _history_server(_fixed(status, body, content_type)) as (url, _):
        for binary in (False, True):
            with pytest.raises(AguiEngineError) as info:
                await Thread.restore(SSEAgent(url, binary=binary), "t", run_key="k")
            assert type(info.value).__name__ == error and says in str(info.value), (binary, info.value)
            assert 400 <= info.value.http_status < 600


async def test_restore_stops_reading_an_endless_history_at_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that never stops sending: the client reads up to MAX_HISTORY_RESPONSE_BYTES (here
    made small) and a chunk, then hangs up with LimitExceededError; the server's writes fail."""
    from aiohttp import web

    from agui_engine.protocol.errors import LimitExceededError
    from agui_engine.transports import sse_client as sse_module

    limit = 64 * 1024
    monkeypatch.setattr(sse_module, "MAX_HISTORY_RESPONSE_BYTES", limit)
    stopped = asyncio.Event()

    async def endless(arg: Any) -> Any:
        request, written = arg
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            await resp.write(b"[")
            while True:
                await resp.write(b'{"type": "RAW", "event": 0},' * 256)
                written[0] += 7 * 1024
        except (ConnectionError, RuntimeError):
            stopped.set()
        return resp

    async with _history_server(endless) as (url, written):
        with pytest.raises(LimitExceededError, match="MAX_HISTORY_RESPONSE_BYTES"):
            await SSEAgent(url).history("t", run_key="k")
        await asyncio.wait_for(stopped.wait(), 10)
    # socket buffers hold a few MB at most; an unbounded reader would have taken the lot
    assert written[0] < 64 * 1024 * 1024


async def test_a_history_with_an_event_type_from_a_later_version_restores_only_when_tolerant() -> None:
    """An event this version does not know, in a JSON or a protobuf history: a typed error naming
    the event's index (JSON) or frame and byte (protobuf); a tolerant agent restores the thread."""
    from agui_engine.protocol.codec import EventDecodeError
    from agui_engine.protocol.proto import UnknownProtoEventError

    start = RunStartedEvent(thread_id="t", run_id="r1", input=RunAgentInput(
        thread_id="t", run_id="r1", messages=[UserMessage(id="u1", content="hi")]))
    finish = RunFinishedEvent(thread_id="t", run_id="r1")
    as_json = b"[" + encode_event(start) + b', {"type": "FUTURE_EVENT", "x": 1}, ' + encode_event(finish) + b"]"
    future = bytes([0xFA, 0x03, 0x02, 0x08, 0x63])  # envelope arm 63: an event of a later protocol
    as_proto = encode_proto_frame(start) + len(future).to_bytes(4, "big") + future + encode_proto_frame(finish)
    for body, content_type, binary in ((as_json, "application/json", False), (as_proto, PROTO_CONTENT_TYPE, True)):
        async with _history_server(_fixed(200, body, content_type)) as (url, _):
            with pytest.raises((EventDecodeError, UnknownProtoEventError)) as info:
                await Thread.restore(SSEAgent(url, binary=binary), "t", run_key="k")
            assert info.value.frame_index == 1 and (binary or "FUTURE_EVENT" in str(info.value)), info.value
            if binary:
                assert info.value.offset == len(encode_proto_frame(start)) + 4, info.value
            restored = await Thread.restore(SSEAgent(url, binary=binary, tolerant=True), "t", run_key="k")
            assert [m["id"] for m in restored.messages] == ["u1"], restored.messages


@pytest.mark.parametrize(
    ("status", "body", "content_type", "code"),
    [
        (404, b'{"error": {"code": "unknown_thread", "message": "unknown thread"}}', "application/json",
         "unknown_thread"),
        (200, b"<html>a login page</html>", "text/html", "history_failed"),
        (200, b'{"not": "a list"}', "application/json", "history_failed"),
        (200, b"[1, 2", "application/json", "history_failed"),
        (502, b"<html>Bad Gateway</html>", "text/html", "history_failed"),
    ],
)
async def test_agui_engine_js_rejects_a_bad_history_answer_with_a_history_error(
    status: int, body: bytes, content_type: str, code: str
) -> None:
    """agui-engine.js restoreThread under node against a real server giving a bad answer: a
    HistoryError with the status and a code, never a bare SyntaxError from the body."""
    script = Path(__file__).resolve().parent.parent / "js" / "restore_one.mjs"
    applier = Path(__file__).resolve().parents[2] / "agui_engine" / "static" / "agui-engine.js"
    async with _history_server(_fixed(status, body, content_type)) as (url, _):
        proc = await asyncio.create_subprocess_exec(node(), str(script), str(applier), url, "t",
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (out + err).decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["error"]["name"] == "HistoryError" and report["error"]["status"] == status, report
    assert report["error"]["code"] == code, report


async def test_restore_from_a_server_that_trickles_its_answer_gives_up_at_its_timeout() -> None:
    """A byte every 50 ms forever: each read is quick, the whole answer never comes; the
    restore ends with ConnectionLostError at ``timeout`` (HISTORY_REQUEST_TIMEOUT_SECONDS)."""
    from aiohttp import web

    from agui_engine.transports.retrying_client import ConnectionLostError

    async def trickle(arg: Any) -> Any:
        request, written = arg
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            await resp.write(b"[")
            while True:
                await asyncio.sleep(0.05)
                await resp.write(b" ")
                written[0] += 1
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async with _history_server(trickle) as (url, written):
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ConnectionLostError, match="HISTORY_REQUEST_TIMEOUT_SECONDS"):
            await SSEAgent(url).history("t", run_key="k", timeout=0.5)
        assert loop.time() - started < 5 and written[0] >= 3  # it did trickle, and was cut off


async def test_other_methods_on_a_thread_are_a_405_saying_how_to_read_it() -> None:
    async with await start_sse_server(EchoAgent()) as srv, httpx.AsyncClient(timeout=10) as http:
        for method in ("POST", "PUT"):
            r = await http.request(method, srv.url + "threads/t", content=b"{}")
            assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD, PATCH, DELETE", (method, r.text)
            assert r.json()["error"] == {
                "code": "method_not_allowed",
                "message": f"{method} /threads/t: a thread's history is read with GET, its title set with PATCH, "
                "the thread deleted with DELETE (nothing else is allowed here)",
            }
        for method in ("DELETE", "PATCH"):  # a gateway without a durable store renames and deletes nothing
            r = await http.request(method, srv.url + "threads/t", content=b'{"title": "x"}',
                                   headers={"Content-Type": "application/json"})
            assert r.status_code == 404 and r.json()["error"]["code"] == "threads_not_listed", (method, r.text)
        assert (await http.head(srv.url + "threads/t")).status_code == 404  # HEAD reads like GET


async def test_a_history_read_while_redis_is_away_is_a_503_that_says_so_then_works_again() -> None:
    """Its own redis-server, killed after a kept run: the history answers 503
    ``event_log_unavailable`` with Retry-After (never a 500); started again on the same port
    (nothing persisted), the thread is simply unknown: 404."""
    from agui_engine.transports.redislog import RedisEventLog

    from ..redis_server import RedisServer

    redis = RedisServer()
    redis.start()
    log = RedisEventLog(redis.url, prefix="away:")
    await log.connect()
    try:
        async with await start_sse_server(EchoAgent(), log=log) as srv, httpx.AsyncClient(timeout=30) as http:
            r = await _post(http, srv.url, _input("w1", UserMessage(id="u1", content="hi"), thread="w"))
            key = r.headers["X-AGUI-Run-Key"]
            assert (await _history(http, srv.url, "w", X_AGUI_Run_Key=key)).status_code == 200
            redis.stop()
            away = await _history(http, srv.url, "w", X_AGUI_Run_Key=key)
            assert away.status_code == 503 and "Retry-After" in away.headers, away.text
            assert away.json()["error"]["code"] == "event_log_unavailable"
            redis.start()
            back = await _eventually_status(http, srv.url, "w", key, 404)
            assert back.json()["error"]["code"] == "unknown_thread"
    finally:
        await log.aclose()
        redis.stop()


async def _eventually_status(http: httpx.AsyncClient, url: str, thread: str, key: str, status: int) -> httpx.Response:
    """The history answer once it has ``status`` (the log reconnects in the background)."""
    for _ in range(100):
        r = await _history(http, url, thread, X_AGUI_Run_Key=key)
        if r.status_code == status:
            return r
        await asyncio.sleep(0.1)
    raise AssertionError(f"still {r.status_code}: {r.text}")


async def test_a_browser_on_another_origin_reads_a_history_with_its_run_key() -> None:
    """CORS: the preflight of a history GET (it sends X-AGUI-Run-Key) passes, the answer
    exposes the history headers, and other methods still get the JSON 405 (OPTIONS listed)."""
    origin = {"Origin": "https://app.example"}
    async with await start_sse_server(EchoAgent(), cors_origins=["https://app.example"]) as srv, \
            httpx.AsyncClient(timeout=10) as http:
        r = await _post(http, srv.url, _input("c1", UserMessage(id="u1", content="hi"), thread="c"))
        pre = await http.options(srv.url + "threads/c", headers={
            **origin, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "x-agui-run-key"})
        assert pre.status_code == 204 and "x-agui-run-key" in pre.headers["access-control-allow-headers"].lower()
        got = await http.get(srv.url + "threads/c", headers={**origin, "X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]})
        assert got.status_code == 200 and got.headers["access-control-allow-origin"] == "https://app.example"
        exposed = got.headers["access-control-expose-headers"]
        assert HISTORY_TRIMMED_HEADER in exposed and "X-AGUI-Run-Id" in exposed and "X-AGUI-Thread-Id" in exposed
        put = await http.put(srv.url + "threads/c", headers=origin)
        assert put.status_code == 405 and put.headers["Allow"] == "GET, HEAD, PATCH, DELETE, OPTIONS"
