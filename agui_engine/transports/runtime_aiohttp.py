"""CopilotKit's runtime routes on an aiohttp application: the thin binding of
:class:`~transports.runtime_routes.RuntimeRouter` (the logic, shared with the ASGI front end).

:func:`add_runtime_routes` adds ``GET <path>/info`` and ``POST <path>/agent/<id>/run|connect|
stop/<threadId>`` (and ``POST <path>``, the single endpoint, when the router serves it; their
preflights when CORS is on) to an aiohttp application. Each request becomes the shared
:class:`~transports.http_gateway.GatewayRequest`, the router answers it, and the answering agent's
own aiohttp front end (:class:`RuntimeFront`: its ``reply``, which writes a stream with that
gateway's timers and backpressure) writes the answer. A one-agent gateway keeps its front at
:data:`RUNTIME_FRONT_KEY` of its application (``sse_server.create_app``); a several-agent one
(``agents_app``) gathers its agents' fronts from there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final, NamedTuple

from aiohttp import web

from .http_gateway import Answer, GatewayRequest, HttpGateway, StreamStart
from .runtime_routes import RUNTIME_PATHS, RuntimeRoute, RuntimeRouter

__all__ = ["RUNTIME_FRONT_KEY", "RuntimeFront", "add_runtime_routes"]


class RuntimeFront(NamedTuple):
    """One agent's aiohttp front end, as the runtime routes use it: its gateway, how a request
    becomes a :class:`~transports.http_gateway.GatewayRequest`, and how an answer is written."""

    core: HttpGateway
    request: Callable[[web.Request], GatewayRequest]
    reply: Callable[[web.Request, Answer | StreamStart], Awaitable[web.StreamResponse]]


#: The app key under which a one-agent gateway app keeps its :class:`RuntimeFront`.
RUNTIME_FRONT_KEY: Final = web.AppKey("runtime_front", RuntimeFront)


def add_runtime_routes(app: web.Application, path: str, router: RuntimeRouter,
                       fronts: Mapping[HttpGateway, RuntimeFront], *, cors_headers: bool = True) -> None:
    """Serve ``router``'s routes under ``path`` of ``app``; ``fronts``: each agent's front end, by
    its gateway. ``cors_headers``: add the CORS headers to the app's responses (when CORS is on;
    False when the app adds them already)."""
    base = path.rstrip("/")
    first = next(iter(fronts.values()))

    def handler(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            route = RuntimeRoute(name, request.match_info.get("agent_id"), request.match_info.get("thread_id"))
            core, answer = await router.answer(route, first.request(request))
            return await fronts.get(core, first).reply(request, answer)

        return handle

    app.router.add_get(base + RUNTIME_PATHS["info"], handler("info"))
    for name in ("run", "connect", "stop"):
        app.router.add_post(base + RUNTIME_PATHS[name], handler(name))
    if router.single_endpoint:
        app.router.add_post(base or "/", handler("single"))
    if router.cors is None:
        return
    # CORS: a page on another origin (a dev server) preflights its JSON POSTs and reads /info
    for route in RUNTIME_PATHS.values():
        app.router.add_route("OPTIONS", base + route, handler("preflight"))
    if router.single_endpoint:
        app.router.add_route("OPTIONS", base or "/", handler("preflight"))
    if cors_headers:
        cors = router.cors

        async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
            response.headers.update(cors.cors_headers(request.headers.get("Origin")))

        app.on_response_prepare.append(on_prepare)
