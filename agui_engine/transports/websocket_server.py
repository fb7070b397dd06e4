"""AG-UI over WebSocket (on the ``websockets`` library), the server.

Theory of operation
-------------------
One connection carries any number of runs. The messages are the Structs of
:mod:`~agui_engine.transports.envelope`, which this server and the client,
:class:`~transports.websocket_client.WebSocketAgent`, both encode and decode. Client -> server, one JSON text message each::

    {"type": "run",    "input": <RunAgentInput>}
    {"type": "cancel", "runId": "..."}
    {"type": "resume", "runId": "...", "lastEventId": "<runId>:<seq>"}
    {"type": "query",  "queryId": "...", "resourceId": "...", "params": {...}}

Server -> client: text messages made of one or more *lines* (newline-separated
JSON objects; several lines when several events were ready at once -- write
coalescing; connect with ``?batch=0`` to get exactly one line per message)::

    {"id": "<runId>:<seq>", "event": {...AG-UI event...}}
    {"runId": "...", "error": {"code": "...", "message": "...", "status": 4xxx}}
    {"queryId": "...", "result": <data>}  /  {"queryId": "...", "error": {...}}

A ``query`` asks for a resource's data (``transports/data.py``, the same code as the SSE
gateway's ``POST <path>/data/query``; the connection's principal is the identity); it
runs in its own task, so a slow resolver holds up neither the runs nor other queries.

An error line tied to a run carries its ``runId``; an error about a message
that names no run (malformed JSON, unknown type) has none. ``status`` is the
error's application code (4000-4999, see ``spec/transports.md``). Per-message
errors never close the connection, but after MAX_BAD_MESSAGES malformed
messages in a row the server closes it with 4400.

Each run started or resumed on a connection is a
:class:`~transports.subscription.Subscription` pumped by its own task; when the
connection drops, its subscriptions close and the registry's grace period
applies, so a client that reconnects quickly can ``resume``. Keep-alive is the
WebSocket ping/pong (``ping_interval``); authentication happens in the opening
handshake (``Authorization: Bearer`` header, or ``?access_token=`` for browsers,
which cannot set headers): a refused handshake is an HTTP 401 with a JSON body.
Messages over ``max_input_bytes`` close the connection with 1009 (the library's
check). Compression is off: it costs ~50 KiB per connection and AG-UI frames
are small.

Backpressure: a pump awaits ``send``, which waits while the connection's write
buffer is over its high-water mark; the run's event log is the buffer, so a
slow client that falls out of the log gets a ``cursor_expired`` error line for
that run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import websockets
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from agui_engine.genui.resources import UnknownResourceError
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.errors import WS_CLOSE_BAD_INPUT, AguiEngineError, CapacityError, RemoteInputError, UsageError

from .admission import Caller
from .bearer_auth import UnauthorizedError, check_bearer
from .capabilities import WEBSOCKET_TRANSPORT, served_capabilities
from .clock import Clock
from .connection_gate import IdleConnectionGate, peer_address
from .data import ResourceBroker, broker_for
from .envelope import (
    CancelMessage,
    CapabilitiesMessage,
    EventLines,
    QueryMessage,
    RunMessage,
    ThreadsMessage,
    capabilities_line,
    decode_client_message,
    error_line,
    keyed_event_line,
    message_query_id,
    message_run_id,
    query_result_line,
)
from .eventlog import EventLog, UnknownRunError
from .input_decoding import check_input_depth, decode_run_input
from .input_errors import InputTooDeepError
from .listening_socket import LISTEN_BACKLOG, listening_socket, server_url
from .registry_options import CANCEL_WAIT_SECONDS, RegistryOptions
from .runs import RunRegistry
from .send_stall import send_or_stall
from .server_handle import ServerHandle
from .server_options import ConnectionOptions, DataOptions
from .subscription import Subscription
from .thread_api import answer_threads_message

if TYPE_CHECKING:
    from .metrics import GatewayMetrics

__all__ = [
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_PING_TIMEOUT",
    "DEFAULT_WRITE_LIMIT",
    "MAX_BAD_MESSAGES",
    "MAX_QUERIES_PER_CONNECTION",
    "MAX_RUNS_PER_CONNECTION",
    "WS_CLOSE_TOO_MANY_BAD_MESSAGES",
    "WS_CLOSE_TOO_MANY_RUNS",
    "WS_OPEN_TIMEOUT_SECONDS",
    "WebSocketServer",
    "start_websocket_server",
]

_log = logging.getLogger("agui_engine.transports")


#: Ping interval and pong timeout (seconds). The websockets default (20 s) is
#: below the 30-60 s idle timeouts of common proxies and load balancers.
DEFAULT_PING_INTERVAL = 20.0
DEFAULT_PING_TIMEOUT = 20.0

#: Seconds from TCP connect to a completed opening handshake (websockets'
#: ``open_timeout``, passed explicitly): a client that sends nothing or trickles
#: its upgrade request is closed after it. 10 s (the library's default) is ample
#: for one HTTP request even over a slow mobile link.
WS_OPEN_TIMEOUT_SECONDS = 10.0

#: Malformed messages in a row before the connection is closed (4400). A client
#: that sends this many in a row is broken; answering each forever costs the
#: server for nothing.
MAX_BAD_MESSAGES = 16

#: Runs one connection may have in flight. A UI rarely has more than a handful;
#: 64 bounds what one connection can make the server hold.
MAX_RUNS_PER_CONNECTION = 64

#: Data queries one connection may have in flight (answers not yet sent). A page of
#: cards queries a few resources at once; 64 (MAX_RUNS_PER_CONNECTION's figure) bounds
#: the tasks one connection can make the server hold while resolvers are slow.
MAX_QUERIES_PER_CONNECTION = 64

#: Incoming frames the websockets library buffers per connection before it stops
#: reading the socket (its high-water mark; it resumes at a quarter). Client
#: messages (run / cancel / resume) are handled as they arrive, so the buffer only
#: fills when a client floods; then TCP pushes back on that client. 16 (the
#: library's default) lets a UI pipeline a burst of cancels without a stall.
#: Worst case per connection: DEFAULT_MAX_QUEUE frames of at most ``max_input_bytes``.
DEFAULT_MAX_QUEUE = 16

#: Bytes of outgoing data the transport may hold before ``send()`` waits for the
#: socket to drain (high-water mark; writing resumes at a quarter). The library's
#: default; since every send is at most one coalesced read (eventlog.READ_MAX_BYTES),
#: a client that stops reading costs the server at most ~READ_MAX_BYTES + this in
#: buffers, and its backlog stays in the run's bounded log instead.
DEFAULT_WRITE_LIMIT = 32 * 1024

WS_CLOSE_TOO_MANY_BAD_MESSAGES = WS_CLOSE_BAD_INPUT
#: A connection asked for more than MAX_RUNS_PER_CONNECTION runs (HTTP 429's
#: number in the application range, like the other 4xxx codes).
WS_CLOSE_TOO_MANY_RUNS = 4429
#: A binary message: this protocol is JSON text only (RFC 6455 "unsupported data").
_CLOSE_UNSUPPORTED_DATA = 1003


class _TooManyRuns(CapacityError):
    http_status = 429
    ws_close_code = WS_CLOSE_TOO_MANY_RUNS
    default_code = "too_many_runs"


class _TooManyQueries(CapacityError):
    http_status = 429
    ws_close_code = WS_CLOSE_TOO_MANY_RUNS
    default_code = "too_many_queries"


#: Error codes that count as a malformed message (towards MAX_BAD_MESSAGES).
_MALFORMED_CODES = frozenset({"malformed_json", "bad_input", "invalid_input", "limit_exceeded", "input_too_deep"})


class _GatedConnection(ServerConnection):
    """A server connection admitted by its server's IdleConnectionGate when the TCP
    connection is made (before the handshake is read) and forgotten when lost;
    ``gate`` is set on a per-server subclass (see start_websocket_server)."""

    gate: IdleConnectionGate

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.gate.admit(self, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.closed(self)
        super().connection_lost(exc)


class _Connection:
    def __init__(
        self,
        ws: ServerConnection,
        registry: RunRegistry,
        max_input_bytes: int,
        send_timeout: float,
        principal: str | None,
        broker: ResourceBroker | None = None,
        gate: IdleConnectionGate | None = None,
    ) -> None:
        self.ws = ws
        self.broker = broker
        #: Data queries being answered (each its own task).
        self.queries: set[asyncio.Task[None]] = set()
        #: The cap on connections that run nothing: told when this connection's
        #: first run starts and when its last one ends.
        self.gate = gate
        #: Who authenticated this connection (check_bearer): its runs are bound to it.
        self.principal = principal
        self.registry = registry
        self.max_input_bytes = max_input_bytes
        self.send_timeout = send_timeout
        query = parse_qs(urlsplit(ws.request.path).query) if ws.request is not None else {}
        self.batch = query.get("batch", ["1"])[0] != "0"
        self.pumps: dict[str, asyncio.Task[None]] = {}
        #: Run keys of the runs this connection streams (started here, or resumed with
        #: their key): a ``cancel`` for one of them needs not repeat the key.
        self.keys: dict[str, str] = {}

    async def send_lines(self, lines: list[bytes]) -> None:
        if self.batch:
            await self.ws.send(b"\n".join(lines), text=True)
        else:
            for line in lines:
                await self.ws.send(line, text=True)

    async def serve(self) -> None:
        bad = 0
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    await self.ws.close(_CLOSE_UNSUPPORTED_DATA, "binary messages are not supported; send JSON text")
                    return
                ok = await self.handle(message)
                bad = 0 if ok else bad + 1
                if bad >= MAX_BAD_MESSAGES:
                    await self.ws.close(WS_CLOSE_TOO_MANY_BAD_MESSAGES, f"{bad} malformed messages in a row")
                    return
        except websockets.ConnectionClosed:
            pass
        finally:
            tasks = [*self.pumps.values(), *self.queries]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def handle(self, message: str) -> bool:
        """Serve one message; False when it was malformed."""
        try:
            # Bounded depth first: the envelope decoders recurse like any msgspec decode.
            check_input_depth(message, where="the message")
            msg = decode_client_message(message)
            if isinstance(msg, QueryMessage):
                self._in_task(self._answer(msg))
            elif isinstance(msg, CapabilitiesMessage):
                self._in_task(self._answer_capabilities())
            elif isinstance(msg, ThreadsMessage):
                self._in_task(self._answer_threads(msg))
            elif isinstance(msg, RunMessage):
                input = decode_run_input(bytes(msg.input), max_bytes=self.max_input_bytes, depth_checked=True)
                self._check_capacity()
                run = await self.registry.start(
                    input, owner=self.principal, address=peer_address(self.ws.transport), key=msg.run_key
                )
                self._pump(self.registry.subscribe(run, 0), key=run.key)
            elif isinstance(msg, CancelMessage):
                # A run this connection streams was allowed already: its key is known here.
                caller = Caller(self.principal, msg.run_key or self.keys.get(msg.run_id))
                try:
                    # the pump sends the RUN_ERROR; do not block this loop
                    self.registry.cancel_nowait(msg.run_id, caller=caller)
                except UnknownRunError:
                    if self.registry.shared is None:
                        raise
                    # Possibly a run another node owns: ask its owner through the shared
                    # log (the run's readers get the RUN_ERROR).
                    await self.registry.request_remote_cancel(msg.run_id, caller)
            else:
                self._check_capacity()
                if msg.run_id in self.pumps:
                    raise RemoteInputError(
                        f"run {msg.run_id!r} is already streaming on this connection", code="run_exists"
                    )
                sub, first = await self.registry.resume(
                    msg.run_id, msg.last_event_id, Caller(self.principal, msg.run_key), via="websocket"
                )
                self._pump(sub, first)
                if msg.run_key is not None:
                    self.keys[msg.run_id] = msg.run_key
        except AguiEngineError as exc:
            if self.registry.metrics is not None:
                self.registry.metrics.note_error(exc.code)
            # the error line names the run the message was about, read leniently (the
            # message may be the malformed one)
            deep = isinstance(exc, InputTooDeepError)
            rid = None if deep else message_run_id(message)
            qid = None if deep else message_query_id(message)
            await self.ws.send(error_line(exc, rid, query_id=qid), text=True)
            return exc.code not in _MALFORMED_CODES
        return True

    def _in_task(self, answer: Coroutine[Any, Any, None]) -> None:
        """Answer a query or a capabilities message in its own task (a slow resolver or
        remote agent holds up nothing else); both count against MAX_QUERIES_PER_CONNECTION."""
        if len(self.queries) >= MAX_QUERIES_PER_CONNECTION:
            answer.close()
            raise _TooManyQueries(f"this connection already has {MAX_QUERIES_PER_CONNECTION} queries in flight")
        task = asyncio.get_running_loop().create_task(answer)
        self.queries.add(task)
        self._note_work()
        task.add_done_callback(self._query_done)

    def _query_done(self, task: asyncio.Task[None]) -> None:
        self.queries.discard(task)
        self._note_work()

    async def _answer(self, msg: QueryMessage) -> None:
        try:
            if self.broker is None:
                raise UnknownResourceError("this gateway serves no data resources")
            data = await self.broker.query(msg.resource_id, msg.params, self.principal)
            line = query_result_line(msg.query_id, data)
        except AguiEngineError as exc:
            if self.registry.metrics is not None:
                self.registry.metrics.note_error(exc.code)
            line = error_line(exc, query_id=msg.query_id)
        await self._send_answer(line, f"query {msg.query_id[:64]}")

    async def _answer_capabilities(self) -> None:
        try:
            line = capabilities_line(await served_capabilities(self.registry.agent, WEBSOCKET_TRANSPORT))
        except AguiEngineError as exc:
            if self.registry.metrics is not None:
                self.registry.metrics.note_error(exc.code)
            line = error_line(exc)
        await self._send_answer(line, "capabilities")

    async def _answer_threads(self, msg: ThreadsMessage) -> None:
        try:
            line = query_result_line(msg.query_id, await answer_threads_message(
                self.registry, msg, Caller(self.principal, msg.run_key)))
        except AguiEngineError as exc:
            if self.registry.metrics is not None:
                self.registry.metrics.note_error(exc.code)
            line = error_line(exc, query_id=msg.query_id)
        await self._send_answer(line, f"threads {msg.action}")

    async def _send_answer(self, line: bytes, what: str) -> None:
        try:
            await self._send([line])
        except TimeoutError:
            _log.info("%s: client stopped reading; closing the connection", what)
            self.ws.transport.abort()
        except websockets.ConnectionClosed:
            pass  # the client went away: nobody to answer

    def _check_capacity(self) -> None:
        if len(self.pumps) >= MAX_RUNS_PER_CONNECTION:
            raise _TooManyRuns(f"this connection already has {MAX_RUNS_PER_CONNECTION} runs in flight")

    def _pump(self, sub: Subscription, first: Any = None, *, key: str | None = None) -> None:
        """Stream ``sub`` on this connection; ``key``: the run was started here, and
        its first line carries the run key."""
        rid = sub.run.run_id
        task = asyncio.get_running_loop().create_task(self._run_pump(sub, first, key))
        self.pumps[rid] = task
        self._note_work()
        if key is not None:
            self.keys[rid] = key
        task.add_done_callback(lambda _t: self._pump_done(rid))

    def _pump_done(self, rid: str) -> None:
        self.pumps.pop(rid, None)
        self.keys.pop(rid, None)
        self._note_work()

    def _note_work(self) -> None:
        """Tell the idle gate whether this connection runs something now (a run or a
        query in flight: then the cap on connections that run nothing does not count it)."""
        if self.gate is not None:
            if self.pumps or self.queries:
                self.gate.running(self.ws)
            else:
                self.gate.idle(self.ws)

    async def _run_pump(self, sub: Subscription, first: Any, key: str | None) -> None:
        try:
            await self._pump_events(sub, first, key)
        except TimeoutError:
            # The client stopped reading for send_timeout: the connection (one TCP
            # stream for all its runs) is stalled; cut it, the runs' grace applies.
            _log.info("run %s: client stopped reading at event %d; closing the connection", sub.run.run_id, sub.cursor)
            self.ws.transport.abort()
        except websockets.ConnectionClosed:
            pass  # the client went away; the subscription is closed, the grace applies

    async def _send(self, lines: list[bytes]) -> None:
        size = sum(map(len, lines))
        await send_or_stall(lambda: self.send_lines(lines), size, self.ws.transport, self.send_timeout)

    async def _pump_events(self, sub: Subscription, first: Any, key: str | None) -> None:
        rid = sub.run.run_id
        lines = EventLines(rid)
        metrics = self.registry.metrics
        async with sub:
            sl = first
            while True:
                if sl is None:
                    try:
                        sl = await sub.next()
                    except AguiEngineError as exc:  # cursor_expired, event_log_unavailable
                        if metrics is not None:
                            metrics.note_error(exc.code)
                        await self._send([error_line(exc, rid)])
                        return
                if sl.payloads:
                    batch = lines(sl.first_seq, sl.payloads)
                    if key is not None:  # the run's first line, to the client that started it
                        batch[0] = keyed_event_line(rid, sl.first_seq, sl.payloads[0], key)
                        key = None
                    await self._send(batch)
                    if metrics is not None:
                        metrics.note_sent("websocket", len(batch), sum(map(len, batch)) + len(batch) - 1)
                if sl.finished:
                    return
                sl = None


class WebSocketServer(ServerHandle):
    """A running WebSocket gateway: ``url``, ``registry``, ``close()`` (graceful)."""

    def __init__(
        self,
        server: Server,
        url: str,
        registry: RunRegistry,
        connections: set[_Connection],
        gate: IdleConnectionGate | None = None,
        broker: ResourceBroker | None = None,
    ) -> None:
        self.server = server
        self._broker = broker
        self.url = url
        self.registry = registry
        #: The cap on connections that run nothing (counts, refusals).
        self.gate = gate
        self._connections = connections

    async def close(self, timeout: float = CANCEL_WAIT_SECONDS) -> None:
        """End every run with ``RUN_ERROR{code: "shutdown"}``, let the pumps send
        it, then close every connection with 1001 (going away)."""
        await self.registry.shutdown(timeout=timeout)
        pumps = [t for c in self._connections for t in c.pumps.values()]
        if pumps:
            await asyncio.wait(pumps, timeout=timeout)
        self.server.close(close_connections=True)
        await self.server.wait_closed()
        if self._broker is not None:
            self._broker.close()  # its resolver pools


async def start_websocket_server(
    agent: Agent | AgentFunction | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    registry: RunRegistry | None = None,
    options: RegistryOptions | None = None,
    log: EventLog | None = None,
    clock: Clock | None = None,
    metrics: GatewayMetrics | None = None,
    connection: ConnectionOptions | None = None,
    data: DataOptions | None = None,
    auth_token: str | Mapping[str, str] | None = None,
    ping_interval: float | None = DEFAULT_PING_INTERVAL,
    ping_timeout: float | None = DEFAULT_PING_TIMEOUT,
    max_queue: int = DEFAULT_MAX_QUEUE,
    write_limit: int = DEFAULT_WRITE_LIMIT,
    open_timeout: float = WS_OPEN_TIMEOUT_SECONDS,
) -> WebSocketServer:
    """Start the WebSocket gateway in this event loop (port 0: ephemeral).

    The keywords it shares with :func:`~transports.sse_server.create_app` mean the same
    (:class:`~transports.http_gateway.AppKeywords`): ``registry`` or ``options`` / ``log`` /
    ``clock`` / ``metrics`` (a :class:`~transports.metrics.GatewayMetrics` to fill; render it
    yourself: this server has no HTTP routes), ``auth_token`` (also read from an
    ``access_token`` query parameter, for browsers), ``data``
    (:class:`~transports.server_options.DataOptions`: what ``query`` messages may ask for).
    Of ``connection`` (:class:`~transports.server_options.ConnectionOptions`) it reads
    ``max_input_bytes`` (the largest message: a ``run`` message carries a whole RunAgentInput;
    larger closes with 1009), ``send_timeout`` (a send waiting on a client that stopped reading
    cuts the connection) and ``max_idle_connections`` / ``max_idle_per_ip`` (connections in the
    handshake or open with no run in flight; a new one past either gets an HTTP 503 +
    ``Retry-After`` instead of a handshake). The WebSocket library's own:
    ``ping_interval`` / ``ping_timeout``, ``max_queue`` / ``write_limit`` (the incoming-frame
    and outgoing-byte high-water marks; spec/transports.md, Backpressure), ``open_timeout``
    (seconds from connect to a completed handshake).
    ``server.url`` is the endpoint (an IPv6 host in brackets).
    Raises UsageError when neither ``agent`` nor ``registry`` is given.
    """
    if registry is None:
        if agent is None:
            raise UsageError("start_websocket_server needs an agent or a registry")
        registry = RunRegistry(
            as_agent(agent, where="start_websocket_server(agent)"), options=options, log=log, clock=clock, metrics=metrics
        )
    conn_options = connection or ConnectionOptions()
    data_options = data or DataOptions()
    max_input_bytes, send_timeout = conn_options.max_input_bytes, conn_options.send_timeout
    connections: set[_Connection] = set()
    broker = broker_for(registry.agent, data_options.resources, queue_timeout=data_options.query_queue_timeout)
    gate = IdleConnectionGate(conn_options.max_idle_per_ip, conn_options.max_idle_connections)
    gated = type("_GatedConnection", (_GatedConnection,), {"gate": gate})

    def authorization(request: Request) -> str | None:
        header = request.headers.get("Authorization")
        if header is None:
            token = parse_qs(urlsplit(request.path).query).get("access_token", [None])[0]
            header = f"Bearer {token}" if token else None
        return header

    def process_request(conn: ServerConnection, request: Request) -> Response | None:
        if auth_token is None:
            return None
        try:
            check_bearer(authorization(request), auth_token)
        except UnauthorizedError as exc:
            resp = conn.respond(HTTPStatus.UNAUTHORIZED, msgspec.json.encode(exc.to_json()).decode() + "\n")
            del resp.headers["Content-Type"]
            resp.headers["Content-Type"] = "application/json"
            resp.headers["WWW-Authenticate"] = 'Bearer realm="agui-engine"'
            return resp
        return None

    async def handler(ws: ServerConnection) -> None:
        # The handshake passed process_request: this names its principal, not raises.
        principal = check_bearer(authorization(ws.request), auth_token) if ws.request is not None else None
        conn = _Connection(ws, registry, max_input_bytes, send_timeout, principal, broker, gate)
        connections.add(conn)
        try:
            await conn.serve()
        finally:
            connections.discard(conn)

    server = await serve(
        handler,
        sock=listening_socket(host, port),  # sheds connections when descriptors run out
        process_request=process_request,
        max_size=max_input_bytes,  # the websockets library's name for it
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        max_queue=max_queue,
        write_limit=write_limit,
        compression=None,
        backlog=LISTEN_BACKLOG,  # passed on to loop.create_server (its default is 100)
        open_timeout=open_timeout,
        create_connection=gated,
    )
    return WebSocketServer(server, server_url("ws", next(iter(server.sockets))), registry, connections, gate, broker)
