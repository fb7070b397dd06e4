"""What every run of an agent-framework adapter (LangGraph, CrewAI) must pass, and the small
readers the adapter tests share: one piece of code for both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec
from ag_ui_validate.pytest_plugin import assert_valid_agui

from agui_engine.genui.components import Component
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import Event, RunAgentInput, TextMessageContentEvent
from agui_engine.protocol.verify import verify_events
from tests.helpers import collect as run_events
from tests.helpers import node_with

#: The API key the adapter tests hand their models: it must never reach an event.
KEY = "sk-test-S3CRET"

#: The node scripts driving the real @ag-ui/client (and its npm install).
JS = Path(__file__).resolve().parents[1] / "js"

#: How long ``agui-engine serve`` may take to listen: importing crewai or langgraph takes
#: 5-20 s on a loaded machine.
SERVE_START_SECONDS = 120


def served_client_result(spec: str, script: str) -> dict[str, Any]:
    """``agui-engine serve --port 0 --agent <spec>`` in a subprocess, driven by the node
    ``script`` (in tests/js) with the real @ag-ui/client; the ``runs`` it prints. The
    server must start, the script exit 0 and the server stop cleanly on SIGTERM."""
    node = node_with("@ag-ui/client")
    env = {key: value for key, value in os.environ.items() if key != "AGUI_AUTH_TOKEN"}
    server = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--agent", spec],
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        assert server.stderr is not None
        url = None
        deadline = time.monotonic() + SERVE_START_SECONDS
        while time.monotonic() < deadline and url is None:
            line = server.stderr.readline().decode()
            if not line and server.poll() is not None:
                break
            if line.startswith("serving on "):
                url = line.split()[-1]
        assert url, "the server did not start"
        out = subprocess.run([node, str(JS / script), url], capture_output=True, text=True, timeout=120, cwd=JS)
        assert out.returncode == 0, out.stderr
        result: dict[str, Any] = json.loads(out.stdout)
    finally:
        server.terminate()
        assert server.wait(timeout=15) == 0
    return result


#: The component the adapter tests' agents show through the agent loop.
WEATHER_CARD = Component("WeatherCard", "Shows the weather of one city.", {
    "type": "object", "properties": {"city": {"type": "string"}, "tempC": {"type": "number"}}, "required": ["city"]})


def check(events: Sequence[Any]) -> None:
    """Every run is valid for our Verifier and for ag-ui-validate, and contains no key."""
    assert verify_events(events) == [], verify_events(events)
    assert_valid_agui([msgspec.json.decode(encode_event(e)) for e in events], max_warnings=0)
    assert KEY not in repr(events)


async def collect(agent: Agent, input: RunAgentInput) -> list[Event]:
    """The whole run of ``agent`` on ``input``, checked."""
    events = await run_events(agent, input)
    check(events)
    return events


def of(events: Sequence[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def texts(events: Sequence[Any]) -> str:
    return "".join(e.delta for e in of(events, TextMessageContentEvent))


def digest(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a run's events carry, independent of ids, chunking into events and ordering."""
    out: dict[str, Any] = {"text": Counter(), "reasoning": Counter(), "encrypted": Counter(), "calls": {},
                           "results": {}, "custom": [], "steps": set(), "usage": None, "interrupts": 0,
                           "args_events": Counter(), "states": []}
    for e in events:
        kind = e["type"]
        if kind == "TEXT_MESSAGE_CONTENT":
            out["text"][e["delta"]] += 1
        elif kind == "REASONING_MESSAGE_CONTENT":
            out["reasoning"][e["delta"]] += 1
        elif kind == "REASONING_ENCRYPTED_VALUE":
            out["encrypted"][e["encryptedValue"]] += 1
        elif kind == "TOOL_CALL_START":
            out["calls"][e["toolCallId"]] = [e["toolCallName"], ""]
        elif kind == "TOOL_CALL_ARGS":
            out["calls"][e["toolCallId"]][1] += e["delta"]
            out["args_events"][e["toolCallId"]] += 1
        elif kind == "TOOL_CALL_RESULT":
            out["results"][e["toolCallId"]] = e["content"]
        elif kind == "CUSTOM" and e["name"] != "on_interrupt":  # the official legacy interrupt echo
            out["custom"].append((e["name"], e["value"]))
        elif kind == "STATE_SNAPSHOT":
            out["states"].append(e["snapshot"])
        elif kind == "STATE_DELTA":
            out["states"].append(jsonpatch.apply_patch(out["states"][-1], e["delta"]))
        elif kind == "STEP_STARTED":
            out["steps"].add(e["stepName"])
        elif kind == "RUN_FINISHED":
            usage = e.get("usage") or []
            out["usage"] = (sum(u.get("inputTokens", 0) for u in usage), sum(u.get("outputTokens", 0) for u in usage))
            out["interrupts"] = len((e.get("outcome") or {}).get("interrupts") or [])
    return out
