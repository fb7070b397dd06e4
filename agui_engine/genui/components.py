"""Components as tools: names, standard parameters, strict schemas and their inverse.

Theory of operation
-------------------
A *component* is ``{name, description, props_schema}``. The model shows it by
calling the UI tool ``show_component_<name>`` whose arguments are the props
(:data:`UI_TOOL_PREFIX`, :func:`component_tool_name`, :func:`is_ui_tool`,
:func:`component_from_tool_name`).

Every tool the model sees -- UI tools, server tools, client tools -- gets the two
*standard parameters* ``_tambo_statusMessage`` and ``_tambo_completionStatusMessage``
first in property order and required (:func:`add_standard_parameters`), so that a
model in strict mode writes them before anything else. They are taken out again
(:func:`split_standard_parameters`) before arguments reach a component or a tool
function and surface as :class:`StatusMessages`.

Providers with structured outputs (OpenAI ``strict: true``) accept only a subset of
JSON Schema: every property required, optional ones spelled ``anyOf [null, T]``,
``additionalProperties: false`` on every object. :func:`to_strict_schema` converts a
schema into that form -- or, when it cannot be done without changing what the
model may send (a free-form object, a value of any type, a tuple), keeps the
schema as it is and says why (:class:`StrictResult` with ``strict=False`` and a
``reason``); the tool is then sent non-strict and stays fully usable. Keywords
strict mode rejects are stripped; the value-constraining ones survive as a hint
in the ``description`` so the model still learns them. The conversion is
idempotent.

What the model sends back under strict mode has a ``null`` for every optional
property it did not mean to set. :class:`NullPolicy` decides, for a ``null`` at a
JSON path, what the *original* schema meant: keep it (required or nullable),
drop it (optional and not nullable) or replace it with the property's
``default``. :func:`unstrict_value` applies it to a whole value; the component
stream applies the very same policy to each patch operation, which is why the
streamed props always equal the un-strict final props.

:func:`tool_from_callable` turns a Python function (or a function taking one
msgspec Struct) into a :class:`ServerTool` whose schema comes from the signature
and whose arguments are validated by msgspec before the call.

No IO happens here.
"""

from __future__ import annotations

import abc
import copy
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from ..llm import LLMTool
from ..protocol.errors import RemoteInputError, UsageError
from ..protocol.pointer import escape_token, pointer_tokens, unescape_token
from .resources import PARAMS_PROP, RESOURCE_ID_PROP, Resource, ResourceRegistry
from .schemas import STANDARD_PARAMETER_PREFIX, check_object_schema, schema_from_struct

__all__ = [
    "COMPLETION_STATUS_MESSAGE_PARAMETER",
    "Component",
    "DROP",
    "HINTED_KEYWORDS",
    "KEEP",
    "MAX_COMPONENT_NAME_LENGTH",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "MAX_TOOL_NAME_LENGTH",
    "NullDefault",
    "NullPolicy",
    "STATUS_MESSAGE_PARAMETER",
    "STRICT_KEYWORDS",
    "STRIPPED_KEYWORDS",
    "ServerTool",
    "StatusMessages",
    "StrictResult",
    "ToolArgumentsError",
    "UI_TOOL_PREFIX",
    "add_standard_parameters",
    "build_llm_tool",
    "check_tool_name",
    "component_from_tool",
    "component_from_tool_name",
    "component_tool_name",
    "components_from_available",
    "is_ui_tool",
    "split_standard_parameters",
    "strip_reserved_keys",
    "to_strict_schema",
    "tool_from_callable",
    "tool_from_schema",
    "unstrict_value",
]

# --------------------------------------------------------------------------- names

#: Prefix of the UI tool that shows a component. Tambo's name, so that front ends
#: and prompts written for Tambo work unchanged.
UI_TOOL_PREFIX: Final = "show_component_"

#: OpenAI, Anthropic and Gemini all cap function names at 64 characters
#: (``^[a-zA-Z0-9_-]{1,64}$`` on OpenAI); a longer name is refused by the provider
#: at request time, so it is refused here at registration time instead.
MAX_TOOL_NAME_LENGTH: Final = 64

#: A component name must leave room for the prefix inside the tool-name limit.
MAX_COMPONENT_NAME_LENGTH: Final = MAX_TOOL_NAME_LENGTH - len(UI_TOOL_PREFIX)

_NAME_RE = re.compile(r"[A-Za-z0-9_-]+\Z")


def check_tool_name(name: object, *, what: str = "tool name") -> str:
    """Return ``name`` if it is a valid provider tool name.

    Raises :class:`UsageError` naming the problem (type, characters, length).
    """
    if not isinstance(name, str):
        raise UsageError(f"{what} must be a string, got {type(name).__name__}")
    if not _NAME_RE.match(name):
        raise UsageError(f"{what} {name!r} may contain only letters, digits, '_' and '-' and must not be empty")
    if len(name) > MAX_TOOL_NAME_LENGTH:
        raise UsageError(f"{what} {name!r} is {len(name)} characters; providers allow at most {MAX_TOOL_NAME_LENGTH}")
    return name


def component_tool_name(name: str) -> str:
    """``show_component_<name>``; raises :class:`UsageError` for an invalid component name."""
    _check_component_name(name)
    return UI_TOOL_PREFIX + name


def is_ui_tool(name: str) -> bool:
    """True for ``show_component_<X>`` with a non-empty ``X`` (the bare prefix is not a UI tool)."""
    return len(name) > len(UI_TOOL_PREFIX) and name.startswith(UI_TOOL_PREFIX)


def component_from_tool_name(name: str) -> str | None:
    """The component name inside a UI tool name, or ``None`` if ``name`` is not a UI tool."""
    return name[len(UI_TOOL_PREFIX) :] if is_ui_tool(name) else None


def _check_component_name(name: object) -> str:
    if not isinstance(name, str):
        raise UsageError(f"component name must be a string, got {type(name).__name__}")
    if not _NAME_RE.match(name):
        raise UsageError(
            f"component name {name!r} may contain only letters, digits, '_' and '-' and must not be empty"
        )
    if len(name) > MAX_COMPONENT_NAME_LENGTH:
        raise UsageError(
            f"component name {name!r} is {len(name)} characters; at most {MAX_COMPONENT_NAME_LENGTH} fit "
            f"in the {MAX_TOOL_NAME_LENGTH}-character tool name {UI_TOOL_PREFIX}<name>"
        )
    return name


