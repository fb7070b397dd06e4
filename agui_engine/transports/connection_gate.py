"""The cap on connections that run nothing (reading a request, in a handshake,
idle keep-alive): :class:`IdleConnectionGate`, per client address and per server.
"""

from __future__ import annotations

from typing import Any

from .listening_socket import ThrottledWarning

__all__ = [
    "IDLE_CAP_LOG_INTERVAL_SECONDS",
    "IDLE_CAP_RESPONSE",
    "IdleConnectionGate",
    "MAX_IDLE_CONNECTIONS",
    "MAX_IDLE_CONNECTIONS_PER_IP",
    "RETRY_AFTER_IDLE_CAP_SECONDS",
    "peer_address",
]


#: Connections one client address may hold open while they run nothing: reading
#: request headers or a body, in the WebSocket opening handshake, idle between
#: requests (keep-alive), or a WebSocket with no run in flight. Half of
#: MAX_IDLE_CONNECTIONS: one address (an attacker's host) can never take the whole
#: pool from the others, while a burst from one address -- a NAT or a reverse proxy
#: in front of many clients, all reconnecting after a blip, every connection "not
#: running" until its request is read -- is admitted up to 512 at once (128 refused
#: a third of a 1,000-stream burst from one load generator). Behind a proxy every
#: client has the proxy's address: raise it or turn it off (0).
MAX_IDLE_CONNECTIONS_PER_IP = 512


#: Connections the whole server holds open while they run nothing (as above). A
#: network blip can make every client of a full server (runs.DEFAULT_MAX_RUNS =
#: 1,000) reconnect at once, and each is "not running" until its request is read:
#: 1,024 admits that storm, while idle connections alone can no longer take the
#: descriptors of a default 1,024-descriptor process nor hold memory without bound
#: (2,400 trickling connections sat for good before the timeouts and this cap).
MAX_IDLE_CONNECTIONS = 1024


#: ``Retry-After`` (seconds) of the 503 a connection over either cap gets. Idle
#: connections end all the time (a request arrives, the idle timeout passes), so a
#: place is likely free within a second; the refusal costs the server one write.
RETRY_AFTER_IDLE_CAP_SECONDS = 1


#: At most one "connection cap reached" warning per this many seconds, with the
#: number refused so far: a flood refused per connection must not become a flood
#: of log lines (see FD_EXHAUSTION_LOG_INTERVAL_SECONDS).
IDLE_CAP_LOG_INTERVAL_SECONDS = 10.0


_IDLE_CAP_BODY = (
    b'{"error":{"code":"server_busy","message":"too many connections that are not running a run; '
    b'retry later"}}\n'
)


#: The whole answer to a connection over the cap, written once at connect (before
#: anything is read): an HTTP client and a WebSocket handshake both see a 503.
IDLE_CAP_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
    b"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%b"
    % (RETRY_AFTER_IDLE_CAP_SECONDS, len(_IDLE_CAP_BODY), _IDLE_CAP_BODY)
)


def peer_address(transport: Any) -> str:
    """The client address of a connection (``-`` when it has none): an IPv4 client of
    a dual-stack socket (``::ffff:a.b.c.d``) is its IPv4 address, one client, one key."""
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and peer:
        host = str(peer[0])
        # An IPv4 client of a dual-stack socket arrives as ::ffff:a.b.c.d: one client, one key.
        return host[7:] if host.startswith("::ffff:") else host
    return "-"  # a Unix socket, a closed transport: one shared bucket


class IdleConnectionGate:
    """The cap on connections that run nothing (the servers' guard against
    connections opened only to be held), per client address and in total.

    Theory of operation: every accepted connection is *idle* (counted) from the
    moment it is made; :meth:`admit` refuses it when its address already holds
    ``per_ip`` idle connections or the server ``total`` -- the connection gets
    IDLE_CAP_RESPONSE (503 + ``Retry-After``) and is closed before anything is
    read, and a warning is logged at most once per ``log_interval`` seconds.
    While a connection streams a run (:meth:`running`: an SSE stream, a WebSocket
    with at least one run in flight) it is not counted; :meth:`idle` counts it
    again when that ends, :meth:`closed` forgets it. Connections already open are
    never cut by the cap: it only decides whether a new one is served. ``per_ip``
    / ``total`` of 0 or None: no cap of that kind. State: the address of each
    idle / running connection and the idle count per address."""

    def __init__(
        self,
        per_ip: int | None = MAX_IDLE_CONNECTIONS_PER_IP,
        total: int | None = MAX_IDLE_CONNECTIONS,
        log_interval: float = IDLE_CAP_LOG_INTERVAL_SECONDS,
    ) -> None:
        self.per_ip = per_ip or 0
        self.total = total or 0
        #: Connections refused since the server started.
        self.refused = 0
        self._idle: dict[object, str] = {}
        self._running: dict[object, str] = {}
        self._per_address: dict[str, int] = {}
        self._warning = ThrottledWarning(log_interval)

    @property
    def idle_count(self) -> int:
        """Connections open and running nothing now."""
        return len(self._idle)

    def admit(self, conn: object, transport: Any) -> bool:
        """Count a new connection as idle and return True, or refuse it (write the
        503, close the transport) and return False when a cap is reached."""
        address = peer_address(transport)
        held = self._per_address.get(address, 0)
        if (self.per_ip and held >= self.per_ip) or (self.total and len(self._idle) >= self.total):
            self.refused += 1
            self._warning.warn(
                "connections that run nothing are at their cap (%d per address, %d in all; %d open): "
                "refusing new ones with 503 (%d so far)",
                self.per_ip, self.total, len(self._idle), self.refused,
            )
            try:
                transport.write(IDLE_CAP_RESPONSE)
            finally:
                transport.close()
            return False
        self._idle[conn] = address
        self._per_address[address] = held + 1
        return True

    def _uncount(self, address: str) -> None:
        left = self._per_address[address] - 1
        if left:
            self._per_address[address] = left
        else:
            del self._per_address[address]

    def running(self, conn: object) -> None:
        """``conn`` started streaming a run: it no longer counts (no-op if unknown)."""
        address = self._idle.pop(conn, None)
        if address is not None:
            self._uncount(address)
            self._running[conn] = address

    def idle(self, conn: object) -> None:
        """``conn``'s runs ended and it stays open: it counts again (no-op if unknown or closed)."""
        address = self._running.pop(conn, None)
        if address is not None:
            self._idle[conn] = address
            self._per_address[address] = self._per_address.get(address, 0) + 1

    def closed(self, conn: object) -> None:
        """``conn`` was closed (no-op if it was refused or is unknown)."""
        address = self._idle.pop(conn, None)
        if address is not None:
            self._uncount(address)
        self._running.pop(conn, None)
