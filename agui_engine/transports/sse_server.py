"""AG-UI over HTTP, the server: the SSE (and NDJSON, protobuf) gateway on aiohttp.

Theory of operation
-------------------
Server: :func:`create_app` builds an aiohttp application around a
:class:`~transports.runs.RunRegistry`. Routes (``<path>`` defaults to ``/``)::

    POST    <path>               start a run (or resume it, with Last-Event-ID)
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
import collections
import contextvars
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

import msgspec
from aiohttp import web

from agui_engine.genui.resources import Resource, ResourceRegistry, UnknownResourceError
from agui_engine.loops.tool_sources import tool_source_status
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.capabilities import TransportCapabilities, encode_capabilities
from agui_engine.protocol.codec import NDJSON_CONTENT_TYPE, SSE_CONTENT_TYPE, encode_ndjson, encode_sse
from agui_engine.protocol.errors import AguiEngineError, RemoteInputError, UsageError
from agui_engine.protocol.events import RunErrorEvent
from agui_engine.protocol.proto import (
    PROTO_CONTENT_TYPE,
    PROTO_KEEPALIVE_FRAME,
    encode_proto_frame,
    proto_frame_from_json,
)
from agui_engine.protocol.threads import BadThreadRequestError
from agui_engine.protocol.wire import WireChoice, wire_for, wire_translator

from .admission import Caller
from .agents_app import ServedAgent, create_agents_app
from .bearer_auth import check_bearer
from .capabilities import served_capabilities, sse_transport
from .clock import Clock
from .connection_gate import MAX_IDLE_CONNECTIONS, MAX_IDLE_CONNECTIONS_PER_IP, IdleConnectionGate, peer_address
from .content_negotiation import MAX_ECHOED_HEADER_CHARS, negotiate, negotiate_history
from .data import QUERY_QUEUE_TIMEOUT_SECONDS, ResourceBroker, broker_for, decode_query
from .eventlog import EventLog, LogSlice
from .history import UnknownThreadError
from .http_headers import (
    HISTORY_TRIMMED_HEADER,
    NOT_RESUMABLE_VALUES,
    RESUMABLE_HEADER,
    RUN_ID_HEADER,
    RUN_KEY_HEADER,
    RUN_KEY_QUERY,
    THREAD_ID_HEADER,
)
from .input_decoding import DEFAULT_MAX_BODY_BYTES, check_body_size, decode_run_input
from .input_errors import MethodNotAllowedError, RequestTimeoutError, UnsupportedMediaTypeError
from .inspector import add_frontend_routes
from .listening_socket import LISTEN_BACKLOG, listening_socket, server_url
from .metrics import METRICS_CONTENT_TYPE
from .otel import incoming_trace
from .registry_options import RegistryOptions
from .runs import RunRegistry
from .runtime_routes import DEFAULT_AGENT_ID, RUNTIME_ROUTES_KEY, RuntimeAgentRoutes, add_runtime_routes
from .send_stall import SEND_STALL_TIMEOUT_SECONDS, send_or_stall
from .server_handle import ServerHandle
from .server_options import ConnectionOptions, DataOptions, merge_options
from .subscription import DEFAULT_KEEPALIVE_SECONDS, Subscription
from .thread_api import delete_thread, list_threads, rename_thread

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "AppKeywords",
    "BODY_READ_CHUNK",
    "BODY_TIMEOUT_SECONDS",
    "CORS_MAX_AGE",
    "HTTP_IDLE_TIMEOUT_SECONDS",
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

#: The status an access-log line shows for a request whose client closed the
#: connection before the answer ended (a stream cut after its ``200``): nginx's
#: "client closed request", so log tools that know nginx read it right.
STATUS_CLIENT_CLOSED = 499

#: The run the current request is about, noted by the handlers for the access log
#: (a context variable: the handler runs in its middleware's task and context).
_RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("agui_engine_run_id", default=None)


def _caller(request: web.Request, principal: str | None) -> Caller:
    """Who is asking: the request's principal and the run key it presents, if any."""
    return Caller(principal, request.headers.get(RUN_KEY_HEADER) or request.query.get(RUN_KEY_QUERY) or None)


#: The keep-alive frames: an SSE comment (ignored by every SSE parser, AG-UI's
#: included) and an empty NDJSON line (NDJSON readers skip blank lines).
_KEEPALIVE_SSE = b": keep-alive\n\n"
_KEEPALIVE_NDJSON = b"\n"
#: Per stream format (negotiate's answer): the Content-Type, the keep-alive frame and how
#: an event that is not in the log (a RUN_ERROR the stream itself writes) is framed.
_FORMATS: dict[str, tuple[str, bytes, Any]] = {
    "sse": (SSE_CONTENT_TYPE, _KEEPALIVE_SSE, encode_sse),
    "ndjson": (NDJSON_CONTENT_TYPE, _KEEPALIVE_NDJSON, encode_ndjson),
    "proto": (PROTO_CONTENT_TYPE, PROTO_KEEPALIVE_FRAME, encode_proto_frame),
}

