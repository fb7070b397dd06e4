"""Recorded A2UI streams of our own: render_a2ui arguments (and tool results) an agent sends, used by
the differential test against @ag-ui/a2ui-middleware and by the benchmark."""

from __future__ import annotations

import json
from typing import Any

FORM: dict[str, Any] = {
    "surfaceId": "booking-form",
    "components": [
        {"id": "root", "component": "Card", "child": "form-col"},
        {"id": "form-col", "component": "Column", "children": ["title", "name-field", "guests", "agree", "submit"]},
        {"id": "title", "component": "Text", "text": "Book a table", "variant": "h2"},
        {"id": "name-field", "component": "TextField", "label": "Name", "value": {"path": "/form/name"}},
        {"id": "guests", "component": "Slider", "value": {"path": "/form/guests"}, "min": 1, "max": 12},
        {"id": "agree", "component": "CheckBox", "label": "Window seat", "value": {"path": "/form/window"}},
        {"id": "submit", "component": "Button", "child": "submit-text", "variant": "primary",
         "action": {"event": {"name": "book", "context": {"name": {"path": "/form/name"},
                                                          "guests": {"path": "/form/guests"}}}}},
        {"id": "submit-text", "component": "Text", "text": "Book"},
    ],
    "data": {"form": {"name": "Ada", "guests": 2, "window": False}},
}

DASHBOARD: dict[str, Any] = {
    "surfaceId": "sales-dashboard",
    "components": [
        {"id": "root", "component": "Column", "children": ["heading", "metrics", "divider", "notes"]},
        {"id": "heading", "component": "Text", "text": "Q3 overview \u2014 caf\u00e9s \U0001f4c8", "variant": "h1"},
        {"id": "metrics", "component": "Row", "children": ["m1", "m2", "m3"], "justify": "spaceBetween"},
        {"id": "m1", "component": "Card", "child": "m1-text"},
        {"id": "m1-text", "component": "Text", "text": {"path": "/metrics/users"}},
        {"id": "m2", "component": "Card", "child": "m2-text"},
        {"id": "m2-text", "component": "Text", "text": {"path": "/metrics/revenue"}},
        {"id": "m3", "component": "Card", "child": "m3-text"},
        {"id": "m3-text", "component": "Text", "text": {"path": "/metrics/churn"}},
        {"id": "divider", "component": "Divider"},
        {"id": "notes", "component": "Text", "text": "Figures are \"preliminary\"\\n\tsee the report."},
    ],
    "data": {"metrics": {"users": "1,200", "revenue": "$50K", "churn": "2.1%"}, "period": "Q3"},
}

LIST: dict[str, Any] = {
    "surfaceId": "products",
    "components": [
        {"id": "root", "component": "Column", "children": ["title", "list"]},
        {"id": "title", "component": "Text", "text": "Headphones", "variant": "h2"},
        {"id": "list", "component": "List", "children": {"componentId": "card", "path": "/items"}},
        {"id": "card", "component": "Card", "child": "card-col"},
        {"id": "card-col", "component": "Column", "children": ["card-name", "card-price"]},
        {"id": "card-name", "component": "Text", "text": {"path": "name"}, "variant": "h3"},
        {"id": "card-price", "component": "Text", "text": {"path": "price"}, "variant": "caption"},
    ],
    "data": {"items": [{"name": f"Model {i}", "price": f"${100 + i * 10}"} for i in range(6)], "currency": "USD"},
}

# Data first, then the components: the surface paints once the components close, data included.
DATA_FIRST: dict[str, Any] = {"surfaceId": "greeting", "data": {"who": "world", "empty": [], "n": 3},
                              "components": [{"id": "root", "component": "Row", "children": ["hello"]},
                                             {"id": "hello", "component": "Text", "text": {"path": "/who"}}]}

EMPTY_DATA: dict[str, Any] = {"surfaceId": "plain", "components": [{"id": "root", "component": "Column",
                                                                      "children": []}], "data": {}}

UPDATED_FORM: dict[str, Any] = {
    "surfaceId": "booking-form",
    "components": [{"id": "root", "component": "Card", "child": "done"},
                   {"id": "done", "component": "Text", "text": "Booked for {name}"}],
}

INVALID: dict[str, dict[str, Any]] = {
    "duplicate_id": {"surfaceId": "bad1", "components": [
        {"id": "root", "component": "Column", "children": ["a"]},
        {"id": "a", "component": "Text", "text": "x"}, {"id": "a", "component": "Text", "text": "y"}]},
    "no_root": {"surfaceId": "bad2", "components": [{"id": "top", "component": "Column", "children": ["t"]},
                                                    {"id": "t", "component": "Text", "text": "x"}]},
    "unknown_component": {"surfaceId": "bad3", "components": [
        {"id": "root", "component": "Column", "children": ["m"]},
        {"id": "m", "component": "Metric", "label": "Users", "value": "1"}]},
    "self_child": {"surfaceId": "bad4", "components": [{"id": "root", "component": "Card", "child": "root"}]},
    "dangling_child": {"surfaceId": "bad5", "components": [
        {"id": "root", "component": "Column", "children": ["t", "ghost"]},
        {"id": "t", "component": "Text", "text": "x"}]},
    "cycle": {"surfaceId": "bad6", "components": [
        {"id": "root", "component": "Column", "children": ["b"]},
        {"id": "b", "component": "Card", "child": "c"}, {"id": "c", "component": "Card", "child": "b"}]},
    "missing_id": {"surfaceId": "bad7", "components": [{"id": "root", "component": "Column", "children": []},
                                                       {"component": "Text", "text": "x"}]},
}

