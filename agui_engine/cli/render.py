"""The terminal renderer of ``agui-engine demo`` and ``agui-engine run``: a run's
events, live.

Theory of operation
-------------------
Every event goes through an :class:`~agui_engine.protocol.accumulator.Accumulator`
(components become content blocks whose props are rebuilt from the streamed JSON
Patch operations), then the :class:`Renderer` draws it:

* text and reasoning stream as they arrive;
* tool calls are shown with their arguments and status message when they end,
  and their results when they arrive;
* each component is a box whose props fill in, with a status per prop
  (``·`` started, ``…`` streaming, ``✓`` done);
* an A2UI surface (an ``a2ui-surface`` activity, folded by the accumulator) shows its lifecycle
  as it changes (building, retrying with the errors, failed) and, once its call has its result (or
  the run ends), its whole tree as text (:mod:`agui_engine.cli.render_a2ui`); its call is shown
  by surface id, not by its arguments.

On a terminal (``live``) the component boxes are redrawn in place with ANSI
cursor movement and colour. Without a terminal (a pipe, CI) the output is plain
lines: a line per prop when it is done, nothing redrawn, no escape codes.
:func:`console_modes` decides which, :func:`make_renderer` sizes the renderer
to the terminal (one place for ``demo`` and ``run``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, TextIO

import jsonpatch
import jsonpointer
import msgspec

from ..genui.a2ui import A2UI_ACTIVITY_TYPE, A2UI_OPERATIONS_KEY
from ..genui.component_stream import (
    COMPONENT_END,
    COMPONENT_HANDLERS,
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
    PROPS_STATUS_KEY,
    find_component,
)
from ..genui.components import is_ui_tool
from ..genui.mcp_apps import MCP_APP_ANNOUNCE_EVENT, MCP_APP_INPUT_EVENT, MCP_APPS_ACTIVITY_TYPE
from ..genui.uispec import UI_SPEC_COMPONENT
from ..loops.tool_calls import TOOL_CALL_STATUS_EVENT
from ..protocol.accumulator import Accumulator
from ..protocol.errors import AguiEngineError
from ..protocol.events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    CustomEvent,
    Event,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ..protocol.pointer import escape_token
from .render_a2ui import surface_lines

__all__ = [
    "FALLBACK_TERMINAL_SIZE",
    "MAX_RENDER_WIDTH",
    "Renderer",
    "console_modes",
    "fetch_component_data",
    "make_renderer",
]

#: Fewest lines a component box may take in live mode (the limit is the screen
#: height minus a margin). Redrawing moves the cursor up over the box; a box
#: taller than the screen could not be reached, so a longer box shows its head
#: and its newest lines while it streams, and the whole tree once it is done.
_MIN_LIVE_LINES: Final = 6


_STATUS_MARK: Final = {"started": "…", "done": "✓"}
#: The prefix of an A2UI surface's activity message id (+ its call's id; the official middleware's).
_A2UI_MESSAGE_PREFIX: Final = A2UI_ACTIVITY_TYPE + "-"


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "⏎ ").replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _tree(value: Any, indent: str, width: int) -> list[str]:
    """Nested props as indented lines; short lists and scalars stay on one line."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            if isinstance(sub, (dict, list)) and sub and len(json.dumps(sub, ensure_ascii=False)) > width - len(indent) - len(key) - 2:
                lines.append(f"{indent}{key}:")
                lines.extend(_tree(sub, indent + "  ", width))
            else:
                lines.append(_short(f"{indent}{key}: {_short(sub, width)}", width))
    elif isinstance(value, list):
        for sub in value:
            if isinstance(sub, (dict, list)) and sub and len(json.dumps(sub, ensure_ascii=False)) > width - len(indent) - 2:
                inner = _tree(sub, indent + "  ", width)
                lines.append(indent + "- " + inner[0].lstrip())
                lines.extend(inner[1:])
            else:
                lines.append(_short(f"{indent}- {_short(sub, width)}", width))
    else:
        lines.append(_short(indent + _short(value, width), width))
    return lines


#: What a bound component's (or tree node's) resource answered: ``(resourceId, data, error)``.
_Answer = tuple[str, Any, str | None]


