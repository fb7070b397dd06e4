"""Interactable components (more): parsing them from a run's context, their update tools, the partial updates those tools carry, and the shallow merge."""

from __future__ import annotations

import json

import jsonschema
import pytest

from agui_engine.genui.components import MAX_TOOL_NAME_LENGTH
from agui_engine.genui.interactables import (
    INTERACTABLES_CONTEXT,
    MAX_INTERACTABLE_ID_LENGTH,
    UPDATE_PROPS_TOOL_PREFIX,
    UPDATE_RESULT,
    UPDATE_STATE_TOOL_PREFIX,
    Interactable,
    InteractableToolCall,
    interactable_tools,
    interactables_from_context,
    merge_update,
    parse_interactable_tool_name,
    update_tool_schema,
)
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import Context

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "color": {"type": "string", "enum": ["red", "blue"]}},
    "required": ["text"],
}


def note(**kw: object) -> Interactable:
    args: dict[str, object] = {"id": "Note-1", "component_name": "Note", "props": {"text": "hi", "color": "red"},
                               "props_schema": NOTE_SCHEMA}
    args.update(kw)
    return Interactable(**args)  # type: ignore[arg-type]


def test_ids_are_checked_so_that_tool_names_stay_valid() -> None:
    assert len(UPDATE_PROPS_TOOL_PREFIX) == len(UPDATE_STATE_TOOL_PREFIX)
    longest = "a" * MAX_INTERACTABLE_ID_LENGTH
    assert len(note(id=longest).tool_name("state")) == MAX_TOOL_NAME_LENGTH
    with pytest.raises(UsageError, match="at most"):
        note(id=longest + "a")
    for bad in ("has space", "dot.ted", "", "slash/"):
        with pytest.raises(UsageError, match="letters, digits"):
            note(id=bad)


def test_tool_names_round_trip_through_the_parser() -> None:
    i = note()
    assert i.tool_name("props") == "update_component_props_Note-1"
    assert parse_interactable_tool_name(i.tool_name("props")) == InteractableToolCall(kind="props", component_id="Note-1")
    assert parse_interactable_tool_name(i.tool_name("state")) == InteractableToolCall(kind="state", component_id="Note-1")
    assert parse_interactable_tool_name(UPDATE_PROPS_TOOL_PREFIX) is None  # no id
    assert parse_interactable_tool_name("show_component_Note") is None


def test_update_schema_pins_the_id_and_requires_nothing_inside_the_update() -> None:
    schema = update_tool_schema(note(), "props")
    assert schema["required"] == ["componentId", "newProps"]
    assert schema["properties"]["componentId"]["enum"] == ["Note-1"]
    assert "required" not in schema["properties"]["newProps"]  # partial: "text" is no longer required
    assert NOTE_SCHEMA["required"] == ["text"]  # the component's own schema is untouched
    jsonschema.validate({"componentId": "Note-1", "newProps": {"color": "blue"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"componentId": "Other", "newProps": {}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"componentId": "Note-1", "newProps": {"color": "green"}}, schema)
    # no schema: a free-form object
    free = update_tool_schema(note(), "state")["properties"]["newState"]
    assert free["type"] == "object" and free["additionalProperties"] is True


def test_schema_definitions_move_to_the_root_so_references_resolve() -> None:
    with_defs = {"type": "object", "properties": {"c": {"$ref": "#/$defs/C"}}, "$defs": {"C": {"type": "string"}}}
    schema = update_tool_schema(note(props_schema=with_defs), "props")
    assert "$defs" in schema and "$defs" not in schema["properties"]["newProps"]
    jsonschema.validate({"componentId": "Note-1", "newProps": {"c": "x"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"componentId": "Note-1", "newProps": {"c": 1}}, schema)


def test_tools_are_strict_with_a_schema_and_non_strict_without_one() -> None:
    (props_tool, props_result), (state_tool, state_result) = interactable_tools(note())
    assert props_tool.name == "update_component_props_Note-1" and props_tool.strict and props_result.strict
    assert state_tool.name == "update_component_state_Note-1" and not state_tool.strict
    assert state_result.reason and "free-form" in state_result.reason
    assert "_tambo_statusMessage" in props_tool.parameters["properties"]  # standard parameters added
    (loose, result), _ = interactable_tools(note(), strict=False)
    assert not loose.strict and result.reason == "strict mode not requested"


def test_prepare_update_drops_strict_nulls_and_standard_parameters() -> None:
    i = note()
    args = {"componentId": "Note-1", "newProps": {"text": None, "color": "blue"}, "_tambo_statusMessage": "Painting"}
    assert i.prepare_update("props", args) == {"color": "blue"}  # null = "unchanged" in strict mode
    assert i.prepare_update("props", {"componentId": "Note-1"}) == {}
    with pytest.raises(RemoteInputError, match="componentId 'Other' is not 'Note-1'"):
        i.prepare_update("props", {"componentId": "Other", "newProps": {}})
    with pytest.raises(RemoteInputError, match="newState must be a JSON object"):
        i.prepare_update("state", {"componentId": "Note-1", "newState": [1]})


def test_merge_is_shallow_and_leaves_its_inputs_alone() -> None:
    current = {"text": "hi", "style": {"bold": True, "size": 3}}
    update = {"style": {"size": 4}}
    merged = merge_update(current, update)
    assert merged == {"text": "hi", "style": {"size": 4}}  # a nested object is replaced, not merged
    assert current == {"text": "hi", "style": {"bold": True, "size": 3}} and update == {"style": {"size": 4}}
    assert note().current("props") == {"text": "hi", "color": "red"}
    assert note().current("state") == {}  # unknown state
    assert UPDATE_RESULT == "Updated successfully"


def test_interactables_come_from_every_matching_context_entry() -> None:
    context = [
        Context(description="page", value="/weather"),
        Context(description=INTERACTABLES_CONTEXT, value=json.dumps({"components": [
            {"id": "a", "componentName": "A", "props": {"x": 1}, "isSelected": True,
             "propsSchema": "a schema given as a string is ignored"},
        ]})),
        {"description": INTERACTABLES_CONTEXT, "value": [{"id": "b", "componentName": "B", "state": {"open": True}}]},
    ]
    found = interactables_from_context(context)
    assert [(i.id, i.component_name) for i in found] == [("a", "A"), ("b", "B")]
    assert found[0].is_selected and found[0].props == {"x": 1} and found[0].props_schema is None
    assert found[1].current("state") == {"open": True}
    assert interactables_from_context([]) == []


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("{not json", r"context\[0\]\.value: not JSON"),
        (json.dumps({"components": {"id": "a"}}), r"context\[0\]\.value\.components: expected a list"),
        (json.dumps({"components": [{"id": "a"}]}), r"context\[0\]\.value\.components\[0\]: .*componentName"),
        (json.dumps({"components": [{"id": "a b", "componentName": "A"}]}), r"components\[0\]\.id: interactable id"),
        (json.dumps([{"id": "a", "componentName": "A"}, {"id": "a", "componentName": "B"}]),
         r"context\[0\]\.value\[1\]\.id: duplicate interactable id 'a'"),
    ],
)
def test_bad_context_names_the_entry_and_member(value: str, where: str) -> None:
    with pytest.raises(RemoteInputError, match=where) as ei:
        interactables_from_context([Context(description=INTERACTABLES_CONTEXT, value=value)])
    assert ei.value.http_status == 400
