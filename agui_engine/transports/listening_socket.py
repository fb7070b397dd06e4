"""The servers' listening socket: bound by :func:`listening_socket`, it sheds
connections itself when file descriptors run out (:class:`ListeningSocket`).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from typing import Any

__all__ = [
    "FD_EXHAUSTION_LOG_INTERVAL_SECONDS",
    "LISTEN_BACKLOG",
    "ListeningSocket",
    "ThrottledWarning",
    "listening_socket",
    "server_url",
]

_log = logging.getLogger("agui_engine.transports")


#: Accept backlog of the listening socket (SSE and WebSocket servers). A network
#: blip can make every client of a full server (DEFAULT_MAX_RUNS) reconnect at
#: once; 2048 (2x that) keeps the kernel from dropping those SYNs (with the
#: libraries' defaults, 128 / 100, a burst of 1,000 clients saw p99 1.2 s to the
#: first event; with 2048, at most 0.53 s). Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 2048


#: At most one "file descriptors exhausted" warning per this many seconds (with
#: the count of connections shed since the last one). Unthrottled, asyncio's
#: accept loop logged 232,769 lines (100 MB) in 30 s; one line per 10 s still
#: shows when exhaustion starts and ends.
FD_EXHAUSTION_LOG_INTERVAL_SECONDS = 10.0


class ThrottledWarning:
    """A warning logged at most once per ``interval`` seconds (later calls within
    it are dropped): for events that a hostile or broken peer can make happen once
    per connection, where one line per event would flood the log."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = -interval

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            _log.warning(message, *args)


class ListeningSocket(socket.socket):
    """The servers' listening socket: a plain TCP socket whose ``accept()`` copes
    with file-descriptor exhaustion (EMFILE / ENFILE) itself instead of handing it
    to asyncio, whose accept loop then logs once per pending connection per tick
    (``backlog`` times) and keeps the listener readable.

    Theory of operation: the socket holds one *reserve* descriptor. When accept
    fails for lack of descriptors, the reserve is released, the waiting
    connection is accepted and closed at once (a clear refusal instead of a
    client hanging in the backlog), the reserve is taken back and asyncio is
    told "nothing more now" (BlockingIOError). Existing connections keep being
    served; as their timeouts free descriptors, new ones are served again. A
    warning is logged at most once per FD_EXHAUSTION_LOG_INTERVAL_SECONDS with the
    number of connections shed (state: ``shed``, a :class:`ThrottledWarning`)."""

    def __init__(self, family: int, log_interval: float = FD_EXHAUSTION_LOG_INTERVAL_SECONDS) -> None:
        super().__init__(family, socket.SOCK_STREAM)
        self.shed = 0
        self._warning = ThrottledWarning(log_interval)
        self._reserve: int | None = os.open(os.devnull, os.O_RDONLY)

    def accept(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
        self._shed_one()
        raise BlockingIOError(errno.EAGAIN, "file descriptors exhausted; a connection was shed")

    def _shed_one(self) -> None:
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        try:
            conn, _ = super().accept()
            conn.close()
            self.shed += 1
        except OSError:
            pass
        try:
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            self._reserve = None  # retaken on the next shed
        self._warning.warn("file descriptors exhausted: shedding new connections (%d so far); serving the open ones", self.shed)

    def close(self) -> None:
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        super().close()


def listening_socket(host: str, port: int) -> ListeningSocket:
    """A bound, non-blocking :class:`ListeningSocket` for ``host:port`` (the caller
    hands it to aiohttp / websockets, which call ``listen(LISTEN_BACKLOG)``)."""
    sock = ListeningSocket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


def server_url(scheme: str, sock: socket.socket) -> str:
    """The URL a client reaches the server listening on ``sock`` at: an IPv6
    address in brackets (RFC 3986 section 3.2.2: ``http://[::1]:8000/``)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    return f"{scheme}://{shown}:{port}/"
