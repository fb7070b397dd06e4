"""The ASGI gateway under hypercorn as well as uvicorn (issue 33): a run, a client that goes away
mid-stream (disconnect detection: the run of a client that does not resume is stopped), a resume
with Last-Event-ID, and the lifespan's shutdown ending a run still going with RUN_ERROR{shutdown}."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.protocol.codec import SSEDecoder, decode_event
from agui_engine.transports import AsgiGateway, RegistryOptions, create_asgi_app

from ..waiting import eventually
from .frontends import start_asgi_server
from .scripted import ScriptedAgent, make_input

SERVERS = ("uvicorn", "hypercorn")


class Hypercorn:
    """The gateway under hypercorn on a free loopback port. ``close``: the gateway's runs end first
    (an ASGI server sends the lifespan's ``shutdown`` only after its open connections end, so a
    stream still open is ended by the application's own SIGTERM handling: spec/deploy.md), then
    hypercorn's shutdown trigger."""

    def __init__(self, gateway: AsgiGateway) -> None:
        self.gateway = gateway
        self.registry = gateway.registry
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self) -> None:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.graceful_timeout = 5
        config.accesslog = None
        self.task = asyncio.get_running_loop().create_task(serve(self.gateway, config, shutdown_trigger=self.stop.wait))  # type: ignore[arg-type]
        self.url = f"http://127.0.0.1:{port}/"

        async def up() -> bool:
            try:
                async with httpx.AsyncClient(timeout=1) as c:
                    return (await c.get(self.url + "healthz")).status_code == 200
            except httpx.HTTPError:
                return False

        for _ in range(200):
            if await up():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("hypercorn did not start")

    async def close(self) -> None:
        await self.gateway.close()
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 30)


async def _serve(kind: str, agent: Any, **options: Any) -> Any:
    if kind == "uvicorn":
        return await start_asgi_server(agent, **options)
    server = Hypercorn(create_asgi_app(agent, **options))
    await server.start()
    return server


@pytest.fixture(params=SERVERS)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, Any]]:
    yield request.param, _serve


def _body(run_id: str) -> bytes:
    return msgspec.json.encode(make_input(run_id))


async def test_run_and_resume(served: tuple[str, Any]) -> None:
    kind, serve = served
    server = await serve(kind, ScriptedAgent(deltas=20, pause=0.005), options=RegistryOptions(grace_seconds=10))
    try:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-AGUI-Resumable": "1"}
        async with httpx.AsyncClient(timeout=20) as c:
            async with c.stream("POST", server.url, content=_body("r-1"), headers=h) as resp:
                assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
                key = resp.headers["X-AGUI-Run-Key"]
                decoder = SSEDecoder()
                first: list[Any] = []
                async for chunk in resp.aiter_raw():
                    first += decoder.feed(chunk)
                    if len(first) >= 5:
                        break
            rest = SSEDecoder().feed((await c.post(server.url, content=_body("r-1"), headers={
                **h, "X-AGUI-Run-Key": key, "Last-Event-ID": first[-1].id})).content)
        seqs = [int(m.id.rpartition(":")[2]) for m in first + rest]
        assert seqs == list(range(1, len(seqs) + 1))
        assert decode_event(rest[-1].data).type.value == "RUN_FINISHED"
    finally:
        await server.close()


async def test_a_client_that_goes_away_stops_its_run(served: tuple[str, Any]) -> None:
    kind, serve = served
    agent = ScriptedAgent(deltas=2, hang=True)
    server = await serve(kind, agent)
    try:
        async with httpx.AsyncClient(timeout=20) as c:
            async with c.stream("POST", server.url, content=_body("r-gone"),
                                headers={"Content-Type": "application/json"}) as resp:
                async for _ in resp.aiter_raw():
                    break  # the official client's abort: the connection closes, no resume declared
        await eventually(lambda: "r-gone" in agent.cancelled, what="the disconnect to stop the run")
    finally:
        await server.close()


async def test_the_lifespan_shutdown_ends_a_running_run(served: tuple[str, Any]) -> None:
    kind, serve = served
    agent = ScriptedAgent(deltas=2, hang=True)
    server = await serve(kind, agent)
    closed = False
    try:
        async with httpx.AsyncClient(timeout=20) as c:
            async with c.stream("POST", server.url, content=_body("r-shut"),
                                headers={"Content-Type": "application/json", "X-AGUI-Resumable": "1"}) as resp:
                decoder = SSEDecoder()
                got: list[Any] = []
                closing: asyncio.Task[None] | None = None
                async for chunk in resp.aiter_raw():
                    got += decoder.feed(chunk)
                    if len(got) >= 3 and closing is None:
                        # the gateway's close (what an app's SIGTERM handling calls), then the server's
                        closing = asyncio.create_task(server.close())
                assert closing is not None
                await closing
                closed = True
        last = decode_event(got[-1].data)
        assert last.type.value == "RUN_ERROR" and last.code == "shutdown"
        assert "r-shut" in agent.cancelled and server.registry.draining
    finally:
        if not closed:
            await server.close()
