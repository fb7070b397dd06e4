"""The official ``mcp`` SDK's two API lines, 1.x and 2.x, behind one small interface.

Theory of operation
-------------------
``pip install 'agui-engine[mcp]'`` gets whatever ``mcp`` the environment allows: the 2.x line
today, the 1.x line where another package pins ``mcp<2`` (crewai does). Both speak the same
protocol; their Python APIs differ where this package touches them:

* 2.x renamed ``FastMCP`` to ``mcp.server.mcpserver.MCPServer`` (host and port moved from the
  constructor to ``run``), and ``mcp.server.fastmcp`` raises ``ModuleNotFoundError``;
* its types (``mcp.types``, the ``mcp_types`` package) are plain models with snake_case attributes
  (``input_schema``, ``next_cursor``) and the unions (``ClientRequest``, ``ServerNotification``,
  ``JSONRPCMessage``) are type unions validated by type adapters, not ``RootModel`` wrappers with a
  ``.root``;
* ``McpError`` is ``MCPError``; ``mcp.shared.version`` is gone (``mcp.types.version``);
* its HTTP transports are built on ``httpx2`` instead of ``httpx``, and ``streamable_http_client``
  yields two streams instead of three;
* its ``ClientSession`` declares capability extensions itself (``extensions=``), where 1.x needs
  ``initialize`` rewritten; ``read_resource`` takes a ``str``, not a pydantic ``AnyUrl``.

Every function here imports the SDK when called (it is an optional extra) and does no IO of its
own. :func:`sdk_major` says which line is installed; the rest take or return the SDK's objects.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any, Final

__all__ = [
    "CONNECTION_CLOSED_CODE",
    "FastServer",
    "any_result",
    "client_notification",
    "client_request",
    "default_environment",
    "error_class",
    "http_module",
    "jsonrpc_message",
    "logging_notification",
    "new_server",
    "next_cursor",
    "notification_of",
    "open_session",
    "read_resource",
    "result_json",
    "run_server",
    "sdk_major",
    "sdk_version",
    "session_message",
    "sse_streams",
    "streamable_http_streams",
    "tool_parts",
]

#: The JSON-RPC code both SDK lines answer a request with when the connection closed first
#: (``mcp.types.CONNECTION_CLOSED``: the SDK's own, never sent on the wire).
CONNECTION_CLOSED_CODE: Final = -32000

#: What either line's server class is (``FastMCP`` in 1.x, ``MCPServer`` in 2.x).
FastServer = Any


def _module(name: str) -> Any:
    """The SDK's module ``name``, typed ``Any``: what is in it depends on the installed line, so the
    type checker (which sees one line) checks this module's uses of it no further."""
    return importlib.import_module(name)


def sdk_version() -> str:
    """The installed ``mcp`` distribution's version; raises ``ImportError`` when it is not installed."""
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("the mcp package is not installed: pip install 'agui-engine[mcp]'") from None


@functools.cache
def sdk_major() -> int:
    """1 or 2: the installed SDK's API line (ImportError when it is not installed)."""
    head = sdk_version().split(".", 1)[0]
    return int(head) if head.isdigit() else 1


def http_module() -> ModuleType:
    """The HTTP library the SDK's HTTP transports are built on: ``httpx`` (1.x) or ``httpx2`` (2.x)."""
    return importlib.import_module("httpx2" if sdk_major() >= 2 else "httpx")


# -- types


def _validated(adapter_name: str, model_name: str, doc: Mapping[str, Any]) -> Any:
    types = _module("mcp.types")

    if sdk_major() >= 2:
        return getattr(types, adapter_name).validate_python(dict(doc), by_name=False)
    return getattr(types, model_name).model_validate(dict(doc))


def client_request(doc: Mapping[str, Any]) -> Any:
    """``{"method", "params"}`` as the SDK's client request; ``pydantic.ValidationError`` when the
    schema knows no such request."""
    return _validated("client_request_adapter", "ClientRequest", doc)