#: Seconds aiohttp waits on shutdown for open handlers to finish (then cancels
#: them). Twice runs.CANCEL_WAIT_SECONDS: the registry first waits up to that for
#: agents to stop, then each stream still has to write its RUN_ERROR{shutdown};
#: well inside the 30 s an orchestrator (Kubernetes) grants before SIGKILL.
SHUTDOWN_TIMEOUT = 10.0

#: Threads whose latest run a gateway remembers for CopilotKit's connect to follow live (the
#: oldest is forgotten first): a thread id and a run id each, about 200 bytes an entry.
MAX_RECONNECTABLE_THREADS = 10_000


#: Request bodies are read in pieces of this size so the size limit is enforced
#: while reading, not after buffering a body of any size (64 KiB: a typical
#: socket read).
BODY_READ_CHUNK = 64 * 1024
#: Seconds a connection may go without a complete set of request headers: from
#: connect, and again from the end of each response (idle keep-alive). aiohttp's
#: own connection timer (``keepalive_timeout``; its default, 3,630 s, let 2,400
#: trickling or silent connections sit for as long as they liked). 75 s is nginx's
#: keep-alive default and above the 60 s idle timeout of common load balancers, so
#: a balancer never reuses a connection the gateway has just closed.
HTTP_IDLE_TIMEOUT_SECONDS = 75.0
#: Seconds to receive a whole request body, from the end of its headers: past it
#: the answer is 408 (``RequestTimeoutError``) and nothing is started. A typical
#: body is a few KiB; 60 s still takes the 8 MiB limit at ~140 KiB/s, while a
#: client trickling an 8 MiB body cannot hold it for longer than this.
BODY_TIMEOUT_SECONDS = 60.0
#: How long a browser may cache a CORS preflight answer (10 minutes: the usual default).
CORS_MAX_AGE = 600

#: Characters of the HTTP parser's own complaint (a header line over its limit, a
#: body whose Content-Encoding does not decode) quoted in an unreadable_request
#: answer: enough to say what was wrong, never the whole hostile header.
MAX_PARSER_MESSAGE_CHARS = 200


class UnreadableRequestError(RemoteInputError):
    """The server cannot read the request (HTTP 400 ``unreadable_request``): a body
    whose ``Content-Encoding`` (gzip, deflate, br) does not decode, a header over
    the HTTP parser's limits, a malformed request line. The message says which."""

    default_code = "unreadable_request"


#: The request body codings the gateway reads: exactly one of these, or none. aiohttp decodes one
#: of them; any other value -- an unknown coding, or several stacked (``gzip, gzip, br, zstd``) --
#: it would hand over undecoded, as if plain, so the body would be read as JSON it is not.
READABLE_CONTENT_ENCODINGS: Final = frozenset({"identity", "gzip", "deflate", "br", "zstd"})


def check_content_encoding(header: str | None) -> None:
    """Raise :class:`UnreadableRequestError` (400) unless ``header`` (a request's
    ``Content-Encoding``) names at most one coding of :data:`READABLE_CONTENT_ENCODINGS`."""
    coding = (header or "").strip().lower()
    if coding and coding not in READABLE_CONTENT_ENCODINGS:
        shown = header[:MAX_ECHOED_HEADER_CHARS] if header else ""
        raise UnreadableRequestError(
            f"cannot read the request body: Content-Encoding {shown!r} is not one coding this server decodes "
            f"(send one of {', '.join(sorted(READABLE_CONTENT_ENCODINGS))}, or none)")


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


def frame_sse(run_id: str, first_seq: int, payloads: Sequence[bytes]) -> bytes:
    """One buffer holding an SSE frame per payload: byte for byte
    ``codec.encode_sse(payload, id=f"{run_id}:{seq}")`` (tested), built with one
    bytes template per frame. The codec's per-frame checks are done once instead:
    the run id was checked by ``check_run_id`` (no CR, LF, NUL) when the run
    started, and payloads come from ``encode_event`` (JSON never holds a raw CR/LF).
    This is the gateway's hottest loop, hence no per-frame function call."""
    head = b"id: " + run_id.encode() + b":"
    return b"".join([b"%b%d\ndata: %b\n\n" % (head, first_seq + i, p) for i, p in enumerate(payloads)])


def frame_ndjson(payloads: Sequence[bytes]) -> bytes:
    """One buffer holding one NDJSON line per payload."""
    return b"\n".join(payloads) + b"\n"


def frame_proto(payloads: Sequence[bytes]) -> bytes:
    """One buffer holding one length-prefixed protobuf frame per (JSON) payload. A binary
    frame has no id: a frame's position is the request's cursor plus its index (spec/framing.md)."""
    return b"".join([proto_frame_from_json(p) for p in payloads])


