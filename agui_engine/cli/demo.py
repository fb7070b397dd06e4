"""``agui-engine demo``: the embedded model, shown through the production path.

Theory of operation
-------------------
:func:`demo_agent` builds an :class:`~agui_engine.loops.llm_agent.LLMAgent` over the
:class:`~agui_engine.demo.weather_model.EmbeddedModel` with two demo components
(``WeatherCard``, ``Dashboard``) and one demo server tool (``get_weather``, a
fixed table of illustrative numbers). :func:`run` streams a run (or, with no
message, one run per built-in scenario) and pipes every event through the same
path a client takes: the :class:`~agui_engine.protocol.verify.Verifier` (a protocol
violation fails the demo, exit status 1), then the terminal
:class:`~agui_engine.cli.render.Renderer`. ``--format ndjson`` prints the raw
AG-UI events instead, one JSON per line, ready for ``ag-ui-validate -``.

The demo is the README's main job, so it exercises what production runs rather
than a shortcut. With the defaults every event crosses, in one process on
loopback:

    EmbeddedModel --(OpenAI Chat SSE over HTTP, adapters.replay)--> OpenAIChatClient
      --> LLMAgent (decision loop, components, server tool)
      --> SSE gateway (verification, event ids, resume log, keep-alive)
      --> SSEAgent (the Python client) --> verifier + renderer in the terminal

``--model-path direct`` drops the HTTP hop to the model, ``--via direct``
drops the gateway; ``--transport ws`` uses the WebSocket gateway instead.
Nothing leaves 127.0.0.1 and no API key is needed.

``--mcp`` also offers the tools of the demo's MCP server (:mod:`agui_engine.cli.demo_mcp_server`,
run over stdio as a subprocess, reaped when the demo ends) and, given no message, runs its scenario
(:data:`MCP_SCENARIO`): the model calls ``roll_dice``, the terminal shows the result and the
``mcp-apps`` activity, and the inspector draws the dice app (its "Roll again" button calls the tool
back through the gateway's proxy).

``--inspect`` (the default when stdin and stdout are a terminal; ``--no-inspect``
turns it off) runs the messages on ONE SSE gateway that stays up afterwards: the
demo prints the inspector's URL, whose fragment names the demo's runs and a bearer
token made for this process (``/inspect#run=demo-run-0&token=...``), so the page
replays exactly these runs from the gateway's log and can start more; Ctrl-C ends
it with one line (exit status 0).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Annotated, Any, Final, TextIO

import msgspec

from agui_engine.demo.weather_model import (
    DASHBOARD_SCHEMA,
    EMBEDDED_MODEL_NAME,
    WEATHER_CARD_RESOURCE_SCHEMA,
    WEATHER_CURRENT,
    EmbeddedModel,
    demo_weather,
)
from agui_engine.genui.a2ui import A2UI_VERSION, A2UICatalog
from agui_engine.genui.a2ui_clients import A2UISnapshots
from agui_engine.genui.components import Component
from agui_engine.genui.uispec import UISpecTool
from agui_engine.llm import LLMClient
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.codec import encode_ndjson
from agui_engine.protocol.errors import AguiEngineError, UsageError
from agui_engine.protocol.events import RunAgentInput, UserMessage
from agui_engine.protocol.verify import ProtocolViolation, Verifier
from agui_engine.transports import ThreadedToolRunner
from agui_engine.transports.data import broker_for
from agui_engine.transports.gateway import GatewayAgent

from .mcp import require_mcp_sdk
from .options import a2ui_choice, add_a2ui_argument, add_ui_spec_argument, after_interrupt, seconds
from .pacing import paced
from .render import Query, console_modes, fetch_component_data, make_renderer

__all__ = [
    "A2UI_SCENARIO",
    "AgentContext",
    "DEFAULT_PACE_SECONDS",
    "DEMO_MCP_START_SECONDS",
    "INSPECT_RETENTION_SECONDS",
    "InspectedGateway",
    "MCP_SCENARIO",
    "SCENARIOS",
    "STACK_SCHEMA",
    "add_arguments",
    "demo_agent",
    "demo_components",
    "demo_mcp_server",
    "demo_ui_spec",
    "direct_demo_agent",
    "get_weather",
    "inspected_demo_agent",
    "inspector_url",
    "production_demo_agent",
    "run",
    "run_scenarios",
    "wait_for_demo_mcp_server",
]

#: The prompts ``agui-engine demo`` runs when it is given none: every scenario
#: of the embedded model.
SCENARIOS: Final = (
    "What's the weather in Tokyo?",
    "Compare the weather in Tokyo and Paris",
    "Show me the Q3 dashboard",
    "Hello! What can you do?",
)
#: The scenario ``agui-engine demo --a2ui`` adds to them: an A2UI form and dashboard.
A2UI_SCENARIO: Final = "Book a table for two"

#: The prompt ``agui-engine demo --mcp`` runs when it is given none: the MCP server's tool with an app.
MCP_SCENARIO: Final = "Roll dice with 20 sides"

#: Pause between model chunks on a terminal: ~60 chunks a second, about the
#: speed of a fast hosted model, slow enough to watch props fill in.
DEFAULT_PACE_SECONDS: Final = 0.015


def get_weather(city: Annotated[str, msgspec.Meta(description="City name, e.g. Tokyo")]) -> dict[str, Any]:
    """Look up the current weather for a city (demo data: a fixed table, not a forecast)."""
    return demo_weather(city)


def demo_components() -> list[Component]:
    """The demo's components: ``WeatherCard`` (bound to the ``weather.current`` resource:
    the model names the city, the app fetches the numbers) and ``Dashboard``."""
    return [
        Component("WeatherCard", "Shows the current weather for one city: temperature, condition, humidity, wind. "
                  "The app loads the numbers from the chosen resource.",
                  WEATHER_CARD_RESOURCE_SCHEMA, resources=[WEATHER_CURRENT]),
        Component("Dashboard", "A business dashboard: titled sections of metric, chart, table and note blocks.",
                  DASHBOARD_SCHEMA),
    ]


#: Props of the ``Stack`` layout the demo's ``render_ui`` allows (a container only a tree uses).
STACK_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "direction": {"type": "string", "enum": ["row", "column"]},
        "gap": {"type": "number", "description": "Space between children, in pixels"},
    },
}


def demo_ui_spec() -> UISpecTool:
    """The demo's ``render_ui`` tool: a ``Stack`` layout and the demo components."""
    return UISpecTool([Component("Stack", "Lays its children out in a row or a column.", STACK_SCHEMA),
                       *demo_components()])