# Refused by this engine, never painted or stuck at "building" by the middleware (spec/a2ui.md).
DEVIATING: dict[str, str] = {
    "empty_components": json.dumps({"surfaceId": "e", "components": []}),
    "no_components": json.dumps({"surfaceId": "e", "data": {"a": 1}}),
    "not_objects": json.dumps({"surfaceId": "e", "components": ["root"]}),
    "no_surface_id": json.dumps({"components": [{"id": "root", "component": "Column", "children": []}]}),
    "invalid_props": json.dumps({"surfaceId": "e", "components": [
        {"id": "root", "component": "Column", "children": ["t"]}, {"id": "t", "component": "Text", "text": 42}]}),
}


def call(call_id: str, args: dict[str, Any] | str, *, name: str = "render_a2ui", indent: int | None = None,
         result: str | None = None) -> dict[str, Any]:
    """One tool call of a recorded stream (arguments as the model typed them)."""
    text = args if isinstance(args, str) else json.dumps(args, indent=indent, ensure_ascii=False)
    return {"id": call_id, "name": name, "args": text, "result": result}


def ops_result(*ops: dict[str, Any]) -> str:
    return json.dumps({"a2ui_operations": list(ops)})


STREAMS: dict[str, list[dict[str, Any]]] = {
    "form": [call("c-form", FORM)],
    "dashboard": [call("c-dash", DASHBOARD, indent=2)],
    "list_template": [call("c-list", LIST)],
    "data_first": [call("c-first", DATA_FIRST)],
    "empty_data": [call("c-empty", EMPTY_DATA)],
    "two_surfaces_and_update": [call("c1", FORM), call("c2", DASHBOARD), call("c3", UPDATED_FORM)],
    "data_only_update_and_delete": [
        call("c-form", FORM),
        call("t-upd", {"booking": 7}, name="update_booking", result=ops_result(
            {"version": "v0.9", "updateDataModel": {"surfaceId": "booking-form", "path": "/form/name",
                                                    "value": "Grace"}})),
        call("t-del", {}, name="cancel", result=ops_result(
            {"version": "v0.9", "deleteSurface": {"surfaceId": "booking-form"}})),
        call("t-two", {}, name="other_agent", result=ops_result(
            {"version": "v0.9", "createSurface": {"surfaceId": "x1", "catalogId": "c"}},
            {"version": "v0.9", "createSurface": {"surfaceId": "x2", "catalogId": "c"}})),
    ],
    "outer_tool_retry": [
        {"id": "outer", "name": "generate_a2ui", "args": json.dumps({"intent": "create"}), "result": None,
         "inner": [call("r1", INVALID["no_root"]), call("r2", FORM)],
         "outer_result": ops_result({"version": "v0.9", "createSurface": {"surfaceId": "booking-form",
                                                                          "catalogId": "c"}})},
    ],
    "recovery_exhausted": [call("t-gen", {"intent": "create"}, name="generate_a2ui", result=json.dumps(
        {"error": "Failed to generate valid A2UI after 3 attempt(s)", "code": "a2ui_recovery_exhausted",
         "attempts": [{"attempt": 1, "ok": False, "errors": []}]}))],
    **{f"invalid_{name}": [call(f"c-{name}", args)] for name, args in INVALID.items()},
    "invalid_then_valid": [call("c-bad", INVALID["dangling_child"]), call("c-good", LIST)],
}


def build_events(stream: list[dict[str, Any]], split: Any) -> list[dict[str, Any]]:
    """The inner agent's events (camelCase JSON) for ``stream``; ``split(text)`` cuts arguments."""
    out: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                                 {"type": "TEXT_MESSAGE_START", "messageId": "m0", "role": "assistant"},
                                 {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m0", "delta": "Here you go."},
                                 {"type": "TEXT_MESSAGE_END", "messageId": "m0"}]

    def one(c: dict[str, Any]) -> None:
        out.append({"type": "TOOL_CALL_START", "toolCallId": c["id"], "toolCallName": c["name"],
                    "parentMessageId": "m0"})
        out.extend({"type": "TOOL_CALL_ARGS", "toolCallId": c["id"], "delta": piece} for piece in split(c["args"]))
        for inner in c.get("inner", ()):
            one(inner)
        out.append({"type": "TOOL_CALL_END", "toolCallId": c["id"]})
        result = c.get("result") or c.get("outer_result")
        if result is not None:
            out.append({"type": "TOOL_CALL_RESULT", "messageId": "res-" + c["id"], "toolCallId": c["id"],
                        "content": result})

    for c in stream:
        one(c)
    out.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return out
