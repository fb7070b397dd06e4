"""CopilotKit's runtime routes served by the gateway (transports/runtime_routes.py): the real
``@copilotkit/core`` 1.74 (what ``@copilotkit/react-core`` runs in the page) under node with the
gateway as its ``runtimeUrl`` and no Node runtime, and the routes' contract over plain HTTP; on both
front ends (aiohttp, and ASGI under uvicorn: tests/transports/frontends.py), one agent and several,
as both bind one RuntimeRouter."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import SSEDecoder
from agui_engine.transports.agents_app import ServedAgent
from agui_engine.transports.sse_server import start_sse_server

from .scripted import ScriptedAgent

pytestmark = pytest.mark.usefixtures("front_end")

CK = Path(__file__).resolve().parents[1] / "js" / "copilotkit"
#: a node subprocess importing @copilotkit/core and running two runs, on a shared machine
NODE_TIMEOUT = 120


def _booker() -> LLMAgent:
    return LLMAgent(ScriptedModel([
        ScriptedTurn(text="Let me check with you.", tool_calls=(ScriptedCall("confirm_booking", {"guests": 4}),)),
        lambda messages: f"Booked: {tool_results(messages)[-1]}.",
    ]))


async def _core_client(runtime_url: str, agent_id: str, token: str = "", transport: str = "") -> dict[str, Any]:
    node = shutil.which("node")
    if not (node and (CK / "node_modules" / "@copilotkit" / "core").is_dir()):
        if os.environ.get("CI"):
            pytest.fail("node or tests/js/copilotkit/node_modules missing: run tests/install-deps.sh")
        pytest.skip("needs node and tests/js/copilotkit's npm packages: run tests/install-deps.sh")
    proc = await asyncio.create_subprocess_exec(node, "core_client.mjs", runtime_url, agent_id, *([token] if token else []),
                                                cwd=CK, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, **({"CK_TRANSPORT": transport} if transport else {})})
    out, err = await asyncio.wait_for(proc.communicate(), NODE_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.timeout(180)  # a node subprocess with CopilotKit's client on a shared machine
async def test_copilotkit_core_with_the_gateway_as_runtime_runs_a_frontend_tool_round_trip() -> None:
    agents = {"booker": ServedAgent(agent=_booker(), description="Books tables"), "other": ScriptedAgent(deltas=1)}
    async with await start_sse_server(agents) as srv:
        got = await _core_client(srv.url.rstrip("/"), "booker")
    assert got["status"] == "connected" and sorted(got["agents"]) == ["booker", "other"]  # from GET /info
    assert got["errors"] == []
    assert got["handled"] == ["confirmed for 4 guests"]  # the page's handler ran
    last = got["messages"][-1]
    assert last["role"] == "assistant" and last["content"] == "Booked: confirmed for 4 guests."  # the run went on


@pytest.mark.timeout(180)
async def test_a_one_agent_gateway_is_copilotkits_default_agent() -> None:
    async with await start_sse_server(_booker()) as srv:
        got = await _core_client(srv.url.rstrip("/"), "default")
    assert got["agents"] == ["default"] and got["errors"] == [] and got["handled"] == ["confirmed for 4 guests"]


@pytest.mark.timeout(240)  # two node subprocesses with CopilotKit's client on a shared machine
async def test_copilotkit_core_over_the_single_endpoint_runs_a_frontend_tool_round_trip() -> None:
    """CopilotKit's single-endpoint form (``runtimeTransport: "single"``, the page's
    ``useSingleEndpoint``): every request is a POST of an envelope to ``runtimeUrl`` itself, with one
    agent (its path is the endpoint) and with several (``POST <path>``)."""
    async with await start_sse_server(_booker()) as srv:
        one = await _core_client(srv.url.rstrip("/"), "default", transport="single")
    agents = {"booker": ServedAgent(agent=_booker(), description="Books tables"), "other": ScriptedAgent(deltas=1)}
    async with await start_sse_server(agents) as srv:
        several = await _core_client(srv.url.rstrip("/"), "booker", transport="single")
        endpoint = srv.url.rstrip("/")
    for got, listed in ((one, ["default"]), (several, ["booker", "other"])):
        assert got["status"] == "connected" and sorted(got["agents"]) == listed and got["errors"] == []
        assert got["handled"] == ["confirmed for 4 guests"]  # the handler ran, its result continued the run
        assert got["messages"][-1]["content"] == "Booked: confirmed for 4 guests."
    assert set(several["requests"]) == {f"POST {endpoint}"}  # info and both runs: envelopes, no REST route


async def test_single_endpoint_envelopes_answer_as_their_rest_routes() -> None:
    tokens = {"tok-alice": "alice"}
    alice = {"Authorization": "Bearer tok-alice"}
    run = {"threadId": "t1", "runId": "r1", "messages": [{"id": "u", "role": "user", "content": "book"}]}
    async with await start_sse_server(ScriptedAgent(deltas=2), auth_token=tokens) as srv, \
            httpx.AsyncClient(timeout=30) as c:
        url = srv.url
        assert (await c.post(url, json={"method": "info"})).status_code == 401  # the agent's auth, as its routes
        info = (await c.post(url, json={"method": "info"}, headers=alice)).json()
        assert list(info["agents"]) == ["default"] and info == (await c.get(url + "info", headers=alice)).json()
        call = {"method": "agent/run", "params": {"agentId": "default"}, "body": run}
        ran = _events((await c.post(url, json=call, headers=alice)).content)
        assert [e["type"] for e in ran][0] == "RUN_STARTED" and ran[-1] == {**ran[-1], "type": "RUN_FINISHED"}
        # a RunAgentInput is still a run, whatever it carries (a "method" of its own)
        plain = {**run, "runId": "r2", "forwardedProps": {"method": "info"}}
        assert _events((await c.post(url, json=plain, headers=alice)).content)[-1]["type"] == "RUN_FINISHED"
        connect = {"method": "agent/connect", "params": {"agentId": "default"}, "body": {**run, "runId": "c"}}
        replay = _events((await c.post(url, json=connect, headers=alice)).content)
        assert replay[0]["type"] == "RUN_STARTED" and {e.get("runId") for e in replay if e["type"] == "RUN_STARTED"} == {
            "r1", "r2"}
        stop = {"method": "agent/stop", "params": {"agentId": "default", "threadId": "t1"}, "body": {"runId": "r1"}}
        assert (await c.post(url, json=stop, headers=alice)).json() == {"stopped": False}  # it has ended
        for bad, status, code in (
            ({"method": "transcribe", "params": {"agentId": "default"}}, 404, "unknown_method"),
            ({"method": "agent/run", "params": {"agentId": "nobody"}, "body": run}, 404, "unknown_agent"),
            ({"method": "agent/run", "params": {}, "body": run}, 400, "bad_input"),
            ({"method": "agent/run", "params": {"agentId": "default"}}, 400, "bad_input"),
            ({"method": "agent/run", "params": ["default"]}, 400, "bad_input"),
        ):
            answer = await c.post(url, json=bad, headers=alice)
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), bad
            assert answer.json()["error"]["message"]
    async with await start_sse_server({"a": ScriptedAgent(deltas=1)}) as srv, httpx.AsyncClient(timeout=30) as c:
        call = {"method": "agent/run", "params": {"agentId": "a"}, "body": run}
        assert _events((await c.post(srv.url, json=call)).content)[-1]["type"] == "RUN_FINISHED"
        info = (await c.post(srv.url, json={"method": "info"})).json()
        assert list(info["agents"]) == ["a"]
        not_an_envelope = await c.post(srv.url, json=run)  # several agents: runs go to an agent's path
        assert not_an_envelope.status_code == 400 and "/agent/<id>/run" in not_an_envelope.json()["error"]["message"]


def _events(body: bytes) -> list[dict[str, Any]]:
    d = SSEDecoder()
    return [json.loads(m.data) for m in d.feed(body) + d.close()]


async def test_info_connect_and_stop_follow_each_agents_access() -> None:
    tokens = {"tok-alice": "alice", "tok-bob": "bob"}
    agents = {"open": ScriptedAgent(deltas=2),
              "mine": ServedAgent(agent=_booker(), principals=frozenset({"alice"}), description="alice's")}
    alice, bob = {"Authorization": "Bearer tok-alice"}, {"Authorization": "Bearer tok-bob"}
    tool = {"name": "confirm_booking", "description": "confirm", "parameters": {"type": "object"}}
    run = {"threadId": "t1", "runId": "r1", "messages": [{"id": "u", "role": "user", "content": "book"}], "tools": [tool]}
    async with await start_sse_server(agents, auth_token=tokens) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")
        assert (await c.get(base + "/info")).status_code == 401
        info = (await c.get(base + "/info", headers=alice)).json()
        assert set(info["agents"]) == {"open", "mine"} and info["agents"]["mine"]["description"] == "alice's"
        assert "capabilities" in info["agents"]["mine"] and info["a2uiEnabled"] is False
        assert set((await c.get(base + "/info", headers=bob)).json()["agents"]) == {"open"}  # mine is not bob's
        assert (await c.post(base + "/agent/mine/run", json=run, headers=bob)).status_code == 401
        ran = await c.post(base + "/agent/mine/run", json=run, headers=alice)
        # a 0.x client (no protocolVersion): the outcome @ag-ui/client 0.0.59 accepts
        assert _events(ran.content)[-1]["outcome"] == {"type": "success"}
        # connect: the thread's history for its principal, nothing for another
        again = {**run, "runId": "r2", "messages": []}
        replay = _events((await c.post(base + "/agent/mine/connect", json=again, headers=alice)).content)
        assert replay[0]["type"] == "RUN_STARTED" and "Let me check with you." in json.dumps(replay)
        assert (await c.post(base + "/agent/open/connect", json=again, headers=bob)).content == b""
        # stop: a finished run, and an unknown one, are not stopped
        stop = await c.post(base + "/agent/mine/stop/t1", json={"runId": "r1"}, headers=alice)
        assert stop.status_code == 200 and stop.json() == {"stopped": False}
        unknown = await c.post(base + "/agent/nobody/run", json=run, headers=alice)
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_agent"


async def test_stop_cancels_the_callers_running_run_of_the_thread() -> None:
    tokens = {"tok-alice": "alice"}
    alice = {"Authorization": "Bearer tok-alice"}
    slow = ScriptedAgent(hang=True)  # streams until cancelled
    async with await start_sse_server({"slow": slow}, auth_token=tokens) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")
        body = {"threadId": "t9", "runId": "r9", "messages": []}

        async def stream() -> list[dict[str, Any]]:
            r = await c.post(base + "/agent/slow/run", json=body, headers={**alice, "X-AGUI-Resumable": "1"})
            return _events(r.content)

        streaming = asyncio.ensure_future(stream())
        stopped: dict[str, Any] = {}
        for _ in range(200):  # until the run is there (bounded; no timing assertion)
            stopped = (await c.post(base + "/agent/slow/stop/t9", json={"runId": "r9"}, headers=alice)).json()
            if stopped["stopped"]:
                break
            await asyncio.sleep(0.05)
        events = await streaming
    assert stopped == {"stopped": True}
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "cancelled"


async def test_connect_follows_the_threads_running_run() -> None:
    """A page reloaded mid-run: connect follows the thread's run that is still running (its ended
    runs, replayed before it, are test_info_connect_and_stop_follow_each_agents_access's)."""
    tokens = {"tok-alice": "alice"}
    alice = {"Authorization": "Bearer tok-alice", "X-AGUI-Resumable": "1"}
    agents = {"slow": ScriptedAgent(hang=True)}
    async with await start_sse_server(agents, auth_token=tokens) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")
        body = {"threadId": "t5", "runId": "r5", "messages": []}
        running = asyncio.ensure_future(c.post(base + "/agent/slow/run", json=body, headers=alice))
        seen: list[dict[str, Any]] = []
        for _ in range(200):  # bounded: until the run has streamed its first delta
            async with c.stream("POST", base + "/agent/slow/connect", json={**body, "runId": "c"}, headers=alice) as r:
                assert r.status_code == 200
                decoder = SSEDecoder()
                async for chunk in r.aiter_raw():
                    seen += [json.loads(m.data) for m in decoder.feed(chunk)]
                    if any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in seen):
                        break
            if seen:
                break
            await asyncio.sleep(0.05)
        stop = await c.post(base + "/agent/slow/stop/t5", json={"runId": "r5"}, headers=alice)
        await running
    assert [e["type"] for e in seen][:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert seen[0]["runId"] == "r5" and stop.json() == {"stopped": True}


async def test_a_page_on_another_origin_may_call_the_routes() -> None:
    """CORS (``cors_origins``): the browser's preflight of each route is answered and /info carries
    the CORS headers, with one agent and with several (a page served from a dev server)."""
    page = "http://127.0.0.1:5173"
    preflight = {"Origin": page, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    for agents, agent_id in ((ScriptedAgent(deltas=1), "default"), ({"a": ScriptedAgent(deltas=1), "b": _booker()}, "b")):
        async with await start_sse_server(agents, cors_origins=[page]) as srv, httpx.AsyncClient(timeout=30) as c:
            base = srv.url.rstrip("/")
            for route in ("/info", f"/agent/{agent_id}/run", f"/agent/{agent_id}/connect", f"/agent/{agent_id}/stop/t1"):
                answer = await c.options(base + route, headers=preflight)
                assert answer.status_code == 204, route
                assert "Content-Type" in answer.headers["Access-Control-Allow-Headers"]
            info = await c.get(base + "/info", headers={"Origin": page})
            assert info.headers["Access-Control-Allow-Origin"] == page and agent_id in info.json()["agents"]
            other = await c.options(base + "/info", headers={**preflight, "Origin": "http://elsewhere.test"})
            assert other.status_code == 403


async def test_connect_after_a_cut_mid_message_replays_a_stream_the_verifier_accepts() -> None:
    """A page reloaded while a run streams (issue 31): its stream closes without asking to resume,
    the run ends in RUN_ERROR with its text message still open. The kept history (compactEvents'
    order) has that message after the RUN_ERROR; connect must replay it before, closed, so a
    client's verifier (@ag-ui/client 0.0.59, the project's Verifier) takes it and the page shows
    the partial text."""
    from agui_engine.protocol.accumulator import Accumulator
    from agui_engine.protocol.codec import decode_event
    from agui_engine.protocol.verify import Verifier

    alice = {"Authorization": "Bearer tok-alice"}  # a thread's history is its principal's
    agents = {"default": ScriptedAgent(hang=True)}
    async with await start_sse_server(agents, auth_token={"tok-alice": "alice"}) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")
        body = {"threadId": "t31", "runId": "r31", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
        seen: list[dict[str, Any]] = []
        async with c.stream("POST", base + "/agent/default/run", json=body, headers=alice) as r:
            decoder = SSEDecoder()
            async for chunk in r.aiter_raw():
                seen += [json.loads(m.data) for m in decoder.feed(chunk)]
                if any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in seen):
                    break  # the page goes away after the first fragment
        replay: list[dict[str, Any]] = []
        for _ in range(400):  # bounded: until the cut run is kept in the thread's history
            got = await c.post(base + "/agent/default/connect", json={**body, "runId": "c", "messages": []}, headers=alice)
            replay = _events(got.content)
            if any(e["type"] == "RUN_ERROR" for e in replay):
                break
            await asyncio.sleep(0.05)
    types = [e["type"] for e in replay]
    assert types[-1] == "RUN_ERROR" and "TEXT_MESSAGE_END" in types  # the open message closed before the error
    verifier, acc = Verifier(), Accumulator()
    for e in replay:
        acc.apply_all(verifier.feed(decode_event(json.dumps(e))))
    verifier.close()
    partial = seen[[e["type"] for e in seen].index("TEXT_MESSAGE_CONTENT")]["delta"]
    assert [m["content"] for m in acc.messages if m["role"] == "assistant"] == [partial]
