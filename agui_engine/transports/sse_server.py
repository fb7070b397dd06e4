"""AG-UI over HTTP, the server: the SSE (and NDJSON, protobuf) gateway on aiohttp.

Theory of operation
-------------------
Server: :func:`create_app` builds an aiohttp application around a
:class:`~transports.runs.RunRegistry`. Routes (``<path>`` defaults to ``/``)::

    POST    <path>               start a run (or resume it, with Last-Event-ID); a CopilotKit
                                 single-endpoint envelope {method, params, body} (runtime_routes)
    GET     <path>/runs/<runId>  subscribe to a run (EventSource-style resume)
    DELETE  <path>/runs/<runId>  cancel a run at once (on any node sharing the event log)
    POST    <path>/data/query    a component's data: {resourceId, params} -> {resourceId, data}
                                 (transports/data.py; errors as below plus 403/404/422/502/503/504)
    GET     <path>/capabilities  the served agent's AgentCapabilities with this server's transport
                                 (transports/capabilities.py; 401 as for runs, 405 for another
                                 method, 502 when a remote agent's cannot be had)
    GET     <path>/healthz       liveness: 200 while the process serves (open even with auth on)
    GET     <path>/readyz        readiness: 200, or 503 when draining or the event log is unreachable;
                                 ``mcp``: each MCP server's connection (an unreachable one does not make it 503);
                                 with auth on and no valid bearer token, only ``{"ready": ...}``
    GET     <path>/metrics       Prometheus text format (when metrics are enabled; 401 without the
                                 bearer token when auth is on)
    GET     <path>/static/...    the JavaScript applier (agui-engine.js); <path>/inspect: the
                                 inspector page, when enabled (transports/inspector.py)
    OPTIONS *                    CORS preflight (when CORS is configured)

A request is checked completely *before* any stream starts, and refused with a
JSON body ``{"error": {"code", "message"}}``: 401 (bearer token), 415 (not
JSON), 413 (body over the limit), 400 (malformed JSON, with the byte offset),
422 (not a RunAgentInput, with the JSON path), 406 (unacceptable Accept), 409
(runId already running), 404/410 (unknown run / resume cursor no longer in the
log), 503 + ``Retry-After`` (concurrent-run limit). Then the answer is ``200
text/event-stream`` (or ``application/x-ndjson``, or the binary
``application/vnd.ag-ui.event+proto``, when the client's Accept prefers it),
one event per frame, each SSE frame carrying ``id: <runId>:<seq>`` (a binary frame
has no id: its position is the request's cursor plus its index, spec/framing.md).

The stream handler is a loop over a :class:`~transports.subscription.Subscription`:
every event that is ready is framed and the whole batch goes out in **one**
write; when nothing arrives for ``keepalive_seconds`` a comment line (``:
keep-alive``; a blank line in NDJSON) is written instead. A client that goes
away unsubscribes (the registry's grace period then applies); on shutdown the
registry ends every run with ``RUN_ERROR{code: "shutdown"}``, which each open
stream writes before it closes.

The client is :mod:`~transports.sse_client` (:class:`~transports.sse_client.SSEAgent`);
the header names both speak are in :mod:`~transports.http_headers`, the Accept header's
negotiation in :mod:`~transports.content_negotiation`.
"""


from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from aiohttp import web

from agui_engine.protocol.agent import Agent, AgentFunction
from agui_engine.protocol.errors import AguiEngineError, UsageError

