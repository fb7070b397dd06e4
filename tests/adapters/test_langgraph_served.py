"""A LangGraph graph served by ``agui-engine serve --agent langgraph:<module>:<name>`` (a
real subprocess) and used by the real ``@ag-ui/client`` 1.0.0 in Node: text, a server tool,
a component the client sends whose props fill in (the agent loop around the graph), the
turn after it, an interrupt and its answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agui_engine.errors import UsageError
from agui_engine.cli.agent_spec import agent_from_spec

JS = Path(__file__).resolve().parents[1] / "js"
SPEC = "langgraph:tests.adapters.langgraph_graphs:served_graph"


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


def test_the_spec_builds_a_langgraph_agent_and_bad_specs_say_why() -> None:
    from agui_engine.adapters.langgraph import LangGraphAgent
    from agui_engine.agent_loop import AgentLoop

    agent = agent_from_spec(SPEC)
    assert isinstance(agent, AgentLoop) and isinstance(agent.agent, LangGraphAgent)
    for bad in ("langgraph:nope", "langgraph:no.such.module:g", "langgraph:tests.adapters.langgraph_graphs:text"):
        with pytest.raises(UsageError):
            agent_from_spec(bad)


def test_served_graph_with_the_real_ag_ui_client() -> None:
    node = shutil.which("node")
    assert node, "node is required (tests/install-deps.sh)"
    assert (JS / "node_modules" / "@ag-ui" / "client").is_dir(), "run tests/install-deps.sh"
    env = {key: value for key, value in os.environ.items() if key != "AGUI_AUTH_TOKEN"}
    server = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--agent", SPEC],
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        assert server.stderr is not None
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and url is None:
            line = server.stderr.readline().decode()
            if not line and server.poll() is not None:
                break
            if line.startswith("serving on "):
                url = line.split()[-1]
        assert url, "the server did not start"
        out = subprocess.run([node, str(JS / "langgraph_client.mjs"), url], capture_output=True, text=True,
                             timeout=120, cwd=JS)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
    finally:
        server.terminate()
        assert server.wait(timeout=15) == 0
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
