from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from agui_engine.transports.redislog import RedisEventLog

from ..redis_server import RedisServer
from .frontends import front_end  # noqa: F401 - the two front ends' fixture (issue 33)


class DropProxy:
    """A real TCP proxy on loopback that cuts the first ``drops`` connections after
    ``cut_after`` bytes came back from the server (a network drop mid-stream);
    later connections are relayed whole."""

    def __init__(self, target_host: str, target_port: int, cut_after: int, drops: int = 1) -> None:
        self.target = (target_host, target_port)
        self.cut_after = cut_after
        self.drops = drops
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.connections += 1
        cut = self.cut_after if self.connections <= self.drops else None
        sr, sw = await asyncio.open_connection(*self.target)

        async def up() -> None:
            try:
                while data := await cr.read(65536):
                    sw.write(data)
                    await sw.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass

        task = asyncio.create_task(up())
        sent = 0
        try:
            while data := await sr.read(65536):
                if cut is not None and sent + len(data) >= cut:
                    cw.write(data[: cut - sent])
                    await cw.drain()
                    break
                sent += len(data)
                cw.write(data)
                await cw.drain()
        except ConnectionError:
            pass
        finally:
            task.cancel()
            for w in (cw, sw):
                w.transport.abort()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def drop_proxy() -> AsyncIterator[type[DropProxy]]:
    made: list[DropProxy] = []

    class _Factory(DropProxy):
        def __init__(self, *a, **k) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*a, **k)
            made.append(self)

    yield _Factory
    for p in made:
        await p.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the session (fails when redis-server is missing)."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def redis_logs(redis_server: RedisServer) -> AsyncIterator[Callable[..., Awaitable[RedisEventLog]]]:
    """A factory of connected RedisEventLogs ("nodes") on the session's Redis,
    sharing a key prefix unique to the test; all closed at the end."""
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    made: list[RedisEventLog] = []

    async def make(**kw: Any) -> RedisEventLog:
        log = RedisEventLog(redis_server.url, prefix=prefix, **kw)
        await log.connect()
        made.append(log)
        return log

    yield make
    for log in made:
        await log.aclose()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server (Debian's package) for the session, in a temp directory;
    missing: a failure in CI, a skip saying what to install locally."""
    from ..helpers import require
    from ..postgres_server import PostgresServer, postgres_bin

    require(postgres_bin(), "PostgreSQL (Debian package postgresql)")
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """A fresh database on the session's PostgreSQL server."""
    return str(postgres_server.createdb("t_" + uuid.uuid4().hex[:16]))
