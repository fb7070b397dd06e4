"""An LLMAgent with one plain sync server tool and no tool_runner, for the tests of the paths
that supply the standard runner (``py:tests.transports.sync_tool_agent:agent`` for a served one)."""

from __future__ import annotations

import threading

from agui_engine import LLMAgent
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results


def which_thread(city: str) -> str:
    """Names the thread the tool runs in (a sync tool: a worker thread, never the loop's)."""
    return f"{city} from {threading.current_thread().name}"


def make_agent() -> LLMAgent:
    return LLMAgent(ScriptedModel([
        ScriptedTurn(tool_calls=[ScriptedCall("which_thread", {"city": "Oslo"})]),
        lambda messages: f"ran: {tool_results(messages)[-1]}",
    ]), tools=[which_thread])


agent = make_agent()
