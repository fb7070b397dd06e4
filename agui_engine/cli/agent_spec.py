"""Turn an ``--agent`` spec string into an :class:`~agui_engine.protocol.agent.Agent`.

Theory of operation
-------------------
A spec is ``<scheme>:<rest>`` (or a bare scheme such as ``embedded``). The
scheme picks a row of :data:`SCHEMES`; the row names its *loader* as a
``"module:function"`` string, imported only when that scheme is used, so a spec
for one kind of agent never imports another kind's dependencies (``serve
--agent embedded`` loads no websockets, a LangGraph row loads langgraph only for
``langgraph:`` specs). A new kind of agent is one row here: its loader is any
function ``loader(spec, *, headers, pace_seconds) -> Agent`` that raises
:class:`~agui_engine.protocol.errors.UsageError` for a spec it cannot use.

Built-in rows (see :data:`SCHEMES` for the one-line help of each):

* ``embedded`` (the default) -- the demo agent over the embedded model: no
  network, no API key;
* ``http://...`` / ``https://...`` -- a remote AG-UI endpoint over SSE;
  ``ws://`` / ``wss://`` -- over WebSocket;
* ``stdio:<command>`` -- an AG-UI stdio server run as a subprocess (these three are the
  bare client agents; a server serves them inside the agent loop:
  ``transports.agent_host.serving_agent``);
* ``py:<module>:<name>`` -- an Agent object, or a zero-argument factory of one,
  importable from Python (your own agent without writing a server);
* ``langgraph:<module>:<name>`` -- a compiled LangGraph graph (or a zero-argument
  factory of one) behind :class:`~agui_engine.adapters.langgraph.LangGraphAgent`
  (the ``agui-engine[langgraph]`` extra), in the agent loop (client components);
* ``crewai:<module>:<name>`` -- a CrewAI ``Crew``, ``Flow`` class or
  ``factory(input)`` behind :class:`~agui_engine.adapters.crewai.CrewAIAgent`
  (the ``agui-engine[crewai]`` extra), in the agent loop.

A spec whose scheme is not a row is a model, ``<provider>:<model>``
(``openai:gpt-4o``, ``anthropic:...``), through
``agui_engine.adapters.models.client_from_spec``, driven by the LLM agent.

Every mistake raises :class:`~agui_engine.protocol.errors.UsageError` whose message says
what to write instead; nothing here prints.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, Protocol
from urllib.parse import urlsplit

from agui_engine.genui.a2ui_clients import A2UISnapshots
from agui_engine.protocol.agent import Agent, as_agent
from agui_engine.protocol.errors import UsageError

__all__ = [
    "AgentLoader",
    "CREWAI_OFFLINE_ENV",
    "SCHEMES",
    "Scheme",
    "URL_SCHEMES",
    "agent_from_spec",
    "check_url",
    "embedded_agent",
    "spec_help",
]


class AgentLoader(Protocol):
    """What a :data:`SCHEMES` row's loader is: the whole spec in, an Agent out."""

    def __call__(self, spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent: ...


class Scheme(NamedTuple):
    """One row of :data:`SCHEMES`: where the loader is and how to write the spec."""

    #: ``"module:function"`` of the :class:`AgentLoader`, imported on first use.
    loader: str
    #: How the spec is written, for help and error messages (``py:<module>:<name>``).
    usage: str


#: scheme -> row. The first ``:``-separated part of a spec is its scheme
#: (``http://h`` has scheme ``http``; ``embedded`` is a scheme on its own).
SCHEMES: Final[dict[str, Scheme]] = {
    "embedded": Scheme("agui_engine.cli.agent_spec:load_embedded", "embedded"),
    "http": Scheme("agui_engine.cli.agent_spec:load_sse", "http(s)://..."),
    "https": Scheme("agui_engine.cli.agent_spec:load_sse", "http(s)://..."),
    "ws": Scheme("agui_engine.cli.agent_spec:load_websocket", "ws(s)://..."),
    "wss": Scheme("agui_engine.cli.agent_spec:load_websocket", "ws(s)://..."),
    "stdio": Scheme("agui_engine.cli.agent_spec:load_stdio", "stdio:<command>"),
    "py": Scheme("agui_engine.cli.agent_spec:load_python", "py:<module>:<name>"),
    "langgraph": Scheme("agui_engine.cli.agent_spec:load_langgraph", "langgraph:<module>:<name>"),
    "crewai": Scheme("agui_engine.cli.agent_spec:load_crewai", "crewai:<module>:<name>"),
}

#: What a ``crewai:`` spec sets in the environment unless it is set (before crewai is
#: imported): no telemetry, no tracing prompt or upload, litellm's bundled model cost map
#: instead of a download -- a served crew reaches only the model it is given. Not
#: ``OTEL_SDK_DISABLED``: crewai's own switch is enough, and that one would turn off the
#: OpenTelemetry SDK of the whole process (``serve --otel`` would record nothing).
CREWAI_OFFLINE_ENV: Final = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}