from .agents_app import ServedAgent, create_agents_app
from .connection_gate import IdleConnectionGate, peer_address
from .content_negotiation import MAX_ECHOED_HEADER_CHARS
from .http_gateway import (
    BODY_READ_CHUNK,
    CORS_MAX_AGE,
    CURRENT_RUN_ID,
    MAX_RECONNECTABLE_THREADS,
    READABLE_CONTENT_ENCODINGS,
    STATUS_CLIENT_CLOSED,
    Answer,
    AppKeywords,
    GatewayRequest,
    HttpGateway,
    StreamStart,
    UnreadableRequestError,
    build_gateway,
    check_content_encoding,
    check_keywords,
    error_answer,
    frame_ndjson,
    frame_proto,
    frame_sse,
)
from .inspector import FrontendFiles, verify_answer
from .listening_socket import LISTEN_BACKLOG, listening_socket, server_url
from .runs import RunRegistry
from .runtime_aiohttp import RUNTIME_FRONT_KEY, RuntimeFront, add_runtime_routes
from .runtime_routes import DEFAULT_AGENT_ID, RuntimeAgent, RuntimeRouter
from .send_stall import send_or_stall
from .server_handle import ServerHandle
from .server_options import ConnectionOptions

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "AppKeywords",
    "BODY_READ_CHUNK",
    "CORS_MAX_AGE",
    "MAX_PARSER_MESSAGE_CHARS",
    "MAX_RECONNECTABLE_THREADS",
    "READABLE_CONTENT_ENCODINGS",
    "REGISTRY_KEY",
    "SHUTDOWN_TIMEOUT",
    "SSEServer",
    "STATUS_CLIENT_CLOSED",
    "UnreadableRequestError",
    "check_content_encoding",
    "create_app",
    "frame_ndjson",
    "frame_proto",
    "frame_sse",
    "start_sse_server",
]

_log = logging.getLogger("agui_engine.transports")
#: One INFO line per HTTP request (see :func:`create_app`'s ``access_log``).
_access_logger = logging.getLogger("agui_engine.access")


#: Seconds aiohttp waits on shutdown for open handlers to finish (then cancels
#: them). Twice runs.CANCEL_WAIT_SECONDS: the registry first waits up to that for
#: agents to stop, then each stream still has to write its RUN_ERROR{shutdown};
#: well inside the 30 s an orchestrator (Kubernetes) grants before SIGKILL.
SHUTDOWN_TIMEOUT = 10.0


#: Characters of the HTTP parser's own complaint (a header line over its limit, a
#: body whose Content-Encoding does not decode) quoted in an unreadable_request
#: answer: enough to say what was wrong, never the whole hostile header.
MAX_PARSER_MESSAGE_CHARS = 200


def _parser_complaint(exc: BaseException | None, fallback: str) -> str:
    """aiohttp's message for ``exc`` on one line, cut to MAX_PARSER_MESSAGE_CHARS."""
    text = " ".join(str(getattr(exc, "message", None) or exc or fallback).split())
    text = text.removeprefix("400, message: ")
    if len(text) > MAX_PARSER_MESSAGE_CHARS:
        text = text[:MAX_PARSER_MESSAGE_CHARS] + "..."
    return text or fallback


REGISTRY_KEY: web.AppKey[RunRegistry] = web.AppKey("agui_engine_registry", RunRegistry)
#: The server's cap on connections that run nothing (set by start_sse_server): a
#: stream tells it its connection is running a run, and idle again after.
_IDLE_GATE_KEY: web.AppKey[IdleConnectionGate] = web.AppKey("agui_engine_idle_gate", IdleConnectionGate)
#: The app's ConnectionOptions, for the server that listens for it (start_sse_server).
_CONNECTION_KEY: web.AppKey[ConnectionOptions] = web.AppKey("agui_engine_connection", ConnectionOptions)


def _error_response(exc: AguiEngineError, metrics: GatewayMetrics | None = None) -> web.Response:
    return _answer(error_answer(exc, metrics))


def _answer(answer: Answer) -> web.Response:
    """A gateway answer as an aiohttp response."""
    return web.Response(status=answer.status, headers=answer.headers, body=answer.body or None)


async def _body_chunks(request: web.Request) -> AsyncIterator[bytes]:
    """The request body in pieces; a Content-Encoding that does not decode is UnreadableRequestError."""
    try:
        async for chunk in request.content.iter_chunked(BODY_READ_CHUNK):
            yield chunk
    except web.RequestPayloadError as exc:
        # aiohttp decodes Content-Encoding while reading: a gzip / deflate body
        # that does not decode (or is cut short) surfaces here.
        raise UnreadableRequestError(
            f"cannot read the request body (Content-Encoding "
            f"{request.headers.get('Content-Encoding', 'identity')[:MAX_ECHOED_HEADER_CHARS]!r}): "
            f"{_parser_complaint(exc.__cause__ or exc, 'it does not decode')}"
        ) from None


