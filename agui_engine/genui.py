"""The generative UI spec: a tree of components the model composes, checked against an allowlist.

Theory of operation
-------------------
A spec is ``{"root": node | [node, ...]}`` where a node is either text (a JSON
string) or ``{"component": name, "props": {...}, "children": [node, ...],
"key": "..."}`` (``props``, ``children`` and ``key`` optional) -- assistant-ui's
``GenerativeUISpec``. assistant-ui's newer flat node shape is accepted too:
``{"$type": name, "$key": ..., "children": [...], ...props}`` (every key not
starting with ``$`` other than ``children`` is a prop). The allowlist of component names is the security
boundary: the model may compose only what the front end can render.

:func:`validate_spec` checks a whole spec and returns the normalised tree of
:class:`UINode` (and ``str`` for text): every node has ``props`` (``{}`` if
absent), ``children`` and a ``key`` -- the node's own ``key`` or, when it has
none, its index path from the root (``"0/2/1"``). ``null`` children render
nothing and are dropped. Errors say where, as a JSON Pointer into the spec:

* :class:`UnknownComponentError` -- a name not in the allowlist (``component
  "Chart" at /root/children/1 is not in the generative UI allowlist``), unless a
  ``fallback`` name is given: the node is then rendered by the fallback
  component with ``fallback_for`` set to the original name;
* :class:`GenUISpecError` -- a malformed node (no or non-string ``component``,
  ``props`` not an object, ``children`` not a list, a number where a node should
  be, duplicate sibling keys);
* :class:`GenUILimitError` -- deeper than :data:`MAX_SPEC_DEPTH` or more than
  :data:`MAX_SPEC_NODES` nodes.

:class:`GenUIStream` renders a spec while it streams, through one
:class:`~agui_engine.jsonstream.PatchStream`: ``feed(chunk)`` returns the nodes
that *completed* in that chunk (children before their parents: completed nodes
first), checked as soon as their component name is complete (an unknown name
fails fast, before the node's props arrive). :meth:`GenUIStream.snapshot` gives
the partial tree for rendering: a node appears once its ``component`` string
(and its ``key``, if it has one) is complete, with ``done=False`` and its props
and children as far as they have arrived; text appears as it grows. Work per
chunk is proportional to the chunk plus the nesting depth, not to the tree.

No IO happens here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import msgspec

from .errors import LimitExceededError, RemoteInputError, UsageError
from .jsonstream import PatchStream
from .pointer import pointer_tokens

__all__ = [
    "GenUILimitError",
    "GenUISpecError",
    "GenUIStream",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_NODES",
    "UIChild",
    "UINode",
    "UnknownComponentError",
    "validate_spec",
    "validate_tree",
]

#: Deepest component nesting accepted (text leaves do not count). assistant-ui's
#: renderer stops at 64 (``MAX_DEPTH``); real layouts nest fewer than 15 levels,
#: and each level is a nested element in the browser, where very deep trees make
#: layout slow and recursion in renderers unsafe.
MAX_SPEC_DEPTH: Final = 64

#: Most nodes (components and text) in one spec. A screen shows a few hundred
#: elements; 10,000 is far beyond a readable UI, while still bounding the render
#: work a single model answer can demand of a browser.
MAX_SPEC_NODES: Final = 10_000


class GenUISpecError(RemoteInputError):
    """A malformed spec; ``pointer`` is the JSON Pointer of the offending node or member."""

    default_code = "invalid_genui_spec"

    def __init__(self, message: str, *, pointer: str = "", code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.pointer = pointer


class UnknownComponentError(GenUISpecError):
    """A component name that is not in the allowlist; ``component_name`` names it."""

    default_code = "unknown_component"

    def __init__(self, component_name: str, *, pointer: str) -> None:
        super().__init__(
            f"component {component_name!r} at {pointer or '/'} is not in the generative UI allowlist",
            pointer=pointer,
        )
        self.component_name = component_name


class GenUILimitError(GenUISpecError, LimitExceededError):
    """The spec crossed :data:`MAX_SPEC_DEPTH` or :data:`MAX_SPEC_NODES`."""

    default_code = "genui_limit_exceeded"


class UINode(msgspec.Struct, frozen=True, kw_only=True):
    """One validated component node.

    ``pointer`` is where it sits in the spec; ``done`` is False only in a
    streaming snapshot, while the node's JSON is still open.
    """

    component: str
    props: dict[str, Any]
    children: tuple[UIChild, ...]
    key: str
    pointer: str
    done: bool = True
    fallback_for: str | None = None


UIChild = UINode | str


def _names(allowlist: Mapping[str, Any] | Iterable[Any]) -> frozenset[str]:
    if isinstance(allowlist, Mapping):
        names = list(allowlist)
    else:
        names = [getattr(item, "name", item) for item in allowlist]
    if not all(isinstance(n, str) for n in names):
        raise UsageError("the allowlist must hold component names (or components)")
    return frozenset(names)


class _Builder:
    """Validates (part of) a spec value. ``is_done(pointer)`` says whether a value is
    complete; ``None`` means everything is (a whole spec)."""

    __slots__ = ("count", "fallback", "is_done", "names")

    def __init__(
        self, names: frozenset[str], fallback: str | None, is_done: Callable[[str], bool] | None = None
    ) -> None:
        self.names = names
        self.fallback = fallback
        self.is_done = is_done
        self.count = 0

    def check_name(self, name: Any, pointer: str, member: str = "component") -> str | None:
        """``None`` if the allowlist has ``name``; the name itself if the fallback renders it; else raises."""
        if not isinstance(name, str) or not name:
            raise GenUISpecError(f"node at {pointer or '/'}: {member!r} must be a non-empty string",
                                 pointer=f"{pointer}/{member}")
        if name in self.names:
            return None
        if self.fallback is None:
            raise UnknownComponentError(name, pointer=pointer)
        return name

    def children(self, items: Any, pointer: str, depth: int, key_path: str) -> tuple[UIChild, ...]:
        if not isinstance(items, list):
            raise GenUISpecError(f"{pointer}: children must be a list of nodes", pointer=pointer)
        out: list[UIChild] = []
        keys: set[str] = set()
        for i, item in enumerate(items):
            child = self.node(item, f"{pointer}/{i}", depth, f"{key_path}/{i}" if key_path else str(i))
            if child is None:
                continue
            if isinstance(child, UINode):
                if child.key in keys:
                    raise GenUISpecError(f"{pointer}/{i}: duplicate key {child.key!r} among siblings",
                                         pointer=f"{pointer}/{i}/key")
                keys.add(child.key)
            out.append(child)
        return tuple(out)

    def node(self, value: Any, pointer: str, depth: int, key_path: str) -> UIChild | None:
        if value is None:
            return None
        self.count += 1
        if self.count > MAX_SPEC_NODES:
            raise GenUILimitError(f"{pointer}: the spec has more than {MAX_SPEC_NODES} nodes (MAX_SPEC_NODES)",
                                  pointer=pointer)
        if isinstance(value, str):
            return value
        if not isinstance(value, dict):
            raise GenUISpecError(f"{pointer}: a node must be text or an object, got {_json_type(value)}",
                                 pointer=pointer)
        if depth >= MAX_SPEC_DEPTH:
            raise GenUILimitError(f"{pointer}: components nest deeper than {MAX_SPEC_DEPTH} (MAX_SPEC_DEPTH)",
                                  pointer=pointer)
        is_done = self.is_done
        flat = "$type" in value  # assistant-ui's newer shape: {$type, $key, children, ...props}
        name_member, key_member = ("$type", "$key") if flat else ("component", "key")
        if name_member not in value or (is_done is not None and not is_done(pointer + "/" + name_member)):
            if is_done is None:
                raise GenUISpecError(f"node at {pointer}: 'component' is missing", pointer=pointer)
            self.count -= 1
            return None  # held back until its name is complete
        name = value[name_member]
        fallback_for = self.check_name(name, pointer, name_member)
        key = value.get(key_member)
        if key is None:
            key = key_path
        else:
            if is_done is not None and not is_done(pointer + "/" + key_member):
                self.count -= 1
                return None  # a key that is still growing would remount the node
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise GenUISpecError(f"{pointer}/{key_member}: must be a string or an integer",
                                     pointer=f"{pointer}/{key_member}")
            key = str(key)
        if flat:
            props = {k: v for k, v in value.items() if not k.startswith("$") and k != "children"}
        else:
            props = value.get("props", {})
            if props is None:
                props = {}
            if not isinstance(props, dict):
                raise GenUISpecError(f"{pointer}/props: must be an object, got {_json_type(props)}",
                                     pointer=pointer + "/props")
        raw_children = value.get("children")
        children = () if raw_children is None else self.children(raw_children, pointer + "/children", depth + 1,
                                                                 key_path)
        return UINode(
            component=self.fallback if fallback_for is not None else name,  # type: ignore[arg-type]
            props=props,
            children=children,
            key=key,
            pointer=pointer,
            done=True if is_done is None else is_done(pointer),
            fallback_for=fallback_for,
        )

    def root(self, spec: Any) -> tuple[UIChild, ...]:
        if spec is None and self.is_done is not None:
            return ()
        if not isinstance(spec, dict):
            raise GenUISpecError(f"a spec must be an object with 'root', got {_json_type(spec)}", pointer="")
        if "root" not in spec:
            if self.is_done is not None:
                return ()
            raise GenUISpecError("a spec needs 'root'", pointer="/root")
        root = spec["root"]
        if isinstance(root, list):
            return self.children(root, "/root", 0, "")
        node = self.node(root, "/root", 0, "0")
        return () if node is None else (node,)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def validate_spec(
    spec: Any, allowlist: Mapping[str, Any] | Iterable[Any], *, fallback: str | None = None
) -> tuple[UIChild, ...]:
    """Validate a whole ``{"root": ...}`` spec; the root's nodes, normalised.

    ``allowlist``: component names, a mapping keyed by name, or components.
    Raises :class:`UnknownComponentError`, :class:`GenUISpecError`,
    :class:`GenUILimitError` (see the module docstring).
    """
    return _Builder(_names(allowlist), fallback).root(spec)


def validate_tree(
    root: Any, allowlist: Mapping[str, Any] | Iterable[Any], *, fallback: str | None = None
) -> tuple[UIChild, ...]:
    """Like :func:`validate_spec` for a bare root (a node or a list of nodes)."""
    return validate_spec({"root": root}, allowlist, fallback=fallback)


def genui_spec_schema(allowlist: Mapping[str, Any] | Iterable[Any] | None = None) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the spec, ``component`` pinned to the allowlist if given.

    Usable as a tool's parameters when a model should answer with a spec. Its
    ``props`` are free-form, so :func:`~agui_engine.components.to_strict_schema`
    sends such a tool non-strict (and says so). ``spec/schema/genui-spec.schema.json``
    is this function's output without an allowlist.
    """
    name: dict[str, Any] = {"type": "string", "minLength": 1, "description": "A component from the allowlist."}
    if allowlist is not None:
        name = {"type": "string", "enum": sorted(_names(allowlist)), "description": name["description"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Generative UI spec",
        "description": "A tree of components: {root: node | [node, ...]}; a node is text or a component.",
        "type": "object",
        "properties": {
            "root": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "array", "items": {"$ref": "#/$defs/node"}}]},
        },
        "required": ["root"],
        "$defs": {
            "node": {
                "anyOf": [
                    {"type": "string", "description": "Text."},
                    {"type": "null", "description": "Nothing (skipped)."},
                    {
                        "type": "object",
                        "properties": {
                            "component": name,
                            "props": {"type": "object", "description": "The component's props."},
                            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                            "key": {"type": ["string", "integer"], "description": "Stable identity among siblings."},
                        },
                        "required": ["component"],
                    },
                ]
            }
        },
    }


