"""Several agents behind one SSE gateway (transports/agents_app.py, and the ASGI front end's
``create_asgi_app({id: agent})``, transports/asgi_server.py): ``create_app({id: agent})``,
each agent at its own path with its own runs, capabilities and access, on a real server on loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agui_engine.demo.scripted import ScriptedModel
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import SSEDecoder
from agui_engine.protocol.errors import UsageError
from agui_engine.transports.agents_app import AllowedTokens, ServedAgent
from agui_engine.transports.sse_server import create_app, start_sse_server

from .scripted import ScriptedAgent

pytestmark = pytest.mark.usefixtures("front_end")  # aiohttp's create_app and create_asgi_app under uvicorn


def _says(text: str) -> LLMAgent:
    return LLMAgent(ScriptedModel([text]))


def _input(run_id: str = "r1") -> dict[str, Any]:
    return {"threadId": "t1", "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}]}


def _text(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    d = SSEDecoder()
    events = [json.loads(m.data) for m in d.feed(r.content) + d.close()]
    assert events[-1]["type"] == "RUN_FINISHED", events
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_each_agent_answers_at_its_own_path_with_its_own_runs_and_capabilities() -> None:
    agents = {"alpha": _says("from alpha"), "beta": ServedAgent(agent=_says("from beta"), path="/b/eta")}
    async with await start_sse_server(agents) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")
        # the same run id on two agents: two runs, one per agent's registry
        assert _text(await c.post(base + "/alpha", json=_input())) == "from alpha"
        beta = await c.post(base + "/b/eta", json=_input())
        assert _text(beta) == "from beta"
        assert (await c.post(base + "/beta", json=_input())).status_code == 404  # beta lives at its path
        caps = (await c.get(base + "/alpha/capabilities")).json()
        assert caps["transport"]["streaming"] is True
        # the thread's events, as beta's history keeps them (read with the run's key)
        history = (await c.get(base + "/b/eta/threads/t1", headers={"X-AGUI-Run-Key": beta.headers["X-AGUI-Run-Key"]})).text
        assert "from beta" in history and "from alpha" not in history
        ready = (await c.get(base + "/readyz")).json()
        assert ready["ready"] is True and set(ready["agents"]) == {"alpha", "beta"}
        assert (await c.get(base + "/alpha/readyz")).json()["ready"] is True


async def test_an_agent_with_principals_answers_only_their_tokens() -> None:
    tokens = {"tok-alice": "alice", "tok-bob": "bob"}
    agents = {"open": ScriptedAgent(deltas=1), "alice-only": ServedAgent(agent=_says("hi alice"), principals=frozenset({"alice"}))}
    async with await start_sse_server(agents, auth_token=tokens) as srv, httpx.AsyncClient(timeout=30) as c:
        base = srv.url.rstrip("/")

        async def post(agent: str, token: str) -> httpx.Response:
            return await c.post(f"{base}/{agent}", json=_input(f"{agent}-{token}"), headers={"Authorization": f"Bearer {token}"})

        assert _text(await post("alice-only", "tok-alice")) == "hi alice"
        refused = await post("alice-only", "tok-bob")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert (await post("open", "tok-bob")).status_code == 200
        # the view is live: a principal added to the tokens (a SIGHUP reload) is admitted at once
        tokens["tok-alice-2"] = "alice"
        assert (await post("alice-only", "tok-alice-2")).status_code == 200


def test_allowed_tokens_is_a_filtered_live_view() -> None:
    tokens = {"a": "alice", "b": "bob"}
    view = AllowedTokens(tokens, {"alice"})
    assert dict(view) == {"a": "alice"} and len(view) == 1 and "b" not in view
    tokens["c"] = "alice"
    assert sorted(view) == ["a", "c"]


@pytest.mark.parametrize(("agents", "keywords", "message"), [
    ({}, {}, r"^create_app: the mapping of agents is empty"),
    ({"a b": ScriptedAgent()}, {}, r"^agent id 'a b': use letters, digits"),
    ({"a": ScriptedAgent(), "b": ServedAgent(agent=ScriptedAgent(), path="/a/")}, {},
     r"^agents 'a' and 'b' are both at /a: give each its own path"),
    ({"a": ServedAgent(agent=ScriptedAgent(), path="weather")}, {}, r"^agent 'a': path 'weather' must start with '/'"),
    ({"a": ServedAgent(agent=ScriptedAgent(), principals=frozenset({"x"}))}, {"auth_token": "shared"},
     r"^agent 'a' names principals, which needs tokens by principal"),
    ({"a": ScriptedAgent()}, {"log": object()}, r"^create_app: log= is for one agent"),
])
def test_a_bad_mapping_is_one_usage_error(agents: dict[str, Any], keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        create_app(agents, **keywords)
