"""Data resources in the core: declarations, params validation with JSON paths, and components
bound to resources (the ``resourceId`` enum and ``params`` in the tool, strict included, checked
against the chosen resource when the call ends)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator

from agui_engine.demo.weather_model import EmbeddedModel
from agui_engine.genui.components import Component, to_strict_schema
from agui_engine.genui.resources import (
    Resource,
    ResourceBusyError,
    ResourceError,
    ResourceFailedError,
    ResourceParamsError,
    ResourcePermissionError,
    ResourceRegistry,
    ResourceResultTooLargeError,
    ResourceTimeoutError,
    UnknownResourceError,
    collect_resources,
    error_for_code,
)
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.errors import UsageError


class ScriptedLLMFreeAgent:
    """An inner agent for AgentLoop (never run here)."""

    async def run(self, input: Any) -> Any:
        yield input


CITY = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}, "required": ["city"]}


def resolver(params: Any, identity: str | None) -> dict[str, Any]:
    return {"params": params, "identity": identity}


class Point(msgspec.Struct):
    x: int
    y: int


class Route(msgspec.Struct):
    origin: Point
    stops: list[Point] = []
    mode: str = "walk"


def test_json_schema_params_are_checked_with_the_json_path() -> None:
    r = Resource("weather.current", resolver, params=CITY)
    assert r.validate_params({"city": "Tokyo"}) == {"city": "Tokyo"}
    with pytest.raises(ResourceParamsError) as info:
        r.validate_params({"city": 3})
    assert info.value.path == "$.params.city" and info.value.message.endswith("- at $.params.city")
    assert info.value.http_status == 422 and info.value.code == "invalid_params"
    assert info.value.to_json()["error"]["path"] == "$.params.city"
    # every JSON Schema keyword is checked (minLength is one strict mode strips)
    assert r.params_problem({"city": "x"}) == (
        "params of weather.current do not match its schema: 'x' is too short - at $.params.city", "$.params.city"
    )
    assert r.params_problem({}, root="$")[1] == "$"  # required: the object itself
    assert r.params_problem([1]) is not None and r.params_problem(None) is not None


def test_struct_params_become_the_struct_and_name_the_path() -> None:
    r = Resource("maps.route", resolver, params=Route)
    value = r.validate_params({"origin": {"x": 1, "y": 2}, "stops": [{"x": 3, "y": 4}]})
    assert isinstance(value, Route) and value.stops[0] == Point(3, 4)
    with pytest.raises(ResourceParamsError) as info:
        r.validate_params({"origin": {"x": 1, "y": 2}, "stops": [{"x": 3, "y": "4"}]})
    assert info.value.path == "$.params.stops[0].y"
    assert r.params_problem(5) is not None and r.params_problem(5)[1] == "$.params"  # type: ignore[index]


def test_no_params_means_an_empty_closed_object() -> None:
    r = Resource("time.now", resolver)
    assert r.validate_params({}) == {}
    assert r.params_problem({"extra": 1}) is not None


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"id": ""}, "resource id"),
        ({"id": "a/b"}, "resource id"),
        ({"id": "x" * 129}, "resource id"),
        ({"resolver": 5}, "callable"),
        ({"params": {"type": "string"}}, "object schema"),
        ({"params": {"type": "object", "properties": {"a": {"type": "nope"}}}}, "not valid JSON Schema"),
        ({"timeout": 0}, "timeout"),
        ({"cache_ttl": -1}, "cache_ttl"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_result_bytes": True}, "max_result_bytes"),
        ({"permission": "yes"}, "permission"),
    ],
)
def test_bad_declarations_are_usage_errors(kwargs: dict[str, Any], words: str) -> None:
    args: dict[str, Any] = {"id": "r.x", "resolver": resolver, **kwargs}
    with pytest.raises(UsageError, match=words):
        Resource(args.pop("id"), args.pop("resolver"), **args)


def test_registry_by_id() -> None:
    registry = ResourceRegistry()

    @registry.resource("a.b", params=CITY, cache_ttl=5)
    def a_b(params: Any, identity: str | None) -> int:
        return 1

    assert a_b({}, None) == 1  # the decorator returns the function unchanged
    r = registry.get("a.b")
    assert r.cache_ttl == 5.0 and "a.b" in registry and len(registry) == 1 and registry.ids == ["a.b"]
    registry.add(r)  # the same resource again: fine
    with pytest.raises(UsageError, match="two resources"):
        registry.add(Resource("a.b", resolver))
    with pytest.raises(UnknownResourceError) as info:
        registry.get("nope")
    assert info.value.http_status == 404 and info.value.code == "unknown_resource"
    with pytest.raises(UnknownResourceError):
        registry.get(["not", "a", "string"])


def test_errors_map_back_from_their_codes() -> None:
    for cls, status in [
        (UnknownResourceError, 404), (ResourcePermissionError, 403), (ResourceBusyError, 503),
        (ResourceFailedError, 502), (ResourceResultTooLargeError, 502), (ResourceTimeoutError, 504),
    ]:
        error = error_for_code(cls.default_code, "m")
        assert type(error) is cls and error.http_status == status and error.message == "m"
        assert isinstance(error, ResourceError)  # one except clause handles every query refusal
    params = error_for_code("invalid_params", "m", path="$.params.a")
    assert isinstance(params, ResourceParamsError) and params.path == "$.params.a"
    assert error_for_code("unauthorized", "m") is None


# --------------------------------------------------------------------------- components

WEATHER = Resource("weather.current", resolver, params=CITY, description="current weather")
FORECAST = Resource("weather.forecast", resolver, params=Route)
CARD = {"type": "object", "properties": {"note": {"type": "string"}}}


def test_the_tool_offers_exactly_the_components_resources_as_an_enum() -> None:
    card = Component("WeatherCard", "a card", CARD, resources=[WEATHER])
    for strict in (True, False):
        tool = card.to_llm_tool(strict)
        props = tool.parameters["properties"]
        assert list(props)[:4] == ["_tambo_statusMessage", "_tambo_completionStatusMessage", "resourceId", "params"]
        assert props["resourceId"]["enum"] == ["weather.current"]
        assert {"resourceId", "params"} <= set(tool.parameters["required"])
    strict_tool = card.to_llm_tool(True)
    assert strict_tool.strict, card.strict_result.reason
    params = strict_tool.parameters["properties"]["params"]
    assert params["additionalProperties"] is False and params["required"] == ["city"]
    assert "current weather" in strict_tool.parameters["properties"]["resourceId"]["description"]
    assert to_strict_schema(strict_tool.parameters).schema == strict_tool.parameters  # idempotent


def test_several_resources_give_an_anyof_and_their_defs_are_hoisted() -> None:
    card = Component("Both", "", CARD, resources=[WEATHER, FORECAST])
    tool = card.to_llm_tool(True)
    assert tool.strict, card.strict_result.reason
    assert tool.parameters["properties"]["resourceId"]["enum"] == ["weather.current", "weather.forecast"]
    alternatives = tool.parameters["properties"]["params"]["anyOf"]
    assert len(alternatives) == 2
    # Route's nested Point moved to the props root under "<id>.<name>", its $ref rewritten
    assert "weather.forecast.Point" in tool.parameters["$defs"]
    assert '"#/$defs/weather.forecast.Point"' in json.dumps(alternatives)
    Draft202012Validator.check_schema(card.props_schema)
    good = {"resourceId": "weather.forecast", "params": {"origin": {"x": 1, "y": 2}}}
    assert Draft202012Validator(card.props_schema).is_valid(good)
    assert card.props_problem(good) is None


def test_params_are_checked_against_the_chosen_resource_when_the_call_ends() -> None:
    card = Component("Both", "", CARD, resources=[WEATHER, FORECAST])
    assert card.props_problem({"resourceId": "weather.current", "params": {"city": "Tokyo"}, "note": "n"}) is None
    # city is fine for weather.current but not for weather.forecast, whose params are a Route
    problem = card.props_problem({"resourceId": "weather.forecast", "params": {"city": "Tokyo"}})
    assert problem == "params of weather.forecast do not match its schema: Object missing required field `origin` - at $.params"
    problem = card.props_problem({"resourceId": "weather.current", "params": {"city": "T"}})
    assert problem is not None and problem.endswith("- at $.params.city")
    problem = card.props_problem({"resourceId": "https://evil.test/api", "params": {}})
    assert problem is not None and problem.endswith("- at $.resourceId")
    assert card.props_problem({"params": {"city": "Tokyo"}}) == "'resourceId' is a required property - at $"
    assert card.props_problem({"resourceId": "weather.current"}) == "'params' is a required property - at $"
    # the rest of the props is still checked against the component's own schema
    problem = card.props_problem({"resourceId": "weather.current", "params": {"city": "Tokyo"}, "note": 5})
    assert problem is not None and problem.endswith("- at $.note")


def test_a_struct_props_component_with_resources() -> None:
    class Props(msgspec.Struct):
        note: str = ""

    card = Component("StructCard", "", Props, resources=[WEATHER])
    assert card.props_schema["properties"]["resourceId"]["enum"] == ["weather.current"]
    assert card.props_problem({"resourceId": "weather.current", "params": {"city": "Tokyo"}, "note": "x"}) is None
    assert card.props_problem({"resourceId": "weather.current", "params": {"city": 1}}) is not None
    assert card.props_problem({"resourceId": "weather.current", "params": {"city": "Tokyo"}, "note": 1}) is not None


def test_resources_named_by_id_come_from_a_registry() -> None:
    registry = ResourceRegistry([WEATHER])
    card = Component("C", "", CARD, resources=["weather.current"], registry=registry)
    assert card.resources == {"weather.current": WEATHER}
    with pytest.raises(UsageError, match="registry="):
        Component("C", "", CARD, resources=["weather.current"])
    with pytest.raises(UsageError, match="no resource 'weather.x'"):
        Component("C", "", CARD, resources=["weather.x"], registry=registry)
    with pytest.raises(UsageError, match="named twice"):
        Component("C", "", CARD, resources=[WEATHER, "weather.current"], registry=registry)
    with pytest.raises(UsageError, match="not one string"):
        Component("C", "", CARD, resources="weather.current")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="'resourceId'"):
        Component("C", "", {"type": "object", "properties": {"resourceId": {"type": "string"}}}, resources=[WEATHER])


def test_a_non_local_ref_in_a_params_schema_is_refused() -> None:
    remote = Resource("r.remote", resolver, params={"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}})
    with pytest.raises(UsageError, match="not a local definition"):
        Component("C", "", CARD, resources=[remote])


def test_agents_collect_their_components_resources() -> None:
    card = Component("C", "", CARD, resources=[WEATHER])
    other = Resource("other.thing", resolver)
    registry = collect_resources([card], [other])
    assert registry.ids == ["other.thing", "weather.current"]
    # what a gateway in front of the agent serves by default
    assert LLMAgent(EmbeddedModel(), components=[card], resources=[other]).resources.ids == registry.ids
    assert AgentLoop(ScriptedLLMFreeAgent(), components=[card]).resources.ids == ["weather.current"]
    assert LLMAgent(EmbeddedModel()).resources.ids == []
    with pytest.raises(UsageError, match="two resources"):
        collect_resources([card], [Resource("weather.current", resolver)])
