"""Turn an ``--agent`` spec string into an :class:`~agui_engine.agent.Agent`.

Specs (first match wins):

* ``embedded`` (the default) -- the LLM agent over the embedded demo model: no
  network, no API key;
* ``http://...`` / ``https://...`` -- a remote AG-UI endpoint over SSE
  (:class:`~transports.sse.SSEAgent`); ``ws://`` / ``wss://`` -- over WebSocket;
* ``stdio:<command>`` -- an AG-UI stdio server run as a subprocess;
* ``py:<module>:<name>`` -- an Agent object, or a zero-argument factory of one,
  importable from Python (for embedding your own agent without writing a server);
* ``<provider>:<model>`` -- a provider model through
  ``adapters.models.client_from_spec`` (``openai:gpt-4o``, ``anthropic:...``),
  driven by the LLM agent.

Raises UsageError naming the spec and what is wrong.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping

from agui_engine.agent import Agent
from agui_engine.errors import UsageError

__all__ = ["agent_from_spec", "embedded_agent"]


def embedded_agent(pace_seconds: float = 0.0) -> Agent:
    """The demo agent: the decision loop over the embedded model, with the demo
    weather tool (and the demo's components when ``agui_engine.cli.render`` provides them)."""
    try:
        demo = importlib.import_module("agui_engine.cli.render")
    except ImportError:
        demo = None
    factory = getattr(demo, "demo_agent", None) if demo is not None else None
    if factory is not None:
        return factory(pace_seconds=pace_seconds)  # type: ignore[no-any-return]
    from agui_engine.embedded import EmbeddedModel, demo_weather
    from agui_engine.llm_agent import LLMAgent

    return LLMAgent(EmbeddedModel(pace_seconds=pace_seconds), tools=[demo_weather])


def agent_from_spec(spec: str, *, pace_seconds: float = 0.0, headers: Mapping[str, str] | None = None) -> Agent:
    """See the module docstring. ``headers`` go to remote (HTTP/WebSocket) agents."""
    spec = spec.strip()
    if spec in ("", "embedded"):
        return embedded_agent(pace_seconds)
    if spec.startswith(("http://", "https://")):
        from agui_engine.transports.sse import SSEAgent

        return SSEAgent(spec, headers=headers)
    if spec.startswith(("ws://", "wss://")):
        from agui_engine.transports.websocket import WebSocketAgent

        return WebSocketAgent(spec, headers=headers)
    if spec.startswith("stdio:"):
        from agui_engine.transports.stdio import StdioAgent

        return StdioAgent(spec[len("stdio:") :])
    if spec.startswith("py:"):
        module_name, _, attr = spec[3:].rpartition(":")
        if not module_name or not attr:
            raise UsageError(f"agent spec {spec!r}: expected py:<module>:<name>")
        if os.getcwd() not in sys.path:
            # As `python -m` does: modules of the directory the command runs in are importable.
            sys.path.insert(0, os.getcwd())
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"agent spec {spec!r}: cannot import {attr} from {module_name} ({exc})") from None
        agent = obj if isinstance(obj, Agent) and not isinstance(obj, type) else obj()
        if not isinstance(agent, Agent):
            raise UsageError(f"agent spec {spec!r} did not give an Agent (got {type(agent).__name__})")
        return agent
    if ":" in spec:
        try:
            models = importlib.import_module("agui_engine.adapters.models")
        except ImportError:
            raise UsageError(f"agent spec {spec!r}: the provider adapters (adapters.models) are not available") from None
        from agui_engine.llm_agent import LLMAgent

        return LLMAgent(models.client_from_spec(spec))
    raise UsageError(
        f"unknown agent spec {spec!r}: use embedded, <provider>:<model>, an http(s):// or ws(s):// URL, "
        "stdio:<command> or py:<module>:<name>"
    )
