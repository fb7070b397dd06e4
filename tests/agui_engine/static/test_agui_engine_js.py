"""agui_engine/static/agui-engine.js in real Node: its props equal the Python Accumulator's after every event.

Recorded runs (the demo agent's scenarios, a long streamed string in both modes) are applied by the
module in Node and by the Accumulator in Python, and compared after each event. The live run goes
through the real ``@ag-ui/client`` 1.0 ``HttpAgent`` against the SSE gateway on loopback, with the
module subscribed to the agent; the events the client delivered are then applied by the Accumulator
and compared event by event. Bad input (unknown CUSTOM events, operations that do not apply) never
throws: findings, last good props kept.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agui_engine.cli.bench_corpus import split_chunks
from agui_engine.cli.bench_props import long_string_arguments, run_component_call
from agui_engine.cli.demo import demo_agent
from agui_engine.genui.component_stream import COMPONENT_HANDLERS, component_blocks
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.events import Event, RunAgentInput, UserMessage
from agui_engine.transports import start_sse_server
from tests.helpers import node_with

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "agui_engine" / "static" / "agui-engine.js"
JS = ROOT / "tests" / "js"
#: Node runs a few hundred events in well under a second; the deadline only stops a hang.
NODE_TIMEOUT = 60


def node() -> str:
    found = node_with("@ag-ui/client")
    return found


def apply_in_node(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    text = "".join(json.dumps(e) + "\n" for e in events)
    done = subprocess.run([node(), str(JS / "apply.mjs"), str(MODULE)], input=text, capture_output=True,
                          text=True, timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[:-1], lines[-1]


def python_props(events: list[Event]) -> list[dict[str, Any]]:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    out = []
    for event in events:
        acc.apply(event)
        out.append({b["id"]: copy.deepcopy(b["props"]) for b in component_blocks(acc)})
    return out


def agent_events(message: str) -> list[Event]:
    async def collect() -> list[Event]:
        run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content=message)])
        return [e async for e in demo_agent().run(run)]

    return asyncio.run(collect())


def wire(events: list[Event]) -> list[dict[str, Any]]:
    return [json.loads(encode_event(e)) for e in events]


def assert_same_after_every_event(events: list[Event]) -> dict[str, Any]:
    js, final = apply_in_node(wire(events))
    py = python_props(events)
    assert len(js) == len(py) == len(events)
    for index, (ours, theirs) in enumerate(zip(js, py)):
        assert ours["props"] == theirs, f"after event {index} ({events[index].type.value})"
    assert js[-1]["findings"] == []
    return final


@pytest.mark.parametrize("message", ["What's the weather in Tokyo and Paris?", "Show me the dashboard"])
def test_recorded_demo_runs_match_the_accumulator(message: str) -> None:
    events = agent_events(message)
    final = assert_same_after_every_event(events)
    assert final["components"], "the scenario shows at least one component"
    for component in final["components"].values():
        assert component["streamingState"] == "done"
        assert component["statusMessage"] and component["completionStatusMessage"]
        assert component["propsStatus"] and set(component["propsStatus"].values()) == {"done"}
    assert final["runs"][-1]["status"] == "finished"


@pytest.mark.parametrize("append", [True, False], ids=["append", "strict-rfc6902"])
def test_long_string_in_both_modes(append: bool) -> None:
    events: list[Event] = []
    run_component_call(split_chunks(long_string_arguments(6000)), append_strings=append,
                       on_frame=lambda event, _frame: events.append(event))
    final = assert_same_after_every_event(events)
    (component,) = final["components"].values()
    assert len(component["finalProps"]["content"]) > 4000


def test_bad_input_becomes_findings_and_keeps_the_last_good_props() -> None:
    start = {"type": "CUSTOM", "name": "tambo.component.start",
             "value": {"messageId": "m", "componentId": "c", "componentName": "Card"}}
    good = {"type": "CUSTOM", "name": "tambo.component.props_delta",
            "value": {"componentId": "c", "operations": [{"op": "add", "path": "/title", "value": "He"},
                                                          {"op": "append", "path": "/title", "value": "llo"}]}}
    bad = {"type": "CUSTOM", "name": "tambo.component.props_delta",  # the first op applies, the second cannot
           "value": {"componentId": "c", "operations": [{"op": "append", "path": "/title", "value": "!"},
                                                         {"op": "append", "path": "/missing", "value": "x"}]}}
    unknown_op = {"type": "CUSTOM", "name": "tambo.component.props_delta",
                  "value": {"componentId": "c", "operations": [{"op": "frobnicate", "path": "/title"}]}}
    events = [start, good, bad, unknown_op,
              {"type": "CUSTOM", "name": "some.other.vendor", "value": 1},
              {"type": "CUSTOM", "name": "tambo.component.props_delta", "value": {"componentId": "nope",
                                                                                  "operations": []}},
              {"type": "CUSTOM", "name": "tambo.component.props_delta", "value": "not an object"},
              {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/x", "value": 1}]}]
    js, _ = apply_in_node(events)
    assert [line["props"] for line in js] == [{"c": {}}] + [{"c": {"title": "Hello"}}] * 7
    kinds = [(f["eventIndex"], f["kind"]) for f in js[-1]["findings"]]
    assert kinds == [(2, "component_patch"), (3, "component_patch"), (4, "unknown_custom"), (5, "component"),
                     (6, "component"), (7, "state_patch")]
    assert "last good props kept" in js[-1]["findings"][0]["message"]


async def node_script(script: str, *args: str) -> str:
    """Run ``tests/js/<script> <agui-engine.js> <args...>`` in node; its stdout (exit status 0 asserted)."""
    proc = await asyncio.create_subprocess_exec(node(), str(JS / script), str(MODULE), *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), NODE_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_live_run_through_the_real_ag_ui_client() -> None:
    server = await start_sse_server(demo_agent(), port=0)
    try:
        out = await node_script("live.mjs", server.url, "What's the weather in Tokyo and Paris?")
    finally:
        await server.close()
    lines = [json.loads(line) for line in out.splitlines()]
    events = [decode_event(json.dumps(line["event"])) for line in lines]
    assert events[0].type.value == "RUN_STARTED" and events[-1].type.value == "RUN_FINISHED"
    py = python_props(events)
    assert sum(1 for e in events if getattr(e, "name", "") == "tambo.component.props_delta") > 10
    for index, (line, theirs) in enumerate(zip(lines, py)):
        assert line["props"] == theirs, f"after event {index}"
    assert len(py[-1]) == 2 and lines[-1]["findings"] == 0


def render_ui_events(*fragments: str) -> list[Event]:
    """A whole LLMAgent run whose model calls ``render_ui`` with ``fragments``, then answers in text."""
    from agui_engine.genui.uispec import UI_SPEC_TOOL, UISpecTool
    from agui_engine.llm import Finish
    from agui_engine.loops.llm_agent import LLMAgent

    from ..scripted_llm import ScriptedLLM, call, counter_ids, text

    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *fragments) + [Finish(reason="tool_calls")], text("Shown."))
    agent = LLMAgent(llm, ui_spec=UISpecTool(["Card", "Stack", "Stat"]), id_factory=counter_ids())

    async def collect() -> list[Event]:
        run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="dashboard")])
        return [e async for e in agent.run(run)]

    return asyncio.run(collect())


UI_TREE = {"root": [{"component": "Card", "props": {"title": "Sales"}, "children": [
    "Revenue is up.", {"component": "Stack", "children": [
        {"component": "Stat", "props": {"label": "Revenue", "value": "$124k"}, "key": "rev"},
        {"component": "Stat", "props": {"label": "Users", "value": "8.2k"}}]}], "key": "sales"}]}


def test_ui_spec_tree_applies_like_the_accumulator() -> None:
    text_ = json.dumps(UI_TREE)
    events = render_ui_events(*[text_[i:i + 7] for i in range(0, len(text_), 7)])
    final = assert_same_after_every_event(events)
    (tree,) = final["components"].values()
    assert tree["streamingState"] == "done"
    root = tree["finalProps"]["root"]
    assert [root[0]["id"], root[0]["children"][1]["id"], root[0]["children"][1]["children"][0]["key"]] == [
        "0", "0/1", "rev"]
    # the module's own reader of a tree, in node
    script = (f"const m = await import({json.dumps(MODULE.as_uri())}); const s = new m.ThreadStore();"
              "for (const l of require('fs').readFileSync(0, 'utf8').split('\\n')) if (l.trim()) s.apply(JSON.parse(l));"
              "const walk = (n) => typeof n === 'string' ? n : [n.id, n.component, n.children.map(walk)];"
              "console.log(JSON.stringify([...s.components.values()].map((c) => m.uiNodes(c).map(walk))));")
    done = subprocess.run([node(), "--input-type=commonjs", "-e", f"(async () => {{ {script} }})()"],
                          input="".join(json.dumps(e) + "\n" for e in wire(events)), capture_output=True, text=True,
                          timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[["0", "Card", ["Revenue is up.", ["0/1", "Stack", [
        ["0/1/0", "Stat", []], ["0/1/1", "Stat", []]]]]]]]