def _error_response(exc: AguiEngineError, metrics: GatewayMetrics | None = None) -> web.Response:
    headers = {"Cache-Control": "no-store"}
    if metrics is not None:
        metrics.note_error(exc.code)
    retry_after = getattr(exc, "retry_after", None)  # ServerBusyError, EventLogUnavailableError
    if isinstance(retry_after, int):
        headers["Retry-After"] = str(retry_after)
    if exc.http_status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="agui-engine"'
    return web.json_response(exc.to_json(), status=exc.http_status, headers=headers)


class _Gateway:
    """The request handlers of one app (state: the registry and the options)."""

    def __init__(
        self,
        registry: RunRegistry,
        *,
        keepalive_seconds: float,
        max_input_bytes: int,
        auth_token: str | Mapping[str, str] | None,
        cors_origins: Sequence[str],
        send_timeout: float,
        body_timeout: float,
        broker: ResourceBroker | None = None,
        transport: TransportCapabilities | None = None,
        wire: WireChoice = "auto",
    ) -> None:
        self.registry = registry
        #: The AG-UI wire of the streams ("auto": by each run input's protocolVersion).
        self.wire: WireChoice = wire
        self.broker = broker
        #: What this server speaks, in its capabilities document.
        self.transport = transport or sse_transport()
        self.body_timeout = body_timeout
        self.keepalive = keepalive_seconds
        self.send_timeout = send_timeout
        self.max_input_bytes = max_input_bytes
        self.auth_token = auth_token
        self.cors_any = "*" in cors_origins
        self.cors_origins = frozenset(cors_origins)
        self.metrics = registry.metrics
        #: The latest run started here of each thread (newest last; at most
        #: MAX_RECONNECTABLE_THREADS): what CopilotKit's connect reattaches to while it runs.
        self.thread_runs: collections.OrderedDict[str, str] = collections.OrderedDict()

    # -- CORS ----------------------------------------------------------------------------

    def _origin_allowed(self, origin: str | None) -> bool:
        return origin is not None and (self.cors_any or origin in self.cors_origins)

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if self._origin_allowed(origin):
            response.headers["Access-Control-Allow-Origin"] = "*" if self.cors_any and not self.auth_token else origin  # type: ignore[assignment]
            response.headers["Vary"] = "Origin"
            response.headers["Access-Control-Expose-Headers"] = (
                f"Retry-After, {RUN_ID_HEADER}, {RUN_KEY_HEADER}, {THREAD_ID_HEADER}, {HISTORY_TRIMMED_HEADER}"
            )

    async def preflight(self, request: web.Request) -> web.StreamResponse:
        if not self._origin_allowed(request.headers.get("Origin")):
            return web.Response(status=403)
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": "POST, GET, PATCH, DELETE, OPTIONS",
                "Access-Control-Allow-Headers": (
                    f"Content-Type, Accept, Authorization, Last-Event-ID, {RESUMABLE_HEADER}, {RUN_KEY_HEADER}"
                ),
                "Access-Control-Max-Age": str(CORS_MAX_AGE),
            },
        )

    # -- handlers ------------------------------------------------------------------------

    async def _read_body(self, request: web.Request, what: str = "the RunAgentInput") -> bytes:
        ctype = request.headers.get("Content-Type", "")
        if ctype.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaTypeError(f"Content-Type must be application/json, got {ctype[:MAX_ECHOED_HEADER_CHARS]!r}")
        check_content_encoding(request.headers.get("Content-Encoding"))
        if request.content_length is not None:
            check_body_size(request.content_length, self.max_input_bytes, what=what)
        chunks: list[bytes] = []
        total = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.content.iter_chunked(BODY_READ_CHUNK):
                    total += len(chunk)
                    check_body_size(total, self.max_input_bytes, what=what)
                    chunks.append(chunk)
        except web.RequestPayloadError as exc:
            # aiohttp decodes Content-Encoding while reading: a gzip / deflate body
            # that does not decode (or is cut short) surfaces here.
            raise UnreadableRequestError(
                f"cannot read the request body (Content-Encoding "
                f"{request.headers.get('Content-Encoding', 'identity')[:MAX_ECHOED_HEADER_CHARS]!r}): "
                f"{_parser_complaint(exc.__cause__ or exc, 'it does not decode')}"
            ) from None
        except TimeoutError:
            raise RequestTimeoutError(
                f"the request body did not arrive within {self.body_timeout:g} s ({total} bytes came)"
            ) from None
        return b"".join(chunks)

    async def post(self, request: web.Request) -> web.StreamResponse:
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            body = await self._read_body(request)
            input = decode_run_input(body, max_bytes=self.max_input_bytes)
            _RUN_ID.set(input.run_id)
            fmt = negotiate(request.headers.get("Accept"))
            last_event_id = request.headers.get("Last-Event-ID")
            # A client resuming now evidently resumes; otherwise it must say so.
            declared = request.headers.get(RESUMABLE_HEADER)
            resumable = bool(last_event_id) or (declared is not None and declared.strip().lower() not in NOT_RESUMABLE_VALUES)
            if last_event_id:
                sub, first = await self.registry.resume(
                    input.run_id, last_event_id, _caller(request, principal), resumable=resumable, via="sse"
                )
            else:
                with incoming_trace(self.registry.observer, request.headers):  # the run continues the client's trace
                    run = await self.registry.start(
                        input, owner=principal, address=peer_address(request.transport), key=_caller(request, principal).key
                    )
                sub = self.registry.subscribe(run, 0, resumable=resumable)
                first = None
                self.thread_runs[input.thread_id] = input.run_id
                self.thread_runs.move_to_end(input.thread_id)
                if len(self.thread_runs) > MAX_RECONNECTABLE_THREADS:
                    self.thread_runs.popitem(last=False)
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return await self._stream(request, sub, fmt, first, started=not last_event_id,
                                  translate=wire_translator(wire_for(self.wire, input.protocol_version)))

    # -- CopilotKit's runtime routes (transports/runtime_routes.py) --------------------

    async def runtime_connect(self, request: web.Request) -> web.StreamResponse:
        """``POST .../agent/<id>/connect``: the thread's kept history (its body: a RunAgentInput
        naming ``threadId``), compacted, as one SSE stream in the caller's wire; no event when
        there is none the caller may read (the thread is then new to the page)."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            input = decode_run_input(await self._read_body(request), max_bytes=self.max_input_bytes)
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        translate = wire_translator(wire_for(self.wire, input.protocol_version))
        caller = _caller(request, principal)
        kept: set[str] = set()
        try:
            found, payloads = await self.registry.thread_history(input.thread_id, caller=caller)
            body = frame_sse(found.tip, 1, [translate(p) for p in payloads] if translate else payloads)
            kept = {r.run_id for r in found.runs}
        except UnknownThreadError:
            body = b""
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        # the thread's latest run, while it is not in the history yet (running): followed live
        latest = self.thread_runs.get(input.thread_id)
        if latest is not None and latest not in kept:
            try:
                run = self.registry.check_owner(await self.registry.find(latest), caller)
                sub = self.registry.subscribe(run, 0, resumable=True)
            except AguiEngineError:
                pass  # not the caller's, or gone: the history is all there is
            else:
                return await self._stream(request, sub, "sse", None, translate=translate, prefix=body)
        return web.Response(body=body, headers={"Content-Type": SSE_CONTENT_TYPE, "Cache-Control": "no-cache"})

    async def runtime_stop(self, request: web.Request, thread_id: str) -> web.StreamResponse:
        """``POST .../agent/<id>/stop/<threadId>`` with ``{runId}``: cancel that run of the thread
        (as ``DELETE <path>/runs/<runId>``: the caller must be its principal or hold its key).
        Answers ``{"stopped": bool}``: false when there was nothing of the caller's to stop."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            raw = await self._read_body(request, what="the stop request")
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        try:
            asked = msgspec.json.decode(raw) if raw.strip() else {}
        except msgspec.DecodeError:
            asked = {}
        run_id = asked.get("runId") if isinstance(asked, dict) else None
        stopped = False
        if isinstance(run_id, str):
            caller = _caller(request, principal)
            try:
                run = self.registry.check_owner(await self.registry.find(run_id), caller)
                if run.thread_id in ("", thread_id):  # "": a run another node started
                    await self.registry.cancel(run_id, caller=caller)
                    stopped = True
            except AguiEngineError:
                stopped = False
        return web.json_response({"stopped": stopped}, headers={"Cache-Control": "no-store"})

    async def data_query(self, request: web.Request) -> web.StreamResponse:
        """``POST <path>/data/query``: a component's data (transports/data.py does the work)."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            body = await self._read_body(request, "the query")
            if self.broker is None:
                decode_query(body, max_bytes=self.max_input_bytes)  # a malformed body is still a 400
                raise UnknownResourceError("this gateway serves no data resources")
            # While its resolver works the connection is not "idle" (IdleConnectionGate), as
            # while it streams a run: a slow resource must not count against the idle caps.
            gate = request.config_dict.get(_IDLE_GATE_KEY)
            if gate is not None:
                gate.running(request.protocol)
            try:
                answer = await self.broker.answer(body, principal, max_bytes=self.max_input_bytes)
            finally:
                if gate is not None:
                    gate.idle(request.protocol)
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(body=answer, content_type="application/json", headers={"Cache-Control": "no-store"})

    async def capabilities(self, request: web.Request) -> web.StreamResponse:
        """``GET <path>/capabilities``: the served agent's capabilities, this server's transport."""
        try:
            check_bearer(request.headers.get("Authorization"), self.auth_token)
            document = await served_capabilities(self.registry.agent, self.transport)
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(
            body=encode_capabilities(document), content_type="application/json", headers={"Cache-Control": "no-store"}
        )

    async def capabilities_method(self, request: web.Request) -> web.StreamResponse:
        """Any other method on ``<path>/capabilities``: 405 saying which one reads it."""
        return self._only_get(request, "the capabilities are")

    async def thread_method(self, request: web.Request) -> web.StreamResponse:
        """Any other method on ``<path>/threads/<threadId>``: 405 saying which one reads it
        (a thread's history grows by its runs, ``POST <path>``, never by a write here)."""
        resp = _error_response(MethodNotAllowedError(
            f"{request.method} {request.path}: a thread's history is read with GET, its title set with PATCH, "
            "the thread deleted with DELETE (nothing else is allowed here)"
        ), self.metrics)
        resp.headers["Allow"] = "GET, HEAD, PATCH, DELETE" + (", OPTIONS" if self.cors_origins or self.cors_any else "")
        return resp

    async def threads_list(self, request: web.Request) -> web.StreamResponse:
        """``GET <path>/threads[?limit=&cursor=&q=]``: the caller's threads, newest first."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            page = await list_threads(
                self.registry, _caller(request, principal), limit=request.query.get("limit"),
                cursor=request.query.get("cursor"), search=request.query.get("q"),
            )
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(body=msgspec.json.encode(page), content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    async def thread_delete(self, request: web.Request) -> web.StreamResponse:
        """``DELETE <path>/threads/<threadId>``: delete the caller's thread (204)."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            await delete_thread(self.registry, request.match_info["thread_id"], _caller(request, principal))
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(status=204)

    async def thread_patch(self, request: web.Request) -> web.StreamResponse:
        """``PATCH <path>/threads/<threadId>`` ``{"title": "..."}``: set the caller's thread's title."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            body = await self._read_body(request, "the thread's title")
            try:
                doc = msgspec.json.decode(body)
            except msgspec.DecodeError as exc:
                raise BadThreadRequestError(f"the body is not JSON: {exc}") from None
            done = await rename_thread(self.registry, request.match_info["thread_id"], doc, _caller(request, principal))
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(body=msgspec.json.encode(done), content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    def _only_get(self, request: web.Request, what: str) -> web.StreamResponse:
        resp = _error_response(MethodNotAllowedError(
            f"{request.method} {request.path}: {what} read with GET (nothing else is allowed here)"
        ), self.metrics)
        resp.headers["Allow"] = "GET, HEAD" + (", OPTIONS" if self.cors_origins or self.cors_any else "")
        return resp

    async def get(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        _RUN_ID.set(run_id)
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            fmt = negotiate(request.headers.get("Accept"))
            last_event_id = request.headers.get("Last-Event-ID") or request.query.get("lastEventId")
            # GET is the EventSource-style endpoint: an EventSource reconnects by
            # itself (and cannot send a header to say so), so it is resumable.
            sub, first = await self.registry.resume(
                run_id, last_event_id or None, _caller(request, principal), resumable=True, via="sse"
            )
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        if first is not None and first.finished and not first.payloads:
            # Nothing after the cursor and the run is over: 204 tells an
            # EventSource to stop reconnecting (WHATWG), instead of looping.
            sub.close()
            return web.Response(status=204)
        # the wire the run's input declared (a run another node started: its input is not here, 0.x)
        translate = wire_translator(wire_for(self.wire, sub.run.input.protocol_version))
        return await self._stream(request, sub, fmt, first, translate=translate)

    async def thread(self, request: web.Request) -> web.StreamResponse:
        """``GET <path>/threads/<threadId>[?runId=]``: the thread's compacted history, the
        branch ending at ``runId`` (default: its latest kept run), as a JSON array of
        events or, when Accept prefers it, length-prefixed protobuf frames."""
        thread_id = request.match_info["thread_id"]
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            fmt = negotiate_history(request.headers.get("Accept"))
            found, payloads = await self.registry.thread_history(
                thread_id, run_id=request.query.get("runId") or None, caller=_caller(request, principal)
            )
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        headers = {
            "Cache-Control": "no-store",
            THREAD_ID_HEADER: thread_id,
            RUN_ID_HEADER: found.tip,
            HISTORY_TRIMMED_HEADER: "true" if found.trimmed else "false",
        }
        if fmt == "proto":
            headers["Content-Type"] = PROTO_CONTENT_TYPE
            return web.Response(body=frame_proto(payloads), headers=headers)
        headers["Content-Type"] = "application/json"
        return web.Response(body=b"[" + b",".join(payloads) + b"]", headers=headers)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        _RUN_ID.set(request.match_info["run_id"])
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            await self.registry.cancel(request.match_info["run_id"], caller=_caller(request, principal))
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(status=204)

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        # Liveness: this process answers. Restarting it would not fix Redis.
        return web.json_response({"status": "ok"}, headers={"Cache-Control": "no-store"})

    def _authorized(self, request: web.Request) -> bool:
        """Whether the request holds a valid bearer token (always, when auth is off)."""
        try:
            check_bearer(request.headers.get("Authorization"), self.auth_token)
        except AguiEngineError:
            return False
        return True

    async def readyz(self, request: web.Request) -> web.StreamResponse:
        ready = await self.registry.ready()
        if not self._authorized(request):
            # auth on and no valid token: ready or not (a load balancer's probe needs no more),
            # never the run counts or the MCP servers' ids and errors
            return web.json_response({"ready": ready}, status=200 if ready else 503,
                                     headers={"Cache-Control": "no-store"})
        doc: dict[str, Any] = {
            "ready": ready,
            "draining": self.registry.draining,
            "activeRuns": self.registry.active,
        }
        sources = tool_source_status(self.registry.agent)
        if sources:  # an MCP server that cannot be reached makes its tools absent, not the gateway unready
            doc["mcp"] = sources
        return web.json_response(doc, status=200 if ready else 503, headers={"Cache-Control": "no-store"})

    async def metrics_text(self, request: web.Request) -> web.StreamResponse:
        assert self.metrics is not None
        try:  # behind the bearer token when auth is on (a scraper sends it: bearer_token_file)
            check_bearer(request.headers.get("Authorization"), self.auth_token)
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return web.Response(
            body=self.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE, "Cache-Control": "no-store"}
        )

    async def _stream(
        self, request: web.Request, sub: Subscription, fmt: str, first: LogSlice | None, *, started: bool = False,
        translate: Callable[[bytes], bytes] | None = None, prefix: bytes = b"",
    ) -> web.StreamResponse:
        run = sub.run
        headers = {
            "Content-Type": _FORMATS[fmt][0],
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            RUN_ID_HEADER: run.run_id,
        }
        if started and run.key is not None:
            headers[RUN_KEY_HEADER] = run.key  # only to the client that started the run
        resp = web.StreamResponse(status=200, headers=headers)
        # While it streams a run the connection is not "idle": the cap on connections
        # that run nothing does not count it (see IdleConnectionGate).
        gate = request.config_dict.get(_IDLE_GATE_KEY)
        if gate is not None:
            gate.running(request.protocol)
        try:
            await resp.prepare(request)
            transport = request.transport

            async def write(data: bytes) -> None:
                await send_or_stall(lambda: resp.write(data), len(data), transport, self.send_timeout)

            if prefix:  # frames before the run's (CopilotKit's connect: the thread's history)
                await write(prefix)

            await _pump(write, sub, fmt, self.keepalive, first, self.metrics, translate)
            await send_or_stall(resp.write_eof, 0, transport, self.send_timeout)
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
        await self.registry.shutdown()
        if self.broker is not None:
            self.broker.close()  # its resolver pools


async def _pump(
    write: Any, sub: Subscription, fmt: str, keepalive: float, first: LogSlice | None, metrics: GatewayMetrics | None,
    translate: Callable[[bytes], bytes] | None = None,
) -> None:
    """Write the subscription's events until the run's last one (the shared hot
    loop of the HTTP streams): one ``write`` per ready batch. ``translate``: applied to
    each encoded event first (the 0.x wire: ``protocol.wire.to_wire0``)."""
    run_id = sub.run.run_id
    sse = fmt == "sse"
    _, keepalive_frame, frame_one = _FORMATS[fmt]
    sl = first
    while True:
        if sl is None:
            try:
                sl = await sub.next(keepalive)
            except AguiEngineError as exc:
                # This subscriber fell further behind than the log holds (410
                # cursor_expired), or the shared log went away (event_log_unavailable):
                # say so (no id: it does not move the client's cursor) and end the stream.
                if metrics is not None:
                    metrics.note_error(exc.code)
                err = RunErrorEvent.from_error(exc)
                await write(frame_one(err))
                return
            if sl is None:
                await write(keepalive_frame)
                continue
        if sl.payloads:
            payloads = sl.payloads if translate is None else [translate(p) for p in sl.payloads]
            if sse:
                data = frame_sse(run_id, sl.first_seq, payloads)
            else:
                data = frame_ndjson(payloads) if fmt == "ndjson" else frame_proto(payloads)
            await write(data)
            if metrics is not None:
                metrics.note_sent(fmt, len(payloads), len(data))
        if sl.finished:
            return
        sl = None


@web.middleware
async def _access_log(request: web.Request, handler: Any) -> web.StreamResponse:
    """One line per request, when it ends: method, path, status, run id, duration.
    Refusals (4xx) included; a stream the client cut is logged as STATUS_CLIENT_CLOSED."""
    start = time.perf_counter()
    status = 500
    _RUN_ID.set(None)
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
            _RUN_ID.get() or "-",
            (time.perf_counter() - start) * 1000.0,
        )


def create_app(
    agent: Agent | AgentFunction | Mapping[str, Agent | AgentFunction | ServedAgent] | None = None,
    *,
    path: str = "/",
    registry: RunRegistry | None = None,
    options: RegistryOptions | None = None,
    log: EventLog | None = None,
    clock: Clock | None = None,
    metrics: GatewayMetrics | None = None,
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
    max_input_bytes: int = DEFAULT_MAX_BODY_BYTES,
    auth_token: str | Mapping[str, str] | None = None,
    cors_origins: Sequence[str] = (),
    inspector: bool = False,
    send_timeout: float = SEND_STALL_TIMEOUT_SECONDS,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
    access_log: bool = True,
    resources: ResourceRegistry | Sequence[Resource] | ResourceBroker | None = None,
    query_queue_timeout: float = QUERY_QUEUE_TIMEOUT_SECONDS,
    connection: ConnectionOptions | None = None,
    data: DataOptions | None = None,
    websocket: bool = False,
) -> web.Application:
    """An aiohttp application serving ``agent`` over HTTP (SSE / NDJSON).

    Run it alone (``web.run_app(create_app(agent))``, or :func:`start_sse_server`)
    or mount it: ``parent.add_subapp("/agui", create_app(agent, path=""))`` serves
    ``POST /agui`` and ``/agui/runs/<runId>``. ``options`` (limits and periods:
    :class:`~transports.registry_options.RegistryOptions`), ``log`` and ``clock`` build the
    :class:`~transports.runs.RunRegistry`; pass ``registry`` instead to share one
    between transports. ``metrics``: a :class:`~transports.metrics.GatewayMetrics`
    to fill and serve at ``<path>/metrics`` (a given ``registry`` brings its own). ``auth_token``: require ``Authorization: Bearer <token>``: one
    token, or a mapping token -> principal name, which binds each run to the
    principal that started it (stream, resume and cancel answer 404 to others).
    ``cors_origins``: origins allowed by CORS (``"*"`` for any).
    ``GET <path>/static/agui-engine.js`` serves the JavaScript applier;
    ``inspector=True`` adds the inspector page at ``GET <path>/inspect``
    (:mod:`agui_engine.transports.inspector`). ``send_timeout``:
    seconds a stream's write may wait for a client that stopped reading before the
    stream is cut (``SEND_STALL_TIMEOUT_SECONDS``). ``body_timeout``: seconds to
    receive a request body (408 past it; ``BODY_TIMEOUT_SECONDS``).
    ``access_log``: one INFO line per request on the ``agui_engine.access``
    logger (``<client> <method> <path> <status> run=<runId> <ms>ms``), refusals
    included; shown wherever logging is configured at INFO (``agui-engine serve``).
    ``resources``: the data resources served at ``POST <path>/data/query`` (a
    ResourceRegistry, a list of Resource, or a shared
    :class:`~transports.data.ResourceBroker`); default: the served agent's
    ``resources`` (``LLMAgent`` / ``AgentLoop`` collect their components'). Without
    any, every query answers 404. ``query_queue_timeout``: seconds a query waits for
    a full concurrency limit before 503 (``data.QUERY_QUEUE_TIMEOUT_SECONDS``).
    ``connection`` / ``data``: the same settings as one value each
    (:class:`~transports.server_options.ConnectionOptions`: ``max_input_bytes`` is its
    ``max_input_bytes``; :class:`~transports.server_options.DataOptions`); the keywords
    fill them, and a setting given both ways is a UsageError. ``websocket``: a WebSocket
    server serves the same runs beside this app (it shares the ``registry``); said in
    ``GET <path>/capabilities`` (``transport.websocket``).

    Run it with ``handler_cancellation=True`` (as :func:`start_sse_server` does)
    so a client disconnect is noticed at once; otherwise it is noticed at the
    next write (at the latest one keep-alive interval later).
    ``agent`` may be a mapping id -> agent (or :class:`~transports.agents_app.ServedAgent`):
    one app serving each agent at ``<path>/<id>`` with its own runs
    (:func:`~transports.agents_app.create_agents_app`; the other keywords apply to every agent).

    Raises UsageError when neither ``agent`` nor ``registry`` is given.
    """
    if isinstance(agent, Mapping):
        return create_agents_app(
            agent, one_app=create_app, registry_key=REGISTRY_KEY, path=path, auth_token=auth_token, registry=registry, options=options, log=log, clock=clock,
            metrics=metrics, keepalive_seconds=keepalive_seconds, max_input_bytes=max_input_bytes,
            cors_origins=cors_origins, inspector=inspector, send_timeout=send_timeout, body_timeout=body_timeout,
            access_log=access_log, resources=resources, query_queue_timeout=query_queue_timeout,
            connection=connection, data=data, websocket=websocket,
        )
    if registry is None:
        if agent is None:
            raise UsageError("create_app needs an agent or a registry")
        registry = RunRegistry(as_agent(agent, where="create_app(agent)"), options=options, log=log, clock=clock, metrics=metrics)
    conn = merge_options(
        ConnectionOptions, connection, where="create_app", max_input_bytes=max_input_bytes, send_timeout=send_timeout
    )
    dat = merge_options(
        DataOptions, data, where="create_app", resources=resources, query_queue_timeout=query_queue_timeout
    )
    max_input_bytes = conn.max_input_bytes
    gw = _Gateway(
        registry,
        keepalive_seconds=keepalive_seconds,
        max_input_bytes=max_input_bytes,
        auth_token=auth_token,
        cors_origins=cors_origins,
        send_timeout=conn.send_timeout,
        body_timeout=body_timeout,
        broker=broker_for(registry.agent, dat.resources, queue_timeout=dat.query_queue_timeout),
        transport=sse_transport(websocket=websocket),
        wire=conn.wire,
    )
    # client_max_size is aiohttp's own cap for request.read(); the body is read
    # by _read_body, which enforces max_input_bytes with a JSON 413.
    app = web.Application(client_max_size=max_input_bytes, middlewares=[_access_log] if access_log else [])
    app[REGISTRY_KEY] = registry
    runs = path.rstrip("/") + "/runs/{run_id}"
    app.router.add_post(path, gw.post)
    app.router.add_get(runs, gw.get)
    app.router.add_delete(runs, gw.delete)
    base = path.rstrip("/")
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
    add_frontend_routes(app, path, inspector=inspector, auth_token=auth_token, error_response=_error_response)
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
    routes = RuntimeAgentRoutes(
        run=gw.post, connect=gw.runtime_connect, stop=gw.runtime_stop, auth=auth_token,
        capabilities=functools.partial(served_capabilities, registry.agent, gw.transport),
    )
    app[RUNTIME_ROUTES_KEY] = routes
    add_runtime_routes(app, path, {DEFAULT_AGENT_ID: routes})
    app.on_shutdown.append(gw.on_shutdown)
    return app


class AppKeywords(TypedDict, total=False):
    """:func:`create_app`'s keyword arguments, as :func:`start_sse_server` takes them
    (``**options: Unpack[AppKeywords]``: checked by type checkers, completed by editors)."""

    path: str
    registry: RunRegistry | None
    options: RegistryOptions | None
    log: EventLog | None
    clock: Clock | None
    metrics: GatewayMetrics | None
    keepalive_seconds: float
    max_input_bytes: int
    auth_token: str | Mapping[str, str] | None
    cors_origins: Sequence[str]
    inspector: bool
    send_timeout: float
    body_timeout: float
    access_log: bool
    resources: ResourceRegistry | Sequence[Resource] | ResourceBroker | None
    query_queue_timeout: float
    connection: ConnectionOptions | None
    data: DataOptions | None
    websocket: bool


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
    agent: Agent | AgentFunction | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    app: web.Application | None = None,
    shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    idle_timeout: float = HTTP_IDLE_TIMEOUT_SECONDS,
    max_idle_connections: int | None = MAX_IDLE_CONNECTIONS,
    max_idle_per_ip: int | None = MAX_IDLE_CONNECTIONS_PER_IP,
    **options: Unpack[AppKeywords],
) -> SSEServer:
    """Start the gateway in this event loop (port 0: an ephemeral port) and return
    it; ``options`` are :func:`create_app`'s keyword arguments (:class:`AppKeywords`,
    type-checked), ``connection`` among them. ``server.url`` is the endpoint
    (an IPv6 host in brackets).
    ``idle_timeout``: seconds a connection may go without complete request
    headers, from connect or since its last response (``HTTP_IDLE_TIMEOUT_SECONDS``).
    ``max_idle_connections`` / ``max_idle_per_ip``: connections that run nothing
    (reading a request, idle keep-alive) the server / one client address may hold;
    a new one past either is answered 503 + ``Retry-After`` and closed before
    anything is read (:class:`~transports.connection_gate.IdleConnectionGate`; 0 or None: no cap)."""
    conn = merge_options(
        ConnectionOptions,
        options.get("connection"),
        where="start_sse_server",
        max_idle_connections=max_idle_connections,
        max_idle_per_ip=max_idle_per_ip,
    )
    if app is None:
        options["connection"] = conn
        app = create_app(agent, **options)
    elif options:
        raise UsageError(f"start_sse_server: {', '.join(sorted(options))} configure create_app; with app= give them to create_app")
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
        return _GatewayRequestHandler(server, gate, loop=loop, access_log=None, keepalive_timeout=idle_timeout)

    sock = listening_socket(host, port)  # sheds connections when descriptors run out
    # create_server's own backlog is what counts: it calls listen() again with it, replacing
    # any earlier listen() (asyncio's default: 100).
    listener = await loop.create_server(connection, sock=sock, backlog=LISTEN_BACKLOG)
    return SSEServer(runner, server_url("http", sock), app.get(REGISTRY_KEY), gate, listener)
