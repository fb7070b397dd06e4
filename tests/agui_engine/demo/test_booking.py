"""The demo's table booking: the embedded model's A2UI plan (form and dashboard, then the
confirmation of the user action) and the surfaces it draws."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agui_engine.demo.booking import (
    AVAILABILITY_SURFACE,
    BOOKING_ACTION,
    BOOKING_SURFACE,
    CONFIRMATION_SURFACE,
    availability_dashboard,
    booking_confirmation,
    booking_form,
    is_booking_request,
    party_size,
)
from agui_engine.demo.weather_model import plan_reply
from agui_engine.genui.a2ui import A2UI_TOOL, A2UICatalog, validate_components
from agui_engine.llm import LLMTool
from agui_engine.protocol.events import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)

RENDER_A2UI = LLMTool(name=A2UI_TOOL, description="Render a dynamic A2UI v0.9 surface.", parameters={
    "type": "object", "properties": {"surfaceId": {"type": "string"}, "components": {"type": "array"},
                                     "data": {"type": "object"}},
    "required": ["surfaceId", "components"]})


@pytest.mark.parametrize(("text", "n"), [("book a table for two", 2), ("a reservation for 5 please", 5),
                                         ("Book a table for FOUR", 4), ("book a table", 2), ("table for one", 1)])
def test_party_size(text: str, n: int) -> None:
    assert is_booking_request(text)
    assert party_size(text) == n


def test_not_a_booking() -> None:
    assert not is_booking_request("what is the weather in Tokyo")


def ids_and_refs(surface: dict[str, Any]) -> tuple[list[str], set[str]]:
    ids = [c["id"] for c in surface["components"]]
    refs: set[str] = set()
    for c in surface["components"]:
        kids = c.get("children")
        refs.update(kids if isinstance(kids, list) else [kids["componentId"]] if isinstance(kids, dict) else [])
        if "child" in c:
            refs.add(c["child"])
    return ids, refs


@pytest.mark.parametrize("surface", [booking_form(3), availability_dashboard(),
                                     booking_confirmation({"name": "Ada", "guests": "2", "notes": "window"})])
def test_surfaces_are_whole_trees_parent_first(surface: dict[str, Any]) -> None:
    ids, refs = ids_and_refs(surface)
    assert ids[0] == "root" and len(ids) == len(set(ids))
    assert refs <= set(ids) and set(ids) - refs == {"root"}  # every component reachable, nothing dangling
    seen = {"root"}
    for c in surface["components"]:  # a parent comes before its children: the surface grows from the top
        assert c["id"] in seen or c["id"] == "root", c["id"]
        kids = c.get("children")
        seen.update(kids if isinstance(kids, list) else [kids["componentId"]] if isinstance(kids, dict) else [])
        seen.update([c["child"]] if "child" in c else [])


def test_the_form_binds_its_fields_and_the_button_carries_them() -> None:
    form = booking_form(2)
    by_id = {c["id"]: c for c in form["components"]}
    assert {c["component"] for c in form["components"]} >= {"TextField", "DateTimeInput", "Button", "Card", "Column"}
    assert form["data"]["booking"]["guests"] == "2"
    context = by_id["book"]["action"]["event"]["context"]
    assert by_id["book"]["action"]["event"]["name"] == BOOKING_ACTION
    for field in ("name", "when", "guests", "notes"):
        assert by_id[field]["value"] == context[field] == {"path": f"/booking/{field}"}


def calls_of(reply: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, **json.loads(c.arguments)} for c in reply.calls]


def assistant_calls(prefix: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out: list[Any] = [AssistantMessage(id=f"a-{prefix}", tool_calls=[
        ToolCall(id=f"{prefix}{i}", function=FunctionCall(name=name, arguments=json.dumps(args)))
        for i, (name, args) in enumerate(calls)])]
    out += [ToolMessage(id=f"t-{prefix}{i}", tool_call_id=f"{prefix}{i}", content='{"status":"rendered"}')
            for i in range(len(calls))]
    return out


def test_the_model_draws_the_form_and_the_dashboard_then_confirms_the_action() -> None:
    history: list[Any] = [UserMessage(id="u", content="Book a table for two")]
    first = plan_reply(history, [RENDER_A2UI])
    calls = calls_of(first)
    assert [c["surfaceId"] for c in calls] == [BOOKING_SURFACE, AVAILABILITY_SURFACE]
    assert calls[0]["components"] == booking_form(2)["components"] and calls[0]["data"] == booking_form(2)["data"]
    assert list(calls[0]) == ["name", "surfaceId", "components", "data"]  # the tool's schema order
    history += assistant_calls("c", [(c["name"], {k: v for k, v in c.items() if k != "name"}) for c in calls])
    after = plan_reply(history, [RENDER_A2UI])
    assert not after.calls and "Book the table" in after.text
    # the user fills the form and presses the button: the middleware's log_a2ui_event call and result
    action = {"name": BOOKING_ACTION, "surfaceId": BOOKING_SURFACE, "sourceComponentId": "book",
              "context": {"name": "Grace", "when": "2026-12-04T20:00", "guests": "3", "notes": ""}}
    history += [AssistantMessage(id="a-act", tool_calls=[ToolCall(id="act", function=FunctionCall(
        name="log_a2ui_event", arguments=json.dumps(action)))]),
        ToolMessage(id="t-act", tool_call_id="act", content='User performed action "book_table"')]
    confirm = plan_reply(history, [RENDER_A2UI])
    (call,) = calls_of(confirm)
    assert call["surfaceId"] == CONFIRMATION_SURFACE
    assert call["components"] == booking_confirmation(action["context"])["components"]
    texts = [c["text"] for c in call["components"] if c["component"] == "Text"]
    assert "A table for 3 on 2026-12-04 at 20:00, under the name Grace." in texts
    history += assistant_calls("d", [("render_a2ui", {k: v for k, v in call.items() if k != "name"})])
    done = plan_reply(history, [RENDER_A2UI])
    assert not done.calls and "a table for 3" in done.text


def test_without_render_a2ui_the_model_says_how_to_see_it() -> None:
    reply = plan_reply([UserMessage(id="u", content="book a table for two")], [])
    assert not reply.calls and "agui-engine demo --a2ui" in reply.text


@pytest.mark.parametrize("surface", [booking_form(2), availability_dashboard(),
                                     booking_confirmation({"name": "Ada", "guests": "2"})])
def test_surfaces_pass_the_engines_validation_against_the_basic_catalog(surface: dict[str, Any]) -> None:
    assert validate_components(surface["components"], A2UICatalog.basic()) == []
