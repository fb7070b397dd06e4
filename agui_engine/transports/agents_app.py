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

Access: ``auth_token`` applies to every agent; an agent given ``principals`` (a
:class:`ServedAgent`) answers only the tokens of those principals (``auth_token`` must then
be a token -> principal mapping): any other token is refused as unknown (401), so an agent a
principal may not use is indistinguishable from one that is not there. The view over the
mapping is live: a tokens file re-read on SIGHUP applies to every agent at once.

Runs live in each agent's registry, so a run id is per agent; the agents share the process's
metrics (one ``GatewayMetrics``). An event log shared between nodes (``log=``) is for one
agent: several agents each keep their runs in memory (UsageError otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final

import msgspec
from aiohttp import web

from agui_engine.protocol.agent import Agent, AgentFunction
from agui_engine.protocol.errors import UsageError

from .runs import RunRegistry
from .runtime_routes import RUNTIME_ROUTES_KEY, RuntimeAgentRoutes, add_runtime_routes

__all__ = [
    "AGENT_ID_PATTERN",
    "AGENT_REGISTRIES_KEY",
    "AllowedTokens",
    "ServedAgent",
    "create_agents_app",
]

#: What an agent id may be: one URL path segment, no escaping needed.
AGENT_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: The app key of the agents' run registries, by id (the CLI drains them all on SIGTERM).
AGENT_REGISTRIES_KEY: Final = web.AppKey("agent_registries", dict[str, RunRegistry])


class ServedAgent(msgspec.Struct, frozen=True, kw_only=True):
    """One agent of a several-agent gateway: the agent, its ``path`` (None: ``/<id>``), the
    ``principals`` that may use it (None: every caller the gateway's auth admits) and a
    ``description`` (listed by ``/info``)."""

    agent: Any
    path: str | None = None
    principals: frozenset[str] | None = None
    description: str = ""


class AllowedTokens(Mapping[str, str]):
    """The entries of a token -> principal mapping whose principal is in ``principals``: a live
    view (a change to ``tokens`` shows at once), what an agent with principals checks bearer
    tokens against."""

    def __init__(self, tokens: Mapping[str, str], principals: Collection[str]) -> None:
        self.tokens = tokens
        self.principals = frozenset(principals)

    def __getitem__(self, token: str) -> str:
        principal = self.tokens[token]
        if principal not in self.principals:
            raise KeyError(token)
        return principal

    def __iter__(self) -> Iterator[str]:
        return (t for t, p in list(self.tokens.items()) if p in self.principals)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _served(agent_id: str, value: Agent | AgentFunction | ServedAgent) -> ServedAgent:
    if not isinstance(agent_id, str) or not AGENT_ID_PATTERN.fullmatch(agent_id):
        raise UsageError(
            f"agent id {agent_id!r}: use letters, digits, '_', '-' or '.' (one URL path segment, at most 64 characters)"
        )
    return value if isinstance(value, ServedAgent) else ServedAgent(agent=value)


def _agent_path(agent_id: str, served: ServedAgent) -> str:
    path = served.path if served.path is not None else "/" + agent_id
    if not path.startswith("/") or path.rstrip("/") == "" or "{" in path or "}" in path:
        raise UsageError(f"agent {agent_id!r}: path {path!r} must start with '/' and name a place below the root")
    return path.rstrip("/")


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
    its caller so that this module does not import the one that imports it. Raises UsageError for
    no agents, a bad id or path, two agents at one path, ``principals`` without a token ->
    principal mapping, or a keyword that is one agent's (``registry``, ``log``)."""
    if not agents:
        raise UsageError("create_app: the mapping of agents is empty; give at least one id -> agent")
    for one_agent in ("registry", "log"):
        if keywords.get(one_agent) is not None:
            raise UsageError(
                f"create_app: {one_agent}= is for one agent; with several, each keeps its own runs in memory"
            )
    base = path.rstrip("/")
    parent = web.Application()
    registries: dict[str, RunRegistry] = {}
    runtime: dict[str, RuntimeAgentRoutes] = {}
    seen: dict[str, str] = {}
    for agent_id, value in agents.items():
        served = _served(agent_id, value)
        prefix = base + _agent_path(agent_id, served)
        if prefix in seen:
            raise UsageError(f"agents {seen[prefix]!r} and {agent_id!r} are both at {prefix}: give each its own path")
        seen[prefix] = agent_id
        tokens: str | Mapping[str, str] | None = auth_token
        if served.principals is not None:
            if not isinstance(auth_token, Mapping):
                raise UsageError(
                    f"agent {agent_id!r} names principals, which needs tokens by principal "
                    "(auth_token={token: principal}, serve --auth-tokens-file)"
                )
            tokens = AllowedTokens(auth_token, served.principals)
        sub = one_app(served.agent, path="", auth_token=tokens, **keywords)
        registries[agent_id] = sub[registry_key]
        runtime[agent_id] = sub[RUNTIME_ROUTES_KEY]._replace(description=served.description)
        parent.add_subapp(prefix, sub)
    parent[AGENT_REGISTRIES_KEY] = registries

    async def healthz(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "ok"}, headers={"Cache-Control": "no-store"})

    async def readyz(request: web.Request) -> web.StreamResponse:
        docs = {}
        for agent_id, registry in registries.items():
            docs[agent_id] = {"ready": await registry.ready(), "draining": registry.draining,
                              "activeRuns": registry.active}
        ready = all(doc["ready"] for doc in docs.values())
        return web.json_response({"ready": ready, "agents": docs}, status=200 if ready else 503,
                                 headers={"Cache-Control": "no-store"})

    parent.router.add_get(base + "/healthz", healthz)
    parent.router.add_get(base + "/readyz", readyz)
    # CopilotKit's /info, /agent/<id>/run, connect, stop, and its single endpoint (POST <path>)
    add_runtime_routes(parent, path, runtime, single_endpoint=True)
    return parent
