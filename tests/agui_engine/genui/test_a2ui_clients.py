"""Surfaces each client can draw (issue 31): ``a2ui_snapshots="auto"`` gives whole snapshots, with the
aliases assistant-ui's converter reads, to the runs of assistant-ui's AG-UI runtime (its 7-character
run ids), whole snapshots without aliases to a CopilotKit page with its A2UI renderer on (a bare runtime
``a2ui: {}`` middleware may paint for it too) and deltas to every other client; ``True`` / ``False`` fix the mode; the same through
``serve --a2ui`` (default auto) and ``--a2ui-snapshots on|off``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.demo.booking import booking_form
from agui_engine.demo.weather_model import EmbeddedModel
from agui_engine.genui.a2ui import A2UI_SCHEMA_CONTEXT_DESCRIPTION, A2UICatalog, prepare_a2ui_run
from agui_engine.genui.a2ui_clients import (
    COPILOTKIT_A2UI_CONTEXT_DESCRIPTION,
    a2ui_snapshots_option,
    from_assistant_ui,
    from_copilotkit_a2ui,
    run_wants_snapshots,
    whole_surface_component,
)
from agui_engine.loops.a2ui_agent import A2UIAgent
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import RunAgentInput

from .test_a2ui import fold


def run_input(run_id: str) -> RunAgentInput:
    return msgspec.convert({"threadId": "t", "runId": run_id, "messages": [], "tools": [], "context": []},
                           RunAgentInput)


@pytest.mark.parametrize(("run_id", "assistant_ui"), [
    ("F3wXrCN", True), ("0000000", True), ("zzzzzzz", True),  # @assistant-ui/core's generateId
    ("3b241101-e2bb-4255-8caf-4136c566a962", False),  # @ag-ui/client, CopilotKit: UUIDs
    ("3b241101e2bb42558caf4136c566a962", False),  # this engine's own clients: 32 hex digits
    ("F3wXrC", False), ("F3wXrCNN", False), ("F3w-rCN", False), ("r", False),
])
def test_assistant_uis_runs_are_told_apart_by_their_run_id(run_id: str, assistant_ui: bool) -> None:
    assert from_assistant_ui(run_input(run_id)) is assistant_ui
    assert run_wants_snapshots(run_input(run_id), "auto") is assistant_ui
    assert run_wants_snapshots(run_input(run_id), True) is True  # a fixed choice wins
    assert run_wants_snapshots(run_input(run_id), False) is False


_BASIC_ENTRY = {"description": A2UI_SCHEMA_CONTEXT_DESCRIPTION,
                "value": A2UICatalog.basic().context_entry().value}


@pytest.mark.parametrize(("context", "copilotkit"), [
    # what a CopilotKit 1.74 page with its A2UI renderer on sends (captured from the page, values cut)
    ([{"description": COPILOTKIT_A2UI_CONTEXT_DESCRIPTION, "value": "Available A2UI catalog:\n- basic"},
      _BASIC_ENTRY], True),
    ([{"description": COPILOTKIT_A2UI_CONTEXT_DESCRIPTION, "value": ""}], True),
    ([_BASIC_ENTRY], False),  # the catalog entry alone: the middleware's own, any client sends it
    ([{"description": "A2UI catalog capabilities", "value": ""}], False),
    ([], False),
])
def test_a_copilotkit_a2ui_page_gets_snapshots_in_auto(context: list[dict[str, str]], copilotkit: bool) -> None:
    """CopilotKit's page with its A2UI renderer on (``A2UICatalogContext``'s context entry) may sit
    behind a bare runtime ``a2ui: {}`` middleware that paints the same activity with whole snapshots
    and that the run cannot show: ``auto`` gives it whole snapshots, without assistant-ui's aliases."""
    given = msgspec.convert({"threadId": "t", "runId": "3b241101-e2bb-4255-8caf-4136c566a962", "messages": [],
                             "tools": [], "context": context}, RunAgentInput)
    assert from_copilotkit_a2ui(given) is copilotkit
    assert run_wants_snapshots(given, "auto") is copilotkit
    assert run_wants_snapshots(given, False) is False
    _, transformer = prepare_a2ui_run(given, A2UICatalog.basic(), snapshots="auto")
    assert transformer.snapshots is copilotkit and transformer.aliases is False


@pytest.mark.parametrize("bad", ["on", "yes", 1, 0, None, "AUTO"])
def test_a_snapshot_choice_is_true_false_or_auto(bad: object) -> None:
    for value in (True, False, "auto"):
        assert a2ui_snapshots_option(value, "LLMAgent") == value
    with pytest.raises(UsageError, match=r"^LLMAgent: a2ui_snapshots must be True, False or 'auto', got "):
        a2ui_snapshots_option(bad, "LLMAgent")
    with pytest.raises(UsageError, match="^A2UIAgent: a2ui_snapshots"):
        A2UIAgent(LLMAgent(EmbeddedModel()), snapshots=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="^LLMAgent: a2ui_snapshots"):
        LLMAgent(EmbeddedModel(), a2ui=True, a2ui_snapshots=bad)  # type: ignore[arg-type]


