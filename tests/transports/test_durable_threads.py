"""Durable threads through real servers (spec/transports.md §4.4, "Durable threads"): the thread
API (list, rename, delete; per-principal 404s), ``kill -9`` of the real ``agui-engine serve``
mid-conversation with its default store, an interrupt raised before a restart resumed after it
(SQLite and a real PostgreSQL server), and two gateway nodes on one PostgreSQL database."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.loops.thread import Thread
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import AguiEngineError
from agui_engine.protocol.events import ResumeEntry
from agui_engine.transports.open_threads import open_thread_store
from agui_engine.transports.runs import RunRegistry
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.thread_store import DurableThreadStore

from ..agui_engine.cli.test_tokens import serve
from .interrupt_agent import agent as interrupt_agent
from .test_history import ALICE, BOB, TOKENS, EchoAgent

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def node(url: str, agent: Any = None, *, auth: Any = TOKENS) -> AsyncIterator[tuple[str, DurableThreadStore]]:
    """One gateway node (a real SSE server) keeping threads in the store at ``url``."""
    store = await open_thread_store(url)
    registry = RunRegistry(agent if agent is not None else EchoAgent(), threads=store)
    srv = await start_sse_server(registry=registry, auth_token=auth)
    try:
        yield srv.url, store
    finally:
        await srv.close()
        await store.aclose()


def _error(resp: httpx.Response) -> tuple[int, dict[str, Any]]:
    return resp.status_code, resp.json()["error"]


async def test_the_thread_api_lists_renames_and_deletes_only_the_callers_threads(tmp_path: Path) -> None:
    async with node(f"sqlite:{tmp_path / 't.sqlite3'}") as (url, _), httpx.AsyncClient(timeout=30) as http:
        alice = SSEAgent(url, headers=ALICE)
        for i, text in enumerate(["Plan a trip to Kyoto", "What is a monad?", "Kyoto in winter"]):
            await Thread(alice, thread_id=f"a{i}").send(text)
        await Thread(SSEAgent(url, headers=BOB), thread_id="b0").send("bob's question")
        page = await alice.list_threads()
        assert [t.thread_id for t in page.threads] == ["a2", "a1", "a0"] and page.next_cursor is None
        assert [t.title for t in page.threads] == ["Kyoto in winter", "What is a monad?", "Plan a trip to Kyoto"]
        first = await alice.list_threads(limit=2)
        rest = await alice.list_threads(limit=2, cursor=first.next_cursor)
        assert [t.thread_id for t in first.threads + rest.threads] == ["a2", "a1", "a0"] and rest.next_cursor is None
        assert sorted(t.thread_id for t in (await alice.list_threads(search="kyoto")).threads) == ["a0", "a2"]
        assert [t.thread_id for t in (await SSEAgent(url, headers=BOB).list_threads()).threads] == ["b0"]

        # another principal: the same 404 as an unknown thread, for read, rename and delete
        _, unknown = _error(await http.get(f"{url}threads/nope", headers=BOB))
        for method, body in (("GET", None), ("DELETE", None), ("PATCH", b'{"title": "mine"}')):
            headers = {**BOB, "Content-Type": "application/json"}
            status, err = _error(await http.request(method, f"{url}threads/a0", headers=headers, content=body))
            assert (status, err["code"]) == (404, "unknown_thread") == (404, unknown["code"]), (method, err)
        assert (await alice.list_threads()).threads[2].title == "Plan a trip to Kyoto"

        assert await alice.rename_thread("a0", "  Kyoto   trip ") == "Kyoto trip"
        assert (await alice.list_threads(search="trip")).threads[0].title == "Kyoto trip"
        restored = await Thread.restore(alice, "a1")
        await restored.delete()
        assert [t.thread_id for t in (await alice.list_threads()).threads] == ["a2", "a0"]
        for method in ("GET", "DELETE"):
            status, err = _error(await http.request(method, f"{url}threads/a1", headers=ALICE))
            assert (status, err["code"]) == (404, "unknown_thread"), method

        # what a client gets wrong: 400 naming it
        for query, says in (("cursor=xyz", "cursor"), ("limit=0", "limit"), ("limit=101", "MAX_THREAD_PAGE")):
            status, err = _error(await http.get(f"{url}threads?{query}", headers=ALICE))
            assert status == 400 and says in err["message"], (query, err)
        for body, says in ((b'{"title": ""}', "empty"), (b'{"name": "x"}', '{"title"'), (b"[", "not JSON"),
                           (json.dumps({"title": "x" * 201}).encode(), "MAX_TITLE_CHARS")):
            status, err = _error(await http.patch(
                f"{url}threads/a0", headers={**ALICE, "Content-Type": "application/json"}, content=body))
            assert status == 400 and says in err["message"], (body, err)


async def test_a_listing_needs_a_named_principal_and_a_durable_store(tmp_path: Path) -> None:
    async with node(f"sqlite:{tmp_path / 't.sqlite3'}", auth="shared") as (url, _):
        with pytest.raises(AguiEngineError) as info:
            await SSEAgent(url, headers={"Authorization": "Bearer shared"}).list_threads()
        assert "principal_required" in str(info.value) or getattr(info.value, "code", "") == "principal_required"
    srv = await start_sse_server(EchoAgent())  # the event log's memory history: not listed
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            status, err = _error(await http.get(f"{srv.url}threads"))
        assert (status, err["code"]) == (404, "threads_not_listed") and "--store sqlite:PATH" in err["message"]
    finally:
        await srv.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'threads.sqlite3'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_an_interrupt_raised_before_a_restart_is_resumed_after_it(store_url: str) -> None:
    async with node(store_url, interrupt_agent) as (url, _):
        before = Thread(SSEAgent(url, headers=ALICE), thread_id="approve")
        await before.send("delete the files")
        await Thread(SSEAgent(url, headers=ALICE), thread_id="late").send("expire:2001-01-01T00:00:00Z")
    (asked,) = before.pending_interrupts
    assert asked.reason == "approval" and asked.response_schema is not None
    async with node(store_url, interrupt_agent) as (url, _), httpx.AsyncClient(timeout=30) as http:
        after = await Thread.restore(SSEAgent(url, headers=ALICE), "approve")
        assert after.pending_interrupts == before.pending_interrupts and after.messages == before.messages

        async def refused(thread: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
            body = {"threadId": thread, "runId": "r-" + os.urandom(4).hex(), "messages": [], "resume": entries}
            resp = await http.post(url, json=body, headers={**ALICE, "Accept": "text/event-stream"})
            assert resp.status_code == 422, resp.text
            return dict(resp.json()["error"])

        err = await refused("approve", [{"interruptId": "nope", "status": "resolved"}])
        assert err["code"] == "unknown_interrupt" and err["interruptId"] == "nope" and asked.id in err["message"]
        err = await refused("approve", [{"interruptId": asked.id, "status": "resolved", "payload": {"approved": "y"}}])
        assert (err["code"], err["interruptId"], err["path"]) == ("invalid_resume_payload", asked.id, "/payload/approved")
        late = (await Thread.restore(SSEAgent(url, headers=ALICE), "late")).pending_interrupts[0]
        err = await refused("late", [{"interruptId": late.id, "status": "cancelled"}])
        assert (err["code"], err["interruptId"]) == ("interrupt_expired", late.id)

        turn = await after.resume([ResumeEntry(interrupt_id=asked.id, status="resolved", payload={"approved": True})])
        assert turn.status == "finished" and after.pending_interrupts == []
        said = after.messages[-1]["content"]
        assert said == f'resumed with [{{"id": "{asked.id}", "payload": {{"approved": true}}, "status": "resolved"}}]'
        # answered: the branch no longer ends with it
        err = await refused("approve", [{"interruptId": asked.id, "status": "resolved", "payload": {"approved": True}}])
        assert err["code"] == "unknown_interrupt"


async def test_two_nodes_on_one_postgresql_see_each_others_threads(postgres_url: str) -> None:
    async with node(postgres_url) as (url_a, _), node(postgres_url) as (url_b, _):
        live = Thread(SSEAgent(url_a, headers=ALICE), thread_id="shared")
        await live.send("hello from node A")
        on_b = SSEAgent(url_b, headers=ALICE)
        assert [t.thread_id for t in (await on_b.list_threads()).threads] == ["shared"]
        restored = await Thread.restore(on_b, "shared")
        assert restored.messages == live.messages and restored.state == live.state
        await restored.send("and from node B")
        back = await Thread.restore(SSEAgent(url_a, headers=ALICE), "shared")
        assert back.messages == restored.messages and len(back.accumulator.runs) == 2
        assert (await SSEAgent(url_a, headers=BOB).list_threads()).threads == []
        await on_b.delete_thread("shared")
        with pytest.raises(AguiEngineError, match="unknown_thread|404"):
            await Thread.restore(SSEAgent(url_a, headers=ALICE), "shared")


@pytest.mark.timeout(120)  # two real server processes, each importing the CLI (a few seconds on a loaded machine)
async def test_kill_9_mid_conversation_then_restart_keeps_every_finished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``agui-engine serve`` with its default store (XDG_DATA_HOME here), killed with
    SIGKILL while a run streams, then started again on the same data directory."""
    tokens = tmp_path / "tokens"
    tokens.write_text("token-alice alice\ntoken-bob bob\n")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    async with serve(tokens, "--no-inspect") as (proc, url, _):
        agent = SSEAgent(url, headers=ALICE)
        live = Thread(agent, thread_id="chat")
        await live.send("first question")
        await live.send("second question")
        other = Thread(agent, thread_id="other")
        await other.send("another thread")
        kept = (live.messages, live.state, [r.run_id for r in live.accumulator.runs])
        # a third run, cut by kill -9 while it streams (the "hang" behaviour never ends)
        body = msgspec.json.encode({"threadId": "chat", "runId": "r-cut", "messages": [
            *live.messages, {"id": "u-cut", "role": "user", "content": "hang"}]})
        async with httpx.AsyncClient(timeout=30) as http, http.stream(
            "POST", url, content=body, headers={**ALICE, "Content-Type": "application/json",
                                                "Accept": "text/event-stream"}) as stream:
            async for line in stream.aiter_lines():
                if "TEXT_MESSAGE_CONTENT" in line:
                    break
            proc.kill()  # SIGKILL: no shutdown, no flush
            await proc.wait()
    assert (tmp_path / "data" / "agui-engine" / "threads.sqlite3").exists()
    async with serve(tokens, "--no-inspect") as (_, url, _):
        agent = SSEAgent(url, headers=ALICE)
        page = await agent.list_threads()
        assert [(t.thread_id, t.title, t.runs) for t in page.threads] == [
            ("other", "another thread", 1), ("chat", "first question", 2)]
        restored = await Thread.restore(agent, "chat")
        assert (restored.messages, restored.state, [r.run_id for r in restored.accumulator.runs]) == kept
        assert (await SSEAgent(url, headers=BOB).list_threads()).threads == []
        async with httpx.AsyncClient(timeout=30) as http:
            resp = await http.get(f"{url}threads/chat", headers=BOB)
            assert resp.status_code == 404 and resp.json()["error"]["code"] == "unknown_thread"
        await restored.send("third question")  # the conversation goes on where it was kept
        assert len((await Thread.restore(agent, "chat")).accumulator.runs) == 3


