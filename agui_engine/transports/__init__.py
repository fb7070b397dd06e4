"""Transports: SSE, WebSocket and stdio servers and clients. They own IO, timers,
keep-alive, backpressure and cancellation; the core does none of that.

The public names are importable from here and loaded on first use, so that
``import agui_engine.transports`` stays cheap and pulls in aiohttp, httpx or websockets only
for the transport actually used. See ``spec/transports.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agui_engine._lazy import export_names, exports_of, load_export

if TYPE_CHECKING:
    from .asgi_server import AsgiGateway, create_asgi_app
    from .clock import Clock, LoopClock, ManualClock
    from .data import ResourceBroker
    from .eventlog import (
        CursorExpiredError,
        EventLog,
        EventLogUnavailableError,
        InMemoryEventLog,
        SharedEventLog,
        UnknownRunError,
    )
    from .fastapi_routes import add_agui_routes
    from .gateway import GatewayAgent, run_via_gateway
    from .history import HistoryBudget, UnknownThreadError
    from .metrics import GatewayMetrics
    from .open_log import open_event_log
    from .redislog import RedisEventLog
    from .registry_options import RegistryOptions
    from .retrying_client import ConnectionLostError, RemoteAgentError, UpstreamStoppedError
    from .runs import RunRegistry
    from .server_options import ConnectionOptions, DataOptions
    from .sse_client import SSEAgent
    from .sse_server import SSEServer, create_app, start_sse_server
    from .stdio_client import StdioAgent
    from .stdio_server import serve_stdio
    from .tool_runner import ThreadedToolRunner, run_agent
    from .websocket_client import WebSocketAgent
    from .websocket_server import WebSocketServer, start_websocket_server

__all__ = [
    "AsgiGateway",
    "Clock",
    "ConnectionLostError",
    "ConnectionOptions",
    "CursorExpiredError",
    "DataOptions",
    "EventLog",
    "EventLogUnavailableError",
    "GatewayAgent",
    "GatewayMetrics",
    "HistoryBudget",
    "InMemoryEventLog",
    "LoopClock",
    "ManualClock",
    "RedisEventLog",
    "RegistryOptions",
    "RemoteAgentError",
    "ResourceBroker",
    "RunRegistry",
    "SSEAgent",
    "SSEServer",
    "SharedEventLog",
    "StdioAgent",
    "ThreadedToolRunner",
    "UnknownRunError",
    "UnknownThreadError",
    "UpstreamStoppedError",
    "WebSocketAgent",
    "WebSocketServer",
    "add_agui_routes",
    "create_app",
    "create_asgi_app",
    "open_event_log",
    "run_agent",
    "run_via_gateway",
    "serve_stdio",
    "start_sse_server",
    "start_websocket_server",
]

#: name -> submodule, read from the TYPE_CHECKING imports above (the one table; agui_engine/_lazy.py)
_EXPORTS = exports_of(__name__)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    return export_names(__name__, _EXPORTS)
