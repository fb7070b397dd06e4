"""MCP servers as tool sources: the official ``mcp`` SDK's client, one connection per server per process.

Theory of operation
-------------------
:class:`MCPServer` is the configuration of one Model Context Protocol server: streamable
HTTP (``transport="http"``, the default for a URL), SSE (``"sse"``) or a subprocess
speaking over stdio (``"stdio"``: ``command``, ``args``, ``env``), with ``headers`` for
the HTTP ones and a ``server_id`` (its namespace and its name in ``/readyz``). It is a
:class:`~agui_engine.loops.tool_sources.ToolSource`, so ``LLMAgent(model,
mcp_servers=[MCPServer(url=...)])`` offers its tools to the model.

Connections. :class:`MCPConnections` holds one :class:`MCPConnection` per server
configuration for the process (:func:`mcp_connections` is the process's own; a server's
tool-source methods use it). A connection is opened on first use by a background task
that owns the SDK's context managers (the transport, then the ``ClientSession``: anyio
wants them entered and left in one task), initializes the session and lists the tools
(paged, at most :data:`MAX_MCP_TOOLS` a server). The tools stay cached until the server
sends ``notifications/tools/list_changed``; the next :meth:`MCPConnection.list_tools`
then lists them again. Every call runs on that one session, concurrently.

Failures. A connection that cannot be opened (refused, the command not found, no
``initialize`` answer within :data:`MCP_CONNECT_TIMEOUT_SECONDS`) is down: its tools are
absent (``list_tools`` returns ``[]``), one WARNING line says why, ``status()`` (``/readyz``)
says so, and the next attempt waits :data:`MCP_RECONNECT_INITIAL_SECONDS`, doubling up to
:data:`MCP_RECONNECT_MAX_SECONDS` (a use before then returns at once). A call that sees the
connection break (the stdio process died, the stream closed, a malformed JSON-RPC message
arrived) fails with :class:`MCPConnectionError` at once -- every call in flight on that
session does -- and the connection is reopened on the next use, after the backoff. Each
request waits at most ``call_timeout`` (default :data:`MCP_CALL_TIMEOUT_SECONDS`):
:class:`MCPTimeoutError`. A result larger than :data:`MAX_MCP_RESULT_BYTES` (its JSON) is
:class:`MCPResultTooLargeError`. None of them fails a run: the agent turns them into an
error tool result.

Secrets. ``headers`` and ``env`` are credentials: they go to the transport and nowhere
else -- not into ``repr``, ``status()``, an error message or a log line (a URL is logged
without its query and user info). Closing (:meth:`MCPConnections.aclose`) ends every
session; a stdio server's process is terminated and reaped by the SDK's ``stdio_client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec

from agui_engine.adapters import mcp_sdk as sdk
from agui_engine.genui.mcp_apps import AppServer
from agui_engine.loops.observe import trace_headers
from agui_engine.loops.tool_sources import SourceTool, SourceToolResult, result_text
from agui_engine.protocol.errors import UpstreamError, UsageError

if TYPE_CHECKING:  # the SDK is an optional extra, imported when a connection opens
    from mcp import ClientSession

__all__ = [
    "MAX_MCP_RESULT_BYTES",
    "MAX_MCP_TOOLS",
    "MCPConnection",
    "MCPConnectionError",
    "MCPConnections",
    "MCPError",
    "MCPResultTooLargeError",
    "MCPServer",
    "MCPTimeoutError",
    "MCPToolLimitError",
    "MCP_CALL_TIMEOUT_SECONDS",
    "MCP_CONNECT_TIMEOUT_SECONDS",
    "MCP_RECONNECT_INITIAL_SECONDS",
    "MCP_RECONNECT_MAX_SECONDS",
    "MCP_STDIO_EXIT_SECONDS",
    "MessageSizeGauge",
    "mcp_connections",
]

_log = logging.getLogger("agui_engine.adapters.mcp")

#: Seconds one MCP request (a tool call, a resource read, a list) may take. A tool
#: slower than this is better run as a background job; a hung server would otherwise
#: hold the run. Below the agent's own ``tool_timeout`` (60 s), so the MCP error -- which
#: names the server -- is the one the model reads.
MCP_CALL_TIMEOUT_SECONDS: Final = 30.0
#: Seconds to open a connection: spawn or reach the server and get its ``initialize``
#: answer and first tool list. A local server answers in well under a second; a run
#: waits for this at most once per backoff period.
MCP_CONNECT_TIMEOUT_SECONDS: Final = 10.0
#: First wait before reconnecting to a server that failed, doubled after each failure
#: up to :data:`MCP_RECONNECT_MAX_SECONDS` (reset by a success): a restarting server is
#: back within seconds, a dead one costs one fast-failing check per run.
MCP_RECONNECT_INITIAL_SECONDS: Final = 0.5
#: Longest wait between reconnection attempts.
MCP_RECONNECT_MAX_SECONDS: Final = 30.0
#: Tools one server may list. 128 is what OpenAI accepts in one request and more than
#: any model picks among well; a server listing more is refused whole (its tools are
#: absent, the error says why) rather than cut at an arbitrary tool.
MAX_MCP_TOOLS: Final = 128
#: Bytes of one MCP result (its JSON). Four times the agent's 1 MiB tool-result cap, so
#: binary blocks (images) and structured content fit; 50 MB from a runaway tool does not.
MAX_MCP_RESULT_BYTES: Final = 4 * 1024 * 1024

#: Seconds a stdio server may take to exit after its stdin closes, and again after SIGTERM,
#: before it is killed: the SDK's own grace, enough for a server to flush its logs.
MCP_STDIO_EXIT_SECONDS: Final = 2.0
#: How long the legacy SSE stream may stay silent before the SDK gives up on it (its keepalives
#: are far more frequent; a silent server is broken and reconnected at the next use).
_SSE_READ_TIMEOUT_SECONDS: Final = 300.0

#: The MIME type MCP Apps resources declare; offered in the client's capabilities.
_APP_MIME_TYPE: Final = "text/html;profile=mcp-app"
#: The MCP Apps extension's capability key.
_APPS_EXTENSION: Final = "io.modelcontextprotocol/ui"
_NOT_ID_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")
_CLIENT_NAME: Final = "agui-engine"


class MCPError(UpstreamError):
    """Base of the MCP adapter's errors: a server failed or misbehaved."""

    default_code = "mcp_error"


