"""Transports: SSE, WebSocket and stdio servers and clients. They own IO, timers,
keep-alive, backpressure and cancellation; the core does none of that.

The public names are importable from here and loaded on first use, so that
``import transports`` stays cheap and pulls in aiohttp, httpx or websockets only
for the transport actually used. See ``spec/transports.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "create_app": "sse",
    "start_sse_server": "sse",
    "SSEServer": "sse",
    "SSEAgent": "sse",
    "start_ws_server": "websocket",
    "WSServer": "websocket",
    "WebSocketAgent": "websocket",
    "serve_stdio": "stdio",
    "StdioAgent": "stdio",
    "RunRegistry": "runs",
    "RegistryOptions": "runs",
    "Clock": "clock",
    "LoopClock": "clock",
    "ManualClock": "clock",
    "EventLog": "eventlog",
    "InMemoryEventLog": "eventlog",
    "CursorExpiredError": "eventlog",
    "UnknownRunError": "eventlog",
    "RemoteAgentError": "common",
    "ConnectionLostError": "common",
    "run_via_gateway": "gateway",
    "GatewayAgent": "gateway",
}

__all__ = [
    "Clock",
    "ConnectionLostError",
    "CursorExpiredError",
    "EventLog",
    "GatewayAgent",
    "InMemoryEventLog",
    "LoopClock",
    "ManualClock",
    "RegistryOptions",
    "RemoteAgentError",
    "RunRegistry",
    "SSEAgent",
    "SSEServer",
    "StdioAgent",
    "UnknownRunError",
    "WSServer",
    "WebSocketAgent",
    "create_app",
    "run_via_gateway",
    "serve_stdio",
    "start_sse_server",
    "start_ws_server",
]
assert sorted(__all__) == sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
