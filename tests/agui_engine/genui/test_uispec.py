"""The UI spec as a tool (``render_ui``): offered by the decision loop, LLMAgent and the agent loop,
its tree streamed as the ``generative-ui`` component, unknown components refused back to the model."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonpatch
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.component_stream import COMPONENT_END, COMPONENT_PROPS_DELTA, COMPONENT_START, component_blocks
from agui_engine.genui.components import Component
from agui_engine.genui.tree import tree_document, validate_spec
from agui_engine.genui.uispec import UI_SPEC_COMPONENT, UI_SPEC_TOOL, UISpecStream, UISpecTool
from agui_engine.llm import Finish
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.decision import run_decision_loop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.thread import Thread
from agui_engine.loops.tool_calls import ToolCallArgumentsError
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    Tool,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from tests.helpers import run_input
from tests.hypothesis_profiles import at_most

from ..run_checks import check_run
from ..scripted_llm import ScriptedLLM, call, counter_ids, text
from .test_tree import _order

ROOT = Path(__file__).resolve().parents[3]
EVENT_SCHEMA = jsonschema.Draft202012Validator(
    json.loads((ROOT / "spec" / "schema" / "component-events.schema.json").read_text(encoding="utf-8")))

CARD = Component("Card", "A card with a title.", {"type": "object", "properties": {"title": {"type": "string"}},
                                                  "required": ["title"]})
STAT = Component("Stat", "One figure.", {"type": "object", "properties": {"label": {"type": "string"},
                                                                          "value": {"type": "string"}}})
ALLOW = ["Card", "Stack", "Stat", "Text"]

DASHBOARD = {
    "root": [
        {"component": "Card", "props": {"title": "Sales"}, "children": [
            "Revenue is up.",
            {"component": "Stack", "props": {"direction": "row"}, "children": [
                {"component": "Stat", "props": {"label": "Revenue", "value": "$124k"}, "key": "rev"},
                {"component": "Stat", "props": {"label": "Users", "value": "8.2k"}, "key": "users"},
            ]},
        ], "key": "sales"},
        "Footer",
    ]
}
DASHBOARD_TEXT = json.dumps({"_tambo_statusMessage": "Drawing the dashboard", **DASHBOARD,
                             "_tambo_completionStatusMessage": "Drew the dashboard"})


def split(text_: str, n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    cuts = sorted(rnd.sample(range(1, len(text_)), min(n, len(text_) - 1)))
    return [text_[a:b] for a, b in zip([0, *cuts], [*cuts, len(text_)])]


def dashboard_input(text: str = "show me the dashboard", tools: list[Tool] | None = None) -> RunAgentInput:
    return run_input(text, tools=tools or [])


def tree_ops(events: list[Any]) -> list[dict[str, Any]]:
    return [op for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_PROPS_DELTA
            for op in e.value["operations"]]


def check_component_events(events: list[Any]) -> dict[str, Any]:
    """Every component event validates against the published schema; the deltas build finalProps."""
    doc: Any = {}
    final = None
    for e in events:
        if isinstance(e, CustomEvent) and e.name.startswith("tambo.component."):
            EVENT_SCHEMA.validate({"type": "CUSTOM", "name": e.name, "value": e.value})
            if e.name == COMPONENT_PROPS_DELTA:
                doc = jsonpatch.JsonPatchWithAppend(e.value["operations"]).apply(doc)
            elif e.name == COMPONENT_END:
                final = e.value["finalProps"]
    assert final is not None and doc == final
    return doc


# --------------------------------------------------------------------------- the tool


def test_the_tool_allows_only_the_allowlist() -> None:
    tool = UISpecTool([CARD, "Stack", "Stat", "Text"])
    llm_tool = tool.to_llm_tool()
    assert llm_tool.name == UI_SPEC_TOOL == "render_ui" and not llm_tool.strict  # free-form props
    node = llm_tool.parameters["$defs"]["node"]["anyOf"][2]
    assert node["properties"]["component"]["enum"] == sorted(ALLOW)
    assert list(llm_tool.parameters["properties"])[:2] == ["_tambo_statusMessage", "_tambo_completionStatusMessage"]
    assert "Card (A card with a title.)" in llm_tool.description and "Stat" in llm_tool.description
    schema = jsonschema.Draft202012Validator(llm_tool.parameters)
    assert schema.is_valid({"_tambo_statusMessage": "s", "_tambo_completionStatusMessage": "c", **DASHBOARD})
    assert not schema.is_valid({"_tambo_statusMessage": "s", "_tambo_completionStatusMessage": "c",
                                "root": {"component": "Chart"}})
    # allowlist=None: the run's components; nothing to allow: no tool
    assert UISpecTool().for_run([CARD, STAT]).names == ("Card", "Stat")  # type: ignore[union-attr]
    assert UISpecTool().for_run([]) is None
    with pytest.raises(UsageError):
        UISpecTool([3])  # type: ignore[list-item]


async def test_decision_loop_streams_the_tree_as_partial_nodes() -> None:
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *split(DASHBOARD_TEXT, 60)) + [Finish(reason="tool_calls")])
    events: list[Any] = []
    last = None
    async for item in run_decision_loop(llm, [UserMessage(id="u", content="hi")], components=[CARD, STAT],
                                        ui_spec=UISpecTool(ALLOW), id_factory=counter_ids()):
        events.extend(item.events)
        last = item.decision
    offered = {t.name for t in llm.calls[0].tools}
    assert offered == {"show_component_Card", "show_component_Stat", UI_SPEC_TOOL}
    starts = [e for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_START]
    assert [s.value["componentName"] for s in starts] == [UI_SPEC_COMPONENT]
    deltas = [e for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_PROPS_DELTA]
    assert len(deltas) > 10  # partial nodes while the model types, not one tree at the end
    final = check_component_events(events)
    assert final == tree_document(validate_spec(DASHBOARD, ALLOW))
    assert final["root"][0]["children"][1]["children"][0] == {
        "id": "0/1/0", "component": "Stat", "props": {"label": "Revenue", "value": "$124k"}, "key": "rev",
        "children": [], "done": True}
    assert last is not None and last.components[0].component_name == UI_SPEC_COMPONENT
    assert last.components[0].props == final
    # the standard parameters became status, never props or wire arguments
    assert "_tambo_" not in json.dumps(final)
    wire = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert json.loads(wire) == DASHBOARD


async def test_key_after_props_keeps_each_node_at_one_path() -> None:
    spec = ('{"root": [{"component": "Card", "props": {"title": "Hello there"}, "children": ['
            '{"component": "Text", "props": {"v": "a"}, "key": "t1"}], "key": "card"}]}')
    for fragments in (list(spec), split(spec, 12, seed=5)):
        llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *fragments) + [Finish(reason="tool_calls")])
        events = [e async for item in run_decision_loop(llm, [], ui_spec=UISpecTool(ALLOW), id_factory=counter_ids())
                  for e in item.events]
        ops = tree_ops(events)
        adds = [(op["path"], op["value"]["id"]) for op in ops
                if op["op"] == "add" and isinstance(op["value"], dict) and "component" in op["value"]]
        assert adds == [("/root/0", "0"), ("/root/0/children/0", "0/0")]  # each node added once, where it stays
        assert {"op": "add", "path": "/root/0/key", "value": "card"} in ops
        assert {"op": "add", "path": "/root/0/children/0/key", "value": "t1"} in ops
        assert all(op["op"] in ("add", "append") or op["path"].endswith("/done") for op in ops)
        # the key came after the props: the props streamed into the node before it had a key
        first_key = next(i for i, op in enumerate(ops) if op["path"] == "/root/0/key")
        assert any(op["path"].startswith("/root/0/props/title") for op in ops[:first_key]) or len(fragments) < 20
        assert check_component_events(events)["root"][0]["key"] == "card"


async def test_llm_agent_renders_a_tree_and_the_run_is_valid() -> None:
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *split(DASHBOARD_TEXT, 40)) + [Finish(reason="tool_calls")],
                      text("Here is your dashboard."))
    agent = LLMAgent(llm, components=[CARD, STAT], ui_spec=UISpecTool(ALLOW), id_factory=counter_ids())
    events = [e async for e in agent.run(dashboard_input())]
    acc = check_run(events)
    (block,) = component_blocks(acc)
    assert block["name"] == UI_SPEC_COMPONENT and block["streamingState"] == "done"
    assert block["props"] == tree_document(validate_spec(DASHBOARD, ALLOW))
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert result.content == "The UI is shown on the user's screen."
    assert isinstance(llm.calls[1].messages[-1], ToolMessage) and llm.calls[1].messages[-1].error is None
    check_component_events(events)


async def test_unknown_component_is_refused_back_to_the_model() -> None:
    bad = {"root": [{"component": "Card", "props": {"title": "T"}},
                    {"component": "Chart", "props": {"data": [1, 2, 3]}}, {"component": "Text"}]}
    good = {"root": [{"component": "Card", "props": {"title": "T"}}]}
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *split(json.dumps(bad), 30)) + [Finish(reason="tool_calls")],
                      call(0, "c2", UI_SPEC_TOOL, json.dumps(good)) + [Finish(reason="tool_calls")],
                      text("Done."))
    agent = LLMAgent(llm, components=[CARD], ui_spec=UISpecTool(ALLOW), id_factory=counter_ids())
    events = [e async for e in agent.run(dashboard_input())]
    acc = check_run(events)
    assert isinstance(events[-1], RunFinishedEvent)
    first, second = component_blocks(acc)
    # the refused tree is withdrawn, with why; the Card shown before the refusal is gone too
    assert first["props"] == {"root": [], "error": {
        "code": "unknown_component", "component": "Chart", "pointer": "/root/1",
        "message": "component 'Chart' at /root/1 is not in the generative UI allowlist"}}
    assert not any(isinstance(op["value"], dict) and op["value"].get("component") == "Chart" and op["path"] != "/error"
                   for op in tree_ops(events))  # the unknown node itself was never on the screen
    assert second["props"] == tree_document(validate_spec(good, ALLOW))
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert results[0].content.startswith("Error: the UI was refused: component 'Chart' at /root/1 is not in")
    assert "The allowed components are: Card, Stack, Stat, Text" in results[0].content
    told = llm.calls[1].messages[-1]
    assert isinstance(told, ToolMessage) and "Chart" in (told.error or "")
    assert results[1].content == "The UI is shown on the user's screen."


async def test_props_that_do_not_fit_a_registered_component_are_told() -> None:
    spec = {"root": [{"component": "Card", "props": {"title": 5}}, {"component": "Card", "props": {}}]}
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, json.dumps(spec)) + [Finish(reason="tool_calls")], text("ok"))
    agent = LLMAgent(llm, ui_spec=UISpecTool([CARD]), id_factory=counter_ids())
    events = [e async for e in agent.run(dashboard_input())]
    check_run(events)
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert result.content.startswith("The UI is shown on the user's screen. Error: the props of Card at /root/0 ")
    assert "(and 1 more node with props that do not match)" in result.content


async def test_malformed_json_ends_the_run_like_any_tool() -> None:
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, '{"root": [{"component": "Card"', "}}") + [Finish(reason="stop")])
    agent = LLMAgent(llm, ui_spec=UISpecTool(ALLOW), id_factory=counter_ids())
    events = [e async for e in agent.run(dashboard_input())]
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "invalid_json"
    with pytest.raises(ToolCallArgumentsError):
        async for _ in run_decision_loop(llm, [], ui_spec=UISpecTool(ALLOW)):
            pass


async def test_thread_builds_the_tree() -> None:
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *list(DASHBOARD_TEXT)) + [Finish(reason="tool_calls")], text("ok"))
    thread = Thread(LLMAgent(llm, ui_spec=UISpecTool(ALLOW), id_factory=counter_ids()), id_factory=counter_ids("t"))
    await thread.send("dashboard")
    (block,) = component_blocks(thread.accumulator)
    assert block["props"] == tree_document(validate_spec(DASHBOARD, ALLOW))


# --------------------------------------------------------------------------- the agent loop


def inner_agent(fragments: list[str], seen: list[RunAgentInput]) -> Any:
    async def agent(input_: RunAgentInput) -> AsyncIterator[Any]:
        seen.append(input_)
        yield RunStartedEvent(thread_id=input_.thread_id, run_id=input_.run_id)
        yield ToolCallStartEvent(tool_call_id="call-1", tool_call_name=UI_SPEC_TOOL, parent_message_id="m1")
        for fragment in fragments:
            yield ToolCallArgsEvent(tool_call_id="call-1", delta=fragment)
        yield ToolCallEndEvent(tool_call_id="call-1")
        yield RunFinishedEvent(thread_id=input_.thread_id, run_id=input_.run_id)

    return agent


async def test_agent_loop_offers_the_tool_and_renders_the_tree() -> None:
    seen: list[RunAgentInput] = []
    loop = AgentLoop(inner_agent(split(DASHBOARD_TEXT, 50), seen), components=[CARD], ui_spec=UISpecTool(ALLOW),
                     id_factory=counter_ids())
    client_tool = Tool(name="pick_date", description="d", parameters={"type": "object", "properties": {}})
    input_ = dashboard_input(tools=[client_tool])
    events = [e async for e in loop.run(input_)]
    acc = check_run(events, input_=input_)
    names = [t.name for t in seen[0].tools]
    assert names == ["pick_date", "show_component_Card", UI_SPEC_TOOL]
    offered = next(t for t in seen[0].tools if t.name == UI_SPEC_TOOL)
    assert offered.parameters["$defs"]["node"]["anyOf"][2]["properties"]["component"]["enum"] == sorted(ALLOW)
    (block,) = component_blocks(acc)
    assert block["name"] == UI_SPEC_COMPONENT
    assert block["props"] == tree_document(validate_spec(DASHBOARD, ALLOW)) == check_component_events(events)
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert result.tool_call_id == "call-1" and result.content == "The UI is shown on the user's screen."


async def test_agent_loop_refuses_an_unknown_component() -> None:
    spec = json.dumps({"root": {"component": "Card", "children": [{"component": "Evil", "props": {"x": 1}}]}})
    loop = AgentLoop(inner_agent(list(spec), []), ui_spec=UISpecTool(ALLOW), id_factory=counter_ids())
    events = [e async for e in loop.run(dashboard_input())]
    acc = check_run(events)
    (block,) = component_blocks(acc)
    assert block["props"]["root"] == [] and block["props"]["error"]["component"] == "Evil"
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert "component 'Evil' at /root/children/0 is not in the generative UI allowlist" in result.content


# --------------------------------------------------------------------------- the stream


def feed_all(chunks: list[str], append_strings: bool = True) -> tuple[list[CustomEvent], UISpecStream]:
    stream = UISpecStream(UISpecTool(ALLOW), message_id="m", component_id="c", append_strings=append_strings)
    events: list[CustomEvent] = []
    doc: Any = {}
    for chunk in chunks:
        out = stream.feed(chunk)
        events += out
        for e in out:
            if e.name == COMPONENT_PROPS_DELTA:
                doc = jsonpatch.JsonPatchWithAppend(e.value["operations"]).apply(doc)
        assert doc == stream.props  # after every fragment, the events so far build the props
    events += stream.close()
    check_component_events(events)
    return events, stream


def test_strict_mode_sends_rfc6902_only() -> None:
    events, stream = feed_all(list(DASHBOARD_TEXT), append_strings=False)
    ops = [op for e in events if e.name == COMPONENT_PROPS_DELTA for op in e.value["operations"]]
    assert {op["op"] for op in ops} <= {"add", "replace"}
    doc = jsonpatch.JsonPatch(ops).apply({})
    assert doc == stream.final_props == tree_document(validate_spec(DASHBOARD, ALLOW))


names = st.sampled_from(ALLOW + ["Chart"])  # Chart is not allowed: some trees are refused
props = st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=8)), max_size=2)
trees = st.recursive(
    st.one_of(st.none(), st.text(max_size=10), st.fixed_dictionaries({"component": names}, optional={"props": props})),
    lambda children: st.fixed_dictionaries({"component": names},
                                           optional={"props": props, "children": st.lists(children, max_size=3)}),
    max_leaves=10,
)


@settings(max_examples=at_most(80), deadline=None)
@given(root=st.lists(trees, max_size=3), seed=st.integers(0, 2**16), n=st.integers(1, 12))
def test_byte_at_a_time_and_random_splits_give_identical_trees(root: list[Any], seed: int, n: int) -> None:
    spec = {"root": [_order(n, random.Random(seed)) for n in root]}  # members in any order
    text_ = json.dumps(spec)
    by_byte, byte_stream = feed_all(list(text_))
    by_split, split_stream = feed_all(split(text_, n, seed))
    whole, whole_stream = feed_all([text_])
    assert byte_stream.final_props == split_stream.final_props == whole_stream.final_props
    def has_chart(nodes_: list[Any]) -> bool:
        return any(isinstance(x, dict) and (x["component"] == "Chart" or has_chart(x.get("children", [])))
                   for x in nodes_)

    if has_chart(spec["root"]):
        assert byte_stream.refusal is not None and byte_stream.final_props["root"] == []  # type: ignore[index]
        assert (byte_stream.refusal.pointer == split_stream.refusal.pointer  # type: ignore[union-attr]
                == whole_stream.refusal.pointer)  # type: ignore[union-attr]
    else:
        assert byte_stream.final_props == tree_document(validate_spec(spec, ALLOW))
        assert byte_stream.tree == split_stream.tree == validate_spec(spec, ALLOW)