async def _given_body(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _request(request: web.Request, body: bytes | None = None) -> GatewayRequest:
    """An aiohttp request as the gateway reads it (its body ``body`` when that was read already)."""
    if body is not None:
        return GatewayRequest(
            request.method, request.path, request.headers, request.query, content_length=len(body),
            peer=peer_address(request.transport), chunks=lambda: _given_body(body),
        )
    return GatewayRequest(
        request.method, request.path, request.headers, request.query, content_length=request.content_length,
        peer=peer_address(request.transport), chunks=lambda: _body_chunks(request),
    )


class _Gateway:
    """The aiohttp front end of one gateway: each handler hands the request to the shared
    :class:`~transports.http_gateway.HttpGateway` and writes its answer or its stream."""

    def __init__(self, core: HttpGateway, files: FrontendFiles) -> None:
        self.core = core
        self.registry = core.registry
        self.files = files
        #: CopilotKit's runtime routes (runtime_routes), whose single endpoint is also the agent's path.
        self.runtime: RuntimeRouter | None = None

    async def frontend_file(self, subpath: str, request: web.Request) -> web.StreamResponse:
        answer = self.files.answer(subpath, request.headers.get("If-None-Match"))
        return _answer(answer) if answer is not None else web.Response(status=404)

    async def inspect_verify(self, request: web.Request) -> web.StreamResponse:
        return _answer(await verify_answer(self.core, _request(request)))

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(self.core.cors_headers(request.headers.get("Origin")))

    async def preflight(self, request: web.Request) -> web.StreamResponse:
        return _answer(self.core.preflight(request.headers.get("Origin")))

    async def post(self, request: web.Request) -> web.StreamResponse:
        """A run; or, as the path is also CopilotKit's single endpoint, an envelope
        ``{method, params, body}`` answered as its runtime route (RuntimeRouter.post)."""
        if self.runtime is not None:
            _, answer = await self.runtime.post(self.core, _request(request))
            return await self._reply(request, answer)
        return await self._reply(request, await self.core.post(_request(request)))

    async def get(self, request: web.Request) -> web.StreamResponse:
        return await self._reply(request, await self.core.get(_request(request), request.match_info["run_id"]))

    async def delete(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.delete(_request(request), request.match_info["run_id"]))

    async def thread(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.thread(_request(request), request.match_info["thread_id"]))

    async def threads_list(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.threads_list(_request(request)))

    async def thread_delete(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.thread_delete(_request(request), request.match_info["thread_id"]))

    async def thread_patch(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.thread_patch(_request(request), request.match_info["thread_id"]))

    async def data_query(self, request: web.Request) -> web.StreamResponse:
        # While its resolver works the connection is not "idle" (IdleConnectionGate), as
        # while it streams a run: a slow resource must not count against the idle caps.
        gate = request.config_dict.get(_IDLE_GATE_KEY)

        @contextlib.contextmanager
        def busy() -> Iterator[None]:
            if gate is not None:
                gate.running(request.protocol)
            try:
                yield
            finally:
                if gate is not None:
                    gate.idle(request.protocol)

        return _answer(await self.core.data_query(_request(request), busy))

    async def capabilities(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.capabilities(_request(request)))

    async def capabilities_method(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.capabilities_method(_request(request)))

    async def thread_method(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.thread_method(_request(request)))

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.healthz(_request(request)))

    async def readyz(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.readyz(_request(request)))

    async def metrics_text(self, request: web.Request) -> web.StreamResponse:
        return _answer(await self.core.metrics_text(_request(request)))

    async def _reply(self, request: web.Request, answer: Answer | StreamStart) -> web.StreamResponse:
        return _answer(answer) if isinstance(answer, Answer) else await self._stream(request, answer)

    async def _stream(self, request: web.Request, stream: StreamStart) -> web.StreamResponse:
        sub = stream.sub
        run = sub.run
        resp = web.StreamResponse(status=200, headers=stream.headers)
        # While it streams a run the connection is not "idle": the cap on connections
        # that run nothing does not count it (see IdleConnectionGate).
        gate = request.config_dict.get(_IDLE_GATE_KEY)
        if gate is not None:
            gate.running(request.protocol)
        send_timeout = self.core.send_timeout
        try:
            await resp.prepare(request)
            transport = request.transport

            async def write(data: bytes) -> None:
                await send_or_stall(lambda: resp.write(data), len(data), transport, send_timeout)

            if stream.prefix:  # frames before the run's (CopilotKit's connect: the thread's history)
                await write(stream.prefix)
            await self.core.pump(stream, write)
            await send_or_stall(resp.write_eof, 0, transport, send_timeout)
        except TimeoutError:
            # The client stopped reading for send_timeout: cut it (the run goes on).
            _log.info("run %s: client stopped reading at event %d; closing its stream", run.run_id, sub.cursor)
            if request.transport is not None:
                request.transport.abort()
        except ConnectionError:
            # The client went away (a write failed). The subscription closes
            # below; the grace period decides what happens to the run.
            _log.debug("run %s: subscriber disconnected at event %d", run.run_id, sub.cursor)
        except asyncio.CancelledError:
            # aiohttp cancels the handler when the client disconnects
            # (handler_cancellation=True) or at shutdown.
            _log.debug("run %s: stream handler cancelled at event %d", run.run_id, sub.cursor)
            raise
        finally:
            sub.close()
            if gate is not None:
                gate.idle(request.protocol)
        return resp

    async def on_shutdown(self, app: web.Application) -> None:
        await self.core.shutdown()


