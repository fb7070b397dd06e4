"""Components as tools: names, standard parameters, strict schemas and their inverse, server tools."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Annotated, Any

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.components import (
    COMPLETION_STATUS_MESSAGE_PARAMETER,
    DROP,
    KEEP,
    MAX_COMPONENT_NAME_LENGTH,
    MAX_TOOL_NAME_LENGTH,
    STATUS_MESSAGE_PARAMETER,
    STRICT_KEYWORDS,
    STRIPPED_KEYWORDS,
    UI_TOOL_PREFIX,
    Component,
    NullDefault,
    NullPolicy,
    StatusMessages,
    ToolArgumentsError,
    add_standard_parameters,
    component_from_tool,
    component_from_tool_name,
    component_tool_name,
    components_from_available,
    is_ui_tool,
    split_standard_parameters,
    to_strict_schema,
    tool_from_callable,
    unstrict_value,
)
from agui_engine.genui.interactables import (
    Interactable,
    interactable_tools,
    interactables_from_context,
    merge_update,
    parse_interactable_tool_name,
)
from agui_engine.genui.schemas import schema_from_struct
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import Context

NULL = {"type": "null"}
S = {"type": "string"}


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        out["required"] = required
    out.update(extra)
    return out


def closed(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**extra, "type": "object", "properties": props, "required": list(props), "additionalProperties": False}


# --------------------------------------------------------------------------- names


def test_ui_tool_names() -> None:
    assert component_tool_name("WeatherCard") == "show_component_WeatherCard"
    assert is_ui_tool("show_component_WeatherCard")
    for name in ("show_component_", "get_weather", "show_weather", ""):
        assert not is_ui_tool(name)
        assert component_from_tool_name(name) is None
    assert component_from_tool_name("show_component_A-b_1") == "A-b_1"


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "ü", "x" * (MAX_COMPONENT_NAME_LENGTH + 1)])
def test_component_name_rejected(name: str) -> None:
    with pytest.raises(UsageError):
        Component(name, "", obj({}))


def test_component_name_limit_fits_tool_name_limit() -> None:
    c = Component("x" * MAX_COMPONENT_NAME_LENGTH, "", obj({}))
    assert len(c.tool_name) == MAX_TOOL_NAME_LENGTH
    assert c.to_llm_tool().name == c.tool_name


def test_component_rejects_bad_schemas() -> None:
    with pytest.raises(UsageError, match="object schema"):
        Component("A", "", {"type": "array", "items": S})
    with pytest.raises(UsageError, match="reserved prefix"):
        Component("A", "", obj({"_tambo_statusMessage": S}))
    with pytest.raises(UsageError):
        Component("A", "", "not a schema")  # type: ignore[arg-type]


def test_component_tool_description_and_standard_parameters() -> None:
    c = Component("WeatherCard", "Shows the weather.", obj({"city": S}, ["city"]))
    tool = c.to_llm_tool()
    assert tool.description == "Show the WeatherCard UI component on the user's screen. Shows the weather."
    assert tool.strict is True
    assert list(tool.parameters["properties"])[:2] == [STATUS_MESSAGE_PARAMETER, COMPLETION_STATUS_MESSAGE_PARAMETER]
    assert tool.parameters["required"] == [STATUS_MESSAGE_PARAMETER, COMPLETION_STATUS_MESSAGE_PARAMETER, "city"]
    assert c.to_llm_tool(strict=False).strict is False
    assert "additionalProperties" not in c.to_llm_tool(strict=False).parameters


def test_add_standard_parameters_keeps_defs_and_order() -> None:
    schema = obj({"a": {"$ref": "#/$defs/A"}}, ["a"], description="d")
    schema["$defs"] = {"A": S}
    out = add_standard_parameters(schema)
    assert list(out["properties"]) == [STATUS_MESSAGE_PARAMETER, COMPLETION_STATUS_MESSAGE_PARAMETER, "a"]
    assert out["$defs"] == {"A": S} and out["description"] == "d"
    assert out["required"][:2] == [STATUS_MESSAGE_PARAMETER, COMPLETION_STATUS_MESSAGE_PARAMETER]
    assert "properties" in schema and STATUS_MESSAGE_PARAMETER not in schema["properties"]  # input untouched


def test_split_standard_parameters() -> None:
    args = {STATUS_MESSAGE_PARAMETER: "Showing", COMPLETION_STATUS_MESSAGE_PARAMETER: "Shown", "_tambo_x": 1, "a": 1}
    clean, status = split_standard_parameters(args)
    assert clean == {"a": 1}
    assert status == StatusMessages(status_message="Showing", completion_status_message="Shown")
    assert split_standard_parameters({STATUS_MESSAGE_PARAMETER: 3})[1] == StatusMessages()


# --------------------------------------------------------------------------- strict table

STRICT_TABLE: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "optional primitive becomes nullable, required one stays",
        obj({"name": {"type": "string", "description": "User name"}, "age": {"type": "number"}}, ["name"]),
        closed({"name": {"description": "User name", "type": "string"},
                "age": {"anyOf": [NULL, {"type": "number"}]}}),
    ),
    (
        "no required list: every property is optional",
        obj({"a": S}),
        closed({"a": {"anyOf": [NULL, S]}}),
    ),
    (
        "nested objects, recursively",
        obj({"person": obj({"name": S, "age": {"type": "integer"}}, ["name"])}, ["person"]),
        closed({"person": closed({"name": S, "age": {"anyOf": [NULL, {"type": "integer"}]}})}),
    ),
    (
        "optional nested object",
        obj({"o": obj({"x": S}, ["x"])}),
        closed({"o": {"anyOf": [NULL, closed({"x": S})]}}),
    ),
    (
        "array of objects: items are not made nullable",
        obj({"items": {"type": "array", "items": obj({"id": {"type": "integer"}, "tag": S}, ["id"])}}, ["items"]),
        closed({"items": {"type": "array",
                          "items": closed({"id": {"type": "integer"}, "tag": {"anyOf": [NULL, S]}})}}),
    ),
    (
        "optional union: one flat anyOf with null first, no nesting",
        obj({"u": {"anyOf": [S, {"type": "number"}]}}),
        closed({"u": {"anyOf": [NULL, S, {"type": "number"}]}}),
    ),
    (
        "discriminated union of objects: each branch closed, its optional props nullable",
        obj({"shape": {"anyOf": [obj({"kind": {"const": "circle"}, "r": {"type": "number"}}, ["kind", "r"]),
                                 obj({"kind": {"const": "rect"}, "w": {"type": "number"}}, ["kind"])]}}, ["shape"]),
        closed({"shape": {"anyOf": [
            closed({"kind": {"type": "string", "enum": ["circle"]}, "r": {"type": "number"}}),
            closed({"kind": {"type": "string", "enum": ["rect"]}, "w": {"anyOf": [NULL, {"type": "number"}]}}),
        ]}}),
    ),
    (
        "optional array of a union of an object and a primitive",
        obj({"shapes": {"type": "array", "items": {"oneOf": [obj({"a": S}), S]}}}),
        closed({"shapes": {"anyOf": [NULL, {"type": "array",
                                            "items": {"anyOf": [closed({"a": {"anyOf": [NULL, S]}}), S]}}]}}),
    ),
    (
        "oneOf becomes anyOf; single-element unions collapse",
        obj({"u": {"oneOf": [S, {"type": "integer"}]}, "v": {"anyOf": [S], "description": "d"}}, ["u", "v"]),
        closed({"u": {"anyOf": [S, {"type": "integer"}]}, "v": {"type": "string", "description": "d"}}),
    ),
    (
        "already nullable optional props are not wrapped again",
        obj({"a": {"type": ["string", "null"]}, "b": {"anyOf": [S, NULL]}}),
        closed({"a": {"type": ["string", "null"]}, "b": {"anyOf": [S, NULL]}}),
    ),
    (
        "enum without type gets its type inferred",
        obj({"unit": {"enum": ["c", "f"]}, "n": {"enum": [1, 2.5]}, "k": {"const": "x"}}, ["unit", "n", "k"]),
        closed({"unit": {"type": "string", "enum": ["c", "f"]}, "n": {"type": "number", "enum": [1, 2.5]},
                "k": {"type": "string", "enum": ["x"]}}),
    ),
    (
        "optional enum",
        obj({"unit": {"type": "string", "enum": ["c", "f"]}}),
        closed({"unit": {"anyOf": [NULL, {"type": "string", "enum": ["c", "f"]}]}}),
    ),
    (
        "validation keywords stripped, their values kept as a description hint",
        obj({"n": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Count"},
             "s": {"type": "string", "format": "email", "examples": ["a@b"]}}, ["n", "s"]),
        closed({"n": {"description": "Count (minimum: 0; maximum: 10)", "type": "integer"},
                "s": {"description": '(format: "email")', "type": "string"}}),
    ),
    (
        "$ref into $defs kept; optional ref wrapped; defs strictified",
        {**obj({"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}}, ["a"]),
         "$defs": {"P": obj({"x": S})}},
        {**closed({"a": {"$ref": "#/$defs/P"}, "b": {"anyOf": [NULL, {"$ref": "#/$defs/P"}]}}),
         "$defs": {"P": closed({"x": {"anyOf": [NULL, S]}})}},
    ),
    (
        "$ref with a sibling description is inlined (strict mode refuses siblings)",
        {**obj({"a": {"$ref": "#/$defs/P", "description": "the p"}}, ["a"]), "$defs": {"P": obj({"x": S}, ["x"])}},
        {**closed({"a": {**closed({"x": S}), "description": "the p"}}), "$defs": {"P": closed({"x": S})}},
    ),
    (
        "single allOf is merged",
        obj({"a": {"allOf": [{"type": "string"}], "description": "d"}}, ["a"]),
        closed({"a": {"description": "d", "type": "string"}}),
    ),
    (
        "nullable object by type list",
        obj({"o": {"type": ["object", "null"], "properties": {"x": S}, "required": ["x"]}}, ["o"]),
        closed({"o": {"anyOf": [NULL, closed({"x": S})]}}),
    ),
    (
        "closed empty object stays closed",
        obj({"o": {"type": "object", "properties": {}, "additionalProperties": False}}, ["o"]),
        closed({"o": closed({})}),
    ),
]


@pytest.mark.parametrize("title,schema,expected", STRICT_TABLE, ids=[t[0] for t in STRICT_TABLE])
def test_strict_table(title: str, schema: dict[str, Any], expected: dict[str, Any]) -> None:
    original = copy.deepcopy(schema)
    result = to_strict_schema(schema)
    assert result.strict, result.reason
    assert result.reason is None
    assert result.schema == expected
    assert schema == original  # never mutated
    again = to_strict_schema(result.schema)  # idempotent
    assert again.strict and again.schema == result.schema and again.stripped == ()


NON_STRICT_TABLE: list[tuple[str, dict[str, Any], str]] = [
    ("record (additionalProperties schema)", obj({"m": {"type": "object", "additionalProperties": S}}),
     "#/properties/m: an object with free-form keys"),
    ("free-form object (additionalProperties: true)", obj({"m": {"type": "object", "additionalProperties": True}}),
     "#/properties/m: an object with free-form keys"),
    ("object without properties", obj({"m": {"type": "object"}}), "#/properties/m: an object without 'properties'"),
    ("any value", obj({"v": {}}), "#/properties/v: a schema without a type"),
    ("tuple", obj({"t": {"type": "array", "prefixItems": [S, S]}}), "#/properties/t: tuple arrays"),
    ("array without items", obj({"a": {"type": "array"}}), "#/properties/a: an array without 'items'"),
    ("allOf of two", obj({"a": {"allOf": [obj({"x": S}), obj({"y": S})]}}), "#/properties/a/allOf"),
    ("external $ref", obj({"a": {"$ref": "https://example.com/s.json"}}), "#/properties/a/$ref"),
    ("patternProperties", obj({"a": {"type": "object", "patternProperties": {"^x": S}}}), "#/properties/a"),
    ("enum of objects", obj({"a": {"enum": [{"x": 1}]}}), "#/properties/a/enum"),
    ("root free-form", {"type": "object", "additionalProperties": True}, "#: an object"),
    ("root union", {"anyOf": [obj({"a": S}), obj({"b": S})]}, "#: the root"),
    ("a type that is not a name (a client's broken schema)", obj({"a": {"type": {}}}), "#/properties/a: unknown type"),
]


@pytest.mark.parametrize("title,schema,reason", NON_STRICT_TABLE, ids=[t[0] for t in NON_STRICT_TABLE])
def test_non_strict_table(title: str, schema: dict[str, Any], reason: str) -> None:
    result = to_strict_schema(schema)
    assert not result.strict
    assert result.reason is not None and result.reason.startswith(reason), result.reason
    assert result.schema == schema  # sent as written: still usable
    assert to_strict_schema(result.schema) == result  # idempotent as well


def test_free_form_component_is_sent_non_strict_with_reason() -> None:
    c = Component("Table", "", obj({"rows": {"type": "array", "items": {"type": "object", "additionalProperties": True}}}))
    tool = c.to_llm_tool()
    assert tool.strict is False
    assert c.strict_result.reason and "free-form" in c.strict_result.reason
    # Usable: the record keeps accepting arbitrary keys (the peer closes it to {}).
    assert tool.parameters["properties"]["rows"]["items"] == {"type": "object", "additionalProperties": True}


@pytest.mark.parametrize("schema", [{"type": "object"}, {}, {"type": "object", "additionalProperties": True}])
def test_free_form_root_props_stay_usable_after_the_standard_parameters(schema: dict[str, Any]) -> None:
    """The standard parameters declare properties; free-form props must not become a closed object."""
    c = Component("Anything", "", schema)
    tool = c.to_llm_tool()
    assert tool.strict is False and "free-form" in (c.strict_result.reason or "")
    assert tool.parameters["additionalProperties"] is True
    assert list(tool.parameters["properties"]) == [STATUS_MESSAGE_PARAMETER, "_tambo_completionStatusMessage"]
    # a model's props validate against what it was sent
    jsonschema.validate({"_tambo_statusMessage": "s", "_tambo_completionStatusMessage": "c", "title": "x"},
                        tool.parameters)


def test_declared_empty_properties_stay_strict_and_closed() -> None:
    # ``properties: {}`` declares that there are no props (a tool without parameters)
    tool = Component("Empty", "", obj({})).to_llm_tool()
    assert tool.strict is True and tool.parameters["additionalProperties"] is False


def test_client_components_without_a_schema_are_free_form() -> None:
    for component in (component_from_tool("show_component_Card", "", None),
                      components_from_available([{"name": "Card"}])[0]):
        tool = component.to_llm_tool()
        assert tool.strict is False and tool.parameters["additionalProperties"] is True


def test_stripped_keywords_are_reported_and_documented() -> None:
    schema = obj({"a": {"type": "string", "pattern": "^x", "minLength": 1, "default": "x", "$comment": "c"}})
    result = to_strict_schema(schema)
    assert set(result.stripped) == {"#/properties/a/pattern", "#/properties/a/minLength", "#/properties/a/default",
                                    "#/properties/a/$comment"}
    assert {"pattern", "minLength", "default", "$comment"} <= STRIPPED_KEYWORDS
    spec = (pytest.importorskip("pathlib").Path(__file__).parents[3] / "spec" / "components.md")
    if spec.exists():
        text = spec.read_text(encoding="utf-8")
        for keyword in STRIPPED_KEYWORDS:
            assert f"`{keyword}`" in text, keyword


class Inner(msgspec.Struct):
    x: int


class Node(msgspec.Struct):
    """A node."""

    label: str
    weight: int = 3
    inner: Inner | None = None
    children: list[Node] = []


class SearchArgs(msgspec.Struct):
    query: str
    limit: int = 10


class WeatherProps(msgspec.Struct):
    city: str
    temp: float | None = None


def test_struct_schema_strict_and_recursive() -> None:
    schema = schema_from_struct(Node)
    assert schema["type"] == "object" and schema["required"] == ["label"]
    assert set(schema["$defs"]) == {"Inner", "Node"}  # Node kept: it refers to itself
    result = to_strict_schema(Node)
    assert result.strict, result.reason
    props = result.schema["properties"]
    assert props["weight"] == {"anyOf": [NULL, {"description": "(default: 3)", "type": "integer"}]}
    assert props["inner"] == {"anyOf": [{"$ref": "#/$defs/Inner"}, NULL]}  # nullable already: not wrapped
    assert to_strict_schema(result.schema).schema == result.schema


def test_strict_result_depth_limit_is_a_reason_not_a_crash() -> None:
    schema: dict[str, Any] = S
    for _ in range(200):
        schema = obj({"n": schema}, ["n"])
    result = to_strict_schema(schema)
    assert not result.strict and "deeper than" in (result.reason or "")


# --------------------------------------------------------------------------- un-strict table

UNSTRICT_SCHEMA = {
    **obj(
        {
            "title": S,
            "subtitle": S,
            "count": {"type": "integer", "default": 5},
            "note": {"type": ["string", "null"]},
            "maybe": {"anyOf": [S, NULL]},
            "style": obj({"font": S, "size": {"type": "number"}}, ["size"]),
            "targets": {"type": "array", "items": obj({"id": S, "style": obj({"fontFamily": S})}, ["id"])},
            "ref": {"$ref": "#/$defs/R"},
            "shape": {"anyOf": [obj({"kind": S, "r": {"type": "number"}}, ["kind"]),
                                obj({"kind": S, "w": {"type": "number"}}, ["kind", "w"])]},
            "record": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        },
        ["title"],
    ),
    "$defs": {"R": obj({"opt": S, "req": S}, ["req"])},
}

UNSTRICT_TABLE: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("optional null removed", {"title": "t", "subtitle": None}, {"title": "t"}),
    ("required null kept", {"title": None}, {"title": None}),
    ("null replaced by the default", {"title": "t", "count": None}, {"title": "t", "count": 5}),
    ("nullable by type list kept", {"title": "t", "note": None}, {"title": "t", "note": None}),
    ("nullable by anyOf kept", {"title": "t", "maybe": None}, {"title": "t", "maybe": None}),
    ("nested optional null removed, required kept", {"title": "t", "style": {"font": None, "size": None}},
     {"title": "t", "style": {"size": None}}),
    ("optional nested object with all-null fields kept as {}",
     {"title": "t", "targets": [{"id": "a", "style": {"fontFamily": None}}]},
     {"title": "t", "targets": [{"id": "a", "style": {}}]}),
    ("inside objects in arrays", {"title": "t", "targets": [{"id": "a", "style": None}, {"id": None}]},
     {"title": "t", "targets": [{"id": "a"}, {"id": None}]}),
    ("through $ref", {"title": "t", "ref": {"opt": None, "req": None}}, {"title": "t", "ref": {"req": None}}),
    ("union: dropped only if every branch drops", {"title": "t", "shape": {"kind": None, "r": None, "w": None}},
     {"title": "t", "shape": {"kind": None, "w": None}}),
    ("record values are kept", {"title": "t", "record": {"k": None}}, {"title": "t", "record": {"k": None}}),
    ("unknown keys are kept", {"title": "t", "extra": None}, {"title": "t", "extra": None}),
]


@pytest.mark.parametrize("title,value,expected", UNSTRICT_TABLE, ids=[t[0] for t in UNSTRICT_TABLE])
def test_unstrict_table(title: str, value: dict[str, Any], expected: dict[str, Any]) -> None:
    original = copy.deepcopy(value)
    assert unstrict_value(value, UNSTRICT_SCHEMA) == expected
    assert value == original


def test_null_policy_verdicts() -> None:
    policy = NullPolicy(UNSTRICT_SCHEMA)
    assert policy.decide(("subtitle",)) is DROP
    assert policy.decide(("title",)) is KEEP
    verdict = policy.decide(("count",))
    assert isinstance(verdict, NullDefault) and verdict.value == 5
    assert policy.decide(("targets", "3", "style")) is DROP  # index as a pointer token
    assert policy.decide(("targets", 3, "style")) is DROP
    assert policy.decide(("nope", "deeper")) is KEEP
    assert policy.decide(()) is KEEP


def test_unstrict_round_trip_of_strict_nulls() -> None:
    """What a strict model must send (every key, nulls for the unset) comes back as what was meant."""
    meant = {"title": "t", "style": {"size": 3}}
    sent = {"title": "t", "subtitle": None, "count": None, "note": None, "maybe": None,
            "style": {"font": None, "size": 3}, "targets": None, "ref": None, "shape": None, "record": None}
    assert unstrict_value(sent, UNSTRICT_SCHEMA) == {**meant, "count": 5, "note": None, "maybe": None}


# --------------------------------------------------------------------------- server tools


def test_tool_from_callable_signature() -> None:
    def get_weather(city: Annotated[str, msgspec.Meta(description="City name")], units: str = "c") -> dict[str, str]:
        """Get the current weather for a city."""
        return {"city": city, "units": units}

    tool = tool_from_callable(get_weather)
    assert tool.name == "get_weather" and tool.description == "Get the current weather for a city."
    assert tool.parameters["required"] == ["city"]
    llm = tool.to_llm_tool()
    assert llm.strict
    assert llm.parameters["properties"]["city"] == {"description": "City name", "type": "string"}
    assert tool.call({STATUS_MESSAGE_PARAMETER: "x", "city": "Tokyo", "units": None}) == {"city": "Tokyo",
                                                                                          "units": "c"}
    with pytest.raises(ToolArgumentsError, match=r"\$\.city"):
        tool.call({"city": 3})
    with pytest.raises(ToolArgumentsError):
        tool.call({})


def test_tool_from_callable_struct_and_async() -> None:
    async def search(args: SearchArgs) -> list[str]:
        return [args.query] * args.limit

    tool = tool_from_callable(search, description="Search.")
    assert tool.is_async
    assert tool.parameters["properties"] == {"query": S, "limit": {"type": "integer", "default": 10}}
    assert asyncio.run(tool.call({"query": "q", "limit": None})) == ["q"] * 10


def test_tool_from_callable_rejects() -> None:
    def star(*args: int) -> None: ...

    with pytest.raises(UsageError):
        tool_from_callable(star)

    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    tool = tool_from_callable(untyped)  # any value: usable, sent non-strict with a reason
    assert not tool.to_llm_tool().strict and tool.strict_result.reason
    with pytest.raises(UsageError):
        tool_from_callable(untyped, name="bad name")


# --------------------------------------------------------------------------- client-sent components


def test_component_from_tool_and_available() -> None:
    c = component_from_tool("show_component_Card", "Show the Card UI component on the user's screen. A card.",
                            obj({"t": S}))
    assert c.name == "Card" and c.description == "A card."
    with pytest.raises(RemoteInputError):
        component_from_tool("get_weather", "", obj({}))
    with pytest.raises(RemoteInputError, match=r"tools\[show_component_X\]"):
        component_from_tool("show_component_X", "", {"type": "array"})
    comps = components_from_available([{"name": "A", "description": "a", "propsSchema": obj({"x": S})},
                                       {"name": "B"}])
    assert [c.name for c in comps] == ["A", "B"]
    with pytest.raises(RemoteInputError, match=r"availableComponents\[1\]\.name"):
        components_from_available([{"name": "A"}, {"name": 3}])
    with pytest.raises(RemoteInputError, match=r"availableComponents\[0\]"):
        components_from_available([{"name": "bad name"}])
    with pytest.raises(RemoteInputError):
        components_from_available({"name": "A"})


def test_props_problem_checks_final_props_against_the_original_schema() -> None:
    c = Component("Chart", "", {**obj({"title": {"type": "string", "maxLength": 5},
                                       "points": {"type": "array", "items": {"$ref": "#/$defs/P"}}}, ["title"]),
                                 "$defs": {"P": {**obj({"x": {"type": "number"}}, ["x"]),
                                                 "additionalProperties": False}}})
    assert c.props_problem({"title": "ok", "points": [{"x": 1}]}) is None
    assert c.props_problem({"title": "ok", "hallucinated": 1}) is None  # JSON Schema allows undeclared keys
    problem = c.props_problem({"title": "ok", "points": [{"x": 1}, {"x": "2"}]})
    assert problem is not None and problem.endswith("- at $.points[1].x")
    assert (c.props_problem({"title": "ok", "points": [{"x": 1, "y": 2}]}) or "").endswith("- at $.points[0]")
    assert (c.props_problem({"title": "too long"}) or "").endswith("- at $.title")  # a keyword strict mode strips
    assert (c.props_problem({}) or "").startswith("'title' is a required property")
    # what cannot be judged without IO is not held against the props
    assert Component("Ext", "", obj({"a": {"$ref": "https://example.com/a.json"}})).props_problem({"a": 1}) is None
    # nor what a client's broken schema cannot say: never an exception in the run
    for broken in ({"pattern": "("}, {"type": "number", "minimum": "x"}, {"enum": 3}, {"type": "array", "items": 3},
                   {"anyOf": 3}, {"type": "nonsense"}):
        component = Component("Broken", "", obj({"a": broken}))
        results = [component.props_problem({"a": value}) for value in ("x", 1, [1], {"b": 1})]
        assert None in results and all(r is None or isinstance(r, str) for r in results)
    struct = Component("Weather", "", WeatherProps)
    assert struct.props_problem({"city": "x", "temp": None}) is None
    assert struct.props_problem({"temp": 3}) == "Object missing required field `city`"
    assert (struct.props_problem({"city": 1}) or "").endswith("- at `$.city`")


def test_component_decode_props_struct() -> None:
    c = Component("Weather", "", WeatherProps)
    assert c.decode_props({"city": "x"}) == WeatherProps(city="x")
    with pytest.raises(ToolArgumentsError, match=r"\$\.city"):
        c.decode_props({"city": 1})
    assert c.unstrict_props({STATUS_MESSAGE_PARAMETER: "s", "city": "x", "temp": None}) == {"city": "x",
                                                                                            "temp": None}


# --------------------------------------------------------------------------- interactables


def _ctx(components: list[dict[str, Any]]) -> list[Context]:
    return [Context(description="other", value="x"),
            Context(description="interactables", value=json.dumps({"components": components}))]


def test_interactables_from_context_and_tools() -> None:
    note = {"id": "Note-k3x", "componentName": "Note", "description": "A note", "props": {"title": "a", "body": "b"},
            "propsSchema": obj({"title": S, "body": S}, ["title"]), "state": {"pinned": False}, "isSelected": True}
    free = {"id": "Free-1", "componentName": "Free", "propsSchema": "Available - use component-specific update tools"}
    found = interactables_from_context(_ctx([note, free]))
    assert [i.id for i in found] == ["Note-k3x", "Free-1"]
    (props_tool, _), (state_tool, state_result) = interactable_tools(found[0])
    assert props_tool.name == "update_component_props_Note-k3x" and props_tool.strict
    new_props = props_tool.parameters["properties"]["newProps"]
    assert new_props["properties"]["title"] == {"anyOf": [NULL, S]}  # nothing required inside
    assert props_tool.parameters["properties"]["componentId"]["enum"] == ["Note-k3x"]
    assert not state_tool.strict and state_result.reason and "free-form" in state_result.reason
    free_tools = interactable_tools(found[1])
    assert all(not t.strict for t, _ in free_tools)
    assert free_tools[0][0].parameters["properties"]["newProps"]["additionalProperties"] is True


def test_interactable_update_semantics() -> None:
    note = Interactable(id="Note-1", component_name="Note", props={"title": "a", "body": "b"},
                        props_schema=obj({"title": S, "body": S}, ["title", "body"]))
    update = note.prepare_update("props", {STATUS_MESSAGE_PARAMETER: "s", "componentId": "Note-1",
                                           "newProps": {"title": "T", "body": None}})
    assert update == {"title": "T"}  # the strict null means "unchanged"
    assert merge_update(note.props, update) == {"title": "T", "body": "b"}
    with pytest.raises(RemoteInputError):
        note.prepare_update("props", {"componentId": "Other", "newProps": {}})
    assert parse_interactable_tool_name("update_component_state_Note-1").kind == "state"
    assert parse_interactable_tool_name("update_component_props_") is None
    assert parse_interactable_tool_name("show_component_X") is None


@pytest.mark.parametrize(
    "components,where",
    [
        ([{"id": "bad id", "componentName": "x"}], r"context\[1\]\.value\.components\[0\]"),
        ([{"id": "a" * 42, "componentName": "x"}], r"components\[0\]"),
        ([{"id": "a", "componentName": "x"}, {"id": "a", "componentName": "y"}], r"components\[1\]\.id"),
        ([{"componentName": "x"}], r"components\[0\]"),
    ],
)
def test_interactables_bad_context(components: list[dict[str, Any]], where: str) -> None:
    with pytest.raises(RemoteInputError, match=where):
        interactables_from_context(_ctx(components))


def test_interactables_context_not_json() -> None:
    with pytest.raises(RemoteInputError, match=r"context\[0\]\.value: not JSON"):
        interactables_from_context([Context(description="interactables", value="{")])
    assert interactables_from_context([]) == []


def test_ui_prefix_constant() -> None:
    assert UI_TOOL_PREFIX == "show_component_"


def test_reference_cycles_stay_linear() -> None:
    """A hostile client schema (a union of references to itself) must not take 2**depth steps."""
    cycle = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}, {"type": "string"}]}
    schema = {**obj({"a": {"$ref": "#/$defs/A"}, "n": {"$ref": "#/$defs/N"}}),
              "$defs": {"A": cycle, "N": obj({"x": {"anyOf": [{"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"}]},
                                              "y": S})}}
    result = to_strict_schema(schema)
    assert result.strict
    deep: dict[str, Any] = {"y": None}
    for _ in range(40):
        deep = {"x": deep, "y": None}
    assert unstrict_value({"a": None, "n": deep}, schema) == {"n": _strip_y(deep)}


def _strip_y(value: dict[str, Any]) -> dict[str, Any]:
    return {"x": _strip_y(value["x"])} if "x" in value else {}


def test_inlining_blowup_is_bounded() -> None:
    defs: dict[str, Any] = {"D30": S}
    for i in range(30):  # each definition references the next twice, with a description: 2**30 inlines
        ref = {"$ref": f"#/$defs/D{i + 1}", "description": "d"}
        defs[f"D{i}"] = obj({"l": ref, "r": ref}, ["l", "r"])
    result = to_strict_schema({**obj({"root": {"$ref": "#/$defs/D0", "description": "d"}}), "$defs": defs})
    assert not result.strict and "would exceed" in (result.reason or "")


# --------------------------------------------------------------------------- strict: property

_keys = st.text(alphabet="abcxyz_/~", min_size=1, max_size=4)
_primitive = st.one_of(
    st.sampled_from(["string", "number", "integer", "boolean"]).map(lambda t: {"type": t}),
    st.just({"type": "string", "minLength": 1, "description": "d"}),
    st.just({"type": "integer", "minimum": 0, "default": 2}),
    st.just({"enum": ["a", "b"]}),
    st.just({"type": ["string", "null"]}),
    st.just({"const": 3}),
)


def _object(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.dictionaries(_keys, children, max_size=4).flatmap(
        lambda props: st.lists(st.sampled_from(sorted(props)) if props else st.nothing(), unique=True).map(
            lambda required: obj(props, required)
        )
    )


_schemas = st.recursive(
    _primitive,
    lambda children: st.one_of(
        _object(children),
        children.map(lambda c: {"type": "array", "items": c}),
        st.lists(children, min_size=1, max_size=3).map(lambda alts: {"anyOf": alts}),
        st.lists(children, min_size=1, max_size=2).map(lambda alts: {"oneOf": alts}),
        st.just({"type": "object", "additionalProperties": True}),
        st.just({}),
    ),
    max_leaves=15,
)


def _check_strict_form(node: Any) -> None:
    assert set(node) <= STRICT_KEYWORDS, set(node) - STRICT_KEYWORDS
    if node.get("type") == "object":
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    for key in ("properties", "$defs"):
        for sub in node.get(key, {}).values():
            _check_strict_form(sub)
    for sub in node.get("anyOf", []):
        _check_strict_form(sub)
        assert "anyOf" not in sub or set(sub) != {"anyOf"}  # no union directly inside a union
    if "items" in node:
        _check_strict_form(node["items"])


@settings(deadline=None)
@given(props=st.dictionaries(_keys, _schemas, max_size=5), data=st.data())
def test_random_schemas_strict_form_and_idempotence(props: dict[str, Any], data: st.DataObject) -> None:
    required = data.draw(st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]))
    schema = obj(props, required)
    result = to_strict_schema(schema)
    jsonschema.Draft202012Validator.check_schema(result.schema)
    if result.strict:
        _check_strict_form(result.schema)
        assert to_strict_schema(result.schema).schema == result.schema
    else:
        assert result.reason and result.schema == schema
        assert to_strict_schema(result.schema) == result
