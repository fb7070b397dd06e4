"""Several agents behind one HTTP gateway, each at its own path, routed by id.

Theory of operation
-------------------
:func:`create_agents_app` (``create_app({id: agent, ...})`` calls it) builds one aiohttp
application with one sub-application per agent: each is exactly the one-agent gateway
(:func:`~transports.sse_server.create_app` with ``path=""``), mounted at the agent's path
(default ``/<id>``, under the app's ``path``). So every agent keeps its own run registry (its
runs, limits, resume, history, capabilities document, data resources, MCP status) and every
route of the one-agent gateway works under its prefix::

    POST <path>/<id>                   a run of agent <id>
    GET  <path>/<id>/runs/<runId>      resume it; DELETE cancels it
    GET  <path>/<id>/threads/<thread>  its thread history
    GET  <path>/<id>/capabilities      its AgentCapabilities
    POST <path>/<id>/data/query, GET <path>/<id>/readyz, /healthz, /metrics, /static/..., /inspect

and the app itself answers ``GET <path>/healthz`` and ``GET <path>/readyz`` (ready when every
agent is; ``agents``: each one's document), and CopilotKit's runtime routes for every agent by id
(``GET <path>/info``, ``POST <path>/agent/<id>/run|connect|stop/<threadId>``: runtime_routes.py).

Which agent is where and who may use it is :mod:`~transports.served_agents`' (shared with the ASGI
front end, ``create_asgi_app({id: agent})``). Access: ``auth_token`` applies to every agent; an agent given ``principals`` (a
:class:`ServedAgent`) answers only the tokens of those principals (``auth_token`` must then
be a token -> principal mapping): any other token is refused as unknown (401), so an agent a
principal may not use is indistinguishable from one that is not there. The view over the
mapping is live: a tokens file re-read on SIGHUP applies to every agent at once.

Runs live in each agent's registry, so a run id is per agent; the agents share the process's
metrics (one ``GatewayMetrics``). An event log shared between nodes (``log=``) is for one
agent: several agents each keep their runs in memory (UsageError otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from aiohttp import web

from agui_engine.protocol.agent import Agent, AgentFunction

from .http_gateway import Answer, HttpGateway
from .runs import RunRegistry
from .runtime_aiohttp import RUNTIME_FRONT_KEY, RuntimeFront, add_runtime_routes
from .runtime_routes import RuntimeAgent, RuntimeRouter
from .served_agents import AGENT_ID_PATTERN, AllowedTokens, ServedAgent, health, plan_agents, readiness

__all__ = [
    "AGENT_ID_PATTERN",
    "AGENT_REGISTRIES_KEY",
    "AllowedTokens",
    "ServedAgent",
    "create_agents_app",
]

#: The app key of the agents' run registries, by id (the CLI drains them all on SIGTERM).
AGENT_REGISTRIES_KEY: Final = web.AppKey("agent_registries", dict[str, RunRegistry])


def _response(answer: Answer) -> web.Response:
    return web.Response(status=answer.status, headers=answer.headers, body=answer.body)


def create_agents_app(
    agents: Mapping[str, Agent | AgentFunction | ServedAgent],
    *,
    one_app: Callable[..., web.Application],
    registry_key: web.AppKey[RunRegistry],
    path: str = "/",
    auth_token: str | Mapping[str, str] | None = None,
    **keywords: Any,
) -> web.Application:
    """One application serving every agent of ``agents`` (id -> agent or :class:`ServedAgent`),
    each as the one-agent gateway at its path (see the module docstring). ``keywords`` are
    :func:`~transports.sse_server.create_app`'s, applied to every agent; ``one_app`` is that
    function (the one-agent gateway, whose app keeps its registry at ``registry_key``), given by
    its caller so that this module does not import the one that imports it. Raises UsageError as
    :func:`~transports.served_agents.plan_agents` does."""
    places = plan_agents(agents, path=path, auth_token=auth_token, keywords=keywords)
    base = path.rstrip("/")
    parent = web.Application()
    registries: dict[str, RunRegistry] = {}
    runtime: dict[str, RuntimeAgent] = {}
    fronts: dict[HttpGateway, RuntimeFront] = {}
    for place in places:
        sub = one_app(place.served.agent, path="", auth_token=place.auth_token, **keywords)
        registries[place.agent_id] = sub[registry_key]
        front = sub[RUNTIME_FRONT_KEY]
        runtime[place.agent_id] = RuntimeAgent(front.core, place.served.description)
        fronts[front.core] = front
        parent.add_subapp(place.prefix, sub)
    parent[AGENT_REGISTRIES_KEY] = registries

    async def healthz(request: web.Request) -> web.StreamResponse:
        return _response(health())

    async def readyz(request: web.Request) -> web.StreamResponse:
        return _response(await readiness(registries))

    parent.router.add_get(base + "/healthz", healthz)
    parent.router.add_get(base + "/readyz", readyz)
    # CopilotKit's /info, /agent/<id>/run, connect, stop, and its single endpoint (POST <path>)
    add_runtime_routes(parent, path, RuntimeRouter(runtime, single_endpoint=True), fronts)
    return parent