@web.middleware
async def _access_log(request: web.Request, handler: Any) -> web.StreamResponse:
    """One line per request, when it ends: method, path, status, run id, duration.
    Refusals (4xx) included; a stream the client cut is logged as STATUS_CLIENT_CLOSED."""
    start = time.perf_counter()
    status = 500
    CURRENT_RUN_ID.set(None)
    try:
        response: web.StreamResponse = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:  # aiohttp's own answers (404 no such route, 405)
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = STATUS_CLIENT_CLOSED
        raise
    finally:
        _access_logger.info(
            "%s %s %s %d run=%s %.1fms",
            request.remote or "-",
            request.method,
            request.path,
            status,
            CURRENT_RUN_ID.get() or "-",
            (time.perf_counter() - start) * 1000.0,
        )


def create_app(
    agent: Agent | AgentFunction | Mapping[str, Agent | AgentFunction | ServedAgent] | None = None,
    **options: Unpack[AppKeywords],
) -> web.Application:
    """An aiohttp application serving ``agent`` over HTTP (SSE / NDJSON); ``options``: the
    gateway's keywords (:class:`~transports.http_gateway.AppKeywords`, each described there:
    ``registry``, ``options``, ``log``, ``connection``, ``data``, ``auth_token``, ...).

    Run it alone (``web.run_app(create_app(agent))``, or :func:`start_sse_server`)
    or mount it: ``parent.add_subapp("/agui", create_app(agent, path=""))`` serves
    ``POST /agui`` and ``/agui/runs/<runId>``. ``GET <path>/static/agui-engine.js`` serves the
    JavaScript applier.

    Run it with ``handler_cancellation=True`` (as :func:`start_sse_server` does)
    so a client disconnect is noticed at once; otherwise it is noticed at the
    next write (at the latest one keep-alive interval later).
    ``agent`` may be a mapping id -> agent (or :class:`~transports.agents_app.ServedAgent`):
    one app serving each agent at ``<path>/<id>`` with its own runs
    (:func:`~transports.agents_app.create_agents_app`; the other keywords apply to every agent).

    Raises UsageError when neither ``agent`` nor ``registry`` is given.
    """
    path = options.get("path", "/")
    if isinstance(agent, Mapping):
        check_keywords("create_app", options)
        parent = create_agents_app(agent, one_app=create_app, registry_key=REGISTRY_KEY, **options)
        parent[_CONNECTION_KEY] = options.get("connection") or ConnectionOptions()
        return parent
    core = build_gateway(agent, where="create_app", **options)
    inspector, cors_origins = options.get("inspector", False), options.get("cors_origins", ())
    registry, max_input_bytes = core.registry, core.max_input_bytes
    base = path.rstrip("/")
    gw = _Gateway(core, FrontendFiles(inspector=inspector))
    # client_max_size is aiohttp's own cap for request.read(); the body is read
    # by _read_body, which enforces max_input_bytes with a JSON 413.
    app = web.Application(client_max_size=max_input_bytes,
                          middlewares=[_access_log] if options.get("access_log", True) else [])
    app[REGISTRY_KEY] = registry
    app[_CONNECTION_KEY] = core.connection
    runs = path.rstrip("/") + "/runs/{run_id}"
    app.router.add_post(path, gw.post)
    app.router.add_get(runs, gw.get)
    app.router.add_delete(runs, gw.delete)
    threads = base + "/threads/{thread_id}"
    app.router.add_get(threads, gw.thread)
    app.router.add_delete(threads, gw.thread_delete)
    app.router.add_patch(threads, gw.thread_patch)
    thread_list = base + "/threads"
    app.router.add_get(thread_list, gw.threads_list)
    query = base + "/data/query"
    app.router.add_post(query, gw.data_query)
    capabilities = base + "/capabilities"
    app.router.add_get(capabilities, gw.capabilities)
    app.router.add_get(base + "/healthz", gw.healthz)
    app.router.add_get(base + "/readyz", gw.readyz)
    if registry.metrics is not None:
        app.router.add_get(base + "/metrics", gw.metrics_text)
    for subpath in gw.files.paths:
        app.router.add_get(base + subpath, functools.partial(gw.frontend_file, subpath))
    if inspector:
        app.router.add_post(base + "/inspect/verify", gw.inspect_verify)
    if cors_origins:
        app.router.add_route("OPTIONS", path, gw.preflight)
        app.router.add_route("OPTIONS", runs, gw.preflight)
        app.router.add_route("OPTIONS", query, gw.preflight)
        app.router.add_route("OPTIONS", threads, gw.preflight)
        app.router.add_route("OPTIONS", thread_list, gw.preflight)
        app.router.add_route("OPTIONS", capabilities, gw.preflight)
        app.on_response_prepare.append(gw.on_prepare)
    app.router.add_route("*", capabilities, gw.capabilities_method)  # after GET (and OPTIONS): the rest
    app.router.add_route("*", threads, gw.thread_method)
    front = RuntimeFront(core=core, request=_request, reply=gw._reply)
    app[RUNTIME_FRONT_KEY] = front
    # CopilotKit's runtime routes; the agent's path is also its single endpoint (gw.post asks the router)
    gw.runtime = RuntimeRouter({DEFAULT_AGENT_ID: RuntimeAgent(core)})
    add_runtime_routes(app, path, gw.runtime, {core: front}, cors_headers=False)
    app.on_shutdown.append(gw.on_shutdown)
    return app


