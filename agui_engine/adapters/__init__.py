"""Adapters: LLM providers over HTTP streaming, translated into the engine's types.

The clients and :func:`client_from_spec` are importable from here and loaded on
first use, so ``import agui_engine.adapters`` stays cheap: httpx is imported with the
first client, and the loopback replay server (:mod:`agui_engine.adapters.replay`,
for tests and the demo) only when imported by name. Helpers for writing a provider
(:mod:`~agui_engine.adapters.provider`, :mod:`~agui_engine.adapters.prompt`) are
exported by their modules. See ``spec/providers.md``. :class:`LangGraphAgent` (a compiled
LangGraph graph as an agent, ``spec/langgraph.md``) imports langgraph on first use, and
:class:`CrewAIAgent` (a CrewAI crew or flow, ``spec/crewai.md``) crewai, and
:class:`MCPServer` (an MCP server's tools for ``LLMAgent`` / ``AgentLoop``, ``spec/mcp.md``) the
``mcp`` SDK when it first connects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agui_engine._lazy import export_names, exports_of, load_export

if TYPE_CHECKING:
    from .anthropic import AnthropicClient
    from .crewai import CrewAIAgent
    from .gemini import GeminiClient
    from .langgraph import LangGraphAgent
    from .mcp import MCPConnection, MCPConnections, MCPError, MCPServer, mcp_connections
    from .models import ModelSpec, client_from_spec, parse_model_spec
    from .openai_chat import OpenAIChatClient, OpenAICompatibleClient, OpenAIPlatformClient
    from .openai_responses import OpenAIResponsesClient
    from .provider import ProviderError, StreamingLLMClient

__all__ = [
    "AnthropicClient",
    "CrewAIAgent",
    "GeminiClient",
    "LangGraphAgent",
    "MCPConnection",
    "MCPConnections",
    "MCPError",
    "MCPServer",
    "ModelSpec",
    "OpenAIChatClient",
    "OpenAICompatibleClient",
    "OpenAIPlatformClient",
    "OpenAIResponsesClient",
    "ProviderError",
    "StreamingLLMClient",
    "client_from_spec",
    "mcp_connections",
    "parse_model_spec",
]

#: name -> submodule, read from the TYPE_CHECKING imports above (the one table; agui_engine/_lazy.py)
_EXPORTS = exports_of(__name__)



def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, name)


def __dir__() -> list[str]:
    return export_names(__name__, _EXPORTS)
