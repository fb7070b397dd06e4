"""``agui-engine demo``: the embedded model, shown through the production path.

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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agui_engine.adapters.replay import serve_over_openai_chat
from agui_engine.agent import Agent
from agui_engine.embedded import EMBEDDED_MODEL_NAME, EmbeddedModel

from agui_engine.transports.gateway import GatewayAgent

from . import render as demo

__all__ = ["add_arguments", "production_demo_agent", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    demo.add_arguments(parser)
    parser.add_argument("--via", choices=("gateway", "direct"), default="gateway",
                        help="gateway (default): serve the agent on a loopback gateway and consume it with the "
                             "Python client; direct: call the agent in-process")
    parser.add_argument("--transport", choices=("sse", "ws"), default="sse",
                        help="the gateway's transport (default sse)")
    parser.add_argument("--model-path", choices=("openai", "direct"), default="openai",
                        help="openai (default): the embedded model answers over loopback HTTP in OpenAI Chat "
                             "Completions format and the real OpenAI adapter reads it; direct: in-process")


def production_demo_agent(*, via: str = "gateway", transport: str = "sse", model_path: str = "openai"):
    """An :data:`agui_engine.cli.render.AgentContext` that builds the demo agent on the chosen path."""

    @asynccontextmanager
    async def context(pace_seconds: float) -> AsyncIterator[Agent]:
        model = EmbeddedModel(pace_seconds=pace_seconds)
        if model_path == "openai":
            async with serve_over_openai_chat(model, model=EMBEDDED_MODEL_NAME) as llm:
                agent: Agent = demo.demo_agent(llm=llm)
                yield GatewayAgent(agent, transport=transport) if via == "gateway" else agent
        else:
            agent = demo.demo_agent(llm=model)
            yield GatewayAgent(agent, transport=transport) if via == "gateway" else agent

    return context


_PATH_LINES = {
    ("openai", "gateway"): "embedded model → OpenAI Chat over loopback HTTP → OpenAI adapter → LLMAgent → {t} gateway → Python {t} client",
    ("openai", "direct"): "embedded model → OpenAI Chat over loopback HTTP → OpenAI adapter → LLMAgent",
    ("direct", "gateway"): "embedded model → LLMAgent → {t} gateway → Python {t} client",
    ("direct", "direct"): "embedded model → LLMAgent",
}


def run(args: argparse.Namespace) -> int:
    if args.format == "pretty":
        path = _PATH_LINES[(args.model_path, args.via)].format(t=args.transport.upper() if args.transport == "sse" else "WebSocket")
        print(f"path: {path}", flush=True)
    return demo.run(args, production_demo_agent(via=args.via, transport=args.transport, model_path=args.model_path))
