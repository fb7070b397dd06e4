"""A2UI surfaces as terminal text (agui_engine/cli/render_a2ui.py) and in the Renderer."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from agui_engine.cli.render import Renderer
from agui_engine.cli.render_a2ui import MAX_SURFACE_DEPTH, fold_surfaces, surface_lines
from agui_engine.demo.booking import availability_dashboard, booking_form
from agui_engine.protocol.events import RunAgentInput, UserMessage
from tests.transports import a2ui_surface_agent


def ops(surface: dict[str, Any]) -> list[dict[str, Any]]:
    sid = surface["surfaceId"]
    out = [{"version": "v0.9", "createSurface": {"surfaceId": sid, "catalogId": "c"}},
           {"version": "v0.9", "updateComponents": {"surfaceId": sid, "components": surface["components"]}}]
    if "data" in surface:
        out.append({"version": "v0.9", "updateDataModel": {"surfaceId": sid, "path": "/", "value": surface["data"]}})
    return out


def test_the_booking_form_reads_as_a_form() -> None:
    assert surface_lines(ops(booking_form(2)), 100) == [
        "table-booking:",
        "  ┆ ## Book a table",
        "  ┆ Trattoria Demo · 12 Via Esempio (demo data)",
        "  ┆ Name: [ ]",
        "  ┆ Date and time: [2026-12-04T19:30]",
        "  ┆ Guests: [2]",
        "  ┆ Requests: [ ]",
        "  ┆ [ Book the table ] → book_table",
    ]


def test_the_dashboard_rows_and_its_template_over_the_data() -> None:
    assert surface_lines(ops(availability_dashboard()), 100) == [
        "table-availability:",
        "  ### Tonight at Trattoria Demo (demo data)",
        "  Free tables 4 │ Wait 15 min │ Rating 4.6 / 5",
        "  #### Open slots",
        "  18:30 │ 3 tables for 2",
        "  19:30 │ 1 table for 2, 1 for 4",
        "  21:00 │ 2 tables for 6",
    ]


def test_inputs_missing_children_cycles_width_and_delete() -> None:
    components = [
        {"id": "root", "component": "Column", "children": ["check", "pick", "slider", "later", "loop", "odd"]},
        {"id": "check", "component": "CheckBox", "label": "Terrace", "value": {"path": "/terrace"}},
        {"id": "pick", "component": "ChoicePicker", "label": "Menu", "value": ["veg"],
         "options": [{"label": "Vegetarian", "value": "veg"}, {"label": "Fish", "value": "fish"}]},
        {"id": "slider", "component": "Slider", "label": "Budget", "value": 40, "max": 100},
        {"id": "loop", "component": "Card", "child": "loop"},
        {"id": "odd", "component": "Gauge", "label": "x" * 200},
    ]
    surface = [{"createSurface": {"surfaceId": "s", "catalogId": "c"}},
               {"updateComponents": {"surfaceId": "s", "components": components}},
               {"updateDataModel": {"surfaceId": "s", "path": "/terrace", "value": True}}]
    lines = surface_lines(surface, 60)
    assert lines[:5] == ["s:", "  [x] Terrace", "  Menu: (•) Vegetarian  ( ) Fish", "  Budget: [40] (0–100)", "  …later"]
    # the card that is its own child: one rail a level, stopped at the depth cap
    assert surface_lines(surface, 200)[5] == "  " + "┆ " * MAX_SURFACE_DEPTH + f"… loop (deeper than {MAX_SURFACE_DEPTH})"
    assert lines[-1].startswith("  Gauge label='xxx") and len(lines[-1]) == 60 and lines[-1].endswith("…")
    assert fold_surfaces([*surface, {"deleteSurface": {"surfaceId": "s"}}]) == {}
    assert surface_lines([*surface[:1], {"updateComponents": {"surfaceId": "s", "components": components[1:2]}}],
                         60) == ["s:", "  (no root yet)"]


@pytest.mark.parametrize(("message", "expected"), [
    ("book a table", ["  ◇ A2UI surface · building", '  ⚙ render_a2ui(surfaceId="booking")', "  ▤ A2UI surface",
                      "  │ booking:", "  │   ┆ ## Book a table", "  │   ┆ Name: [Ada]", "  │   ┆ Guests: [2]",
                      "  │   ┆ [ Book now ] → book_table", '    ↳ render_a2ui → {"status":"rendered"}']),
    ("retry", ["  ◇ A2UI surface · building",
               "  ◇ A2UI surface · retrying (attempt 2/3): child 'nope' does not exist",
               "  ⚙ render_a2ui()", "  ▤ A2UI surface", "  │ retried:"]),
    ("failed", ["  ◇ A2UI surface · building", "  ⚙ render_a2ui()",
                "  ◇ A2UI surface · failed: A2UI generation failed after 3 attempts"]),
])
def test_the_renderer_shows_lifecycle_and_the_tree(message: str, expected: list[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(a2ui_surface_agent, "PAUSE_SECONDS", 0)
    out = io.StringIO()
    renderer = Renderer(out, live=False, color=False)

    async def run() -> None:
        run_input = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content=message)])
        async for event in a2ui_surface_agent.agent(run_input):
            renderer.handle(event)

    asyncio.run(run())
    lines = out.getvalue().splitlines()
    assert lines[1 : 1 + len(expected)] == expected
    assert lines[-1] == "● finished"
    assert sum(line == "  ▤ A2UI surface" for line in lines) == (0 if message == "failed" else 1)  # drawn once
