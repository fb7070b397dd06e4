"""Data queries: what the gateway's query path costs, side by side in one run.

Group ``data-query-inprocess`` (one event loop, no network), each call resolving the demo's
``weather.current`` for one city:

* ``ours`` -- ``ResourceBroker.query`` answering from its cache (the common case: a card
  re-rendered, a page re-opened within the TTL): lookup, params validation, key, bytes;
* ``miss-sync`` -- the same query on a resource without a cache: the sync resolver runs in a
  worker thread (the thread hop is what keeps a slow resolver from blocking the loop);
* ``miss-async`` -- the same with an ``async def`` resolver (no thread hop);
* ``direct`` -- the floor: calling the resolver and encoding its result, nothing else.

Group ``data-query-http``: the same query over ``POST /data/query`` on a loopback SSE gateway
(a persistent httpx client, the server in its own thread): ``ours`` answered from the cache,
``miss-sync`` resolved each time.

Run: ``python -m pytest benchmarks/bench_data_query.py --benchmark-enable``; the summary
prints each member's median as a ratio to ``ours``. In CI (``--benchmark-disable``) each runs
once and only the answers are checked; timing is never asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.demo.weather_model import WEATHER_PARAMS_SCHEMA, weather_current
from agui_engine.genui.resources import Resource, ResourceRegistry
from agui_engine.transports.data import ResourceBroker
from agui_engine.transports.server_options import DataOptions
from agui_engine.transports.sse_server import start_sse_server
from tests.transports.loop_thread import LoopThread

PARAMS = {"city": "Tokyo"}


async def _async_weather(params: Any, identity: str | None) -> dict[str, Any]:
    return weather_current(params, identity)


def _registry() -> ResourceRegistry:
    return ResourceRegistry([
        Resource("ours", weather_current, params=WEATHER_PARAMS_SCHEMA, cache_ttl=3600),
        Resource("miss-sync", weather_current, params=WEATHER_PARAMS_SCHEMA),
        Resource("miss-async", _async_weather, params=WEATHER_PARAMS_SCHEMA),
    ])


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.benchmark(group="data-query-inprocess")
@pytest.mark.parametrize("impl", ["ours", "miss-sync", "miss-async", "direct"])
def test_query_in_process(benchmark: Any, loop: asyncio.AbstractEventLoop, impl: str) -> None:
    broker = ResourceBroker(_registry())
    expected = msgspec.json.encode(weather_current(PARAMS, None))
    if impl == "direct":
        result = benchmark(lambda: msgspec.json.encode(weather_current(PARAMS, None)))
    else:
        loop.run_until_complete(broker.query(impl, PARAMS, None))  # fills the cache of "ours"
        result = benchmark(lambda: loop.run_until_complete(broker.query(impl, PARAMS, None)))
    assert result == expected


async def _no_run(input: Any) -> Any:
    """The gateway's agent: these benchmarks start no run (an async generator that ends at once)."""
    return
    yield  # unreachable: makes this an async generator function


@pytest.fixture(scope="module")
def gateway() -> Iterator[Any]:
    """A loopback SSE gateway serving the resources from its own loop thread."""
    thread = LoopThread()
    try:
        yield thread.start(start_sse_server, _no_run, data=DataOptions(resources=_registry()), access_log=False)
    finally:
        thread.close()


@pytest.mark.benchmark(group="data-query-http")
@pytest.mark.parametrize("impl", ["ours", "miss-sync"])
def test_query_over_http(benchmark: Any, gateway: Any, impl: str) -> None:
    body = msgspec.json.encode({"resourceId": impl, "params": PARAMS})
    with httpx.Client(base_url=gateway.url, headers={"Content-Type": "application/json"}) as client:

        def query() -> Any:
            resp = client.post("data/query", content=body)
            assert resp.status_code == 200
            return resp.json()["data"]

        query()
        assert benchmark(query) == weather_current(PARAMS, None)
