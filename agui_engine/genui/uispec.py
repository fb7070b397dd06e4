"""The generative UI spec as a tool: the model composes a tree of allowlisted components, streamed as it types.

Theory of operation
-------------------
:class:`UISpecTool` is one more tool a run offers, named :data:`UI_SPEC_TOOL`
(``render_ui``), beside the ``show_component_<Name>`` tools: its arguments are a
generative UI spec (``{"root": node | [node, ...]}``, :mod:`agui_engine.genui.tree`)
whose schema pins ``component`` to the allowlist (an ``enum``). The decision
loop and the agent loop offer it when they are given one
(``run_decision_loop(..., ui_spec=)``, ``LLMAgent(ui_spec=)``,
``AgentLoop(ui_spec=)``); a call of it -- from a model, or from any agent inside
the agent loop -- goes through :class:`UISpecStream`.

:class:`UISpecStream` is a component stream whose props are the *tree document*
(:func:`~agui_engine.genui.tree.tree_document`): the call is shown as the component
:data:`UI_SPEC_COMPONENT` (``generative-ui``) with the same ``tambo.component.*``
events as any component, so every consumer that builds component props (the
:class:`~agui_engine.protocol.accumulator.Accumulator`, :mod:`agui_engine.loops.thread`, the
JavaScript ``ThreadStore``, the inspector) builds the tree with no code of its own.
The arguments are parsed once, by the call's :class:`~agui_engine.jsonstream.PatchStream`
(which also writes the call's ``TOOL_CALL_ARGS``); its operations go through a
:class:`~agui_engine.genui.tree.GenUIStream` that re-roots them onto the tree:
a node appears whole (``add``) once its name is complete and allowed, with its
identity ``id`` -- its index path, fixed when the node opens -- and is never
moved, removed or re-keyed afterwards (a ``key`` that arrives after the props is
added to the node as data). ``done`` turns true at the node's ``}``.

Refusal: a name that is not in the allowlist (no fallback), or a spec that is
malformed as a spec (a node without ``component``, ``props`` not an object,
duplicate sibling keys, a duplicate member, a limit of :mod:`agui_engine.genui.tree`)
ends the tree at once: ``root`` becomes ``[]`` and ``error`` ``{code, message,
pointer, component?}`` is added (so nothing partial of a refused tree stays on
the screen, and the final document is the same however the arguments were split).
The call itself goes on (its arguments are valid JSON so far) and its tool result
tells the model why, as for props that do not match a component's schema
(:func:`ui_spec_result`). Malformed JSON and oversized arguments end the run like
for any tool (:class:`~agui_engine.loops.tool_calls.ToolCallArgumentsError`). At the end
the whole spec is validated by :func:`~agui_engine.genui.tree.validate_spec` into
:attr:`UISpecStream.tree`; a node whose component is a registered
:class:`~agui_engine.genui.components.Component` has its props checked against its schema
(a mismatch is reported to the model; the node stays shown).

No IO happens here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from ..llm import LLMTool
from ..protocol.errors import UsageError
from ..protocol.events import CustomEvent
from .component_stream import (
    COMPONENT_END,
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
    MAX_COMPONENT_ARGS_CHARS,
    ArgumentStream,
    StatusTracker,
    arguments_parser,
)
from .components import Component, build_llm_tool
from .schemas import STANDARD_PARAMETER_PREFIX
from .tree import (
    GenUISpecError,
    GenUIStream,
    UIChild,
    UINode,
    UnknownComponentError,
    genui_spec_schema,
    structural_pieces,
)

__all__ = [
    "UISpecStream",
    "UISpecTool",
    "UI_SPEC_COMPONENT",
    "UI_SPEC_TOOL",
    "ui_spec_result",
]

#: The tool's name, the same in every run and for every agent.
UI_SPEC_TOOL: Final = "render_ui"

#: ``componentName`` of the ``tambo.component.start`` of a ``render_ui`` call: a front end
#: renders this component's props (``{"root": [...], "error"?: {...}}``) as a tree.
UI_SPEC_COMPONENT: Final = "generative-ui"


class UISpecTool:
    """The ``render_ui`` tool: which components a model may compose (see the module docstring).

    ``allowlist``: component names or :class:`~agui_engine.genui.components.Component` values;
    ``None`` (the default) allows the run's components (the ones offered as
    ``show_component_<Name>``). A name that is a component of the run lends the tool its
    description and its props schema (checked at the end of the call). ``fallback``: a
    component name that renders any name outside the allowlist instead of refusing the
    tree (``fallbackFor`` names the original). Raises :class:`UsageError` for an entry
    that is neither a name nor a component, or an empty name.
    """

    __slots__ = ("_tools", "allowlist", "components", "fallback")

    def __init__(self, allowlist: Iterable[str | Component] | None = None, *, fallback: str | None = None) -> None:
        self.components: dict[str, Component] = {}
        if allowlist is None:
            self.allowlist: tuple[str, ...] | None = None
        else:
            names: list[str] = []
            for entry in allowlist:
                if isinstance(entry, Component):
                    self.components[entry.name] = entry
                    entry = entry.name
                if not isinstance(entry, str) or not entry:
                    raise UsageError(f"a UI spec allowlist holds component names or components, got {entry!r}")
                if entry not in names:
                    names.append(entry)
            self.allowlist = tuple(names)
        if fallback is not None and (not isinstance(fallback, str) or not fallback):
            raise UsageError(f"fallback must be a component name, got {fallback!r}")
        self.fallback = fallback
        self._tools: dict[bool, LLMTool] = {}

    def __repr__(self) -> str:
        return f"UISpecTool(allowlist={self.allowlist!r}, fallback={self.fallback!r})"

    @property
    def names(self) -> tuple[str, ...]:
        """The allowed component names (empty for an unbound ``allowlist=None``)."""
        return self.allowlist or ()

    def for_run(self, components: Sequence[Component]) -> UISpecTool | None:
        """This tool for one run whose components are ``components``; ``None`` when it allows nothing."""
        by_name = {c.name: c for c in components}
        names = self.allowlist if self.allowlist is not None else tuple(by_name)
        if not names:
            return None
        bound = UISpecTool(names, fallback=self.fallback)
        bound.components = {n: self.components.get(n) or by_name[n] for n in names
                            if n in self.components or n in by_name}
        return bound

    def to_llm_tool(self, strict: bool = True) -> LLMTool:
        """The tool as sent to a model (standard parameters added; its free-form props make it
        non-strict, with the reason recorded). Built once per strictness."""
        tool = self._tools.get(strict)
        if tool is None:
            schema = genui_spec_schema(self.names)
            del schema["$schema"], schema["title"]  # keywords some providers refuse in tool parameters
            tool, _ = build_llm_tool(UI_SPEC_TOOL, self.description, schema, strict=strict)
            self._tools[strict] = tool
        return tool

    @property
    def description(self) -> str:
        """What the model reads: what the tool does, and each allowed component."""
        parts = []
        for name in self.names:
            component = self.components.get(name)
            parts.append(f"{name} ({component.description})" if component is not None and component.description
                         else name)
        return (
            "Render a UI on the user's screen, composed from these components: " + ", ".join(parts) + ". "
            'Arguments: {"root": node or [node, ...]}; a node is text, or {"component": name, "props": {...}, '
            '"children": [node, ...], "key": "..."}. Nodes appear on the screen as they are written, in order; '
            "write each node's component first."
        )


def _refusal_json(exc: GenUISpecError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": exc.code, "message": exc.message, "pointer": exc.pointer}
    if isinstance(exc, UnknownComponentError):
        out["component"] = exc.component_name
    return out


class UISpecStream(ArgumentStream):
    """Stream one ``render_ui`` call's tree as ``tambo.component.*`` CUSTOM events.

    ``UISpecStream(tool, *, message_id, component_id, append_strings=True,
    max_chars=MAX_COMPONENT_ARGS_CHARS)``, the interface of
    :class:`~agui_engine.genui.component_stream.ComponentStream`: ``start()``, ``feed(fragment)``
    -> ``[start?, props_delta?]``, ``close()`` -> ``[props_delta?, end]``, :attr:`props`,
    :attr:`final_props`. The props are the tree document; ``props_delta`` carries no
    ``statusChanges`` (each node's ``done`` is in the tree). ``append_strings=False``
    sends growing strings as ``replace`` (strict RFC 6902). Raises what the tokenizer and
    the size limit raise (the run's error); spec errors are refusals, never raised:
    :attr:`refusal` holds one.
    """

    __slots__ = ("_final_props", "_genui", "_pending", "_root_sent", "_started", "component_id", "message_id",
                 "problems", "refusal", "tool", "tree")

    def __init__(self, tool: UISpecTool, *, message_id: str, component_id: str, append_strings: bool = True,
                 max_chars: int = MAX_COMPONENT_ARGS_CHARS) -> None:
        self.tool = tool
        self.message_id = message_id
        self.component_id = component_id
        self.max_chars = max_chars
        # Append mode whatever the wire's mode: GenUIStream finds duplicate members by their
        # replace ops, and writes the tree's strings in the wire's mode itself.
        self._stream = arguments_parser(max_chars, append_strings=True)
        self._genui = GenUIStream(tool.names, fallback=tool.fallback, parser=self._stream,
                                  reserved_prefix=STANDARD_PARAMETER_PREFIX, append_strings=append_strings,
                                  report_completed=False)
        self._status = StatusTracker()
        self._status_changed = False
        self._size = 0
        self._content = False
        self._started = False
        self._closed = False
        self._error: Exception | None = None
        self._root_sent = False
        self._pending: list[dict[str, Any]] = []  # tree operations of the fragment being parsed
        self._final_props: dict[str, Any] | None = None
        self.raw_ops = []
        #: Why the tree was refused (``None`` while it is not).
        self.refusal: GenUISpecError | None = None
        #: The validated tree after :meth:`close` (``None`` when refused).
        self.tree: tuple[UIChild, ...] | None = None
        #: Props that do not match their component's schema, after :meth:`close`: ``(pointer, name, problem)``.
        self.problems: list[tuple[str, str, str]] = []

    def _describe(self) -> str:
        return f"UI spec ({self.component_id})"

    def start(self) -> list[CustomEvent]:
        """``[tambo.component.start]`` with ``componentName`` :data:`UI_SPEC_COMPONENT`."""
        if self._started:
            raise UsageError(f"component stream {self.component_id} already started")
        self._started = True
        return [CustomEvent(name=COMPONENT_START, value={"messageId": self.message_id, "componentId": self.component_id,
                                                         "componentName": UI_SPEC_COMPONENT})]

    def feed(self, args_fragment: str) -> list[CustomEvent]:
        """The next fragment of the arguments -> ``[start?, props_delta?]``."""
        self._pending = []
        self._feed_ops(args_fragment)
        events = [] if self._started else self.start()
        if self._pending:
            events.append(self._delta(self._pending))
            self._pending = []
        return events

    def close(self) -> list[CustomEvent]:
        """End of the arguments -> ``[props_delta?, tambo.component.end]``; the tree is validated."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        events = [] if self._started else self.start()
        raw = self._close_ops()
        if self.refusal is None:
            try:
                self._genui.finish(raw)
                ops = self._sent(self._genui.tree_ops)
                self.tree = self._genui.tree
            except GenUISpecError as exc:
                ops = self._refuse(exc)
            if ops:
                events.append(self._delta(ops))
        self._final_props = self.props
        if self.tree is not None:
            self._check_props(self.tree)
        events.append(CustomEvent(name=COMPONENT_END,
                                  value={"componentId": self.component_id, "finalProps": self._final_props}))
        return events

    @property
    def props(self) -> dict[str, Any]:
        """The tree document so far: what the operations sent so far build (a fresh copy, O(tree))."""
        if self.refusal is not None:
            return {"root": [], "error": _refusal_json(self.refusal)}
        return self._genui.document

    @property
    def final_props(self) -> dict[str, Any] | None:
        """``finalProps`` of the end event, ``None`` before :meth:`close`."""
        return self._final_props

    # ------------------------------------------------------------------ internals

    def _parse(self, fragment: str) -> list[dict[str, Any]]:
        """Feed the one parser piece by piece (:func:`~agui_engine.genui.tree.structural_pieces`), the tree
        following each piece; the tree operations collect in ``_pending``. A refusal stops the tree,
        never the parse (the arguments still go to the wire)."""
        raw: list[dict[str, Any]] = []
        for piece in structural_pieces(fragment):
            ops = self._stream.feed(piece)
            raw += ops
            if self.refusal is None:
                try:
                    self._genui.follow(ops, end=piece[-1:])
                    self._pending += self._sent(self._genui.tree_ops)
                except GenUISpecError as exc:
                    self._pending += self._refuse(exc)
        return raw

    def _delta(self, ops: list[dict[str, Any]]) -> CustomEvent:
        return CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": self.component_id, "operations": ops})

    def _sent(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if ops and not self._root_sent:
            self._root_sent = True  # the tree's first operation is always the add of /root
        return ops

    def _refuse(self, exc: GenUISpecError) -> list[dict[str, Any]]:
        """The operations that withdraw the tree and say why (what the failing piece did is dropped)."""
        self.refusal = exc
        root: dict[str, Any] = {"op": "replace" if self._root_sent else "add", "path": "/root", "value": []}
        return [root, {"op": "add", "path": "/error", "value": _refusal_json(exc)}]

    def _check_props(self, tree: tuple[UIChild, ...]) -> None:
        components = self.tool.components
        stack = list(tree)
        while stack:
            node = stack.pop()
            if not isinstance(node, UINode):
                continue
            stack.extend(node.children)
            component = components.get(node.component)
            if component is not None and node.fallback_for is None:
                problem = component.props_problem(node.props)
                if problem is not None:
                    self.problems.append((node.pointer, node.component, problem))
        self.problems.sort()


def ui_spec_result(stream: UISpecStream) -> tuple[str, str | None]:
    """The tool result of a ``render_ui`` call: ``(content, error or None)``.

    A refused tree tells the model why and which components it may use; props that do
    not match their component's schema are reported with where they are (the tree was
    shown); the model can call the tool again either way.
    """
    names = ", ".join(stream.tool.names)
    if stream.refusal is not None:
        error = f"the UI was refused: {stream.refusal.message}"
        return (f"Error: {error}. Nothing of it is shown. The allowed components are: {names}. "
                f"Call {UI_SPEC_TOOL} again using only these.", error)
    shown = "The UI is shown on the user's screen."
    if not stream.problems:
        return shown, None
    pointer, name, problem = stream.problems[0]
    more = len(stream.problems) - 1
    error = f"the props of {name} at {pointer} do not match its schema: {problem}" + (
        f" (and {more} more node{'s' if more > 1 else ''} with props that do not match)" if more else "")
    return f"{shown} Error: {error}. Call {UI_SPEC_TOOL} again with corrected props.", error
