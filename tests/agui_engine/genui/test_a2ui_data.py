"""A2UI data bound to server resources (agui_engine/genui/a2ui.py, spec/a2ui.md): the tool schema offers
``{"$resource": ...}`` members only with resources; a call's bindings are checked against the registry
when it ends (unknown id, bad params, malformed binding, too many: refused with the JSON path, every
chunking alike); ``a2ui_resource_bindings`` / ``a2ui_data_model`` read and fill a surface's operations."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.a2ui import (
    MAX_A2UI_RESOURCE_BINDINGS,
    A2UIResourceBinding,
    A2UISurfaceStream,
    a2ui_data_model,
    a2ui_resource_bindings,
    prepare_a2ui_run,
    render_a2ui_tool,
)
from agui_engine.genui.resources import Resource, ResourceRegistry
from agui_engine.protocol.events import RunAgentInput
from tests.hypothesis_profiles import at_most

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": False}
REGISTRY = ResourceRegistry([Resource("weather.current", lambda p, i: p, params=CITY, description="weather")])


def args(data: Any) -> dict[str, Any]:
    return {"surfaceId": "s", "components": [{"id": "root", "component": "Column", "children": []}], "data": data}


def ref(resource_id: Any, params: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"resourceId": resource_id}
    if params is not None:
        body["params"] = params
    return {"$resource": body}


def run(arguments: dict[str, Any], step: int, registry: ResourceRegistry | None = REGISTRY) -> A2UISurfaceStream:
    stream = A2UISurfaceStream("c1", resources=registry)
    text = json.dumps(arguments)
    for i in range(0, len(text), step):
        stream.feed(text[i:i + step])
    stream.close()
    return stream


def test_the_schema_offers_bindings_only_with_resources() -> None:
    plain = render_a2ui_tool().parameters["properties"]["data"]
    assert plain == render_a2ui_tool(resources=ResourceRegistry()).parameters["properties"]["data"]
    assert "additionalProperties" not in plain and "$resource" not in plain["description"]
    offered = render_a2ui_tool(resources=REGISTRY).parameters["properties"]["data"]
    assert "$resource" in offered["description"]
    validator = jsonschema.Draft202012Validator(offered["additionalProperties"]["anyOf"][0])
    assert validator.is_valid(ref("weather.current", {"city": "Paris"}))
    assert not validator.is_valid(ref("weather.other", {"city": "Paris"}))
    assert not validator.is_valid(ref("weather.current", {"town": "Paris"}))
    inner, _ = prepare_a2ui_run(RunAgentInput(thread_id="t", run_id="r", messages=[]), _basic(), resources=REGISTRY)
    assert "$resource" in json.dumps(inner.tools[-1].parameters)


def _basic() -> Any:
    from agui_engine.genui.a2ui import A2UICatalog
    return A2UICatalog.basic()


@pytest.mark.parametrize("step", [1, 7, 10_000])
def test_a_valid_binding_paints_and_keeps_the_binding_as_data(step: int) -> None:
    stream = run(args({"title": "x", "weather": ref("weather.current", {"city": "Paris"})}), step)
    assert stream.valid and stream.tool_result()[1] is None
    ops = stream.operations
    assert ops is not None and ops[2]["updateDataModel"]["value"]["weather"] == ref("weather.current", {"city": "Paris"})
    assert a2ui_resource_bindings(ops) == [A2UIResourceBinding(surface_id="s", path="/weather",
                                                               resource_id="weather.current", params={"city": "Paris"})]


@pytest.mark.parametrize(("data", "code", "where"), [
    ({"w": ref("nope", {})}, "unknown_resource", "data.w.$resource.resourceId at /data/w/$resource/resourceId"),
    ({"w": ref("weather.current", {"city": 7})}, "invalid_params",
     "data.w.$resource.params.city at /data/w/$resource/params/city"),
    ({"w": ref("weather.current")}, "invalid_params", "data.w.$resource.params at /data/w/$resource/params"),
    ({"list": [{"x": ref(42)}]}, "invalid_resource", "data.list.0.x.$resource at /data/list/0/x/$resource"),
])
@pytest.mark.parametrize("step", [1, 10_000])
def test_a_bad_binding_is_refused_with_its_json_path(data: Any, code: str, where: str, step: int) -> None:
    stream = run(args(data), step)
    assert not stream.valid and stream.problems[0].code == code
    content, error = stream.tool_result()
    assert f"[{code}] {where}" in content and error is not None
    assert stream.operations is None


def test_too_many_bindings_and_no_registry() -> None:
    many = {f"k{i}": ref("weather.current", {"city": "x"}) for i in range(MAX_A2UI_RESOURCE_BINDINGS + 1)}
    assert run(args(many), 10_000).problems[0].code == "too_many_resources"
    # without resources a $resource value is plain data (the middleware passes it on)
    assert run(args({"w": ref("nope")}), 10_000, registry=None).valid


def test_bindings_and_the_filled_data_model() -> None:
    ops = [
        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/", "value": {
            "a": ref("r1", {"q": 1}), "keep": 1, "rows": [ref("r2")], "bad": ref(3)}}},
        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/a", "value": {"done": True}}},
        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/b/c", "value": ref("r3", {})}},
        "not an op",
    ]
    found = a2ui_resource_bindings(ops)
    assert [(b.path, b.resource_id, b.params) for b in found] == [("/rows/0", "r2", {}), ("/b/c", "r3", {})]
    model = a2ui_data_model(ops, {b.path: f"<{b.resource_id}>" for b in found})
    assert model == {"a": {"done": True}, "keep": 1, "rows": ["<r2>"], "bad": ref(3), "b": {"c": "<r3>"}}
    assert ops[0]["updateDataModel"]["value"]["rows"] == [ref("r2")], "the operations are not changed"
    assert a2ui_data_model([], {"/x/0": 1, "/y": 2, "/x/9": 3}) == {"x": {"0": 1, "9": 3}, "y": 2}


@settings(max_examples=at_most(60), deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_any_split_gives_the_same_verdict(cuts: list[int]) -> None:
    for data, valid in (({"w": ref("weather.current", {"city": "Paris"})}, True), ({"w": ref("nope", {})}, False)):
        text = json.dumps(args(data))
        stream = A2UISurfaceStream("c1", resources=REGISTRY)
        last = 0
        for cut in sorted(set(cuts)):
            stream.feed(text[last:cut])
            last = max(last, cut)
        stream.feed(text[last:])
        stream.close()
        assert stream.valid is valid
        assert (stream.operations is not None) is valid


def test_agent_loop_checks_bindings_against_its_resources() -> None:
    from agui_engine import (
        AgentLoop,
        RunFinishedEvent,
        RunStartedEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallStartEvent,
    )

    script = [RunStartedEvent(thread_id="t", run_id="r"),
              ToolCallStartEvent(tool_call_id="c1", tool_call_name="render_a2ui"),
              ToolCallArgsEvent(tool_call_id="c1", delta=json.dumps(args({"w": ref("nope", {})}))),
              ToolCallEndEvent(tool_call_id="c1"), RunFinishedEvent(thread_id="t", run_id="r")]

    async def inner(run_input: RunAgentInput) -> Any:
        for event in script:
            yield event

    async def go() -> list[Any]:
        loop = AgentLoop(inner, a2ui=True, resources=list(REGISTRY))
        return [e async for e in loop.run(RunAgentInput(thread_id="t", run_id="r", messages=[]))]

    events = asyncio.run(go())
    [result] = [e for e in events if e.type == "TOOL_CALL_RESULT"]
    assert "[unknown_resource] data.w.$resource.resourceId" in result.content