#: Seconds ``demo --mcp`` waits for its own MCP server's ``initialize`` answer (the server's
#: readiness signal). A healthy start is not budgeted: importing the SDK alone took 6 s on a machine
#: at load 11, more than the adapter's usual 10 s; a server whose process exits ends the wait at once
#: (the demo then exits 2 with one line). This bounds only a server that hangs while alive.
DEMO_MCP_START_SECONDS: Final = 300.0


def demo_mcp_server() -> Any:
    """The demo's MCP server (:mod:`agui_engine.cli.demo_mcp_server`) as an ``MCPServer``: this
    Python running that module over stdio, ``server_id`` ``demo``, given
    :data:`DEMO_MCP_START_SECONDS` to answer ``initialize``."""
    from agui_engine.adapters.mcp import MCPServer

    return MCPServer(transport="stdio", command=sys.executable, args=("-m", "agui_engine.cli.demo_mcp_server"),
                     server_id="demo", connect_timeout=DEMO_MCP_START_SECONDS)


async def wait_for_demo_mcp_server() -> None:
    """Start the demo's MCP server and wait until it answers (``initialize``, then ``ping``), so
    that the runs find its tools however long a busy machine takes to start it. Raises
    UsageError (one line, exit 2) when it cannot start: its process exited, or it hung for
    :data:`DEMO_MCP_START_SECONDS`."""
    from agui_engine.adapters.mcp import MCPError, mcp_connections

    try:
        await mcp_connections().get(demo_mcp_server()).request("ping")
    except MCPError as exc:
        raise UsageError(f"--mcp: the demo's MCP server did not start: {exc.message}") from None


def demo_agent(*, pace_seconds: float = 0.0, llm: LLMClient | None = None, ui_spec: bool = False,
               mcp: bool = False, a2ui: bool | str | None = False,
               a2ui_snapshots: A2UISnapshots = "auto") -> LLMAgent:
    """The demo's agent: demo components, the ``get_weather`` server tool, and
    ``llm`` (default: the embedded model at ``pace_seconds``); ``ui_spec`` also
    offers ``render_ui`` (:func:`demo_ui_spec`); ``mcp`` the tools of :func:`demo_mcp_server`;
    ``a2ui`` ``render_a2ui`` with the A2UI basic catalog (``True``: v0.9; or the version, ``"v1.0"``) (the table booking,
    :mod:`agui_engine.demo.booking`)."""
    model = llm if llm is not None else paced(EmbeddedModel(), pace_seconds)
    return LLMAgent(model, components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(),
                    ui_spec=demo_ui_spec() if ui_spec else None, mcp_servers=[demo_mcp_server()] if mcp else (),
                    a2ui=A2UICatalog.basic(a2ui if isinstance(a2ui, str) else A2UI_VERSION) if a2ui else None,
                    a2ui_snapshots=a2ui_snapshots)


