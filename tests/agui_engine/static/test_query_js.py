"""agui_engine/static/agui-engine.js's ``query()`` and ``bindQuery()`` in real Node against the real gateway.

The SSE gateway runs on loopback with the demo's ``weather.current`` resource and three resources of
the test's own (``test.private``: only ``alice`` may see it; ``test.failing``: its resolver raises;
``test.slow``: sleeps ``ms``, 1 s timeout; ``test.busy``: one query at a time, 0.1 s queue). ``tests/js/query.mjs`` calls ``query()`` for each
outcome the endpoint has and drives ``bindQuery()`` with a store fed component events as a stream
would: the query starts once the resourceId and params are complete, deltas of other props do not
query again, an update queries when it ends, a superseded slow query is aborted (or, when allowed to
run on, its late answer is ``stale`` and never applied). The resolvers count their calls, so
"queried once" is checked on the server as well.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from agui_engine.cli.demo import demo_agent
from agui_engine.demo.weather_model import WEATHER_CURRENT
from agui_engine.genui.resources import Resource
from agui_engine.transports import start_sse_server
from agui_engine.transports.data import ResourceBroker
from agui_engine.transports.server_options import DataOptions

from .test_agui_engine_js import node_script

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
#: How long a query waits for a slot of test.busy (max_concurrency=1, 0.5 s per query) before 503.
QUEUE_TIMEOUT = 0.1


def own_resources(calls: Counter[str]) -> list[Resource]:
    def private(params: Any, identity: str | None) -> dict[str, Any]:
        calls["test.private"] += 1
        return {"secret": 42, "for": identity}

    def failing(params: Any, identity: str | None) -> Any:
        calls["test.failing"] += 1
        raise RuntimeError("database password is hunter2")  # never in the answer

    async def slow(params: Any, identity: str | None) -> dict[str, Any]:
        calls[f"test.slow:{params['tag']}"] += 1
        await asyncio.sleep(params["ms"] / 1000)
        return {"tag": params["tag"]}

    async def busy(params: Any, identity: str | None) -> dict[str, Any]:
        calls["test.busy"] += 1
        await asyncio.sleep(0.5)
        return {"busy": True}

    slow_params = {"type": "object", "properties": {"ms": {"type": "integer"}, "tag": {"type": "string"}},
                   "required": ["ms", "tag"]}
    return [
        Resource("test.private", private, permission=lambda identity, params: identity == "alice"),
        Resource("test.failing", failing),
        Resource("test.slow", slow, params=slow_params, timeout=1.0),
        Resource("test.busy", busy, max_concurrency=1),
    ]


async def run_script() -> tuple[dict[str, Any], Counter[str]]:
    calls: Counter[str] = Counter()
    server = await start_sse_server(demo_agent(), port=0, auth_token=TOKENS,
                                    data=DataOptions(resources=ResourceBroker([WEATHER_CURRENT, *own_resources(calls)],
                                                             queue_timeout=QUEUE_TIMEOUT)))
    try:
        out = await node_script("query.mjs", server.url, "alice-token")
    finally:
        await server.close()
    return json.loads(out), calls


async def test_query_and_bind_query_against_the_gateway() -> None:
    result, calls = await run_script()
    c = result["calls"]

    # query(): the resolver's data, or a QueryError with the gateway's status, code and path
    assert c["ok"]["ok"] and c["ok"]["data"]["city"] == "Paris" and c["ok"]["data"]["temperature"] == 11.2
    assert c["headersFunction"]["ok"] and c["headersFunction"]["data"]["city"] == "Tokyo"
    assert c["allowed"] == {"ok": True, "data": {"secret": 42, "for": "alice"}, "ms": c["allowed"]["ms"]}

    def refused(name: str) -> tuple[Any, ...]:
        e = c[name]["error"]
        assert not c[name]["ok"] and e["isQueryError"] and e["name"] == "QueryError", c[name]
        return e["status"], e["code"], e["path"]

    assert refused("unknown") == (404, "unknown_resource", None)
    assert refused("invalid") == (422, "invalid_params", "$.params.city")
    assert refused("forbidden") == (403, "forbidden", None)
    assert refused("unauthenticated")[0] == 401
    assert refused("failing") == (502, "resource_failed", None)
    assert "hunter2" not in c["failing"]["error"]["message"]
    assert refused("timeout") == (504, "resource_timeout", None)
    assert refused("network") == (0, "network", None)
    assert c["busyFirst"]["ok"] and refused("busy") == (503, "resource_busy", None)
    assert c["busy"]["error"]["retryAfter"] == 1  # the Retry-After header, in seconds
    # aborting: rejected with the AbortError within a fraction of the resolver's 1.5 s
    assert c["aborted"]["error"]["name"] == "AbortError" and c["aborted"]["ms"] < 1000
    assert c["badId"]["error"]["name"] == "TypeError"
    assert calls["test.private"] == 1 and calls["test.failing"] == 1  # bob was refused before the resolver

    # bindQuery(): nothing until resourceId and params are both done, then exactly one query
    b = result["binding"]
    assert b["beforeDone"] == 0 and b["seen"][:5] == [0] * 5
    assert b["seen"][5] == 1 and b["seen"][6] == 1 and b["seen"][7] == 1, "deltas of the note did not query"
    assert b["c1First"]["status"] == "ok" and b["c1First"]["data"]["city"] == "Paris"
    assert b["afterEnd"] == 1, "the end with the same params did not query again"
    assert b["duringUpdate"] == 1, "an update's params are queried only when it ends"
    assert b["c1"] == {"status": "ok", "data": {**b["c1"]["data"], "city": "Tokyo"}}
    assert b["c2"]["status"] == "error" and b["c2"]["error"]["status"] == 422
    assert b["c2"]["error"]["path"] == "$.params.city"
    assert [(e["componentId"], e["params"], e["status"]) for e in b["log"][:3]] == [
        ("c1", {"city": "Paris"}, "ok"), ("c1", {"city": "Tokyo"}, "ok"), ("c2", {"city": 7}, "error")]
    assert b["c4Queries"] == 1, "params in another key order: the same query"
    # on the server: that one, and one of the second binding, which queried the components already there
    assert calls["test.slow:reorder"] == 2
    # a superseded slow query: aborted by default; allowed to run on, its late answer is stale
    assert b["aborting"]["result"] == {"tag": "new", "status": "ok"}
    assert [(e["tag"], e["status"]) for e in b["aborting"]["log"]] == [("old", "aborted"), ("new", "ok")]
    assert b["keep"]["result"] == {"tag": "new", "status": "ok"}
    assert [(e["tag"], e["status"]) for e in b["keep"]["log"]] == [("old", "stale"), ("new", "ok")]
    assert calls["test.slow:old"] == 2 and calls["test.slow:new"] == 2  # one per binding, on the server


async def test_bind_query_on_a_render_ui_tree_against_the_gateway() -> None:
    """``tests/js/tree_query.mjs`` streams a ``generative-ui`` tree of two bound WeatherCards: each node is
    queried once it is ``done`` (keyed by tree id + node id), never for other nodes' changes or the tree's end
    with the same params, and again when its own params change."""
    server = await start_sse_server(demo_agent(), port=0, auth_token=TOKENS,
                                    data=DataOptions(resources=ResourceBroker([WEATHER_CURRENT])))
    try:
        b = json.loads(await node_script("tree_query.mjs", server.url, "alice-token"))
    finally:
        await server.close()
    assert b["beforeDone"] == 0 and b["seen"][:5] == [0] * 5, "an incomplete node was queried"
    assert b["seen"][5] == 1 and b["beforeParis"] == 1, "other nodes' changes queried Tokyo again"
    assert b["afterEnd"] == 2, "the tree's end with the same params queried again"
    assert b["tokyo"]["status"] == "ok" and b["tokyo"]["nodeId"] == "0/0"
    assert b["tokyo"]["data"]["city"] == "Tokyo" and b["tokyo"]["data"]["temperature"] == 18.5
    assert b["paris"]["data"]["city"] == "London" and b["whole"] is None
    assert [(e["componentId"], e["nodeId"], e["params"]["city"], e["status"]) for e in b["log"]] == [
        ("tree-1", "0/0", "Tokyo", "ok"), ("tree-1", "0/1", "Paris", "ok"), ("tree-1", "0/1", "London", "ok")]