async def test_agui_engine_js_lists_renames_and_deletes_threads(tmp_path: Path) -> None:
    """agui-engine.js under node: listThreads (two pages by cursor), renameThread, deleteThread,
    and another principal's delete rejected as 404 ``unknown_thread``."""
    from .stop_measure import node as node_exe

    script = ROOT / "tests" / "js" / "thread_list.mjs"
    module = ROOT / "agui_engine" / "static" / "agui-engine.js"
    async with node(f"sqlite:{tmp_path / 't.sqlite3'}") as (url, _):
        for tid in ("js-a", "js-b"):
            await Thread(SSEAgent(url, headers=ALICE), thread_id=tid).send(f"hello {tid}")
        proc = await asyncio.create_subprocess_exec(
            node_exe(), str(script), str(module), url, "token-alice", "token-bob",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (out + err).decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report == {
        "first": ["js-b"], "second": ["js-a"], "last": None, "renamed": "Renamed in JS",
        "after": [["js-a", "Renamed in JS"]], "bob": [], "foreign": {"status": 404, "code": "unknown_thread"},
    }


async def test_the_thread_api_over_websocket(tmp_path: Path) -> None:
    """The same registry served over SSE and WebSocket: WebSocketAgent lists, renames and deletes
    what SSE clients ran, and another principal's delete is the same 404 ``unknown_thread``."""
    from agui_engine.transports.websocket_client import WebSocketAgent
    from agui_engine.transports.websocket_server import start_websocket_server

    store = await open_thread_store(f"sqlite:{tmp_path / 't.sqlite3'}")
    registry = RunRegistry(EchoAgent(), threads=store)
    sse = await start_sse_server(registry=registry, auth_token=TOKENS)
    ws = await start_websocket_server(registry=registry, auth_token=TOKENS)
    try:
        for tid in ("w1", "w2"):
            await Thread(SSEAgent(sse.url, headers=ALICE), thread_id=tid).send(f"about {tid}")
        await Thread(WebSocketAgent(ws.url, headers=ALICE), thread_id="w3").send("over the socket")
        alice = WebSocketAgent(ws.url, headers=ALICE)
        first = await alice.list_threads(limit=2)
        rest = await alice.list_threads(limit=2, cursor=first.next_cursor)
        assert [t.thread_id for t in first.threads + rest.threads] == ["w3", "w2", "w1"]
        assert [t.title for t in (await alice.list_threads(search="SOCKET")).threads] == ["over the socket"]
        assert await alice.rename_thread("w1", " first  one ") == "first one"
        await alice.delete_thread("w2")
        assert [(t.thread_id, t.title) for t in (await alice.list_threads()).threads] == [
            ("w3", "over the socket"), ("w1", "first one")]
        bob = WebSocketAgent(ws.url, headers=BOB)
        assert (await bob.list_threads()).threads == []
        for call in (bob.delete_thread("w1"), bob.rename_thread("w1", "mine"), alice.delete_thread("w2")):
            with pytest.raises(AguiEngineError) as info:
                await call
            assert info.value.code == "unknown_thread", info.value
    finally:
        await ws.close()
        await sse.close()
        await store.aclose()


@pytest.mark.timeout(180)  # a dozen real stdio server processes, each importing the CLI (seconds each under load)
async def test_the_thread_api_over_stdio(tmp_path: Path) -> None:
    """``agui-engine serve --transport stdio`` with a SQLite store: each run and each thread
    message is a process of its own, and the store carries the threads across them -- StdioAgent
    lists, reads back (``Thread.restore``), renames and deletes them; an unknown thread is 404."""
    import sys

    from agui_engine.transports.stdio_client import StdioAgent

    db = tmp_path / "stdio.sqlite3"
    agent = StdioAgent([sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio", "--store", f"sqlite:{db}"])
    live = Thread(agent, thread_id="s1")
    await live.send("Plan a trip to Kyoto")
    await live.send("and in winter?")
    await Thread(agent, thread_id="s2").send("What is a monad?")
    page = await agent.list_threads()
    assert [(t.thread_id, t.title, t.runs) for t in page.threads] == [
        ("s2", "What is a monad?", 1), ("s1", "Plan a trip to Kyoto", 2)]
    assert [t.thread_id for t in (await agent.list_threads(search="KYOTO")).threads] == ["s1"]
    restored = await Thread.restore(agent, "s1")
    assert (restored.messages, restored.state) == (live.messages, live.state)
    assert [r.run_id for r in restored.accumulator.runs] == [r.run_id for r in live.accumulator.runs]
    first = live.accumulator.runs[0].run_id
    assert len((await Thread.restore(agent, "s1", run_id=first)).messages) == 2  # the branch ending at run 1
    assert await agent.rename_thread("s1", " Kyoto  trip ") == "Kyoto trip"
    await agent.delete_thread("s2")
    assert [(t.thread_id, t.title) for t in (await agent.list_threads()).threads] == [("s1", "Kyoto trip")]
    for call in (agent.history("s2"), agent.delete_thread("nope"), agent.history("s1", run_id="not-a-run")):
        with pytest.raises(AguiEngineError) as info:
            await call
        assert info.value.code == "unknown_thread", info.value
    with pytest.raises(AguiEngineError) as info:
        await agent.list_threads(limit=0)
    assert info.value.code == "bad_thread_request" and "limit" in str(info.value)


async def test_a_thread_is_read_back_over_websocket(tmp_path: Path) -> None:
    """The ``get`` of the ``threads`` message: ``Thread.restore`` over ``WebSocketAgent`` equals
    the live thread (run over SSE), a branch by ``runId``, another principal's read 404."""
    from agui_engine.transports.websocket_client import WebSocketAgent
    from agui_engine.transports.websocket_server import start_websocket_server

    store = await open_thread_store(f"sqlite:{tmp_path / 't.sqlite3'}")
    registry = RunRegistry(EchoAgent(), threads=store)
    sse = await start_sse_server(registry=registry, auth_token=TOKENS)
    ws = await start_websocket_server(registry=registry, auth_token=TOKENS)
    try:
        live = Thread(SSEAgent(sse.url, headers=ALICE), thread_id="g1")
        await live.send("first")
        await live.send("second")
        alice = WebSocketAgent(ws.url, headers=ALICE)
        restored = await Thread.restore(alice, "g1")
        assert (restored.messages, restored.state) == (live.messages, live.state)
        one = await Thread.restore(alice, "g1", run_id=live.accumulator.runs[0].run_id)
        assert one.messages == live.messages[:2]
        await restored.send("third, over the socket")  # continues the branch it was restored from
        assert len((await Thread.restore(SSEAgent(sse.url, headers=ALICE), "g1")).accumulator.runs) == 3
        with pytest.raises(AguiEngineError) as info:
            await WebSocketAgent(ws.url, headers=BOB).history("g1")
        assert info.value.code == "unknown_thread"
    finally:
        await ws.close()
        await sse.close()
        await store.aclose()


class _Events:
    """The events of an SSE answer, read on demand."""

    def __init__(self, resp: httpx.Response) -> None:
        from agui_engine.protocol.codec import SSEDecoder

        self.chunks = resp.aiter_raw()
        self.decoder = SSEDecoder()
        self.seen: list[dict[str, Any]] = []

    async def until(self, done: Any = None) -> list[dict[str, Any]]:
        """Every event so far, once ``done(events)`` holds (None: at the stream's end)."""
        async for chunk in self.chunks:
            self.seen += [json.loads(m.data) for m in self.decoder.feed(chunk)]
            if done is not None and done(self.seen):
                break
        return self.seen


@pytest.mark.timeout(120)  # two real server processes, each importing the CLI (seconds on a loaded machine)
async def test_a_reload_on_another_node_reattaches_to_the_live_run(
    tmp_path: Path, postgres_url: str, redis_server: Any
) -> None:
    """Two real ``agui-engine serve`` processes on one PostgreSQL (threads) and one Redis (the
    runs' shared log). A thread's first run finishes on node A; its second is still streaming
    there when the page reloads on node B: B's connect answers the kept history from the store,
    then the live run's events from the shared log, the same events A's client is reading, up
    to its end (stopped from B); node B's history read (``GET <path>/threads/<id>``, our own
    clients' reload) names that run in ``X-AGUI-Live-Run-Id`` while it runs; a later connect on B
    is the history alone, nothing twice."""
    tokens = tmp_path / "tokens"
    tokens.write_text("token-alice alice\ntoken-bob bob\n")
    shared = ("--store", postgres_url, "--event-log", redis_server.url, "--no-inspect")
    hdrs = {**ALICE, "X-AGUI-Resumable": "1"}
    async with serve(tokens, *shared) as (_, url_a, _), serve(tokens, *shared) as (_, url_b, _), \
            httpx.AsyncClient(timeout=30) as http:
        first = Thread(SSEAgent(url_a, headers=ALICE), thread_id="reload")
        await first.send("hello")
        body = {"threadId": "reload", "runId": "r-live", "parentRunId": first.accumulator.runs[-1].run_id,
                "messages": [*first.messages, {"id": "u-hang", "role": "user", "content": "hang"}]}
        connect_b = url_b.rstrip("/") + "/agent/default/connect"

        def deltas(n: int) -> Any:
            return lambda seen: sum(e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == "r-live-m"
                                    for e in seen) >= n

        async with http.stream("POST", url_a, json=body, headers={**hdrs, "Accept": "text/event-stream"}) as on_a:
            read_a = _Events(on_a)
            await read_a.until(deltas(1))  # the run hangs after its first delta
            # our own clients' reload: the history on node B names the run to follow
            seen_b = await http.get(f"{url_b}threads/reload", headers=ALICE)
            assert seen_b.status_code == 200 and seen_b.headers["X-AGUI-Live-Run-Id"] == "r-live"
            async with http.stream("POST", connect_b, json={**body, "runId": "c1"}, headers=hdrs) as on_b:
                assert on_b.status_code == 200
                read_b = _Events(on_b)
                await read_b.until(deltas(1))
                stop = await http.post(url_b.rstrip("/") + "/agent/default/stop/reload", json={"runId": "r-live"},
                                       headers=ALICE)
                assert stop.json() == {"stopped": True}
                reloaded = await read_b.until()  # to the live run's end
            live_a = await read_a.until()
        kept = [e for e in reloaded if e.get("runId") != "r-live" and not str(e.get("messageId", "")).startswith("r-live")]
        i = next(k for k, e in enumerate(reloaded) if e["type"] == "RUN_STARTED" and e["runId"] == "r-live")
        # the history first: the first run, as the store keeps it (one RUN_STARTED .. RUN_FINISHED)
        assert [e["type"] for e in kept][0] == "RUN_STARTED" and kept[0]["runId"] == first.accumulator.runs[0].run_id
        history = Accumulator()
        history.apply_all([decode_event(json.dumps(e).encode()) for e in reloaded[:i]])
        assert history.messages == first.messages and history.state == first.state
        # then the live run, event for event what node A's client read
        assert reloaded[i:] == live_a
        assert live_a[-1]["type"] == "RUN_ERROR" and live_a[-1]["code"] == "cancelled"
        # the run has ended: a later reload on B is the history alone (no run twice)
        async with http.stream("POST", connect_b, json={**body, "runId": "c2"}, headers=hdrs) as again:
            later = await _Events(again).until()
        after = await http.get(f"{url_b}threads/reload", headers=ALICE)
        # the stopped run is kept now: the history ends with it and names no live run
        assert after.headers["X-AGUI-Run-Id"] == "r-live" and "X-AGUI-Live-Run-Id" not in after.headers
        starts = [e["runId"] for e in later if e["type"] == "RUN_STARTED"]
        assert len(starts) == len(set(starts)) and starts[0] == first.accumulator.runs[0].run_id
        # another principal reloading the thread gets nothing of it
        async with http.stream("POST", connect_b, json={**body, "runId": "c3"}, headers=BOB) as bob:
            assert await _Events(bob).until() == []