class _GatewayRequestHandler(web.RequestHandler):
    """The gateway's connection (an asyncio protocol): aiohttp's public
    :class:`aiohttp.web.RequestHandler`, made by :func:`start_sse_server`'s own protocol
    factory (``loop.create_server``) for ``manager``, the runner's public ``server``.

    * It is admitted by the server's :class:`~transports.connection_gate.IdleConnectionGate`
      when the TCP connection is made (before anything is read) and forgotten when lost.
    * A 4xx from its HTTP parser (a header over its limits, a Content-Encoding it cannot
      decode, such as ``br`` without Brotli) is a JSON 400 ``unreadable_request`` logged as
      one INFO line, not a plain-text answer and an ERROR traceback. A 5xx (a handler that
      raised) keeps aiohttp's answer and its logged traceback: the server's failure.

    What aiohttp lacks, and why the protocol factory is ours: ``web.Server.__call__`` (the
    factory a ``SockSite`` / ``TCPSite`` listens with) always builds a plain
    ``RequestHandler``, and neither ``AppRunner`` nor the sites take a handler class or a
    per-connection hook (``handler_args`` are only the handler's keyword arguments). So the
    listening socket is served with ``loop.create_server`` and this subclass, built with the
    same keyword arguments ``AppRunner`` would give it; no private name of aiohttp is used."""

    __slots__ = ("_gate",)

    def __init__(self, manager: web.Server, gate: IdleConnectionGate, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._gate = gate

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._gate.admit(self, transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._gate.closed(self)
        super().connection_lost(exc)

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        complaint = _parser_complaint(exc, message or "malformed HTTP request")
        _log.info("unreadable request from %s: %s", request.remote or "-", complaint)
        if request.writer.output_size > 0:  # an answer has begun: the connection is broken
            raise ConnectionError("the answer had begun when the request turned out unreadable")
        resp = _error_response(UnreadableRequestError(f"cannot read the request: {complaint}"))
        resp.force_close()
        return resp

    def log_exception(self, *args: Any, **kw: Any) -> None:
        # After the 400 for a body that does not decode, aiohttp drains the rest of the
        # body (lingering close) and meets the same decoding error again: the client's
        # fault, already answered, so one INFO line rather than an ERROR traceback.
        exc = kw.get("exc_info")
        if isinstance(exc, web.RequestPayloadError):
            _log.info("unreadable request body: %s", _parser_complaint(exc.__cause__ or exc, "it does not decode"))
            return
        super().log_exception(*args, **kw)


class SSEServer(ServerHandle):
    """A running SSE gateway (see :func:`start_sse_server`): ``url``, ``registry``, ``close()``."""

    def __init__(
        self,
        runner: web.AppRunner,
        url: str,
        registry: RunRegistry | None,
        gate: IdleConnectionGate | None = None,
        listener: asyncio.Server | None = None,
    ) -> None:
        self.runner = runner
        self.url = url
        self.registry = registry
        #: The cap on connections that run nothing (counts, refusals).
        self.gate = gate
        #: The listening socket's server (its protocol factory makes _GatewayRequestHandler).
        self.listener = listener

    async def close(self) -> None:
        """Graceful shutdown: open streams get ``RUN_ERROR{code: "shutdown"}``, then close."""
        if self.listener is not None:
            self.listener.close()  # no new connections (what a site's stop() does)
        await self.runner.cleanup()


async def start_sse_server(
    agent: Agent | AgentFunction | Mapping[str, Agent | AgentFunction | ServedAgent] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    app: web.Application | None = None,
    shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    **options: Unpack[AppKeywords],
) -> SSEServer:
    """Start the gateway in this event loop (port 0: an ephemeral port) and return
    it; ``options`` are :func:`create_app`'s keyword arguments (:class:`AppKeywords`,
    type-checked), or ``app`` one :func:`create_app` made. ``server.url`` is the endpoint
    (an IPv6 host in brackets). The app's ``connection``
    (:class:`~transports.server_options.ConnectionOptions`) sets the listening side too:
    ``idle_timeout`` (seconds a connection may go without complete request headers, from
    connect or since its last response) and ``max_idle_connections`` / ``max_idle_per_ip``
    (connections that run nothing the server / one client address may hold; a new one past
    either is answered 503 + ``Retry-After`` and closed before anything is read:
    :class:`~transports.connection_gate.IdleConnectionGate`). Raises UsageError for ``app``
    given with ``options`` (they configure ``create_app``)."""
    if app is None:
        check_keywords("start_sse_server", options)
        app = create_app(agent, **options)
    elif options or agent is not None:
        given = sorted(options) + (["agent"] if agent is not None else [])
        raise UsageError(f"start_sse_server: {', '.join(given)} configure create_app; with app= give them to create_app")
    conn = app.get(_CONNECTION_KEY) or ConnectionOptions()
    gate = IdleConnectionGate(conn.max_idle_per_ip, conn.max_idle_connections)
    app[_IDLE_GATE_KEY] = gate
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    server = runner.server
    assert server is not None  # set by setup()
    loop = asyncio.get_running_loop()

    def connection() -> _GatewayRequestHandler:
        # aiohttp's connection timer (keepalive_timeout) runs from connect and from the end of
        # each response, and closes a connection whose next request's headers are not complete
        # by then: the headers timeout and the idle keep-alive in one.
        return _GatewayRequestHandler(server, gate, loop=loop, access_log=None, keepalive_timeout=conn.idle_timeout)

    sock = listening_socket(host, port)  # sheds connections when descriptors run out
    # create_server's own backlog is what counts: it calls listen() again with it, replacing
    # any earlier listen() (asyncio's default: 100).
    listener = await loop.create_server(connection, sock=sock, backlog=LISTEN_BACKLOG)
    return SSEServer(runner, server_url("http", sock), app.get(REGISTRY_KEY), gate, listener)
