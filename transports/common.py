"""What every transport shares: decoding a ``RunAgentInput`` from the wire,
bearer-token checks, the transports' error types and the input limits, and the
client agents' reconnect policy and failure rule.

Theory of operation
-------------------
A request that starts a run (an HTTP body, a WebSocket ``run`` message, a stdio
line) is decoded by :func:`decode_run_input` in one msgspec pass. Malformed JSON
is a :class:`MalformedInputError` (HTTP 400, with the byte offset); well-formed
JSON of the wrong shape is an :class:`InvalidInputError` (HTTP 422, with the
JSON path); input over the size limit a
:class:`~agui_engine.protocol.errors.LimitExceededError` (413). Each error knows its
WebSocket close code and its ``RUN_ERROR``, so every transport answers the same
mistake the same way (see ``spec/transports.md``).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import os
import random
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Self

import msgspec

from agui_engine.protocol.errors import (
    MAX_ERROR_MESSAGE_CHARS,
    AguiEngineError,
    LimitExceededError,
    RemoteInputError,
    UpstreamError,
)
from agui_engine.protocol.events import (
    AnyEvent,
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
)

from .envelope import ErrorBody

__all__ = [
    "ConnectionLostError",
    "DEFAULT_BACKOFF_INITIAL",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_RETRIES",
    "FD_EXHAUSTION_LOG_INTERVAL_SECONDS",
    "IDLE_CAP_LOG_INTERVAL_SECONDS",
    "IDLE_CAP_RESPONSE",
    "IdleConnectionGate",
    "InputTooDeepError",
    "InvalidInputError",
    "LISTEN_BACKLOG",
    "ListeningSocket",
    "MAX_IDLE_CONNECTIONS",
    "MAX_IDLE_CONNECTIONS_PER_IP",
    "MAX_INPUT_DEPTH",
    "MAX_RUN_ID_LENGTH",
    "MalformedInputError",
    "NotAcceptableError",
    "RETRY_AFTER_IDLE_CAP_SECONDS",
    "RemoteAgentError",
    "RequestTimeoutError",
    "RetryPolicy",
    "SEND_STALL_TIMEOUT_SECONDS",
    "ServerHandle",
    "ThrottledWarning",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "UpstreamStoppedError",
    "WS_CLOSE_INVALID_INPUT",
    "WS_CLOSE_UNAUTHORIZED",
    "listening_socket",
    "unresumable",
]

logger = logging.getLogger("agui_engine.transports")

#: Largest accepted RunAgentInput (HTTP body, WebSocket message, stdio line). A
#: long conversation with tool results and a state document is a few hundred
#: KiB; 8 MiB leaves room for inline images (base64) while capping what one
#: request can make the server hold.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

#: A run id becomes part of every event id (``<runId>:<seq>``) and of URLs; 256
#: characters fits any UUID/ULID scheme with room for a prefix.
MAX_RUN_ID_LENGTH = 256

#: Levels of JSON nesting (arrays and objects) accepted in client input: an HTTP
#: body, a WebSocket message (its envelope counts), a stdio line -- so also a
#: RunAgentInput's ``state``, ``forwardedProps`` and tool results. Deeper input is an
#: :class:`InputTooDeepError` (413 / 4413 / an error line), never a RecursionError.
#: Real states nest a few dozen levels; 512 is jsonstream.MAX_DEPTH (it still takes
#: JSONTestSuite's 500-deep arrays) and stays well under msgspec's bound (the
#: interpreter's recursion limit, ~1000 less the caller's stack), so everything
#: accepted here can also be encoded into events and decoded again by a client.
MAX_INPUT_DEPTH = 512

#: Accept backlog of the listening socket (SSE and WebSocket servers). A network
#: blip can make every client of a full server (DEFAULT_MAX_RUNS) reconnect at
#: once; 2048 (2x that) keeps the kernel from dropping those SYNs (with the
#: libraries' defaults, 128 / 100, a burst of 1,000 clients saw p99 1.2 s to the
#: first event; with 2048, at most 0.53 s). Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 2048

#: Seconds a server's write to one client may wait for the socket to drain. A
#: write waits only once the kernel and transport buffers are full, i.e. the
#: client stopped reading; past this it is cut (the run goes on, its grace period
#: applies), so a client that never reads cannot hold a finished run's log (kept
#: while it is read, see runs.RunRegistry) or its buffers for ever. One write is
#: at most READ_MAX_BYTES + the transport's high-water mark (~320 KiB): 60 s
#: still delivers that over a 56 kbit/s link.
SEND_STALL_TIMEOUT_SECONDS = 60.0

#: WebSocket close codes (application range 4000-4999), documented in spec/transports.md.
WS_CLOSE_UNAUTHORIZED = 4401
WS_CLOSE_INVALID_INPUT = 4422


class MalformedInputError(RemoteInputError):
    """The input is not JSON (HTTP 400). The message names the byte offset."""

    default_code = "malformed_json"


class InvalidInputError(RemoteInputError):
    """The input is JSON but not a valid RunAgentInput (HTTP 422). The message names the JSON path."""

    http_status = 422
    ws_close_code = WS_CLOSE_INVALID_INPUT
    default_code = "invalid_input"


class InputTooDeepError(LimitExceededError):
    """Client input nests deeper than MAX_INPUT_DEPTH (HTTP 413, WebSocket 4413, a stdio error line)."""

    default_code = "input_too_deep"


class RequestTimeoutError(RemoteInputError):
    """The client did not send its whole request in time (HTTP 408)."""

    http_status = 408
    default_code = "request_timeout"


class UnauthorizedError(RemoteInputError):
    """Missing or wrong bearer token (HTTP 401, WebSocket 4401)."""

    http_status = 401
    ws_close_code = WS_CLOSE_UNAUTHORIZED
    default_code = "unauthorized"


class UnsupportedMediaTypeError(RemoteInputError):
    """The request body is not ``application/json`` (HTTP 415)."""

    http_status = 415
    default_code = "unsupported_media_type"


class NotAcceptableError(RemoteInputError):
    """The client accepts neither ``text/event-stream`` nor ``application/x-ndjson`` (HTTP 406)."""

    http_status = 406
    default_code = "not_acceptable"


def check_body_size(size: int, limit: int, *, what: str = "the RunAgentInput") -> None:
    """Raise LimitExceededError if ``size`` bytes exceed ``limit`` (``what`` names the body)."""
    if size > limit:
        raise LimitExceededError(f"{what} is {size} bytes; the limit is {limit} bytes")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests arrays/objects deeper than ``limit``;
    iterative, so the check itself cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _deep_error(where: str) -> InputTooDeepError:
    return InputTooDeepError(f"{where} nests deeper than {MAX_INPUT_DEPTH} levels of arrays/objects")


def _bracket_count(data: bytes | str) -> int:
    # An upper bound of the nesting depth, at C speed: input that cannot be too
    # deep (nearly all of it) is never walked.
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def check_input_depth(data: bytes | str, *, where: str = "the input", max_depth: int = MAX_INPUT_DEPTH) -> None:
    """Raise InputTooDeepError when JSON text ``data`` nests arrays/objects deeper
    than ``max_depth``; text that is not JSON is left to the caller's decoder. For
    decoders that recurse and cannot be bounded themselves (the WebSocket envelope)."""
    if _bracket_count(data) <= max_depth:
        return
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise _deep_error(where) from None
    except msgspec.DecodeError:
        return
    if _too_deep(value, max_depth):
        raise _deep_error(where)


def decode_json_input(
    data: bytes | str, *, where: str = "the input", type: Any = Any, max_depth: int = MAX_INPUT_DEPTH
) -> Any:
    """Decode client JSON (as ``type``) with its nesting bounded by ``max_depth``
    (0: only by msgspec's own recursion bound, for text whose depth was checked).

    Raises InputTooDeepError (too deep: found by msgspec's own recursion bound, or by
    an iterative walk when the text holds more brackets than ``max_depth``, so input
    that cannot be too deep costs one ``count`` pass), MalformedInputError (not JSON;
    names the byte offset) and msgspec.ValidationError (JSON of the wrong shape, for
    the caller to word).
    """
    try:
        value = msgspec.json.decode(data, type=type)
    except RecursionError:
        raise _deep_error(where) from None
    except msgspec.ValidationError:
        raise  # a DecodeError subclass: the wrong shape, for the caller to word
    except msgspec.DecodeError as exc:
        at = "" if "byte" in str(exc) else f" (at byte {len(data)}, the end of the input)"
        raise MalformedInputError(f"{where} is not valid JSON: {exc}{at}") from None
    if max_depth and _bracket_count(data) > max_depth and _too_deep(
        value if type is Any else msgspec.to_builtins(value), max_depth
    ):
        raise _deep_error(where)
    return value


def decode_run_input(
    data: bytes | str | Any, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES, depth_checked: bool = False
) -> RunAgentInput:
    """Decode and validate one RunAgentInput.

    ``data`` is JSON text (bytes or str) or an already-decoded JSON value (a dict
    taken out of a WebSocket envelope, whose depth :func:`decode_json_input`
    checked with the envelope; ``depth_checked``: the text's depth was checked with
    its envelope too, by :func:`check_input_depth`). Raises LimitExceededError (over ``max_bytes``),
    InputTooDeepError (nested over MAX_INPUT_DEPTH), MalformedInputError (not JSON;
    says where), InvalidInputError (wrong shape; says the JSON path, or a run id
    unusable in an event id).
    """
    value: RunAgentInput
    try:
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            check_body_size(len(data), max_bytes)
            value = decode_json_input(
                bytes(data) if isinstance(data, (bytearray, memoryview)) else data,
                where="the RunAgentInput",
                type=RunAgentInput,
                max_depth=0 if depth_checked else MAX_INPUT_DEPTH,
            )
        else:
            value = msgspec.convert(data, RunAgentInput)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(f"not a valid RunAgentInput: {exc}") from None
    check_run_id(value.run_id)
    return value


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
            logger.warning(message, *args)


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


def _peer_address(transport: Any) -> str:
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
        address = _peer_address(transport)
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


def check_run_id(run_id: str) -> None:
    """Raise InvalidInputError unless ``run_id`` can be part of an event id
    (``<runId>:<seq>`` in an SSE ``id:`` line, a URL, a log key)."""
    # isprintable(): no C0/C1 control (CR, LF, NUL, VT, DEL ...), no line/paragraph
    # separator, no lone surrogate -- none of which an HTTP header (X-AGUI-Run-Id), an
    # SSE id line or a log key can carry.
    if not run_id or len(run_id) > MAX_RUN_ID_LENGTH or not run_id.isprintable():
        raise InvalidInputError(
            f"runId must be 1..{MAX_RUN_ID_LENGTH} printable characters (no control characters: "
            "it becomes part of every event id and of the X-AGUI-Run-Id header) - at `$.runId`"
        )


def extract_bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def check_bearer(authorization: str | None, expected: str | Mapping[str, str] | None) -> str | None:
    """Check an ``Authorization: Bearer`` header and return the *principal* it
    authenticates: ``None`` when auth is off (``expected`` None), ``""`` for the
    one shared token (``expected`` a str: everyone holding it is one principal),
    else the name ``expected`` (token -> principal) maps the token to. Raises
    UnauthorizedError. Tokens are compared in constant time
    (``hmac.compare_digest``), every configured one on every request, so response
    timing leaks neither how much of a guess was right nor which token matched."""
    if expected is None:
        return None
    token = extract_bearer(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token (send Authorization: Bearer <token>)")
    # surrogateescape: a header's non-UTF-8 bytes arrive as lone surrogates (aiohttp,
    # websockets); they make a wrong token, not an encoding error.
    got = token.encode("utf-8", "surrogateescape")
    if isinstance(expected, str):
        if not hmac.compare_digest(got, expected.encode("utf-8")):
            raise UnauthorizedError("invalid bearer token")
        return ""
    principal: str | None = None
    for candidate, name in expected.items():
        if hmac.compare_digest(got, candidate.encode("utf-8")):
            principal = name
    if principal is None:
        raise UnauthorizedError("invalid bearer token")
    return principal


class RemoteAgentError(UpstreamError):
    """A remote AG-UI endpoint refused a request (a non-2xx answer, a WebSocket
    error message or close code). ``status`` is the HTTP status (or the close
    code), ``code`` the remote's machine-readable error code when it sent one
    (``cursor_expired``, ``unauthorized``, ``invalid_input`` ...)."""

    default_code = "remote_refused"

    def __init__(self, message: str, *, status: int, code: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.status = status
        #: The media type of the answer when it was not one of this protocol's (``text/html``), else None.
        self.content_type: str | None = None


class ConnectionLostError(UpstreamError):
    """The connection to a remote AG-UI endpoint dropped and resuming failed
    after the bounded retries (or the endpoint could not be reached at all)."""

    default_code = "connection_lost"

    def __init__(self, message: str, *, tls_failure: str | None = None) -> None:
        super().__init__(message, retryable=True)
        #: The TLS failure's reason (``WRONG_VERSION_NUMBER``: the server speaks plain HTTP) when the
        #: connection failed in the TLS handshake, else None.
        self.tls_failure = tls_failure


class UpstreamStoppedError(UpstreamError):
    """A remote AG-UI endpoint ended its stream before the run's ``RUN_FINISHED`` /
    ``RUN_ERROR`` and sent no event id to resume from: the run ends here (starting it
    again would run the remote agent twice). Code ``upstream_stopped``."""

    default_code = "upstream_stopped"


#: HTTP statuses after which trying again later may succeed.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def remote_error_from_body(
    status: int, body: bytes, *, where: str, content_type: str | None = None
) -> RemoteAgentError:
    """A RemoteAgentError for a refused request, using the ``{"error": {code,
    message}}`` body this project's servers send when it is there. Any other body
    is quoted only when it is plain text, on one line (an HTML error page is named by
    its content type, not dumped). The message is cut to ``MAX_ERROR_MESSAGE_CHARS``
    characters and never contains request headers."""
    code: str | None = None
    message = ""
    try:
        doc = msgspec.json.decode(body)
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = err["code"] if isinstance(err.get("code"), str) else None
            message = err["message"] if isinstance(err.get("message"), str) else ""
    except msgspec.DecodeError:
        if content_type is None or media_type(content_type) == "text/plain":
            message = " ".join(body[: MAX_ERROR_MESSAGE_CHARS * 4].decode("utf-8", "replace").split())
    kind = f" {media_type(content_type)}" if content_type and code is None and not message else ""
    text = (f"{where} answered {status}{kind}" + (f" ({code})" if code else "")
            + (f": {message[:MAX_ERROR_MESSAGE_CHARS]}" if message else ""))
    error = RemoteAgentError(text, status=status, code=code, retryable=status in RETRYABLE_STATUSES)
    error.content_type = media_type(content_type) if content_type else None
    return error


def media_type(content_type: str | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html`` (lower case); ``""`` for none."""
    return (content_type or "").partition(";")[0].strip().lower()


def tls_failure(exc: BaseException) -> str | None:
    """The reason of the TLS failure anywhere in ``exc``'s chain of causes
    (``WRONG_VERSION_NUMBER``, ``CERTIFICATE_VERIFY_FAILED`` ...), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return str(seen.reason or type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return None


#: The events that end a run.
TERMINAL_EVENTS = (RunFinishedEvent, RunErrorEvent)

#: Reconnect attempts of the client agents after a drop, before they give up.
#: 5 attempts with the backoff below span ~6 s: a server restart behind a load
#: balancer or a brief network loss, not an outage (the run's grace period is 30 s).
DEFAULT_MAX_RETRIES = 5
#: First reconnect delay (seconds); doubles per attempt, with jitter. 0.2 s is
#: long enough not to hammer a server that just dropped us (a restart takes at
#: least that), short enough that a one-off network blip costs the user nothing
#: visible; 0.2 * (1+2+4+8) + 5 = 8 s worst case, ~6 s with jitter, over 5 tries.
DEFAULT_BACKOFF_INITIAL = 0.2
#: Ceiling of the reconnect delay (seconds): every try must land well inside the
#: run's 30 s grace period (runs.DEFAULT_GRACE_SECONDS), or the run is gone.
DEFAULT_BACKOFF_MAX = 5.0

#: Digits an event id's ``seq`` may have (``<runId>:<seq>``). 18 decimal digits
#: always fit a signed 64-bit integer (< 9.22e18), so a cursor can never name a
#: number no log could hold, and parsing it is O(1); a longer one is foreign.
MAX_SEQ_DIGITS = 18

#: Smallest random factor of a reconnect delay (the largest is 1): "equal jitter".
#: Keeping at least half the delay means a retry never comes at once, while
#: clients dropped together spread over the other half instead of reconnecting
#: in step.
BACKOFF_JITTER_MIN = 0.5


class RetryPolicy:
    """Bounded reconnects with exponential backoff and jitter, shared by the client agents."""

    def __init__(
        self,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
    ) -> None:
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

    def delay(self, failures: int) -> float:
        """Seconds to wait before attempt ``failures`` (1-based): initial * 2^(n-1),
        capped, times a random factor in [BACKOFF_JITTER_MIN, 1] so that clients do not reconnect in step."""
        base = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
        return float(base * random.uniform(BACKOFF_JITTER_MIN, 1.0))

    async def wait(self, failures: int) -> None:
        await asyncio.sleep(self.delay(failures))


class StreamDropped(Exception):
    """A client agent's connection ended before the run's terminal event (a drop
    the shared reconnect loop resumes)."""


#: One item of a client agent's connection attempt (see RemoteClientBase._attempt):
#: ``None`` once the server has accepted the run, else ``(event id, events)`` -- a
#: batch of events and the id of its last one (``None`` when the server sent no id).
AttemptItem = tuple[str | None, list[AnyEvent]] | None


class RemoteClientBase:
    """What the network client agents share: the endpoint, extra headers (never
    logged or put in error messages), the retry policy, a reconnect counter, and
    :meth:`run` itself -- the reconnect-and-resume loop. A transport provides one
    connection attempt (:meth:`_attempt`), the remote cancel (:meth:`_cancel`),
    the per-run session (:meth:`_open` / :meth:`_close`) and the exceptions that
    mean "the connection dropped" (``_drops``)."""

    #: The transport's network errors that count as a drop (retried with backoff).
    _drops: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.retry = RetryPolicy(max_retries, backoff_initial, backoff_max)
        #: Reconnections made by the last run (for diagnostics and tests).
        self.reconnects = 0

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """The Agent contract over the remote endpoint. Before the first event,
        raises RemoteAgentError (refused), ConnectionLostError (unreachable, or the
        drops outlasted the retries), or the codec's EventDecodeError; after it, such
        a failure ends the stream with its ``RUN_ERROR`` instead. A drop is resumed
        from the last event id (``max_retries`` attempts with backoff); a batch of
        events whose last ``seq`` was already delivered is skipped. Closing the
        generator before the terminal event cancels the remote run."""
        run_id = input.run_id
        session = await self._open()
        last_seq = 0
        # The cursor a drop resumes from: only an event id this upstream sent (or the run's
        # start, when the upstream said it keeps the run: _keeps_runs). Without one the run
        # is never started a second time (a server that does not resume would run the agent
        # twice): the run ends with UpstreamStoppedError instead.
        last_id: str | None = None
        accepted = False
        yielded = False
        failures = 0
        self.reconnects = 0
        # True until the run ended or the server refused it: then the consumer stopped early.
        abandoned = True
        drops: tuple[type[BaseException], ...] = (StreamDropped, *self._drops)
        try:
            while True:
                attempt = self._attempt(session, input, last_id)
                try:
                    async for item in attempt:
                        if item is None:
                            accepted = True  # a drop from here on resumes or ends the run, never restarts it
                            if last_id is None and self._keeps_runs(session):
                                last_id = f"{run_id}:0"  # the upstream said it keeps the run: from its start
                            continue
                        ident, events = item
                        if ident is not None:
                            seq = _seq_of(ident, run_id)
                            if seq:
                                if seq <= last_seq:
                                    continue  # already delivered before a reconnect
                                last_seq = seq
                            last_id = ident
                        failures = 0
                        for event in events:
                            yielded = True
                            if isinstance(event, TERMINAL_EVENTS):
                                abandoned = False  # ended: a consumer that stops here cancels nothing
                                yield event
                                return
                            yield event  # type: ignore[misc]
                    raise StreamDropped("the stream ended before RUN_FINISHED / RUN_ERROR")
                except drops as exc:
                    failures += 1
                    stop = unresumable(self.url, exc, accepted=accepted, last_id=last_id, failures=failures,
                                       max_retries=self.retry.max_retries)
                    if stop is not None:
                        abandoned = False
                        yield end_or_raise(stop, yielded)
                        return
                    await self.retry.wait(failures)
                    self.reconnects += 1
                except AguiEngineError as exc:
                    # Refused (RemoteAgentError: 410 cursor expired, 404 unknown run, an
                    # error line): the server is done with the run. A malformed event:
                    # we are, so the remote run is cancelled below.
                    abandoned = not isinstance(exc, RemoteAgentError)
                    yield end_or_raise(exc, yielded)
                    return
                finally:
                    await attempt.aclose()  # type: ignore[attr-defined]
        finally:
            try:
                if abandoned and accepted:
                    await self._cancel(session, run_id)
            finally:
                await self._close(session)

    # -- what a transport provides -------------------------------------------------------

    async def _open(self) -> Any:
        """The per-run session (an HTTP client, a connection holder)."""
        return None

    def _attempt(self, session: Any, input: RunAgentInput, last_id: str | None) -> AsyncIterator[AttemptItem]:
        """One connection: start the run (``last_id`` None) or resume it after
        ``last_id``; yield ``None`` once the server accepted, then batches. Raises
        a ``_drops`` error or StreamDropped on a drop, AguiEngineError when refused."""
        raise NotImplementedError

    def _keeps_runs(self, session: Any) -> bool:
        """Whether the upstream said, when it accepted the run, that it keeps it for a resume
        (this project's gateways give the run a run key): a drop before its first event id
        then resumes from ``<runId>:0``. A third-party server says nothing: False."""
        return False

    async def _cancel(self, session: Any, run_id: str) -> None:
        """Cancel the remote run (the consumer stopped early); must not raise."""

    async def _close(self, session: Any) -> None:
        """Release the session."""


def unresumable(
    url: str, exc: BaseException, *, accepted: bool, last_id: str | None, failures: int, max_retries: int
) -> UpstreamError | None:
    """Why a dropped run must not be tried again (``None``: resume it from ``last_id``).

    The one rule every client follows: a run is resumed only from an event id the upstream
    sent. A server that sent none cannot resume, and POSTing the input again would run its
    agent a second time (its side effects repeated, a second ``RUN_STARTED``): such a drop
    ends the run with :class:`UpstreamStoppedError` (``upstream_stopped``). An endpoint
    that never accepted the run is unreachable (:class:`ConnectionLostError`), and so is
    one whose drops outlast ``max_retries``."""
    tls = tls_failure(exc)
    what = f"TLS handshake failed: {tls}" if tls else type(exc).__name__
    if not accepted:
        return ConnectionLostError(f"cannot reach {url} ({what})", tls_failure=tls)
    if last_id is None:
        return UpstreamStoppedError(
            f"{url} stopped before the end of the run (no RUN_FINISHED or RUN_ERROR; {what}) and sent no "
            "event id to resume from: the run is not started again"
        )
    if failures > max_retries:
        return ConnectionLostError(f"connection to {url} lost ({what}) and not resumed after {failures - 1} retries")
    return None


def _seq_of(ident: str, run_id: str) -> int:
    """The ``seq`` of an event id of this run; 0 for an id of another form (a
    server whose ids are not ``<runId>:<seq>``: nothing is skipped then)."""
    rid, _, seq = ident.rpartition(":")
    return int(seq) if rid == run_id and seq.isascii() and seq.isdigit() and len(seq) <= MAX_SEQ_DIGITS else 0


def end_or_raise(error: AguiEngineError, yielded: bool) -> RunErrorEvent:
    """How a client agent fails: before its first event it raises ``error``; after
    it, the Agent contract forbids raising, so it returns the ``RUN_ERROR`` that
    ends the stream (the caller yields it and returns)."""
    if not yielded:
        raise error
    return RunErrorEvent.from_error(error)


def remote_error_from_line(err: ErrorBody, *, where: str) -> RemoteAgentError:
    """The RemoteAgentError for the ``error`` of an error line of the WebSocket / stdio
    protocols (:class:`~agui_engine.transports.envelope.ErrorBody`)."""
    return RemoteAgentError(
        f"{where} refused: {err.message[:MAX_ERROR_MESSAGE_CHARS]}",
        status=err.status or 0,
        code=err.code,
        retryable=err.code in ("server_busy",),
    )


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