def _data_lines(answer: _Answer | None, width: int) -> list[str]:
    """What a resource answered, as lines (empty before any answer): one code path for a
    top-level bound component and a bound node of a ``render_ui`` tree."""
    if answer is None:
        return []
    resource_id, data, error = answer
    if error is not None:
        return [_short(f"{resource_id} failed: {error}", width)]
    return _tree(data, "", width) if isinstance(data, (dict, list)) and data else [_short(f"{resource_id}: {_short(data, width)}", width)]


def _ui_tree_lines(props: dict[str, Any], width: int, answers: dict[str, _Answer] | None = None) -> list[str]:
    """A ``render_ui`` tree (its component's props) as one line per node, indented by depth:
    ``✓ Component [id] key=…`` (``…`` while the node streams) over a line of its props, text quoted;
    a bound node's answer (``answers``: node id -> answer) follows as ``⇣`` lines."""
    lines: list[str] = []
    answers = answers or {}

    def walk(nodes: Any, indent: str) -> None:
        for node in nodes if isinstance(nodes, list) else ():
            if not isinstance(node, dict):
                lines.append(_short(f"{indent}“{node}”", width))
                continue
            key = f" key={node['key']}" if "key" in node else ""
            props = node.get("props") if isinstance(node.get("props"), dict) else {}
            mark = _STATUS_MARK["done" if node.get("done") else "started"]
            lines.append(_short(f"{indent}{mark} {node.get('component')} [{node.get('id')}]{key}", width))
            if props:  # on a line of their own, under the name, so the name never gets cut
                lines.append(_short(indent + "   " + " ".join(
                    f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(',', ':'))}"
                    for k, v in props.items()), width))
            lines.extend(_short(f"{indent}   ⇣ {line}", width)
                         for line in _data_lines(answers.get(str(node.get("id"))), width - len(indent) - 5))
            walk(node.get("children"), indent + "  ")

    walk(props.get("root"), "")
    error = props.get("error")
    if isinstance(error, dict):
        lines.append(_short(f"refused: {error.get('message')}", width))
    return lines


class _ComponentView:
    def __init__(self, name: str, component_id: str, ordinal: int) -> None:
        self.name = name
        self.id = component_id
        self.label = f"{name} #{ordinal}"
        self.printed: set[str] = set()
        self.done = False
        self.note = ""
        #: The data its resource answered, see Renderer.attach_data.
        self.data: _Answer | None = None
        #: A ``render_ui`` tree's bound nodes: node id -> the data its resource answered.
        self.node_data: dict[str, _Answer] = {}


