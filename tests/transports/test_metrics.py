"""Health, readiness and Prometheus metrics of one gateway, scraped over real HTTP
(the multi-node cases are in test_scaleout.py)."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
import pytest
from websockets.asyncio.client import connect

from agui_engine.transports.metrics import METRICS_CONTENT_TYPE, GatewayMetrics
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent, make_input

#: One conformance suite, two front ends (tests/transports/frontends.py): aiohttp and ASGI under uvicorn.
pytestmark = pytest.mark.usefixtures("front_end")


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in the exposition:\n{text}")


async def test_sse_health_readiness_and_metrics_by_scraping() -> None:
    agent = ScriptedAgent(deltas=4)
    async with await start_sse_server(agent, metrics=GatewayMetrics(), options=RegistryOptions(max_runs=1)) as srv:
        base = srv.url.rstrip("/")
        async with httpx.AsyncClient(timeout=10) as c:
            assert (await c.get(base + "/healthz")).json() == {"status": "ok"}
            ready = await c.get(base + "/readyz")
            assert ready.status_code == 200 and ready.json()["ready"] is True
            h = {"Content-Type": "application/json"}
            body = msgspec.json.encode(make_input("m1"))
            whole = await c.post(srv.url, content=body, headers=h)
            key = {"X-AGUI-Run-Key": whole.headers["X-AGUI-Run-Key"]}  # the run's capability (spec §2.6)
            resumed = await c.post(srv.url, content=body, headers={**h, **key, "Last-Event-ID": "m1:3"})
            bad = await c.post(srv.url, content=b"{", headers=h)
            scraped = await c.get(base + "/metrics")
            assert scraped.headers["Content-Type"] == METRICS_CONTENT_TYPE
            text = scraped.text
            events = whole.text.count("data:") + resumed.text.count("data:")
            assert sample(text, 'agui_events_sent_total{transport="sse"}') == events
            assert sample(text, 'agui_bytes_sent_total{transport="sse"}') == len(whole.content) + len(resumed.content)
            assert sample(text, 'agui_resumes_total{transport="sse"}') == 1
            assert sample(text, 'agui_runs_ended_total{code="",terminal="RUN_FINISHED"}') == 1
            assert sample(text, f'agui_errors_total{{code="{bad.json()["error"]["code"]}"}}') == 1
            assert sample(text, "agui_upstream_first_token_seconds_count") == 1
            assert sample(text, "agui_active_runs") == 0
            # Draining: not ready, new runs refused, still alive.
            drained = asyncio.create_task(srv.registry.drain(5))
            await asyncio.sleep(0)
            assert (await c.get(base + "/readyz")).status_code == 503
            assert (await c.get(base + "/healthz")).status_code == 200
            refused = await c.post(srv.url, content=msgspec.json.encode(make_input("m2")), headers=h)
            assert refused.status_code == 503 and refused.headers["Retry-After"]
            await drained
            assert sample((await c.get(base + "/metrics")).text, "agui_draining") == 1


async def test_no_metrics_route_without_metrics() -> None:
    async with await start_sse_server(ScriptedAgent()) as srv:
        async with httpx.AsyncClient(timeout=10) as c:
            assert (await c.get(srv.url.rstrip("/") + "/metrics")).status_code in (404, 405)
            assert (await c.get(srv.url.rstrip("/") + "/readyz")).status_code == 200


async def test_websocket_streams_are_counted() -> None:
    metrics = GatewayMetrics()
    async with await start_websocket_server(ScriptedAgent(deltas=2), metrics=metrics) as srv:
        async with connect(srv.url) as ws:
            await ws.send(msgspec.json.encode({"type": "run", "input": make_input("w1")}).decode())
            got: list[str] = []
            nbytes = 0
            while not any('"RUN_FINISHED"' in line for line in got):
                message = str(await asyncio.wait_for(ws.recv(), 10))
                nbytes += len(message.encode())
                got += message.split("\n")
    text = metrics.render().decode()
    assert sample(text, 'agui_events_sent_total{transport="websocket"}') == len(got)
    assert sample(text, 'agui_bytes_sent_total{transport="websocket"}') == nbytes


async def test_with_auth_on_metrics_and_the_detailed_readiness_need_the_token_and_health_does_not() -> None:
    # issue 30: /metrics and /readyz's run counts (and MCP server ids) answered anyone
    token = "metrics-token-3f9a"
    async with await start_sse_server(ScriptedAgent(), metrics=GatewayMetrics(), auth_token=token) as srv:
        base = srv.url.rstrip("/")
        bearer = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(timeout=10) as c:
            assert (await c.get(base + "/healthz")).json() == {"status": "ok"}  # a liveness probe has no token
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                ready = await c.get(base + "/readyz", headers=headers)
                assert ready.status_code == 200 and ready.json() == {"ready": True}  # ready or not, nothing more
                scraped = await c.get(base + "/metrics", headers=headers)
                assert scraped.status_code == 401 and scraped.json()["error"]["code"] == "unauthorized"
                assert "agui_" not in scraped.text
            detailed = await c.get(base + "/readyz", headers=bearer)
            assert detailed.status_code == 200 and {"ready", "draining", "activeRuns"} <= set(detailed.json())
            scraped = await c.get(base + "/metrics", headers=bearer)
            assert scraped.status_code == 200 and "agui_active_runs" in scraped.text