def _key_path(pointer: str) -> str:
    """The default key of the node at ``pointer``: its index path (``/root/1/children/0`` -> ``1/0``)."""
    tokens = pointer_tokens(pointer)[1:]
    indices = [t for t in tokens if t.isdigit()]
    if not tokens or not tokens[0].isdigit():  # a single root node is index 0
        indices.insert(0, "0")
    return "/".join(indices)


class GenUIStream:
    """Validate and render a spec while its JSON streams in (see the module docstring).

    ``feed(chunk)`` -> nodes completed by the chunk; ``close()`` -> the last ones,
    after validating the whole spec; :meth:`snapshot` -> the partial tree.
    Raises what :func:`validate_spec` raises, and
    :class:`~agui_engine.jsonstream.JSONStreamError` for malformed JSON.
    """

    __slots__ = ("_closed", "_error", "_fallback", "_known", "_named", "_names", "_nodes", "_open", "_stream", "tree")

    def __init__(self, allowlist: Mapping[str, Any] | Iterable[Any], *, fallback: str | None = None) -> None:
        self._names = _names(allowlist)
        self._fallback = fallback
        self._stream = PatchStream(emit_root=False)
        #: Node pointers not yet complete, outermost first (they are all ancestors of the parse position).
        self._open: list[str] = []
        #: Pointers of child lists (``/root`` when it is a list, ``.../children``).
        self._known: set[str] = set()
        self._named: set[str] = set()
        self._nodes = 0
        self._closed = False
        self._error: Exception | None = None
        #: The validated tree after :meth:`close`.
        self.tree: tuple[UIChild, ...] | None = None

    def _done(self, pointer: str) -> bool:
        return self._stream.status_of(pointer) == "done"

    def _value_at(self, pointer: str) -> Any:
        node = self._stream.value
        for token in pointer_tokens(pointer):
            node = node[int(token)] if isinstance(node, list) else node[token]
        return node

    def _track(self, ops: list[dict[str, Any]]) -> None:
        for op in ops:
            path, value = op["path"], op.get("value")
            if op["op"] != "add" or not isinstance(value, (dict, list)):
                continue
            parent, _, last = path.rpartition("/")
            is_node = path == "/root" or (parent in self._known and last.isdigit())
            if isinstance(value, list):
                if path == "/root" or (path.endswith("/children") and parent in self._open):
                    self._known.add(path)
                continue
            if is_node:
                self._nodes += 1
                if self._nodes > MAX_SPEC_NODES:
                    raise GenUILimitError(
                        f"{path}: the spec has more than {MAX_SPEC_NODES} nodes (MAX_SPEC_NODES)", pointer=path
                    )
                if path.count("/children/") >= MAX_SPEC_DEPTH:
                    raise GenUILimitError(
                        f"{path}: components nest deeper than {MAX_SPEC_DEPTH} (MAX_SPEC_DEPTH)", pointer=path
                    )
                self._open.append(path)

    def _completed(self) -> list[UINode]:
        done: list[UINode] = []
        still: list[str] = []
        for pointer in self._open:
            if pointer not in self._named:
                node = self._value_at(pointer)
                member = "$type" if "$type" in node else "component"
                if member in node and self._done(f"{pointer}/{member}"):
                    # Fail fast: before the node's props arrive.
                    _Builder(self._names, self._fallback).check_name(node[member], pointer, member)
                    self._named.add(pointer)
            if self._done(pointer):
                node = _Builder(self._names, self._fallback).node(self._value_at(pointer), pointer, pointer.count("/children/"), _key_path(pointer)
                )
                if isinstance(node, UINode):
                    done.append(node)
            else:
                still.append(pointer)
        self._open = still
        done.sort(key=lambda n: -n.pointer.count("/"))  # children before their parents
        return done

    def feed(self, chunk: str | bytes) -> list[UINode]:
        """The nodes the chunk completed, innermost first. After an error, raises it again."""
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("GenUIStream.feed() after close()")
        try:
            self._track(self._stream.feed(chunk))
            return self._completed() if self._open else []
        except RemoteInputError as exc:
            self._error = exc
            raise

    def close(self) -> list[UINode]:
        """End of the spec: the last completed nodes; validates the whole spec into :attr:`tree`."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        try:
            self._track(self._stream.close())
            last = self._completed()
            self.tree = validate_spec(self._stream.value, self._names, fallback=self._fallback)
        except RemoteInputError as exc:
            self._error = exc
            raise
        return last

    def snapshot(self) -> tuple[UIChild, ...]:
        """The tree as far as it has arrived (nodes with ``done=False`` are still streaming)."""
        return _Builder(self._names, self._fallback, self._done).root(self._stream.value)
