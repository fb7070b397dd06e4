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
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Annotated, Any, Final, TextIO

import msgspec

from agui_engine.protocol.agent import Agent
from agui_engine.protocol.codec import encode_ndjson
from agui_engine.genui.components import Component
from agui_engine.demo.weather_model import (
    DASHBOARD_SCHEMA,
    EMBEDDED_MODEL_NAME,
    WEATHER_CARD_RESOURCE_SCHEMA,
    WEATHER_CURRENT,
    EmbeddedModel,
    demo_weather,
)
from agui_engine.protocol.errors import AguiEngineError
from agui_engine.protocol.events import RunAgentInput, UserMessage
from agui_engine.llm import LLMClient
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.genui.uispec import UISpecTool
from agui_engine.transports.data import broker_for
from agui_engine.transports.gateway import GatewayAgent
from agui_engine.protocol.verify import ProtocolViolation, Verifier
from agui_engine.transports import ThreadedToolRunner

from . import add_ui_spec_argument, seconds
from .pacing import paced
from .render import Query, console_modes, fetch_component_data, make_renderer

__all__ = [
    "AgentContext",
    "DEFAULT_PACE_SECONDS",
    "SCENARIOS",
    "STACK_SCHEMA",
    "add_arguments",
    "demo_agent",
    "demo_components",
    "demo_ui_spec",
    "direct_demo_agent",
    "get_weather",
    "production_demo_agent",
    "run",
    "run_scenarios",
]

#: The prompts ``agui-engine demo`` runs when it is given none: every scenario
#: of the embedded model.
SCENARIOS: Final = (
    "What's the weather in Tokyo?",
    "Compare the weather in Tokyo and Paris",
    "Show me the Q3 dashboard",
    "Hello! What can you do?",
)

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


def demo_agent(*, pace_seconds: float = 0.0, llm: LLMClient | None = None, ui_spec: bool = False) -> LLMAgent:
    """The demo's agent: demo components, the ``get_weather`` server tool, and
    ``llm`` (default: the embedded model at ``pace_seconds``); ``ui_spec`` also
    offers ``render_ui`` (:func:`demo_ui_spec`)."""
    model = llm if llm is not None else paced(EmbeddedModel(), pace_seconds)
    return LLMAgent(model, components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(),
                    ui_spec=demo_ui_spec() if ui_spec else None)


#: Builds the agent the demo command talks to, inside the running event loop,
#: from the pace. The library default is :func:`demo_agent` called directly; the
#: ``demo`` command passes :func:`production_demo_agent`, which puts the
#: production path in between (loopback OpenAI adapter, SSE gateway).
AgentContext = Callable[[float], AbstractAsyncContextManager[Agent]]


@asynccontextmanager
async def direct_demo_agent(pace_seconds: float) -> AsyncIterator[Agent]:
    yield demo_agent(pace_seconds=pace_seconds)


def production_demo_agent(*, via: str = "gateway", transport: str = "sse", model_path: str = "openai",
                          inspector: bool = True, ui_spec: bool = False) -> AgentContext:
    """An :data:`AgentContext` that builds the demo agent on the chosen path. ``inspector``:
    the SSE gateway also serves the inspector page (``<gateway>/inspect``) while it runs."""
    options = {"inspector": True} if inspector and transport == "sse" else {}

    def gateway(agent: Agent) -> Agent:
        return GatewayAgent(agent, transport=transport, **options) if via == "gateway" else agent

    @asynccontextmanager
    async def context(pace_seconds: float) -> AsyncIterator[Agent]:
        model = paced(EmbeddedModel(), pace_seconds)
        if model_path == "openai":
            from agui_engine.adapters.replay import serve_over_openai_chat

            async with serve_over_openai_chat(model, model=EMBEDDED_MODEL_NAME) as llm:
                yield gateway(demo_agent(llm=llm, ui_spec=ui_spec))
        else:
            yield gateway(demo_agent(llm=model, ui_spec=ui_spec))

    return context


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
    parser.add_argument("--transport", choices=("sse", "ws"), default="sse",
                        help="the gateway's transport (default sse)")
    parser.add_argument("--no-inspect", action="store_true",
                        help="do not serve the inspector page (<gateway>/inspect) on the demo's SSE gateway")
    parser.add_argument("--model-path", choices=("openai", "direct"), default="openai",
                        help="openai (default): the embedded model answers over loopback HTTP in OpenAI Chat "
                             "Completions format and the real OpenAI adapter reads it; direct: in-process")
    add_ui_spec_argument(parser)


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


def run_scenarios(args: argparse.Namespace, agent_context: AgentContext = direct_demo_agent) -> int:
    """Run the demo's messages; ``agent_context`` builds the agent (see :data:`AgentContext`)."""
    out = sys.stdout
    tty, color = console_modes(out, plain=args.plain or args.format != "pretty", no_color=args.no_color)
    pace = args.pace if args.pace is not None else (DEFAULT_PACE_SECONDS if tty else 0.0)
    if pace < 0:
        sys.stderr.write("agui-engine demo: --pace must be >= 0\n")
        return 2
    messages: Sequence[str] = [" ".join(args.message)] if args.message else SCENARIOS

    async def main() -> int:
        status = 0
        async with agent_context(pace) as agent:
            # a resource-bound card's data, fetched as a front end would: through the
            # gateway's own query code (ResourceBroker), in-process
            broker = broker_for(agent)
            query: Query | None = broker.fetch if broker is not None else None
            for index, text in enumerate(messages):
                status = max(status, await _run_one(agent, text, index, out, args, tty, color, query))
        return status

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130


def run(args: argparse.Namespace) -> int:
    """The ``demo`` command: print the path (pretty output), then run the messages on it."""
    if args.format == "pretty":
        path = _PATH_LINES[(args.model_path, args.via)].format(t=args.transport.upper() if args.transport == "sse" else "WebSocket")
        print(f"path: {path}", flush=True)
    return run_scenarios(args, production_demo_agent(via=args.via, transport=args.transport, model_path=args.model_path,
                                                     inspector=not args.no_inspect, ui_spec=args.ui_spec))

