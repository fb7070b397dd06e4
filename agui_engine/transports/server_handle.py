"""The base of the running-server handles (SSEServer, WebSocketServer).
"""

from __future__ import annotations

from typing import Self

__all__ = [
    "ServerHandle",
]


class ServerHandle:
    """Base of the running-server handles (``url``, ``registry``, async ``close()``,
    usable as ``async with``)."""

    url: str

    async def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
