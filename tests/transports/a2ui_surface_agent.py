"""An agent of the inspector's A2UI tests: it emits ``a2ui-surface`` activities shaped exactly as
``@ag-ui/a2ui-middleware`` 0.0.10 emits them, served by a real ``agui-engine serve --agent
py:a2ui_surface_agent:agent`` (run from this folder).

What it answers (the last user message picks the scenario; a run whose ``forwardedProps`` carry
``a2uiAction.userAction`` answers the action):

* ``form`` (default): a ``render_a2ui`` tool call whose arguments stream, with the lifecycle
  ``building`` activity first, then the surface growing in order as the engine streams it
  (spec/a2ui.md): a snapshot of ``createSurface`` + an empty ``updateComponents``, one
  ``ACTIVITY_DELTA`` ``add .../components/-`` per component, the data model as ``add
  /a2ui_operations/2``; then the tool's ``{"status": "rendered"}`` result, as the middleware closes
  a pending call;
* ``snapshots``: the same form the middleware's way, one whole ``replace`` snapshot per step;
* ``engine``: the demo's booking form and availability dashboard (:mod:`agui_engine.demo.booking`),
  two calls, each streamed by the engine's own :class:`~agui_engine.genui.a2ui.A2UISurfaceStream`
  (basic catalog) from 16-character argument chunks, with a pause after every chunk that changed
  the surface;
* ``hostile``: a surface whose every string is markup or script;
* ``refuse``: a surface the renderer refuses (a TextField prop the v0.9 schema does not have), with
  hostile strings, drawn by the inspector's own fallback;
* ``bomb cycle`` / ``bomb cycle delta`` / ``bomb deep`` / ``bomb many`` / ``bomb shared`` / ``bomb result``: surfaces
  no renderer can draw, that arrive as activities (not through ``render_a2ui``'s checks): a two-component
  reference cycle (in a snapshot, or formed by a later ``ACTIVITY_DELTA``), a 3,000-level child chain,
  100,000 components, 31 components that would draw 2**31 (each referenced twice), and a cycle in an ``a2ui_operations`` tool result turned into an activity by the
  engine's :class:`~agui_engine.genui.a2ui.A2UITransformer` (as the loops do for any tool's result);
* ``v1 streamed``: the demo's booking form streamed as A2UI v1.0 (the v1.0 basic catalog, delta per
  component); ``v1 inline``: one v1.0 ``createSurface`` carrying its components and data model inline
  (v1.0's single-message form), with a TextField ``placeholder`` (a prop v1.0 added);
* ``retry``: ``building``, then ``retrying`` (attempt 2 of 3, with the validation errors), then the
  painted surface; ``repaint``: the same with a partly painted surface before ``retrying``;
  ``failed``: ``building`` then ``failed`` (recovery exhausted);
* an action: a text message naming it and a confirmation surface showing its context.

Every pause is :data:`PAUSE_SECONDS`, so a browser sees each step of the stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agui_engine.demo.booking import availability_dashboard, booking_form, for_a2ui_version
from agui_engine.demo.scripted import user_text
from agui_engine.genui.a2ui import A2UICatalog, A2UISurfaceStream, A2UITransformer
from agui_engine.protocol.events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

PAUSE_SECONDS = 0.25
ACTIVITY_TYPE = "a2ui-surface"
CATALOG_ID = "https://a2ui.org/specification/v0_9/basic_catalog.json"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

FORM = [
    {"id": "root", "component": "Card", "child": "col"},
    {"id": "col", "component": "Column", "children": ["title", "name", "guests", "submit"]},
    {"id": "title", "component": "Text", "text": "Book a table", "variant": "h2"},
    {"id": "name", "component": "TextField", "label": "Name", "value": {"path": "/booking/name"}},
    {"id": "guests", "component": "TextField", "label": "Guests", "value": {"path": "/booking/guests"}},
    {"id": "submit", "component": "Button", "child": "submit-label", "variant": "primary",
     "action": {"event": {"name": "book_table",
                          "context": {"name": {"path": "/booking/name"}, "guests": {"path": "/booking/guests"}}}}},
    {"id": "submit-label", "component": "Text", "text": "Book now"},
]
FORM_DATA = {"booking": {"name": "Ada", "guests": "2"}}

HOSTILE_SURFACE = [
    {"id": "root", "component": "Column", "children": ["t1", "t2", "img", "field"]},
    {"id": "t1", "component": "Text", "text": HOSTILE},
    {"id": "t2", "component": "Text", "text": {"path": "/evil"}},
    {"id": "img", "component": "Image", "url": "javascript:window.__pwned=3", "description": HOSTILE},
    {"id": "field", "component": "TextField", "label": HOSTILE, "value": {"path": "/evil"}},
]
REFUSED_SURFACE = [
    {"id": "root", "component": "Column", "children": ["t1", "field"]},
    {"id": "t1", "component": "Text", "text": HOSTILE},
    # "text" is the middleware prompt's name for the value; the v0.9 schema (strict) calls it "value"
    {"id": "field", "component": "TextField", "label": HOSTILE, "text": {"path": "/evil"}},
]


#: The hostile surfaces of the ``bomb`` scenarios (issue 30 point 3).
BOMB_CHAIN_LEVELS = 3000
BOMB_COMPONENTS = 100_000
CYCLE_SURFACE = [
    {"id": "root", "component": "Column", "children": ["a"]},
    {"id": "a", "component": "Card", "child": "b"},
    {"id": "b", "component": "Card", "child": "a"},
]


def bomb_surface(kind: str) -> list[dict[str, Any]]:
    """The components of a hostile surface: ``cycle``, ``deep`` (a chain of Cards) or ``many``."""
    if kind == "deep":
        chain = [{"id": "root" if i == 0 else f"c{i}", "component": "Card", "child": f"c{i + 1}"}
                 for i in range(BOMB_CHAIN_LEVELS)]
        return [*chain, {"id": f"c{BOMB_CHAIN_LEVELS}", "component": "Text", "text": "the bottom"}]
    if kind == "shared":  # 30 levels, each component referenced twice by the one above: 2**30 to draw
        levels = [{"id": "root" if i == 0 else f"s{i}", "component": "Column", "children": [f"s{i + 1}", f"s{i + 1}"]}
                  for i in range(30)]
        return [*levels, {"id": "s30", "component": "Text", "text": "leaf"}]
    if kind == "many":  # small components: the event (~3 MB) fits one run's event log (4 MiB)
        return [{"id": "root", "component": "Column", "children": ["1"]},
                *({"id": str(i), "component": "Divider"} for i in range(1, BOMB_COMPONENTS))]
    return CYCLE_SURFACE


def _ops(surface_id: str, components: list[dict[str, Any]], data: dict[str, Any] | None) -> dict[str, Any]:
    ops: list[dict[str, Any]] = [{"version": "v0.9", "createSurface": {"surfaceId": surface_id, "catalogId": CATALOG_ID}}]
    ops.append({"version": "v0.9", "updateComponents": {"surfaceId": surface_id, "components": components}})
    if data is not None:
        ops.append({"version": "v0.9", "updateDataModel": {"surfaceId": surface_id, "path": "/", "value": data}})
    return {"a2ui_operations": ops}


def _activity(call_id: str, content: dict[str, Any]) -> ActivitySnapshotEvent:
    return ActivitySnapshotEvent(message_id=f"a2ui-surface-{call_id}", activity_type=ACTIVITY_TYPE, content=content,
                                 replace=True)


def _user_text(input: RunAgentInput) -> str:
    return user_text(input.messages)


def _delta(call_id: str, path: str, value: Any) -> ActivityDeltaEvent:
    return ActivityDeltaEvent(message_id=f"a2ui-surface-{call_id}", activity_type=ACTIVITY_TYPE,
                              patch=[{"op": "add", "path": path, "value": value}])


async def _surface(call_id: str, surface_id: str, components: list[dict[str, Any]], data: dict[str, Any] | None,
                   *, grow: bool, deltas: bool = False) -> AsyncIterator[Event]:
    """The render_a2ui call: its streamed arguments with the surface's activity events between them
    (``grow``: one more component a step, by ``deltas`` or by whole snapshots)."""
    yield ToolCallStartEvent(tool_call_id=call_id, tool_call_name="render_a2ui")
    yield _activity(call_id, {"status": "building"})
    args = json.dumps({"surfaceId": surface_id, "components": components, "data": data or {}})
    pieces = [args[i : i + 40] for i in range(0, len(args), 40)]
    per = max(1, len(pieces) // (len(components) + 1))
    shown = 0
    for at, piece in enumerate(pieces):
        yield ToolCallArgsEvent(tool_call_id=call_id, delta=piece)
        if grow and shown < len(components) and at % per == per - 1:
            shown += 1
            await asyncio.sleep(PAUSE_SECONDS)
            if not deltas:
                yield _activity(call_id, _ops(surface_id, components[:shown], None))
                continue
            if shown == 1:
                yield _activity(call_id, _ops(surface_id, [], None))
            yield _delta(call_id, "/a2ui_operations/1/updateComponents/components/-", components[shown - 1])
    yield ToolCallEndEvent(tool_call_id=call_id)
    await asyncio.sleep(PAUSE_SECONDS)
    if deltas:
        for component in components[shown:]:
            yield _delta(call_id, "/a2ui_operations/1/updateComponents/components/-", component)
        if data is not None:
            yield _delta(call_id, "/a2ui_operations/2",
                         _ops(surface_id, [], data)["a2ui_operations"][2])
    else:
        yield _activity(call_id, _ops(surface_id, components, data))
    yield ToolCallResultEvent(message_id=f"result-{call_id}", tool_call_id=call_id, content='{"status":"rendered"}')


async def _engine_surface(call_id: str, surface: dict[str, Any], catalog: A2UICatalog | None = None,
                          ) -> AsyncIterator[Event]:
    """A demo surface as the engine streams it: A2UISurfaceStream over the argument chunks."""
    stream = A2UISurfaceStream(call_id, catalog=catalog or A2UICatalog.basic())
    yield ToolCallStartEvent(tool_call_id=call_id, tool_call_name="render_a2ui")
    yield stream.start()
    args = json.dumps(surface)
    for at in range(0, len(args), 16):
        piece = args[at : at + 16]
        yield ToolCallArgsEvent(tool_call_id=call_id, delta=piece)
        events = stream.feed(piece)
        for event in events:
            yield event
        if any(isinstance(e, ActivityDeltaEvent) or "a2ui_operations" in getattr(e, "content", {}) for e in events):
            await asyncio.sleep(PAUSE_SECONDS / 2)
    for event in stream.close():
        yield event
    yield ToolCallEndEvent(tool_call_id=call_id)
    content, _error = stream.tool_result()
    yield ToolCallResultEvent(message_id=f"result-{call_id}", tool_call_id=call_id, content=content)


async def _bomb(run: str, text: str) -> AsyncIterator[Event]:
    call = f"call-{run}"
    if "result" in text:  # a tool's result carrying the operations: the engine's transformer paints it
        transformer = A2UITransformer()
        events: list[Event] = [ToolCallStartEvent(tool_call_id=call, tool_call_name="lookup"),
                               ToolCallArgsEvent(tool_call_id=call, delta="{}"), ToolCallEndEvent(tool_call_id=call),
                               ToolCallResultEvent(message_id=f"result-{call}", tool_call_id=call,
                                                   content=json.dumps(_ops("bomb", CYCLE_SURFACE, None)))]
        for event in events:
            for out in transformer.feed(event):
                yield out
        return
    if "delta" in text:  # drawable first; a later delta turns "b" into a Card pointing back at "a"
        yield _activity(call, _ops("bomb", [*CYCLE_SURFACE[:2], {"id": "b", "component": "Text", "text": "b"}], None))
        await asyncio.sleep(PAUSE_SECONDS)
        yield _delta(call, "/a2ui_operations/1/updateComponents/components/-", CYCLE_SURFACE[2])
        return
    kind = next((k for k in ("deep", "many", "shared") if k in text), "cycle")
    yield _activity(call, _ops("bomb", bomb_surface(kind), None))


async def _text(message_id: str, text: str) -> AsyncIterator[Event]:
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    yield TextMessageContentEvent(message_id=message_id, delta=text)
    yield TextMessageEndEvent(message_id=message_id)


async def agent(input: RunAgentInput) -> AsyncIterator[Event]:
    run = input.run_id
    yield RunStartedEvent(thread_id=input.thread_id, run_id=run)
    props = input.forwarded_props if isinstance(input.forwarded_props, dict) else {}
    action = (props.get("a2uiAction") or {}).get("userAction")
    text = _user_text(input).lower()
    if isinstance(action, dict):
        context = action.get("context") or {}
        async for e in _text(f"text-{run}", f"You clicked {action.get('name')} on {action.get('surfaceId')}: "
                                            f"{json.dumps(context, sort_keys=True)}"):
            yield e
        done = [{"id": "root", "component": "Column", "children": ["msg"]},
                {"id": "msg", "component": "Text", "text": f"Booked for {context.get('name')}, {context.get('guests')} guests"}]
        async for e in _surface(f"call-{run}", "booking-done", done, None, grow=False):
            yield e
    elif "engine" in text:
        for at, surface in enumerate((booking_form(2), availability_dashboard())):
            async for e in _engine_surface(f"call-{run}-{at}", surface):
                yield e
    elif "hostile" in text:
        async for e in _surface(f"call-{run}", "hostile", HOSTILE_SURFACE, {"evil": HOSTILE}, grow=False):
            yield e
    elif "refuse" in text:
        async for e in _surface(f"call-{run}", "refused", REFUSED_SURFACE, {"evil": HOSTILE}, grow=False):
            yield e
    elif "v1 streamed" in text:
        async for e in _engine_surface(f"call-{run}-0", for_a2ui_version(booking_form(2), "v1.0"),
                                       A2UICatalog.basic("v1.0")):
            yield e
    elif "v1 inline" in text:
        yield _activity(f"call-{run}", {"a2ui_operations": [{"version": "v1.0", "createSurface": {
            "surfaceId": "inline", "catalogId": "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json",
            "components": [*FORM[:3], {**FORM[3], "placeholder": "Your name"}, *FORM[4:]],
            "dataModel": FORM_DATA}}]})
    elif "bomb" in text:
        async for e in _bomb(run, text):
            yield e
    elif "retry" in text or "failed" in text or "repaint" in text:
        call = f"call-{run}"
        yield ToolCallStartEvent(tool_call_id=call, tool_call_name="render_a2ui")
        yield _activity(call, {"status": "building"})
        await asyncio.sleep(PAUSE_SECONDS)
        if "repaint" in text:  # painted, then refused late: the client must drop what it drew
            yield _activity(call, _ops("retried", FORM[:3], None))
            await asyncio.sleep(PAUSE_SECONDS)
        if "retry" in text or "repaint" in text:
            yield _activity(call, {"status": "retrying", "attempt": 2, "maxAttempts": 3,
                                   "errors": [{"componentId": "col", "path": "/components/1/children",
                                               "message": "child 'nope' does not exist"}]})
            await asyncio.sleep(PAUSE_SECONDS)
            yield ToolCallEndEvent(tool_call_id=call)
            yield _activity(call, _ops("retried", FORM, FORM_DATA))
        else:
            yield ToolCallEndEvent(tool_call_id=call)
            yield _activity(call, {"status": "failed", "error": "A2UI generation failed after 3 attempts",
                                   "attempts": [], "maxAttempts": 3})
        yield ToolCallResultEvent(message_id=f"result-{call}", tool_call_id=call, content='{"status":"rendered"}')
    else:
        async for e in _surface(f"call-{run}", "booking", FORM, FORM_DATA, grow=True, deltas="snapshots" not in text):
            yield e
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=run)
