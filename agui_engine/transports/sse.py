"""AG-UI over HTTP: the SSE (and NDJSON) gateway server and the SSE client agent.

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

The stream handler is a loop over a :class:`~transports.runs.Subscription`:
every event that is ready is framed and the whole batch goes out in **one**
write; when nothing arrives for ``keepalive_seconds`` a comment line (``:
keep-alive``; a blank line in NDJSON) is written instead. A client that goes
away unsubscribes (the registry's grace period then applies); on shutdown the
registry ends every run with ``RUN_ERROR{code: "shutdown"}``, which each open
stream writes before it closes.

Client: :class:`SSEAgent` is an :class:`~agui_engine.protocol.agent.Agent` over httpx. It
POSTs the input, decodes the stream with the codec's EventStreamDecoder,
remembers the last event id, and when the connection drops before the terminal
event it POSTs again with ``Last-Event-ID`` (bounded retries, exponential backoff
with jitter) -- only with an id the server sent (or ``<runId>:0`` when the server gave
the run a run key): a server without ids is never asked to run the input twice, the
run ends with ``upstream_stopped`` (``retrying_client.unresumable``). Closing its generator early cancels the remote run (``DELETE``).
The reconnect loop is shared with WebSocketAgent (``RemoteClientBase.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import re
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

import httpx
import msgspec
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from agui_engine.genui.resources import Resource, ResourceRegistry, ResourceTimeoutError, UnknownResourceError
from agui_engine.loops.tool_runner import ToolRunner
from agui_engine.loops.tool_sources import tool_source_status
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.capabilities import AgentCapabilities, TransportCapabilities, encode_capabilities
from agui_engine.protocol.codec import (
    NDJSON_CONTENT_TYPE,
    SSE_CONTENT_TYPE,
    EventStreamDecoder,
    decode_event_list,
    encode_ndjson,
    encode_sse,
)
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError, RemoteInputError, UsageError
from agui_engine.protocol.events import AnyEvent, RunAgentInput, RunErrorEvent
from agui_engine.protocol.proto import (
    PROTO_CONTENT_TYPE,
    PROTO_KEEPALIVE_FRAME,
    ProtoDecodeError,
    ProtoEventDecoder,
    encode_proto_frame,
    proto_frame_from_json,
)

from .bearer_auth import check_bearer
from .capabilities import (
    CAPABILITIES_TIMEOUT_SECONDS,
    MAX_CAPABILITIES_BYTES,
    read_capabilities,
    served_capabilities,
    sse_transport,
)
from .clock import Clock
from .connection_gate import MAX_IDLE_CONNECTIONS, MAX_IDLE_CONNECTIONS_PER_IP, IdleConnectionGate, peer_address
from .data import (
    QUERY_QUEUE_TIMEOUT_SECONDS,
    QUERY_REQUEST_TIMEOUT_SECONDS,
    QueryRequest,
    ResourceBroker,
    broker_for,
    decode_query,
    query_error_from_body,
)
from .eventlog import EventLog, LogSlice
from .input_decoding import DEFAULT_MAX_BODY_BYTES, check_body_size, decode_run_input
from .input_errors import MethodNotAllowedError, NotAcceptableError, RequestTimeoutError, UnsupportedMediaTypeError
from .inspector import add_frontend_routes
from .listening_socket import LISTEN_BACKLOG, listening_socket, server_url
from .metrics import METRICS_CONTENT_TYPE
from .retrying_client import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_RETRIES,
    AttemptItem,
    ConnectionLostError,
    RemoteClientBase,
    media_type,
    remote_error_from_body,
)
from .runs import (
    DEFAULT_KEEPALIVE_SECONDS,
    Caller,
    RegistryOptions,
    RunRegistry,
    Subscription,
    event_id,
    resume_cursor,
)
from .send_stall import SEND_STALL_TIMEOUT_SECONDS, send_or_stall
from .server_handle import ServerHandle
from .server_options import ConnectionOptions, DataOptions, merge_options
from .tool_runner import STANDARD_TOOL_RUNNER

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "AppKeywords",
    "BODY_READ_CHUNK",
    "BODY_TIMEOUT_SECONDS",
    "CANCEL_REQUEST_TIMEOUT",
    "CORS_MAX_AGE",
    "DEFAULT_CONNECT_TIMEOUT",
    "HISTORY_REQUEST_TIMEOUT_SECONDS",
    "HISTORY_TRIMMED_HEADER",
    "HTTP_IDLE_TIMEOUT_SECONDS",
    "MAX_ECHOED_HEADER_CHARS",
    "MAX_HISTORY_RESPONSE_BYTES",
    "MAX_PARSER_MESSAGE_CHARS",
    "READABLE_CONTENT_ENCODINGS",
    "REGISTRY_KEY",
    "RESUMABLE_HEADER",
    "RUN_KEY_HEADER",
    "RUN_KEY_QUERY",
    "SHUTDOWN_TIMEOUT",
    "SSEAgent",
    "SSEServer",
    "STATUS_CLIENT_CLOSED",
    "THREAD_ID_HEADER",
    "UnreadableRequestError",
    "check_content_encoding",
    "create_app",
    "frame_ndjson",
    "frame_proto",
    "frame_sse",
    "negotiate",
    "negotiate_history",
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

_NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"})

#: Request header by which a client declares it will reconnect after a drop
#: (``Last-Event-ID``) and so wants the run kept for the grace period when its
#: connection goes. Without it (the official @ag-ui/client), closing the
#: connection stops the run: see RunRegistry.subscribe(resumable=...).
RESUMABLE_HEADER = "X-AGUI-Resumable"
_NOT_RESUMABLE = frozenset({"0", "false", "?0", "no"})

#: Response header of a run's start (the POST's 200) carrying its run key, and the
#: request header by which a client presents it to stream, resume or cancel the run
#: (spec/transports.md §2.6). RUN_KEY_QUERY is the same as a query parameter, for an
#: EventSource, which cannot send headers.
RUN_KEY_HEADER = "X-AGUI-Run-Key"
RUN_KEY_QUERY = "runKey"

#: Response headers of a thread history (``GET <path>/threads/<threadId>``): the branch's
#: last run goes in ``X-AGUI-Run-Id``; HISTORY_TRIMMED_HEADER is ``true`` when runs of the
#: branch are gone (evicted by the history budget) or kept trimmed (spec/transports.md §4.4).
HISTORY_TRIMMED_HEADER = "X-AGUI-History-Trimmed"
THREAD_ID_HEADER = "X-AGUI-Thread-Id"


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

#: Connect timeout of SSEAgent. Reads have no timeout: a run may be silent for
#: minutes (the server's keep-alive shows the connection is alive). 10 s lets
#: TCP retransmit a lost SYN three times (after 1, 3 and 7 s) plus a TLS
#: handshake; longer only delays the error when the server is really down.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: Seconds SSEAgent gives its DELETE of a run it abandons (the caller stopped
#: reading). Best effort while the caller is tearing down, so it must not hold
#: it up long; if it fails the server cancels the run after its grace period.
CANCEL_REQUEST_TIMEOUT = 2.0

#: Bytes of a thread history ``SSEAgent.history`` reads at most (then LimitExceededError).
#: A gateway keeps HISTORY_MAX_THREAD_BYTES (1 MiB) per thread by default and serves less
#: (inputs reduced to what is new); 16 MiB, the codec's frame limit, leaves room for a
#: gateway configured with a larger budget.
MAX_HISTORY_RESPONSE_BYTES = 16 * 1024 * 1024
#: Seconds ``SSEAgent.history`` (so ``Thread.restore``) waits for the whole history, connect to
#: last byte: a server that trickles its answer cannot hold a restore open (httpx's timeouts
#: bound each read, not the sum).
HISTORY_REQUEST_TIMEOUT_SECONDS = 30.0

#: Seconds aiohttp waits on shutdown for open handlers to finish (then cancels
#: them). Twice runs.CANCEL_WAIT_SECONDS: the registry first waits up to that for
#: agents to stop, then each stream still has to write its RUN_ERROR{shutdown};
#: well inside the 30 s an orchestrator (Kubernetes) grants before SIGKILL.
SHUTDOWN_TIMEOUT = 10.0


#: Characters of a client's Accept / Content-Type header quoted in a 406 / 415
#: message: any real value (< 100 characters) is shown whole so the client sees
#: what it sent, a hostile multi-KiB header is not reflected into the body / logs.
MAX_ECHOED_HEADER_CHARS = 200
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


#: RFC 9110 section 12.4.2: ``qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )``.
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


def _qvalue(text: str) -> float:
    """The weight of an Accept ``q`` parameter; 0 (the range is not acceptable) for
    anything outside RFC 9110's grammar: ``inf``, ``nan``, ``2``, ``-1``, ``1e0``."""
    return float(text) if _QVALUE.fullmatch(text) else 0.0


