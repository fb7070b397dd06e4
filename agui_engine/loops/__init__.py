"""The loops that produce runs: the decision loop that drives an LLM (:mod:`~agui_engine.loops.decision`)
and ``LLMAgent`` around it, the agent loop that wraps any agent (:mod:`~agui_engine.loops.agent_loop`),
the prompts, the tool-runner contract, and ``Thread``, a conversation across runs.

The top layer of the core: it may import the protocol, the tokenizer and generative UI. ``__all__``
lists the modules; each keeps its names in its own ``__all__``.
"""

__all__ = ["a2ui_agent", "agent_loop", "decision", "llm_agent", "observe", "prompts", "thread", "tool_calls", "tool_runner", "tool_sources"]
