"""One conformance suite, two front ends (issue 33): the gateway's HTTP tests run against the
aiohttp gateway (``start_sse_server``) and the ASGI one (``create_asgi_app`` under a real uvicorn
on a free loopback port), through one fixture, so their behaviour cannot drift.

A test module opts in with ``pytestmark = pytest.mark.usefixtures("front_end")`` and starts its
servers with ``start_sse_server(agent, **options)`` as before: under the ``asgi`` parameter the
module's ``start_sse_server`` is :func:`start_asgi_server`, which takes the same options. A test
that needs what only aiohttp's server has (its connection caps and timers, ``app=``) is skipped
under ``asgi`` with the reason; every other test runs on both.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from agui_engine.transports.asgi_server import AsgiAgents, AsgiGateway, create_asgi_app
from agui_engine.transports.server_handle import ServerHandle
from agui_engine.transports.server_options import ConnectionOptions

from ..waiting import eventually

#: Keywords of start_sse_server, and fields of its ConnectionOptions, that configure aiohttp's own
#: server (its connection gate and timers): uvicorn has its own settings for these, so a test
#: that needs them is aiohttp's.
AIOHTTP_SERVER_KEYWORDS = frozenset({"app", "shutdown_timeout"})
AIOHTTP_CONNECTION_FIELDS = ("idle_timeout", "max_idle_connections", "max_idle_per_ip")


class UvicornServer(ServerHandle):
    """The ASGI gateway (one agent's, or several agents') under uvicorn on loopback: ``url``,
    ``registry``, ``gateway``, ``close()``
    (the gateway's runs end first, as an application's SIGTERM handling does, then uvicorn stops)."""

    def __init__(self, gateway: AsgiGateway | AsgiAgents, server: Any, task: asyncio.Task[None], url: str) -> None:
        self.gateway = gateway
        self.registry = gateway.registry
        self.server = server
        self.task = task
        self.url = url

    async def close(self) -> None:
        await self.gateway.close()
        self.server.should_exit = True
        await self.task


async def start_asgi_server(agent: Any = None, *, host: str = "127.0.0.1", port: int = 0, **options: Any) -> UvicornServer:
    """``create_asgi_app(agent, **options)`` served by uvicorn on ``host:port`` (0: a free port)."""
    import uvicorn

    connection, default = options.get("connection"), ConnectionOptions()
    aiohttp_only = sorted(AIOHTTP_SERVER_KEYWORDS & set(options)) + [
        f"ConnectionOptions.{name}" for name in AIOHTTP_CONNECTION_FIELDS
        if connection is not None and getattr(connection, name) != getattr(default, name)
    ]
    if aiohttp_only:
        pytest.skip(f"aiohttp's own server settings ({', '.join(aiohttp_only)}): uvicorn has its own")
    mount = options.pop("path", "/").rstrip("/")
    gateway = create_asgi_app(agent, **options)
    app: Any = gateway if not mount else _Mount(mount, gateway)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    await eventually(lambda: server.started or task.done(), what="uvicorn to start")
    if task.done():
        task.result()
    bound = sock.getsockname()
    return UvicornServer(gateway, server, task, f"http://{host}:{bound[1]}/" if ":" not in host else f"http://[{host}]:{bound[1]}/")


class _Mount:
    """``path=`` of create_app, the ASGI way: the gateway mounted at ``path`` (its ``root_path``),
    as Starlette's ``Mount`` does; 404 elsewhere."""

    def __init__(self, path: str, app: AsgiGateway | AsgiAgents) -> None:
        self.path = path
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "lifespan" or path == self.path or path.startswith(self.path + "/"):
            if scope["type"] != "lifespan":
                scope = {**scope, "root_path": scope.get("root_path", "") + self.path}
            await self.app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture(params=["aiohttp", "asgi"])
def front_end(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The front end the module's tests run against (its ``start_sse_server`` is replaced under ``asgi``)."""
    if request.param == "asgi":
        module = sys.modules[request.module.__name__]
        monkeypatch.setattr(module, "start_sse_server", functools.partial(start_asgi_server), raising=True)
    yield request.param
