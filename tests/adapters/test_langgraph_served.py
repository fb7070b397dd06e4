"""A LangGraph graph served by ``agui-engine serve --agent langgraph:<module>:<name>`` (a
real subprocess) and used by the real ``@ag-ui/client`` 1.0.0 in Node: text, a server tool,
a component tool whose arguments fill in and whose result the client sends back, an
interrupt and its answer."""

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

    assert isinstance(agent_from_spec(SPEC), LangGraphAgent)
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
    hello, weather, card, rendered, asked, resumed = runs
    text = lambda run: "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")  # noqa: E731
    assert text(hello) == "Hello from LangGraph."
    # a server tool: the call streams its arguments, the tool runs, the model answers
    assert "TOOL_CALL_ARGS" in types(weather) and "TOOL_CALL_RESULT" in types(weather)
    assert text(weather).endswith("Done: Sunny, 21 C in Paris")
    # the component tool: its arguments fill in piece by piece, the run ends waiting for the client
    args = [e["delta"] for e in card["events"] if e["type"] == "TOOL_CALL_ARGS"]
    assert len(args) == 3 and json.loads("".join(args)) == {"city": "Oslo", "tempC": -3.5}
    (call_id,) = card["events"][-1]["outcome"]["pendingToolCallIds"]
    assert text(rendered) == "Done: rendered"
    # the interrupt and its answer
    (interrupt,) = asked["events"][-1]["outcome"]["interrupts"]
    assert interrupt["message"] == "Approve the plan?"
    assert text(resumed) == "Approved, going ahead."
    # the client's conversation: every turn, the tool calls and their results, in order
    roles = [m["role"] for m in result["messages"]]
    assert roles.count("user") == 4 and roles.count("tool") == 2
    assert any(m.get("toolCallId") == call_id for m in result["messages"])
