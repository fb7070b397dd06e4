"""The servers' options, one value per concern, shared by the entry points
(``create_app`` / ``start_sse_server``, ``start_websocket_server``, ``serve_stdio``).

Theory of operation
-------------------
Three concerns are the same on every transport, and each is one frozen struct:

* :class:`~transports.registry_options.RegistryOptions` -- the runs: how many, grace and
  retention periods, the per-client and buffered-bytes bounds (all three servers);
* :class:`ConnectionOptions` -- what one client connection may cost: the largest
  input (HTTP body, WebSocket message, stdio line), how long a write may wait for
  a client that stopped reading, how many connections may sit idle (SSE and
  WebSocket; stdio reads only ``max_input_bytes``);
* :class:`DataOptions` -- the data resources ``query`` may ask for (SSE and WebSocket).

Like httpx's ``Timeout`` / ``Limits``, a struct is an *addition*: the entry
points keep their keyword arguments (``start_sse_server(agent, port=0,
send_timeout=5)``) and those fill the struct; a program that configures several
servers the same way builds one value and passes it (``connection=...``). Giving
the same setting both ways is a :class:`~agui_engine.protocol.errors.UsageError` naming
it, never a silent choice. :func:`merge_options` is that rule, for every struct.
Every struct checks its values at construction (UsageError naming the field).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from agui_engine.genui.resources import Resource, ResourceRegistry
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.wire import WireChoice, check_wire_choice

from .connection_gate import MAX_IDLE_CONNECTIONS, MAX_IDLE_CONNECTIONS_PER_IP
from .data import QUERY_QUEUE_TIMEOUT_SECONDS, ResourceBroker
from .input_decoding import DEFAULT_MAX_BODY_BYTES
from .send_stall import SEND_STALL_TIMEOUT_SECONDS

__all__ = ["ConnectionOptions", "DataOptions", "merge_options"]


class ConnectionOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What one client connection may cost a server.

    ``max_input_bytes``: the largest RunAgentInput (HTTP body, WebSocket message,
    stdio line; the keyword ``max_input_bytes=`` of ``create_app``, ``start_websocket_server``
    and ``serve_stdio`` fills it: one name everywhere). ``send_timeout``: seconds one write
    may wait for a client that stopped reading before it is cut.
    ``max_idle_connections`` / ``max_idle_per_ip``: connections that run nothing
    the server / one client address may hold (0 or None: no cap).
    ``wire``: the AG-UI wire an HTTP stream is written in: ``"1"`` (1.0), ``"0"`` (what
    ``@ag-ui/client`` 0.0.5x accepts: CopilotKit, assistant-ui), or ``"auto"``: 1.0 for an
    input declaring ``protocolVersion`` 1.x, else 0 (``protocol/wire.py``, spec/wire-versions.md).
    Raises UsageError (at construction) for a value out of range."""

    max_input_bytes: int = DEFAULT_MAX_BODY_BYTES
    send_timeout: float = SEND_STALL_TIMEOUT_SECONDS
    max_idle_connections: int | None = MAX_IDLE_CONNECTIONS
    max_idle_per_ip: int | None = MAX_IDLE_CONNECTIONS_PER_IP
    wire: WireChoice = "auto"

    def __post_init__(self) -> None:
        check_wire_choice(self.wire, "ConnectionOptions.wire")
        if self.max_input_bytes < 1:
            raise UsageError(f"ConnectionOptions.max_input_bytes must be >= 1, got {self.max_input_bytes}")
        if not self.send_timeout > 0:  # also rejects NaN
            raise UsageError(f"ConnectionOptions.send_timeout must be > 0, got {self.send_timeout}")
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


_S = TypeVar("_S", bound=msgspec.Struct)


def merge_options(cls: type[_S], given: _S | None, *, where: str, **keywords: Any) -> _S:
    """The ``cls`` value an entry point runs with: ``given`` (or the defaults)
    with every keyword argument that differs from its default applied. Raises
    UsageError when a setting comes both in ``given`` and as a keyword."""
    defaults = cls()
    changed = {name: value for name, value in keywords.items() if value != getattr(defaults, name)}
    if given is None:
        return msgspec.structs.replace(defaults, **changed) if changed else defaults
    for name in changed:
        if getattr(given, name) != getattr(defaults, name):
            raise UsageError(
                f"{where}: {name} is given both in {cls.__name__} and as a keyword argument; give it once"
            )
    return msgspec.structs.replace(given, **changed) if changed else given
