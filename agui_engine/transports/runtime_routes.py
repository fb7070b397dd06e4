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

Each agent's routes are the handlers of its own gateway (:class:`RuntimeAgent`: its
:class:`~transports.http_gateway.HttpGateway`), so its auth, limits, wire, MCP Apps proxied requests
and A2UI actions (both are runs) apply unchanged. :class:`RuntimeRouter` is the whole logic, on the
shared :class:`~transports.http_gateway.GatewayRequest` / ``Answer`` / ``StreamStart``: it names the
route of a method and path (:meth:`RuntimeRouter.route`) and answers it (:meth:`RuntimeRouter.answer`,
which also says whose gateway writes a stream). The front ends only bind it: aiohttp
(``sse_server.add_runtime_routes``, ``agents_app``) and ASGI (``asgi_server``), the same answers. A one-agent gateway serves its agent as ``default`` (CopilotKit's default
agent id); ``create_app({id: agent})`` serves every agent by its id. An agent another principal
may not use is left out of that principal's ``/info`` and answers its routes 401, as at its path.

With CORS on (``cors_origins``), the four routes answer the browser's preflight (OPTIONS) and
carry the CORS headers, as the agent path does: a page served from another origin works.

Nothing here parses a run or imports a web framework: the agents' gateways and the front ends do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import msgspec

from agui_engine.protocol.capabilities import encode_capabilities
from agui_engine.protocol.errors import AguiEngineError, RemoteInputError, UsageError

from .bearer_auth import check_bearer
from .capabilities import served_capabilities
from .http_gateway import Answer, GatewayRequest, HttpGateway, StreamStart, error_answer

__all__ = ["DEFAULT_AGENT_ID", "RUNTIME_PATHS", "RuntimeAgent", "RuntimeAnswer", "RuntimeRoute", "RuntimeRouter",
           "SingleRouteCall", "UnknownAgentError", "UnknownRuntimeMethodError", "runtime_version", "single_route_call",
           "with_body"]

#: The agent id a one-agent gateway answers to (CopilotKit's ``useAgent()`` default).
DEFAULT_AGENT_ID: Final = "default"

#: The REST routes below the runtime's path (aiohttp's route syntax; the ASGI front end matches
#: them with :meth:`RuntimeRouter.route`), each answered by the :class:`RuntimeRoute` named alike.
RUNTIME_PATHS: Final = {
    "info": "/info",
    "run": "/agent/{agent_id}/run",
    "connect": "/agent/{agent_id}/connect",
    "stop": "/agent/{agent_id}/stop/{thread_id}",
}


class RuntimeAgent(NamedTuple):
    """One agent of the runtime routes: its gateway and its description (listed by ``/info``)."""

    core: HttpGateway
    description: str = ""


class RuntimeRoute(NamedTuple):
    """A runtime route of a request: ``name`` (``info``, ``run``, ``connect``, ``stop``, ``single``
    -- the single endpoint -- or ``preflight``), the ``agent_id`` and ``thread_id`` of its path."""

    name: str
    agent_id: str | None = None
    thread_id: str | None = None


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


def _admits(core: HttpGateway, authorization: str | None) -> bool:
    try:
        check_bearer(authorization, core.auth_token)
    except AguiEngineError:
        return False
    return True


async def _given(body: bytes) -> Any:
    yield body


def with_body(req: GatewayRequest, body: bytes) -> GatewayRequest:
    """``req`` whose body is ``body`` (read already: a single-endpoint envelope's, or the probe's)."""
    return GatewayRequest(req.method, req.path, req.headers, req.query, content_length=len(body), peer=req.peer,
                          chunks=lambda: _given(body), principal=req.principal, authenticated=req.authenticated)


#: What :meth:`RuntimeRouter.answer` returns: whose gateway answered (a front end writes a stream
#: through that gateway's ``pump``) and the answer.
RuntimeAnswer = tuple[HttpGateway, Answer | StreamStart]


