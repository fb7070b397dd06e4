"""The MCP Apps proxy reaches only what the principal's runs were shown (spec/mcp.md, "Security model").

A real gateway on loopback (SSE, and WebSocket) with per-client bearer tokens, in front of an
``LLMAgent`` whose scripted model shows the counter app when asked to, and the tests' own MCP server
(``tests.mcp_apps_server``) over stdio, which writes a journal of every tool call and resource read its
handlers answer: the server's own side of what reached it. Alice is shown the app and may read its
``ui://`` resource and call its app-only tool; Bob, whose run showed nothing, is refused both; neither
reads a ``ui://`` resource never shown nor a resource that is not ``ui://``; and no refused request
reaches the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_engine.adapters import MCPServer, mcp_connections
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agui_engine.genui.mcp_apps import NOT_UI_RESOURCE_ERROR
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunAgentInput, UserMessage
from tests.mcp_apps_server import APP_URI, NOTES_URI, PLAIN_URI

TOKENS = {"token-alice": "alice", "token-bob": "bob"}
NOT_SHOWN_READ = {"error": "Error: MCP resource not shown in this principal's runs (the UI proxy reads only "
                           "the ui:// resources of apps they showed)"}


def _not_shown(method: str) -> dict[str, str]:
    return {"error": f"Error: MCP {method} refused: no app of this server was shown in this principal's runs"}


def _first_turn(messages: list[Any]) -> ScriptedTurn | str:
    """The counter app for "show it", a plain answer to anything else."""
    last = messages[-1]
    text = last.get("content") if isinstance(last, dict) else getattr(last, "content", None)
    if text == "show it":
        return ScriptedTurn(tool_calls=(ScriptedCall("show_counter", {"start": 3}),))
    return "nothing to show"


def _server(journal: Path) -> MCPServer:
    return MCPServer(transport="stdio", command=sys.executable, args=("-m", "tests.mcp_apps_server", "stdio"),
                     server_id="counter", env={"MCP_APPS_SERVER_JOURNAL": str(journal)},
                     connect_timeout=120.0)


def _agent(journal: Path) -> LLMAgent:
    return LLMAgent(ScriptedModel([_first_turn, "shown"]), mcp_servers=[_server(journal)])


def _turn(run_id: str, text: str) -> bytes:
    return encode_event(RunAgentInput(thread_id=f"t-{run_id}", run_id=run_id,
                                      messages=[UserMessage(id="u1", content=text)]))


def _proxied(run_id: str, method: str, **params: Any) -> bytes:
    request = {"serverId": "counter", "method": method, **({"params": params} if params else {})}
    return encode_event(RunAgentInput(thread_id=f"mcp-app-{run_id}", run_id=run_id, messages=[],
                                      forwarded_props={"__proxiedMCPRequest": request}))


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def _journal(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# the stdio server is a new Python process importing the MCP SDK (seconds on a busy machine)
@pytest.mark.timeout(180)
def test_only_the_principal_shown_an_app_reads_its_resource_and_calls_its_app_only_tool(tmp_path: Path) -> None:
    from agui_engine.transports import start_sse_server

    journal = tmp_path / "journal.jsonl"
    n = iter(range(1000))

    async def go() -> dict[str, Any]:
        gateway = await start_sse_server(_agent(journal), auth_token=TOKENS)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}

        async def post(who: str, body: bytes) -> list[dict[str, Any]]:
            response = await http.post(gateway.url, content=body,
                                       headers={**headers, "Authorization": f"Bearer token-{who}"})
            assert response.status_code == 200, response.text
            return _events(response.text)

        async def ask(who: str, method: str, **params: Any) -> Any:
            events = await post(who, _proxied(f"p-{who}-{next(n)}", method, **params))
            assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_FINISHED"], events
            return events[-1]["result"]

        out: dict[str, Any] = {}
        try:
            async with httpx.AsyncClient(timeout=150) as http:
                # before any run, nobody reaches the server (not even its app-only tool)
                out["before"] = await ask("alice", "tools/call", name="increment", arguments={"count": 1})
                out["bob_turn"] = await post("bob", _turn("bob-1", "hello"))
                out["alice_turn"] = await post("alice", _turn("alice-1", "show it"))
                out["after_runs"] = _journal(journal)
                out["alice"] = {
                    "read": await ask("alice", "resources/read", uri=APP_URI),
                    "call": await ask("alice", "tools/call", name="increment", arguments={"count": 41}),
                    "hidden": await ask("alice", "tools/call", name="hidden_app", arguments={}),
                    "ping": await ask("alice", "ping"),
                    "never_shown": await ask("alice", "resources/read", uri=PLAIN_URI),
                    "not_ui": await ask("alice", "resources/read", uri=NOTES_URI),
                }
                out["bob"] = {
                    "read": await ask("bob", "resources/read", uri=APP_URI),
                    "call": await ask("bob", "tools/call", name="increment", arguments={"count": 41}),
                    "hidden": await ask("bob", "tools/call", name="hidden_app", arguments={}),
                    "ping": await ask("bob", "ping"),
                    "log": await ask("bob", "notifications/message", level="info", data="hi"),
                }
                # Bob's own run that shows the app: from then on he may reach it too
                out["bob_shown"] = await post("bob", _turn("bob-2", "show it"))
                out["bob_after"] = await ask("bob", "resources/read", uri=APP_URI)
                return out
        finally:
            await gateway.close()
            await mcp_connections().aclose()

    out = asyncio.run(go())
    assert out["before"] == _not_shown("tools/call")
    assert not any(e["type"] == "ACTIVITY_SNAPSHOT" for e in out["bob_turn"])
    shown = [e for e in out["alice_turn"] if e["type"] == "ACTIVITY_SNAPSHOT"]
    assert len(shown) == 1 and shown[0]["content"]["resourceUri"] == APP_URI
    assert out["after_runs"] == [{"tool": "show_counter"}]

    alice = out["alice"]
    assert alice["read"]["contents"][0]["uri"] == APP_URI and "counter" in alice["read"]["contents"][0]["text"]
    assert alice["call"]["structuredContent"] == {"count": 42}  # increment: visibility ["app"]
    assert alice["hidden"]["content"][0]["text"] == "hidden"
    assert alice["ping"] == {}
    assert alice["never_shown"] == NOT_SHOWN_READ  # ui://counter/plain.html exists, but no run showed it
    assert alice["not_ui"] == {"error": NOT_UI_RESOURCE_ERROR}

    bob = out["bob"]
    assert bob["read"] == NOT_SHOWN_READ
    assert bob["call"] == bob["hidden"] == _not_shown("tools/call")
    assert bob["ping"] == _not_shown("ping")
    assert bob["log"] == _not_shown("notifications/message")
    assert any(e["type"] == "ACTIVITY_SNAPSHOT" for e in out["bob_shown"])
    assert out["bob_after"]["contents"][0]["uri"] == APP_URI

    # the server's side: exactly what was allowed reached it, in order; no refused request did
    assert _journal(journal) == [
        {"tool": "show_counter"},
        {"read": APP_URI}, {"tool": "increment"}, {"tool": "hidden_app"},
        {"tool": "show_counter"}, {"read": APP_URI},
    ]


@pytest.mark.timeout(180)
def test_over_the_websocket_gateway_and_with_auth_off_the_same_record_applies(tmp_path: Path) -> None:
    """With auth off every client is one anonymous principal: nothing before a run showed the app,
    its resource and tools after it (whichever connection asks); still no other resource."""
    from agui_engine.transports import WebSocketAgent, start_websocket_server

    journal = tmp_path / "journal.jsonl"

    def proxied(run_id: str, method: str, **params: Any) -> RunAgentInput:
        request = {"serverId": "counter", "method": method, **({"params": params} if params else {})}
        return RunAgentInput(thread_id=f"mcp-app-{run_id}", run_id=run_id, messages=[],
                             forwarded_props={"__proxiedMCPRequest": request})

    async def go() -> list[Any]:
        gateway = await start_websocket_server(_agent(journal))
        try:
            async def result(input: RunAgentInput) -> Any:
                events = [e async for e in WebSocketAgent(gateway.url).run(input)]
                return events[-1].result

            before = await result(proxied("w1", "resources/read", uri=APP_URI))
            turn = [e async for e in WebSocketAgent(gateway.url).run(RunAgentInput(
                thread_id="t", run_id="turn", messages=[UserMessage(id="u1", content="show it")]))]
            assert any(type(e).__name__ == "ActivitySnapshotEvent" for e in turn)
            return [before,
                    await result(proxied("w2", "resources/read", uri=APP_URI)),
                    await result(proxied("w3", "tools/call", name="increment", arguments={"count": 9})),
                    await result(proxied("w4", "resources/read", uri=PLAIN_URI)),
                    await result(proxied("w5", "resources/read", uri=NOTES_URI))]
        finally:
            await gateway.close()
            await mcp_connections().aclose()

    before, read, call, plain, notes = asyncio.run(go())
    assert before == NOT_SHOWN_READ
    assert read["contents"][0]["uri"] == APP_URI
    assert call["structuredContent"] == {"count": 10}
    assert plain == NOT_SHOWN_READ and notes == {"error": NOT_UI_RESOURCE_ERROR}
    assert _journal(journal) == [{"tool": "show_counter"}, {"read": APP_URI}, {"tool": "increment"}]


@pytest.mark.timeout(180)
async def test_an_app_in_a_thread_read_back_after_a_restart_is_shown_again_to_its_reader_only(tmp_path: Path) -> None:
    """A gateway restarted on the same SQLite store remembers no app (the record is in memory):
    Alice's proxied read is refused until she reads her thread's kept history, whose app then counts
    as shown to her again; Bob, who may not read that thread (404), stays refused."""
    from agui_engine.transports.open_threads import open_thread_store
    from agui_engine.transports.runs import RunRegistry
    from agui_engine.transports.sse_server import start_sse_server

    journal, db = tmp_path / "journal.jsonl", f"sqlite:{tmp_path / 'threads.sqlite3'}"
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    alice, bob = {"Authorization": "Bearer token-alice"}, {"Authorization": "Bearer token-bob"}
    runs = iter(range(1000))

    async def result(http: httpx.AsyncClient, url: str, who: dict[str, str]) -> Any:
        """The answer to a proxied read of the app's resource by ``who``."""
        body = _proxied(f"r-{next(runs)}", "resources/read", uri=APP_URI)
        response = await http.post(url, content=body, headers={**headers, **who})
        assert response.status_code == 200, response.text
        return _events(response.text)[-1]["result"]

    async with httpx.AsyncClient(timeout=150) as http:
        for restart in (False, True):
            store = await open_thread_store(db)
            gateway = await start_sse_server(registry=RunRegistry(_agent(journal), threads=store), auth_token=TOKENS)
            try:
                if not restart:
                    shown = await http.post(gateway.url, content=_turn("alice-1", "show it"),
                                            headers={**headers, **alice})
                    assert '"ACTIVITY_SNAPSHOT"' in shown.text
                    assert (await result(http, gateway.url, alice))["contents"][0]["uri"] == APP_URI
                    continue
                assert await result(http, gateway.url, alice) == NOT_SHOWN_READ  # a new process
                theirs = await http.get(gateway.url + "threads/t-alice-1", headers=bob)
                assert theirs.status_code == 404
                assert await result(http, gateway.url, bob) == NOT_SHOWN_READ
                history = await http.get(gateway.url + "threads/t-alice-1", headers=alice)
                assert history.status_code == 200 and any(e["type"] == "ACTIVITY_SNAPSHOT" for e in history.json())
                assert (await result(http, gateway.url, alice))["contents"][0]["uri"] == APP_URI
                assert await result(http, gateway.url, bob) == NOT_SHOWN_READ
            finally:
                await gateway.close()
                await store.aclose()
                await mcp_connections().aclose()
    assert _journal(journal) == [{"tool": "show_counter"}, {"read": APP_URI}, {"read": APP_URI}]