#: Builds the agent the demo command talks to, inside the running event loop,
#: from the pace. The library default is :func:`demo_agent` called directly; the
#: ``demo`` command passes :func:`production_demo_agent`, which puts the
#: production path in between (loopback OpenAI adapter, SSE gateway).
AgentContext = Callable[[float], AbstractAsyncContextManager[Agent]]


@asynccontextmanager
async def direct_demo_agent(pace_seconds: float) -> AsyncIterator[Agent]:
    yield demo_agent(pace_seconds=pace_seconds)


def production_demo_agent(*, via: str = "gateway", transport: str = "sse", model_path: str = "openai",
                          inspector: bool = True, ui_spec: bool = False, mcp: bool = False,
                          a2ui: bool | str | None = False) -> AgentContext:
    """An :data:`AgentContext` that builds the demo agent on the chosen path. ``inspector``:
    the SSE gateway also serves the inspector page (``<gateway>/inspect``) while it runs."""
    options = {"inspector": True} if inspector and transport == "sse" else {}

    def gateway(agent: Agent) -> Agent:
        return GatewayAgent(agent, transport=transport, **options) if via == "gateway" else agent

    @asynccontextmanager
    async def context(pace_seconds: float) -> AsyncIterator[Agent]:
        async with _demo_model(model_path, pace_seconds) as llm:
            yield gateway(demo_agent(llm=llm, ui_spec=ui_spec, mcp=mcp, a2ui=a2ui))

    return context


@asynccontextmanager
async def _demo_model(model_path: str, pace_seconds: float) -> AsyncIterator[LLMClient]:
    """The embedded model at ``pace_seconds``: behind the real OpenAI adapter over loopback
    HTTP (``openai``) or in-process (``direct``)."""
    model = paced(EmbeddedModel(), pace_seconds)
    if model_path == "openai":
        from agui_engine.adapters.replay import serve_over_openai_chat

        async with serve_over_openai_chat(model, model=EMBEDDED_MODEL_NAME) as llm:
            yield llm
    else:
        yield model


#: How long ``demo --inspect`` keeps a finished run on its gateway for the inspector to
#: replay (the registry's ``retention_seconds``; the library default is 60 s, for
#: resuming). A day: as long as anyone leaves a demo open; the demo's few runs are kilobytes.
INSPECT_RETENTION_SECONDS: Final = 24 * 3600.0


class InspectedGateway:
    """The agent ``demo --inspect`` talks to: the Python SSE client of ONE loopback SSE
    gateway (inspector on, a bearer token made for this process) in front of the demo
    agent, kept for every run; ``url`` and ``token`` are what the inspector needs."""

    def __init__(self, url: str, token: str, agent: Agent) -> None:
        from agui_engine.transports.sse_client import SSEAgent

        self.url = url
        self.token = token
        self.agent = agent
        self.client = SSEAgent(url, headers={"Authorization": f"Bearer {token}"})

    @property
    def resources(self) -> Any:
        """The resources of the agent behind the gateway (the demo queries them in-process)."""
        return getattr(self.agent, "resources", None)

    def run(self, input: RunAgentInput) -> AsyncIterator[Any]:
        return self.client.run(input)


def inspected_demo_agent(*, model_path: str = "openai", ui_spec: bool = False, mcp: bool = False,
                         a2ui: bool | str | None = False) -> AgentContext:
    """An :data:`AgentContext` yielding an :class:`InspectedGateway`: the gateway is up
    for as long as the context is."""

    @asynccontextmanager
    async def context(pace_seconds: float) -> AsyncIterator[Agent]:
        from agui_engine.transports.registry_options import RegistryOptions
        from agui_engine.transports.sse_server import start_sse_server

        token = secrets.token_urlsafe(16)
        async with _demo_model(model_path, pace_seconds) as llm:
            agent = demo_agent(llm=llm, ui_spec=ui_spec, mcp=mcp, a2ui=a2ui)
            server = await start_sse_server(agent, port=0, inspector=True, auth_token={token: "demo"},
                                            options=RegistryOptions(retention_seconds=INSPECT_RETENTION_SECONDS))
            try:
                yield InspectedGateway(server.url, token, agent)
            finally:
                await server.close()

    return context