def any_result() -> Any:
    """The result type that keeps whatever a request's answer holds (``send_request``'s second
    argument): 1.x's ``Result`` (extra fields allowed); in 2.x, whose ``Result`` drops them, a type
    adapter to a plain dict (the session checks the answer against the method's schema first)."""
    types = _module("mcp.types")
    if sdk_major() >= 2:
        from pydantic import TypeAdapter

        return TypeAdapter(dict[str, Any])
    return types.Result


def result_json(result: Any) -> str:
    """A result model's JSON as the server sent it: 2.x models add fields of later protocol
    revisions with defaults (``resultType: "complete"``), which a peer's host never saw, so only
    the fields set are kept; 1.x's are dumped without their ``None`` fields."""
    if sdk_major() >= 2:
        data: str = result.model_dump_json(by_alias=True, exclude_unset=True)
    else:
        data = result.model_dump_json(by_alias=True, exclude_none=True)
    return data


def client_notification(doc: Mapping[str, Any]) -> Any:
    """``{"method", "params"}`` as the SDK's client notification; ``pydantic.ValidationError`` otherwise."""
    return _validated("client_notification_adapter", "ClientNotification", doc)


def logging_notification(doc: Mapping[str, Any]) -> Any:
    """``notifications/message`` as something the session sends (the client schema has no such
    notification; the session only serializes it); ``pydantic.ValidationError`` when malformed."""
    types = _module("mcp.types")
    message = types.LoggingMessageNotification.model_validate(dict(doc))
    return message if sdk_major() >= 2 else types.ServerNotification(message)


def notification_of(message: Any) -> Any:
    """What a session's message handler received, unwrapped (1.x wraps notifications in a ``RootModel``)."""
    return getattr(message, "root", message) if sdk_major() < 2 else message


def jsonrpc_message(line: bytes) -> Any:
    """One JSON-RPC message from its JSON; ``pydantic.ValidationError`` when it is not one."""
    types = _module("mcp.types")
    if sdk_major() >= 2:
        return types.jsonrpc.jsonrpc_message_adapter.validate_json(line, by_name=False)
    return types.JSONRPCMessage.model_validate_json(line)


def session_message(message: Any) -> Any:
    """The transport's envelope of one JSON-RPC message."""
    return _module("mcp.shared.message").SessionMessage(message)


def tool_parts(tool: Any) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
    """A listed ``Tool``'s ``(name, description, input schema, _meta)``."""
    schema = tool.input_schema if sdk_major() >= 2 else tool.inputSchema
    return tool.name, tool.description or "", dict(schema or {}), dict(tool.meta) if tool.meta else None


def next_cursor(page: Any) -> str | None:
    """A paged result's cursor for the next page (None: the last page)."""
    cursor: str | None = page.next_cursor if sdk_major() >= 2 else page.nextCursor
    return cursor


def error_class() -> type[Exception]:
    """The exception the SDK raises for an MCP error answer (``McpError`` / ``MCPError``);
    its ``error`` is the ``ErrorData`` (``code``, ``message``)."""
    error: type[Exception] = getattr(_module("mcp.shared.exceptions"), "MCPError" if sdk_major() >= 2 else "McpError")
    return error


def default_environment() -> dict[str, str]:
    """The environment variables the SDK passes on to a stdio server (``PATH``, ``HOME``...)."""
    environment: dict[str, str] = _module("mcp.client.stdio").get_default_environment()
    return environment


# -- the client session and transports


async def open_session(stack: contextlib.AsyncExitStack, read: Any, write: Any,
                       on_message: Callable[[Any], Awaitable[None]], *, client_name: str,
                       extensions: Mapping[str, dict[str, Any]]) -> Any:
    """A ``ClientSession`` over ``read``/``write`` entered on ``stack`` and initialized, declaring the
    capability ``extensions`` (MCP Apps': a server may offer its UI tools only to a host that draws
    them). Raises what the SDK raises when the server does not answer or speaks another version."""
    mcp, types = _module("mcp"), _module("mcp.types")
    info = types.Implementation(name=client_name, version="1")
    if sdk_major() >= 2:
        session = await stack.enter_async_context(mcp.ClientSession(
            read, write, message_handler=on_message, client_info=info,
            extensions={key: dict(value) for key, value in extensions.items()}))
        await session.initialize()
        return session
    session = await stack.enter_async_context(_apps_session_class()(
        read, write, message_handler=on_message, client_info=info))
    await session.initialize_with(extensions)
    return session


