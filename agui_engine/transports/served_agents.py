"""Several agents behind one HTTP gateway, whatever the front end: which agent is where and who may
use it (the aiohttp binding is :mod:`~transports.agents_app`, the ASGI one
:mod:`~transports.asgi_server`; the same table, checks and answers).

:func:`plan_agents` checks a mapping id -> agent (or :class:`ServedAgent`) and places each agent:
its path below the gateway's (default ``/<id>``) and the bearer tokens it admits (an agent with
``principals`` admits only the tokens of those principals: :class:`AllowedTokens`, a live view of
the gateway's token -> principal mapping, so a tokens file re-read applies at once).
:func:`readiness` is the gateway's own ``GET <path>/readyz`` over every agent's registry
and :func:`health` its ``GET <path>/healthz`` (``{"status": "ok"}``: the process answers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Final, NamedTuple

import msgspec

from agui_engine.protocol.agent import Agent, AgentFunction
from agui_engine.protocol.errors import UsageError

from .http_gateway import Answer
from .runs import RunRegistry

__all__ = ["AGENT_ID_PATTERN", "AgentPlace", "AllowedTokens", "ServedAgent", "health", "plan_agents", "readiness"]

#: What an agent id may be: one URL path segment, no escaping needed.
AGENT_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


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


class AgentPlace(NamedTuple):
    """Where one agent of the gateway is: its id, its path (the gateway's path + the agent's), the
    agent as given, and the bearer tokens it admits (``auth_token`` of its own gateway)."""

    agent_id: str
    prefix: str
    served: ServedAgent
    auth_token: str | Mapping[str, str] | None


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


def plan_agents(agents: Mapping[str, Agent | AgentFunction | ServedAgent], *, path: str = "/",
                auth_token: str | Mapping[str, str] | None = None,
                keywords: Mapping[str, Any] | None = None) -> list[AgentPlace]:
    """Each agent of ``agents`` placed (see the module docstring). Raises UsageError for no agents,
    a bad id or path, two agents at one path, ``principals`` without a token -> principal mapping,
    or one of ``keywords`` (the gateway's other options) that is one agent's (``registry``, ``log``)."""
    if not agents:
        raise UsageError("create_app: the mapping of agents is empty; give at least one id -> agent")
    for one_agent in ("registry", "log"):
        if (keywords or {}).get(one_agent) is not None:
            raise UsageError(
                f"create_app: {one_agent}= is for one agent; with several, each keeps its own runs in memory"
            )
    base = path.rstrip("/")
    places: list[AgentPlace] = []
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
        places.append(AgentPlace(agent_id, prefix, served, tokens))
    return places


def health() -> Answer:
    """``GET <path>/healthz`` of a several-agent gateway: the process answers."""
    return Answer(200, {"Cache-Control": "no-store", "Content-Type": "application/json"}, b'{"status": "ok"}')


async def readiness(registries: Mapping[str, RunRegistry]) -> Answer:
    """``GET <path>/readyz`` of a several-agent gateway: ready when every agent is (200, else 503),
    ``agents``: each one's ``{ready, draining, activeRuns}``."""
    docs = {}
    for agent_id, registry in registries.items():
        docs[agent_id] = {"ready": await registry.ready(), "draining": registry.draining,
                          "activeRuns": registry.active}
    ready = all(doc["ready"] for doc in docs.values())
    return Answer(200 if ready else 503, {"Cache-Control": "no-store", "Content-Type": "application/json"},
                  json.dumps({"ready": ready, "agents": docs}).encode())