#: What a stream request (negotiate) and a history request (negotiate_history) can be answered
#: with: media type -> answer, in the order ties go (the textual default first, the binary
#: encoding last, so a bare wildcard never picks it).
_STREAM_KINDS: Mapping[str, str] = {
    SSE_CONTENT_TYPE: "sse",
    **dict.fromkeys(sorted(_NDJSON_TYPES), "ndjson"),
    PROTO_CONTENT_TYPE: "proto",
}
_HISTORY_KINDS: Mapping[str, str] = {
    "application/json": "json",
    PROTO_CONTENT_TYPE: "proto",
}


def _specificity(media_range: str, answer_type: str) -> int:
    """How specifically ``media_range`` names ``answer_type``: 3 exactly, 2 as ``type/*``,
    1 as ``*/*``, 0 not at all (RFC 9110 section 12.5.1)."""
    if media_range == answer_type:
        return 3
    if media_range == answer_type.partition("/")[0] + "/*":
        return 2
    return 1 if media_range == "*/*" else 0


def _accept_elements(accept: str) -> list[list[str]]:
    """An Accept header's elements, each as its media range then its parameters: split at
    the commas and semicolons outside quoted strings (RFC 9110 5.6.6: a parameter value may be
    a quoted string holding either, ``text/event-stream;note="a,b";q=0.1``)."""
    if '"' not in accept:  # the usual header: no quoted string, plain splits
        return [part.split(";") for part in accept.split(",")]
    elements: list[list[str]] = [[]]
    segment: list[str] = []
    quoted = escaped = False
    for ch in accept:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
            segment.append(ch)
        elif ch in ",;":
            elements[-1].append("".join(segment))
            segment = []
            if ch == ",":
                elements.append([])
        else:
            quoted = ch == '"'
            segment.append(ch)
    elements[-1].append("".join(segment))
    return elements


