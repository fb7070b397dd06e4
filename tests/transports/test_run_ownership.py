"""Runs bound to the principal that started them (issue: hardening, finding 7):
with one token per client, another client's stream, resume and cancel answer 404
(as for a run that does not exist), over HTTP and WebSocket; the official flow
(POST and read the stream) is unchanged."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
from websockets.asyncio.client import connect

from agui_engine.transports.sse import start_sse_server
from agui_engine.transports.websocket import start_websocket_server

from .scripted import ScriptedAgent, make_input

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
            assert srv.registry.get("run-1").state == "running"
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
            assert srv.registry.get("w-1").state == "running"
            await alice.send(msgspec.json.encode({"type": "cancel", "runId": "w-1"}).decode())
            while "RUN_ERROR" not in got:
                got = str(await asyncio.wait_for(alice.recv(), 5))
    assert "w-1" in agent.cancelled
