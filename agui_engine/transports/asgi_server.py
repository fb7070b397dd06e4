"""AG-UI over HTTP, the ASGI front end: the SSE gateway in any ASGI server or app (uvicorn,
hypercorn, FastAPI, Starlette), a pure ASGI application with no framework of its own.

Theory of operation
-------------------
:func:`create_asgi_app` takes :func:`~transports.sse_server.create_app`'s options (the same
keywords and options structs, built by :func:`~transports.http_gateway.build_gateway`) and
returns an :class:`AsgiGateway`: an ASGI 3 application serving, at the root of wherever it is
mounted (``scope["root_path"]``: ``app.mount("/agui", gateway)`` in FastAPI or Starlette,
``uvicorn --root-path``), every route of the aiohttp gateway -- the request handling is
:class:`~transports.http_gateway.HttpGateway`'s, one copy for both front ends, so a refusal, a
stream's frames and a history are byte for byte the same.

What is the front end's own:

* **Streams.** The 200 goes out, then :meth:`HttpGateway.pump` writes each ready batch as one
  ``http.response.body`` message. The server's ``send`` waits while the client's socket is
  full (uvicorn and hypercorn wait for the transport to drain): that is the backpressure; a
  write that waits longer than ``send_timeout`` (``SEND_STALL_TIMEOUT_SECONDS``) cuts the
  stream (the run goes on; the client may resume). A task reads ``receive()`` meanwhile: the
  ``http.disconnect`` of a client that went away stops the stream at once, and the run's
  subscription is closed (the registry's grace period then decides).
* **Lifespan.** ``lifespan.startup`` is answered at once; ``lifespan.shutdown`` ends every
  run still going with ``RUN_ERROR{code: "shutdown"}`` and closes the resolver pools
  (:meth:`AsgiGateway.close`). :meth:`AsgiGateway.drain` first refuses new runs (``/readyz``
  503) and gives running ones up to ``timeout`` seconds: call it from the application's own
  SIGTERM handling or lifespan (``agui-engine serve`` drains the aiohttp gateway the same way).
* **Authentication by the application.** A FastAPI dependency (``transports/fastapi_routes.py``)
  may have authenticated the caller already: its principal arrives in the scope
  (:data:`PRINCIPAL_SCOPE_KEY`) and the bearer token is not checked again.
* Anything else than ``http`` and ``lifespan`` (a WebSocket) is closed: the WebSocket gateway is
  :mod:`~transports.websocket_server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Unpack, overload
from urllib.parse import parse_qsl

from multidict import CIMultiDict, CIMultiDictProxy

from agui_engine.protocol.agent import Agent, AgentFunction

from .content_negotiation import MAX_ECHOED_HEADER_CHARS
from .http_gateway import (
    BODY_READ_CHUNK,
    CURRENT_RUN_ID,
    STATUS_CLIENT_CLOSED,
    Answer,
    AppKeywords,
    GatewayRequest,
    HttpGateway,
    StreamStart,
    UnreadableRequestError,
    build_gateway,
    check_keywords,
    error_answer,
    route,
)
from .input_errors import MethodNotAllowedError, RouteNotFoundError
from .inspector import FrontendFiles, verify_answer
from .runs import RunRegistry
from .runtime_routes import DEFAULT_AGENT_ID, RuntimeAgent, RuntimeRouter
from .served_agents import ServedAgent, health, plan_agents, readiness

__all__ = ["AsgiAgents", "AsgiGateway", "PRINCIPAL_SCOPE_KEY", "create_asgi_app"]

_log = logging.getLogger("agui_engine.transports")
_access_logger = logging.getLogger("agui_engine.access")

#: The scope key under which an embedding application hands the gateway a caller it has
#: authenticated itself: ``{"principal": str | None}`` (the bearer token is then not checked).
PRINCIPAL_SCOPE_KEY = "agui_engine.principal"

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _ClientGone(ConnectionError):
    """The client disconnected while its request body was being read."""


def _route_path(scope: _Scope) -> str:
    """The path below the application's mount point: ``scope["path"]`` without ``root_path``
    (ASGI: the path includes the root path; a server that strips it is read as it is)."""
    path: str = scope.get("path") or "/"
    root: str = scope.get("root_path") or ""
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root):]
    return path


def _peer(scope: _Scope) -> str:
    client = scope.get("client")
    if client:
        host = str(client[0])
        return host[7:] if host.startswith("::ffff:") else host  # one client of a dual-stack socket, one key
    return "-"


def _headers(scope: _Scope) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers") or ()
    ))


def _wire_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class AsgiGateway:
    """The gateway as an ASGI 3 application (see the module docstring): ``registry``, ``core``
    (the shared :class:`~transports.http_gateway.HttpGateway`), :meth:`drain`, :meth:`close`."""

    def __init__(self, core: HttpGateway, files: FrontendFiles, *, access_log: bool = True) -> None:
        self.core = core
        self.registry: RunRegistry = core.registry
        self.files = files
        self.access_log = access_log
        #: CopilotKit's runtime routes (``/info``, ``/agent/default/run|connect|stop``); the root is
        #: also its single endpoint (runtime_routes.RuntimeRouter, shared with aiohttp).
        self.runtime = RuntimeRouter({DEFAULT_AGENT_ID: RuntimeAgent(core)})
        self._closed = False

    async def drain(self, timeout: float) -> None:
        """Refuse new runs (``/readyz`` answers 503) and wait up to ``timeout`` seconds for the
        running ones to finish; what still runs then is ended by :meth:`close`."""
        await self.registry.drain(timeout)

    async def close(self) -> None:
        """End every run still going (``RUN_ERROR{shutdown}``, written by the open streams) and
        close the resolver pools. Called by ``lifespan.shutdown``; once is enough."""
        if not self._closed:
            self._closed = True
            await self.core.shutdown()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.handle(scope, receive, send, _route_path(scope))
        elif kind == "lifespan":
            await _lifespan(receive, send, self.close)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def handle(self, scope: _Scope, receive: _Receive, send: _Send, subpath: str) -> None:
        """Answer one HTTP request for ``subpath`` (the path below the gateway's root)."""
        await _logged(scope, lambda: self._dispatch(scope, receive, send, subpath), self.access_log)

    async def _dispatch(self, scope: _Scope, receive: _Receive, send: _Send, subpath: str) -> int:
        core = self.core
        req = _gateway_request(scope, receive, subpath)
        method, headers = req.method, req.headers
        extra = core.cors_headers(headers.get("Origin")) if core.cors else {}
        key = subpath.rstrip("/") if subpath not in ("", "/") else ""
        runtime = self.runtime.route(method, key)
        found = route(method, key, cors=core.cors) if runtime is None else None
        answer: Answer | StreamStart
        if runtime is not None:
            _, answer = await self.runtime.answer(runtime, req)
        elif found == ("post", None):  # the root is also CopilotKit's single endpoint
            _, answer = await self.runtime.post(core, req)
        elif found is None:
            answer = error_answer(RouteNotFoundError(f"{method} {req.path}: nothing is served here"), core.metrics)
        else:
            name, param = found
            answer = await self._answer(name, param, req, headers, key)
        return await self.write(receive, send, answer, extra, head=method == "HEAD")

    async def write(self, receive: _Receive, send: _Send, answer: Answer | StreamStart, extra: Mapping[str, str], *,
                    head: bool = False) -> int:
        """Send ``answer`` (a stream through this gateway's ``pump``) with the ``extra`` headers;
        the access log's status."""
        if isinstance(answer, StreamStart):
            if head:
                answer.sub.close()
                await self._send_answer(send, Answer(200, answer.headers), extra, head=True)
                return 200
            return await self._stream(receive, send, answer, extra)
        await self._send_answer(send, answer, extra, head=head)
        return answer.status

    async def _answer(self, name: str, param: str | None, req: GatewayRequest, headers: Mapping[str, str],
                      key: str) -> Answer | StreamStart:
        core = self.core
        if name == "preflight":
            return core.preflight(headers.get("Origin"))
        if name in ("static", "inspect"):
            found = self.files.answer(key, headers.get("If-None-Match"))
            return found if found is not None else error_answer(RouteNotFoundError(f"{req.path}: no such file"), core.metrics)
        if name == "inspect_verify":
            if not self.files.inspector:
                return error_answer(RouteNotFoundError(f"{req.path}: the inspector is not served"), core.metrics)
            return await verify_answer(core, req)
        if name == "metrics_text" and core.metrics is None:
            return error_answer(RouteNotFoundError(f"{req.path}: this gateway keeps no metrics"), core.metrics)
        if name == "method_not_allowed":
            return error_answer(MethodNotAllowedError(f"{req.method} {req.path}: not allowed here"), core.metrics)
        handler = getattr(core, name)
        result: Answer | StreamStart = await (handler(req) if param is None else handler(req, param))
        return result

    @staticmethod
    async def _send_answer(send: _Send, answer: Answer, extra: Mapping[str, str], *, head: bool = False) -> None:
        headers = {**answer.headers, **extra}
        if answer.status not in (204, 304):
            headers["Content-Length"] = str(len(answer.body))
        await send({"type": "http.response.start", "status": answer.status, "headers": _wire_headers(headers)})
        await send({"type": "http.response.body", "body": b"" if head else answer.body})

    async def _stream(self, receive: _Receive, send: _Send, stream: StreamStart, extra: Mapping[str, str]) -> int:
        """Write the stream; the access log's status (STATUS_CLIENT_CLOSED when the client left first)."""
        sub = stream.sub
        run_id = sub.run.run_id
        send_timeout = self.core.send_timeout
        pump: asyncio.Task[None] | None = None
        watch: asyncio.Task[None] | None = None
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": _wire_headers({**stream.headers, **extra})})

            async def write(data: bytes) -> None:
                # the server's send waits while the client's socket is full: that wait is bounded
                async with asyncio.timeout(send_timeout):
                    await send({"type": "http.response.body", "body": data, "more_body": True})

            if stream.prefix:  # frames before the run's (CopilotKit's connect: the thread's history)
                await write(stream.prefix)
            pump = asyncio.ensure_future(self.core.pump(stream, write))
            watch = asyncio.ensure_future(_disconnected(receive))
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
            if not pump.done():  # the client went away
                _log.debug("run %s: subscriber disconnected at event %d", run_id, sub.cursor)
                return STATUS_CLIENT_CLOSED
            pump.result()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return 200
        except TimeoutError:
            # The client stopped reading for send_timeout: the stream ends unfinished (the server
            # closes the connection), the run goes on.
            _log.info("run %s: client stopped reading at event %d; closing its stream", run_id, sub.cursor)
            return STATUS_CLIENT_CLOSED
        except OSError:
            # The server says the client is gone (a send after the disconnect).
            _log.debug("run %s: subscriber disconnected at event %d", run_id, sub.cursor)
            return STATUS_CLIENT_CLOSED
        finally:
            for task in (pump, watch):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            sub.close()


async def _lifespan(receive: _Receive, send: _Send, close: Callable[[], Awaitable[None]]) -> None:
    """The ASGI lifespan: startup at once; at shutdown ``close()`` (its failure reported)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - the server reports it
                await send({"type": "lifespan.shutdown.failed", "message": f"{type(exc).__name__}: {exc}"})
                return
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _logged(scope: _Scope, dispatch: Callable[[], Awaitable[int]], access_log: bool) -> None:
    """Run ``dispatch`` (which answers the request and says its status) and log one access line."""
    start = time.perf_counter()
    CURRENT_RUN_ID.set(None)
    status = 500
    try:
        status = await dispatch()
    except (asyncio.CancelledError, _ClientGone):
        status = STATUS_CLIENT_CLOSED
        raise
    finally:
        if access_log:
            _access_logger.info("%s %s %s %d run=%s %.1fms", _peer(scope), scope.get("method"), scope.get("path"),
                                status, CURRENT_RUN_ID.get() or "-", (time.perf_counter() - start) * 1000.0)


def _gateway_request(scope: _Scope, receive: _Receive, subpath: str) -> GatewayRequest:
    """The ASGI request as the gateway reads it (its body read from ``receive`` on demand)."""
    method = scope.get("method", "GET")
    headers = _headers(scope)
    query = dict(parse_qsl((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True))
    length = headers.get("Content-Length")
    encoding = headers.get("Content-Encoding", "identity")

    async def raw() -> AsyncIterator[bytes]:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone("the client went away while sending its request")
            body = message.get("body") or b""
            if body:
                yield body
            if not message.get("more_body"):
                return

    def chunks() -> AsyncIterator[bytes]:
        return _decoded(raw(), encoding)

    auth = scope.get(PRINCIPAL_SCOPE_KEY)
    return GatewayRequest(
        method, scope.get("path") or subpath, headers, query,
        content_length=int(length) if length is not None and length.isdigit() else None,
        peer=_peer(scope), chunks=chunks,
        principal=auth.get("principal") if isinstance(auth, Mapping) else None,
        authenticated=isinstance(auth, Mapping),
    )


async def _decoded(body: AsyncIterator[bytes], encoding: str) -> AsyncIterator[bytes]:
    """The body with its ``Content-Encoding`` (gzip, deflate) undone, as aiohttp's server does
    (an ASGI server passes it on as sent), in pieces of at most BODY_READ_CHUNK bytes so that
    the size limit stops a body that inflates without bound. Raises UnreadableRequestError for
    another encoding or a body that does not decode."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        async for chunk in body:
            yield chunk
        return
    if name not in ("gzip", "x-gzip", "deflate"):
        raise UnreadableRequestError(
            f"cannot read the request body (Content-Encoding {encoding[:MAX_ECHOED_HEADER_CHARS]!r}): "
            "only gzip and deflate are understood")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if name != "deflate" else zlib.MAX_WBITS)
    try:
        async for chunk in body:
            data = inflate.decompress(chunk, BODY_READ_CHUNK)
            while data:
                yield data
                data = inflate.decompress(inflate.unconsumed_tail, BODY_READ_CHUNK) if inflate.unconsumed_tail else b""
        if not inflate.eof:
            raise zlib.error("the compressed body is cut short")
    except zlib.error as exc:
        raise UnreadableRequestError(
            f"cannot read the request body (Content-Encoding {encoding[:MAX_ECHOED_HEADER_CHARS]!r}): {exc}") from None