def _best(accept: str, kinds: Mapping[str, str], names: str) -> str:
    # RFC 9110 12.5.1: each media type we can answer with takes the q of the most specific
    # range that names it (``text/event-stream;q=0, */*`` refuses SSE, the wildcard does not
    # bring it back); the highest q wins; ties go in ``kinds``' order; q=0 is "not acceptable".
    weights: dict[str, tuple[int, float]] = {}  # media type -> (specificity, q)
    for media, *params in _accept_elements(accept):
        media = media.strip().lower()
        q = 1.0
        for param in params:
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "q":
                q = _qvalue(val.strip())
        for answer_type in kinds:
            level = _specificity(media, answer_type)
            if not level:
                continue
            held = weights.get(answer_type)
            if held is None or level > held[0] or (level == held[0] and q > held[1]):
                weights[answer_type] = (level, q)
    best_q = 0.0
    best = ""
    for answer_type, kind in kinds.items():  # in tie order: a later type must weigh strictly more
        q = weights.get(answer_type, (0, 0.0))[1]
        if q > best_q:
            best_q, best = q, kind
    if not best:
        raise NotAcceptableError(f"Accept {accept[:MAX_ECHOED_HEADER_CHARS]!r} admits none of {names}")
    return best


def negotiate(accept: str | None) -> str:
    """``"sse"``, ``"ndjson"`` or ``"proto"`` for an Accept header (RFC 9110 12.5.1: each
    type takes the q of the most specific range naming it, the highest q wins; SSE on ties,
    a bare wildcard and a missing header; a range whose q is outside RFC 9110's grammar
    counts as q=0). Raises NotAcceptableError."""
    names = f"{SSE_CONTENT_TYPE}, {NDJSON_CONTENT_TYPE}, {PROTO_CONTENT_TYPE}"
    return _best(accept, _STREAM_KINDS, names) if accept else "sse"