class MCPConnectionError(MCPError):
    """The server cannot be reached, or its connection broke (a crash, a malformed message)."""

    default_code = "mcp_unavailable"


class MCPTimeoutError(MCPError):
    """The server did not answer a request within its ``call_timeout``."""

    default_code = "mcp_timeout"


class MCPResultTooLargeError(MCPError):
    """A result was larger than :data:`MAX_MCP_RESULT_BYTES`."""

    default_code = "mcp_result_too_large"


class MCPToolLimitError(MCPError):
    """A server listed more than :data:`MAX_MCP_TOOLS` tools."""

    default_code = "mcp_too_many_tools"


def _redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (where tokens travel)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class MCPServer(msgspec.Struct, frozen=True, kw_only=True):
    """One MCP server's configuration, and a tool source over the process's connection to it.

    ``url`` for ``transport="http"`` (streamable HTTP, the default) or ``"sse"``;
    ``command`` (+ ``args``, ``env``: added to a minimal default environment) for
    ``"stdio"``. ``headers`` go with every HTTP request (``Authorization``). ``server_id``
    names it (default: from the URL's host and path, or the command's name); it
    prefixes its tools' names when they collide (``spec/mcp.md``). ``call_timeout``
    bounds each request. Raises :class:`UsageError` for a missing URL or command, an
    unknown transport, a URL that is not http(s) or carries credentials, or a bad
    ``server_id``.
    """

    url: str = ""
    transport: Literal["http", "sse", "stdio"] = "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    server_id: str = ""
    call_timeout: float = MCP_CALL_TIMEOUT_SECONDS
    connect_timeout: float = MCP_CONNECT_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if self.transport not in ("http", "sse", "stdio"):
            raise UsageError(f"MCPServer transport must be 'http', 'sse' or 'stdio', got {self.transport!r}")
        if self.transport == "stdio":
            if not self.command:
                raise UsageError("MCPServer(transport='stdio') needs a command")
        else:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise UsageError(f"MCPServer(transport={self.transport!r}) needs an http(s) URL, got "
                                 f"{_redact_url(self.url)!r}")
            if parts.username or parts.password:
                raise UsageError("an MCP server URL must not carry credentials: pass them in headers")
        if self.server_id and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", self.server_id):
            raise UsageError(f"MCPServer server_id must be 1-32 of [A-Za-z0-9_-], got {self.server_id!r}")
        for value, what in ((self.call_timeout, "call_timeout"), (self.connect_timeout, "connect_timeout")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"MCPServer {what} must be a positive number of seconds, got {value!r}")

    def __repr__(self) -> str:  # never the headers' or the environment's values
        where = " ".join((self.command, *self.args)) if self.transport == "stdio" else _redact_url(self.url)
        return f"MCPServer({self.source_id!r}, {self.transport}, {where!r})"

    __str__ = __repr__

    @classmethod
    def parse(cls, spec: str, *, headers: Mapping[str, str] | None = None) -> MCPServer:
        """A server from a command-line spec: ``http(s)://...`` (streamable HTTP),
        ``sse:http(s)://...`` or ``stdio:command args...`` (shell-quoted), each optionally
        prefixed ``<id>=``. Raises :class:`UsageError` saying which forms are accepted."""
        text = spec.strip()
        server_id = ""
        head, sep, rest = text.partition("=")
        if sep and re.fullmatch(r"[A-Za-z0-9_-]{1,32}", head):
            server_id, text = head, rest.strip()
        extra = dict(headers or {})
        if text.startswith("stdio:"):
            try:
                words = shlex.split(text[len("stdio:"):])
            except ValueError as exc:
                raise UsageError(f"--mcp {spec!r}: {exc}") from None
            if not words:
                raise UsageError(f"--mcp {spec!r}: write stdio:COMMAND [ARGS...]")
            return cls(transport="stdio", command=words[0], args=tuple(words[1:]), server_id=server_id)
        try:
            if text.startswith("sse:"):
                return cls(transport="sse", url=text[len("sse:"):], headers=extra, server_id=server_id)
            if text.startswith(("http://", "https://")):
                return cls(transport="http", url=text, headers=extra, server_id=server_id)
        except UsageError as exc:  # the constructor's why (its URL redacted: never echo the spec's credentials)
            raise UsageError(f"--mcp: {exc}") from None
        raise UsageError(f"--mcp {_redact_url(spec)!r}: write http(s)://HOST/PATH, sse:http(s)://HOST/PATH or stdio:COMMAND [ARGS]")

    # -- identity

    @property
    def source_id(self) -> str:
        """``server_id``, else one made from the URL's host and path or the command's name."""
        if self.server_id:
            return self.server_id
        if self.transport == "stdio":
            base = self.command.replace("\\", "/").rsplit("/", 1)[-1]
            base = base.removesuffix(".exe")
            if base.startswith("python") and self.args and (self.args[0] == "-m" or not self.args[0].startswith("-")):
                # python -m pkg / python server.py (python -c CODE, or other options first: python)
                base = (self.args[1] if self.args[0] == "-m" and len(self.args) > 1 else self.args[0])
                base = base.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
        else:
            parts = urlsplit(self.url)
            base = parts.hostname or "mcp"
        return (_NOT_ID_CHAR.sub("_", base).strip("_") or "mcp")[:32]

    @property
    def server_hash(self) -> str:
        """``md5(JSON.stringify({type, url}))`` in hex: the id ``@ag-ui/mcp-apps-middleware``
        gives this configuration (``getServerHash``; a stdio server has no ``url``)."""
        return self.app_server.hash

    @property
    def app_server(self) -> AppServer:
        """How MCP Apps name this server (``agui_engine.genui.mcp_apps``): its transport, its URL
        (none for stdio) and its ``server_id`` when one is configured -- always for stdio (its
        derived id), since every stdio server has the same hash."""
        if self.transport == "stdio":
            return AppServer(type="stdio", url=None, server_id=self.source_id)
        return AppServer(type=self.transport, url=self.url, server_id=self.server_id or None)

    def key(self) -> tuple[Any, ...]:
        """What makes two configurations the same connection (secrets included, never shown)."""
        return (self.transport, self.url, self.command, self.args, tuple(sorted(self.env.items())),
                tuple(sorted(self.headers.items())), self.source_id, self.call_timeout, self.connect_timeout)

    # -- ToolSource, over the process's connection

    async def list_tools(self) -> Sequence[SourceTool]:
        """The server's tools (cached; ``[]`` while it cannot be reached)."""
        return await mcp_connections().get(self).list_tools()

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        """Call the tool ``name``; raises the :class:`MCPError` family (see the module docstring)."""
        return await mcp_connections().get(self).call_tool(name, arguments)

    def status(self) -> dict[str, Any]:
        """The connection's health for ``/readyz`` (no credentials)."""
        return mcp_connections().get(self).status()

    # -- AppConnection (MCP Apps' proxied requests), over the same connection

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`MCPConnection.request` on the process's connection to this server."""
        return await mcp_connections().get(self).request(method, params)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """:meth:`MCPConnection.notify` on the process's connection to this server."""
        await mcp_connections().get(self).notify(method, params)


