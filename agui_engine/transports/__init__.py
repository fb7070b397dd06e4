"""Transports: SSE, WebSocket and stdio servers and clients. They own IO, timers,
keep-alive, backpressure and cancellation; the core does none of that.

The public names are importable from here and loaded on first use, so that
``import agui_engine.transports`` stays cheap and pulls in aiohttp, httpx or websockets only
for the transport actually used. See ``spec/transports.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agui_engine._lazy import export_names, load_export

if TYPE_CHECKING:
    from .asgi_server import AsgiGateway, create_asgi_app
    from .clock import Clock, LoopClock, ManualClock
    from .data import ResourceBroker
    from .eventlog import CursorExpiredError, EventLog, InMemoryEventLog, UnknownRunError
    from .fastapi_routes import add_agui_routes
    from .gateway import GatewayAgent, run_via_gateway
    from .history import HistoryBudget, UnknownThreadError
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

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "AsgiGateway": "asgi_server",
    "add_agui_routes": "fastapi_routes",
    "create_asgi_app": "asgi_server",
    "Clock": "clock",
    "ConnectionOptions": "server_options",
    "DataOptions": "server_options",
    "EventLogUnavailableError": "eventlog",
    "GatewayMetrics": "metrics",
    "RedisEventLog": "redislog",
    "SharedEventLog": "eventlog",
    "ThreadedToolRunner": "tool_runner",
    "open_event_log": "open_log",
    "ConnectionLostError": "retrying_client",
    "CursorExpiredError": "eventlog",
    "EventLog": "eventlog",
    "GatewayAgent": "gateway",
    "HistoryBudget": "history",
    "InMemoryEventLog": "eventlog",
    "LoopClock": "clock",
    "ManualClock": "clock",
    "RegistryOptions": "registry_options",
    "RemoteAgentError": "retrying_client",
    "ResourceBroker": "data",
    "RunRegistry": "runs",
    "SSEAgent": "sse_client",
    "SSEServer": "sse_server",
    "StdioAgent": "stdio_client",
    "UnknownRunError": "eventlog",
    "UnknownThreadError": "history",
    "UpstreamStoppedError": "retrying_client",
    "WebSocketAgent": "websocket_client",
    "WebSocketServer": "websocket_server",
    "create_app": "sse_server",
    "run_agent": "tool_runner",
    "run_via_gateway": "gateway",
    "serve_stdio": "stdio_server",
    "start_sse_server": "sse_server",
    "start_websocket_server": "websocket_server",
}

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


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    return export_names(__name__, _EXPORTS)