#: The schemes of a remote AG-UI endpoint and the transport each means.
URL_SCHEMES: Final = {"http": "SSE", "https": "SSE", "ws": "WebSocket", "wss": "WebSocket"}

#: The row for a spec whose scheme is not in :data:`SCHEMES`: a provider model.
MODEL_SCHEME: Final = Scheme("agui_engine.cli.agent_spec:load_model", "<provider>:<model>")

#: A spec that starts like ``host:port`` (``127.0.0.1:8000``, ``localhost:8000``)
#: is a URL without its scheme, not a provider.
_HOST_PORT = re.compile(r"^(localhost|[0-9.]+|\[[0-9a-fA-F:]+\]|[\w.-]+\.[a-z]{2,}):\d+(/.*)?$")


def spec_help() -> str:
    """The spec forms, one comma-separated line (for ``--help``)."""
    forms = dict.fromkeys([row.usage for row in SCHEMES.values()] + [MODEL_SCHEME.usage])
    return ", ".join(forms)


def agent_from_spec(spec: str, *, pace_seconds: float = 0.0, headers: Mapping[str, str] | None = None) -> Agent:
    """The Agent ``spec`` names (see the module docstring). ``headers`` go to
    remote (HTTP/WebSocket) agents, ``pace_seconds`` to the embedded model.

    Raises UsageError naming the spec and what to write instead.
    """
    spec = spec.strip() or "embedded"
    scheme = spec.partition(":")[0]
    row = SCHEMES.get(scheme)
    if row is None:
        if _HOST_PORT.match(spec):
            raise UsageError(
                f"agent spec {spec!r} is a host without a scheme: write http://{spec} (SSE) or ws://{spec} (WebSocket)"
            )
        if ":" not in spec:
            raise UsageError(f"unknown agent spec {spec!r}: use {spec_help()}")
        row = MODEL_SCHEME
    module_name, _, function = row.loader.partition(":")
    loader: AgentLoader = getattr(importlib.import_module(module_name), function)
    return loader(spec, headers=dict(headers or {}), pace_seconds=pace_seconds)


# --------------------------------------------------------------------------- built-in loaders


def embedded_agent(pace_seconds: float = 0.0, *, ui_spec: bool = False, a2ui: bool | str | None = False,
                   a2ui_snapshots: A2UISnapshots = "auto") -> Agent:
    """The demo agent: the decision loop over the embedded model with the demo's
    components and its ``get_weather`` tool (and ``render_ui`` when ``ui_spec``,
    ``render_a2ui`` with the A2UI basic catalog when ``a2ui``, its progress as whole
    snapshots with ``a2ui_snapshots``)."""
    from .demo import demo_agent

    return demo_agent(pace_seconds=pace_seconds, ui_spec=ui_spec, a2ui=a2ui, a2ui_snapshots=a2ui_snapshots)


