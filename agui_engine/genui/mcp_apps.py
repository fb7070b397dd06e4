"""MCP Apps (SEP-1865) as ``@ag-ui/mcp-apps-middleware`` 0.1.1 delivers them: the pure part.

Theory of operation
-------------------
An MCP tool whose ``_meta.ui.resourceUri`` (or the legacy flat ``_meta["ui/resourceUri"]``)
names a ``ui://`` resource of MIME type :data:`MCP_APP_MIME_TYPE` has a user interface. When
such a tool has run, the front end is told so by one event, built by :func:`mcp_apps_activity`::

    ACTIVITY_SNAPSHOT {activityType: "mcp-apps", replace: true,
                       content: {result, resourceUri, serverHash, serverId?, toolInput}}

``result`` is the MCP ``tools/call`` result as the server sent it, ``toolInput`` the
arguments, ``serverHash`` :func:`server_hash` of the server's configuration. The front end
then asks the gateway for the resource and for further calls by starting a *proxied run*:
a run whose ``forwardedProps.__proxiedMCPRequest`` is ``{serverHash, serverId?, method,
params}`` (:func:`proxied_request`). Such a run is not an agent run: it is answered with
``RUN_STARTED`` and ``RUN_FINISHED`` whose ``result`` is the MCP response
(:meth:`McpAppsProxy.run`), or ``{"error": ...}`` with the middleware's own texts
(:func:`unknown_server_error`, :func:`method_not_allowed_error`, :data:`REQUEST_FAILED_ERROR`).
Only :data:`PROXY_METHODS` are forwarded.

**Only what the principal was shown** (a deliberate difference from the middleware, which forwards
any request of any caller): :class:`ShownApps` records, per principal, the ``ui://`` resources of
the apps its runs showed (:data:`MCP_APP_ANNOUNCE_EVENT` and the ``mcp-apps`` activity) on each
server; a proxied request of that principal may read only those resources and may reach a server
(``tools/call``, app-only tools included; ``ping``; ``notifications/message``) only when one of
that server's apps was shown to it. Any other request is refused (:func:`not_shown_error`,
:data:`NOT_UI_RESOURCE_ERROR`) before a connection is used.

:class:`AppServerTable` is the middleware's lookup of a proxied request's server: by
``serverId`` when given and known, else by ``serverHash``; two servers on one endpoint must
have distinct ``serverId`` values and are then reachable by id only.

Which tools have an app is :func:`ui_resource_uri` / :func:`is_model_visible_ui_tool` on the
tool's MCP description (a mapping with ``_meta``); an app-only tool (:func:`is_model_visible`
false) is never offered to a model. A tool source with apps (:class:`AppSource`: the MCP adapter's
``MCPServer``) makes its app tools return an :class:`AppToolResult`, which the loops answer the
model with and then show (:meth:`AppToolResult.activity`).

No IO happens here: :class:`McpAppsProxy` only awaits the connections it is given
(:class:`AppConnection`, the MCP adapter's, which own the timeouts); the run registry
(``agui_engine.transports.runs``) starts the proxied runs, and the browser side (the iframe, its
CSP, the JSON-RPC bridge) is ``agui_engine/static/mcp-apps.js``. ``spec/mcp.md`` (MCP Apps) has the
whole mapping and the security model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from ..protocol.errors import AguiEngineError, RemoteInputError, UsageError
from ..protocol.events import (
    ActivitySnapshotEvent,
    CustomEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
)

__all__ = [
    "AppConnection",
    "AppServer",
    "AppServerTable",
    "AppSource",
    "AppTool",
    "AppToolResult",
    "MAX_SHOWN_APPS",
    "MCP_APPS_ACTIVITY_TYPE",
    "MCP_APP_ANNOUNCE_EVENT",
    "MCP_APP_INPUT_EVENT",
    "MCP_APP_MIME_TYPE",
    "McpAppsProxy",
    "NOT_UI_RESOURCE_ERROR",
    "PROXIED_REQUEST_KEY",
    "PROXY_METHODS",
    "ProxiedRequest",
    "ProxiedRequestError",
    "ProxyCheck",
    "REQUEST_FAILED_ERROR",
    "ShownApps",
    "is_model_visible",
    "is_model_visible_ui_tool",
    "is_proxied",
    "js_json_stringify",
    "mcp_apps_activity",
    "method_not_allowed_error",
    "not_shown_error",
    "proxied_request",
    "server_hash",
    "text_of_result",
    "ui_resource_uri",
    "unknown_server_error",
]

#: The activity type of an MCP app's ``ACTIVITY_SNAPSHOT`` (the middleware's ``MCPAppsActivityType``).
MCP_APPS_ACTIVITY_TYPE: Final = "mcp-apps"
#: The ``CUSTOM`` event that announces a tool's app when its call starts (an agui-engine addition,
#: spec/mcp.md "Tool input while the model types"): ``{toolCallId, toolName, resourceUri, serverHash,
#: serverId?, tool?}``.
MCP_APP_ANNOUNCE_EVENT: Final = "agui_engine.mcp_apps.app"
#: The ``CUSTOM`` event that carries an announced call's arguments as the model types them:
#: ``{toolCallId, operations}``, the JSON Patch operations (RFC 6902 plus the engine's string
#: ``append``) of the one parse the gateway makes of them, applied to ``{}``.
MCP_APP_INPUT_EVENT: Final = "agui_engine.mcp_apps.tool_input"
#: The MIME type of an MCP app's HTML resource.
MCP_APP_MIME_TYPE: Final = "text/html;profile=mcp-app"
#: The ``forwardedProps`` key that makes a run a proxied MCP request.
PROXIED_REQUEST_KEY: Final = "__proxiedMCPRequest"
#: The MCP methods a proxied request may call, as the middleware forwards them; any other is
#: refused before a connection is used (:func:`method_not_allowed_error`).
PROXY_METHODS: Final = ("tools/call", "resources/read", "notifications/message", "ping")
#: The ``result.error`` of a forwarded request the server failed (the middleware's text: the
#: cause stays in the gateway's log, never in the iframe's answer).
REQUEST_FAILED_ERROR: Final = "Error: MCP request failed"
#: The ``result.error`` of a ``resources/read`` whose ``uri`` is not a ``ui://`` URI: the proxy reads
#: apps' HTML, nothing else of a server (an agui-engine refusal: the middleware forwards any URI).
NOT_UI_RESOURCE_ERROR: Final = "Error: MCP UI proxy reads ui:// resources only"
#: (principal, server, ``ui://`` URI) triples :class:`ShownApps` remembers; the least recently shown
#: or used goes first.
MAX_SHOWN_APPS: Final = 10_000

_log = logging.getLogger("agui_engine.genui.mcp_apps")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def js_json_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON strings, numbers that are ints, objects, arrays,
    booleans and null: no spaces, non-ASCII kept, lone surrogates escaped as ``\\udXXX``.

    Raises UsageError for a float (JavaScript's number formatting is not reproduced) or a
    value JSON cannot hold.
    """

    def check(v: Any) -> None:
        if isinstance(v, float):
            raise UsageError("js_json_stringify: floats are not supported (JavaScript formats them its own way)")
        if isinstance(v, Mapping):
            for item in v.values():
                check(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                check(item)
        elif not (v is None or isinstance(v, (str, int, bool))):
            raise UsageError(f"js_json_stringify: {type(v).__name__} is not a JSON value")

    check(value)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def server_hash(type: str, url: str | None) -> str:
    """The middleware's ``getServerHash``: MD5 hex of ``JSON.stringify({type, url})``.

    Headers (credentials) are not part of it, so the front end can name a server without
    learning how the gateway authenticates to it. ``url`` None is JavaScript's ``undefined``
    (the key is left out). ``url`` is hashed as written, not normalised.
    """
    config: dict[str, Any] = {"type": type} if url is None else {"type": type, "url": url}
    return hashlib.md5(js_json_stringify(config).encode("utf-8")).hexdigest()


def ui_resource_uri(tool: Mapping[str, Any]) -> str | None:
    """The tool's ``_meta.ui.resourceUri``, else the legacy ``_meta["ui/resourceUri"]``, else None
    (a value that is not a string counts as absent)."""
    meta = tool.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        uri: str = ui["resourceUri"]
        return uri
    legacy = meta.get("ui/resourceUri")
    return legacy if isinstance(legacy, str) else None


def is_model_visible(tool: Mapping[str, Any]) -> bool:
    """Whether the model may see the tool: ``_meta.ui.visibility`` absent, or a list that contains
    ``"model"`` (an app-only tool, ``["app"]``, is called by its app through the proxy only)."""
    meta = tool.get("_meta")
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    if not isinstance(ui, Mapping) or "visibility" not in ui:
        return True
    visibility = ui["visibility"]
    return isinstance(visibility, list) and "model" in visibility


def is_model_visible_ui_tool(tool: Mapping[str, Any]) -> bool:
    """Whether the tool has an app and the model may call it (the middleware's test): a UI
    resource URI (:func:`ui_resource_uri`) and :func:`is_model_visible`."""
    return ui_resource_uri(tool) is not None and is_model_visible(tool)


def text_of_result(result: Mapping[str, Any]) -> str:
    """The middleware's text of a ``tools/call`` result (its ``TOOL_CALL_RESULT`` content): the
    ``text`` of the text content blocks joined by newlines; without any, the content as JSON."""
    content = result.get("content")
    if isinstance(content, list):
        joined = "\n".join(
            c["text"] for c in content
            if isinstance(c, Mapping) and c.get("type") == "text" and isinstance(c.get("text"), str)
        )
        if joined:
            return joined
    # JSON.stringify(undefined) is no string at all; "" stands for it
    return "" if content is None else json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def mcp_apps_activity(
    *,
    message_id: str,
    result: Any,
    resource_uri: str,
    server_hash: str,
    server_id: str | None,
    tool_input: Any,
) -> ActivitySnapshotEvent:
    """The ``mcp-apps`` ``ACTIVITY_SNAPSHOT`` for one finished call of a UI tool.

    ``serverId`` is left out when None (the middleware's ``undefined``)."""
    content: dict[str, Any] = {"result": result, "resourceUri": resource_uri, "serverHash": server_hash}
    if server_id is not None:
        content["serverId"] = server_id
    content["toolInput"] = tool_input
    return ActivitySnapshotEvent(
        message_id=message_id, activity_type=MCP_APPS_ACTIVITY_TYPE, content=content, replace=True
    )


class ProxiedRequestError(RemoteInputError):
    """``forwardedProps.__proxiedMCPRequest`` is not of the form ``{serverHash, serverId?, method,
    params?}``; the message names the JSON path."""

    default_code = "invalid_proxied_request"


class ProxiedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One MCP request from an app's iframe, forwarded by a proxied run."""

    server_hash: str | None
    server_id: str | None
    method: str
    params: dict[str, Any] | None


def _optional_str(request: Mapping[str, Any], key: str) -> str | None:
    value = request.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ProxiedRequestError(f"forwardedProps.{PROXIED_REQUEST_KEY}.{key} must be a string, not {type(value).__name__}")


def is_proxied(forwarded_props: Any) -> bool:
    """Whether a run with these ``forwardedProps`` is a proxied MCP request rather than an agent
    run: as the middleware, ``__proxiedMCPRequest`` present and not null / false / "" / 0 (the
    request itself is checked by :func:`proxied_request`)."""
    if not isinstance(forwarded_props, Mapping):
        return False
    request = forwarded_props.get(PROXIED_REQUEST_KEY)
    return not (request is None or request is False or request == "" or request == 0)


def proxied_request(forwarded_props: Any) -> ProxiedRequest | None:
    """The proxied request a run's ``forwardedProps`` carries, or None for an agent run
    (:func:`is_proxied`). Raises ProxiedRequestError when it is not an object with a string
    ``method``, optional strings ``serverHash`` / ``serverId`` and an optional object ``params``.
    """
    if not is_proxied(forwarded_props):
        return None
    request = forwarded_props[PROXIED_REQUEST_KEY]
    where = f"forwardedProps.{PROXIED_REQUEST_KEY}"
    if not isinstance(request, Mapping):
        raise ProxiedRequestError(f"{where} must be an object {{serverHash, serverId?, method, params?}}")
    method = request.get("method")
    if not isinstance(method, str):
        raise ProxiedRequestError(f"{where}.method must be a string (an MCP method such as tools/call)")
    params = request.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise ProxiedRequestError(f"{where}.params must be an object")
    return ProxiedRequest(
        server_hash=_optional_str(request, "serverHash"),
        server_id=_optional_str(request, "serverId"),
        method=method,
        params=dict(params) if params is not None else None,
    )


def unknown_server_error(request: ProxiedRequest) -> dict[str, str]:
    """The answer to a request naming no configured server (the middleware's text)."""
    name = request.server_id or request.server_hash
    return {"error": f"Unknown server: {'undefined' if name is None else name}"}


def method_not_allowed_error(method: str) -> dict[str, str]:
    """The answer to a request for a method outside :data:`PROXY_METHODS` (the middleware's text)."""
    return {"error": f"Error: MCP method not allowed for UI proxy: {method}"}


def not_shown_error(request: ProxiedRequest) -> dict[str, str]:
    """The answer to a request beyond what the principal's runs showed (:class:`ShownApps`)."""
    if request.method == "resources/read":
        return {"error": "Error: MCP resource not shown in this principal's runs (the UI proxy reads only "
                         "the ui:// resources of apps they showed)"}
    return {"error": f"Error: MCP {request.method} refused: no app of this server was shown in this "
                     "principal's runs"}


class AppServer(msgspec.Struct, frozen=True, kw_only=True):
    """How a proxied request names one MCP server: its transport ``type`` ("http", "sse",
    "stdio"), its ``url`` (for stdio: the command line, see spec/mcp.md), its ``server_id``."""

    type: str
    url: str | None
    server_id: str | None = None

    @property
    def hash(self) -> str:
        """:func:`server_hash` of ``type`` and ``url``."""
        return server_hash(self.type, self.url)


class AppTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool's app as known before the tool runs (its ``_meta.ui.resourceUri`` and server): what
    the loops announce at the call's start and stream the input of (:meth:`announce`, :meth:`input`)."""

    resource_uri: str
    server: AppServer
    #: the MCP tool as its server lists it (``{name, description?, inputSchema}``): the app's
    #: ``hostContext.toolInfo.tool``
    tool: dict[str, Any] | None = None

    def announce(self, tool_call_id: str, tool_name: str) -> CustomEvent:
        """The :data:`MCP_APP_ANNOUNCE_EVENT` of one call of this tool."""
        value: dict[str, Any] = {"toolCallId": tool_call_id, "toolName": tool_name,
                                 "resourceUri": self.resource_uri, "serverHash": self.server.hash}
        if self.server.server_id is not None:
            value["serverId"] = self.server.server_id
        if self.tool is not None:
            value["tool"] = self.tool
        return CustomEvent(name=MCP_APP_ANNOUNCE_EVENT, value=value)

    @staticmethod
    def input(tool_call_id: str, operations: list[dict[str, Any]]) -> CustomEvent | None:
        """The :data:`MCP_APP_INPUT_EVENT` of one fragment's operations (standard parameters left
        out: the app sees the tool's own arguments), or None when none is left."""
        kept = [op for op in operations if "/_tambo_" not in op["path"]]
        return CustomEvent(name=MCP_APP_INPUT_EVENT, value={"toolCallId": tool_call_id, "operations": kept}) if kept else None


class AppServerTable:
    """The servers proxied requests may reach, looked up as the middleware looks them up.

    Raises UsageError (as the middleware's constructor) when two servers share an endpoint and
    either has no ``server_id``, or two servers share a ``server_id``.
    """

    __slots__ = ("_ambiguous", "_by_hash", "_by_id")

    def __init__(self, servers: Iterable[AppServer]) -> None:
        self._by_hash: dict[str, AppServer] = {}
        self._by_id: dict[str, AppServer] = {}
        self._ambiguous: set[str] = set()
        for server in servers:
            h = server.hash
            previous = self._by_hash.get(h)
            if previous is not None or h in self._ambiguous:
                if not server.server_id or (previous is not None and not previous.server_id):
                    raise UsageError("MCP servers sharing an endpoint require distinct serverId values "
                                     "(give each its own server_id; on the command line --mcp ID=URL)")
                self._by_hash.pop(h, None)
                self._ambiguous.add(h)
            else:
                self._by_hash[h] = server
            if server.server_id:
                if server.server_id in self._by_id:
                    raise UsageError(f"MCP servers require distinct serverId values ({server.server_id!r} is "
                                     "given twice)")
                self._by_id[server.server_id] = server

    def lookup(self, request: ProxiedRequest) -> AppServer | None:
        """The server ``request`` names: by ``serverId`` if given and known, else by ``serverHash``."""
        return self.find(request.server_id, request.server_hash)

    def find(self, server_id: str | None, server_hash: str | None) -> AppServer | None:
        """The server named by ``server_id`` if given and known, else by ``server_hash``."""
        server = self._by_id.get(server_id) if server_id else None
        if server is None and server_hash is not None:
            server = self._by_hash.get(server_hash)
        return server


#: What a proxied request may still be refused for once its server and method are known: None to
#: forward it, else the ``RUN_FINISHED.result`` to answer instead (``ShownApps.refusal`` of one principal).
ProxyCheck = Callable[[AppServer, ProxiedRequest], "dict[str, str] | None"]


class ShownApps:
    """What each principal's runs showed of the proxy's servers' apps: the ``ui://`` resource of
    every app announced (:data:`MCP_APP_ANNOUNCE_EVENT`) or shown (the ``mcp-apps`` activity) in
    them, per server (looked up in ``table`` as a proxied request is). Fed every such event of a
    principal's runs (:meth:`note`); answers whether that principal's proxied request may go on
    (:meth:`refusal`).

    A principal is whatever the transport says owns the run: a bearer token's name, ``""`` for the
    shared token, None with auth off (every client then is the one anonymous principal). At most
    ``limit`` (principal, server, URI) triples are kept; beyond it the least recently shown or
    used is forgotten (its app's next request is refused).
    """

    __slots__ = ("_per_server", "_shown", "limit", "table")

    def __init__(self, table: AppServerTable, limit: int = MAX_SHOWN_APPS) -> None:
        if limit < 1:
            raise UsageError(f"ShownApps(limit={limit}): the limit must be at least 1")
        self.table = table
        self.limit = limit
        # (principal, server, uri) -> None, oldest first; and how many URIs each (principal, server) has
        self._shown: dict[tuple[str | None, AppServer, str], None] = {}
        self._per_server: dict[tuple[str | None, AppServer], int] = {}

    def __len__(self) -> int:
        return len(self._shown)

    def note(self, principal: str | None, event: object) -> None:
        """Record the app ``event`` shows ``principal``, if it is an app's announcement or
        ``mcp-apps`` activity naming a ``ui://`` resource of a known server; else nothing."""
        if isinstance(event, CustomEvent):
            if event.name != MCP_APP_ANNOUNCE_EVENT:
                return
            app: Any = event.value
        elif isinstance(event, ActivitySnapshotEvent):
            if event.activity_type != MCP_APPS_ACTIVITY_TYPE:
                return
            app = event.content
        else:
            return
        if not isinstance(app, Mapping):
            return
        uri, server_id, hash_ = app.get("resourceUri"), app.get("serverId"), app.get("serverHash")
        if not (isinstance(uri, str) and uri.startswith("ui://")):
            return
        server = self.table.find(server_id if isinstance(server_id, str) else None,
                                 hash_ if isinstance(hash_, str) else None)
        if server is not None:
            self._remember((principal, server, uri))

    def _remember(self, key: tuple[str | None, AppServer, str]) -> None:
        shown = self._shown
        if key in shown:
            del shown[key]  # re-inserted last: the most recently shown or used
        else:
            while len(shown) >= self.limit:
                self._forget(next(iter(shown)))
            pair = (key[0], key[1])
            self._per_server[pair] = self._per_server.get(pair, 0) + 1
        shown[key] = None

    def _forget(self, key: tuple[str | None, AppServer, str]) -> None:
        del self._shown[key]
        pair = (key[0], key[1])
        left = self._per_server[pair] - 1
        if left:
            self._per_server[pair] = left
        else:
            del self._per_server[pair]

    def shown(self, principal: str | None, server: AppServer) -> frozenset[str]:
        """The ``ui://`` URIs of ``server``'s apps shown to ``principal`` (and still remembered)."""
        return frozenset(uri for p, s, uri in self._shown if p == principal and s == server)

    def refusal(self, principal: str | None, server: AppServer, request: ProxiedRequest) -> dict[str, str] | None:
        """None when ``principal`` may send ``request`` to ``server``, else the answer refusing it:
        ``resources/read`` of a ``ui://`` URI shown to it (:data:`NOT_UI_RESOURCE_ERROR` for
        another scheme); any other method once an app of ``server`` was shown to it
        (:func:`not_shown_error`)."""
        if request.method == "resources/read":
            uri = request.params.get("uri") if request.params is not None else None
            if not (isinstance(uri, str) and uri.startswith("ui://")):
                return {"error": NOT_UI_RESOURCE_ERROR}
            key = (principal, server, uri)
            if key not in self._shown:
                return not_shown_error(request)
            self._remember(key)
            return None
        if (principal, server) not in self._per_server:
            return not_shown_error(request)
        return None


class AppConnection(Protocol):
    """What the proxy needs of a connection to one MCP server (the MCP client in
    ``agui_engine.adapters.mcp`` is one). Each call is bounded by the connection's own timeout;
    a failure raises (any exception: the proxy answers :data:`REQUEST_FAILED_ERROR`)."""

    async def request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """Send a JSON-RPC request; its ``result`` as JSON (a dict)."""
        ...

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Send a JSON-RPC notification."""
        ...


@runtime_checkable
class AppSource(AppConnection, Protocol):
    """A tool source that can show apps: it names its server for proxied requests
    (:attr:`app_server`) and forwards them (:class:`AppConnection`). ``agui_engine.adapters.MCPServer``
    is one."""

    @property
    def app_server(self) -> AppServer:
        """How proxied requests and activities name this server."""
        ...


class McpAppsProxy:
    """Answers proxied MCP requests as the middleware answers them, over the given connections.

    ``servers``: (how requests name the server, its connection) pairs. Raises UsageError as
    :class:`AppServerTable` does. No connection is used for an unknown server or a refused method.
    """

    __slots__ = ("_connections", "servers", "table")

    def __init__(self, servers: Iterable[tuple[AppServer, AppConnection]] = ()) -> None:
        pairs = list(servers)
        self.servers: tuple[AppServer, ...] = tuple(server for server, _ in pairs)
        self.table = AppServerTable(self.servers)
        self._connections = {id(server): connection for server, connection in pairs}

    @classmethod
    def of_sources(cls, sources: Iterable[object]) -> McpAppsProxy:
        """The proxy of an agent's tool sources: every :class:`AppSource` among them (an MCP
        server), named by its :attr:`~AppSource.app_server`. Raises UsageError as the table does."""
        return cls((source.app_server, source) for source in sources if isinstance(source, AppSource))

    def connection(self, server: AppServer) -> AppConnection:
        """The connection of one of :attr:`servers`; KeyError for another server."""
        return self._connections[id(server)]

    async def answer(self, request: ProxiedRequest, check: ProxyCheck | None = None) -> Any:
        """The ``RUN_FINISHED.result`` of ``request``: the MCP response, or ``{"error": ...}``.
        ``check``: asked once the server and the method are known (:data:`ProxyCheck`, e.g. a
        principal's :meth:`ShownApps.refusal`); a refusal is the answer, no connection is used.
        None: every request to a known server with an allowed method goes on (the middleware's way).

        Never raises for a failing server: the failure is logged (the server's id and hash and
        the error's type; an engine error's message, which names no credential) and answered
        with :data:`REQUEST_FAILED_ERROR`."""
        server = self.table.lookup(request)
        if server is None:
            return unknown_server_error(request)
        if request.method not in PROXY_METHODS:
            return method_not_allowed_error(request.method)
        if check is not None:
            refused = check(server, request)
            if refused is not None:
                return refused
        connection = self.connection(server)
        try:
            if request.method == "notifications/message":
                await connection.notify(request.method, request.params)
                return {"success": True}
            return await connection.request(request.method, request.params)
        except Exception as exc:  # noqa: BLE001 - any failure of the server is the same answer to the iframe
            detail = f": {exc.message}" if isinstance(exc, AguiEngineError) else ""
            _log.warning("MCP proxy request %s failed (serverId %s, serverHash %s): %s%s", request.method,
                         server.server_id, server.hash, type(exc).__name__, detail)
            return {"error": REQUEST_FAILED_ERROR}

    async def run(self, input: RunAgentInput, request: ProxiedRequest, check: ProxyCheck | None = None
                  ) -> AsyncIterator[Event]:
        """The events of a proxied run: ``RUN_STARTED`` at once, ``RUN_FINISHED`` with the answer
        (:meth:`answer`, ``check`` included)."""
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        result = await self.answer(request, check)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id, result=result)


class AppToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool with an app returns to the loop that ran it: the MCP ``tools/call`` result as
    the server sent it, the app's resource and the server. The loop answers the model with
    :attr:`text` (an error when :attr:`is_error`) and then sends :meth:`activity`.
    """

    result: dict[str, Any]
    resource_uri: str
    server: AppServer

    @property
    def text(self) -> str:
        """The ``TOOL_CALL_RESULT`` content (:func:`text_of_result`)."""
        return text_of_result(self.result)

    @property
    def is_error(self) -> bool:
        """Whether the server flagged the result ``isError`` (the app is still shown, as the middleware shows it)."""
        return self.result.get("isError") is True

    def activity(self, message_id: str, tool_input: Any) -> ActivitySnapshotEvent:
        """The ``mcp-apps`` ``ACTIVITY_SNAPSHOT`` of this call (:func:`mcp_apps_activity`)."""
        return mcp_apps_activity(message_id=message_id, result=self.result, resource_uri=self.resource_uri,
                                 server_hash=self.server.hash, server_id=self.server.server_id,
                                 tool_input=tool_input)
