"""CopilotKit's runtime protocol (REST and single-endpoint forms), served by the gateway itself: a
CopilotKit page sets ``runtimeUrl`` to the gateway and needs no Node ``CopilotRuntime``.

Theory of operation
-------------------
``@copilotkit/core`` 1.74 (what ``@copilotkit/react-core`` runs in the page) talks to a runtime
through ``ProxiedCopilotRuntimeAgent``: with its default ``"auto"`` transport it asks
``GET <runtimeUrl>/info`` first (REST; only when that fails, or when the page says
``useSingleEndpoint``, it uses the single-endpoint form below), then::

    GET  <path>/info                        the runtime's description: {version, agents: {id: {name,
                                            description, className, capabilities}}, a2uiEnabled, ...}
    POST <path>/agent/<id>/run              a run: the body is a RunAgentInput, the answer the SSE
                                            stream (exactly POST <agent path>, wire negotiation included)
    POST <path>/agent/<id>/connect          reattach to thread ``threadId`` (the body's): its kept
                                            history replayed as SSE (compacted), then the stream ends;
                                            an empty stream when there is none the caller may read
    POST <path>/agent/<id>/stop/<threadId>  stop the thread's run ``runId`` (the body's): {stopped}

The single-endpoint form is one ``POST <runtimeUrl>`` whose JSON body is an envelope
``{method, params?, body?}`` (``@copilotkit/runtime``'s ``single-route`` mode): ``info``,
``agent/run`` / ``agent/connect`` (``params.agentId``, ``body`` the RunAgentInput) and
``agent/stop`` (``params.agentId``, ``params.threadId``, ``body`` ``{runId}``), each answered
exactly as its REST route. A one-agent gateway's ``runtimeUrl`` is its agent path, so its run
handler tells the two apart (:func:`single_route_call`: an object with a string ``method`` and no
``threadId`` is an envelope, never a RunAgentInput) and hands envelopes to the dispatcher
:func:`add_runtime_routes` returns; a several-agent gateway serves ``POST <path>`` for it.

Each agent's routes are the handlers of its own gateway (:class:`RuntimeAgentRoutes`, built by
``sse_server``), so its auth, limits, wire, MCP Apps proxied requests and A2UI actions (both are
runs) apply unchanged. A one-agent gateway serves its agent as ``default`` (CopilotKit's default
agent id); ``create_app({id: agent})`` serves every agent by its id. An agent another principal
may not use is left out of that principal's ``/info`` and answers its routes 401, as at its path.

With CORS on (``cors_origins``), the four routes answer the browser's preflight (OPTIONS) and
carry the CORS headers, as the agent path does: a page served from another origin works.

Nothing here parses a run: the agents' gateways do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NamedTuple

import msgspec
from aiohttp import web

from agui_engine.protocol.capabilities import AgentCapabilities, encode_capabilities
from agui_engine.protocol.errors import AguiEngineError, RemoteInputError, UsageError

from .bearer_auth import check_bearer

__all__ = ["DEFAULT_AGENT_ID", "RUNTIME_ROUTES_KEY", "RuntimeAgentRoutes", "SingleRouteCall", "SingleRouteHandler",
           "UnknownAgentError", "UnknownRuntimeMethodError", "add_runtime_routes", "runtime_version", "single_route_call"]

#: The agent id a one-agent gateway answers to (CopilotKit's ``useAgent()`` default).
DEFAULT_AGENT_ID: Final = "default"

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: A handler given the request's body already read (None: it reads the request's own).
_BodyHandler = Callable[[web.Request, bytes | None], Awaitable[web.StreamResponse]]


class RuntimeAgentRoutes(NamedTuple):
    """One agent's handlers of the runtime routes (its gateway's; ``run``, ``connect`` and ``stop``
    take the body when it was read already, from a single-endpoint envelope), its description, the
    bearer tokens it admits (``check_bearer``'s ``expected``), how to read its capabilities, and
    how its gateway reads a request body (its content type, size and time limits)."""

    run: _BodyHandler
    connect: _BodyHandler
    stop: Callable[[web.Request, str, bytes | None], Awaitable[web.StreamResponse]]
    capabilities: Callable[[], Awaitable[AgentCapabilities]]
    auth: str | Mapping[str, str] | None
    read_body: Callable[[web.Request], Awaitable[bytes]]
    description: str = ""
    #: CORS, when the gateway allows other origins: its preflight answer (OPTIONS) and the hook
    #: that adds the CORS headers to every response (None: CORS is off).
    preflight: _Handler | None = None
    cors_headers: Callable[[web.Request, web.StreamResponse], Awaitable[None]] | None = None


#: The app key under which a gateway app keeps its agent's :class:`RuntimeAgentRoutes`.
RUNTIME_ROUTES_KEY: Final = web.AppKey("runtime_routes", RuntimeAgentRoutes)


class UnknownAgentError(RemoteInputError):
    """No agent of this id here (or none the caller may use): 404."""

    http_status = 404
    ws_close_code = 4404
    default_code = "unknown_agent"


class UnknownRuntimeMethodError(RemoteInputError):
    """A single-endpoint envelope whose ``method`` is not served here: 404."""

    http_status = 404
    ws_close_code = 4404
    default_code = "unknown_method"


class SingleRouteCall(msgspec.Struct, frozen=True, kw_only=True):
    """A single-endpoint envelope: ``method``, its ``params`` and its ``body`` (raw JSON, empty
    when absent)."""

    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    body: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Probe(msgspec.Struct, frozen=True):
    method: Any = None
    params: Any = None
    body: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    thread_id: Any = msgspec.field(default=msgspec.UNSET, name="threadId")


#: What a served single-endpoint method is answered by (an envelope's ``method``).
_METHODS: Final = ("info", "agent/run", "agent/connect", "agent/stop")

#: Dispatches one single-endpoint envelope (what :func:`add_runtime_routes` returns).
SingleRouteHandler = Callable[[web.Request, SingleRouteCall], Awaitable[web.StreamResponse]]


def single_route_call(body: bytes) -> SingleRouteCall | None:
    """The single-endpoint envelope ``body`` is: a JSON object with a string ``method`` and no
    ``threadId`` (which every RunAgentInput has); None for anything else (a RunAgentInput, or input
    the run handler will refuse with its own words). Only a body naming ``"method"`` is decoded."""
    if b'"method"' not in body:
        return None
    try:
        probe = msgspec.json.decode(body, type=_Probe)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not isinstance(probe.method, str) or probe.thread_id is not msgspec.UNSET:
        return None
    if probe.params is not None and not isinstance(probe.params, dict):
        raise RemoteInputError(f"single-endpoint call {probe.method!r}: params must be an object, "
                               f"got {type(probe.params).__name__}")
    return SingleRouteCall(method=probe.method, params=probe.params or {}, body=probe.body)


def _param(call: SingleRouteCall, name: str) -> str:
    value = call.params.get(name)
    if not isinstance(value, str) or not value:
        raise RemoteInputError(f"single-endpoint call {call.method!r}: params.{name} must be a non-empty string")
    return value


def runtime_version() -> str:
    """The version ``/info`` reports: agui-engine's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agui-engine")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


def _admits(routes: RuntimeAgentRoutes, authorization: str | None) -> bool:
    try:
        check_bearer(authorization, routes.auth)
    except AguiEngineError:
        return False
    return True


def _error(exc: AguiEngineError) -> web.Response:
    return web.json_response(exc.to_json(), status=exc.http_status, headers={"Cache-Control": "no-store"})


def add_runtime_routes(app: web.Application, path: str, agents: Mapping[str, RuntimeAgentRoutes], *,
                       single_endpoint: bool = False) -> SingleRouteHandler:
    """Serve CopilotKit's runtime routes for ``agents`` (id -> routes) under ``path`` of ``app``;
    with ``single_endpoint`` also ``POST <path>``, the single-endpoint form (a several-agent
    gateway; a one-agent gateway's own run handler passes envelopes to the dispatcher returned)."""
    if not agents:
        raise UsageError("add_runtime_routes: no agents")
    base = path.rstrip("/")

    def agent_of(request: web.Request) -> RuntimeAgentRoutes:
        agent_id = request.match_info["agent_id"]
        routes = agents.get(agent_id)
        if routes is None:
            raise UnknownAgentError(f"no agent {agent_id!r} here; GET {base}/info lists them")
        return routes

    async def info(request: web.Request) -> web.StreamResponse:
        authorization = request.headers.get("Authorization")
        if not any(_admits(r, authorization) for r in agents.values()):
            try:  # the caller's token opens no agent: the gateway's own 401 words
                check_bearer(authorization, next(iter(agents.values())).auth)
            except AguiEngineError as exc:
                return _error(exc)
        listed: dict[str, Any] = {}
        a2ui = False
        for agent_id, routes in agents.items():
            if not _admits(routes, authorization):
                continue
            entry: dict[str, Any] = {"name": agent_id, "description": routes.description, "className": "agui-engine"}
            try:
                caps = await routes.capabilities()
            except AguiEngineError:
                caps = None  # as CopilotKit's runtime does: an agent whose capabilities fail is listed without
            if caps is not None:
                entry["capabilities"] = msgspec.json.decode(encode_capabilities(caps))
                tools = caps.tools.items if caps.tools is not None and caps.tools.items else []
                a2ui = a2ui or any(t.name == "render_a2ui" for t in tools)
            listed[agent_id] = entry
        doc = {
            "version": runtime_version(),
            "agents": listed,
            "audioFileTranscriptionEnabled": False,
            "mode": "sse",
            "threadEndpoints": {"list": False, "inspect": False, "mutations": False, "realtimeMetadata": False},
            "suggestions": False,
            "a2uiEnabled": a2ui,
            **({"a2ui": {"enabled": True}} if a2ui else {}),
            "openGenerativeUIEnabled": False,
            "telemetryDisabled": True,
        }
        return web.json_response(doc, headers={"Cache-Control": "no-store"})

    def routed(pick: Callable[[RuntimeAgentRoutes, web.Request], Awaitable[web.StreamResponse]]) -> _Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                routes = agent_of(request)
            except AguiEngineError as exc:
                return _error(exc)
            return await pick(routes, request)

        return handle

    run = routed(lambda routes, request: routes.run(request, None))
    connect = routed(lambda routes, request: routes.connect(request, None))
    stop = routed(lambda routes, request: routes.stop(request, request.match_info["thread_id"], None))

    async def single(request: web.Request, call: SingleRouteCall) -> web.StreamResponse:
        """One single-endpoint envelope, answered as its REST route."""
        try:
            if call.method == "info":
                return await info(request)
            if call.method not in _METHODS:
                raise UnknownRuntimeMethodError(
                    f"single-endpoint method {call.method!r} is not served here; the methods are {', '.join(_METHODS)}")
            agent_id = _param(call, "agentId")
            routes = agents.get(agent_id)
            if routes is None:
                raise UnknownAgentError(f"no agent {agent_id!r} here; the method info lists them")
            body = bytes(call.body)
            if call.method == "agent/stop":
                return await routes.stop(request, _param(call, "threadId"), body)
            if not body:
                raise RemoteInputError(f"single-endpoint call {call.method!r}: body, the RunAgentInput, is missing")
            return await (routes.run if call.method == "agent/run" else routes.connect)(request, body)
        except AguiEngineError as exc:
            return _error(exc)

    async def single_post(request: web.Request) -> web.StreamResponse:
        try:
            call = single_route_call(await next(iter(agents.values())).read_body(request))
            if call is None:
                raise RemoteInputError(
                    f"POST {base or '/'} is CopilotKit's single endpoint: the body must be {{method, params, body}}; "
                    f"runs go to an agent's own path or to {base}/agent/<id>/run")
        except AguiEngineError as exc:
            return _error(exc)
        return await single(request, call)

    app.router.add_get(base + "/info", info)
    app.router.add_post(base + "/agent/{agent_id}/run", run)
    app.router.add_post(base + "/agent/{agent_id}/connect", connect)
    app.router.add_post(base + "/agent/{agent_id}/stop/{thread_id}", stop)
    routes_paths = ["/info", "/agent/{agent_id}/run", "/agent/{agent_id}/connect", "/agent/{agent_id}/stop/{thread_id}"]
    if single_endpoint:
        app.router.add_post(base or "/", single_post)
    # CORS: a page on another origin (a dev server) preflights its JSON POSTs and reads /info
    cors = next((r for r in agents.values() if r.preflight is not None), None)
    if cors is not None and cors.preflight is not None:
        for route in routes_paths:
            app.router.add_route("OPTIONS", base + route, cors.preflight)
        if single_endpoint:
            app.router.add_route("OPTIONS", base or "/", cors.preflight)
        if cors.cors_headers is not None and cors.cors_headers not in app.on_response_prepare:
            app.on_response_prepare.append(cors.cors_headers)
    return single

