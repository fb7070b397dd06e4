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

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import msgspec

from ..jsonstream import PatchStream
from ..protocol.errors import LimitExceededError, RemoteInputError, UsageError
from ..protocol.pointer import pointer_tokens

__all__ = [
    "GenUILimitError",
    "GenUISpecError",
    "GenUIStream",
    "MAX_SPEC_DEPTH",
    "MAX_SPEC_NODES",
    "UIChild",
    "UINode",
    "UnknownComponentError",
    "genui_spec_schema",
    "structural_pieces",
    "tree_document",
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

    ``id`` is the node's identity: its index path from the root (``"0/2/1"``; a
    single root node is ``"0"``), known the moment the node opens and never
    changed -- a renderer keys the node by it (React ``key={node.id}``). ``key``
    is the model's own ``key`` (``$key``) once it is complete, else ``None``: it
    may arrive after the props (JSON members come in any order), so it is data,
    checked unique among siblings, never the identity. ``pointer`` is where the
    node sits in the spec; ``done`` is False only in a streaming snapshot, while
    the node's JSON is still open.
    """

    component: str
    props: dict[str, Any]
    children: tuple[UIChild, ...]
    id: str
    key: str | None = None
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

    def children(self, items: Any, pointer: str, depth: int, id_path: str) -> tuple[UIChild, ...]:
        if not isinstance(items, list):
            raise GenUISpecError(f"{pointer}: children must be a list of nodes", pointer=pointer)
        out: list[UIChild] = []
        keys: set[str] = set()
        for i, item in enumerate(items):
            child = self.node(item, f"{pointer}/{i}", depth, f"{id_path}/{i}" if id_path else str(i))
            if child is None:
                continue
            if isinstance(child, UINode) and child.key is not None:
                if child.key in keys:
                    raise GenUISpecError(f"{pointer}/{i}: duplicate key {child.key!r} among siblings",
                                         pointer=f"{pointer}/{i}/key")
                keys.add(child.key)
            out.append(child)
        return tuple(out)

    def node(self, value: Any, pointer: str, depth: int, node_id: str) -> UIChild | None:
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
        if flat and "component" in value:
            raise GenUISpecError(f"node at {pointer}: has both 'component' and '$type'", pointer=pointer)
        name = value[name_member]
        fallback_for = self.check_name(name, pointer, name_member)
        key = _node_key(value, pointer, key_member, is_done)
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
                                                                 node_id)
        return UINode(
            component=self.fallback if fallback_for is not None else name,  # type: ignore[arg-type]
            props=props,
            children=children,
            id=node_id,
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


def _node_key(value: Mapping[str, Any], pointer: str, member: str,
             is_done: Callable[[str], bool] | None = None) -> str | None:
    """The node's own key as a string (``None`` when it has none, or while it still grows).

    Raises :class:`GenUISpecError` for a key that is not a string or an integer.
    """
    key = value.get(member)
    if key is None or (is_done is not None and not is_done(f"{pointer}/{member}")):
        return None
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise GenUISpecError(f"{pointer}/{member}: must be a string or an integer", pointer=f"{pointer}/{member}")
    return str(key)


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
    ``props`` are free-form, so :func:`~agui_engine.genui.components.to_strict_schema`
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
                            "key": {"type": ["string", "integer"], "description": "A name for the node, unique among its siblings."},
                        },
                        "required": ["component"],
                    },
                ]
            }
        },
    }


def tree_document(root: Iterable[UIChild]) -> dict[str, Any]:
    """The JSON form of a (partial) tree, as :attr:`GenUIStream.tree_ops` build it.

    ``{"root": [node, ...]}`` where a node is text or ``{"id", "component", "props",
    "children", "done"}`` plus ``"key"`` once the model's key is complete and
    ``"fallbackFor"`` when the fallback renders it. The props are copies.
    """
    return {"root": [_node_json(child) for child in root]}


def _node_json(child: UIChild) -> Any:
    if isinstance(child, str):
        return child
    out: dict[str, Any] = {"id": child.id, "component": child.component, "props": copy.deepcopy(child.props),
                           "children": [_node_json(c) for c in child.children], "done": child.done}
    if child.key is not None:
        out["key"] = child.key
    if child.fallback_for is not None:
        out["fallbackFor"] = child.fallback_for
    return out


#: Where a piece of the input ends (see :func:`structural_pieces`).
_CUT_AFTER: Final = re.compile(r'[",}]')
_CUT_AFTER_RAW: Final = re.compile(rb'[",}]')


def structural_pieces(chunk: str | bytes) -> list[Any]:
    """``chunk`` cut after every ``"``, ``,`` and ``}``: the characters at which a name, a key or a
    node can complete. Following the parse piece by piece makes what the stream sees -- which
    node is named, refused or closed first -- the same for every split of the input, byte at a time
    included (the parser's status is read after each piece, never after text beyond the event).
    (In UTF-8 these bytes never occur inside a multi-byte character.)"""
    pattern = _CUT_AFTER if isinstance(chunk, str) else _CUT_AFTER_RAW
    ends = [m.end() for m in pattern.finditer(chunk)]  # type: ignore[arg-type]
    if not ends:
        return [chunk]
    starts = [0, *ends]
    if ends[-1] != len(chunk):
        ends.append(len(chunk))
    return [chunk[a:b] for a, b in zip(starts, ends)]


def _without(prefix: str | None, value: Any) -> Any:
    """``value`` without members whose name starts with ``prefix``, at any depth (a copy when needed)."""
    if prefix is None:
        return value
    if isinstance(value, dict):
        return {k: _without(prefix, v) for k, v in value.items() if not k.startswith(prefix)}
    if isinstance(value, list):
        return [_without(prefix, v) for v in value]
    return value


#: Node members whose second occurrence is refused (a prop of a flat node named ``props`` aside).
_STRUCTURAL: Final = frozenset({"component", "$type", "key", "$key", "props", "children"})


class _List:
    """A list of nodes: ``/root`` when it is a list, a node's ``children``, or the one-slot list of a
    single root node. ``wire`` is its pointer in the tree document once its owner is shown."""

    __slots__ = ("id_prefix", "keys", "last", "next", "owner", "raw", "wire")

    def __init__(self, raw: str, wire: str | None, id_prefix: str, owner: _Node | None) -> None:
        self.raw = raw
        self.wire = wire
        self.id_prefix = id_prefix
        self.owner = owner
        self.next = 0  # the tree index the next shown child gets (nulls and held-back nodes take none)
        self.keys: set[str] = set()
        self.last: _Node | None = None  # its last component child

    def child_id(self, index: str) -> str:
        return f"{self.id_prefix}/{index}" if self.id_prefix else index


class _Node:
    """A component node of the spec being parsed (see :class:`GenUIStream`)."""

    __slots__ = ("depth", "done_sent", "fallback_for", "flat", "id", "key_sent", "list", "name", "raw", "seen",
                 "wire")

    def __init__(self, raw: str, node_id: str, depth: int, parent: _List) -> None:
        self.raw = raw
        self.id = node_id
        self.depth = depth
        self.list = parent
        self.flat: bool | None = None  # None until its name is complete (the node is "named")
        self.name = ""
        self.fallback_for: str | None = None
        self.wire: str | None = None  # its pointer in the tree document once shown
        self.key_sent = False
        self.done_sent = False
        #: Which of ``component``, ``$type``, ``key``, ``$key`` have begun (from the ops: the
        #: parser is asked about a member only once it exists).
        self.seen: set[str] = set()


#: The last characters of a structural piece after which a node can be named, keyed or closed.
_EVENT_ENDS: Final = frozenset({'"', ",", "}", b'"', b",", b"}"})

#: The members that name or key a node.
_NAMING: Final = frozenset({"component", "$type", "key", "$key"})


class GenUIStream:
    """Validate and render a spec while its JSON streams in.

    ``feed(chunk)`` -> nodes completed by the chunk; ``close()`` -> the last ones,
    after validating the whole spec into :attr:`tree`; :meth:`snapshot` -> the
    partial tree; :attr:`tree_ops` -> the JSON Patch operations the last call
    made to the tree document (:func:`tree_document` of the snapshot).

    ``parser``: a :class:`~agui_engine.jsonstream.PatchStream` (``emit_root=False``,
    ``append_strings=True``) that the caller feeds itself, handing its operations to
    :meth:`follow` (the UI-spec tool parses its arguments once, for the wire and the
    tree alike). ``report_completed=False``: ``feed`` / ``follow`` return no nodes (building
    them costs a walk of each completed node). ``append_strings`` is about :attr:`tree_ops`: ``False`` sends a growing
    string as ``replace`` of the whole string (strict RFC 6902; quadratic bytes).
    ``reserved_prefix``: members whose name starts with it are not part of the spec,
    at any depth (a tool's ``_tambo_*`` standard parameters).

    Theory of operation: the tokenizer's operations arrive in document order. A
    node is tracked from its ``{`` (``_Node``, identity = its index path, fixed
    there); it is *shown* -- one ``add`` of the whole node with its props and
    children so far -- once its name string is complete and allowed and its
    parent is shown, at the next free index of its parent's ``children`` in the
    tree document (nulls take none; JSON is sequential, so every earlier sibling
    has been shown or refused by then). After that each operation inside it is
    re-rooted (``/root/0/children/1/props/title`` -> ``/root/0/children/1/props/title``
    in the tree's own numbering; a flat node's member ``/x`` -> ``/props/x``); its
    ``key`` is added when complete, its ``done`` replaced by ``true`` when its
    ``}`` arrives. Text children are added when they begin and grow with the
    tokenizer's own ``append`` (or ``replace``). Nothing in the tree document is
    ever moved, removed or re-keyed, so a renderer keeps every node mounted.
    Per chunk the work is the chunk's operations times the nesting depth, plus
    the copy of a node when it is shown (once per node).

    Raises what :func:`validate_spec` raises (a duplicate ``root``, ``component``,
    ``props`` or ``children`` member too, which a whole-document parser would
    silently resolve), and :class:`~agui_engine.jsonstream.JSONStreamError` for
    malformed JSON. After an error every call raises it again.
    """

    __slots__ = ("_append", "_builder", "_closed", "_completed", "_count", "_error", "_fallback", "_last", "_lists",
                 "_names", "_nodes", "_open", "_parser", "_report", "_reserved", "_root", "_texts", "tree",
                 "tree_ops")

    def __init__(self, allowlist: Mapping[str, Any] | Iterable[Any], *, fallback: str | None = None,
                 parser: PatchStream | None = None, reserved_prefix: str | None = None,
                 append_strings: bool = True, report_completed: bool = True) -> None:
        self._names = _names(allowlist)
        self._fallback = fallback
        self._builder = _Builder(self._names, fallback)
        if parser is None:
            parser = PatchStream(emit_root=False, append_strings=True)
        elif not parser.append_strings:
            # in append mode every ``replace`` is a duplicate member, which is how they are found
            raise UsageError("GenUIStream needs a PatchStream with append_strings=True")
        self._parser = parser
        self._append = bool(append_strings)
        self._report = bool(report_completed)
        self._reserved = None if reserved_prefix is None else "/" + reserved_prefix
        self._lists: dict[str, _List] = {}
        self._nodes: dict[str, _Node] = {}
        #: Text children: raw pointer -> tree pointer (None while the parent is held back).
        self._texts: dict[str, str | None] = {}
        #: Nodes whose JSON is still open, or whose name is not complete; outermost first.
        self._open: list[_Node] = []
        self._last: tuple[str, _Node | None, str] = ("", None, "")  # the last op's owner lookup
        self._count = 0
        self._completed: list[UINode] = []
        self._root = False  # the tree document has its root list
        self._closed = False
        self._error: Exception | None = None
        #: The operations on the tree document made by the last feed / follow / close.
        self.tree_ops: list[dict[str, Any]] = []
        #: The validated tree after :meth:`close`.
        self.tree: tuple[UIChild, ...] | None = None

    # ------------------------------------------------------------------ public API

    def feed(self, chunk: str | bytes) -> list[UINode]:
        """The nodes the chunk completed, innermost first. After an error, raises it again."""
        completed: list[UINode] = []
        ops: list[dict[str, Any]] = []
        for piece in structural_pieces(chunk):
            self._check()
            try:
                raw = self._parser.feed(piece)
            except RemoteInputError as exc:
                self._error = exc
                raise
            completed += self.follow(raw, end=piece[-1:])
            ops += self.tree_ops
        self.tree_ops = ops
        completed.sort(key=lambda n: -n.pointer.count("/"))
        return completed

    def follow(self, ops: list[dict[str, Any]], *, end: str | bytes | None = None) -> list[UINode]:
        """Take the parser's operations for one chunk (when the caller feeds the parser itself).

        ``end``: the chunk was one of :func:`structural_pieces` and this is its last
        character. Only the innermost open node can then have been named or keyed (at a
        ``"``, or a ``,`` / ``}`` after a number) or closed (at a ``}``), so only it is
        looked at, and only then. ``None``: every open node is looked at."""
        self._check()
        self.tree_ops = []
        try:
            for op in ops:
                self._op(op)
            if self._open:
                if end is None:
                    self._settle()
                elif end in _EVENT_ENDS:
                    self._settle(self._open[-1].raw, closing=end in (b"}", "}"))
        except RemoteInputError as exc:
            self._error = exc
            raise
        completed, self._completed = self._completed, []
        completed.sort(key=lambda n: -n.pointer.count("/"))  # children before their parents
        return completed

    def close(self) -> list[UINode]:
        """End of the spec: the last completed nodes; validates the whole spec into :attr:`tree`."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        try:
            ops = self._parser.close()
        except RemoteInputError as exc:
            self._error = exc
            raise
        return self.finish(ops)

    def finish(self, ops: list[dict[str, Any]] = []) -> list[UINode]:  # noqa: B006 - never mutated
        """End of the spec when the caller closed the parser itself (``ops``: what its ``close()`` returned)."""
        last = self.follow(ops)
        self._closed = True
        try:
            self.tree = validate_spec(self._spec(), self._names, fallback=self._fallback)
        except RemoteInputError as exc:
            self._error = exc
            raise
        return last

    def snapshot(self) -> tuple[UIChild, ...]:
        """The tree as far as it has arrived (nodes with ``done=False`` are still streaming)."""
        return _Builder(self._names, self._fallback, self._done).root(self._spec())

    @property
    def document(self) -> dict[str, Any]:
        """:func:`tree_document` of :meth:`snapshot`: what applying every :attr:`tree_ops` so far to
        ``{}`` gives (``{}`` until the spec's ``root`` begins)."""
        return tree_document(self.snapshot()) if self._root else {}

    # ------------------------------------------------------------------ internals

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("GenUIStream.feed() after close()")

    def _spec(self) -> Any:
        return _without(self._reserved[1:] if self._reserved else None, self._parser.value)

    def _done(self, pointer: str) -> bool:
        return self._parser.status_of(pointer) == "done"

    def _value_at(self, pointer: str) -> Any:
        node = self._parser.value
        for token in pointer_tokens(pointer):
            node = node[int(token)] if isinstance(node, list) else node[token]
        return node

    def _emit(self, op: str, path: str, value: Any) -> None:
        self.tree_ops.append({"op": op, "path": path, "value": value})

    def _grow(self, op: str, path: str, raw: str, value: Any) -> None:
        """An operation inside a shown node or text, re-rooted at ``path`` (strict mode: an
        ``append`` becomes the ``replace`` of the whole string, read from the parse)."""
        if op == "append" and not self._append:
            op, value = "replace", self._value_at(raw)
        self.tree_ops.append({"op": op, "path": path, "value": value})

    def _count_one(self, pointer: str) -> None:
        self._count += 1
        if self._count > MAX_SPEC_NODES:
            raise GenUILimitError(f"{pointer}: the spec has more than {MAX_SPEC_NODES} nodes (MAX_SPEC_NODES)",
                                  pointer=pointer)

    def _op(self, op: dict[str, Any]) -> None:
        path = op["path"]
        if not path.startswith("/root") or (self._reserved is not None and self._reserved in path):
            return
        texts = self._texts
        if path in texts:  # a text child growing
            if op["op"] != "append":
                raise self._duplicate(path)
            wire = texts[path]
            if wire is not None:
                self._grow("append", wire, path, op["value"])
            return
        kind, value = op["op"], op.get("value")
        if path == "/root":
            self._on_root(kind, value)
            return
        parent, _, last = path.rpartition("/")
        lst = self._lists.get(parent)
        if lst is not None:
            self._on_child(lst, path, kind, value)
            return
        cached, node, rel = self._last
        if cached != path:
            node, rel = self._owner(path)
            self._last = (path, node, rel)
        if node is not None:
            self._on_member(node, rel, kind, value, path)

    def _owner(self, path: str) -> tuple[_Node | None, str]:
        """The innermost node ``path`` is inside, and the path relative to it."""
        up = path
        nodes = self._nodes
        while up:
            up = up.rpartition("/")[0]
            node = nodes.get(up)
            if node is not None:
                return node, path[len(up):]
        return None, ""

    def _duplicate(self, pointer: str) -> GenUISpecError:
        return GenUISpecError(f"{pointer}: a duplicate member (a whole-document parser would keep only the last)",
                              pointer=pointer)

    def _start_root(self) -> None:
        if not self._root:
            self._root = True
            self._emit("add", "/root", [])

    def _on_root(self, kind: str, value: Any) -> None:
        if kind != "add":
            raise self._duplicate("/root")
        self._start_root()
        if isinstance(value, list):
            self._lists["/root"] = _List("/root", "/root", "", None)
        elif value is not None:
            # a single root node or text: the only child of a one-slot list shown as /root/0
            self._on_child(_List("", "/root", "", None), "/root", kind, value, node_id="0")

    def _on_child(self, lst: _List, path: str, kind: str, value: Any, node_id: str | None = None) -> None:
        if kind != "add":  # array elements are only ever added (strings grow at their own path, above)
            raise self._duplicate(path)
        if value is None:
            return  # renders nothing, takes no index
        previous = lst.last
        if previous is not None and previous.raw in self._nodes and (not previous.done_sent or previous.flat is None):
            # the previous sibling is complete: shown (or refused) before this one takes an index
            self._settle(previous.raw)
        self._count_one(path)
        if isinstance(value, str):
            wire = None
            if lst.wire is not None:
                wire = f"{lst.wire}/{lst.next}"
                lst.next += 1
                self._emit("add", wire, value)
            self._texts[path] = wire
            return
        if not isinstance(value, dict):
            raise GenUISpecError(f"{path}: a node must be text or an object, got {_json_type(value)}", pointer=path)
        depth = 0 if lst.owner is None else lst.owner.depth + 1
        if depth >= MAX_SPEC_DEPTH:
            raise GenUILimitError(f"{path}: components nest deeper than {MAX_SPEC_DEPTH} (MAX_SPEC_DEPTH)",
                                  pointer=path)
        node = _Node(path, node_id if node_id is not None else lst.child_id(path.rpartition("/")[2]), depth, lst)
        self._nodes[path] = node
        self._open.append(node)
        lst.last = node

    def _on_member(self, node: _Node, rel: str, kind: str, value: Any, raw: str) -> None:
        token, sep, rest = rel[1:].partition("/")
        pointer = node.raw + "/" + token
        flat = node.flat
        if not sep and token in _NAMING:
            node.seen.add(token)
        if kind == "replace" and not sep and token in _STRUCTURAL and not (flat and token == "props"):
            # (the parser appends to growing strings, so a replace is always a second occurrence)
            raise self._duplicate(pointer)
        if token == "children":
            if sep:
                return  # inside the list: only its elements matter, and they are handled above
            if isinstance(value, list):
                wire = node.wire + "/children" if node.wire is not None else None
                self._lists[pointer] = _List(pointer, wire, node.id, node)
            elif value is not None:
                raise GenUISpecError(f"{pointer}: children must be a list of nodes", pointer=pointer)
            return
        if flat is None:
            return  # not named yet: its members are copied when it is shown
        if token == ("component" if flat else "$type"):
            raise GenUISpecError(f"node at {node.raw}: has both 'component' and '$type'", pointer=node.raw)
        wire = node.wire
        if flat:
            if token.startswith("$"):
                return  # $key (added when complete), $action and other directives
            if wire is not None:
                self._grow(kind, f"{wire}/props/{rel[1:]}", raw, value)
            return
        if token != "props":
            return  # key (added when complete) and members a node does not have
        if not sep:
            if value is not None and not isinstance(value, dict):
                raise GenUISpecError(f"{pointer}: must be an object, got {_json_type(value)}", pointer=pointer)
            return  # the node in the tree has its props object already
        if wire is not None:
            self._grow(kind, f"{wire}/props/{rest}", raw, value)

    def _settle(self, scope: str | None = None, closing: bool = True) -> None:
        """Name, show, key and close the open nodes as far as the parser has seen (only ``scope``
        and what is inside it, when given; their end only when ``closing``); completed nodes go
        to ``_completed``."""
        completed = self._completed
        still: list[_Node] = []
        inside = f"{scope}/"
        for node in self._open:
            if scope is not None and node.raw != scope and not node.raw.startswith(inside):
                still.append(node)
                continue
            # The parse's value is read only when something happens to the node (it is named, its
            # key or its JSON completes): reading it joins the open string, and the open string may
            # be a long prop still growing. Until then the parser's status answers.
            status = self._parser.status_of
            raw = node.raw
            done = closing and status(raw) == "done"
            seen = node.seen
            if node.flat is None:
                flat = "$type" in seen
                member = "$type" if flat else "component"
                if member in seen and status(f"{raw}/{member}") == "done":
                    value = self._value_at(raw)
                    if flat and "component" in value:
                        raise GenUISpecError(f"node at {raw}: has both 'component' and '$type'", pointer=raw)
                    # fail fast: before the node's props arrive
                    node.fallback_for = self._builder.check_name(value[member], raw, member)
                    node.name = self._fallback if node.fallback_for is not None else value[member]  # type: ignore[assignment]
                    node.flat = flat
                    if node.list.wire is not None:
                        wire = f"{node.list.wire}/{node.list.next}"
                        node.list.next += 1
                        self._emit("add", wire, self._show(node, wire, value))
                elif done:
                    raise GenUISpecError(f"node at {raw}: 'component' is missing", pointer=raw)
            key_member = "$key" if node.flat else "key"
            if node.wire is not None and not node.key_sent and key_member in seen \
                    and status(f"{raw}/{key_member}") == "done":
                key = self._key(node, self._value_at(raw))
                if key is not None:
                    self._emit("add", node.wire + "/key", key)
            if done:
                if node.wire is not None and not node.done_sent:
                    node.done_sent = True
                    self._emit("replace", node.wire + "/done", True)
                if self._report:
                    built = self._builder.node(_without(self._reserved[1:] if self._reserved else None,
                                                        self._value_at(raw)), raw, node.depth, node.id)
                    self._builder.count = 0
                    if isinstance(built, UINode):
                        completed.append(built)
            else:
                still.append(node)
        self._open = still

    def _key(self, node: _Node, value: Mapping[str, Any]) -> str | None:
        """The node's key once complete (checked unique among its siblings), else None."""
        key = _node_key(value, node.raw, "$key" if node.flat else "key", self._done)
        if key is None:
            return None
        node.key_sent = True
        if key in node.list.keys:
            pointer = f"{node.raw}/{'$key' if node.flat else 'key'}"
            raise GenUISpecError(f"{node.raw}: duplicate key {key!r} among siblings", pointer=pointer)
        node.list.keys.add(key)
        return key

    def _show(self, node: _Node, wire: str, value: Mapping[str, Any]) -> dict[str, Any]:
        """The node as it enters the tree document (its props and shown children so far, copied);
        records where it and its descendants are."""
        node.wire = wire
        reserved = self._reserved[1:] if self._reserved else None
        if node.flat:
            props: Any = {k: v for k, v in value.items() if not k.startswith("$") and k != "children"}
        else:
            props = value.get("props")
            if props is None:
                props = {}
            elif not isinstance(props, dict):
                raise GenUISpecError(f"{node.raw}/props: must be an object, got {_json_type(props)}",
                                     pointer=node.raw + "/props")
        out: dict[str, Any] = {"id": node.id, "component": node.name, "props": copy.deepcopy(_without(reserved, props)),
                               "children": [], "done": False}
        if node.fallback_for is not None:
            out["fallbackFor"] = node.fallback_for
        key = self._key(node, value)
        if key is not None:
            out["key"] = key
        lst = self._lists.get(node.raw + "/children")
        if lst is not None:
            lst.wire = wire + "/children"
            children = out["children"]
            for index, item in enumerate(value["children"]):
                raw = f"{lst.raw}/{index}"
                if item is None:
                    continue
                child_wire = f"{lst.wire}/{lst.next}"
                if isinstance(item, str):
                    self._texts[raw] = child_wire
                    children.append(item)
                else:
                    child = self._nodes.get(raw)
                    if child is None or child.flat is None:
                        break  # the last child, still without its name: shown when it has one
                    children.append(self._show(child, child_wire, item))
                lst.next += 1
        if self._done(node.raw):
            out["done"] = node.done_sent = True
        return out
