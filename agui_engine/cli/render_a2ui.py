"""A2UI v0.9 surfaces as terminal text: what ``agui-engine demo --a2ui`` prints for an
``a2ui-surface`` activity.

Theory of operation
-------------------
:func:`surface_lines` folds a surface's A2UI messages (``createSurface``, ``updateComponents``,
``updateDataModel``, ``deleteSurface``; the content of the activity the accumulator keeps) into its
components by id and its data model, then draws the tree from ``root`` as indented lines, one per
component, as a person would read the screen:

* ``Text``: its text (``#`` marks for h1-h5), values bound by ``{"path": ...}`` read from the data
  model (relative paths inside a template, against the item);
* inputs: ``Name: [Ada]`` (``TextField``, ``DateTimeInput``, ``Slider``), ``[x] label``
  (``CheckBox``), ``label: (•) a ( ) b`` (``ChoicePicker``);
* ``Button``: ``[ label ] → action`` (its child drawn inline);
* layouts: ``Row`` on one line when its children are short (`` │ `` between them), otherwise
  stacked like ``Column``, ``List`` and ``Card`` (a ``┆`` rail), ``children: {componentId, path}``
  repeated once per item of the array at ``path``; ``Tabs`` by title, ``Modal`` by its entry point;
* anything else: its name, its text-like props, its children.

A child that has not arrived yet (a surface still streaming) is ``…id``; depth is capped at
:data:`MAX_SURFACE_DEPTH` (so a reference cycle ends). Every line is cut to ``width``. Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..protocol.pointer import pointer_tokens

__all__ = ["MAX_SURFACE_DEPTH", "fold_surfaces", "surface_lines"]

#: Deepest component nesting drawn (a deeper tree, or a reference cycle, shows ``…`` there).
MAX_SURFACE_DEPTH: Final = 24

_OPS: Final = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")
_HEADINGS: Final = {"h1": "# ", "h2": "## ", "h3": "### ", "h4": "#### ", "h5": "##### "}
_TEXT_PROPS: Final = ("text", "label", "value", "name", "description", "url", "title")
#: A Row whose children are at most this many lines each is drawn on one line.
_ROW_CELL_LINES: Final = 3


def _plain(line: str) -> str:
    return line.strip().removeprefix("┆").strip().lstrip("#").strip()


def _surface_id(op: Mapping[str, Any]) -> str | None:
    for key in _OPS:
        body = op.get(key)
        if isinstance(body, dict) and isinstance(body.get("surfaceId"), str):
            return str(body["surfaceId"])
    return None


def _set(data: Any, path: str, value: Any) -> Any:
    tokens = pointer_tokens(path) if path not in ("", "/") else []
    if not tokens:
        return value
    root = data if isinstance(data, dict) else {}
    node = root
    for token in tokens[:-1]:
        if not isinstance(node.get(token), dict):
            node[token] = {}
        node = node[token]
    node[tokens[-1]] = value
    return root


def _get(data: Any, path: str) -> Any:
    node = data
    for token in pointer_tokens(path) if path not in ("", "/") else []:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def fold_surfaces(operations: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The surfaces the messages leave: ``{surfaceId: {"catalogId", "components": {id: component},
    "data"}}`` in creation order (a deleted surface is gone; malformed messages are skipped)."""
    surfaces: dict[str, dict[str, Any]] = {}
    for op in operations:
        if not isinstance(op, dict):
            continue
        sid = _surface_id(op)
        if sid is None:
            continue
        if "deleteSurface" in op:
            surfaces.pop(sid, None)
            continue
        surface = surfaces.setdefault(sid, {"catalogId": None, "components": {}, "data": {}})
        if "createSurface" in op:
            surface["catalogId"] = op["createSurface"].get("catalogId")
        update = op.get("updateComponents")
        if isinstance(update, dict) and isinstance(update.get("components"), list):
            for component in update["components"]:
                if isinstance(component, dict) and isinstance(component.get("id"), str):
                    surface["components"][component["id"]] = component
        data = op.get("updateDataModel")
        if isinstance(data, dict):
            path = data.get("path") if isinstance(data.get("path"), str) else "/"
            surface["data"] = _set(surface["data"], str(path), data.get("value"))
    return surfaces


