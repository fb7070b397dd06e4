"""Gateways served from an event loop in a thread of their own, so that synchronous code --
hypothesis' ``@given`` tests -- can hit them with real sockets; and the JSON values those
property tests draw."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import strategies as st

#: Any JSON value (no NaN: JSON has none), a few levels deep.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


class LoopThread:
    """An event loop running in a daemon thread: :meth:`call` runs a coroutine there and
    waits for its result; :meth:`start` starts a server there (closed by :meth:`close`)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[Any] = []

    def call(self, factory: Callable[[], Awaitable[Any]], timeout: float = 10) -> Any:
        async def run() -> Any:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def start(self, start: Callable[..., Awaitable[Any]], *args: Any, **options: Any) -> Any:
        """``start(*args, **options)`` (a ``start_*_server``) in the loop; the server."""
        server = self.call(lambda: start(*args, **options))
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            asyncio.run_coroutine_threadsafe(server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
