"""RedisEventLog against a real redis-server the test starts, kills and restarts
(tests/redis_server.py): readiness and run ownership across a Redis restart (issue 22,
hole 4). Two gateway nodes on loopback share the log; the runs are real HTTP streams."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from agui_engine.protocol.errors import UsageError
from agui_engine.transports.redislog import RedisEventLog
from agui_engine.transports.runs import RunRegistry
from agui_engine.transports.sse_server import start_sse_server

from ..redis_server import RedisServer
from .scripted import ScriptedAgent, make_input

#: Every wait here ends by this many seconds (a loaded CI machine).
DEADLINE = 30.0
JSON = {"Content-Type": "application/json", "X-AGUI-Resumable": "1"}


class _Node:
    def __init__(self, log: RedisEventLog, server: Any) -> None:
        self.log = log
        self.server = server
        self.url: str = server.url


@pytest.fixture
async def restartable() -> AsyncIterator[tuple[RedisServer, list[_Node]]]:
    """Its own redis-server (the test kills it) and two gateway nodes on it."""
    redis = RedisServer()
    redis.start()
    nodes: list[_Node] = []
    try:
        agent = ScriptedAgent(deltas=30, pause=0.05)  # ~1.5 s per run: each spans a heartbeat
        for _ in range(2):
            log = RedisEventLog(redis.url, prefix="restart:")
            await log.connect()
            nodes.append(_Node(log, await start_sse_server(registry=RunRegistry(agent, log=log))))
        yield redis, nodes
    finally:
        for node in nodes:
            await node.server.close()
            await node.log.aclose()
        redis.stop()


def _last_event(raw: bytes) -> dict[str, Any]:
    data = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    return json.loads(data[-1]) if data else {}


async def _run_and_follow(c: httpx.AsyncClient, owner: _Node, follower: _Node, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start a run on ``owner``, follow it from the start on ``follower``: both terminal events."""
    body = msgspec.json.encode(make_input(run_id, "go"))
    async with c.stream("POST", owner.url, content=body, headers=JSON) as r:
        assert r.status_code == 200, await r.aread()
        key = {"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]}
        follow = asyncio.create_task(c.get(follower.url + f"runs/{run_id}", headers={**key, "Last-Event-ID": f"{run_id}:0"}))
        own = await r.aread()
    followed = await follow
    assert followed.status_code == 200, (followed.status_code, followed.text)
    return _last_event(own), _last_event(followed.content)


async def _ready_again(c: httpx.AsyncClient, node: _Node, probe: aioredis.Redis) -> None:
    """Poll /readyz until 200; when it says 200, the node's heartbeat key is in Redis."""
    end = time.monotonic() + DEADLINE
    while True:
        r = await c.get(node.url + "readyz")
        if r.status_code == 200:
            assert await probe.exists(f"restart:node:{node.log.node_id}"), "ready before its heartbeat was written"
            return
        assert time.monotonic() < end, "the node did not become ready again"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("outage", [0.0, 1.5], ids=["quick-restart", "outage"])
async def test_after_a_redis_restart_readyz_waits_for_the_heartbeat_and_no_new_run_is_owner_lost(
    restartable: tuple[RedisServer, list[_Node]], outage: float
) -> None:
    """Kill redis-server and restart it (empty, same port) at once, or after 1.5 s
    (the heartbeat fails meanwhile). Each node's /readyz is 503 until its heartbeat
    is in Redis again; every run started after its node said 200 -- owned on one
    node, followed from the other -- ends with RUN_FINISHED on both, never
    RUN_ERROR{owner_lost} (before the fix: owner_lost after 5-9 events)."""
    redis, nodes = restartable
    probe = aioredis.Redis.from_url(redis.url)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(timeout=DEADLINE, limits=limits) as c:
            for node in nodes:
                assert (await c.get(node.url + "readyz")).status_code == 200
            redis.stop()
            if outage:
                await asyncio.sleep(outage)
                for node in nodes:
                    assert (await c.get(node.url + "readyz")).status_code == 503
            redis.start()
            for node in nodes:
                await _ready_again(c, node, probe)
            a, b = nodes
            runs = [_run_and_follow(c, a, b, f"after-{i}") for i in range(4)]
            runs += [_run_and_follow(c, b, a, f"back-{i}") for i in range(4)]
            ends = await asyncio.gather(*runs)
    finally:
        await probe.aclose()
    for own, followed in ends:
        assert own.get("type") == "RUN_FINISHED", own
        assert followed.get("type") == "RUN_FINISHED", followed


async def test_a_run_id_another_node_has_is_refused_when_created_with_other_runs_of_threads(
    redis_logs: Callable[..., Awaitable[RedisEventLog]],
) -> None:
    """Creates of one loop pass share a pipeline, where a thread's live-run SET follows
    each create: every create must read its own reply (a duplicate id was accepted)."""
    a, b = await redis_logs(), await redis_logs()
    await a.open_run("dup-1", "thread-a")
    fresh, dup = await asyncio.gather(
        b.open_run("fresh-1", "thread-b"), b.open_run("dup-1", "thread-c"), return_exceptions=True
    )
    assert fresh is None
    assert isinstance(dup, UsageError) and "already exists" in str(dup), dup
    assert "dup-1" not in set(b.owned())
    assert await b.live_run("thread-b") == "fresh-1"
