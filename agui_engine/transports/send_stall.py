"""A server's write to a client that stopped reading: :func:`send_or_stall` cuts it
after SEND_STALL_TIMEOUT_SECONDS, arming the deadline only when the write may wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "SEND_STALL_TIMEOUT_SECONDS",
    "STALL_CHECK_MIN_BYTES",
    "send_or_stall",
]


#: Seconds a server's write to one client may wait for the socket to drain. A
#: write waits only once the kernel and transport buffers are full, i.e. the
#: client stopped reading; past this it is cut (the run goes on, its grace period
#: applies), so a client that never reads cannot hold a finished run's log (kept
#: while it is read, see runs.RunRegistry) or its buffers for ever. One write is
#: at most READ_MAX_BYTES + the transport's high-water mark (~320 KiB): 60 s
#: still delivers that over a 56 kbit/s link.
SEND_STALL_TIMEOUT_SECONDS = 60.0


#: A send of at least this many bytes gets the stall deadline even when the
#: transport's buffer is empty: it alone could cross the transport's high-water
#: mark (64 KiB for aiohttp, websocket.DEFAULT_WRITE_LIMIT = 32 KiB) and wait. A
#: smaller send into an empty buffer cannot, so it needs no timer. Half the
#: smaller mark.
STALL_CHECK_MIN_BYTES = 16 * 1024


async def send_or_stall(
    send: Callable[[], Awaitable[None]], size: int, transport: Any, timeout: float = SEND_STALL_TIMEOUT_SECONDS
) -> None:
    """``await send()`` (``size`` bytes), raising TimeoutError when it waits over
    ``timeout`` seconds for a client that stopped reading. The deadline is armed
    only when the send may wait -- the transport's buffer already holds data, or
    the send is STALL_CHECK_MIN_BYTES or more -- so a client that keeps up costs no
    timer on the streams' hot path."""
    if transport is None or (size < STALL_CHECK_MIN_BYTES and not transport.get_write_buffer_size()):
        await send()
        return
    async with asyncio.timeout(timeout):
        await send()