def negotiate_history(accept: str | None) -> str:
    """``"json"`` or ``"proto"`` for the Accept header of a thread history request
    (``GET <path>/threads/<threadId>``), by the same rules as :func:`negotiate`: JSON on
    ties, wildcards and a missing header. Raises NotAcceptableError."""
    return _best(accept, _HISTORY_KINDS, f"application/json, {PROTO_CONTENT_TYPE}") if accept else "json"


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
        max_body_bytes: int,
        auth_token: str | Mapping[str, str] | None,
        cors_origins: Sequence[str],
        send_timeout: float,
        body_timeout: float,
        broker: ResourceBroker | None = None,
        transport: TransportCapabilities | None = None,
    ) -> None:
        self.registry = registry
        self.broker = broker
        #: What this server speaks, in its capabilities document.
        self.transport = transport or sse_transport()
        self.body_timeout = body_timeout
        self.keepalive = keepalive_seconds
        self.send_timeout = send_timeout
        self.max_body_bytes = max_body_bytes
        self.auth_token = auth_token
        self.cors_any = "*" in cors_origins
        self.cors_origins = frozenset(cors_origins)
        self.metrics = registry.metrics

    # -- CORS ----------------------------------------------------------------------------

    def _origin_allowed(self, origin: str | None) -> bool:
        return origin is not None and (self.cors_any or origin in self.cors_origins)

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if self._origin_allowed(origin):
            response.headers["Access-Control-Allow-Origin"] = "*" if self.cors_any and not self.auth_token else origin  # type: ignore[assignment]
            response.headers["Vary"] = "Origin"
            response.headers["Access-Control-Expose-Headers"] = (
                f"Retry-After, X-AGUI-Run-Id, {RUN_KEY_HEADER}, {THREAD_ID_HEADER}, {HISTORY_TRIMMED_HEADER}"
            )

    async def preflight(self, request: web.Request) -> web.StreamResponse:
        if not self._origin_allowed(request.headers.get("Origin")):
            return web.Response(status=403)
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": "POST, GET, DELETE, OPTIONS",
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
            check_body_size(request.content_length, self.max_body_bytes, what=what)
        chunks: list[bytes] = []
        total = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.content.iter_chunked(BODY_READ_CHUNK):
                    total += len(chunk)
                    check_body_size(total, self.max_body_bytes, what=what)
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
            input = decode_run_input(body, max_bytes=self.max_body_bytes)
            _RUN_ID.set(input.run_id)
            fmt = negotiate(request.headers.get("Accept"))
            last_event_id = request.headers.get("Last-Event-ID")
            # A client resuming now evidently resumes; otherwise it must say so.
            declared = request.headers.get(RESUMABLE_HEADER)
            resumable = bool(last_event_id) or (declared is not None and declared.strip().lower() not in _NOT_RESUMABLE)
            if last_event_id:
                _, cursor = resume_cursor(last_event_id, input.run_id)
                run = self.registry.check_owner(await self.registry.find(input.run_id), _caller(request, principal))
                sub = self.registry.subscribe(run, cursor, resumable=resumable)
                first = await self._check(sub)
                if self.metrics is not None:
                    self.metrics.note_resume("sse")
            else:
                run = await self.registry.start(
                    input, owner=principal, address=peer_address(request.transport), key=_caller(request, principal).key
                )
                sub = self.registry.subscribe(run, 0, resumable=resumable)
                first = None
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        return await self._stream(request, sub, fmt, first, started=not last_event_id)

    async def data_query(self, request: web.Request) -> web.StreamResponse:
        """``POST <path>/data/query``: a component's data (transports/data.py does the work)."""
        try:
            principal = check_bearer(request.headers.get("Authorization"), self.auth_token)
            body = await self._read_body(request, "the query")
            if self.broker is None:
                decode_query(body, max_bytes=self.max_body_bytes)  # a malformed body is still a 400
                raise UnknownResourceError("this gateway serves no data resources")
            # While its resolver works the connection is not "idle" (IdleConnectionGate), as
            # while it streams a run: a slow resource must not count against the idle caps.
            gate = request.config_dict.get(_IDLE_GATE_KEY)
            if gate is not None:
                gate.running(request.protocol)
            try:
                answer = await self.broker.answer(body, principal, max_bytes=self.max_body_bytes)
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
        return self._only_get(request, "a thread's history is")

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
            cursor = 0
            last_event_id = request.headers.get("Last-Event-ID") or request.query.get("lastEventId")
            if last_event_id:
                _, cursor = resume_cursor(last_event_id, run_id)
            run = self.registry.check_owner(await self.registry.find(run_id), _caller(request, principal))
            # GET is the EventSource-style endpoint: an EventSource reconnects by
            # itself (and cannot send a header to say so), so it is resumable.
            sub = self.registry.subscribe(run, cursor, resumable=True)
            first = await self._check(sub)
            if last_event_id and self.metrics is not None:
                self.metrics.note_resume("sse")
        except AguiEngineError as exc:
            return _error_response(exc, self.metrics)
        if first is not None and first.finished and not first.payloads:
            # Nothing after the cursor and the run is over: 204 tells an
            # EventSource to stop reconnecting (WHATWG), instead of looping.
            sub.close()
            return web.Response(status=204)
        return await self._stream(request, sub, fmt, first)

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
            "X-AGUI-Run-Id": found.tip,
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

    async def _check(self, sub: Subscription) -> LogSlice | None:
        # Validate a resume cursor before the 200 goes out, so that an expired
        # cursor is a 410 answer and not a broken stream.
        try:
            return await sub.next(timeout=0.0)
        except BaseException:
            sub.close()
            raise

    async def _stream(
        self, request: web.Request, sub: Subscription, fmt: str, first: LogSlice | None, *, started: bool = False
    ) -> web.StreamResponse:
        run = sub.run
        headers = {
            "Content-Type": _FORMATS[fmt][0],
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-AGUI-Run-Id": run.run_id,
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

            await _pump(write, sub, fmt, self.keepalive, first, self.metrics)
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
    write: Any, sub: Subscription, fmt: str, keepalive: float, first: LogSlice | None, metrics: GatewayMetrics | None
) -> None:
    """Write the subscription's events until the run's last one (the shared hot
    loop of the HTTP streams): one ``write`` per ready batch."""
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
            if sse:
                data = frame_sse(run_id, sl.first_seq, sl.payloads)
            else:
                data = frame_ndjson(sl.payloads) if fmt == "ndjson" else frame_proto(sl.payloads)
            await write(data)
            if metrics is not None:
                metrics.note_sent(fmt, len(sl.payloads), len(data))
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
    agent: Agent | AgentFunction | None = None,
    *,
    path: str = "/",
    registry: RunRegistry | None = None,
    options: RegistryOptions | None = None,
    log: EventLog | None = None,
    clock: Clock | None = None,
    metrics: GatewayMetrics | None = None,
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
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
    :class:`~transports.runs.RegistryOptions`), ``log`` and ``clock`` build the
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
    (:class:`~transports.server_options.ConnectionOptions`: ``max_body_bytes`` is its
    ``max_input_bytes``; :class:`~transports.server_options.DataOptions`); the keywords
    fill them, and a setting given both ways is a UsageError. ``websocket``: a WebSocket
    server serves the same runs beside this app (it shares the ``registry``); said in
    ``GET <path>/capabilities`` (``transport.websocket``).

    Run it with ``handler_cancellation=True`` (as :func:`start_sse_server` does)
    so a client disconnect is noticed at once; otherwise it is noticed at the
    next write (at the latest one keep-alive interval later).
    Raises UsageError when neither ``agent`` nor ``registry`` is given.
    """
    if registry is None:
        if agent is None:
            raise UsageError("create_app needs an agent or a registry")
        registry = RunRegistry(as_agent(agent, where="create_app(agent)"), options=options, log=log, clock=clock, metrics=metrics)
    conn = merge_options(
        ConnectionOptions, connection, where="create_app", max_input_bytes=max_body_bytes, send_timeout=send_timeout
    )
    dat = merge_options(
        DataOptions, data, where="create_app", resources=resources, query_queue_timeout=query_queue_timeout
    )
    max_body_bytes = conn.max_input_bytes
    gw = _Gateway(
        registry,
        keepalive_seconds=keepalive_seconds,
        max_body_bytes=max_body_bytes,
        auth_token=auth_token,
        cors_origins=cors_origins,
        send_timeout=conn.send_timeout,
        body_timeout=body_timeout,
        broker=broker_for(registry.agent, dat.resources, queue_timeout=dat.query_queue_timeout),
        transport=sse_transport(websocket=websocket),
    )
    # client_max_size is aiohttp's own cap for request.read(); the body is read
    # by _read_body, which enforces max_body_bytes with a JSON 413.
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_access_log] if access_log else [])
    app[REGISTRY_KEY] = registry
    runs = path.rstrip("/") + "/runs/{run_id}"
    app.router.add_post(path, gw.post)
    app.router.add_get(runs, gw.get)
    app.router.add_delete(runs, gw.delete)
    base = path.rstrip("/")
    threads = base + "/threads/{thread_id}"
    app.router.add_get(threads, gw.thread)
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
        app.router.add_route("OPTIONS", capabilities, gw.preflight)
        app.on_response_prepare.append(gw.on_prepare)
    app.router.add_route("*", capabilities, gw.capabilities_method)  # after GET (and OPTIONS): the rest
    app.router.add_route("*", threads, gw.thread_method)
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
    max_body_bytes: int
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


def _gate_connections(server: web.Server | None, gate: IdleConnectionGate) -> None:
    """Route aiohttp's per-connection callbacks through ``gate``: every new
    connection is admitted (or refused) when it is made, forgotten when it is lost."""
    assert server is not None  # set by runner.setup()
    made, lost = server.connection_made, server.connection_lost

    def connection_made(handler: Any, transport: asyncio.Transport) -> None:
        made(handler, transport)
        if type(handler) is RequestHandler:  # aiohttp's class has __slots__: no per-instance override
            handler.__class__ = _GatewayRequestHandler
        gate.admit(handler, transport)

    def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
        gate.closed(handler)
        lost(handler, exc)

    server.connection_made = connection_made  # type: ignore[method-assign]
    server.connection_lost = connection_lost  # type: ignore[method-assign]


class _GatewayRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering a request it could not parse the
    gateway's way (the server's connections are switched to it when made: see
    _gate_connections). A 4xx from its HTTP parser (a header over its limits, a
    Content-Encoding it cannot decode, such as ``br`` without Brotli) is a JSON 400
    ``unreadable_request`` logged as one INFO line, not a plain-text answer and an
    ERROR traceback. A 5xx (a handler that raised) keeps aiohttp's answer and its
    logged traceback: that is the server's failure, not the client's."""

    __slots__ = ()

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
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
        self, runner: web.AppRunner, url: str, registry: RunRegistry | None, gate: IdleConnectionGate | None = None
    ) -> None:
        self.runner = runner
        self.url = url
        self.registry = registry
        #: The cap on connections that run nothing (counts, refusals).
        self.gate = gate

    async def close(self) -> None:
        """Graceful shutdown: open streams get ``RUN_ERROR{code: "shutdown"}``, then close."""
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
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        # aiohttp's connection timer runs from connect and from the end of each
        # response, and closes a connection whose next request's headers are not
        # complete by then: the headers timeout and the idle keep-alive in one.
        keepalive_timeout=idle_timeout,
    )
    await runner.setup()
    _gate_connections(runner.server, gate)
    sock = listening_socket(host, port)  # sheds connections when descriptors run out
    # The site's own backlog (aiohttp's default: 128) is what counts: asyncio's
    # create_server calls listen() again with it, replacing any earlier listen().
    site = web.SockSite(runner, sock, backlog=LISTEN_BACKLOG)
    await site.start()
    return SSEServer(runner, server_url("http", sock), app.get(REGISTRY_KEY), gate)