# --------------------------------------------------------------- standard parameters

STATUS_MESSAGE_PARAMETER: Final = "_tambo_statusMessage"
COMPLETION_STATUS_MESSAGE_PARAMETER: Final = "_tambo_completionStatusMessage"

#: The standard parameters in the order they are put first into every tool.
_STANDARD_PARAMETERS: Final[Mapping[str, Mapping[str, Any]]] = {
    STATUS_MESSAGE_PARAMETER: {
        "type": "string",
        "description": (
            "A short message shown to the user while this tool runs, describing what it is doing, "
            "starting with a verb (for example 'Fetching the weather in Tokyo')."
        ),
    },
    COMPLETION_STATUS_MESSAGE_PARAMETER: {
        "type": "string",
        "description": (
            "A short message shown to the user once this tool has finished, describing what it has done "
            "(for example 'Fetched the weather in Tokyo')."
        ),
    },
}


class StatusMessages(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The standard parameters of one tool call, as far as they have arrived."""

    status_message: str | None = None
    completion_status_message: str | None = None

def add_standard_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an object schema with the standard parameters first and required.

    Every other top-level keyword (``$defs``, ``description`` ...) is kept.
    Raises :class:`UsageError` if ``schema`` is not an object schema or already
    declares a ``_tambo_*`` property.
    """
    root = check_object_schema(schema, "tool parameters")
    out = {k: copy.deepcopy(v) for k, v in root.items() if k not in ("properties", "required")}
    props: dict[str, Any] = {k: dict(v) for k, v in _STANDARD_PARAMETERS.items()}
    props.update(copy.deepcopy(root.get("properties") or {}))
    required = [*_STANDARD_PARAMETERS, *(root.get("required") or [])]
    out["type"] = "object"
    out["properties"] = props
    out["required"] = required
    if "properties" not in root and "additionalProperties" not in root:
        # ``{"type": "object"}`` accepts any keys. Once the standard parameters are
        # declared the schema would look closed to the strict converter, which would
        # turn free-form props into an object the model can put nothing into; saying
        # so explicitly (same meaning in JSON Schema) keeps the keys usable.
        out["additionalProperties"] = True
    return out


def strip_reserved_keys(value: Any) -> Any:
    """A copy of ``value`` without any ``_tambo_*`` key, at any depth."""
    if isinstance(value, dict):
        return {k: strip_reserved_keys(v) for k, v in value.items() if not k.startswith(STANDARD_PARAMETER_PREFIX)}
    if isinstance(value, list):
        return [strip_reserved_keys(v) for v in value]
    return value


def split_standard_parameters(args: Mapping[str, Any]) -> tuple[dict[str, Any], StatusMessages]:
    """Split tool arguments into (a copy without any ``_tambo_*`` key at any depth, status messages).

    A status message that is not a string (a model's mistake) is ignored.
    """
    clean: dict[str, Any] = strip_reserved_keys(dict(args))
    return clean, _status_messages_of(args)


def _status_messages_of(args: Mapping[str, Any]) -> StatusMessages:
    """The standard parameters in (partial) tool arguments; a non-string value is ignored."""
    status = args.get(STATUS_MESSAGE_PARAMETER)
    completion = args.get(COMPLETION_STATUS_MESSAGE_PARAMETER)
    return StatusMessages(
        status_message=status if isinstance(status, str) else None,
        completion_status_message=completion if isinstance(completion, str) else None,
    )


# -------------------------------------------------------------------- strict schemas

#: Deepest schema nesting the strict converter and the null policy follow. A tool
#: schema comes from a client too; a hostile one must not exhaust the Python stack.
#: 64 matches assistant-ui's generative-UI depth limit and is far beyond any real
#: props schema (OpenAI itself allows 10 levels of object nesting in strict mode).
MAX_SCHEMA_DEPTH: Final = 64

#: Most schema nodes the strict conversion produces. Inlining a ``$ref`` that has
#: sibling keywords copies its target, so a hostile chain of definitions that each
#: reference the next twice would grow as 2**n; real tool schemas have a few
#: hundred nodes, so 20,000 leaves ample room and bounds the work.
MAX_SCHEMA_NODES: Final = 20_000

#: Keywords kept by the strict conversion (everything strict mode understands that
#: carries meaning). Every other keyword is stripped.
STRICT_KEYWORDS: Final = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "anyOf",
        "$ref", "$defs", "definitions", "title", "description",
    }
)  # fmt: skip

#: Keywords stripped because some strict-mode provider rejects them (OpenAI
#: structured outputs, Anthropic strict tools, Gemini response schemas disagree
#: on validation keywords; the intersection of what they all accept is what stays).
#: ``oneOf`` and ``const`` are not stripped but rewritten (``anyOf``, ``enum``);
#: a single-element ``allOf`` is merged into its schema.
STRIPPED_KEYWORDS: Final = frozenset(
    {
        "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "contains",
        "minContains", "maxContains", "minProperties", "maxProperties", "propertyNames", "default",
        "examples", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
        "dependencies", "unevaluatedProperties", "unevaluatedItems", "$schema", "$id", "$comment",
        "$anchor", "readOnly", "writeOnly", "deprecated", "contentEncoding", "contentMediaType",
        "contentSchema", "nullable",
    }
)  # fmt: skip

#: Stripped keywords whose value still matters to the model: they are appended to
#: the ``description`` as ``(minimum: 0; maxLength: 40)`` so it can still respect them.
HINTED_KEYWORDS: Final = (
    "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "default",
)  # fmt: skip

_STRUCTURAL = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "prefixItems", "patternProperties",
     "enum", "const", "anyOf", "oneOf", "allOf", "$ref"}
)  # fmt: skip
_NULL_SCHEMA: Final = {"type": "null"}
_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})


class StrictResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :func:`to_strict_schema`.

    ``strict`` False means the schema could not be made strict without changing
    what the model may send; ``schema`` is then the original (copied) and
    ``reason`` says which part and why. ``stripped`` lists the keywords removed,
    as JSON pointers into the original schema (``#/properties/age/minimum``).
    """

    schema: dict[str, Any]
    strict: bool
    reason: str | None = None
    stripped: tuple[str, ...] = ()


class _NotStrictable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _resolve_ref(root: Mapping[str, Any], ref: object) -> Any:
    """The schema a local ``$ref`` points at, or raise ``KeyError``."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise KeyError(ref)
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise KeyError(ref)
    node: Any = root
    for token in pointer_tokens(ref[1:]):
        if not isinstance(node, Mapping):
            raise KeyError(ref)
        node = node[token]
    return node


class _Strictifier:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.stripped: list[str] = []
        self.count = 0

    def convert(self) -> dict[str, Any]:
        root = self.root
        if root.get("type", "object") != "object" or any(k in root for k in ("anyOf", "oneOf", "allOf", "$ref")):
            raise _NotStrictable("#: the root of tool parameters must be a plain object schema in strict mode")
        out = self.node(root, "#", 0)
        for key in ("$defs", "definitions"):
            if key in root:
                defs = root[key]
                if not isinstance(defs, Mapping):
                    raise _NotStrictable(f"#/{key}: must be an object of schemas")
                out[key] = {name: self.node(sub, f"#/{key}/{escape_token(name)}", 1) for name, sub in defs.items()}
        return out

    def nullable(self, schema: Any, seen: set[int] | None = None) -> bool:
        """Whether ``schema`` (already strict or original) admits ``null``.

        ``seen`` holds the schemas already visited, so a cycle of references
        (``A = anyOf[$ref A, $ref A]``) costs one visit each, not 2**depth.
        """
        if not isinstance(schema, Mapping):
            return schema is True
        if seen is None:
            seen = set()
        if id(schema) in seen:
            return False
        seen.add(id(schema))
        kind = schema.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
        if "enum" in schema and isinstance(schema["enum"], list) and None in schema["enum"]:
            return True
        if "const" in schema and schema["const"] is None:
            return True
        for key in ("anyOf", "oneOf"):
            alts = schema.get(key)
            if isinstance(alts, list) and any(self.nullable(a, seen) for a in alts):
                return True
        if "$ref" in schema:
            try:
                return self.nullable(_resolve_ref(self.root, schema["$ref"]), seen)
            except KeyError:
                return False
        return False

    def node(self, schema: Any, path: str, depth: int) -> dict[str, Any]:
        self.count += 1
        if self.count > MAX_SCHEMA_NODES:
            raise _NotStrictable(f"{path}: the strict schema would exceed {MAX_SCHEMA_NODES} nodes")
        if depth > MAX_SCHEMA_DEPTH:
            raise _NotStrictable(f"{path}: schema nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(schema, bool):
            raise _NotStrictable(
                f"{path}: the boolean schema {_dump(schema)} cannot be expressed in strict mode"
            )
        if not isinstance(schema, Mapping):
            raise _NotStrictable(f"{path}: not a schema ({type(schema).__name__})")
        s = dict(schema)
        if "allOf" in s:
            all_of = s.pop("allOf")
            if not isinstance(all_of, list) or len(all_of) != 1 or not isinstance(all_of[0], Mapping):
                raise _NotStrictable(f"{path}/allOf: an intersection of several schemas has no strict form")
            for key, value in all_of[0].items():
                if key in s and s[key] != value and key not in ("description", "title"):
                    raise _NotStrictable(f"{path}/allOf: {key!r} conflicts with the enclosing schema")
                s.setdefault(key, value)

        out: dict[str, Any] = {k: s[k] for k in ("title", "description") if k in s}
        hints = []
        for key, value in s.items():
            if key in _STRUCTURAL or key in ("title", "description"):
                continue
            if key in ("$defs", "definitions") and path == "#":
                continue
            if key in ("$defs", "definitions"):
                raise _NotStrictable(f"{path}/{key}: definitions are only supported at the root")
            self.stripped.append(f"{path}/{escape_token(key)}")
            if key in HINTED_KEYWORDS and not (key == "default" and value is None):
                hints.append(f"{key}: {_dump(value)}")
        if hints:
            note = "(" + "; ".join(hints) + ")"
            out["description"] = f"{out['description']} {note}" if out.get("description") else note

        if "$ref" in s:
            return self._ref(s, out, path, depth)
        if "anyOf" in s or "oneOf" in s:
            return self._union(s, out, path, depth)
        if "enum" in s or "const" in s:
            return self._enum(s, out, path)
        kind = s.get("type")
        if kind is None:
            if any(k in s for k in ("properties", "additionalProperties", "patternProperties")):
                kind = "object"
            elif "items" in s or "prefixItems" in s:
                kind = "array"
            else:
                raise _NotStrictable(
                    f"{path}: a schema without a type accepts any JSON value, which strict mode cannot express"
                )
        if isinstance(kind, list):
            return self._type_list(s, out, kind, path, depth)
        if kind == "object":
            return self._object(s, out, path, depth)
        if kind == "array":
            if "prefixItems" in s or isinstance(s.get("items"), list):
                raise _NotStrictable(f"{path}: tuple arrays (prefixItems) have no strict form")
            if "items" not in s:
                raise _NotStrictable(f"{path}: an array without 'items' accepts any element")
            out["type"] = "array"
            out["items"] = self.node(s["items"], f"{path}/items", depth + 1)
            return out
        if isinstance(kind, str) and kind in _PRIMITIVE_TYPES:
            out["type"] = kind
            return out
        raise _NotStrictable(f"{path}: unknown type {kind!r}")

    def _ref(self, s: dict[str, Any], out: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        ref = s["$ref"]
        try:
            target = _resolve_ref(self.root, ref)
        except KeyError:
            raise _NotStrictable(f"{path}/$ref: {ref!r} is not a local reference to this schema") from None
        if ref != "#" and not (isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))):
            raise _NotStrictable(f"{path}/$ref: strict mode resolves references only into $defs")
        if any(k in s for k in _STRUCTURAL - {"$ref"}):
            raise _NotStrictable(f"{path}: $ref next to other type keywords has no strict form")
        if not out:
            return {"$ref": ref}
        # Strict mode refuses keywords beside $ref: inline the target once, keeping
        # the annotations written at the reference (they describe this use of it).
        inlined = self.node(target, path, depth + 1)
        inlined.update(out)
        return inlined

    def _union(self, s: dict[str, Any], out: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        if "anyOf" in s and "oneOf" in s:
            raise _NotStrictable(f"{path}: anyOf together with oneOf has no strict form")
        key = "anyOf" if "anyOf" in s else "oneOf"
        alts = s[key]
        if not isinstance(alts, list) or not alts:
            raise _NotStrictable(f"{path}/{key}: must be a non-empty list of schemas")
        if any(k in s for k in _STRUCTURAL - {"anyOf", "oneOf"}):
            raise _NotStrictable(f"{path}: {key} next to other type keywords has no strict form")
        flat: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, alt in enumerate(alts):
            converted = self.node(alt, f"{path}/{key}/{i}", depth + 1)
            # A union of unions is one union: no anyOf nested in anyOf.
            parts = converted["anyOf"] if set(converted) == {"anyOf"} else [converted]
            for part in parts:
                dumped = _dump(part)
                if dumped not in seen:
                    seen.add(dumped)
                    flat.append(part)
        if len(flat) == 1:
            single = dict(flat[0])
            single.update(out)
            return single
        out["anyOf"] = flat
        return out

    def _enum(self, s: dict[str, Any], out: dict[str, Any], path: str) -> dict[str, Any]:
        if "const" in s:
            if "enum" in s and s["enum"] != [s["const"]]:
                raise _NotStrictable(f"{path}: const together with enum")
            values = [s["const"]]
        else:
            values = s["enum"]
        if not isinstance(values, list) or not values:
            raise _NotStrictable(f"{path}/enum: must be a non-empty list")
        types: list[str] = []
        for value in values:
            if isinstance(value, bool):
                t = "boolean"
            elif isinstance(value, int):
                t = "integer"
            elif isinstance(value, float):
                t = "number"
            elif isinstance(value, str):
                t = "string"
            elif value is None:
                t = "null"
            else:
                raise _NotStrictable(f"{path}/enum: object and array values have no strict form")
            if t not in types:
                types.append(t)
        if "integer" in types and "number" in types:
            types.remove("integer")
        kind = s.get("type")
        if kind is None:
            kind = types[0] if len(types) == 1 else types
        out["type"] = kind
        out["enum"] = list(values)
        return out

    def _type_list(
        self, s: dict[str, Any], out: dict[str, Any], kinds: list[Any], path: str, depth: int
    ) -> dict[str, Any]:
        if not kinds or not all(isinstance(k, str) for k in kinds):
            raise _NotStrictable(f"{path}/type: must be a non-empty list of type names")
        unique = list(dict.fromkeys(kinds))
        if len(unique) == 1:
            return self.node({**s, "type": unique[0]}, path, depth)
        structured = [k for k in unique if k in ("object", "array")]
        if not structured:
            for k in unique:
                if k not in _PRIMITIVE_TYPES:
                    raise _NotStrictable(f"{path}: unknown type {k!r}")
            out["type"] = unique
            return out
        if len(structured) == 1 and set(unique) == {structured[0], "null"}:
            inner = self.node({**{k: v for k, v in s.items() if k not in ("title", "description")},
                               "type": structured[0]}, path, depth)
            out["anyOf"] = [dict(_NULL_SCHEMA), inner]
            return out
        raise _NotStrictable(f"{path}/type: a type list mixing objects or arrays with other types has no strict form")

    def _object(self, s: dict[str, Any], out: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        extra = s.get("additionalProperties")
        if "patternProperties" in s or (extra is not None and extra is not False):
            raise _NotStrictable(
                f"{path}: an object with free-form keys (additionalProperties: {_dump(extra)}) cannot be "
                "strict, which needs every key declared; the tool is sent non-strict so the keys stay usable"
            )
        props = s.get("properties")
        if props is None and extra is not False:
            raise _NotStrictable(
                f"{path}: an object without 'properties' accepts any keys, which strict mode cannot express; "
                "the tool is sent non-strict so the keys stay usable"
            )
        props = props or {}
        if not isinstance(props, Mapping):
            raise _NotStrictable(f"{path}/properties: must be an object of schemas")
        required = s.get("required") or []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _NotStrictable(f"{path}/required: must be a list of strings")
        missing = [r for r in required if r not in props]
        if missing:
            raise _NotStrictable(f"{path}/required: {missing[0]!r} is required but not declared in properties")
        converted: dict[str, Any] = {}
        for key, sub in props.items():
            child = self.node(sub, f"{path}/properties/{escape_token(key)}", depth + 1)
            if key not in required and not self.nullable(child):
                child = _with_null(child)
            converted[key] = child
        out["type"] = "object"
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False
        return out


def _with_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf [null, schema]``, merging into an existing union instead of nesting one."""
    if "anyOf" in schema:
        merged = dict(schema)
        merged["anyOf"] = [dict(_NULL_SCHEMA), *schema["anyOf"]]
        return merged
    return {"anyOf": [dict(_NULL_SCHEMA), schema]}


def to_strict_schema(schema: Mapping[str, Any] | type[msgspec.Struct]) -> StrictResult:
    """Convert a tool's parameter schema to the strict subset (see the module docstring).

    Never raises for a schema it cannot convert: the result says ``strict=False``
    with the reason. Raises :class:`UsageError` only if ``schema`` is neither a
    mapping nor a msgspec Struct type. Idempotent: converting the output again
    returns it unchanged.
    """
    root = _as_schema(schema)
    converter = _Strictifier(root)
    try:
        out = converter.convert()
    except _NotStrictable as exc:
        return StrictResult(schema=copy.deepcopy(dict(root)), strict=False, reason=exc.reason)
    return StrictResult(schema=copy.deepcopy(out), strict=True, stripped=tuple(converter.stripped))


# ----------------------------------------------------------------------- un-strict


class NullDefault:
    """Verdict of :meth:`NullPolicy.decide`: use ``value`` (the schema's default) instead of the null."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


#: Verdicts of :meth:`NullPolicy.decide`.
KEEP: Final = "keep"
DROP: Final = "drop"


class NullPolicy:
    """What a ``null`` at a JSON path means under the *original* (non-strict) schema.

    :meth:`decide` returns ``KEEP`` (the property is required or nullable, or the
    path is unknown to the schema), ``DROP`` (optional and not nullable: strict
    mode forced the model to write it) or a default holder whose ``.value`` to use
    instead (optional, not nullable, with a ``default``). Where a union leaves
    several object schemas possible, a null is dropped only if every one of them
    would drop it. The verdict depends only on the path, never on the rest of the
    value, so a streamed and a whole value get the same answer.
    """

    __slots__ = ("_cache", "_checker", "_root")

    #: Distinct paths remembered per policy; beyond it verdicts are recomputed
    #: (paths with array indices are unbounded in number; the walk is cheap).
    CACHE_SIZE: Final = 1024

    def __init__(self, schema: Mapping[str, Any] | type[msgspec.Struct]) -> None:
        self._root = _as_schema(schema)
        self._checker = _Strictifier(self._root)
        self._cache: dict[tuple[str | int, ...], Any] = {}

    @property
    def schema(self) -> Mapping[str, Any]:
        return self._root

    def _expand(self, schema: Any, out: list[Mapping[str, Any]], seen: set[int] | None = None) -> None:
        """Append every schema ``schema`` may stand for (through ``$ref`` and unions) to ``out``.

        Each schema is visited once (``seen``), so reference cycles stay linear.
        """
        if not isinstance(schema, Mapping):
            return
        if seen is None:
            seen = set()
        if id(schema) in seen:
            return
        seen.add(id(schema))
        if "$ref" in schema:
            try:
                self._expand(_resolve_ref(self._root, schema["$ref"]), out, seen)
            except KeyError:
                pass
        for key in ("anyOf", "oneOf", "allOf"):
            alts = schema.get(key)
            if isinstance(alts, list):
                for alt in alts:
                    self._expand(alt, out, seen)
        out.append(schema)

    def _verdict(self, parent: Mapping[str, Any], key: str, child: Any) -> Any:
        required = parent.get("required")
        if isinstance(required, list) and key in required:
            return KEEP
        if self._checker.nullable(child):
            return KEEP
        if isinstance(child, Mapping) and "default" in child and child["default"] is not None:
            return NullDefault(child["default"])
        return DROP

    def decide(self, path: Sequence[str | int]) -> Any:
        """The verdict for a ``null`` at ``path`` (keys and array indices from the props root)."""
        key = tuple(path)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        verdict = self._decide(key)
        if len(self._cache) < self.CACHE_SIZE:
            self._cache[key] = verdict
        return verdict

    def _decide(self, path: tuple[str | int, ...]) -> Any:
        if not path:
            return KEEP
        parents: list[Mapping[str, Any]] = []
        self._expand(self._root, parents)
        for depth, token in enumerate(path):
            last = depth == len(path) - 1
            verdicts: list[Any] = []
            following: list[Mapping[str, Any]] = []
            visited: set[int] = set()  # one per level: parents never multiply along the path
            for parent in parents:
                props = parent.get("properties")
                if isinstance(token, str) and isinstance(props, Mapping) and token in props:
                    if last:
                        verdicts.append(self._verdict(parent, token, props[token]))
                    else:
                        self._expand(props[token], following, visited)
                    continue
                items = parent.get("items")
                index = isinstance(token, int) or (isinstance(token, str) and token.isdigit())
                if index and isinstance(items, Mapping):
                    if last:
                        verdicts.append(KEEP)
                    else:
                        self._expand(items, following, visited)
                    continue
                extra = parent.get("additionalProperties")
                if isinstance(extra, Mapping) and isinstance(token, str):
                    if last:
                        verdicts.append(KEEP)
                    else:
                        self._expand(extra, following, visited)
            if last:
                if not verdicts or any(v is KEEP for v in verdicts):
                    return KEEP
                return next((v for v in verdicts if isinstance(v, NullDefault)), DROP)
            if not following:
                return KEEP
            parents = following
        return KEEP  # pragma: no cover - the loop always returns on the last token


def unstrict_value(
    value: Any, original_schema: Mapping[str, Any] | type[msgspec.Struct] | NullPolicy
) -> Any:
    """Undo strict mode on what the model sent: a new value, the input untouched.

    A ``null`` on a property that was optional and not nullable in the original
    schema is removed, or replaced by a copy of its ``default``, at any depth
    (inside nested objects and objects in arrays). Everything else is kept as is.
    """
    policy = original_schema if isinstance(original_schema, NullPolicy) else NullPolicy(original_schema)

    def walk(node: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, sub in node.items():
                if sub is None:
                    verdict = policy.decide((*path, key))
                    if verdict is DROP:
                        continue
                    if isinstance(verdict, NullDefault):
                        out[key] = copy.deepcopy(verdict.value)
                        continue
                    out[key] = None
                else:
                    out[key] = walk(sub, (*path, key))
            return out
        if isinstance(node, list):
            return [walk(sub, (*path, i)) for i, sub in enumerate(node)]
        return node

    return walk(value, ())


# ------------------------------------------------------------------------- schemas


def _as_schema(schema: object) -> Mapping[str, Any]:
    if isinstance(schema, type) and issubclass(schema, msgspec.Struct):
        return schema_from_struct(schema)
    if isinstance(schema, Mapping):
        return schema
    raise UsageError(f"a schema must be a JSON Schema mapping or a msgspec Struct type, got {type(schema).__name__}")


def build_llm_tool(
    name: str, description: str, parameters: Mapping[str, Any], *, strict: bool = True
) -> tuple[LLMTool, StrictResult]:
    """The tool as sent to a model: standard parameters first, strict form if asked and possible.

    Returns the tool and the :class:`StrictResult` (whose ``reason`` explains a
    tool sent non-strict). Raises :class:`UsageError` for an invalid name or a
    parameters schema that is not an object schema.
    """
    check_tool_name(name)
    with_standard = add_standard_parameters(parameters)
    if not strict:
        result = StrictResult(schema=with_standard, strict=False, reason="strict mode not requested")
    else:
        result = to_strict_schema(with_standard)
    tool = LLMTool(name=name, description=description, parameters=result.schema, strict=result.strict)
    return tool, result


# ----------------------------------------------------------------------- components


class _ToolSource(abc.ABC):
    """Something that becomes one LLM tool (built once per strictness, then cached)."""

    __slots__ = ()
    _tools: dict[bool, tuple[LLMTool, StrictResult]]

    @abc.abstractmethod
    def _tool_parts(self) -> tuple[str, str, Mapping[str, Any]]:  # pragma: no cover - abstract
        """``(tool name, description, JSON Schema of the arguments)``."""

    def _built(self, strict: bool) -> tuple[LLMTool, StrictResult]:
        if strict not in self._tools:
            name, description, parameters = self._tool_parts()
            self._tools[strict] = build_llm_tool(name, description, parameters, strict=strict)
        return self._tools[strict]

    def to_llm_tool(self, strict: bool = True) -> LLMTool:
        """The tool for a model: standard parameters added, strict form applied when possible."""
        return self._built(strict)[0]

    @property
    def strict_result(self) -> StrictResult:
        """How the strict conversion went (``reason`` says why a tool is sent non-strict)."""
        return self._built(True)[1]


class Component(_ToolSource):
    """A UI component the model can show by calling ``show_component_<name>``.

    ``props_schema`` is a JSON Schema object (copied) or a msgspec Struct type
    (then :meth:`decode_props` validates into it). Raises :class:`UsageError` for
    an invalid name, a schema that is not an object schema, or a ``_tambo_*``
    property.
    """

    __slots__ = (
        "_json_validator", "_policy", "_tools", "description", "name", "props_schema", "resources", "struct_type",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        description: str,
        props_schema: Mapping[str, Any] | type[msgspec.Struct],
        *,
        resources: Sequence[Resource | str] = (),
        registry: ResourceRegistry | None = None,
    ) -> None:
        self.name: str = _check_component_name(name)
        if not isinstance(description, str):
            raise UsageError(f"component {name!r}: description must be a string")
        self.description: str = description
        self.struct_type: type[msgspec.Struct] | None = None
        if isinstance(props_schema, type) and issubclass(props_schema, msgspec.Struct):
            self.struct_type = props_schema
        schema = copy.deepcopy(dict(_as_schema(props_schema)))
        check_object_schema(schema, f"component {name!r} props schema")
        #: The resources this component can show, by id (``resourceId`` is one of them).
        self.resources: dict[str, Resource] = _component_resources(name, resources, registry)
        if self.resources:
            schema = _with_resources(schema, list(self.resources.values()), f"component {name!r}")
        self.props_schema: dict[str, Any] = schema
        self._policy: NullPolicy | None = None
        self._json_validator: Any = None
        self._tools: dict[bool, tuple[LLMTool, StrictResult]] = {}

    def __repr__(self) -> str:
        return f"Component({self.name!r})"

    @property
    def tool_name(self) -> str:
        return UI_TOOL_PREFIX + self.name

    @property
    def tool_description(self) -> str:
        """What the model reads: the tool shows this component on the user's screen."""
        text = f"Show the {self.name} UI component on the user's screen."
        return f"{text} {self.description}" if self.description else text

    @property
    def null_policy(self) -> NullPolicy:
        """The :class:`NullPolicy` of the original props schema (built once)."""
        if self._policy is None:
            self._policy = NullPolicy(self.props_schema)
        return self._policy

    def _tool_parts(self) -> tuple[str, str, Mapping[str, Any]]:
        return self.tool_name, self.tool_description, self.props_schema

    def unstrict_props(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Final props from raw tool arguments: standard parameters removed, strict nulls undone."""
        clean, _ = split_standard_parameters(args)
        result: dict[str, Any] = unstrict_value(clean, self.null_policy)
        return result

    def props_problem(self, props: Mapping[str, Any]) -> str | None:
        """Why ``props`` do not match the component's schema, or ``None`` when they do.

        The final props (standard parameters out, strict nulls undone) are checked
        against the *original* schema -- a Struct type by msgspec, a JSON Schema by
        ``jsonschema`` (Draft 2020-12, every keyword, including those strict mode
        could not send) -- and the message names the JSON path (``... - at
        $.sections[0].blocks``). Keys the schema does not declare are a problem only
        where it says ``additionalProperties: false`` (JSON Schema allows them; the
        props keep them). A reference the schema cannot resolve locally is not
        followed (the core does no IO); props under a schema ``jsonschema`` cannot
        apply (that, an unknown ``type``, a bad ``pattern``, a keyword of the wrong
        type) are not judged (``None``). Raises nothing: a problem is the answer.

        A component with ``resources`` is checked first for its ``resourceId`` (one of
        its resources) and its ``params`` against *that* resource's schema
        (:meth:`~agui_engine.genui.resources.Resource.params_problem`, path ``$.params...``).
        """
        if self.resources:
            problem = self._resource_problem(props)
            if problem is not None:
                return problem
        if self.struct_type is not None:
            try:
                msgspec.convert(dict(props), self.struct_type)
            except msgspec.ValidationError as exc:
                return str(exc)
            return None
        from jsonschema.exceptions import best_match  # imported on first use: ~80 ms

        try:
            error = best_match(self._validator().iter_errors(dict(props)))
        except Exception:  # noqa: BLE001 - the schema, not the props, is what cannot be applied
            # (an unresolvable $ref, an unknown type, a bad regex, a keyword of the wrong
            # type in a client's schema); checking every schema up front would cost ~15 ms
            # per component per run, so a broken one is found here and left unjudged
            return None
        if error is None:
            return None
        return f"{error.message} - at {error.json_path}"

    def _resource_problem(self, props: Mapping[str, Any]) -> str | None:
        chosen = props.get(RESOURCE_ID_PROP)
        resource = self.resources.get(chosen) if isinstance(chosen, str) else None
        if resource is None:
            if RESOURCE_ID_PROP not in props:
                return f"'{RESOURCE_ID_PROP}' is a required property - at $"
            return f"{_dump(chosen)} is not one of {_dump(list(self.resources))} - at $.{RESOURCE_ID_PROP}"
        if PARAMS_PROP not in props:
            return f"'{PARAMS_PROP}' is a required property - at $"
        found = resource.params_problem(props[PARAMS_PROP], root=f"$.{PARAMS_PROP}")
        return None if found is None else found[0]

    def _validator(self) -> Any:
        if self._json_validator is None:
            from jsonschema import Draft202012Validator

            self._json_validator = Draft202012Validator(self.props_schema)
        return self._json_validator

    def decode_props(self, props: Mapping[str, Any]) -> Any:
        """``props`` validated into the Struct type (or returned as a dict for a JSON Schema).

        Raises :class:`ToolArgumentsError` naming the JSON path of a mismatch.
        """
        if self.struct_type is None:
            return dict(props)
        try:
            return msgspec.convert(dict(props), self.struct_type)
        except msgspec.ValidationError as exc:
            raise ToolArgumentsError(f"component {self.name}: invalid props: {exc}") from None


def _component_resources(
    name: str, resources: Sequence[Resource | str], registry: ResourceRegistry | None
) -> dict[str, Resource]:
    """The resources a component names, by id (strings looked up in ``registry``)."""
    if isinstance(resources, str):
        raise UsageError(f"component {name!r}: resources must be a list of resources or ids, not one string")
    if not resources:
        return {}
    where = f"component {name!r}"
    if registry is None:
        strings = [r for r in resources if not isinstance(r, Resource)]
        if strings:
            raise UsageError(
                f"{where}: resource {strings[0]!r} is named by id; pass registry= (the ResourceRegistry "
                "declaring it) or the Resource itself"
            )
        registry = ResourceRegistry()
    out: dict[str, Resource] = {}
    for resource in registry.lookup(resources, where):
        if resource.id in out:
            raise UsageError(f"{where}: resource {resource.id!r} is named twice")
        out[resource.id] = resource
    return out


def _refs(node: Any) -> set[str]:
    """Every ``$ref`` string in a schema (iterative: a schema may nest deeply)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                found.add(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _embedded_params(resource: Resource, defs: dict[str, Any], where: str) -> dict[str, Any]:
    """``resource``'s params schema, ready to sit at ``/properties/params`` of a props
    schema: its own ``$defs`` move into ``defs`` under ``<id>.<name>`` and every local
    ``$ref`` (``#``, ``#/$defs/<name>``, ``#/definitions/<name>``) is rewritten to match.
    Raises UsageError for any other ``$ref``."""
    schema = copy.deepcopy(resource.params_schema)
    own = {**(schema.pop("definitions", None) or {}), **(schema.pop("$defs", None) or {})}
    prefix = resource.id + "."

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items()}
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref == "#":
                    out["$ref"] = "#/$defs/" + escape_token(resource.id)
                elif ref.startswith(("#/$defs/", "#/definitions/")) and "/" not in ref.split("/", 2)[2]:
                    out["$ref"] = "#/$defs/" + escape_token(prefix + unescape_token(ref.split("/", 2)[2]))
                else:
                    raise UsageError(f"{where}: resource {resource.id} params schema: $ref {ref!r} is not a local definition")
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    body: dict[str, Any] = rewrite(schema)
    if "#" in _refs(schema) or any("#" in _refs(v) for v in own.values()):
        defs[resource.id] = body
        body = {"$ref": "#/$defs/" + escape_token(resource.id)}
    for key, value in own.items():
        defs[prefix + key] = rewrite(value)
    return body


def _with_resources(schema: dict[str, Any], resources: list[Resource], where: str) -> dict[str, Any]:
    """A props schema with ``resourceId`` (an enum of the resources' ids) and ``params``
    (their params schemas; an ``anyOf`` when they differ) first and required.
    Raises UsageError when the schema already declares either, or its ``$defs`` clash."""
    props = dict(schema.get("properties") or {})
    for key in (RESOURCE_ID_PROP, PARAMS_PROP):
        if key in props:
            raise UsageError(f"{where}: its props schema declares {key!r}, which resources= adds")
    defs: dict[str, Any] = {}
    bodies: list[dict[str, Any]] = []
    for resource in resources:
        body = _embedded_params(resource, defs, where)
        if body not in bodies:
            bodies.append(body)
    described = "; ".join(f"{r.id} ({r.description})" if r.description else r.id for r in resources)
    params: dict[str, Any] = bodies[0] if len(bodies) == 1 else {"anyOf": bodies}
    out = {k: v for k, v in schema.items() if k not in ("properties", "required")}
    out["type"] = "object"
    out["properties"] = {
        RESOURCE_ID_PROP: {
            "type": "string",
            "enum": [r.id for r in resources],
            "description": f"Which data resource the component shows; the app fetches the data itself: {described}",
        },
        PARAMS_PROP: params,
        **props,
    }
    out["required"] = [RESOURCE_ID_PROP, PARAMS_PROP, *(schema.get("required") or [])]
    if defs:
        existing = dict(schema.get("$defs") or {})
        clash = sorted(set(existing) & set(defs))
        if clash:
            raise UsageError(f"{where}: $defs {clash[0]!r} of its props schema clashes with a resource's definitions")
        out["$defs"] = {**existing, **defs}
    return out


def component_from_tool(name: str, description: str | None, parameters: Mapping[str, Any] | None) -> Component:
    """A component sent by a front end as a ``show_component_<name>`` tool entry.

    Raises :class:`RemoteInputError` (the client sent it) when the name or schema is invalid.
    """
    component_name = component_from_tool_name(name)
    if component_name is None:
        raise RemoteInputError(f"tool {name!r} is not a UI tool ({UI_TOOL_PREFIX}<name>)")
    description = description or ""
    for prefix in (f"Show the {component_name} UI component on the user's screen.",):
        if description.startswith(prefix):
            description = description[len(prefix) :].lstrip()
    try:
        # no schema: free-form props (sent non-strict), not a closed object the model cannot fill
        return Component(component_name, description, parameters if parameters else {"type": "object"})
    except UsageError as exc:
        raise RemoteInputError(f"tools[{name}]: {exc.message}") from None


def components_from_available(available: object, *, where: str = "forwardedProps.availableComponents") -> list[Component]:
    """Components from Tambo's ``availableComponents`` list (``name``, ``description``, ``propsSchema``).

    Raises :class:`RemoteInputError` naming the entry (``...availableComponents[2].name``).
    """
    if not isinstance(available, list):
        raise RemoteInputError(f"{where}: expected a list, got {type(available).__name__}")
    out: list[Component] = []
    for i, entry in enumerate(available):
        here = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise RemoteInputError(f"{here}: expected an object, got {type(entry).__name__}")
        name = entry.get("name")
        if not isinstance(name, str):
            raise RemoteInputError(f"{here}.name: expected a string")
        description = entry.get("description", "")
        if not isinstance(description, str):
            raise RemoteInputError(f"{here}.description: expected a string")
        schema = entry.get("propsSchema", entry.get("props"))
        if schema is None:
            schema = {"type": "object"}  # free-form props, as for a tools entry without parameters
        try:
            out.append(Component(name, description, schema))
        except UsageError as exc:
            raise RemoteInputError(f"{here}: {exc.message}") from None
    return out


# ---------------------------------------------------------------------- server tools


class ToolArgumentsError(RemoteInputError):
    """The model's arguments do not fit the tool's schema (the message names the JSON path)."""

    default_code = "invalid_tool_arguments"


class ServerTool(_ToolSource):
    """A Python function the engine runs when the model calls it.

    Built by :func:`tool_from_callable`. :meth:`call` validates the arguments with
    msgspec (after taking out standard parameters and undoing strict nulls) and
    calls the function; an ``async def`` function returns its coroutine, which the
    caller awaits.
    """

    __slots__ = ("_args_type", "_policy", "_struct_param", "_tools", "app", "description", "fn", "name", "parameters")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        fn: Callable[..., Any],
        args_type: type[msgspec.Struct] | None,
        struct_param: str | None,
        app: Any = None,
    ) -> None:
        self.name = check_tool_name(name)
        #: the tool's MCP app (:class:`~agui_engine.genui.mcp_apps.AppTool`) when it has one
        self.app = app
        self.description = description
        self.parameters = parameters
        self.fn = fn
        self._args_type = args_type
        self._struct_param = struct_param
        self._policy = NullPolicy(parameters)
        self._tools: dict[bool, tuple[LLMTool, StrictResult]] = {}

    def __repr__(self) -> str:
        return f"ServerTool({self.name!r})"

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def _tool_parts(self) -> tuple[str, str, Mapping[str, Any]]:
        return self.name, self.description, self.parameters

    def prepare_arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments without standard parameters and with strict-mode nulls undone."""
        clean, _ = split_standard_parameters(args)
        result: dict[str, Any] = unstrict_value(clean, self._policy)
        return result

    def call(self, args: Mapping[str, Any]) -> Any:
        """Validate ``args`` and call the function; the result (or coroutine) is returned.

        Raises :class:`ToolArgumentsError` when the arguments do not match; whatever
        the function raises propagates unchanged.
        """
        if not isinstance(args, Mapping):
            raise ToolArgumentsError(f"tool {self.name}: arguments must be a JSON object")
        prepared = self.prepare_arguments(args)
        if self._args_type is None:  # a schema tool (tool_from_schema): its owner checks the arguments
            return self.fn(prepared)
        try:
            bound = msgspec.convert(prepared, self._args_type)
        except msgspec.ValidationError as exc:
            raise ToolArgumentsError(f"tool {self.name}: invalid arguments: {exc}") from None
        if self._struct_param is not None:
            return self.fn(**{self._struct_param: bound})
        return self.fn(**{f: getattr(bound, f) for f in bound.__struct_fields__})


def tool_from_schema(
    name: str, description: str, parameters: Mapping[str, Any], fn: Callable[[dict[str, Any]], Any],
    *, app: Any = None,
) -> ServerTool:
    """A :class:`ServerTool` offered with the JSON Schema ``parameters`` as it is, whose
    call hands ``fn`` the arguments as one dict (standard parameters taken out, strict-mode
    nulls undone) without checking them against the schema: for a tool whose owner checks
    them itself (an MCP server's tool; ``app``: its MCP app, an
    :class:`~agui_engine.genui.mcp_apps.AppTool`). Raises :class:`UsageError` for an invalid name or a
    schema that is not an object schema."""
    check_tool_name(name)
    schema = dict(parameters)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    check_object_schema(schema, f"tool {name} parameters")
    return ServerTool(name, description, schema, fn, None, None, app)


def tool_from_callable(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> ServerTool:
    """A :class:`ServerTool` from a function's signature (or its single Struct parameter).

    Each parameter needs a type annotation msgspec understands (``Annotated[...,
    msgspec.Meta(description=...)]`` documents it for the model); defaults make it
    optional. A function taking exactly one msgspec Struct gets that Struct's
    schema. The description defaults to the docstring. Raises :class:`UsageError`
    for ``*args`` / ``**kwargs``, positional-only parameters or an invalid name.
    """
    if not callable(fn):
        raise UsageError(f"tool_from_callable needs a callable, got {type(fn).__name__}")
    tool_name = name or str(getattr(fn, "__name__", ""))
    check_tool_name(tool_name)
    doc = description if description is not None else inspect.getdoc(fn) or ""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, AttributeError) as exc:  # an unresolvable forward reference
        raise UsageError(f"tool {tool_name}: cannot resolve the type hints: {exc}") from None
    params = list(signature.parameters.values())
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise UsageError(f"tool {tool_name}: parameter {p.name!r} must be passable by keyword")
    if len(params) == 1:
        hint = hints.get(params[0].name)
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            schema = schema_from_struct(hint)
            check_object_schema(schema, f"tool {tool_name} parameters")
            return ServerTool(tool_name, doc, schema, fn, hint, params[0].name)
    fields: list[Any] = []
    for p in params:
        hint = hints.get(p.name, Any)
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, hint))
        else:
            fields.append((p.name, hint, p.default))
    args_type = msgspec.defstruct(f"{tool_name}_args", fields, kw_only=True)
    try:
        schema = schema_from_struct(args_type)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"tool {tool_name}: a parameter type has no JSON Schema: {exc}") from None
    schema.pop("title", None)
    schema.setdefault("properties", {})
    check_object_schema(schema, f"tool {tool_name} parameters")
    return ServerTool(tool_name, doc, schema, fn, args_type, None)
