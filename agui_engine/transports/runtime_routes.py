"""CopilotKit's runtime protocol (REST form), served by the gateway itself: a CopilotKit page sets
``runtimeUrl`` to the gateway and needs no Node ``CopilotRuntime``.

Theory of operation
-------------------
``@copilotkit/core`` 1.74 (what ``@copilotkit/react-core`` runs in the page) talks to a runtime
through ``ProxiedCopilotRuntimeAgent``: with its default ``"auto"`` transport it asks
``GET <runtimeUrl>/info`` first (REST; only when that fails does it try the single-endpoint
form, ``POST <runtimeUrl> {method: "info"}``, which is not served here), then::

    GET  <path>/info                        the runtime's description: {version, agents: {id: {name,
                                            description, className, capabilities}}, a2uiEnabled, ...}
    POST <path>/agent/<id>/run              a run: the body is a RunAgentInput, the answer the SSE
                                            stream (exactly POST <agent path>, wire negotiation included)
    POST <path>/agent/<id>/connect          reattach to thread ``threadId`` (the body's): its kept
                                            history replayed as SSE (compacted), then the stream ends;
                                            an empty stream when there is none the caller may read
    POST <path>/agent/<id>/stop/<threadId>  stop the thread's run ``runId`` (the body's): {stopped}

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

__all__ = ["DEFAULT_AGENT_ID", "RUNTIME_ROUTES_KEY", "RuntimeAgentRoutes", "UnknownAgentError", "add_runtime_routes",
           "runtime_version"]

#: The agent id a one-agent gateway answers to (CopilotKit's ``useAgent()`` default).
DEFAULT_AGENT_ID: Final = "default"

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RuntimeAgentRoutes(NamedTuple):
    """One agent's handlers of the runtime routes (its gateway's), its description, the bearer
    tokens it admits (``check_bearer``'s ``expected``) and how to read its capabilities."""

    run: _Handler
    connect: _Handler
    stop: Callable[[web.Request, str], Awaitable[web.StreamResponse]]
    capabilities: Callable[[], Awaitable[AgentCapabilities]]
    auth: str | Mapping[str, str] | None
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


def add_runtime_routes(app: web.Application, path: str, agents: Mapping[str, RuntimeAgentRoutes]) -> None:
    """Serve CopilotKit's runtime routes for ``agents`` (id -> routes) under ``path`` of ``app``."""
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

    run = routed(lambda routes, request: routes.run(request))
    connect = routed(lambda routes, request: routes.connect(request))
    stop = routed(lambda routes, request: routes.stop(request, request.match_info["thread_id"]))

    app.router.add_get(base + "/info", info)
    app.router.add_post(base + "/agent/{agent_id}/run", run)
    app.router.add_post(base + "/agent/{agent_id}/connect", connect)
    app.router.add_post(base + "/agent/{agent_id}/stop/{thread_id}", stop)
    # CORS: a page on another origin (a dev server) preflights its JSON POSTs and reads /info
    cors = next((r for r in agents.values() if r.preflight is not None), None)
    if cors is not None and cors.preflight is not None:
        for route in ("/info", "/agent/{agent_id}/run", "/agent/{agent_id}/connect", "/agent/{agent_id}/stop/{thread_id}"):
            app.router.add_route("OPTIONS", base + route, cors.preflight)
        if cors.cors_headers is not None and cors.cors_headers not in app.on_response_prepare:
            app.on_response_prepare.append(cors.cors_headers)

