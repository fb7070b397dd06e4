"""The JSON Schemas a tool, a component or a resource declares: :func:`check_object_schema`
(an object schema, no property with the engine's reserved prefix) and :func:`schema_from_struct`
(a msgspec Struct type's schema with the root inlined).

The bottom of generative UI: :mod:`~agui_engine.genui.components` and
:mod:`~agui_engine.genui.resources` both use it, and it imports neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ..protocol.errors import UsageError
from ..protocol.pointer import unescape_token

__all__ = ["STANDARD_PARAMETER_PREFIX", "check_object_schema", "schema_from_struct"]

#: Every key starting with this prefix is reserved for the engine: it never reaches
#: a component or a tool function, and a schema may not declare one.
STANDARD_PARAMETER_PREFIX: Final = "_tambo_"


def check_object_schema(schema: object, what: str) -> Mapping[str, Any]:
    """``schema`` as a mapping if it is an object schema a tool or a resource may declare
    (``type`` object or absent, ``properties`` a mapping, ``required`` a list of strings, no
    property with the reserved ``_tambo_`` prefix); UsageError naming ``what`` otherwise."""
    if not isinstance(schema, Mapping):
        raise UsageError(f"{what} must be a JSON Schema object, got {type(schema).__name__}")
    kind = schema.get("type")
    if kind is not None and kind != "object":
        raise UsageError(f"{what} must be an object schema (type 'object'), got type {kind!r}")
    props = schema.get("properties")
    if props is not None and not isinstance(props, Mapping):
        raise UsageError(f"{what}: 'properties' must be an object")
    required = schema.get("required")
    if required is not None and (not isinstance(required, list) or not all(isinstance(r, str) for r in required)):
        raise UsageError(f"{what}: 'required' must be a list of strings")
    for key in props or ():
        if key.startswith(STANDARD_PARAMETER_PREFIX):
            raise UsageError(f"{what}: property {key!r} uses the reserved prefix {STANDARD_PARAMETER_PREFIX!r}")
    return schema


def schema_from_struct(struct_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of a msgspec Struct type, with the root inlined.

    msgspec answers ``{"$ref": "#/$defs/T", "$defs": {...}}``; tool parameters
    need the object at the root, so ``T`` is hoisted and kept in ``$defs`` only if
    something still refers to it (a recursive type).
    """
    raw = msgspec.json.schema(struct_type)
    defs = dict(raw.get("$defs", {}))
    ref = raw.get("$ref")
    if not isinstance(ref, str):
        return dict(raw)
    name = unescape_token(ref.rsplit("/", 1)[-1])
    root = dict(defs[name])
    others = {k: v for k, v in defs.items() if k != name}
    if ref in json.dumps([root, others], ensure_ascii=False, separators=(",", ":")):
        others[name] = defs[name]
    if others:
        root["$defs"] = others
    return root