# ---------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------

@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process: building it (loading the CA
    bundle) costs ~150 ms, which every new client would otherwise pay -- per run and per
    query -- blocking the event loop meanwhile."""
    return httpx.create_ssl_context()


class _QueryAnswerDoc(msgspec.Struct):
    """A 200 query answer as a client reads it (only ``data`` matters)."""

    data: Any = None


class _SSESession:
    """What one SSEAgent run holds: the HTTP client, and the run key the server
    answered its start with (None until then, or from a server without run keys)."""

    __slots__ = ("client", "key")

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.key: str | None = None


class SSEAgent(RemoteClientBase):
    """A remote AG-UI endpoint (HTTP + SSE) as an :class:`~agui_engine.protocol.agent.Agent`.

    ``run(input)`` raises, before its first event, :class:`~transports.retrying_client.RemoteAgentError`
    (the server refused: status + remote error code) or
    :class:`~transports.retrying_client.ConnectionLostError` (unreachable). After the
    first event it never raises (Agent contract): a drop is resumed with
    ``Last-Event-ID`` (an id the server sent; none: ``UpstreamStoppedError``) up to ``max_retries`` times (backoff: see
    :class:`~transports.retrying_client.RetryPolicy`), and when that fails the stream ends
    with ``RUN_ERROR`` carrying the error's code (``connection_lost``,
    ``cursor_expired`` ...). Closing the generator early cancels the remote run
    (``DELETE <url>/runs/<runId>``). The stream is decoded by the codec's
    :class:`~agui_engine.protocol.codec.EventStreamDecoder` (a bad frame is an
    EventDecodeError naming its frame index and byte offset; ``THINKING_*`` events
    of older servers are mapped to ``REASONING_*``). With ``binary=True`` it asks for the
    protobuf encoding and decodes it with :class:`~agui_engine.protocol.proto.ProtoEventDecoder`
    (resume positions counted in frames). The loop itself is
    :meth:`RemoteClientBase.run <transports.retrying_client.RemoteClientBase.run>`.
    """

    #: The runner a :class:`~agui_engine.loops.thread.Thread` over this client runs its sync
    #: client tools with (the standard one: worker threads).
    tool_runner: ToolRunner = STANDARD_TOOL_RUNNER

    _drops = (httpx.TransportError,)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        client: httpx.AsyncClient | None = None,
        tolerant: bool = False,
        binary: bool = False,
    ) -> None:
        super().__init__(
            url, headers=headers, max_retries=max_retries, backoff_initial=backoff_initial, backoff_max=backoff_max
        )
        self.connect_timeout = connect_timeout
        self.tolerant = tolerant
        #: ask for the binary encoding (``Accept: application/vnd.ag-ui.event+proto``); the
        #: answer's Content-Type decides the decoder, so an SSE-only server still works
        self.binary = binary
        self._client = client

    async def history(
        self, thread_id: str, *, run_id: str | None = None, run_key: str | None = None,
        timeout: float = HISTORY_REQUEST_TIMEOUT_SECONDS,
    ) -> list[AnyEvent]:
        """The thread's compacted history from the gateway (``GET <url>/threads/<threadId>``):
        the branch ending at ``run_id`` (default: the latest run), as events, protobuf when
        ``binary``. Presents ``run_key`` (else the key of the thread's latest run started by
        this agent) for a gateway without per-client tokens; a key given here is remembered
        for the thread's next run. Raises RemoteAgentError (404 ``unknown_thread``: no
        history, or not yours), ConnectionLostError (unreachable, or the whole answer not in
        within ``timeout`` seconds), LimitExceededError (over
        MAX_HISTORY_RESPONSE_BYTES), EventDecodeError / ProtoDecodeError (a bad answer; an
        event type unknown to this version too, unless the agent is ``tolerant``: then the JSON
        one is kept as an UnknownEvent and the protobuf one dropped, as on a run's stream)."""
        from urllib.parse import quote

        url = self.url.rstrip("/") + "/threads/" + quote(thread_id, safe="")
        key = run_key or self.thread_key(thread_id)
        headers = {**self.headers, "Accept": PROTO_CONTENT_TYPE if self.binary else "application/json"}
        if key:
            headers[RUN_KEY_HEADER] = key
        try:
            async with asyncio.timeout(timeout):
                status, content_type, body = await self._get_bounded(
                    url, headers, MAX_HISTORY_RESPONSE_BYTES,
                    httpx.Timeout(timeout, connect=self.connect_timeout),
                    params={"runId": run_id} if run_id else None,
                )
        except TimeoutError:
            raise ConnectionLostError(
                f"GET {url}: the history did not arrive within {timeout:g} s (HISTORY_REQUEST_TIMEOUT_SECONDS)"
            ) from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"cannot reach {url} ({type(exc).__name__})") from None
        if len(body) > MAX_HISTORY_RESPONSE_BYTES:
            raise LimitExceededError(f"GET {url}: the history is over {MAX_HISTORY_RESPONSE_BYTES} bytes (MAX_HISTORY_RESPONSE_BYTES)")
        if status != 200:
            raise remote_error_from_body(status, body, where=f"GET {url}", content_type=content_type)
        if key and run_key:
            self.remember_thread_key(thread_id, key)
        if media_type(content_type) == PROTO_CONTENT_TYPE:
            frames = ProtoEventDecoder(tolerant=self.tolerant)
            events = frames.feed(body)
            frames.close()
            return list(events)
        return decode_event_list(body, where=f"GET {url}", tolerant=self.tolerant)

    async def query(self, resource_id: str, params: Any = None, *, timeout: float = QUERY_REQUEST_TIMEOUT_SECONDS) -> Any:
        """A resource's data: ``POST <url>/data/query {resourceId, params}``.

        Returns the decoded ``data``. Raises the typed errors of
        :mod:`agui_engine.genui.resources` for the server's refusals (UnknownResourceError 404,
        ResourceParamsError 422 with ``path``, ResourcePermissionError 403,
        ResourceBusyError 503, ResourceTimeoutError 504, ResourceFailedError /
        ResourceResultTooLargeError 502), RemoteAgentError for any other refusal (401,
        400, 413 ...), ConnectionLostError when the server cannot be reached, and
        ResourceTimeoutError when no answer comes within ``timeout`` seconds.
        """
        url = self.url.rstrip("/") + "/data/query"
        body = msgspec.json.encode(QueryRequest(resource_id=resource_id, params={} if params is None else params))
        headers = {**self.headers, "Content-Type": "application/json", "Accept": "application/json"}
        try:
            async with self._one_client() as client:
                resp = await client.post(
                    url, content=body, headers=headers, timeout=httpx.Timeout(timeout, connect=self.connect_timeout)
                )
        except httpx.TimeoutException:
            raise ResourceTimeoutError(f"POST {url}: no answer to the query of {resource_id} within {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"cannot reach {url} ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise query_error_from_body(resp.status_code, resp.content, where=f"POST {url}")
        try:
            return msgspec.json.decode(resp.content, type=_QueryAnswerDoc).data
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise RemoteInputError(f"POST {url}: not a query answer {{resourceId, data}}: {exc}") from None

    async def capabilities(self, *, timeout: float = CAPABILITIES_TIMEOUT_SECONDS) -> AgentCapabilities:
        """The remote agent's capabilities: ``GET <url>/capabilities`` (with this agent's
        headers: its bearer token). A server without that route (404 or 405: an AG-UI server
        that does not serve them) declares nothing: ``AgentCapabilities()``.

        Raises RemoteAgentError for any other refusal (401, 502 ...) and for a 200 that is not
        JSON, ConnectionLostError when the server cannot be reached or does not answer within
        ``timeout`` seconds, LimitExceededError past ``MAX_CAPABILITIES_BYTES`` (read no
        further), CapabilitiesDecodeError for a document that is not an AgentCapabilities
        (with its JSON path)."""
        url = self.url.rstrip("/") + "/capabilities"
        where = f"GET {url}"
        headers = {**self.headers, "Accept": "application/json"}
        try:
            async with asyncio.timeout(timeout):
                # past MAX_CAPABILITIES_BYTES nothing more is read, and read_capabilities refuses it
                status, content_type, body = await self._get_bounded(
                    url, headers, MAX_CAPABILITIES_BYTES, httpx.Timeout(timeout)
                )
        except TimeoutError:
            raise ConnectionLostError(f"{where}: no answer within {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"{where}: cannot reach the server ({type(exc).__name__})") from None
        if status in (404, 405):
            return AgentCapabilities()
        if status != 200 or media_type(content_type) != "application/json":
            raise remote_error_from_body(status, body, where=where, content_type=content_type)
        return read_capabilities(body, where=where)

    async def _get_bounded(
        self, url: str, headers: Mapping[str, str], limit: int, timeout: httpx.Timeout, *, params: Any = None
    ) -> tuple[int, str | None, bytes]:
        """``GET url``: (status, Content-Type, body); the body is read up to just past
        ``limit`` bytes and no further (a longer body comes back longer than ``limit``).
        Raises httpx.TransportError."""
        body = bytearray()
        async with self._one_client() as client:
            async with client.stream("GET", url, params=params, headers=headers, timeout=timeout) as resp:
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        break
        return resp.status_code, resp.headers.get("content-type"), bytes(body)

    @contextlib.asynccontextmanager
    async def _one_client(self) -> AsyncIterator[httpx.AsyncClient]:
        """The given client, or one made for a single request and closed after it."""
        if self._client is not None:
            yield self._client
            return
        async with httpx.AsyncClient(verify=_ssl_context()) as client:
            yield client

    def _runs_url(self, run_id: str) -> str:
        from urllib.parse import quote

        return self.url.rstrip("/") + "/runs/" + quote(run_id, safe="")

    async def _open(self) -> _SSESession:
        return _SSESession(
            self._client
            or httpx.AsyncClient(timeout=httpx.Timeout(None, connect=self.connect_timeout), verify=_ssl_context())
        )

    async def _close(self, session: _SSESession) -> None:
        if self._client is None:
            await session.client.aclose()

    def _keyed(self, session: _SSESession) -> dict[str, str]:
        # The run key the server gave this run (RUN_KEY_HEADER) goes with its resume and cancel.
        return {**self.headers, RUN_KEY_HEADER: session.key} if session.key else dict(self.headers)

    def _keeps_runs(self, session: _SSESession) -> bool:
        return session.key is not None  # our gateway's RUN_KEY_HEADER: the run is kept for a resume

    async def _cancel(self, session: _SSESession, run_id: str) -> None:
        # Cancel now rather than leaving the run to the server's grace period.
        try:
            await session.client.delete(self._runs_url(run_id), headers=self._keyed(session), timeout=CANCEL_REQUEST_TIMEOUT)
        except (httpx.HTTPError, RuntimeError):
            pass

    async def _attempt(
        self, session: _SSESession, input: RunAgentInput, last_id: str | None
    ) -> AsyncIterator[AttemptItem]:
        # It reconnects with Last-Event-ID after a drop, so it asks the server to
        # keep the run for the grace period rather than stop it on a disconnect.
        accept = f"{PROTO_CONTENT_TYPE}, {SSE_CONTENT_TYPE};q=0.5" if self.binary else SSE_CONTENT_TYPE
        headers = {**self._keyed(session), "Content-Type": "application/json", "Accept": accept, RESUMABLE_HEADER: "1"}
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        elif session.key is None and (prior := self.thread_key(input.thread_id)) is not None:
            # a run key of the thread's previous run: the new run joins that thread's history
            headers[RUN_KEY_HEADER] = prior
        body = msgspec.json.encode(input)
        async with session.client.stream("POST", self.url, content=body, headers=headers) as resp:
            content_type = resp.headers.get("content-type")
            if resp.status_code != 200:
                raw = await resp.aread()
                raise remote_error_from_body(resp.status_code, raw, where=f"POST {self.url}", content_type=content_type)
            binary = self.binary and media_type(content_type) == PROTO_CONTENT_TYPE
            if media_type(content_type) != SSE_CONTENT_TYPE and not binary:
                # not an AG-UI endpoint (a web page, a JSON API): refused, never retried
                raise remote_error_from_body(200, b"", where=f"POST {self.url}", content_type=content_type or "no content type")
            session.key = resp.headers.get(RUN_KEY_HEADER) or session.key
            if session.key is not None:
                self.remember_thread_key(input.thread_id, session.key)
            yield None
            if binary:
                # No ids on a binary stream: the n-th frame after cursor c is event c + n.
                cursor = 0 if last_id is None else resume_cursor(last_id, input.run_id)[1]
                frames = ProtoEventDecoder(tolerant=self.tolerant)
                async for chunk in resp.aiter_raw():
                    events = frames.feed(chunk)
                    if events:
                        yield event_id(input.run_id, cursor + frames.frames_decoded), events
                try:
                    frames.close()
                except ProtoDecodeError as exc:
                    if exc.code != "truncated_protobuf":
                        raise
                    # an unfinished last frame is a drop, as an unfinished SSE event is: resumed
                return
            decoder = EventStreamDecoder("sse", tolerant=self.tolerant)
            async for chunk in resp.aiter_raw():
                events = decoder.feed(chunk)
                if events:
                    # Every frame of this server carries an id, so the decoder's
                    # last event id is the id of the batch's last event.
                    yield decoder.last_event_id, events
            decoder.close()  # an incomplete last frame is discarded (WHATWG): a drop