def _app_log_notification(doc: dict[str, Any]) -> Any:
    """``notifications/message`` from an MCP app (its log line, which the Apps host forwards to the
    server as @ag-ui/mcp-apps-middleware does) as a client notification, or None for anything else.
    The SDK's client schema has no such notification; the session only serializes what it sends, so
    the checked message goes in the schema's union that holds it."""
    from pydantic import ValidationError

    if doc.get("method") != "notifications/message":
        return None
    try:
        return sdk.logging_notification(doc)
    except ValidationError:
        return None


def _tool_of(tool: Any) -> SourceTool:
    """An SDK ``Tool`` as a :class:`SourceTool` (``_meta`` kept as it came)."""
    name, description, schema, meta = sdk.tool_parts(tool)
    return SourceTool(name=name, description=description, input_schema=schema, meta=meta)


class MCPConnection:
    """The one session to one server (see the module docstring). Made by :class:`MCPConnections`."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._broken: asyncio.Future[None] | None = None  # set when the session breaks
        self._lock: asyncio.Lock | None = None
        self._tools: list[SourceTool] | None = None  # None: (re)list at the next list_tools
        self._error: str | None = None
        self._exited: int | None = None  # a stdio server process's exit status, once it exited
        self._failures = 0
        self._retry_at = 0.0
        #: requests sent, by method (the tool-list caching figure counts ``tools/list``)
        self.requests: dict[str, int] = {}

    # -- health

    @property
    def connected(self) -> bool:
        return self._session is not None and self._broken is not None and not self._broken.done()

    def status(self) -> dict[str, Any]:
        """``{serverId, transport, connected, tools, error}`` (no credentials)."""
        return {
            "serverId": self.server.source_id,
            "transport": self.server.transport,
            "connected": self.connected,
            "tools": len(self._tools) if self._tools is not None and self.connected else 0,
            "error": self._error,
        }

    # -- opening

    def _fail(self, why: str) -> None:
        delay = min(MCP_RECONNECT_MAX_SECONDS, MCP_RECONNECT_INITIAL_SECONDS * 2 ** self._failures)
        self._failures += 1
        self._retry_at = time.monotonic() + delay
        if why != self._error:
            _log.warning("MCP server %s unavailable: %s (retry in %.1f s)", self.server.source_id, why, delay)
        self._error = why

    async def _session_now(self) -> tuple[ClientSession, asyncio.Future[None]]:
        """The open session (opening it if needed). Raises :class:`MCPConnectionError`
        while the server cannot be reached (at once during the backoff)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (a test's, asyncio.run again): start over
            self._session, self._task, self._broken, self._closing = None, None, None, None
            self._lock, self._loop, self._tools = asyncio.Lock(), loop, None
        assert self._lock is not None
        async with self._lock:
            if self.connected:
                assert self._session is not None and self._broken is not None
                return self._session, self._broken
            await self._stop()
            if time.monotonic() < self._retry_at:
                raise MCPConnectionError(f"MCP server {self.server.source_id} is unavailable: {self._error}")
            ready: asyncio.Future[ClientSession] = loop.create_future()
            ready.add_done_callback(_retrieved)  # the opener may have stopped waiting (its timeout)
            self._exited = None
            self._closing = asyncio.Event()
            self._broken = loop.create_future()
            self._task = loop.create_task(self._hold(ready, self._closing, self._broken),
                                          name=f"mcp:{self.server.source_id}")
            try:
                async with asyncio.timeout(self.server.connect_timeout):
                    session = await asyncio.shield(ready)
                    self._session = session
                    self._tools = await self._list(session)
            except MCPError as exc:
                await self._stop()
                self._fail(exc.message)
                raise
            except TimeoutError:
                await self._stop()
                self._fail(f"no answer within {self.server.connect_timeout:g} s")
                raise MCPConnectionError(f"MCP server {self.server.source_id} is unavailable: {self._error}") from None
            except Exception as exc:  # noqa: BLE001 - any transport failure is "unavailable"
                await self._stop()
                # a stdio server that exited at start says more than the SDK's "Connection closed"
                self._fail(_describe(exc) if self._exited is None else
                           f"its process exited with status {self._exited} before answering initialize")
                raise MCPConnectionError(f"MCP server {self.server.source_id} is unavailable: {self._error}") from None
            self._failures, self._error = 0, None
            _log.info("MCP server %s connected (%s, %d tools)", self.server.source_id, self.server.transport,
                     len(self._tools))
            return session, self._broken

    async def _hold(self, ready: asyncio.Future[ClientSession], closing: asyncio.Event,
                    broken: asyncio.Future[None]) -> None:
        """The background task: enter the transport and the session, hand the session over,
        hold them until :meth:`aclose` (or a break), leave them in this same task."""
        try:
            from mcp import types
        except ImportError:
            ready.set_exception(MCPConnectionError("the mcp package is not installed: pip install 'agui-engine[mcp]'"))
            return

        async def on_message(message: Any) -> None:
            if isinstance(message, RuntimeError) and str(message).startswith(_LATE_ANSWER):
                # the answer to a call given up on (its timeout, or its run cancelled): nothing
                # waits for it, and the session is as sound as before
                _log.debug("MCP server %s: an answer to a call given up on, dropped", self.server.source_id)
                return
            if isinstance(message, Exception):
                # a malformed JSON-RPC message (or a transport error): no request can be matched
                # to it any more, so every call in flight fails now rather than at its timeout
                self._break(f"malformed message from the server ({type(message).__name__})")
                return
            if isinstance(sdk.notification_of(message), types.ToolListChangedNotification):
                _log.info("MCP server %s: tools changed, listing them again at the next run", self.server.source_id)
                self._tools = None

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                self._count("initialize")
                session = await sdk.open_session(
                    stack, read, write, on_message, client_name=_CLIENT_NAME,
                    extensions={_APPS_EXTENSION: {"mimeTypes": [_APP_MIME_TYPE]}})
                if not ready.done():
                    ready.set_result(session)
                closed: asyncio.Future[Any] = asyncio.ensure_future(closing.wait())
                try:
                    await asyncio.wait({closed, broken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    closed.cancel()
        except BaseException as exc:  # noqa: BLE001 - reported to the waiter and the calls, never lost
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPConnectionError("connection cancelled"))
            if not broken.done():
                broken.set_exception(MCPConnectionError(f"MCP server {self.server.source_id}: connection lost"))
            if not isinstance(exc, Exception):
                raise
        finally:
            if not broken.done():
                broken.set_exception(MCPConnectionError(f"MCP server {self.server.source_id}: connection closed"))
            with contextlib.suppress(BaseException):
                broken.exception()  # retrieved: no "never retrieved" warning

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        server = self.server
        if server.transport == "stdio":
            return await stack.enter_async_context(_stdio_transport(server, self._too_large, self._exit))
        httpx = sdk.http_module()  # httpx (SDK 1.x) or httpx2 (2.x): the same API

        def client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
            # every response read through a per-message size limit (an SSE event, a JSON body)
            limited = _limited_transport_class(httpx)(self._too_large, self._lost)
            return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=limited)

        if server.transport == "sse":
            return await sdk.sse_streams(stack, server.url, headers=dict(server.headers) or None,
                                         timeout=server.connect_timeout, read_timeout=_SSE_READ_TIMEOUT_SECONDS,
                                         client_factory=client)
        http = await stack.enter_async_context(
            client(dict(server.headers), httpx.Timeout(server.connect_timeout, read=None)))
        return await sdk.streamable_http_streams(stack, server.url, http)

    def _exit(self, status: int) -> None:
        self._exited = status

    def _too_large(self, size: int) -> None:
        self._break(f"a message of more than {size} bytes, more than MAX_MCP_RESULT_BYTES={MAX_MCP_RESULT_BYTES}",
                    MCPResultTooLargeError)

    def _lost(self, why: str) -> None:
        self._break(f"the connection was lost ({why})")

    def _break(self, why: str, error: type[MCPError] = MCPConnectionError) -> None:
        """The session is broken: every call in flight fails now with ``error``, the next use reconnects."""
        if self._broken is not None and not self._broken.done():
            _log.warning("MCP server %s: %s; reconnecting at the next use", self.server.source_id, why)
            self._error = why
            self._broken.set_exception(error(f"MCP server {self.server.source_id}: {why}"))

    async def _stop(self) -> None:
        """End the background task (and with it the session and a stdio process)."""
        task, closing = self._task, self._closing
        self._session, self._task = None, None
        if task is None:
            return
        if closing is not None:
            closing.set()
        try:
            async with asyncio.timeout(self.server.connect_timeout):
                await asyncio.shield(task)
        except (TimeoutError, Exception):  # noqa: BLE001 - a session that will not close is cancelled
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def aclose(self) -> None:
        """Close the session (a stdio server's process is terminated and reaped)."""
        if self._loop is not None and self._loop is asyncio.get_running_loop():
            await self._stop()
        self._session = None

    # -- requests

    def _count(self, method: str) -> None:
        self.requests[method] = self.requests.get(method, 0) + 1

    async def _call(self, method: str, send: Any, *, again: bool = True) -> Any:
        """``await send(session)`` bounded by ``call_timeout`` and failing at once when the
        session breaks; a request the server refused for an unknown session (HTTP 404: it
        restarted, or ended the session) is sent once more on a new session (``again``).
        Raises the :class:`MCPError` family; an MCP error answer raises :class:`MCPError`
        with the server's message."""
        session, broken = await self._session_now()
        self._count(method)
        task: asyncio.Future[Any] = asyncio.ensure_future(send(session))
        try:
            async with asyncio.timeout(self.server.call_timeout):
                await asyncio.wait({task, broken}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise MCPTimeoutError(f"MCP server {self.server.source_id} did not answer {method} within "
                                  f"{self.server.call_timeout:g} s") from None
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if not task.done() or task.cancelled():
            cause = broken.exception() if broken.done() else None
            if isinstance(cause, MCPError):
                raise type(cause)(f"{cause.message} (during {method})")
            raise MCPConnectionError(f"MCP server {self.server.source_id}: connection lost during {method}")
        exc = task.exception()
        if exc is None:
            return task.result()
        if isinstance(exc, sdk.error_class()):
            error = exc.error  # type: ignore[attr-defined]
            if error.code == sdk.CONNECTION_CLOSED_CODE:
                self._break("the connection closed")
                raise MCPConnectionError(f"MCP server {self.server.source_id}: connection lost during {method}")
            if error.code == _PARSE_ERROR and str(error.message).startswith(_UNPARSED_ANSWER):
                # SDK 2.x answers the call with this when the server's answer was not JSON-RPC
                # (1.x hands the transport error to the message handler instead): broken the same way
                self._break(f"malformed message from the server ({_PARSE_ERROR})")
                raise MCPConnectionError(f"MCP server {self.server.source_id}: malformed message from the "
                                         f"server during {method}")
            if self.server.transport == "http" and (error.code, error.message) in _SESSION_TERMINATED:
                # The server never ran the request (404 for the session id): the MCP spec has the
                # client start a new session, so the request goes once more, on a new one.
                self._break("the server ended the session (HTTP 404); a new session")
                if again:
                    return await self._call(method, send, again=False)
                raise MCPConnectionError(f"MCP server {self.server.source_id}: the server ended the session "
                                         f"during {method}")
            raise MCPError(f"MCP server {self.server.source_id}: {method}: {error.message}", code="mcp_error")
        self._break(_describe(exc))
        raise MCPConnectionError(f"MCP server {self.server.source_id}: {method} failed: {_describe(exc)}")

    async def _list(self, session: ClientSession) -> list[SourceTool]:
        """Every tool, page by page; more than :data:`MAX_MCP_TOOLS` raises :class:`MCPToolLimitError`."""
        from mcp.types import PaginatedRequestParams

        tools: list[SourceTool] = []
        cursor: str | None = None
        while True:
            self._count("tools/list")
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(_tool_of(t) for t in page.tools)
            if len(tools) > MAX_MCP_TOOLS:
                raise MCPToolLimitError(f"MCP server {self.server.source_id} lists more than "
                                        f"MAX_MCP_TOOLS={MAX_MCP_TOOLS} tools")
            cursor = sdk.next_cursor(page)
            if not cursor:
                return tools

    async def list_tools(self) -> list[SourceTool]:
        """The tools, listed once per session and again after ``tools/list_changed``;
        ``[]`` while the server cannot be reached or lists too many (logged, in :meth:`status`)."""
        try:
            session, _ = await self._session_now()  # lists them when it opens the session
        except MCPError:  # already logged, in status() and backing off
            return []
        if self._tools is None:  # the server said they changed
            try:
                async with asyncio.timeout(self.server.call_timeout):
                    self._tools = await self._list(session)
            except MCPToolLimitError as exc:
                await self._stop()
                self._fail(exc.message)
                return []
            except TimeoutError:
                self._break(f"tools/list took more than {self.server.call_timeout:g} s")
                return []
            except Exception as exc:  # noqa: BLE001 - a server that fails its listing offers no tools
                self._break(_describe(exc))
                return []
        return list(self._tools)

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        """``tools/call``: the result's text (``isError`` kept), and the whole result as ``raw``.
        Raises the :class:`MCPError` family."""
        args = dict(arguments)
        # a traced run's context goes in the request's params._meta (the MCP convention: it reaches
        # the server over every transport, stdio included); None when tracing is off
        meta = trace_headers() or None
        result = await self._call("tools/call", lambda s: s.call_tool(name, args, meta=meta))
        raw = self._sized(result, "tools/call")
        return SourceToolResult(text=result_text(raw.get("content"), raw.get("structuredContent")),
                                is_error=bool(raw.get("isError")), raw=raw)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read``: the result as JSON-ready data (``contents``). Raises the :class:`MCPError` family."""
        result = await self._call("resources/read", lambda s: sdk.read_resource(s, uri))
        return self._sized(result, "resources/read")

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Any client request of the MCP schema (``tools/call``, ``resources/read``, ``ping``, ...)
        by method name, for proxying: the result as JSON-ready data. Raises :class:`UsageError`
        for a method or params the schema does not know, and the :class:`MCPError` family."""
        from pydantic import ValidationError

        doc: dict[str, Any] = {"method": method}
        if params is not None:
            doc["params"] = dict(params)
        try:
            request = sdk.client_request(doc)
        except ValidationError:
            raise UsageError(f"{method!r} with these params is not an MCP client request") from None
        result = await self._call(method, lambda s: s.send_request(request, sdk.any_result()))
        return self._sized(result, method)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a client notification by method name (``notifications/message``...). Raises
        :class:`UsageError` for one the schema does not know, and the :class:`MCPError` family."""
        from pydantic import ValidationError

        doc: dict[str, Any] = {"method": method}
        if params is not None:
            doc["params"] = dict(params)
        try:
            notification = sdk.client_notification(doc)
        except ValidationError:
            notification = _app_log_notification(doc)
            if notification is None:
                raise UsageError(f"{method!r} with these params is not an MCP client notification") from None
        await self._call(method, lambda s: s.send_notification(notification))

    def _sized(self, result: Any, method: str) -> dict[str, Any]:
        data = (json.dumps(result, ensure_ascii=False) if isinstance(result, dict)
                else sdk.result_json(result))
        if len(data) > MAX_MCP_RESULT_BYTES:
            raise MCPResultTooLargeError(
                f"MCP server {self.server.source_id}: the {method} result is {len(data)} bytes, more than "
                f"MAX_MCP_RESULT_BYTES={MAX_MCP_RESULT_BYTES}")
        out: dict[str, Any] = json.loads(data)
        return out


#: How the SDK's session reports an answer whose request nobody waits for any more (``BaseSession``).
_LATE_ANSWER: Final = "Received response with an unknown request ID"

#: The errors a request is answered with when the server answered HTTP 404 for the session id: the
#: SDK 1.x client's own (``_send_session_terminated_error``; 2.x's when the body is not JSON-RPC) and
#: the JSON-RPC error body the SDK 2.x server sends, which the 2.x client passes on.
_SESSION_TERMINATED: Final = frozenset({(32600, "Session terminated"), (-32600, "Session terminated"),
                                        (-32600, "Session not found")})
#: JSON-RPC's parse error, and how the SDK 2.x client's answer starts when the server's answer was not
#: JSON-RPC (``_handle_json_response``).
_PARSE_ERROR: Final = -32700
_UNPARSED_ANSWER: Final = "Failed to parse JSON response"


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark ``future``'s exception retrieved: the background task sets one on the session's
    ``ready`` future after the opener gave up on it (its connect timeout), and asyncio would log
    that nobody read it, a spurious ERROR line."""
    if not future.cancelled():
        future.exception()


def _describe(exc: BaseException) -> str:
    """One line about a transport failure, without anything a request carried (headers)."""
    inner: BaseException = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    text = str(inner).splitlines()[0] if str(inner) else ""
    if "http" in text.lower():  # httpx names the URL: drop its query
        text = re.sub(r"https?://\S+", lambda m: _redact_url(m.group(0).strip("'\"")), text)
    return f"{type(inner).__name__}: {text}"[:300] if text else type(inner).__name__


#: A blank line: two line terminators (``\r\n``, ``\r`` or ``\n``; atomic, so that one ``\r\n``
#: is never read as ``\r`` then ``\n``) -- the end of an SSE event.
_BLANK_LINE: Final = re.compile(rb"(?>\r\n|\r|\n)(?>\r\n|\r|\n)")


def _content_bytes(part: bytes) -> int:
    return len(part) - part.count(b"\n") - part.count(b"\r")


class MessageSizeGauge:
    """The size of the messages of a byte stream, fed as it arrives: an SSE event (ended by a
    blank line) or a whole JSON body (no blank line), counted in bytes other than line
    terminators, so that where the stream is split changes nothing.

    ``feed(chunk)`` returns True once a message is larger than ``limit`` (the largest seen is
    ``largest``); no IO, no state but the open message's count and the trailing terminators.
    """

    __slots__ = ("_carry", "_open", "largest", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.largest = 0
        self._open = 0  # content bytes of the message still open
        self._carry = b""  # the trailing line terminators, which the next chunk may complete

    def feed(self, chunk: bytes) -> bool:
        """Count ``chunk``; True when a message so far is larger than ``limit``."""
        data = self._carry + chunk
        parts = _BLANK_LINE.split(data)
        sizes = [self._open + _content_bytes(parts[0]), *(_content_bytes(p) for p in parts[1:])]
        self._open = sizes[-1]
        self.largest = max(self.largest, *sizes)
        stripped = data.rstrip(b"\r\n")
        self._carry = data[len(stripped):][-2:]
        return self.largest > self.limit


@functools.cache
def _limited_transport_class(httpx: Any) -> Any:
    """The ``httpx`` (or ``httpx2``: the SDK's line decides) transport whose every response is read
    through a per-message size limit (made on first use, once per HTTP library)."""

    class LimitedStream(httpx.AsyncByteStream):  # type: ignore[misc]
        """Stops with :class:`MCPResultTooLargeError` once more than :data:`MAX_MCP_RESULT_BYTES`
        arrive without an SSE event boundary (a blank line): the limit is per message, so a
        long-lived event stream is never cut for its total."""

        def __init__(self, inner: httpx.AsyncByteStream, on_exceeded: Any, on_lost: Any) -> None:
            self.inner, self.on_exceeded, self.on_lost = inner, on_exceeded, on_lost

        async def __aiter__(self) -> AsyncIterator[bytes]:
            gauge = MessageSizeGauge(MAX_MCP_RESULT_BYTES)
            try:
                async for chunk in self.inner:
                    if gauge.feed(chunk):
                        self.on_exceeded(gauge.largest)
                        raise MCPResultTooLargeError(
                            f"an MCP message of more than MAX_MCP_RESULT_BYTES={MAX_MCP_RESULT_BYTES}")
                    yield chunk
            except httpx.TransportError as exc:
                # The server went away mid-response (it crashed, or restarted): the SDK drops such a
                # stream silently and its request would wait out its timeout; the session breaks now.
                self.on_lost(_describe(exc))
                raise

        async def aclose(self) -> None:
            await self.inner.aclose()

    class LimitedTransport(httpx.AsyncBaseTransport):  # type: ignore[misc]
        def __init__(self, on_exceeded: Any, on_lost: Any) -> None:
            self.inner, self.on_exceeded, self.on_lost = httpx.AsyncHTTPTransport(), on_exceeded, on_lost

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx.Response(status_code=response.status_code, headers=response.headers,
                                  stream=LimitedStream(response.stream, self.on_exceeded, self.on_lost),
                                  extensions=response.extensions, request=request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return LimitedTransport


@contextlib.asynccontextmanager
async def _stdio_transport(server: MCPServer, on_too_large: Any, on_exit: Any) -> Any:
    """The stdio transport: the server as a subprocess, one JSON-RPC message a line each way.

    The SDK's ``stdio_client`` is not used because it holds any line whole however long it
    grows, by repeated concatenation: a 50 MB line took minutes. Here a line longer than
    :data:`MAX_MCP_RESULT_BYTES` stops the read at that size (``on_too_large``: the session
    breaks). On exit stdin is closed, the process gets :data:`MCP_STDIO_EXIT_SECONDS` to
    exit, then SIGTERM, then SIGKILL, and is always waited for (reaped)."""
    import anyio
    from pydantic import ValidationError

    process = await asyncio.create_subprocess_exec(
        server.command, *server.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**sdk.default_environment(), **server.env}, limit=MAX_MCP_RESULT_BYTES + 1)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def read_loop() -> None:
        async with read_writer:
            while True:
                try:
                    line = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError:  # the process closed its stdout: it exits
                    with contextlib.suppress(TimeoutError):
                        on_exit(await asyncio.wait_for(asyncio.shield(process.wait()), MCP_STDIO_EXIT_SECONDS))
                    return
                except asyncio.LimitOverrunError:
                    on_too_large(MAX_MCP_RESULT_BYTES)
                    # the session is broken; the rest is read and dropped so that the server is never
                    # blocked on a full pipe (it then sees its stdin close and exits at once)
                    while await stdout.read(1 << 16):
                        pass
                    return
                if not line.strip():
                    continue
                try:
                    message = sdk.jsonrpc_message(line)
                except ValidationError as exc:
                    await read_writer.send(exc)  # the session's message handler breaks the session
                    continue
                await read_writer.send(sdk.session_message(message))

    async def write_loop() -> None:
        async with write_reader:
            async for outgoing in write_reader:
                data = outgoing.message.model_dump_json(by_alias=True, exclude_none=True)
                try:
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    return

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_loop)
            tasks.start_soon(write_loop)
            try:
                yield read_stream, write_stream
            finally:
                tasks.cancel_scope.cancel()
    finally:
        await _reap(process)


async def _reap(process: asyncio.subprocess.Process) -> None:
    """End ``process`` (stdin closed, then SIGTERM, then SIGKILL, :data:`MCP_STDIO_EXIT_SECONDS`
    apart), wait for it even when cancelled, and read its stdout to the end (a pipe left with
    data keeps the transport open past the event loop). After SIGKILL the wait has no bound:
    the process cannot refuse to die, and one given up on would stay a zombie of this process
    (a busy machine can take seconds to schedule its exit)."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    try:
        for signal_it in (None, process.terminate):
            if process.returncode is not None:
                break
            if signal_it is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal_it()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.wait()), MCP_STDIO_EXIT_SECONDS)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(process.wait())
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await asyncio.shield(process.wait())
        raise
    finally:
        stdout = process.stdout
        if stdout is not None and process.returncode is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(MCP_STDIO_EXIT_SECONDS):
                    while await stdout.read(1 << 16):
                        pass


class MCPConnections:
    """The process's connections, one per server configuration (see the module docstring).

    :meth:`get` returns the server's connection (made on first use, opened on first
    request); :meth:`aclose` closes them all (stdio processes reaped). A connection made
    on one event loop is reopened on another.
    """

    def __init__(self) -> None:
        self._connections: dict[tuple[Any, ...], MCPConnection] = {}

    def get(self, server: MCPServer) -> MCPConnection:
        """The one connection to ``server`` (the same object for an equal configuration)."""
        key = server.key()
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = MCPConnection(server)
        return connection

    def __iter__(self) -> Any:
        return iter(list(self._connections.values()))

    async def aclose(self) -> None:
        """Close every connection; the pool is then empty (a later use opens anew)."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)


_process_connections = MCPConnections()


def mcp_connections() -> MCPConnections:
    """The process's :class:`MCPConnections` (what :class:`MCPServer`'s tool-source methods use)."""
    return _process_connections