class _Drawer:
    def __init__(self, components: Mapping[str, Any], data: Any) -> None:
        self.components = components
        self.data = data

    def value(self, value: Any, scope: str) -> Any:
        if isinstance(value, dict) and isinstance(value.get("path"), str):
            return _get(self.data, self.absolute(value["path"], scope))
        return value

    def text(self, value: Any, scope: str) -> str:
        v = self.value(value, scope)
        if v is None:
            return ""
        return v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)

    @staticmethod
    def absolute(path: str, scope: str) -> str:
        return path if path.startswith("/") else f"{scope.rstrip('/')}/{path}"

    def children(self, c: Mapping[str, Any], scope: str) -> list[tuple[str, str]]:
        kids = c.get("children")
        out: list[tuple[str, str]] = []
        if isinstance(kids, list):
            out = [(str(k), scope) for k in kids]
        elif isinstance(kids, dict) and isinstance(kids.get("componentId"), str) and isinstance(kids.get("path"), str):
            path = self.absolute(kids["path"], scope)
            items = _get(self.data, path)
            if isinstance(items, list):
                out = [(kids["componentId"], f"{path}/{i}") for i in range(len(items))]
        for key in ("child", "entryPointChild"):
            if isinstance(c.get(key), str):
                out.append((c[key], scope))
        return out

    def inline(self, cid: str, scope: str, depth: int) -> str:
        """A component as one line (a button's label, a row's cell): its lines joined, rails and
        heading marks left out."""
        return " ".join(_plain(line) for line in self.draw(cid, scope, depth))

    def draw(self, cid: str, scope: str, depth: int) -> list[str]:
        c = self.components.get(cid)
        if c is None:
            return [f"…{cid}"]
        if depth > MAX_SURFACE_DEPTH:
            return [f"… {cid} (deeper than {MAX_SURFACE_DEPTH})"]
        kind = str(c.get("component"))
        label = self.text(c.get("label"), scope)
        if kind == "Text":
            return [_HEADINGS.get(str(c.get("variant")), "") + self.text(c.get("text"), scope)]
        if kind in ("TextField", "DateTimeInput"):
            return [f"{label or kind}: [{self.text(c.get('value'), scope) or ' '}]"]
        if kind == "Slider":
            return [f"{label or 'Slider'}: [{self.text(c.get('value'), scope)}] ({c.get('min', 0)}–{c.get('max', '?')})"]
        if kind == "CheckBox":
            return [f"[{'x' if self.value(c.get('value'), scope) is True else ' '}] {label}"]
        if kind == "ChoicePicker":
            chosen = self.value(c.get("value"), scope)
            chosen = chosen if isinstance(chosen, list) else []
            options = [o for o in c.get("options") or [] if isinstance(o, dict)]
            marks = "  ".join(f"({'•' if o.get('value') in chosen else ' '}) {self.text(o.get('label'), scope)}"
                              for o in options)
            return [f"{label + ': ' if label else ''}{marks}"]
        if kind == "Button":
            child = self.inline(str(c["child"]), scope, depth + 1) if isinstance(c.get("child"), str) else ""
            action = c.get("action")
            event = action.get("event") if isinstance(action, dict) else None
            name = event.get("name") if isinstance(event, dict) else None
            return [f"[ {child} ]" + (f" → {name}" if isinstance(name, str) else "")]
        if kind == "Divider":
            return ["────────"]
        if kind == "Icon":
            return [f"({self.text(c.get('name'), scope)})"]
        if kind in ("Image", "Video", "AudioPlayer"):
            desc = self.text(c.get("description"), scope)
            return [f"[{kind.lower()}{': ' + desc if desc else ''}] {self.text(c.get('url'), scope)}".rstrip()]
        kids = self.children(c, scope)
        if kind == "Row":
            cells = [self.draw(k, s, depth + 1) for k, s in kids]
            if all(len(cell) <= _ROW_CELL_LINES for cell in cells):
                return [" │ ".join(" ".join(_plain(line) for line in cell) for cell in cells)]
        if kind == "Tabs":
            out: list[str] = []
            for tab in c.get("tabItems") or []:
                if isinstance(tab, dict):
                    out.append(f"▸ {self.text(tab.get('title'), scope)}")
                    if isinstance(tab.get("child"), str):
                        out.extend("  " + line for line in self.draw(tab["child"], scope, depth + 1))
            return out
        head: list[str] = []
        if kind not in ("Column", "List", "Card", "Row"):
            props = [f"{k}={self.text(c[k], scope)!r}" for k in _TEXT_PROPS if k in c]
            head = [" ".join([kind, *props])]
        rail = "┆ " if kind == "Card" else ("  " if head else "")
        body = [rail + line for k, s in kids for line in self.draw(k, s, depth + 1)]
        return head + body


def surface_lines(operations: Sequence[Any], width: int) -> list[str]:
    """Every surface of ``operations`` drawn as text lines (see the module docstring), each at most
    ``width`` characters; a surface heads its tree with its id."""
    out: list[str] = []
    for sid, surface in fold_surfaces(operations).items():
        out.append(f"{sid}:")
        drawer = _Drawer(surface["components"], surface["data"])
        if "root" not in surface["components"] and surface["components"]:
            out.append("  (no root yet)")
        elif surface["components"]:
            out.extend("  " + line for line in drawer.draw("root", "/", 0))
    return [line if len(line) <= width else line[: max(width - 1, 1)] + "…" for line in out]
