"""The HTTP gateway's request handling, whatever the web framework: one copy for every front end.

Theory of operation
-------------------
The SSE gateway is served by two front ends over the same :class:`~transports.runs.RunRegistry`:
aiohttp (:mod:`~transports.sse_server`, ``create_app``) and ASGI (:mod:`~transports.asgi_server`,
``create_asgi_app``: uvicorn, hypercorn, FastAPI, Starlette). Everything they do alike lives here,
so their behaviour cannot drift: a front end turns its framework's request into a
:class:`GatewayRequest`, calls the :class:`HttpGateway` method of the route, and writes what comes
back -- an :class:`Answer` (status, headers, body) or, for a run's stream, a :class:`StreamStart`
whose events :meth:`HttpGateway.pump` writes through the front end's own ``write`` (its
backpressure, its stall timeout, its disconnect detection). The checks (bearer token, Content-Type,
body size and time, the RunAgentInput, Accept), the refusals (``{"error": {"code", "message"}}``),
the run's start, resume, follow and cancel, thread histories, data queries, capabilities, health,
readiness, metrics, CORS and the frames on the wire are all decided here.

The routes, below a front end's root (``<path>``)::

    POST    <path>                   start a run (or resume it, with Last-Event-ID)
    GET     <path>/runs/<runId>      follow a run (EventSource-style resume); DELETE cancels it
    GET     <path>/threads/<id>      a thread's compacted history (JSON, or protobuf by Accept)
    POST    <path>/data/query        a component's data
    GET     <path>/capabilities      the agent's AgentCapabilities with this server's transport
    GET     <path>/healthz, /readyz, /metrics
    GET     <path>/static/<name>, <path>/inspect; POST <path>/inspect/verify  (transports/inspector.py)
    OPTIONS <any of them>            CORS preflight (when CORS is configured)

:func:`route` maps a method and a path below the root to the handler's name and its parameter
(the ASGI front end routes with it; the aiohttp one gives the same table to aiohttp's router).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

import msgspec

from agui_engine.genui.resources import UnknownResourceError
from agui_engine.loops.tool_sources import tool_source_status
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.capabilities import TransportCapabilities, encode_capabilities
from agui_engine.protocol.codec import NDJSON_CONTENT_TYPE, SSE_CONTENT_TYPE, encode_ndjson, encode_sse
from agui_engine.protocol.compact import replay_order
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
from .bearer_auth import check_bearer
from .capabilities import sse_transport
from .clock import Clock
from .content_negotiation import MAX_ECHOED_HEADER_CHARS, negotiate, negotiate_history
from .data import ResourceBroker, broker_for, decode_query
from .eventlog import EventLog, LogSlice
from .history import UnknownThreadError
from .http_headers import (
    HISTORY_TRIMMED_HEADER,
    LIVE_RUN_HEADER,
    NOT_RESUMABLE_VALUES,
    RESUMABLE_HEADER,
    RUN_ID_HEADER,
    RUN_KEY_HEADER,
    RUN_KEY_QUERY,
    THREAD_ID_HEADER,
)
from .input_decoding import check_body_size, decode_run_input
from .input_errors import MethodNotAllowedError, RequestTimeoutError, RouteNotFoundError, UnsupportedMediaTypeError
from .metrics import METRICS_CONTENT_TYPE
from .otel import incoming_trace
from .registry_options import RegistryOptions
from .run_record import Run
from .runs import RunRegistry
from .server_options import ConnectionOptions, DataOptions
from .subscription import Subscription
from .thread_api import delete_thread, list_threads, rename_thread

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "Answer",
    "AppKeywords",
    "BODY_READ_CHUNK",
    "CORS_MAX_AGE",
    "CURRENT_RUN_ID",
    "GatewayRequest",
    "HttpGateway",
    "MAX_RECONNECTABLE_THREADS",
    "READABLE_CONTENT_ENCODINGS",
    "STATUS_CLIENT_CLOSED",
    "STREAM_FORMATS",
    "StreamStart",
    "UnreadableRequestError",
    "build_gateway",
    "check_content_encoding",
    "check_keywords",
    "error_answer",
    "frame_ndjson",
    "frame_proto",
    "frame_sse",
    "route",
]

#: Request bodies are read in pieces of this size so the size limit is enforced
#: while reading, not after buffering a body of any size (64 KiB: a typical
#: socket read).
BODY_READ_CHUNK = 64 * 1024
#: How long a browser may cache a CORS preflight answer (10 minutes: the usual default).
CORS_MAX_AGE = 600

#: The status an access-log line shows for a request whose client closed the
#: connection before the answer ended (a stream cut after its ``200``): nginx's
#: "client closed request", so log tools that know nginx read it right.
STATUS_CLIENT_CLOSED = 499

#: The run the current request is about, noted by the handlers for the access log
#: (a context variable: the handler runs in its middleware's task and context).
CURRENT_RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("agui_engine_run_id", default=None)


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


#: Threads whose latest run a gateway remembers for CopilotKit's connect to follow live (the
#: oldest is forgotten first): a thread id and a run id each, about 200 bytes an entry.
MAX_RECONNECTABLE_THREADS = 10_000

#: The keep-alive frames: an SSE comment (ignored by every SSE parser, AG-UI's
#: included) and an empty NDJSON line (NDJSON readers skip blank lines).
_KEEPALIVE_SSE = b": keep-alive\n\n"
_KEEPALIVE_NDJSON = b"\n"
#: Per stream format (negotiate's answer): the Content-Type, the keep-alive frame and how
#: an event that is not in the log (a RUN_ERROR the stream itself writes) is framed.
STREAM_FORMATS: Mapping[str, tuple[str, bytes, Any]] = {
    "sse": (SSE_CONTENT_TYPE, _KEEPALIVE_SSE, encode_sse),
    "ndjson": (NDJSON_CONTENT_TYPE, _KEEPALIVE_NDJSON, encode_ndjson),
    "proto": (PROTO_CONTENT_TYPE, PROTO_KEEPALIVE_FRAME, encode_proto_frame),
}
_JSON = "application/json; charset=utf-8"
_NO_STORE = {"Cache-Control": "no-store"}


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


class GatewayRequest:
    """A request as the gateway reads it, whatever the framework: ``method``, ``path`` (as the
    client sent it, for messages), ``headers`` (case-insensitive lookups), ``query``,
    ``content_length`` (None when not declared), ``peer`` (the client's address), ``chunks``
    (the body, read on demand: raises UnreadableRequestError for a body that does not decode)
    and, when the embedding application authenticated the caller itself (a FastAPI
    dependency), ``principal`` with ``authenticated=True`` (the bearer token is then not checked)."""

    __slots__ = ("authenticated", "chunks", "content_length", "headers", "method", "path", "peer", "principal", "query")

    def __init__(
        self, method: str, path: str, headers: Mapping[str, str], query: Mapping[str, str], *,
        content_length: int | None = None, peer: str = "-",
        chunks: Callable[[], AsyncIterator[bytes]] | None = None,
        principal: str | None = None, authenticated: bool = False,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.content_length = content_length
        self.peer = peer
        self.chunks = chunks
        self.principal = principal
        self.authenticated = authenticated


class Answer:
    """A whole answer: ``status``, ``headers``, ``body``."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.status = status
        self.headers = headers if headers is not None else {}
        self.body = body


class StreamStart:
    """A run's stream about to start: the 200's ``headers`` and what :meth:`HttpGateway.pump` writes."""

    __slots__ = ("first", "fmt", "headers", "prefix", "sub", "translate")

    def __init__(self, headers: dict[str, str], sub: Subscription, fmt: str, first: LogSlice | None,
                 translate: Callable[[bytes], bytes] | None) -> None:
        self.headers = headers
        self.sub = sub
        self.fmt = fmt
        self.first = first
        self.translate = translate
        #: Frames a front end writes before the run's (CopilotKit's connect: the thread's history).
        self.prefix = b""


def _json_answer(doc: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(status, {**_NO_STORE, **(headers or {}), "Content-Type": _JSON}, json.dumps(doc).encode())


def error_answer(exc: AguiEngineError, metrics: GatewayMetrics | None = None) -> Answer:
    """The refusal ``{"error": {"code", "message"}}`` of ``exc`` with its HTTP status (and
    ``Retry-After``, ``WWW-Authenticate`` where they apply); counted in ``metrics``."""
    headers: dict[str, str] = {}
    if metrics is not None:
        metrics.note_error(exc.code)
    retry_after = getattr(exc, "retry_after", None)  # ServerBusyError, EventLogUnavailableError
    if isinstance(retry_after, int):
        headers["Retry-After"] = str(retry_after)
    if exc.http_status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="agui-engine"'
    return _json_answer(exc.to_json(), exc.http_status, headers)


#: route(): a path's last segments -> handler names by method ("*": any other method).
_FIXED: Mapping[str, Mapping[str, str]] = {
    "": {"POST": "post"},
    "/data/query": {"POST": "data_query"},
    "/threads": {"GET": "threads_list", "HEAD": "threads_list"},
    "/capabilities": {"GET": "capabilities", "HEAD": "capabilities", "*": "capabilities_method"},
    "/healthz": {"GET": "healthz", "HEAD": "healthz"},
    "/readyz": {"GET": "readyz", "HEAD": "readyz"},
    "/metrics": {"GET": "metrics_text", "HEAD": "metrics_text"},
    "/inspect": {"GET": "inspect", "HEAD": "inspect"},
    "/inspect/verify": {"POST": "inspect_verify"},
}
_WITH_PARAM: Mapping[str, Mapping[str, str]] = {
    "/runs/": {"GET": "get", "HEAD": "get", "DELETE": "delete"},
    "/threads/": {"GET": "thread", "HEAD": "thread", "DELETE": "thread_delete", "PATCH": "thread_patch",
                  "*": "thread_method"},
    "/static/": {"GET": "static", "HEAD": "static"},
}


def route(method: str, subpath: str, *, cors: bool) -> tuple[str, str | None] | None:
    """The handler name and its parameter (a run id, a thread id, a file name) of ``method`` on
    ``subpath`` (the path below the gateway's root, without a trailing ``/``), ``("preflight",
    None)`` for OPTIONS when ``cors``; ``("method_not_allowed", None)`` for a known path and
    another method; None for a path the gateway does not serve (404)."""
    methods = _FIXED.get(subpath)
    param: str | None = None
    if methods is None:
        for prefix, table in _WITH_PARAM.items():
            if subpath.startswith(prefix) and "/" not in subpath[len(prefix):] and subpath[len(prefix):]:
                methods, param = table, subpath[len(prefix):]
                break
    if methods is None:
        return None
    if method == "OPTIONS" and cors:
        return "preflight", param
    name = methods.get(method) or methods.get("*")
    return (name, param) if name is not None else ("method_not_allowed", param)


class HttpGateway:
    """The request handlers of one gateway (state: the registry and the options); see the
    module docstring. Every handler returns an :class:`Answer` or a :class:`StreamStart`."""

    def __init__(
        self,
        registry: RunRegistry,
        *,
        connection: ConnectionOptions,
        auth_token: str | Mapping[str, str] | None,
        cors_origins: Sequence[str],
        broker: ResourceBroker | None = None,
        transport: TransportCapabilities | None = None,
    ) -> None:
        self.registry = registry
        #: What one connection may cost, and the HTTP timers (the front end reads
        #: ``idle_timeout`` and the idle caps; this object the rest).
        self.connection = connection
        #: The AG-UI wire of the streams ("auto": by each run input's protocolVersion).
        self.wire: WireChoice = connection.wire
        self.broker = broker
        #: What this server speaks, in its capabilities document.
        self.transport = transport or sse_transport()
        self.body_timeout = connection.body_timeout
        self.keepalive = connection.keepalive_seconds
        self.send_timeout = connection.send_timeout
        self.max_input_bytes = connection.max_input_bytes
        self.auth_token = auth_token
        self.cors_any = "*" in cors_origins
        self.cors_origins = frozenset(cors_origins)
        self.metrics = registry.metrics
        #: The latest run started here of each thread (newest last; at most
        #: MAX_RECONNECTABLE_THREADS): what CopilotKit's connect reattaches to while it runs.
        self.thread_runs: collections.OrderedDict[str, str] = collections.OrderedDict()

    @property
    def cors(self) -> bool:
        """Whether CORS is configured (OPTIONS answers preflights)."""
        return bool(self.cors_origins)

    # -- CORS ----------------------------------------------------------------------------

    def _origin_allowed(self, origin: str | None) -> bool:
        return origin is not None and (self.cors_any or origin in self.cors_origins)

    def cors_headers(self, origin: str | None) -> dict[str, str]:
        """The CORS headers every answer to ``origin`` carries (none for an origin not allowed)."""
        if not self._origin_allowed(origin):
            return {}
        return {
            "Access-Control-Allow-Origin": "*" if self.cors_any and not self.auth_token else str(origin),
            "Vary": "Origin",
            "Access-Control-Expose-Headers": (
                f"Retry-After, {RUN_ID_HEADER}, {RUN_KEY_HEADER}, {THREAD_ID_HEADER}, {HISTORY_TRIMMED_HEADER}, "
                f"{LIVE_RUN_HEADER}"
            ),
        }

    def preflight(self, origin: str | None) -> Answer:
        if not self._origin_allowed(origin):
            return Answer(403)
        return Answer(204, {
            "Access-Control-Allow-Methods": "POST, GET, PATCH, DELETE, OPTIONS",
            "Access-Control-Allow-Headers": (
                f"Content-Type, Accept, Authorization, Last-Event-ID, {RESUMABLE_HEADER}, {RUN_KEY_HEADER}"
            ),
            "Access-Control-Max-Age": str(CORS_MAX_AGE),
        })

    # -- requests ------------------------------------------------------------------------

    def principal(self, req: GatewayRequest) -> str | None:
        """The caller's principal: the application's (``authenticated``), else the bearer token's.
        Raises UnauthorizedError."""
        if req.authenticated:
            return req.principal
        return check_bearer(req.headers.get("Authorization"), self.auth_token)

    @staticmethod
    def caller(req: GatewayRequest, principal: str | None) -> Caller:
        """Who is asking: the request's principal and the run key it presents, if any."""
        return Caller(principal, req.headers.get(RUN_KEY_HEADER) or req.query.get(RUN_KEY_QUERY) or None)

    async def read_body(self, req: GatewayRequest, what: str = "the RunAgentInput", *, limit: int | None = None,
                        json_only: bool = True) -> bytes:
        """The whole body, checked: Content-Type JSON (415), the size limit while reading (413),
        within ``body_timeout`` (408). Raises those errors, UnreadableRequestError."""
        ctype = req.headers.get("Content-Type", "")
        if json_only and ctype.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaTypeError(f"Content-Type must be application/json, got {ctype[:MAX_ECHOED_HEADER_CHARS]!r}")
        check_content_encoding(req.headers.get("Content-Encoding"))
        limit = self.max_input_bytes if limit is None else limit
        if req.content_length is not None:
            check_body_size(req.content_length, limit, what=what)
        chunks: list[bytes] = []
        total = 0
        if req.chunks is None:
            return b""
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in req.chunks():
                    total += len(chunk)
                    check_body_size(total, limit, what=what)
                    chunks.append(chunk)
        except TimeoutError:
            raise RequestTimeoutError(
                f"the request body did not arrive within {self.body_timeout:g} s ({total} bytes came)"
            ) from None
        return b"".join(chunks)

    async def post(self, req: GatewayRequest) -> Answer | StreamStart:
        """``POST <path>``: start a run, or resume one (``Last-Event-ID``)."""
        try:
            principal = self.principal(req)
            body = await self.read_body(req)
            input = decode_run_input(body, max_bytes=self.max_input_bytes)
            CURRENT_RUN_ID.set(input.run_id)
            fmt = negotiate(req.headers.get("Accept"))
            last_event_id = req.headers.get("Last-Event-ID")
            # A client resuming now evidently resumes; otherwise it must say so.
            declared = req.headers.get(RESUMABLE_HEADER)
            resumable = bool(last_event_id) or (declared is not None and declared.strip().lower() not in NOT_RESUMABLE_VALUES)
            if last_event_id:
                sub, first = await self.registry.resume(
                    input.run_id, last_event_id, self.caller(req, principal), resumable=resumable, via="sse"
                )
            else:
                with incoming_trace(self.registry.observer, req.headers):  # the run continues the client's trace
                    run = await self.registry.start(
                        input, owner=principal, address=req.peer, key=self.caller(req, principal).key
                    )
                sub = self.registry.subscribe(run, 0, resumable=resumable)
                first = None
                self.thread_runs[input.thread_id] = input.run_id
                self.thread_runs.move_to_end(input.thread_id)
                if len(self.thread_runs) > MAX_RECONNECTABLE_THREADS:
                    self.thread_runs.popitem(last=False)
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return self._stream(sub, fmt, first, started=not last_event_id,
                            translate=wire_translator(wire_for(self.wire, input.protocol_version)))

    async def data_query(self, req: GatewayRequest, busy: Callable[[], contextlib.AbstractContextManager[None]] | None = None) -> Answer:
        """``POST <path>/data/query``: a component's data (transports/data.py does the work).
        ``busy``: what marks the connection as working (not idle) while the resolver runs."""
        try:
            principal = self.principal(req)
            body = await self.read_body(req, "the query")
            if self.broker is None:
                decode_query(body, max_bytes=self.max_input_bytes)  # a malformed body is still a 400
                raise UnknownResourceError("this gateway serves no data resources")
            with busy() if busy is not None else contextlib.nullcontext():
                answer = await self.broker.answer(body, principal, max_bytes=self.max_input_bytes)
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(200, {**_NO_STORE, "Content-Type": "application/json"}, answer)

    async def capabilities(self, req: GatewayRequest) -> Answer:
        """``GET <path>/capabilities``: the served agent's capabilities, this server's transport."""
        from .capabilities import served_capabilities

        try:
            self.principal(req)
            document = await served_capabilities(self.registry.agent, self.transport)
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(200, {**_NO_STORE, "Content-Type": "application/json"}, encode_capabilities(document))

    def only_get(self, req: GatewayRequest, what: str) -> Answer:
        """405 for another method than GET, saying which one reads ``what``."""
        answer = error_answer(MethodNotAllowedError(
            f"{req.method} {req.path}: {what} read with GET (nothing else is allowed here)"
        ), self.metrics)
        answer.headers["Allow"] = "GET, HEAD" + (", OPTIONS" if self.cors_origins or self.cors_any else "")
        return answer

    async def capabilities_method(self, req: GatewayRequest) -> Answer:
        return self.only_get(req, "the capabilities are")

    async def thread_method(self, req: GatewayRequest, thread_id: str | None = None) -> Answer:
        """Any other method on ``<path>/threads/<threadId>``: 405 saying which ones it takes."""
        answer = error_answer(MethodNotAllowedError(
            f"{req.method} {req.path}: a thread's history is read with GET, its title set with PATCH, "
            "the thread deleted with DELETE (nothing else is allowed here)"
        ), self.metrics)
        answer.headers["Allow"] = "GET, HEAD, PATCH, DELETE" + (", OPTIONS" if self.cors_origins or self.cors_any else "")
        return answer

    async def threads_list(self, req: GatewayRequest) -> Answer:
        """``GET <path>/threads[?limit=&cursor=&q=]``: the caller's threads, newest first."""
        try:
            principal = self.principal(req)
            page = await list_threads(
                self.registry, self.caller(req, principal), limit=req.query.get("limit"),
                cursor=req.query.get("cursor"), search=req.query.get("q"),
            )
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(200, {**_NO_STORE, "Content-Type": "application/json"}, msgspec.json.encode(page))

    async def thread_delete(self, req: GatewayRequest, thread_id: str) -> Answer:
        """``DELETE <path>/threads/<threadId>``: delete the caller's thread (204)."""
        try:
            principal = self.principal(req)
            await delete_thread(self.registry, thread_id, self.caller(req, principal))
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(204)

    async def thread_patch(self, req: GatewayRequest, thread_id: str) -> Answer:
        """``PATCH <path>/threads/<threadId>`` ``{"title": "..."}``: set the caller's thread's title."""
        try:
            principal = self.principal(req)
            body = await self.read_body(req, "the thread's title")
            try:
                doc = msgspec.json.decode(body)
            except msgspec.DecodeError as exc:
                raise BadThreadRequestError(f"the body is not JSON: {exc}") from None
            done = await rename_thread(self.registry, thread_id, doc, self.caller(req, principal))
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(200, {**_NO_STORE, "Content-Type": "application/json"}, msgspec.json.encode(done))

    # -- CopilotKit's runtime routes (transports/runtime_routes.py) --------------------

    async def runtime_connect(self, req: GatewayRequest) -> Answer | StreamStart:
        """``POST .../agent/<id>/connect``: the thread's kept history (its body: a RunAgentInput
        naming ``threadId``), compacted, as one SSE stream in the caller's wire; no event when
        there is none the caller may read (the thread is then new to the page)."""
        try:
            principal = self.principal(req)
            input = decode_run_input(await self.read_body(req), max_bytes=self.max_input_bytes)
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        translate = wire_translator(wire_for(self.wire, input.protocol_version))
        caller = self.caller(req, principal)
        kept: set[str] = set()
        try:
            found, payloads = await self.registry.thread_history(input.thread_id, caller=caller)
            # an errored run's still-open streams moved before its RUN_ERROR: a replayable stream
            payloads = replay_order(payloads)
            body = frame_sse(found.tip, 1, [translate(p) for p in payloads] if translate else payloads)
            kept = {r.run_id for r in found.runs}
        except UnknownThreadError:
            body = b""
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        # the thread's latest run, while it is not in the history yet (running): followed live
        live = await self._live_run(input.thread_id, kept, caller)
        if live is not None:
            try:
                sub = self.registry.subscribe(live, 0, resumable=True)
            except AguiEngineError:
                pass  # gone meanwhile: the history is all there is
            else:
                stream = self._stream(sub, "sse", None, translate=translate)
                stream.prefix = body
                return stream
        return Answer(200, {"Content-Type": SSE_CONTENT_TYPE, "Cache-Control": "no-cache"}, body)

    async def _live_run(self, thread_id: str, kept: set[str], caller: Caller) -> Run | None:
        """The thread's latest run that ``caller`` may follow and that is not in the history
        (``kept``): on whichever node it runs (a shared log names it), else the one this node
        remembers starting; None when there is none, or the log does not answer."""
        try:
            latest = await self.registry.live_run(thread_id) or self.thread_runs.get(thread_id)
            if latest is None or latest in kept:
                return None
            run = self.registry.check_owner(await self.registry.find(latest), caller)
        except AguiEngineError:
            return None  # not the caller's, gone, or the log is away: the history is all there is
        return run

    async def runtime_stop(self, req: GatewayRequest, thread_id: str) -> Answer:
        """``POST .../agent/<id>/stop/<threadId>`` with ``{runId}``: cancel that run of the thread
        (as ``DELETE <path>/runs/<runId>``: the caller must be its principal or hold its key).
        Answers ``{"stopped": bool}``: false when there was nothing of the caller's to stop."""
        try:
            principal = self.principal(req)
            raw = await self.read_body(req, what="the stop request")
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        try:
            asked = msgspec.json.decode(raw) if raw.strip() else {}
        except msgspec.DecodeError:
            asked = {}
        run_id = asked.get("runId") if isinstance(asked, dict) else None
        stopped = False
        if isinstance(run_id, str):
            caller = self.caller(req, principal)
            try:
                run = self.registry.check_owner(await self.registry.find(run_id), caller)
                if run.thread_id in ("", thread_id):  # "": a run another node started
                    await self.registry.cancel(run_id, caller=caller)
                    stopped = True
            except AguiEngineError:
                stopped = False
        return _json_answer({"stopped": stopped})

    async def get(self, req: GatewayRequest, run_id: str) -> Answer | StreamStart:
        """``GET <path>/runs/<runId>``: follow a run from ``Last-Event-ID`` / ``lastEventId``."""
        CURRENT_RUN_ID.set(run_id)
        try:
            principal = self.principal(req)
            fmt = negotiate(req.headers.get("Accept"))
            last_event_id = req.headers.get("Last-Event-ID") or req.query.get("lastEventId")
            # GET is the EventSource-style endpoint: an EventSource reconnects by
            # itself (and cannot send a header to say so), so it is resumable.
            sub, first = await self.registry.resume(
                run_id, last_event_id or None, self.caller(req, principal), resumable=True, via="sse"
            )
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        if first is not None and first.finished and not first.payloads:
            # Nothing after the cursor and the run is over: 204 tells an
            # EventSource to stop reconnecting (WHATWG), instead of looping.
            sub.close()
            return Answer(204)
        # the wire the run's input declared (a run another node started: its input is not here, 0.x)
        translate = wire_translator(wire_for(self.wire, sub.run.input.protocol_version))
        return self._stream(sub, fmt, first, translate=translate)

    async def thread(self, req: GatewayRequest, thread_id: str) -> Answer:
        """``GET <path>/threads/<threadId>[?runId=]``: the thread's compacted history, the
        branch ending at ``runId`` (default: its latest kept run), as a JSON array of
        events or, when Accept prefers it, length-prefixed protobuf frames."""
        try:
            principal = self.principal(req)
            fmt = negotiate_history(req.headers.get("Accept"))
            caller = self.caller(req, principal)
            found, payloads = await self.registry.thread_history(
                thread_id, run_id=req.query.get("runId") or None, caller=caller
            )
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        headers = {
            "Cache-Control": "no-store",
            THREAD_ID_HEADER: thread_id,
            RUN_ID_HEADER: found.tip,
            HISTORY_TRIMMED_HEADER: "true" if found.trimmed else "false",
        }
        live = await self._live_run(thread_id, {r.run_id for r in found.runs}, caller)
        if live is not None:
            headers[LIVE_RUN_HEADER] = live.run_id
        if fmt == "proto":
            headers["Content-Type"] = PROTO_CONTENT_TYPE
            return Answer(200, headers, frame_proto(payloads))
        headers["Content-Type"] = "application/json"
        return Answer(200, headers, b"[" + b",".join(payloads) + b"]")

    async def delete(self, req: GatewayRequest, run_id: str) -> Answer:
        """``DELETE <path>/runs/<runId>``: cancel a run at once."""
        CURRENT_RUN_ID.set(run_id)
        try:
            principal = self.principal(req)
            await self.registry.cancel(run_id, caller=self.caller(req, principal))
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(204)

    async def healthz(self, req: GatewayRequest) -> Answer:
        # Liveness: this process answers. Restarting it would not fix Redis.
        return _json_answer({"status": "ok"})

    def authorized(self, req: GatewayRequest) -> bool:
        """Whether the request holds a valid bearer token (always, when auth is off)."""
        try:
            self.principal(req)
        except AguiEngineError:
            return False
        return True

    async def readyz(self, req: GatewayRequest) -> Answer:
        ready = await self.registry.ready()
        if not self.authorized(req):
            # auth on and no valid token: ready or not (a load balancer's probe needs no more),
            # never the run counts or the MCP servers' ids and errors
            return _json_answer({"ready": ready}, 200 if ready else 503)
        doc: dict[str, Any] = {
            "ready": ready,
            "draining": self.registry.draining,
            "activeRuns": self.registry.active,
        }
        sources = tool_source_status(self.registry.agent)
        if sources:  # an MCP server that cannot be reached makes its tools absent, not the gateway unready
            doc["mcp"] = sources
        return _json_answer(doc, 200 if ready else 503)

    async def metrics_text(self, req: GatewayRequest) -> Answer:
        if self.metrics is None:
            return error_answer(RouteNotFoundError(f"{req.path}: this gateway keeps no metrics"))
        try:  # behind the bearer token when auth is on (a scraper sends it: bearer_token_file)
            self.principal(req)
        except AguiEngineError as exc:
            return error_answer(exc, self.metrics)
        return Answer(200, {"Content-Type": METRICS_CONTENT_TYPE, "Cache-Control": "no-store"}, self.metrics.render())

    # -- streams -------------------------------------------------------------------------

    def _stream(self, sub: Subscription, fmt: str, first: LogSlice | None, *, started: bool = False,
                translate: Callable[[bytes], bytes] | None = None) -> StreamStart:
        run = sub.run
        headers = {
            "Content-Type": STREAM_FORMATS[fmt][0],
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            RUN_ID_HEADER: run.run_id,
        }
        if started and run.key is not None:
            headers[RUN_KEY_HEADER] = run.key  # only to the client that started the run
        return StreamStart(headers, sub, fmt, first, translate)

    async def pump(self, stream: StreamStart, write: Callable[[bytes], Any]) -> None:
        """Write the stream's events until the run's last one (the shared hot loop of the
        HTTP streams): one ``await write(data)`` per ready batch, a keep-alive frame after
        ``keepalive_seconds`` of silence. ``translate`` applies to each encoded event first
        (the 0.x wire: ``protocol.wire.to_wire0``). The caller closes ``stream.sub``."""
        sub, fmt, translate, metrics = stream.sub, stream.fmt, stream.translate, self.metrics
        keepalive = self.keepalive
        run_id = sub.run.run_id
        sse = fmt == "sse"
        _, keepalive_frame, frame_one = STREAM_FORMATS[fmt]
        sl = stream.first
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

    async def shutdown(self) -> None:
        """End every run (``RUN_ERROR{shutdown}``) and close the resolver pools."""
        await self.registry.shutdown()
        if self.broker is not None:
            self.broker.close()


class AppKeywords(TypedDict, total=False):
    """The keyword arguments of the HTTP gateway's front ends, written once: aiohttp's
    ``create_app``, the ASGI ``create_asgi_app``, ``start_sse_server`` and FastAPI's
    ``add_agui_routes`` take ``**options: Unpack[AppKeywords]`` (checked by type checkers,
    completed by editors). Every setting is one keyword or one field of its concern's struct:

    ``path``: where the gateway is served (``"/"``; ``""`` to mount it; the ASGI app is served at
    its mount point). ``registry``: a :class:`~transports.runs.RunRegistry` shared with other
    transports, else one is built from ``options`` (limits and periods:
    :class:`~transports.registry_options.RegistryOptions`), ``log`` (the event log runs are
    resumed from), ``clock`` and ``metrics`` (a :class:`~transports.metrics.GatewayMetrics` to
    fill and serve at ``<path>/metrics``; a given ``registry`` brings its own).
    ``connection``: :class:`~transports.server_options.ConnectionOptions` (input size, send and
    HTTP timers, idle-connection caps, wire). ``data``:
    :class:`~transports.server_options.DataOptions` (the resources ``POST <path>/data/query``
    answers; default: the served agent's ``resources``; without any, every query answers 404).
    ``auth_token``: require ``Authorization: Bearer <token>``: one token, or a mapping token ->
    principal, which binds each run to the principal that started it (stream, resume and cancel
    answer 404 to others). ``cors_origins``: origins allowed by CORS (``"*"`` for any).
    ``inspector``: serve the inspector page at ``GET <path>/inspect``
    (:mod:`agui_engine.transports.inspector`). ``access_log``: one INFO line per request on the
    ``agui_engine.access`` logger (``<client> <method> <path> <status> run=<runId> <ms>ms``),
    refusals included. ``websocket``: a WebSocket server serves the same runs beside this app
    (it shares the ``registry``); said in ``GET <path>/capabilities`` (``transport.websocket``)."""

    path: str
    registry: RunRegistry | None
    options: RegistryOptions | None
    log: EventLog | None
    clock: Clock | None
    metrics: GatewayMetrics | None
    connection: ConnectionOptions | None
    data: DataOptions | None
    auth_token: str | Mapping[str, str] | None
    cors_origins: Sequence[str]
    inspector: bool
    access_log: bool
    websocket: bool


def check_keywords(where: str, keywords: Mapping[str, object]) -> None:
    """Raise TypeError for a keyword that is not one of :class:`AppKeywords` (a TypedDict is
    not checked at run time), saying which struct holds it when it is a setting of one."""
    for name in keywords:
        if name in AppKeywords.__annotations__:
            continue
        home = next((cls for cls in (ConnectionOptions, DataOptions) if name in cls.__struct_fields__), None)
        hint = f"; it is {home.__name__}.{name}: give {'connection' if home is ConnectionOptions else 'data'}=" \
               f"{home.__name__}({name}=...)" if home is not None else ""
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")


def build_gateway(agent: Agent | AgentFunction | None, *, where: str, **kw: Unpack[AppKeywords]) -> HttpGateway:
    """The gateway of ``agent`` (or of a shared ``registry``) with a front end's options
    (:class:`AppKeywords`; ``path``, ``inspector`` and ``access_log`` are the front end's own and
    not read here); ``where`` names the caller in errors. Raises UsageError when neither
    ``agent`` nor ``registry`` is given, TypeError for a keyword that is not one of them."""
    check_keywords(where, kw)
    registry = kw.get("registry")
    if registry is None:
        if agent is None:
            raise UsageError(f"{where} needs an agent or a registry")
        registry = RunRegistry(as_agent(agent, where=f"{where}(agent)"), options=kw.get("options"), log=kw.get("log"),
                               clock=kw.get("clock"), metrics=kw.get("metrics"))
    conn = kw.get("connection") or ConnectionOptions()
    dat = kw.get("data") or DataOptions()
    return HttpGateway(
        registry,
        connection=conn,
        auth_token=kw.get("auth_token"),
        cors_origins=kw.get("cors_origins", ()),
        broker=broker_for(registry.agent, dat.resources, queue_timeout=dat.query_queue_timeout),
        transport=sse_transport(websocket=kw.get("websocket", False)),
    )