@functools.cache
def _apps_session_class() -> Any:
    """1.x: ``ClientSession`` with an ``initialize`` that declares extensions (an extra field of the
    capabilities model, ``extra="allow"``: the 1.x schema predates extensions)."""
    base, types = _module("mcp").ClientSession, _module("mcp.types")
    supported = _module("mcp.shared.version").SUPPORTED_PROTOCOL_VERSIONS

    class AppsSession(base):  # type: ignore[misc,valid-type]
        async def initialize_with(self, extensions: Mapping[str, dict[str, Any]]) -> Any:
            capabilities = types.ClientCapabilities.model_validate({"extensions": dict(extensions)})
            result = await self.send_request(
                types.ClientRequest(types.InitializeRequest(params=types.InitializeRequestParams(
                    protocolVersion=types.LATEST_PROTOCOL_VERSION, capabilities=capabilities,
                    clientInfo=self._client_info))),
                types.InitializeResult)
            if result.protocolVersion not in supported:
                raise RuntimeError(f"the server speaks MCP {result.protocolVersion}, which this client does not")
            self._server_capabilities = result.capabilities
            await self.send_notification(types.ClientNotification(types.InitializedNotification()))
            return result

    return AppsSession


async def streamable_http_streams(stack: contextlib.AsyncExitStack, url: str, http_client: Any) -> tuple[Any, Any]:
    """The streamable HTTP transport's ``(read, write)`` over ``http_client`` (an :func:`http_module` client)."""
    streamable_http_client = _module("mcp.client.streamable_http").streamable_http_client
    if sdk_major() >= 2:  # the size limit is the caller's transport's (MAX_MCP_RESULT_BYTES), not 1 MiB
        streams = await stack.enter_async_context(
            streamable_http_client(url, http_client=http_client, max_sse_event_size=None))
    else:
        streams = await stack.enter_async_context(streamable_http_client(url, http_client=http_client))
    return streams[0], streams[1]  # 1.x also yields a session-id getter


async def sse_streams(stack: contextlib.AsyncExitStack, url: str, *, headers: dict[str, str] | None,
                      timeout: float, read_timeout: float, client_factory: Any) -> tuple[Any, Any]:
    """The legacy SSE transport's ``(read, write)``; ``client_factory(headers, timeout, auth)`` makes its client."""
    sse_client = _module("mcp.client.sse").sse_client
    read, write = await stack.enter_async_context(sse_client(
        url, headers=headers, timeout=timeout, sse_read_timeout=read_timeout, httpx_client_factory=client_factory))
    return read, write


async def read_resource(session: Any, uri: str) -> Any:
    """``resources/read`` of ``uri`` on ``session``."""
    if sdk_major() >= 2:
        return await session.read_resource(uri)
    from pydantic import AnyUrl

    return await session.read_resource(AnyUrl(uri))


# -- servers (the demo's and the tests')


def new_server(name: str, *, log_level: str = "WARNING") -> FastServer:
    """A new high-level server (``FastMCP`` / ``MCPServer``) named ``name``."""
    if sdk_major() >= 2:
        return _module("mcp.server.mcpserver").MCPServer(name, log_level=log_level)
    return _module("mcp.server.fastmcp").FastMCP(name, log_level=log_level)


def run_server(server: FastServer, transport: str, *, port: int = 0) -> None:
    """Serve ``server`` over ``transport`` (``stdio``, ``streamable-http`` or ``sse``; the HTTP ones
    on 127.0.0.1:``port``) until it ends."""
    if transport == "stdio":
        server.run("stdio")
    elif sdk_major() >= 2:
        server.run(transport, host="127.0.0.1", port=port)
    else:
        server.settings.host, server.settings.port = "127.0.0.1", port
        server.run(transport)