async def _disconnected(receive: _Receive) -> None:
    """Return when the client disconnects (every other message is skipped)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class AsgiAgents:
    """Several agents as one ASGI application (``create_asgi_app({id: agent, ...})``): each agent is
    the one-agent :class:`AsgiGateway` at its path (``/<id>`` by default: every route of it there),
    and the root answers ``GET /healthz``, ``GET /readyz`` (every agent's) and CopilotKit's runtime
    routes for every agent by id (``/info``, ``/agent/<id>/run|connect|stop/<threadId>``, the single
    endpoint ``POST /``), as the aiohttp gateway does (the same :class:`~transports.served_agents`
    table and :class:`~transports.runtime_routes.RuntimeRouter`). ``gateways``: id -> the agent's
    gateway; ``registries``: id -> its registry (``registry``: the first's); :meth:`drain`,
    :meth:`close` apply to every agent."""

    def __init__(self, places: Mapping[str, tuple[str, AsgiGateway]], descriptions: Mapping[str, str], *,
                 access_log: bool = True) -> None:
        self.gateways = {agent_id: gateway for agent_id, (_, gateway) in places.items()}
        self.registries = {agent_id: gateway.registry for agent_id, gateway in self.gateways.items()}
        first = next(iter(self.gateways.values()))
        self.registry: RunRegistry = first.registry
        self.access_log = access_log
        self._places = sorted(((prefix, gateway) for prefix, gateway in places.values()), key=lambda p: -len(p[0]))
        self._first = first
        self._by_core = {gateway.core: gateway for gateway in self.gateways.values()}
        self.runtime = RuntimeRouter({agent_id: RuntimeAgent(gateway.core, descriptions.get(agent_id, ""))
                                      for agent_id, gateway in self.gateways.items()}, single_endpoint=True)

    async def drain(self, timeout: float) -> None:
        """Every agent's :meth:`AsgiGateway.drain`, at once."""
        await asyncio.gather(*(gateway.drain(timeout) for gateway in self.gateways.values()))

    async def close(self) -> None:
        """Every agent's :meth:`AsgiGateway.close`."""
        for gateway in self.gateways.values():
            await gateway.close()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        kind = scope["type"]
        if kind == "http":
            subpath = _route_path(scope)
            for prefix, gateway in self._places:
                if subpath == prefix or subpath.startswith(prefix + "/"):
                    await gateway.handle(scope, receive, send, subpath[len(prefix):])
                    return
            await _logged(scope, lambda: self._root(scope, receive, send, subpath), self.access_log)
        elif kind == "lifespan":
            await _lifespan(receive, send, self.close)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def _root(self, scope: _Scope, receive: _Receive, send: _Send, subpath: str) -> int:
        req = _gateway_request(scope, receive, subpath)
        key = subpath.rstrip("/") if subpath not in ("", "/") else ""
        cors = self.runtime.cors
        extra = cors.cors_headers(req.headers.get("Origin")) if cors is not None else {}
        head = req.method == "HEAD"
        found = self.runtime.route(req.method, key)
        if found is not None:
            core, answer = await self.runtime.answer(found, req)
            return await self._by_core.get(core, self._first).write(receive, send, answer, extra, head=head)
        reply: Answer
        if key == "/healthz" and req.method in ("GET", "HEAD"):
            reply = health()
        elif key == "/readyz" and req.method in ("GET", "HEAD"):
            reply = await readiness(self.registries)
        else:
            reply = error_answer(RouteNotFoundError(f"{req.method} {req.path}: nothing is served here"))
        return await self._first.write(receive, send, reply, extra, head=head)


@overload
def create_asgi_app(agent: Mapping[str, Agent | AgentFunction | ServedAgent],
                    **options: Unpack[AppKeywords]) -> AsgiAgents: ...


@overload
def create_asgi_app(agent: Agent | AgentFunction | None = None, **options: Unpack[AppKeywords]) -> AsgiGateway: ...


def create_asgi_app(agent: Any = None, **options: Unpack[AppKeywords]) -> AsgiGateway | AsgiAgents:
    """The gateway of ``agent`` as an ASGI application, served at the root of wherever it is
    mounted (see the module docstring); a mapping id -> agent (or
    :class:`~transports.served_agents.ServedAgent`) serves them all (:class:`AsgiAgents`), as
    ``create_app`` does. ``options``: :func:`~transports.sse_server.create_app`'s
    keyword arguments (:class:`~transports.http_gateway.AppKeywords`: ``options``, ``registry``,
    ``connection``, ``data``, ``auth_token``, ``cors_origins``, ``inspector``, ``metrics`` ...);
    ``path`` has no meaning here (the mount point is the path) and must be ``"/"`` if given.
    Raises UsageError as ``create_app`` does.

    ``uvicorn.run(create_asgi_app(agent))``, or in FastAPI ``app.mount("/agui", create_asgi_app(agent))``
    (the routes with the app's own dependencies: :func:`~transports.fastapi_routes.add_agui_routes`)."""
    from agui_engine.protocol.errors import UsageError

    path = options.get("path", "/")
    if path not in ("", "/"):
        raise UsageError(f"create_asgi_app serves at its mount point: mount it at {path!r} instead of path={path!r}")
    if isinstance(agent, Mapping):
        check_keywords("create_asgi_app", options)
        keywords: dict[str, Any] = {k: v for k, v in options.items() if k not in ("auth_token", "path")}
        places: dict[str, tuple[str, AsgiGateway]] = {}
        for place in plan_agents(agent, auth_token=options.get("auth_token"), keywords=keywords):
            one = build_gateway(place.served.agent, where="create_asgi_app", auth_token=place.auth_token, **keywords)
            places[place.agent_id] = (place.prefix, AsgiGateway(
                one, FrontendFiles(inspector=options.get("inspector", False)), access_log=options.get("access_log", True)))
        return AsgiAgents(places, {p: a.description if isinstance(a, ServedAgent) else "" for p, a in agent.items()},
                          access_log=options.get("access_log", True))
    core = build_gateway(agent, where="create_asgi_app", **options)
    return AsgiGateway(core, FrontendFiles(inspector=options.get("inspector", False)),
                       access_log=options.get("access_log", True))
