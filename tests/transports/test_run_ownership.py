"""Who may touch a run (issue: hardening, finding 7; spec/transports.md §2.6).
With one token per client, another client's stream, resume and cancel answer 404
(as for a run that does not exist), over HTTP and WebSocket. Without per-client
tokens (auth off, one shared token) the run key the run's start handed out is
needed instead: a guessed run id reads and cancels nothing, while the owner --
and the project's own clients, which carry the key by themselves -- resume and
cancel. The official flow (POST and read the stream) is unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import msgspec
import pytest
from websockets.asyncio.client import connect

from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent, make_input

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


TOKENS = {"token-alice": "alice", "token-bob": "bob"}
ALICE = {"Authorization": "Bearer token-alice"}
BOB = {"Authorization": "Bearer token-bob"}
#: These clients leave a run and come back to it, so they declare it: without
#: X-AGUI-Resumable a closed stream stops its run (spec/transports.md §3.1).
JSON = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-AGUI-Resumable": "1"}


async def _wait_running(registry: object, run_id: str) -> None:
    for _ in range(200):
        if run_id in registry._runs:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{run_id} never started")


async def test_http_stream_resume_and_cancel_belong_to_the_runs_principal() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    async with await start_sse_server(agent, auth_token=TOKENS) as srv:
        async with httpx.AsyncClient(timeout=10) as http:
            # alice starts run-1 (the official flow: POST and read) and leaves it running
            async with http.stream("POST", srv.url, content=msgspec.json.encode(make_input("run-1")),
                                   headers={**JSON, **ALICE}) as r:
                assert r.status_code == 200
                async for chunk in r.aiter_bytes():
                    if b"TEXT_MESSAGE_CONTENT" in chunk:
                        break
            await _wait_running(srv.registry, "run-1")
            # bob guesses the id: 404 everywhere, exactly as for an unknown run
            r = await http.get(srv.url + "runs/run-1", headers=BOB)
            assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_run"
            unknown = await http.get(srv.url + "runs/no-such-run", headers=BOB)
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_run")
            r = await http.post(srv.url, content=msgspec.json.encode(make_input("run-1")),
                                headers={**JSON, **BOB, "Last-Event-ID": "run-1:1"})
            assert r.status_code == 404
            r = await http.delete(srv.url + "runs/run-1", headers=BOB)
            assert r.status_code == 404
            assert srv.registry.get("run-1").finished is False
            # alice can do all of it
            async with http.stream("GET", srv.url + "runs/run-1", headers=ALICE) as r:
                assert r.status_code == 200
                async for chunk in r.aiter_bytes():
                    if b"run-1:1" in chunk:
                        break
            r = await http.delete(srv.url + "runs/run-1", headers=ALICE)
            assert r.status_code == 204
    assert "run-1" in agent.cancelled


async def test_websocket_cancel_and_resume_belong_to_the_runs_principal() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    async with await start_websocket_server(agent, auth_token=TOKENS) as srv:
        async with connect(srv.url, additional_headers=ALICE) as alice, connect(srv.url, additional_headers=BOB) as bob:
            await alice.send(msgspec.json.encode({"type": "run", "input": make_input("w-1")}).decode())
            got = ""
            while "TEXT_MESSAGE_CONTENT" not in got:
                got = str(await asyncio.wait_for(alice.recv(), 5))
            await bob.send(msgspec.json.encode({"type": "resume", "runId": "w-1", "lastEventId": "w-1:1"}).decode())
            line = msgspec.json.decode(await asyncio.wait_for(bob.recv(), 5))
            assert line["error"]["code"] == "unknown_run"
            await bob.send(msgspec.json.encode({"type": "cancel", "runId": "w-1"}).decode())
            line = msgspec.json.decode(await asyncio.wait_for(bob.recv(), 5))
            assert line["error"]["code"] == "unknown_run"
            assert srv.registry.get("w-1").finished is False
            await alice.send(msgspec.json.encode({"type": "cancel", "runId": "w-1"}).decode())
            while "RUN_ERROR" not in got:
                got = str(await asyncio.wait_for(alice.recv(), 5))
    assert "w-1" in agent.cancelled


# --------------------------------------------------------------------------- run keys: no per-client tokens

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from agui_engine.transports.http_headers import RUN_KEY_HEADER  # noqa: E402
from agui_engine.transports.sse_client import SSEAgent  # noqa: E402
from agui_engine.transports.websocket_client import WebSocketAgent  # noqa: E402

from ..waiting import eventually  # noqa: E402
from .stop_measure import node  # noqa: E402

SHARED = "one-shared-token"


@pytest.mark.parametrize("auth", [None, SHARED], ids=["auth-off", "shared-token"])
async def test_http_a_guessed_run_id_reads_and_cancels_nothing_without_the_run_key(auth: str | None) -> None:
    """The issue's finding 7 reproduced: with auth off or one shared token, another
    client GETs and DELETEs ``run-1`` by guessing its id. Now both answer 404 (as for
    a run that does not exist) and the run goes on; its owner, holding the run key the
    POST was answered with, resumes and cancels it."""
    agent = ScriptedAgent(deltas=2, hang=True)
    token = {"Authorization": f"Bearer {SHARED}"} if auth else {}
    async with await start_sse_server(agent, auth_token=auth) as srv:
        async with httpx.AsyncClient(timeout=10) as http:
            async with http.stream("POST", srv.url, content=msgspec.json.encode(make_input("run-1")),
                                   headers={**JSON, **token}) as r:
                assert r.status_code == 200
                key = r.headers[RUN_KEY_HEADER]
                async for chunk in r.aiter_bytes():
                    if b"TEXT_MESSAGE_CONTENT" in chunk:
                        break
            await _wait_running(srv.registry, "run-1")
            assert len(key) >= 22  # 128 random bits, URL-safe
            # another client, same token (or none): every way in is a 404, as for a run that does not exist
            guesses = [
                await http.get(srv.url + "runs/run-1", headers=token),
                await http.get(srv.url + "runs/run-1", headers={**token, "Last-Event-ID": "run-1:0"}),
                await http.get(srv.url + "runs/run-1", headers={**token, RUN_KEY_HEADER: key[:-1] + ("A" if key[-1] != "A" else "B")}),
                await http.post(srv.url, content=msgspec.json.encode(make_input("run-1")),
                                headers={**JSON, **token, "Last-Event-ID": "run-1:1"}),
                await http.delete(srv.url + "runs/run-1", headers=token),
                await http.delete(srv.url + "runs/run-1", params={"runKey": "not-the-key"}, headers=token),
            ]
            assert [g.status_code for g in guesses] == [404] * 6
            assert all(g.json()["error"]["code"] == "unknown_run" for g in guesses)
            assert srv.registry.get("run-1").finished is False and "run-1" not in agent.cancelled
            # the owner: resume by GET (header, or ?runKey= as an EventSource must), then cancel
            async with http.stream("GET", srv.url + "runs/run-1", headers={**token, RUN_KEY_HEADER: key}) as r:
                assert r.status_code == 200
                assert RUN_KEY_HEADER not in r.headers  # handed out once, at the start
                async for chunk in r.aiter_bytes():
                    if b"run-1:1" in chunk:
                        break
            async with http.stream("GET", srv.url + "runs/run-1", params={"runKey": key}, headers=token) as r:
                assert r.status_code == 200
            r = await http.delete(srv.url + "runs/run-1", headers={**token, RUN_KEY_HEADER: key})
            assert r.status_code == 204
    assert "run-1" in agent.cancelled


@pytest.mark.parametrize("auth", [None, SHARED], ids=["auth-off", "shared-token"])
async def test_websocket_a_guessed_run_id_resumes_and_cancels_nothing_without_the_run_key(auth: str | None) -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    token = {"Authorization": f"Bearer {SHARED}"} if auth else {}
    async with await start_websocket_server(agent, auth_token=auth) as srv:
        async with connect(srv.url + "?batch=0", additional_headers=token) as owner, \
                connect(srv.url, additional_headers=token) as other:
            await owner.send(msgspec.json.encode({"type": "run", "input": make_input("run-1")}).decode())
            first = msgspec.json.decode(await asyncio.wait_for(owner.recv(), 5))
            key = first["runKey"]
            assert first["id"] == "run-1:1" and len(key) >= 22
            for guess in [
                {"type": "resume", "runId": "run-1", "lastEventId": "run-1:0"},
                {"type": "resume", "runId": "run-1", "lastEventId": "run-1:0", "runKey": "nope"},
                {"type": "cancel", "runId": "run-1"},
                {"type": "cancel", "runId": "run-1", "runKey": "nope"},
            ]:
                await other.send(msgspec.json.encode(guess).decode())
                line = msgspec.json.decode(await asyncio.wait_for(other.recv(), 5))
                assert line["error"]["code"] == "unknown_run", (guess, line)
            assert srv.registry.get("run-1").finished is False and "run-1" not in agent.cancelled
            # with the key, another connection resumes it ...
            await other.send(msgspec.json.encode(
                {"type": "resume", "runId": "run-1", "lastEventId": "run-1:0", "runKey": key}).decode())
            got = ""
            while "TEXT_MESSAGE_CONTENT" not in got:
                got = str(await asyncio.wait_for(other.recv(), 5))
            assert "runKey" not in got
            # ... and the connection that started it cancels it without repeating the key
            await owner.send(msgspec.json.encode({"type": "cancel", "runId": "run-1"}).decode())
            while "RUN_ERROR" not in got:
                got = str(await asyncio.wait_for(other.recv(), 5))
    assert "run-1" in agent.cancelled


@pytest.mark.parametrize("client", ["sse", "ws"])
async def test_the_project_clients_carry_the_run_key_through_a_drop_and_a_cancel(client: str) -> None:
    """SSEAgent / WebSocketAgent resume after a cut connection and cancel when closed
    early, presenting the run key by themselves (no per-client token)."""
    agent = ScriptedAgent(deltas=40, pause=0.02)
    start = start_sse_server if client == "sse" else start_websocket_server
    async with await start(agent) as srv:
        remote = SSEAgent(srv.url) if client == "sse" else WebSocketAgent(srv.url)
        seen = []
        gen = remote.run(make_input("keyed"))
        async for event in gen:
            seen.append(event)
            if len(seen) == 5:
                # cut the server side of the connection: the client must resume
                if client == "sse" and hasattr(srv, "runner"):
                    for conn in srv.runner.server.connections:  # type: ignore[attr-defined]
                        conn.transport.abort()  # type: ignore[union-attr]
                elif client == "sse":  # the ASGI front end under uvicorn
                    for conn in list(srv.server.server_state.connections):  # type: ignore[attr-defined]
                        conn.transport.abort()
                else:
                    for c in list(srv._connections):  # type: ignore[attr-defined]
                        c.ws.transport.abort()
            if len(seen) == 15:
                break
        await gen.aclose()  # type: ignore[attr-defined]
        assert remote.reconnects >= 1
        await eventually(lambda: srv.registry.get("keyed").finished)
        assert srv.registry.get("keyed").terminal_code == "cancelled"  # the client's cancel, not a grace expiry
    assert "keyed" in agent.cancelled


async def test_the_js_applier_carries_the_run_key_on_resume_and_stop() -> None:
    """agui-engine.js runSSE (the inspector's client): a dropped connection is resumed
    with GET + Last-Event-ID and the stop button DELETEs the run, both with the key."""
    agent = ScriptedAgent(deltas=60, pause=0.02)
    script = Path(__file__).resolve().parent.parent / "js" / "run_sse_keyed.mjs"
    applier = Path(__file__).resolve().parents[2] / "agui_engine" / "static" / "agui-engine.js"
    async with await start_sse_server(agent, options=RegistryOptions(grace_seconds=60)) as srv:
        proc = await asyncio.create_subprocess_exec(
            node(), str(script), str(applier), srv.url, "js-keyed", "8",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, (out + err).decode()
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["resumes"] == 1 and report["error"] == "AbortError", report
        seen = report["seen"]  # nothing lost or repeated across the resume
        assert len(seen) >= 8 and seen == [f"js-keyed:{n}" for n in range(1, len(seen) + 1)], report
        await eventually(lambda: srv.registry.get("js-keyed").finished)
        assert srv.registry.get("js-keyed").terminal_code == "cancelled"  # the DELETE, not the 60 s grace
    print(f"js runSSE: {report}", file=sys.stderr)


async def test_the_run_key_travels_between_nodes_through_redis(redis_logs: Any) -> None:
    """Two WebSocket gateway nodes on one real Redis: node B knows run-1 only from
    the shared log, and still refuses a guessed id (resume, cancel) while the key
    the owner's first line carried resumes and cancels it there. Over HTTP the same
    is checked between two ``serve`` processes (test_scaleout)."""
    agent = ScriptedAgent(deltas=2, hang=True)
    log_a, log_b = await redis_logs(), await redis_logs()
    async with await start_websocket_server(agent, log=log_a) as a, await start_websocket_server(agent, log=log_b) as b:
        async with connect(a.url + "?batch=0") as owner, connect(b.url + "?batch=0") as other:
            await owner.send(msgspec.json.encode({"type": "run", "input": make_input("run-1")}).decode())
            key = msgspec.json.decode(await asyncio.wait_for(owner.recv(), 5))["runKey"]
            for guess in [
                {"type": "resume", "runId": "run-1", "lastEventId": "run-1:0"},
                {"type": "cancel", "runId": "run-1"},
                {"type": "cancel", "runId": "run-1", "runKey": "nope"},
            ]:
                await other.send(msgspec.json.encode(guess).decode())
                line = msgspec.json.decode(await asyncio.wait_for(other.recv(), 5))
                assert line["error"]["code"] == "unknown_run", (guess, line)
            assert a.registry.get("run-1").finished is False
            await other.send(msgspec.json.encode(
                {"type": "resume", "runId": "run-1", "lastEventId": "run-1:0", "runKey": key}).decode())
            line = msgspec.json.decode(await asyncio.wait_for(other.recv(), 5))
            assert line["id"] == "run-1:1", line
            await other.send(msgspec.json.encode({"type": "cancel", "runId": "run-1", "runKey": key}).decode())
            got = ""
            while "RUN_ERROR" not in got:
                got = str(await asyncio.wait_for(other.recv(), 5))
    assert "run-1" in agent.cancelled
