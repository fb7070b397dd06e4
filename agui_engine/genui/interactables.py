"""Interactable components: components already on the screen that the model may update.

Theory of operation
-------------------
A front end tells the run which components on the screen are *interactable* --
their id, component name, description, current props and state, optionally the
props and state schemas -- in a ``RunAgentInput.context`` entry whose
``description`` is ``"interactables"`` and whose ``value`` is the JSON
``{"components": [...]}`` (Tambo's shape; :func:`interactables_from_context`).

Each interactable gets two tools (:func:`interactable_tools`):

* ``update_component_props_<id>`` with arguments ``{componentId, newProps}``,
* ``update_component_state_<id>`` with arguments ``{componentId, newState}``.

``componentId`` is pinned to the one id (an ``enum`` of one value). ``newProps`` /
``newState`` use the component's schema with *nothing required inside*: the model
sends only what changes. In strict mode those optional keys come back as
``null``; the un-strict step (:mod:`agui_engine.genui.components`) removes them, so the
update stays partial. Without a schema the object is free-form, and the tool is
sent non-strict (strict mode would close it to ``{}`` and make it useless -- the
peer's bug).

An update is a *shallow merge* (:func:`merge_update`): every top-level key given
replaces the current one; keys not given stay. The engine streams an update as
component events on the same ``componentId`` (see
:class:`agui_engine.genui.component_stream.InteractableUpdateStream`), and the tool's
result is :data:`UPDATE_RESULT`.

No IO happens here.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from ..llm import LLMTool
from ..protocol.errors import RemoteInputError, UsageError
from .components import (
    MAX_TOOL_NAME_LENGTH,
    NullPolicy,
    StrictResult,
    build_llm_tool,
    split_standard_parameters,
    unstrict_value,
)

__all__ = [
    "INTERACTABLES_CONTEXT",
    "Interactable",
    "InteractableToolCall",
    "MAX_INTERACTABLE_ID_LENGTH",
    "UPDATE_PROPS_TOOL_PREFIX",
    "UPDATE_RESULT",
    "UPDATE_STATE_TOOL_PREFIX",
    "UpdateKind",
    "interactable_tools",
    "interactables_from_context",
    "merge_update",
    "parse_interactable_tool_name",
    "update_tool_schema",
]

UPDATE_PROPS_TOOL_PREFIX: Final = "update_component_props_"
UPDATE_STATE_TOOL_PREFIX: Final = "update_component_state_"

#: Both prefixes are 23 characters; the id must fit the providers' 64-character
#: tool-name limit after either of them.
MAX_INTERACTABLE_ID_LENGTH: Final = MAX_TOOL_NAME_LENGTH - len(UPDATE_PROPS_TOOL_PREFIX)

#: ``Context.description`` of the context entry that lists the interactables.
INTERACTABLES_CONTEXT: Final = "interactables"

#: The tool result the model gets after an update was applied.
UPDATE_RESULT: Final = "Updated successfully"

UpdateKind = Literal["props", "state"]

_FREE_FORM: Final = {"type": "object", "additionalProperties": True}


class Interactable(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One interactable component as the front end describes it."""

    id: str
    component_name: str
    description: str = ""
    props: dict[str, Any] = msgspec.field(default_factory=dict)
    state: dict[str, Any] | None = None
    props_schema: dict[str, Any] | None = None
    state_schema: dict[str, Any] | None = None
    is_selected: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", self.id):
            raise UsageError(f"interactable id {self.id!r} may contain only letters, digits, '_' and '-'")
        if len(self.id) > MAX_INTERACTABLE_ID_LENGTH:
            raise UsageError(
                f"interactable id {self.id!r} is {len(self.id)} characters; at most "
                f"{MAX_INTERACTABLE_ID_LENGTH} fit in the tool name {UPDATE_PROPS_TOOL_PREFIX}<id>"
            )

    def tool_name(self, kind: UpdateKind) -> str:
        return (UPDATE_PROPS_TOOL_PREFIX if kind == "props" else UPDATE_STATE_TOOL_PREFIX) + self.id

    def current(self, kind: UpdateKind) -> dict[str, Any]:
        """The current props (or state, ``{}`` when unknown)."""
        return dict(self.props if kind == "props" else (self.state or {}))

    def updated(self, kind: UpdateKind, values: Mapping[str, Any]) -> Interactable:
        """A copy whose props (or state) are ``values``: the instance after an update, so that the
        next update merges into what the previous one built (and the prompt shows it)."""
        if kind == "props":
            return msgspec.structs.replace(self, props=dict(values))
        return msgspec.structs.replace(self, state=dict(values))

    def schema(self, kind: UpdateKind) -> dict[str, Any] | None:
        return self.props_schema if kind == "props" else self.state_schema

    def update_policy(self, kind: UpdateKind) -> NullPolicy:
        """The null policy of the update tool's arguments (its nulls mean "unchanged")."""
        return NullPolicy(update_tool_schema(self, kind))

    def prepare_update(self, kind: UpdateKind, args: Mapping[str, Any]) -> dict[str, Any]:
        """The partial update inside final tool arguments, strict nulls removed.

        Raises :class:`RemoteInputError` if ``componentId`` names another
        component or the update is not an object.
        """
        clean, _ = split_standard_parameters(args)
        clean = unstrict_value(clean, self.update_policy(kind))
        member = "newProps" if kind == "props" else "newState"
        target = clean.get("componentId", self.id)
        if target != self.id:
            raise RemoteInputError(f"{self.tool_name(kind)}: componentId {target!r} is not {self.id!r}")
        update = clean.get(member)
        if update is None:
            return {}
        if not isinstance(update, dict):
            raise RemoteInputError(f"{self.tool_name(kind)}: {member} must be a JSON object")
        return update


class InteractableToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`parse_interactable_tool_name` finds in a tool name."""

    kind: UpdateKind
    component_id: str


def parse_interactable_tool_name(name: str) -> InteractableToolCall | None:
    """``update_component_props_<id>`` / ``update_component_state_<id>`` -> (kind, id), else ``None``."""
    for prefix, kind in ((UPDATE_PROPS_TOOL_PREFIX, "props"), (UPDATE_STATE_TOOL_PREFIX, "state")):
        if name.startswith(prefix) and len(name) > len(prefix):
            return InteractableToolCall(kind=kind, component_id=name[len(prefix) :])  # type: ignore[arg-type]
    return None


def update_tool_schema(interactable: Interactable, kind: UpdateKind) -> dict[str, Any]:
    """The arguments schema of an update tool: ``{componentId, newProps | newState}``.

    Inside the update object nothing is required (a partial update); without a
    component schema it is a free-form object.
    """
    member = "newProps" if kind == "props" else "newState"
    base = interactable.schema(kind)
    if base is None:
        partial: dict[str, Any] = dict(_FREE_FORM)
    else:
        partial = {k: copy.deepcopy(v) for k, v in base.items() if k != "required"}
        partial.setdefault("type", "object")
    what = "props" if kind == "props" else "state values"
    partial["description"] = f"The {what} to update. Provide only the keys you want to change."
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):  # references inside the schema resolve from the root
        if key in partial:
            defs[key] = partial.pop(key)
    return {
        "type": "object",
        "properties": {
            "componentId": {
                "type": "string",
                "enum": [interactable.id],
                "description": "The ID of the interactable component to update",
            },
            member: partial,
        },
        "required": ["componentId", member],
        **defs,
    }


def interactable_tools(interactable: Interactable, *, strict: bool = True) -> list[tuple[LLMTool, StrictResult]]:
    """The props and state update tools of one interactable (standard parameters added).

    A tool whose schema cannot be strict (no component schema: a free-form
    object) is sent non-strict; the :class:`StrictResult` says why.
    """
    out = []
    for kind in ("props", "state"):
        what = "props" if kind == "props" else "state"
        description = (
            f"Update the {what} of interactable component {interactable.id} ({interactable.component_name}). "
            f"Provide only the {what} to change; the rest stay as they are."
        )
        out.append(
            build_llm_tool(interactable.tool_name(kind), description, update_tool_schema(interactable, kind),
                           strict=strict)
        )
    return out


def merge_update(current: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Shallow merge: every key of ``update`` replaces the current one; the inputs stay untouched."""
    merged = dict(current)
    merged.update(update)
    return merged


def interactables_from_context(context: Sequence[Any]) -> list[Interactable]:
    """The interactables listed in a run's context (every ``"interactables"`` entry).

    Each entry's ``value`` is JSON ``{"components": [...]}`` (or the list itself).
    Raises :class:`RemoteInputError` naming the entry and member that is wrong
    (``context[1].value.components[0].id: ...``); duplicate ids are an error.
    """
    found: list[Interactable] = []
    seen: set[str] = set()
    for i, entry in enumerate(context):
        description = getattr(entry, "description", None)
        if description is None and isinstance(entry, Mapping):
            description = entry.get("description")
        if description != INTERACTABLES_CONTEXT:
            continue
        raw = getattr(entry, "value", None) if not isinstance(entry, Mapping) else entry.get("value")
        where = f"context[{i}].value"
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise RemoteInputError(f"{where}: not JSON: {exc}") from None
        components = raw.get("components") if isinstance(raw, Mapping) else raw
        if isinstance(raw, Mapping):
            where += ".components"
        if not isinstance(components, list):
            raise RemoteInputError(f"{where}: expected a list of components")
        for j, item in enumerate(components):
            here = f"{where}[{j}]"
            if isinstance(item, Mapping):
                item = {k: v for k, v in item.items() if not (k.endswith("Schema") and isinstance(v, str))}
            try:
                interactable = msgspec.convert(item, Interactable)
            except msgspec.ValidationError as exc:
                # msgspec wraps what __post_init__ raises (the id check) in a
                # ValidationError; the id check is about the member ``id``.
                if isinstance(exc.__cause__, UsageError):
                    raise RemoteInputError(f"{here}.id: {exc.__cause__.message}") from None
                raise RemoteInputError(f"{here}: {exc}") from None
            if interactable.id in seen:
                raise RemoteInputError(f"{here}.id: duplicate interactable id {interactable.id!r}")
            seen.add(interactable.id)
            found.append(interactable)
    return found