def test_the_aliases_sit_beside_the_a2ui_keys() -> None:
    card = {"id": "root", "component": "Card", "child": "form"}
    assert whole_surface_component(card) == {**card, "children": ["form"]}
    event = {"name": "book_table", "context": {"guests": {"path": "/booking/guests"}}}
    button = {"id": "book", "component": "Button", "child": "label", "action": {"event": event}}
    assert whole_surface_component(button) == {**button, "children": ["label"],
                                                "action": {"event": event, **event}}
    # nothing to add: the same object; what it already says is never changed
    column = {"id": "c", "component": "Column", "children": ["a", "b"]}
    assert whole_surface_component(column) is column
    both = {"id": "x", "component": "Card", "child": "a", "children": ["b"], "action": {"name": "n", "event": event}}
    assert whole_surface_component(both) is both
    assert whole_surface_component("root") == "root"
    assert card == {"id": "root", "component": "Card", "child": "form"}  # the input is not changed


def transformed(run_id: str, snapshots: bool | str) -> list[dict[str, Any]]:
    """The activity events of the demo booking form's render_a2ui call, in 16-character fragments."""
    from agui_engine.protocol.codec import decode_event, encode_event

    _, t = prepare_a2ui_run(run_input(run_id), A2UICatalog.basic(), snapshots=snapshots)  # type: ignore[arg-type]
    args = json.dumps(booking_form(4))
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "render_a2ui"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": args[i:i + 16]} for i in range(0, len(args), 16)),
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
    ]
    out = []
    for e in events:
        out += t.feed(decode_event(json.dumps(e)))
    out += t.close()
    return [json.loads(encode_event(e)) for e in out]


def components(final: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    ((_, content),) = final
    ops = content["a2ui_operations"]
    return [c for op in ops if "updateComponents" in op for c in op["updateComponents"]["components"]]


def test_auto_sends_assistant_ui_whole_snapshots_it_can_draw_and_others_deltas() -> None:
    aui = transformed("F3wXrCN", "auto")
    other = transformed(str(uuid.uuid4()), "auto")
    types = [e["type"] for e in aui]
    assert "ACTIVITY_DELTA" not in types and types.count("ACTIVITY_SNAPSHOT") > 3  # still component by component
    assert "ACTIVITY_DELTA" in [e["type"] for e in other]
    final_aui, final_other = components(fold(aui)[1]), components(fold(other)[1])
    # the same surface; assistant-ui's carries the aliases its converter reads, beside the A2UI keys
    assert final_aui == [whole_surface_component(c) for c in final_other]
    book = next(c for c in final_aui if c["id"] == "book")
    assert book["children"] == ["book-label"] and book["action"]["name"] == "book_table"
    assert book["action"]["event"]["name"] == "book_table"
    assert not any("children" in c and "child" in c for c in final_other)
    # fixed snapshots for another client: whole snapshots, no aliases; fixed deltas for assistant-ui: deltas
    forced = transformed(str(uuid.uuid4()), True)
    assert "ACTIVITY_DELTA" not in [e["type"] for e in forced] and components(fold(forced)[1]) == final_other
    assert "ACTIVITY_DELTA" in [e["type"] for e in transformed("F3wXrCN", False)]


@pytest.mark.timeout(180)  # gateway subprocesses with the embedded model
def test_serve_a2ui_gives_assistant_ui_snapshots_unless_told_otherwise(tmp_path: Path) -> None:
    from tests.transports.served import served

    def run(url: str, run_id: str) -> list[str]:
        body = {"threadId": "t", "runId": run_id, "messages": [{"id": "u", "role": "user",
                                                                "content": "book a table for two"}],
                "tools": [], "context": [], "state": None, "forwardedProps": {}}
        text = httpx.post(url, json=body, headers={"Accept": "text/event-stream"}, timeout=60).text
        return [json.loads(line[6:])["type"] for line in text.splitlines() if line.startswith("data: ")]

    with served(tmp_path, "--a2ui", "--pace", "0") as url:  # the default: auto
        assert "ACTIVITY_DELTA" not in run(url, "Xk9Qa2B") and "ACTIVITY_SNAPSHOT" in run(url, "Xk9Qa2C")
        assert "ACTIVITY_DELTA" in run(url, str(uuid.uuid4()))
    with served(tmp_path, "--a2ui", "--pace", "0", "--a2ui-snapshots", "off") as url:
        assert "ACTIVITY_DELTA" in run(url, "Xk9Qa2D")
    with served(tmp_path, "--a2ui", "--pace", "0", "--a2ui-snapshots") as url:  # alone: on
        assert "ACTIVITY_DELTA" not in run(url, str(uuid.uuid4()))
