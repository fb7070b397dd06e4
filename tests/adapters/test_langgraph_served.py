"""A LangGraph graph served by ``agui-engine serve --agent langgraph:<module>:<name>`` (a
real subprocess) and used by the real ``@ag-ui/client`` 1.0.0 in Node: text, a server tool,
a component the client sends whose props fill in (the agent loop around the graph), the
turn after it, an interrupt and its answer."""

from __future__ import annotations

from typing import Any

import pytest

from agui_engine.cli.agent_spec import agent_from_spec
from agui_engine.protocol.errors import UsageError
from tests.adapters.agent_runs import served_client_result

SPEC = "langgraph:tests.adapters.langgraph_graphs:served_graph"


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


def test_the_spec_builds_a_langgraph_agent_and_bad_specs_say_why() -> None:
    from agui_engine.adapters.langgraph import LangGraphAgent
    from agui_engine.loops.agent_loop import AgentLoop

    agent = agent_from_spec(SPEC)
    assert isinstance(agent, AgentLoop) and isinstance(agent.agent, LangGraphAgent)
    for bad in ("langgraph:nope", "langgraph:no.such.module:g", "langgraph:tests.adapters.langgraph_graphs:text"):
        with pytest.raises(UsageError):
            agent_from_spec(bad)


def test_served_graph_with_the_real_ag_ui_client() -> None:
    result = served_client_result(SPEC, "langgraph_client.mjs")
    runs = result["runs"]
    assert [r["error"] for r in runs] == [None] * 6, "the client's own verifier accepted every run"
    hello, weather, card, after_card, asked, resumed = runs
    text = lambda run: "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")  # noqa: E731
    assert text(hello) == "Hello from LangGraph."
    # a server tool: the call streams its arguments, the tool runs, the model answers
    assert "TOOL_CALL_ARGS" in types(weather) and "TOOL_CALL_RESULT" in types(weather)
    assert text(weather).endswith("Done: Sunny, 21 C in Paris")
    # the component: its props fill in (tambo.component.* events), the call is answered, no call pending
    components = [e for e in card["events"] if e["type"] == "CUSTOM" and e["name"].startswith("tambo.component.")]
    assert components[0]["name"] == "tambo.component.start"
    deltas = [e for e in components if e["name"] == "tambo.component.props_delta"]
    assert len(deltas) >= 2 and components[-1]["name"] == "tambo.component.end"
    assert components[-1]["value"]["finalProps"] == {"city": "Oslo", "tempC": -3.5}
    (shown,) = [e for e in card["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert "outcome" not in card["events"][-1]
    # the next turn: the model's history holds the component's result
    assert text(after_card) == "Earlier: " + shown["content"][:60]
    # the interrupt and its answer
    (interrupt,) = asked["events"][-1]["outcome"]["interrupts"]
    assert interrupt["message"] == "Approve the plan?"
    assert text(resumed) == "Approved, going ahead."
    # the client's conversation: every turn, the tool calls and their results, in order
    roles = [m["role"] for m in result["messages"]]
    assert roles.count("user") == 5 and roles.count("tool") == 2
    assert any(m.get("toolCallId") == shown["toolCallId"] for m in result["messages"])
