"""The gateway's routes added to an existing FastAPI app or APIRouter, with its dependencies.

Theory of operation
-------------------
``app.mount("/agui", create_asgi_app(agent))`` serves the gateway beside an app's own routes,
but a mounted ASGI app is outside FastAPI's routing: the app's dependencies (its auth, its
rate limits) do not run for it. :func:`add_agui_routes` adds each route of the gateway to the
app or router instead (``include_in_schema=False``: AG-UI is not an OpenAPI operation), with
the ``dependencies`` given, under ``prefix``. Each route's endpoint reads no body (the gateway
reads it, with its own limits) and returns a response that hands the request to the
:class:`~transports.asgi_server.AsgiGateway`: the handling is the same as anywhere else.

``auth``: a FastAPI dependency that authenticates the caller and returns its principal (a str,
or None for an anonymous caller) or raises (``HTTPException(401)``): the gateway then trusts
it and checks no bearer token; the principal owns the runs it starts (resume, cancel and
history answer 404 to other principals), as a token's principal does.

FastAPI (and Starlette) are imported when this function is called, never by
``import agui_engine.transports``. A router's shutdown handler ends the runs still going
(``RUN_ERROR{shutdown}``) when the app stops; an app with a ``lifespan`` of its own calls
``await gateway.close()`` there instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Unpack

from agui_engine.protocol.agent import Agent, AgentFunction

from .asgi_server import PRINCIPAL_SCOPE_KEY, AsgiGateway, create_asgi_app
from .http_gateway import AppKeywords

__all__ = ["ROUTES", "add_agui_routes"]

#: The gateway's routes below its prefix: (FastAPI path, methods, the path parameter).
ROUTES: Sequence[tuple[str, tuple[str, ...], str | None]] = (
    ("", ("POST", "OPTIONS"), None),
    ("/runs/{run_id}", ("GET", "HEAD", "DELETE", "OPTIONS"), "run_id"),
    ("/threads", ("GET", "HEAD", "OPTIONS"), None),
    ("/threads/{thread_id}", ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"), "thread_id"),
    ("/data/query", ("POST", "OPTIONS"), None),
    ("/capabilities", ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"), None),
    ("/healthz", ("GET", "HEAD"), None),
    ("/readyz", ("GET", "HEAD"), None),
    ("/metrics", ("GET", "HEAD"), None),
    ("/static/{name}", ("GET", "HEAD"), "name"),
    ("/inspect", ("GET", "HEAD"), None),
    ("/inspect/verify", ("POST",), None),
)


def add_agui_routes(
    router: Any,
    agent: Agent | AgentFunction | None = None,
    *,
    prefix: str = "",
    dependencies: Sequence[Any] = (),
    auth: Callable[..., Any] | None = None,
    gateway: AsgiGateway | None = None,
    **options: Unpack[AppKeywords],
) -> AsgiGateway:
    """Add the gateway of ``agent`` to ``router`` (a FastAPI app or an APIRouter) under
    ``prefix``, each route with ``dependencies`` (``Depends(...)`` values) and, with ``auth``,
    the caller authenticated by that dependency (see the module docstring). ``options``:
    :func:`~transports.asgi_server.create_asgi_app`'s; ``gateway``: an existing one instead.
    Returns the gateway (``registry``, ``drain``, ``close``). Raises UsageError as
    ``create_app`` does, and when ``prefix`` does not start with ``/`` (or is not empty)."""
    from fastapi import Depends, Request
    from starlette.responses import Response
    from starlette.types import Receive, Scope, Send

    from agui_engine.protocol.errors import UsageError

    if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
        raise UsageError(f"add_agui_routes: prefix must start with / and not end with one, got {prefix!r}")
    if gateway is None:
        gateway = create_asgi_app(agent, **options)
    elif agent is not None or options:
        raise UsageError("add_agui_routes: give an agent and options, or a gateway, not both")
    served = gateway

    class _Delegate(Response):
        """Hands the request to the gateway (the endpoint read no body)."""

        def __init__(self, subpath: str, principal: Any, authenticated: bool) -> None:
            super().__init__()
            self.subpath = subpath
            self.principal = principal
            self.authenticated = authenticated

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if self.authenticated:
                principal = self.principal if isinstance(self.principal, str) or self.principal is None else str(self.principal)
                scope = {**scope, PRINCIPAL_SCOPE_KEY: {"principal": principal}}
            await served.handle(scope, receive, send, self.subpath)

    def endpoint_for(template: str, param: str | None) -> Callable[..., Any]:
        head = template.split("{")[0]

        def subpath(request: Request) -> str:
            return head + request.path_params[param] if param is not None else template

        async def anonymous(request: Request) -> Response:
            return _Delegate(subpath(request), None, False)

        async def authenticated(request: Request, principal: Any = Depends(auth)) -> Response:  # noqa: B008 - FastAPI's idiom
            return _Delegate(subpath(request), principal, True)

        # this module's annotations are strings (PEP 563) and Request is a local name: FastAPI
        # reads the parameters from these real objects instead
        anonymous.__annotations__ = {"request": Request, "return": Response}
        authenticated.__annotations__ = {"request": Request, "principal": Any, "return": Response}
        return anonymous if auth is None else authenticated

    for template, methods, param in ROUTES:
        router.add_api_route(prefix + template if prefix or template else "/", endpoint_for(template, param),
                             methods=list(methods), dependencies=list(dependencies), include_in_schema=False,
                             response_class=Response)
    router.add_event_handler("shutdown", served.close)
    return served