class Renderer:
    """Turns a run's events into terminal output (see the module docstring).

    ``live``: redraw component boxes in place (a terminal); otherwise plain lines.
    ``color``: ANSI colours. ``width``: the line width to fit.
    """

    def __init__(self, out: TextIO, *, live: bool, color: bool, width: int = 100, height: int = 40) -> None:
        self.out = out
        self.live = live
        self.color = color
        self.width = max(width, 40)
        self.max_box_lines = max(height - 4, _MIN_LIVE_LINES)
        self.acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
        self.components: dict[str, _ComponentView] = {}
        self.active: list[_ComponentView] = []  # boxes in the live region, in order
        self.drawn = 0  # lines the live region takes on screen now
        self.inline = False  # a text or reasoning line is open
        self.tool_names: dict[str, str] = {}
        self.answered: set[str] = set()  # tool call ids that got their result in this stream
        self.status: dict[str, dict[str, str]] = {}  # tool call id -> its status messages
        self.last_tool_call: str | None = None
        self.by_tool_call: dict[str, _ComponentView] = {}
        self.ordinal = 0
        #: A2UI activity message id -> (last lifecycle status shown, the content last drawn as a tree)
        self.surfaces: dict[str, tuple[str | None, Any]] = {}
        #: tool call id -> the arguments so far of a call whose MCP app was announced
        self.app_inputs: dict[str, Any] = {}

    # -- output primitives

    def paint(self, code: str, text: str) -> str:
        """``text`` in the SGR colour ``code`` when colour is on, else as it is."""
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _clear_region(self) -> None:
        if self.live and self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0

    def _line(self, text: str) -> None:
        """Write one permanent line (above the live region)."""
        self._end_inline()
        self._clear_region()
        self.out.write(text + "\n")
        self._draw_region()

    def _end_inline(self) -> None:
        if self.inline:
            self.out.write("\n")
            self.inline = False

    def _inline(self, prefix: str, delta: str) -> None:
        if not self.inline:
            self._clear_region()
            self.out.write(prefix)
            self.inline = True
        self.out.write(delta.replace("\n", "\n    "))

    def _box(self, view: _ComponentView) -> list[str]:
        block = find_component(self.acc, view.id) or {}
        props = block.get("props", {})
        status = block.get(PROPS_STATUS_KEY) or {}
        state = "done" if view.done else block.get("streamingState", "started")
        head = f"  ┌ {view.label} · {state}"
        lines = [self.paint("1;36", head)]
        inner = self.width - 8
        if view.name == UI_SPEC_COMPONENT:
            lines.extend(f"  │ {line}" for line in _ui_tree_lines(props, inner, view.node_data))
            props = {}
        for key, value in props.items():
            mark = _STATUS_MARK.get(status.get("/" + escape_token(key), "done" if view.done else "started"), "·")
            sub = _tree({key: value}, "", inner)
            lines.append(f"  │ {self.paint('32' if mark == '✓' else '33', mark)} {sub[0]}")
            lines.extend(f"  │   {s}" for s in sub[1:])
        lines.extend(f"  │ {self.paint('34', '⇣')} {line}" for line in _data_lines(view.data, inner))
        lines.append(self.paint("36", "  └" + (f" {view.note}" if view.note else "")))
        return lines

    def attach_data(self, component_id: str, resource_id: str, data: Any = None, error: str | None = None,
                    *, node_id: str | None = None) -> None:
        """Show the data a component's resource answered (or the error) with its box, or
        with node ``node_id`` of its ``render_ui`` tree: call it before the component's
        ``end`` event is handled, so the finished box (live) or its done lines (plain) carry it."""
        view = self.components.get(component_id)
        if view is None:
            return
        if node_id is None:
            view.data = (resource_id, data, error)
        else:
            view.node_data[node_id] = (resource_id, data, error)

    def _draw_region(self) -> None:
        if not self.live or self.inline or not self.active:
            return
        lines: list[str] = []
        # the whole region must fit on the screen: boxes streaming side by side share it
        cap = max(self.max_box_lines // len(self.active), _MIN_LIVE_LINES)
        for view in self.active:
            box = self._box(view)
            if len(box) > cap:
                # keep the head and the lines being filled in now (the tail)
                hidden = len(box) - cap + 1
                box = [box[0], f"  │   … {hidden} lines above", *box[hidden + 1 :]]
            lines.extend(box)
        self.out.write("".join(f"\x1b[2K{line}\n" for line in lines))
        self.drawn = len(lines)

    def _redraw(self) -> None:
        if self.live and not self.inline:
            self._clear_region()
            self._draw_region()

    # -- events

    def handle(self, event: Event) -> None:
        """Apply ``event`` to the accumulator and render it."""
        self.acc.apply(event)
        if isinstance(event, RunStartedEvent):
            self._line(self.paint("1", f"● run {event.run_id} (thread {event.thread_id})"))
        elif isinstance(event, ReasoningMessageStartEvent):
            pass
        elif isinstance(event, ReasoningMessageContentEvent):
            self._inline(self.paint("2", "  thinking › "), self.paint("2", event.delta) if self.color else event.delta)
        elif isinstance(event, ReasoningMessageEndEvent):
            self._end_inline()
            self._redraw()
        elif isinstance(event, TextMessageStartEvent):
            pass
        elif isinstance(event, TextMessageContentEvent):
            self._inline(self.paint("1;34", "  assistant › "), event.delta)
        elif isinstance(event, TextMessageEndEvent):
            self._end_inline()
            self._redraw()
        elif isinstance(event, ToolCallStartEvent):
            self.tool_names[event.tool_call_id] = event.tool_call_name
            self.last_tool_call = event.tool_call_id
        elif isinstance(event, ToolCallEndEvent):
            self._tool_end(event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            self._tool_result(event)
        elif isinstance(event, CustomEvent):
            self._custom(event)
        elif isinstance(event, ActivitySnapshotEvent) and event.activity_type == MCP_APPS_ACTIVITY_TYPE:
            # an MCP App: a terminal cannot draw it, so it says where it is drawn
            uri = event.content.get("resourceUri")
            self._line(self.paint("36", f"    ▣ app {uri} (mcp-apps: the inspector shows it)"))
        elif isinstance(event, (ActivitySnapshotEvent, ActivityDeltaEvent)):
            if event.activity_type == A2UI_ACTIVITY_TYPE:
                self._surface_lifecycle(event.message_id)
        elif isinstance(event, RunFinishedEvent):
            for message_id in list(self.surfaces):
                self._draw_surface(message_id)
            self._finished(event)
        elif isinstance(event, RunErrorEvent):
            self._line(self.paint("1;31", f"✖ run error [{event.code}]: {event.message}"))
        self.out.flush()

    def _arguments(self, tool_call_id: str) -> dict[str, Any]:
        for message in self.acc.messages:
            for call in message.get("toolCalls") or ():
                if call["id"] == tool_call_id:
                    try:
                        value = json.loads(call["function"]["arguments"] or "{}")
                    except ValueError:
                        return {}
                    return value if isinstance(value, dict) else {}
        return {}

    def _activity(self, message_id: str) -> dict[str, Any] | None:
        for message in reversed(self.acc.messages):
            if message.get("id") == message_id and message.get("role") == "activity":
                content = message.get("content")
                return content if isinstance(content, dict) else None
        return None

    def _surface_lifecycle(self, message_id: str) -> None:
        """A line when the surface's lifecycle status changes (building, retrying, failed)."""
        content = self._activity(message_id) or {}
        status = content.get("status") if isinstance(content.get("status"), str) else None
        shown, drawn = self.surfaces.get(message_id, (None, None))
        self.surfaces[message_id] = (status, drawn)
        if status is None or status == shown:
            return
        text = f"  ◇ A2UI surface · {status}"
        if content.get("attempt") is not None:
            text += f" (attempt {content.get('attempt')}/{content.get('maxAttempts', '?')})"
        problems = [e.get("message", e) if isinstance(e, dict) else e for e in content.get("errors") or []]
        if isinstance(content.get("error"), str):
            problems.append(content["error"])
        if problems:
            text += ": " + "; ".join(str(p) for p in problems)
        self._line(self.paint("31" if status == "failed" else "33" if status == "retrying" else "2",
                              _short(text, self.width)))

    def _draw_surface(self, message_id: str) -> None:
        """The surface's whole tree, once for each content it paints."""
        content = self._activity(message_id) or {}
        operations = content.get(A2UI_OPERATIONS_KEY)
        status, drawn = self.surfaces.get(message_id, (None, None))
        if not isinstance(operations, list) or content == drawn:
            return
        self.surfaces[message_id] = (status, json.loads(json.dumps(content)))
        versions = {op.get("version") for op in operations if isinstance(op, dict)} - {None, "v0.9"}
        label = "  ▤ A2UI surface" + "".join(f" ({v})" for v in sorted(map(str, versions)))  # says v1.0 when it is
        self._line(self.paint("1;36", label))
        for line in surface_lines(operations, self.width - 6):
            self._line(f"  {self.paint('36', '│')} {line}")

    def _tool_end(self, tool_call_id: str) -> None:
        name = self.tool_names.get(tool_call_id, "?")
        status = self.status.get(tool_call_id, {})
        if _A2UI_MESSAGE_PREFIX + tool_call_id in self.surfaces:  # its surface is drawn, not its arguments
            surface = self._arguments(tool_call_id).get("surfaceId")
            shown = f"surfaceId={json.dumps(surface, ensure_ascii=False)}" if isinstance(surface, str) else ""
            self._line(self.paint("35", f"  ⚙ {name}({shown})"))
            return
        if is_ui_tool(name):
            view = self.by_tool_call.get(tool_call_id)
            if view is not None:
                view.note = status.get("completionStatusMessage", "")
            return
        args = self._arguments(tool_call_id)
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        note = f"  — {status['statusMessage']}" if status.get("statusMessage") else ""
        self._line(self.paint("35", f"  ⚙ {name}({_short(shown, self.width - 20)})") + self.paint("2", note))

    def _tool_result(self, event: ToolCallResultEvent) -> None:
        self.answered.add(event.tool_call_id)
        name = self.tool_names.get(event.tool_call_id, "?")
        content = event.content if isinstance(event.content, str) else json.dumps(msgspec.to_builtins(event.content))
        if is_ui_tool(name):
            return  # the component box already says it is shown
        self._draw_surface(_A2UI_MESSAGE_PREFIX + event.tool_call_id)
        failed = content.startswith("Error:")
        text = f"    ↳ {name} → {_short(content, self.width - 12 - len(name))}"
        self._line(self.paint("31" if failed else "2", text))

    def _app_input(self, name: str, value: dict[str, Any]) -> None:
        """An MCP app announced at its call's start, and its input as the model types it."""
        call_id = str(value.get("toolCallId"))
        if name == MCP_APP_ANNOUNCE_EVENT:
            self.app_inputs[call_id] = {}
            self._line(self.paint("36", f"    ▣ app {value.get('resourceUri')} opens: its input streams to it as the model types"))
            return
        if call_id not in self.app_inputs:
            return
        try:
            doc = jsonpatch.JsonPatchWithAppend(value.get("operations") or []).apply(self.app_inputs[call_id], in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, ValueError):
            return  # a terminal shows what it can; the app itself gets the final input anyway
        self.app_inputs[call_id] = doc
        text = json.dumps(doc, ensure_ascii=False, separators=(", ", ": "))
        self._line(self.paint("2", f"    ▣ app input so far: {_short(text, self.width - 26)}"))

    def _custom(self, event: CustomEvent) -> None:
        value = event.value if isinstance(event.value, dict) else {}
        if event.name in (MCP_APP_ANNOUNCE_EVENT, MCP_APP_INPUT_EVENT):
            self._app_input(event.name, value)
        elif event.name == TOOL_CALL_STATUS_EVENT:
            call_id = str(value.get("toolCallId"))
            self.status[call_id] = {k: v for k, v in value.items() if k != "toolCallId" and isinstance(v, str)}
            view = self.by_tool_call.get(call_id)
            message = self.status[call_id].get("statusMessage")
            if view is not None and not view.done and message and view.note != message + "…":
                view.note = message + "…"
                if self.live:
                    self._redraw()
                else:
                    self._line(self.paint("2", f"    {view.label}: {view.note}"))
        elif event.name == COMPONENT_START:
            self.ordinal += 1
            view = _ComponentView(str(value.get("componentName")), str(value.get("componentId")), self.ordinal)
            self.components[view.id] = view
            if self.last_tool_call is not None:
                # the engine sends tambo.component.start right after its call's TOOL_CALL_START
                self.by_tool_call[self.last_tool_call] = view
            if self.live:
                self._end_inline()
                self.active.append(view)
                self._redraw()
            else:
                self._line(self.paint("1;36", f"  ▣ {view.label} started"))
        elif event.name == COMPONENT_PROPS_DELTA:
            view = self.components.get(str(value.get("componentId")))
            if view is None:
                return
            if self.live:
                self._redraw()
            else:
                self._print_done_props(view)
        elif event.name == COMPONENT_END:
            view = self.components.get(str(value.get("componentId")))
            if view is None:
                return
            view.done = True
            if self.live:
                self._clear_region()
                if view in self.active:
                    self.active.remove(view)
                self.out.write("\n".join(self._box(view)) + "\n")
                self._draw_region()
            else:
                self._print_done_props(view)
                for line in _data_lines(view.data, self.width - 10):
                    self._line(f"    {self.paint('34', '⇣')} {view.label} {line}")
                note = f" · {view.note}" if view.note else ""
                self._line(self.paint("1;36", f"  ▣ {view.label} done{note}"))

    def _print_done_props(self, view: _ComponentView) -> None:
        block = find_component(self.acc, view.id) or {}
        props = block.get("props", {})
        status = block.get(PROPS_STATUS_KEY) or {}
        if view.name == UI_SPEC_COMPONENT:  # the tree is printed whole, once it is done
            for line in _ui_tree_lines(props, self.width - 10, view.node_data) if view.done else ():
                self._line(f"    {self.paint('32', '▸')} {line}")
            return
        for key, value in props.items():
            if key in view.printed or (status.get("/" + escape_token(key)) != "done" and not view.done):
                continue
            view.printed.add(key)
            tree = _tree({key: value}, "", self.width - 10)
            self._line(f"    {self.paint('32', '✓')} {view.label} {tree[0]}")
            for line in tree[1:]:
                self._line(f"      {line}")

    def _finished(self, event: RunFinishedEvent) -> None:
        parts = ["● finished"]
        # A wrapper that answers the inner agent's calls itself (A2UI's render_a2ui, as the official
        # middleware does) passes the inner RUN_FINISHED on unchanged: a call answered in this run is
        # not waiting for the client, whatever the outcome lists.
        pending = [id for id in getattr(event.outcome, "pending_tool_call_ids", None) or () if id not in self.answered]
        if pending:
            parts.append(f"waiting for client tools {', '.join(pending)}")
        for usage in event.usage or ():
            parts.append(f"{usage.model}: {usage.input_tokens} in / {usage.output_tokens} out tokens")
        self._line(self.paint("1", " · ".join(parts)))


#: The renderer's widest line: wider terminals get whitespace, not longer trees.
MAX_RENDER_WIDTH: Final = 120
#: The terminal size assumed when the output is not a terminal (a pipe, a file, CI).
FALLBACK_TERMINAL_SIZE: Final = (100, 40)


def console_modes(out: TextIO, *, plain: bool, no_color: bool) -> tuple[bool, bool]:
    """``(live, color)`` for rendering to ``out``: live redrawing only on a terminal
    and not ``plain``; colour only when live, not ``no_color`` and ``NO_COLOR`` unset.
    Also makes ``out`` replace what it cannot encode (box drawing and status marks
    must never crash a run on a latin-1 console)."""
    reconfigure = getattr(out, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="replace")
    live = out.isatty() and not plain
    return live, live and not no_color and not os.environ.get("NO_COLOR")


def make_renderer(out: TextIO, *, live: bool, color: bool) -> Renderer:
    """A :class:`Renderer` sized to the terminal (one place for ``demo`` and ``run``)."""
    size = shutil.get_terminal_size(FALLBACK_TERMINAL_SIZE)
    return Renderer(out, live=live, color=color, width=min(size.columns, MAX_RENDER_WIDTH), height=size.lines)


#: ``query(resource_id, params) -> data``: how a front end fetches a component's data
#: (the demo: the gateway's ResourceBroker in-process; a remote agent: its ``query``).
Query = Callable[[str, Any], Awaitable[Any]]


def _bound_nodes(nodes: Any) -> Iterator[dict[str, Any]]:
    """The nodes of a ``render_ui`` tree (depth first) whose props carry a ``resourceId``."""
    for node in nodes if isinstance(nodes, list) else ():
        if isinstance(node, dict):
            if isinstance(node.get("props"), dict) and isinstance(node["props"].get("resourceId"), str):
                yield node
            yield from _bound_nodes(node.get("children"))


async def fetch_component_data(renderer: Renderer, event: Event, query: Query) -> None:
    """If ``event`` ends a component bound to a resource (``finalProps`` with
    ``resourceId``), or a ``render_ui`` tree with bound nodes (one query per node),
    fetch their data with ``query`` and attach it to the renderer (an engine error is
    shown as the box's or node's error line). Call it before ``renderer.handle``."""
    if not isinstance(event, CustomEvent) or event.name != COMPONENT_END or not isinstance(event.value, dict):
        return
    component_id = str(event.value.get("componentId"))
    props = event.value.get("finalProps")
    if not isinstance(props, dict):
        return
    view = renderer.components.get(component_id)
    if view is not None and view.name == UI_SPEC_COMPONENT:
        for node in _bound_nodes(props.get("root")):
            await _fetch_into(renderer, component_id, node["props"], query, str(node.get("id")))
    elif isinstance(props.get("resourceId"), str):
        await _fetch_into(renderer, component_id, props, query, None)


async def _fetch_into(renderer: Renderer, component_id: str, props: dict[str, Any], query: Query,
                      node_id: str | None) -> None:
    resource_id = props["resourceId"]
    try:
        data = await query(resource_id, props.get("params", {}))
    except AguiEngineError as exc:
        renderer.attach_data(component_id, resource_id, error=f"[{exc.code}] {exc.message}", node_id=node_id)
        return
    renderer.attach_data(component_id, resource_id, data, node_id=node_id)