def inspector_url(url: str, run_ids: Sequence[str], token: str) -> str:
    """The inspector page of the gateway at ``url`` showing ``run_ids``: the runs and the
    bearer token go in the fragment (``#run=...&token=...``), which the browser never
    sends to the server (so never to its access log)."""
    from urllib.parse import urlencode

    return url.rstrip("/") + "/inspect#" + urlencode([*(("run", r) for r in run_ids), ("token", token)])


#: The ``path:`` line printed before a pretty demo: what every event crosses.
_PATH_LINES: Final = {
    ("openai", "gateway"): "embedded model → OpenAI Chat over loopback HTTP → OpenAI adapter → LLMAgent → {t} gateway → Python {t} client",
    ("openai", "direct"): "embedded model → OpenAI Chat over loopback HTTP → OpenAI adapter → LLMAgent",
    ("direct", "gateway"): "embedded model → LLMAgent → {t} gateway → Python {t} client",
    ("direct", "direct"): "embedded model → LLMAgent",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("message", nargs="*", help="what the user says (default: every built-in scenario in turn)")
    parser.add_argument("--pace", type=seconds, default=None, metavar="SECONDS",
                        help=f"pause between model chunks (default {DEFAULT_PACE_SECONDS} on a terminal, 0 otherwise)")
    parser.add_argument("--format", choices=("pretty", "ndjson"), default="pretty",
                        help="pretty: render the run; ndjson: print the AG-UI events, one JSON per line")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours (also when NO_COLOR is set)")
    parser.add_argument("--plain", action="store_true", help="plain line output even on a terminal")
    parser.add_argument("--via", choices=("gateway", "direct"), default="gateway",
                        help="gateway (default): serve the agent on a loopback gateway and consume it with the "
                             "Python client; direct: call the agent in-process")
    parser.add_argument("--transport", choices=("sse", "ws"), default=None,
                        help="the gateway's transport (default sse; needs the gateway, not --via direct)")
    parser.add_argument("--inspect", action="store_true",
                        help="keep the SSE gateway up after the runs and print the inspector's URL showing them "
                             "(Ctrl-C stops); default: on when stdin and stdout are a terminal")
    parser.add_argument("--no-inspect", action="store_true",
                        help="do not serve the inspector page (<gateway>/inspect) and do not stay up for it")
    parser.add_argument("--model-path", choices=("openai", "direct"), default="openai",
                        help="openai (default): the embedded model answers over loopback HTTP in OpenAI Chat "
                             "Completions format and the real OpenAI adapter reads it; direct: in-process")
    add_ui_spec_argument(parser)
    parser.add_argument("--mcp", action="store_true",
                        help="also offer the tools of the demo's MCP server (run over stdio) and, with no message, "
                             f"run its scenario ({MCP_SCENARIO!r}): a tool whose MCP App the inspector shows")
    add_a2ui_argument(parser)


async def _run_one(agent: Agent, text: str, index: int, out: TextIO, args: argparse.Namespace,
                   live: bool, color: bool, query: Query | None = None) -> int:
    run_input = RunAgentInput(
        thread_id=f"demo-thread-{index}",
        run_id=f"demo-run-{index}",
        messages=[UserMessage(id=f"demo-user-{index}", content=text)],
    )
    verifier = Verifier()
    renderer = make_renderer(out, live=live, color=color)
    if args.format == "pretty":
        out.write(("\n" if index else "") + renderer.paint("1", f"you › {text}") + "\n")
    count = 0
    try:
        # closed on every way out (a reader gone from the pipe too), so the run is cancelled, not abandoned
        async with aclosing(agent.run(run_input)) as events:  # type: ignore[type-var]
            async for event in events:
                for checked in verifier.feed(event):
                    count += 1
                    if args.format == "ndjson":
                        out.write(encode_ndjson(checked).decode())
                    else:
                        if query is not None:
                            await fetch_component_data(renderer, checked, query)
                        renderer.handle(checked)
        verifier.close()
    except ProtocolViolation as exc:
        sys.stderr.write(f"agui-engine demo: the run broke the AG-UI protocol: {exc}\n")
        return 1
    except AguiEngineError as exc:
        sys.stderr.write(f"agui-engine demo: {exc.message}\n")
        return 1
    if args.format == "pretty":
        out.write(renderer.paint("2", f"  ({count} AG-UI events, verified)") + "\n")
    problems = [p for p in renderer.acc.problems]
    if problems:
        sys.stderr.write(f"agui-engine demo: the accumulator reported problems: {problems}\n")
        return 1
    return 0


#: Called after the demo's runs, inside the agent's context: ``after(agent, run_ids)``.
AfterRuns = Callable[[Agent, list[str]], Awaitable[None]]


def run_scenarios(args: argparse.Namespace, agent_context: AgentContext = direct_demo_agent,
                  after: AfterRuns | None = None) -> int:
    """Run the demo's messages; ``agent_context`` builds the agent (see :data:`AgentContext`);
    ``after`` runs once they are done, while the agent is still up (``--inspect`` waits there)."""
    out = sys.stdout
    tty, color = console_modes(out, plain=args.plain or args.format != "pretty", no_color=args.no_color)
    pace = args.pace if args.pace is not None else (DEFAULT_PACE_SECONDS if tty else 0.0)
    if pace < 0:
        sys.stderr.write("agui-engine demo: --pace must be >= 0\n")
        return 2
    mcp = bool(getattr(args, "mcp", False))
    scenarios = (*SCENARIOS, A2UI_SCENARIO) if getattr(args, "a2ui", False) else SCENARIOS
    messages: Sequence[str] = [" ".join(args.message)] if args.message else (MCP_SCENARIO,) if mcp else scenarios

    async def main() -> int:
        try:
            return await runs()
        finally:
            if mcp:  # the demo MCP server's process ends with the demo, reaped
                from agui_engine.adapters.mcp import mcp_connections

                await mcp_connections().aclose()

    async def runs() -> int:
        status = 0
        if mcp:  # its tools are there for the first run, or the demo stops here (exit 2, one line)
            await wait_for_demo_mcp_server()
        async with agent_context(pace) as agent:
            # a resource-bound card's data, fetched as a front end would: through the
            # gateway's own query code (ResourceBroker), in-process
            broker = broker_for(agent)
            query: Query | None = broker.fetch if broker is not None else None
            for index, text in enumerate(messages):
                status = max(status, await _run_one(agent, text, index, out, args, tty, color, query))
            if after is not None and status == 0:
                await after(agent, [f"demo-run-{index}" for index in range(len(messages))])
        return status

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        if after is not None:
            after_interrupt("agui-engine demo: stopped; the gateway and the inspector are closed")
            return 0
        return 130


def _inspecting(args: argparse.Namespace) -> bool:
    """Whether the demo stays up for the inspector: ``--inspect``, or by default on a
    terminal when the path has the SSE gateway. Raises UsageError for flags that contradict."""
    if args.via == "direct" and args.transport is not None:
        raise UsageError(f"--transport {args.transport} needs the gateway, which --via direct leaves out: "
                         "drop one of them")
    if args.inspect:
        if args.no_inspect:
            raise UsageError("--inspect and --no-inspect contradict each other: give one")
        if args.via == "direct" or args.transport == "ws":
            raise UsageError("--inspect needs the SSE gateway (the inspector is its page): "
                             "drop --via direct / --transport ws")
        return True
    return (not args.no_inspect and args.format == "pretty" and args.via == "gateway"
            and args.transport in (None, "sse") and sys.stdin.isatty() and sys.stdout.isatty())


def _hold_for_the_inspector(out: TextIO) -> AfterRuns:
    """``--inspect``: after the runs, print the inspector's URL for them on ``out`` (stdout;
    stderr when stdout carries NDJSON), then keep the gateway up until Ctrl-C."""

    async def hold(agent: Agent, run_ids: list[str]) -> None:
        assert isinstance(agent, InspectedGateway)
        out.write(f"\ninspector: {inspector_url(agent.url, run_ids, agent.token)}\n"
                  "the gateway stays up for the inspector (it can start more runs there); Ctrl-C stops it\n")
        out.flush()
        await asyncio.Event().wait()

    return hold


def run(args: argparse.Namespace) -> int:
    """The ``demo`` command: print the path (pretty output), then run the messages on it."""
    inspect = _inspecting(args)
    if args.mcp:
        require_mcp_sdk()
    transport = args.transport or "sse"
    if args.format == "pretty":
        path = _PATH_LINES[(args.model_path, args.via)].format(t=transport.upper() if transport == "sse" else "WebSocket")
        print(f"path: {path}", flush=True)
    if inspect:
        return run_scenarios(args, inspected_demo_agent(model_path=args.model_path, ui_spec=args.ui_spec, mcp=args.mcp,
                                                        a2ui=a2ui_choice(args)),
                             after=_hold_for_the_inspector(sys.stdout if args.format == "pretty" else sys.stderr))
    return run_scenarios(args, production_demo_agent(via=args.via, transport=transport, model_path=args.model_path,
                                                     inspector=not args.no_inspect, ui_spec=args.ui_spec,
                                                     mcp=args.mcp, a2ui=a2ui_choice(args)))