class RuntimeRouter:
    """CopilotKit's runtime routes over ``agents`` (id -> :class:`RuntimeAgent`), whatever the
    front end: :meth:`route` names a request's route, :meth:`answer` answers it. ``single_endpoint``:
    ``POST <path>`` is the single endpoint (a several-agent gateway; a one-agent gateway's run
    handler gives envelopes POSTed to its path to :meth:`post`). Raises UsageError for no agents."""

    def __init__(self, agents: Mapping[str, RuntimeAgent], *, single_endpoint: bool = False) -> None:
        if not agents:
            raise UsageError("RuntimeRouter: no agents")
        self.agents = dict(agents)
        self.single_endpoint = single_endpoint
        first = next(iter(self.agents.values())).core
        #: The gateway whose CORS policy the routes follow (the first with CORS on; None: off).
        self.cors: HttpGateway | None = next((a.core for a in self.agents.values() if a.core.cors), None)
        self._first = first

    def route(self, method: str, subpath: str) -> RuntimeRoute | None:
        """The runtime route of ``method`` on ``subpath`` (below the runtime's path, no trailing
        ``/``), or None when it is not one (the front end routes it on)."""
        parts = subpath.split("/")
        found: RuntimeRoute | None = None
        if subpath == "/info":
            found = RuntimeRoute("info")
        elif len(parts) == 4 and parts[1] == "agent" and parts[2] and parts[3] in ("run", "connect"):
            found = RuntimeRoute(parts[3], parts[2])
        elif len(parts) == 5 and parts[1] == "agent" and parts[2] and parts[3] == "stop" and parts[4]:
            found = RuntimeRoute("stop", parts[2], parts[4])
        elif subpath == "" and self.single_endpoint:
            found = RuntimeRoute("single")
        if found is None:
            return None
        if method == "OPTIONS" and self.cors is not None:
            return RuntimeRoute("preflight")
        if method != ("GET" if found.name == "info" else "POST") and not (found.name == "info" and method == "HEAD"):
            return None
        return found

    def _agent(self, agent_id: str | None, listed_by: str) -> RuntimeAgent:
        agent = self.agents.get(agent_id or "")
        if agent is None:
            raise UnknownAgentError(f"no agent {agent_id!r} here; {listed_by} lists them")
        return agent

    async def answer(self, route: RuntimeRoute, req: GatewayRequest) -> RuntimeAnswer:
        """The answer to ``req`` on ``route`` (refusals included: never raises AguiEngineError)."""
        try:
            if route.name == "preflight":
                core = self.cors or self._first
                return core, core.preflight(req.headers.get("Origin"))
            if route.name == "info":
                return self._first, await self.info(req)
            if route.name == "single":
                call = single_route_call(await self._first.read_body(req))
                if call is None:
                    raise RemoteInputError(
                        "this is CopilotKit's single endpoint: the body must be {method, params, body}; "
                        "runs go to an agent's own path or to <path>/agent/<id>/run")
                return await self.dispatch(req, call)
            core = self._agent(route.agent_id, "GET <path>/info").core
            if route.name == "run":
                return core, await core.post(req)
            if route.name == "connect":
                return core, await core.runtime_connect(req)
            return core, await core.runtime_stop(req, route.thread_id or "")
        except AguiEngineError as exc:
            return self._first, error_answer(exc)

    async def post(self, core: HttpGateway, req: GatewayRequest) -> RuntimeAnswer:
        """A run POSTed to a one-agent gateway's path (``core``'s), which is also CopilotKit's single
        endpoint there: an envelope ``{method, params, body}`` is dispatched, anything else is the run."""
        try:
            core.principal(req)  # 401 before the body is read, as a run answers
            body = await core.read_body(req)
            call = single_route_call(body)
        except AguiEngineError as exc:
            return core, error_answer(exc, core.metrics)
        if call is not None:
            return await self.dispatch(req, call)
        return core, await core.post(with_body(req, body))

    async def dispatch(self, req: GatewayRequest, call: SingleRouteCall) -> RuntimeAnswer:
        """One single-endpoint envelope, answered as its REST route."""
        try:
            if call.method == "info":
                return self._first, await self.info(req)
            if call.method not in _METHODS:
                raise UnknownRuntimeMethodError(
                    f"single-endpoint method {call.method!r} is not served here; the methods are {', '.join(_METHODS)}")
            core = self._agent(_param(call, "agentId"), "the method info").core
            body = bytes(call.body)
            if call.method == "agent/stop":
                return core, await core.runtime_stop(with_body(req, body), _param(call, "threadId"))
            if not body:
                raise RemoteInputError(f"single-endpoint call {call.method!r}: body, the RunAgentInput, is missing")
            handler = core.post if call.method == "agent/run" else core.runtime_connect
            return core, await handler(with_body(req, body))
        except AguiEngineError as exc:
            return self._first, error_answer(exc)

    async def info(self, req: GatewayRequest) -> Answer:
        """``GET <path>/info``: the agents the caller's token may use, their capabilities, A2UI."""
        authorization = req.headers.get("Authorization")
        if not any(_admits(a.core, authorization) for a in self.agents.values()):
            # the caller's token opens no agent: the gateway's own 401 words
            check_bearer(authorization, self._first.auth_token)
        listed: dict[str, Any] = {}
        a2ui = False
        for agent_id, agent in self.agents.items():
            if not _admits(agent.core, authorization):
                continue
            entry: dict[str, Any] = {"name": agent_id, "description": agent.description, "className": "agui-engine"}
            try:
                caps = await served_capabilities(agent.core.registry.agent, agent.core.transport)
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
        return Answer(200, {"Cache-Control": "no-store", "Content-Type": "application/json"},
                      msgspec.json.encode(doc))
