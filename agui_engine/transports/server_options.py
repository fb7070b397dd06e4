"""The servers' options, one frozen value per concern, shared by the entry points
(``create_app`` / ``create_asgi_app`` / ``start_sse_server``, ``start_websocket_server``,
``serve_stdio``).

Theory of operation
-------------------
A setting has one name and is given one way: as a field of the struct of its concern.

* :class:`~transports.registry_options.RegistryOptions` (``options=``) -- the runs: how
  many, grace and retention periods, the per-client and buffered-bytes bounds (every server);
* :class:`ConnectionOptions` (``connection=``) -- what one client connection may cost: the
  largest input (HTTP body, WebSocket message, stdio line), how long a write may wait for a
  client that stopped reading, the HTTP timers (keep-alive comments, body, idle connection),
  how many connections may sit idle, the wire an HTTP stream is written in;
* :class:`DataOptions` (``data=``) -- the data resources ``query`` may ask for (SSE and WebSocket).

Like httpx's ``Limits`` / ``Timeout``, a program that configures several servers the same
way builds one value and passes it to each. Each field says which transports read it; a
server ignores the fields of another transport's wire (stdio reads only ``max_input_bytes``).
Every struct checks its values at construction (UsageError naming the field).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from agui_engine.genui.resources import Resource, ResourceRegistry
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.wire import WireChoice, check_wire_choice

from .connection_gate import MAX_IDLE_CONNECTIONS, MAX_IDLE_CONNECTIONS_PER_IP
from .data import QUERY_QUEUE_TIMEOUT_SECONDS, ResourceBroker
from .input_decoding import DEFAULT_MAX_BODY_BYTES
from .send_stall import SEND_STALL_TIMEOUT_SECONDS
from .subscription import DEFAULT_KEEPALIVE_SECONDS

__all__ = ["BODY_TIMEOUT_SECONDS", "ConnectionOptions", "DataOptions", "HTTP_IDLE_TIMEOUT_SECONDS"]

#: Seconds to receive a whole request body, from the end of its headers: past it
#: the answer is 408 (``RequestTimeoutError``) and nothing is started. A typical
#: body is a few KiB; 60 s still takes the 8 MiB limit at ~140 KiB/s, while a
#: client trickling an 8 MiB body cannot hold it for longer than this.
BODY_TIMEOUT_SECONDS = 60.0

#: Seconds a connection may go without a complete set of request headers: from
#: connect, and again from the end of each response (idle keep-alive). aiohttp's
#: own connection timer (``keepalive_timeout``; its default, 3,630 s, let 2,400
#: trickling or silent connections sit for as long as they liked). 75 s is nginx's
#: keep-alive default and above the 60 s idle timeout of common load balancers, so
#: a balancer never reuses a connection the gateway has just closed.
HTTP_IDLE_TIMEOUT_SECONDS = 75.0


class ConnectionOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What one client connection may cost a server (``connection=`` of every entry point).

    ``max_input_bytes``: the largest RunAgentInput (HTTP body: 413; WebSocket message: close
    1009; stdio line: an error line). ``send_timeout``: seconds one write may wait for a client
    that stopped reading before it is cut (HTTP, WebSocket). ``keepalive_seconds``: seconds of
    silence before an HTTP stream writes a keep-alive (an SSE comment, an empty NDJSON line).
    ``body_timeout``: seconds to receive a request body (408 past it; HTTP).
    ``idle_timeout``: seconds an HTTP connection may go without complete request headers,
    from connect and from the end of each response (``start_sse_server``: aiohttp's
    connection timer; an ASGI server has its own). ``max_idle_connections`` /
    ``max_idle_per_ip``: connections that run nothing (reading a request, idle keep-alive, a
    WebSocket with no run in flight) the server / one client address may hold; a new one past
    either is answered 503 + ``Retry-After`` before anything is read (``start_sse_server``,
    ``start_websocket_server``; 0 or None: no cap). ``wire``: the AG-UI wire an HTTP stream is
    written in: ``"1"`` (1.0), ``"0"`` (what ``@ag-ui/client`` 0.0.5x accepts: CopilotKit,
    assistant-ui), or ``"auto"``: 1.0 for an input declaring ``protocolVersion`` 1.x, else 0
    (``protocol/wire.py``, spec/wire-versions.md).
    Raises UsageError (at construction) for a value out of range."""

    max_input_bytes: int = DEFAULT_MAX_BODY_BYTES
    send_timeout: float = SEND_STALL_TIMEOUT_SECONDS
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS
    body_timeout: float = BODY_TIMEOUT_SECONDS
    idle_timeout: float = HTTP_IDLE_TIMEOUT_SECONDS
    max_idle_connections: int | None = MAX_IDLE_CONNECTIONS
    max_idle_per_ip: int | None = MAX_IDLE_CONNECTIONS_PER_IP
    wire: WireChoice = "auto"

    def __post_init__(self) -> None:
        check_wire_choice(self.wire, "ConnectionOptions.wire")
        if self.max_input_bytes < 1:
            raise UsageError(f"ConnectionOptions.max_input_bytes must be >= 1, got {self.max_input_bytes}")
        for seconds in ("send_timeout", "keepalive_seconds", "body_timeout", "idle_timeout"):
            value = getattr(self, seconds)
            if not value > 0:  # also rejects NaN
                raise UsageError(f"ConnectionOptions.{seconds} must be > 0, got {value}")
        for name in ("max_idle_connections", "max_idle_per_ip"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"ConnectionOptions.{name} must be >= 0 or None, got {value}")


class DataOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The data resources a server answers ``query`` for.

    ``resources``: a ResourceRegistry, a list of Resource, or a shared
    :class:`~transports.data.ResourceBroker` (None: the served agent's
    ``resources``). ``query_queue_timeout``: seconds a query waits for a full
    concurrency limit before 503 (``data.QUERY_QUEUE_TIMEOUT_SECONDS``)."""

    resources: ResourceRegistry | Sequence[Resource] | ResourceBroker | None = None
    query_queue_timeout: float = QUERY_QUEUE_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not self.query_queue_timeout >= 0:
            raise UsageError(f"DataOptions.query_queue_timeout must be >= 0, got {self.query_queue_timeout}")
