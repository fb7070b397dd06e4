"""A2UI data bound to server resources, end to end: a real SSE gateway serving ``LLMAgent(a2ui=True,
resources=[...])`` over a ScriptedModel whose ``render_a2ui`` call binds data paths with
``{"$resource": {resourceId, params}}``. The Python ``Thread`` (``a2ui_data``) and agui-engine.js's
``a2uiData`` (under node, ``tests/js/a2ui_data.mjs``) both end with the resolver's data at those paths;
a permission-denied resource is a typed error on both clients; an unknown resource id is refused to the
model (the tool result names the JSON path) and no surface is shown.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from agui_engine import LLMAgent, Thread
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, user_text
from agui_engine.demo.weather_model import WEATHER_CURRENT
from agui_engine.genui.resources import Resource, ResourcePermissionError
from agui_engine.transports import SSEAgent, start_sse_server

from .test_agui_engine_js import node_script

TOKENS = {"alice-token": "alice", "bob-token": "bob"}


def bound(resource_id: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"$resource": {"resourceId": resource_id, "params": params}}


def surface(data: dict[str, Any]) -> dict[str, Any]:
    return {"surfaceId": "weather-card",
            "components": [{"id": "root", "component": "Column", "children": ["title", "city", "note"]},
                           {"id": "title", "component": "Text", "text": {"path": "/title"}},
                           {"id": "city", "component": "Text", "text": {"path": "/weather/city"}},
                           {"id": "note", "component": "Text", "text": {"path": "/account/note"}}],
            "data": data}


GOOD = surface({"title": "Now", "weather": bound("weather.current", {"city": "Paris"}),
                "account": bound("test.private", {})})
UNKNOWN = surface({"title": "Now", "weather": bound("weather.nowhere", {"city": "Paris"})})


def agent(calls: Counter[str]) -> LLMAgent:
    def private(params: Any, identity: str | None) -> dict[str, Any]:
        calls["test.private"] += 1
        return {"note": f"for {identity}"}

    def first(messages: Any) -> ScriptedTurn:
        args = UNKNOWN if "unknown" in user_text(messages) else GOOD
        return ScriptedTurn(tool_calls=(ScriptedCall("render_a2ui", args),))

    private_resource = Resource("test.private", private, permission=lambda identity, params: identity == "alice")
    return LLMAgent(ScriptedModel([first, "done"]), a2ui=True, resources=[WEATHER_CURRENT, private_resource])


def client(url: str, token: str) -> SSEAgent:
    return SSEAgent(url, headers={"Authorization": f"Bearer {token}"})


async def test_python_thread_and_js_fill_resource_bound_paths() -> None:
    calls: Counter[str] = Counter()
    server = await start_sse_server(agent(calls), port=0, auth_token=TOKENS)
    try:
        alice = Thread(client(server.url, "alice-token"), thread_id="t-alice")
        await alice.send("show the weather")
        shown = alice.a2ui_surfaces["weather-card"]
        operations = shown["operations"]
        # on the wire the binding is plain data in the updateDataModel op (the middleware's shape)
        assert operations[2]["updateDataModel"]["value"]["weather"] == bound("weather.current", {"city": "Paris"})
        data = await alice.a2ui_data("weather-card")
        assert data["title"] == "Now"
        assert data["weather"]["city"] == "Paris" and data["weather"]["temperature"] == 11.2
        assert data["account"] == {"note": "for alice"}

        out = json.loads(await node_script("a2ui_data.mjs", server.url, json.dumps(operations),
                                           "alice-token", "bob-token"))
        assert [(b["path"], b["resourceId"]) for b in out["bindings"]] == [
            ("/weather", "weather.current"), ("/account", "test.private")]
        assert out["results"]["alice-token"] == {"ok": True, "data": data}, "JS and Python fill the same model"
        refused = out["results"]["bob-token"]
        assert refused == {"ok": False, "error": {"name": "QueryError", "isQueryError": True, "status": 403,
                                                  "code": "forbidden"}}

        bob = Thread(client(server.url, "bob-token"), thread_id="t-bob")
        await bob.send("show the weather")
        with pytest.raises(ResourcePermissionError, match="test.private"):
            await bob.a2ui_data("weather-card")
        assert calls["test.private"] == 2  # alice's two fills; bob was refused before the resolver
    finally:
        await server.close()


async def test_an_unknown_resource_id_is_refused_to_the_model() -> None:
    server = await start_sse_server(agent(Counter()), port=0, auth_token=TOKENS)
    try:
        thread = Thread(client(server.url, "alice-token"), thread_id="t-unknown")
        await thread.send("an unknown resource please")
    finally:
        await server.close()
    assert thread.a2ui_surfaces == {}, "a refused surface is never shown"
    [result] = [m for m in thread.messages if m.get("role") == "tool"]
    assert "[unknown_resource] data.weather.$resource.resourceId" in result["content"]
    assert "/data/weather/$resource/resourceId" in result["content"]
    assert "weather.nowhere" in result["content"] and "weather.current" in result["content"]
    activity = [m for m in thread.messages if m.get("role") == "activity"]
    assert activity[-1]["content"]["status"] == "retrying"