def load_embedded(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    if spec != "embedded":
        raise UsageError(f"agent spec {spec!r}: the embedded agent takes no options, write embedded")
    return embedded_agent(pace_seconds)


def load_sse(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    from agui_engine.transports.sse_client import SSEAgent

    return SSEAgent(check_url(spec), headers=headers)


def load_websocket(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    from agui_engine.transports.websocket_client import WebSocketAgent

    return WebSocketAgent(check_url(spec), headers=headers)


def check_url(url: str, *, what: str = "agent spec") -> str:
    """``url`` if it is an AG-UI endpoint URL (a scheme of :data:`URL_SCHEMES`, a host, a
    valid port); raises UsageError naming ``what`` and saying how to write it."""
    scheme, sep, rest = url.partition("://")
    if not (sep and scheme.lower() in URL_SCHEMES):
        bare = rest if sep else url
        raise UsageError(f"{what} {url!r} needs http:// (SSE) or ws:// (WebSocket): write http://{bare} or ws://{bare}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise UsageError(f"{what} {url!r} is not a URL ({exc}): write e.g. {scheme}://127.0.0.1:8000/") from None
    if not parts.hostname:
        raise UsageError(f"{what} {url!r} has no host: write e.g. {scheme}://127.0.0.1:8000/")
    return url


def load_stdio(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    from agui_engine.transports.stdio_client import StdioAgent

    command = spec[len("stdio:") :].strip()
    if not command:
        raise UsageError(f"agent spec {spec!r}: write stdio:<command>, e.g. stdio:agui-engine serve --transport stdio")
    return StdioAgent(command)


def load_model(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    from agui_engine.adapters.models import client_from_spec
    from agui_engine.adapters.provider import MissingAPIKeyError
    from agui_engine.loops.llm_agent import LLMAgent

    try:
        return LLMAgent(client_from_spec(spec))
    except MissingAPIKeyError as exc:  # the library's "pass api_key=" means nothing on a command line
        names = " or ".join(exc.names)
        raise UsageError(f"{exc.provider} needs an API key: set {names} in the environment "
                         f"(export {exc.names[0]}=...) and run again") from None


_AGENT_FORMS: Final = (
    "an object with run(input), an async generator function taking the input, "
    "or a zero-argument function or class returning one"
)


def load_python(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    """``py:<module>:<name>``: the object ``name`` of ``module``, as an Agent.

    Accepted: an Agent instance, an async generator function taking the input,
    or a zero-argument factory (function or class) of either. The current
    directory is importable, as with ``python -m``.
    """
    obj = _import_attr(spec, "py:", "py:myagent:agent")
    module_name, _, attr = spec[len("py:") :].rpartition(":")
    agent = _as_agent(obj)
    if agent is None and (inspect.isclass(obj) or inspect.isfunction(obj)) and _takes_no_arguments(obj):
        try:
            agent = _as_agent(obj())
        except Exception as exc:
            raise UsageError(f"agent spec {spec!r}: calling {module_name}.{attr}() failed: {exc!r}") from exc
    if agent is None:
        raise UsageError(
            f"agent spec {spec!r}: {module_name}.{attr} is {_describe(obj)}, not an agent; give {_AGENT_FORMS}"
        )
    return agent


def load_langgraph(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    """``langgraph:<module>:<name>``: a compiled LangGraph graph (or a zero-argument factory
    of one) behind :class:`~agui_engine.adapters.langgraph.LangGraphAgent`, wrapped in the
    :class:`~agui_engine.loops.agent_loop.AgentLoop`: the components a client sends become tools
    the graph can call (with their ``tambo.component.*`` events), and every event is
    verified. Components of the server's own: ``py:`` with
    ``AgentLoop(LangGraphAgent(graph), components=[...])``."""
    from agui_engine.adapters.langgraph import LangGraphAgent
    from agui_engine.loops.agent_loop import AgentLoop

    graph = _import_attr(spec, "langgraph:", "langgraph:myapp.graph:graph")
    if not callable(getattr(graph, "astream", None)) and callable(graph) and _takes_no_arguments(graph):
        try:
            graph = graph()
        except Exception as exc:
            raise UsageError(f"agent spec {spec!r}: calling the graph factory failed: {exc!r}") from exc
    return AgentLoop(LangGraphAgent(graph))


def load_crewai(spec: str, *, headers: Mapping[str, str], pace_seconds: float) -> Agent:
    """``crewai:<module>:<name>``: a CrewAI ``Crew``, a ``Flow`` class or a
    ``factory(input) -> Crew | Flow`` behind :class:`~agui_engine.adapters.crewai.CrewAIAgent`,
    wrapped in the :class:`~agui_engine.loops.agent_loop.AgentLoop` (verified, repaired,
    component-aware). :data:`CREWAI_OFFLINE_ENV` is set first, each variable only where the
    environment does not set it."""
    for name, value in CREWAI_OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    from agui_engine.adapters.crewai import CrewAIAgent
    from agui_engine.loops.agent_loop import AgentLoop

    target = _import_attr(spec, "crewai:", "crewai:myapp.crew:crew")
    return AgentLoop(CrewAIAgent(target))


def _import_attr(spec: str, scheme: str, example: str) -> Any:
    """The object ``<module>:<name>`` (after ``scheme``) names; the current directory is
    importable, as with ``python -m``. Raises UsageError saying what to write instead."""
    module_name, _, attr = spec[len(scheme) :].rpartition(":")
    if not module_name or not attr:
        raise UsageError(f"agent spec {spec!r}: write {scheme}<module>:<name>, e.g. {example}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if scheme == "langgraph:" and (exc.name or "").split(".")[0] in ("langgraph", "langchain_core"):
            raise UsageError(f"agent spec {spec!r}: {module_name} needs langgraph: pip install 'agui-engine[langgraph]'") from None
        if scheme == "crewai:" and (exc.name or "").split(".")[0] == "crewai":
            raise UsageError(f"agent spec {spec!r}: {module_name} needs crewai: pip install 'agui-engine[crewai]'") from None
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(
                f"agent spec {spec!r}: no module named {exc.name!r} (run from the directory that holds it, "
                "or set PYTHONPATH)"
            ) from None
        raise UsageError(f"agent spec {spec!r}: importing {module_name} failed: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        raise UsageError(f"agent spec {spec!r}: module {module_name} has no {attr!r} (it has: {shown})") from None


def _as_agent(obj: Any) -> Agent | None:
    """``obj`` as an Agent, or None when it is not one."""
    if isinstance(obj, Agent) and not inspect.isclass(obj):
        return obj
    if inspect.isasyncgenfunction(obj):
        return as_agent(obj)
    return None


def _takes_no_arguments(function: Any) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
    )


def _describe(obj: Any) -> str:
    if inspect.isclass(obj):
        return "a class whose instances have no run(input) method"
    if callable(obj):
        return f"a {type(obj).__name__} taking arguments"
    return f"a {type(obj).__name__}"
