"""A2UI v0.9 surfaces: the ``render_a2ui`` tool, streamed as ``a2ui-surface`` activities while the model types.

Theory of operation
-------------------
A2UI (Google's declarative UI protocol) describes a surface as a flat list of components
(``id``, ``component`` = a catalog name, props; children referenced by id) plus a data model
bound by ``{"path": ...}``. ``@ag-ui/a2ui-middleware`` 0.0.10 is the AG-UI reference: it offers
the model a ``render_a2ui`` tool (``surfaceId``, ``components``, ``data``) and turns its calls
into ``ACTIVITY_SNAPSHOT`` events of activity type ``a2ui-surface`` whose content is
``{"a2ui_operations": [createSurface, updateComponents, updateDataModel?]}``, preceded by
lifecycle snapshots (``building`` / ``retrying`` / ``failed``) on the same message id. This
module is the same contract, wire-compatible, with what the middleware lacks: the arguments
are parsed once, by a :class:`~agui_engine.jsonstream.PatchStream`, so a surface grows
component by component (an ``ACTIVITY_DELTA`` ``add`` the moment a component's object
closes, a data member the moment it closes) in linear time, where the middleware re-scans
the whole argument text on every chunk and shows nothing until the component array closes.

* :class:`A2UICatalog` -- a v0.9 inline catalog (``catalogId`` + component JSON Schemas);
  :meth:`A2UICatalog.basic` is the A2UI basic catalog shipped in ``agui_engine/data``
  (Apache-2.0, ``A2UI-LICENSE``); :meth:`A2UICatalog.from_context` reads the one a front end
  sends in ``RunAgentInput.context`` (the entry described by
  :data:`A2UI_SCHEMA_CONTEXT_DESCRIPTION`), as the middleware does.
* :func:`validate_components` -- the toolkit's rules (``validateA2UIComponents``: duplicate
  ids, missing id/type, unknown component, missing required prop, unresolved child, child
  cycles, no ``root``), in the toolkit's order and words, plus the props checked against the
  catalog's JSON Schema (``invalid_props``) and this module's limits.
* :class:`A2UISurfaceStream` -- one call's arguments in, activity events out. A component
  is checked on its own when it closes (a problem refuses the call at once); the whole list
  when the array closes. A refused call's activity is replaced in place by a ``retrying``
  snapshot (or ``failed`` after :data:`MAX_A2UI_ATTEMPTS`): a client never keeps a broken
  surface, and :meth:`A2UISurfaceStream.tool_result` tells the model what to fix (code,
  component id, JSON path).
* :class:`A2UITransformer` -- the middleware's whole stream processing as a feed over an
  inner agent's events (the agent loop's path, and the differential test's).
* :func:`a2ui_user_action` -- a ``forwardedProps.a2uiAction.userAction`` becomes a
  ``log_a2ui_event`` tool call and its result, as the middleware does.

Where this engine differs from the middleware, on purpose and only on input the middleware
leaves stuck (``spec/a2ui.md``): an empty or malformed component array, arguments that end
early or break a limit, and props that fail the catalog schema are refused (``retrying``)
where the middleware shows ``building`` forever or paints them; a refused call's tool result
says why, where the middleware answers ``{"status": "rendered"}``.

No IO happens here (the catalog files are package data, read once).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Final, TypeGuard
from urllib.parse import urljoin

import msgspec

from ..jsonstream import JSONStreamError, PatchStream
from ..llm import LLMTool
from ..protocol.errors import LimitExceededError, RemoteInputError, UsageError
from ..protocol.events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AddOperation,
    AnyEvent,
    AssistantMessage,
    Context,
    FunctionCall,
    JsonPatch,
    RunAgentInput,
    RunFinishedEvent,
    Tool,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ..protocol.ids import IdFactory, new_id
from ..protocol.pointer import escape_token, unescape_token
from .a2ui_clients import A2UISnapshots, from_assistant_ui, run_wants_snapshots, whole_surface_component
from .resources import ResourceRegistry

__all__ = [
    "A2UIActionError",
    "A2UICatalog",
    "A2UICatalogError",
    "A2UIProblem",
    "A2UIResourceBinding",
    "A2UISurfaceStream",
    "A2UITransformer",
    "A2UI_ACTIVITY_TYPE",
    "A2UI_CLIENT_CAPABILITIES_KEY",
    "A2UI_GUIDE_CONTEXT_DESCRIPTION",
    "A2UI_INJECT_FLAG",
    "A2UI_LOG_EVENT_TOOL",
    "A2UI_OPERATIONS_KEY",
    "A2UI_PROGRESS_TOKEN_STEP",
    "A2UI_RESOURCE_KEY",
    "A2UI_SCHEMA_CONTEXT_DESCRIPTION",
    "A2UI_SNAPSHOT_GROWTH",
    "A2UI_SURFACE_COMPONENT",
    "A2UI_TOOL",
    "A2UI_V1_VERSION",
    "A2UI_VERSION",
    "A2UI_VERSIONS",
    "BASIC_CATALOG_ID",
    "BASIC_CATALOG_V1_ID",
    "MAX_A2UI_ARGS_BYTES",
    "MAX_A2UI_ATTEMPTS",
    "MAX_A2UI_COMPONENTS",
    "MAX_A2UI_DEPTH",
    "MAX_A2UI_JSON_DEPTH",
    "MAX_A2UI_RESOURCE_BINDINGS",
    "a2ui_catalog_option",
    "a2ui_client_applies",
    "a2ui_context",
    "a2ui_data_model",
    "a2ui_guide",
    "a2ui_negotiate",
    "a2ui_resource_bindings",
    "a2ui_user_action",
    "a2ui_wire_tools",
    "prepare_a2ui_run",
    "render_a2ui_tool",
    "validate_components",
]

# --------------------------------------------------------------------------- the wire contract
#: The tool's name (the middleware's ``RENDER_A2UI_TOOL_NAME``).
A2UI_TOOL: Final = "render_a2ui"
#: The synthetic tool call a user action becomes (the middleware's ``LOG_A2UI_EVENT_TOOL_NAME``).
A2UI_LOG_EVENT_TOOL: Final = "log_a2ui_event"
#: ``activityType`` of every surface event.
A2UI_ACTIVITY_TYPE: Final = "a2ui-surface"
#: The content key holding the operations (and the tool-result envelope's key).
A2UI_OPERATIONS_KEY: Final = "a2ui_operations"
#: The A2UI version every operation carries by default (v0.9.1, the production release, writes "v0.9").
A2UI_VERSION: Final = "v0.9"
#: A2UI v1.0 (promoted from v0.10): what a v1.0 catalog's operations carry.
A2UI_V1_VERSION: Final = "v1.0"
#: The versions this module writes, oldest first (a negotiation prefers the newest both sides have).
A2UI_VERSIONS: Final = (A2UI_VERSION, A2UI_V1_VERSION)
#: The basic catalog's id (the default when neither host nor front end names one).
BASIC_CATALOG_ID: Final = "https://a2ui.org/specification/v0_9/basic_catalog.json"
#: The v1.0 basic catalog's id.
BASIC_CATALOG_V1_ID: Final = "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json"
#: The component name v1.0 reserves for a surface's implicit container (``createSurface`` makes it,
#: with ``child: "root"``; a catalog entry of that name only carries composition rules).
A2UI_SURFACE_COMPONENT: Final = "Surface"
#: Where a client declares the A2UI versions and catalogs it renders: ``forwardedProps`` member (the
#: A2A extension's metadata key, ``{"v1.0": {"supportedCatalogIds": [...]}, "v0.9": {...}}``).
A2UI_CLIENT_CAPABILITIES_KEY: Final = "a2uiClientCapabilities"
#: ``description`` of the ``RunAgentInput.context`` entry holding the catalog (a wire contract:
#: byte-identical to the middleware's and the toolkit's).
A2UI_SCHEMA_CONTEXT_DESCRIPTION: Final = (
    "A2UI Component Schema \u2014 available components for generating UI surfaces. "
    "Use these component names and properties when creating A2UI operations."
)
#: ``description`` of the context entry holding the usage guide for the tool named ``{}``.
A2UI_GUIDE_CONTEXT_DESCRIPTION: Final = "A2UI render tool usage guide \u2014 how to call {} with valid arguments."

# --------------------------------------------------------------------------- limits
#: Attempts at one surface (the first try and the retries), the toolkit's ``MAX_A2UI_ATTEMPTS``:
#: a retrying snapshot says ``attempt`` k of this many; past it the surface is ``failed``.
MAX_A2UI_ATTEMPTS: Final = 3
#: Components in one call. An 80 KB surface has about 800; 4,096 is 5x that, and bounds the
#: whole-list checks (ids, cycles) a hostile call can ask for.
MAX_A2UI_COMPONENTS: Final = 4096
#: Depth of the child tree under ``root`` (children by id). Real surfaces nest under 15 levels;
#: renderers recurse per level, so a deeper tree is refused before a client draws it.
MAX_A2UI_DEPTH: Final = 64
#: JSON nesting of the arguments (the tokenizer's ``max_depth`` for this tool): props nest a few
#: levels (``action.event.context``); 64 is generous and stops nesting bombs early.
MAX_A2UI_JSON_DEPTH: Final = 64
#: Size of one call's arguments, in UTF-8 bytes: 12x the 80 KB surface of the benchmark.
MAX_A2UI_ARGS_BYTES: Final = 1024 * 1024
#: A ``building`` snapshot carries ``progressTokens`` every this many estimated tokens
#: (the middleware's step; one token = 4 UTF-16 units of argument text).
A2UI_PROGRESS_TOKEN_STEP: Final = 20
#: Resource-bound data members of one surface (``{"$resource": ...}`` values): each is one data
#: query a client makes when it shows the surface; a dashboard binds a handful, 32 bounds the
#: queries one model call can make every viewer send.
MAX_A2UI_RESOURCE_BINDINGS: Final = 32
#: Snapshot mode (``A2UISurfaceStream(snapshots=True)``): a new snapshot goes out once the steps (components,
#: data members) not yet shown reach 1/this of the steps already shown, and at the end. The first 8 steps go
#: one by one (component by component while the model types); then each snapshot shows ~12% more, so the
#: bytes stay linear in the surface (each snapshot repeats everything before it) instead of quadratic.
A2UI_SNAPSHOT_GROWTH: Final = 8
#: The key of a data-model value the client fills from a server resource:
#: ``{"$resource": {"resourceId": ..., "params": {...}}}`` (``spec/a2ui.md``, resource-bound data).
A2UI_RESOURCE_KEY: Final = "$resource"

_RENDERED_RESULT: Final = '{"status":"rendered"}'
_RECOVERY_EXHAUSTED: Final = "a2ui_recovery_exhausted"


class A2UICatalogError(RemoteInputError):
    """A catalog that is not a v0.9 inline catalog (``catalogId`` string + ``components`` object),
    or whose id is not the one the host accepts; says which member is wrong."""

    default_code = "a2ui_bad_catalog"


class A2UIActionError(RemoteInputError):
    """A user action (``forwardedProps.a2uiAction.userAction``) that is malformed or names a
    surface this thread never rendered."""

    default_code = "a2ui_bad_action"


class A2UIProblem(msgspec.Struct, frozen=True, kw_only=True):
    """One reason a surface is refused: the toolkit's ``{code, path, message}`` (``path`` in the
    toolkit's grammar, ``components[2].child``), the component's id when it has one, and the JSON
    Pointer of the offending value in the tool's arguments."""

    code: str
    path: str
    message: str
    component_id: str | None = None
    pointer: str = ""

    def to_json(self) -> dict[str, str]:
        """The toolkit's error object (what a ``retrying`` snapshot lists)."""
        return {"code": self.code, "path": self.path, "message": self.message}

    def describe(self) -> str:
        """One line for the model: code, toolkit path, component id, pointer, message."""
        where = self.path
        if self.component_id is not None:
            where += f" (component id {json.dumps(self.component_id)})"
        if self.pointer:
            where += f" at {self.pointer}"
        return f"- [{self.code}] {where}: {self.message}"


# --------------------------------------------------------------------------- the catalog
def _data_json(name: str) -> Any:
    return json.loads(resources.files("agui_engine").joinpath("data", name).read_bytes())


_BASIC: list[A2UICatalog] = []  # the basic catalog, loaded on first use
_COMMON_TYPES: list[dict[str, Any]] = []


#: What v1.0 changed in the basic catalog's components (the A2UI evolution guide v0.9 -> v1.0, section
#: 2.2, and the v1.0 basic catalog itself): props added (name -> schema), props removed, enums narrowed.
_V1_ADDED_PROPS: Final = {
    "TextField": {"placeholder": {"$ref": "common_types.json#/$defs/DynamicString"}},
    "Slider": {"steps": {"type": "number"}},
    "Video": {"posterUrl": {"$ref": "common_types.json#/$defs/DynamicString"}},
}
_V1_REMOVED_PROPS: Final = {"TextField": ("validationRegexp",)}
_V1_ENUMS: Final = {("Text", "variant"): ["caption", "body"]}


def _v1_basic_components(components: Mapping[str, Any]) -> dict[str, Any]:
    """The v1.0 basic catalog's component schemas: the v0.9 ones (``allOf`` of the common parts and the
    component's own ``properties``) with :data:`_V1_ADDED_PROPS`, :data:`_V1_REMOVED_PROPS` and
    :data:`_V1_ENUMS` applied to the part that has ``properties``."""
    out: dict[str, Any] = json.loads(json.dumps(components))
    for name, schema in out.items():
        own = next((part for part in schema.get("allOf", ()) if _is_object(part) and "properties" in part), None)
        if own is None:
            continue
        props = own["properties"]
        props.update(_V1_ADDED_PROPS.get(name, {}))
        for prop in _V1_REMOVED_PROPS.get(name, ()):
            props.pop(prop, None)
            if prop in own.get("required", ()):
                own["required"].remove(prop)
        for (component, prop), enum in _V1_ENUMS.items():
            if component == name and _is_object(props.get(prop)):
                props[prop] = {**props[prop], "enum": list(enum)}
                if props[prop].get("default") not in enum:
                    props[prop].pop("default", None)
    return out


def _common_types() -> dict[str, Any]:
    if not _COMMON_TYPES:
        _COMMON_TYPES.append(_data_json("a2ui_common_types.json"))
    return _COMMON_TYPES[0]


def _is_object(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


class A2UICatalog:
    """A v0.9 inline catalog: ``catalog_id`` and a JSON Schema per component name.

    ``A2UICatalog(catalog_id, components, *, defs=None, check_props=True)``: ``components``
    maps a name to its schema; ``defs`` is the catalog's ``$defs`` (what ``#/$defs/...``
    references resolve against; ``common_types.json`` references resolve against the A2UI
    common types shipped with the basic catalog); ``functions`` its ``functions`` (what the
    common types' function calls reference). ``check_props``: validate each component's
    props against its schema (a reference that does not resolve skips the check for that
    component, never fails it). Raises :class:`UsageError` for an empty id or a schema that
    is not an object.
    """

    __slots__ = ("_document", "_registry", "_validators", "allowed_children", "allowed_parents", "catalog_id",
                 "check_props", "components", "version")

    def __init__(self, catalog_id: str, components: Mapping[str, Any], *, defs: Mapping[str, Any] | None = None,
                 functions: Mapping[str, Any] | None = None, check_props: bool = True,
                 version: str = A2UI_VERSION) -> None:
        if not isinstance(catalog_id, str) or not catalog_id:
            raise UsageError(f"an A2UI catalog id is a non-empty string, got {catalog_id!r}")
        if version not in A2UI_VERSIONS:
            raise UsageError(f"an A2UI catalog's version is one of {list(A2UI_VERSIONS)}, got {version!r}")
        for name, schema in components.items():
            if not isinstance(name, str) or not name or not isinstance(schema, dict):
                raise UsageError(f"an A2UI catalog maps component names to JSON Schema objects, got {name!r}")
        self.catalog_id = catalog_id
        #: The A2UI version of the catalog (``"v0.9"`` or ``"v1.0"``): what its surfaces' operations carry
        #: and which rules apply (v1.0: the reserved ``Surface``, ``allowedParents``/``allowedChildren``).
        self.version = version
        #: v1.0 composition rules by component name (``"Surface"`` included when the catalog constrains the root).
        self.allowed_parents: dict[str, list[str]] = {}
        self.allowed_children: dict[str, list[str]] = {}
        for name, schema in components.items():
            for key, rules in (("allowedParents", self.allowed_parents), ("allowedChildren", self.allowed_children)):
                value = schema.get(key)
                if value is None:
                    continue
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise UsageError(f"the A2UI catalog's {key} of {name!r} must be a list of component names")
                rules[name] = list(value)
        # the reserved container is no drawable component: its entry only carries rules
        self.components: dict[str, dict[str, Any]] = {
            k: v for k, v in components.items() if not (version == A2UI_V1_VERSION and k == A2UI_SURFACE_COMPONENT)}
        self.check_props = check_props
        self._document: dict[str, Any] = {"$id": catalog_id, "components": dict(components)}
        if defs:
            self._document["$defs"] = dict(defs)
        if functions:
            self._document["functions"] = dict(functions)
        self._registry: Any = None
        self._validators: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"A2UICatalog({self.catalog_id!r}, {len(self.components)} components, {self.version})"

    @classmethod
    def basic(cls, version: str = A2UI_VERSION) -> A2UICatalog:
        """The A2UI basic catalog (Text, Row, Column, Card, Button, TextField, ...), shared.

        ``version="v1.0"``: the v1.0 basic catalog under :data:`BASIC_CATALOG_V1_ID`, with v1.0's rules
        (the reserved ``Surface``): the v0.9 schemas with v1.0's changes to the basic catalog applied
        (:func:`_v1_basic_components`; ``spec/a2ui.md`` says where they come from)."""
        if version not in A2UI_VERSIONS:
            raise UsageError(f"A2UI versions are {list(A2UI_VERSIONS)}, got {version!r}")
        if not _BASIC:
            raw = _data_json("a2ui_basic_catalog.json")
            _BASIC.append(cls(raw["catalogId"], raw["components"], defs=raw.get("$defs"), functions=raw.get("functions")))
            _BASIC.append(cls(BASIC_CATALOG_V1_ID, _v1_basic_components(raw["components"]), defs=raw.get("$defs"),
                              functions=raw.get("functions"), version=A2UI_V1_VERSION))
        return _BASIC[A2UI_VERSIONS.index(version)]

    @classmethod
    def from_json(cls, value: Any, *, check_props: bool = True) -> A2UICatalog:
        """A catalog from its JSON (text or parsed): ``{"catalogId": str, "components": {...}, "$defs"?}``.

        Raises :class:`A2UICatalogError` naming the member that is wrong."""
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise A2UICatalogError(f"the A2UI catalog is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise A2UICatalogError(f"an A2UI catalog is a JSON object, got {type(value).__name__}")
        catalog_id = value.get("catalogId")
        if not isinstance(catalog_id, str) or not catalog_id:
            raise A2UICatalogError("the A2UI catalog's catalogId (at /catalogId) must be a non-empty string")
        components = value.get("components")
        if not isinstance(components, dict):
            raise A2UICatalogError("the A2UI catalog's components (at /components) must be an object")
        for name, schema in components.items():
            if not name or not isinstance(schema, dict):
                raise A2UICatalogError(f"the A2UI catalog's component /components/{escape_token(name)} "
                                       "must be a JSON Schema object")
        defs = value.get("$defs")
        functions = value.get("functions")
        declared = value.get("protocolVersion", "0.9")  # v1.0: catalogs for 1.0 and later MUST declare it
        version = f"v{declared}" if isinstance(declared, str) else None
        if version not in A2UI_VERSIONS and version != "v0.9.1":
            raise A2UICatalogError(f"the A2UI catalog's protocolVersion (at /protocolVersion) must be one of "
                                   f"\"0.9\", \"1.0\", got {declared!r}")
        try:
            return cls(catalog_id, components, defs=defs if isinstance(defs, dict) else None,
                       functions=functions if isinstance(functions, dict) else None, check_props=check_props,
                       version=A2UI_V1_VERSION if version == A2UI_V1_VERSION else A2UI_VERSION)
        except UsageError as exc:
            raise A2UICatalogError(exc.message) from None

    @classmethod
    def from_context(cls, context: Iterable[Context]) -> A2UICatalog | None:
        """The catalog a front end sent: the context entry whose description is
        :data:`A2UI_SCHEMA_CONTEXT_DESCRIPTION` (the last one wins), ``None`` without one.
        Raises :class:`A2UICatalogError` for an entry that is not a catalog."""
        found: Context | None = None
        for entry in context:
            if entry.description == A2UI_SCHEMA_CONTEXT_DESCRIPTION:
                found = entry
        return None if found is None else cls.from_json(found.value)

    def context_entry(self) -> Context:
        """The ``RunAgentInput.context`` entry that shows the model this catalog (the middleware's form)."""
        value: dict[str, Any] = {"catalogId": self.catalog_id, "components": self._document["components"]}
        if self.version != A2UI_VERSION:
            value["protocolVersion"] = self.version[1:]
        for extra in ("$defs", "functions"):
            if extra in self._document:
                value[extra] = self._document[extra]
        return Context(description=A2UI_SCHEMA_CONTEXT_DESCRIPTION, value=json.dumps(value, ensure_ascii=False))

    def props_problem(self, component: dict[str, Any], index: int) -> A2UIProblem | None:
        """The first way ``component`` fails its catalog schema (``invalid_props``), or ``None``.
        Unknown names are :func:`validate_components`' business (``None`` here)."""
        if not self.check_props:
            return None
        name = component.get("component")
        if not isinstance(name, str) or name not in self.components:
            return None
        validator = self._validator(name)
        if validator is None:
            return None
        try:
            error = next(iter(validator.iter_errors(component)), None)
        except Exception:  # an unresolvable reference: the schema cannot judge, so it does not refuse
            self._validators[name] = None
            return None
        if error is None:
            return None
        best = _best_error(error)
        suffix = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in best.absolute_path)
        pointer = f"/components/{index}" + "".join("/" + escape_token(str(p)) for p in best.absolute_path)
        cid = component.get("id")
        return A2UIProblem(code="invalid_props", path=f"components[{index}]{suffix}",
                           message=f"Component '{name}' (index {index}) does not match its catalog schema: "
                                   f"{best.message}",
                           component_id=cid if isinstance(cid, str) else None, pointer=pointer)

    def _validator(self, name: str) -> Any:
        if name in self._validators:
            return self._validators[name]
        import jsonschema  # imported on first props check: most runs never validate props
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        if self._registry is None:
            common = _common_types()
            resources_: list[tuple[str, Any]] = [
                (self.catalog_id, DRAFT202012.create_resource(self._document)),
                (common["$id"], DRAFT202012.create_resource(common)),
            ]
            if self.catalog_id != BASIC_CATALOG_ID:  # the common types' function calls name the basic catalog
                basic = A2UICatalog.basic()._document
                resources_.append((BASIC_CATALOG_ID, DRAFT202012.create_resource(basic)))
            relative = urljoin(self.catalog_id, "common_types.json")
            if relative != common["$id"]:
                resources_.append((relative, DRAFT202012.create_resource(dict(common, **{"$id": relative}))))
            self._registry = Registry().with_resources(resources_)
        schema = {"$ref": f"{self.catalog_id}#/components/{escape_token(name)}"}
        validator: Any = jsonschema.Draft202012Validator(schema, registry=self._registry)
        self._validators[name] = validator
        return validator


def _best_error(error: Any) -> Any:
    """The deepest error of a oneOf/allOf tree: the one that says which value is wrong."""
    import jsonschema

    return jsonschema.exceptions.best_match([error]) or error


# --------------------------------------------------------------------------- validation (the toolkit's rules)
def _child_refs(value: Any) -> list[str]:
    """Ids a ``child``/``children`` value references: ids, ``{componentId}`` templates, or a list of them."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif _is_object(item) and isinstance(item.get("componentId"), str):
            out.append(item["componentId"])
    return out


def _ref_edges(comp: dict[str, Any], schema: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(path suffix, referenced id)`` of every child reference of ``comp``: ``child`` and
    ``children`` always, other props when the schema marks them ``componentRef(List)``."""
    edges: list[tuple[str, str]] = [("child", ref) for ref in _child_refs(comp.get("child"))]

    def push_list(field: str, value: Any) -> None:
        if isinstance(value, list):
            for k, item in enumerate(value):
                edges.extend((f"{field}[{k}]", ref) for ref in _child_refs(item))
        else:
            edges.extend((field, ref) for ref in _child_refs(value))

    push_list("children", comp.get("children"))
    props = schema.get("properties") if schema is not None else None
    if _is_object(props):
        for field, prop in props.items():
            if field in ("child", "children") or not _is_object(prop):
                continue
            fmt = prop.get("format")
            if fmt == "componentRef":
                edges.extend((field, ref) for ref in _child_refs(comp.get(field)))
            elif fmt == "componentRefList":
                push_list(field, comp.get(field))
            elif prop.get("type") == "array" and _is_object(prop.get("items")):
                item_props = prop["items"].get("properties")
                values = comp.get(field)
                if not (_is_object(item_props) and isinstance(values, list)):
                    continue
                for k, item in enumerate(values):
                    if not _is_object(item):
                        continue
                    for sub, sub_schema in item_props.items():
                        if not _is_object(sub_schema):
                            continue
                        if sub_schema.get("format") == "componentRef":
                            edges.extend((f"{field}[{k}].{sub}", ref) for ref in _child_refs(item.get(sub)))
                        elif sub_schema.get("format") == "componentRefList":
                            push_list(f"{field}[{k}].{sub}", item.get(sub))
    return edges


def _schema_of(comp: Any, catalog: A2UICatalog | None) -> dict[str, Any] | None:
    if catalog is None or not _is_object(comp) or not isinstance(comp.get("component"), str):
        return None
    return catalog.components.get(comp["component"])


def _version_of(catalog: A2UICatalog | None, version: str | None) -> str:
    return version or (catalog.version if catalog is not None else A2UI_VERSION)


def _own_problems(comp: Any, index: int, catalog: A2UICatalog | None, version: str | None = None) -> list[A2UIProblem]:
    """What is wrong with one component on its own, in the toolkit's order: missing id, missing
    type, unknown component or missing required props; then (this engine) its props schema.
    v1.0: the reserved ``Surface`` type first (``reserved_component``)."""
    cid = comp.get("id") if _is_object(comp) else None
    own_id = cid if isinstance(cid, str) and cid else None
    name = comp.get("component") if _is_object(comp) else None
    base = f"/components/{index}"
    out: list[A2UIProblem] = []
    if name == A2UI_SURFACE_COMPONENT and _version_of(catalog, version) == A2UI_V1_VERSION:
        return [A2UIProblem(code="reserved_component", path=f"components[{index}].component",
                            message=f"Component type '{A2UI_SURFACE_COMPONENT}' is reserved in A2UI v1.0 "
                                    "(createSurface makes it, with child 'root'); it cannot be sent",
                            component_id=own_id, pointer=base + "/component")]
    if own_id is None:
        out.append(A2UIProblem(code="missing_id", path=f"components[{index}].id",
                               message=f"Component at index {index} is missing a string 'id'", pointer=base + "/id"))
    if not isinstance(name, str) or not name:
        out.append(A2UIProblem(code="missing_component_type", path=f"components[{index}].component",
                               message=f"Component at index {index} is missing a string 'component' type",
                               component_id=own_id, pointer=base + "/component"))
    if catalog is not None and isinstance(name, str):
        schema = catalog.components.get(name)
        if schema is None:
            out.append(A2UIProblem(code="unknown_component", path=f"components[{index}].component",
                                   message=f"Component type '{name}' is not in the catalog",
                                   component_id=own_id, pointer=base + "/component"))
        else:
            for req in schema.get("required") or ():
                if not _is_object(comp) or req not in comp:
                    out.append(A2UIProblem(code="missing_required_prop", path=f"components[{index}].{req}",
                                           message=f"Component '{name}' (index {index}) is missing required prop "
                                                   f"'{req}'", component_id=own_id,
                                           pointer=base + "/" + escape_token(str(req))))
            if not out and _is_object(comp):
                problem = catalog.props_problem(comp, index)
                if problem is not None:
                    out.append(problem)
    return out


def _cycles(components: Sequence[Any], catalog: A2UICatalog | None) -> list[list[str]]:
    """Child-reference cycles by depth-first search, each rotated to start at its smallest id
    (the toolkit's canonical form, so the same loop is reported once and byte-identically)."""
    adj: dict[str, list[str]] = {}
    for comp in components:
        if _is_object(comp) and isinstance(comp.get("id"), str):
            adj[comp["id"]] = [ref for _, ref in _ref_edges(comp, _schema_of(comp, catalog))]
    color: dict[str, int] = {}
    found: dict[tuple[str, ...], list[str]] = {}
    for root in adj:
        if color.get(root, 0):
            continue
        frames: list[list[Any]] = [[root, 0]]
        path = [root]
        color[root] = 1
        while frames:
            frame = frames[-1]
            neighbours = adj.get(frame[0], [])
            if frame[1] >= len(neighbours):
                color[frame[0]] = 2
                frames.pop()
                path.pop()
                continue
            nxt = neighbours[frame[1]]
            frame[1] += 1
            c = color.get(nxt, 0)
            if c == 0:
                color[nxt] = 1
                path.append(nxt)
                frames.append([nxt, 0])
            elif c == 1:
                loop = path[path.index(nxt):]
                m = min(range(len(loop)), key=lambda i: loop[i])
                canon = loop[m:] + loop[:m]
                found.setdefault(tuple(canon), canon)
    return list(found.values())


def _composition_problems(components: Sequence[Any], catalog: A2UICatalog) -> list[A2UIProblem]:
    """A2UI v1.0 composition rules (``allowedParents`` / ``allowedChildren`` of the catalog; the
    reserved ``Surface`` is the parent of a component nobody references): ``UNALLOWED_PARENT`` /
    ``UNALLOWED_CHILD``, the error codes of v1.0's ``renderer_to_agent.json``, worded as a2ui-core
    words them."""
    if not catalog.allowed_parents and not catalog.allowed_children:
        return []
    types: dict[str, str] = {}
    children: dict[str, list[str]] = {}
    for comp in components:
        if _is_object(comp) and isinstance(comp.get("id"), str) and isinstance(comp.get("component"), str):
            types[comp["id"]] = comp["component"]
            children[comp["id"]] = [ref for _, ref in _ref_edges(comp, _schema_of(comp, catalog))]
    parent: dict[str, str] = {}
    for pid, refs in children.items():
        for ref in refs:
            parent[ref] = pid
    if "root" in types:
        children[A2UI_SURFACE_COMPONENT] = ["root"]
        types[A2UI_SURFACE_COMPONENT] = A2UI_SURFACE_COMPONENT
    out: list[A2UIProblem] = []
    for cid, name in types.items():
        allowed = catalog.allowed_parents.get(name)
        if allowed and cid != A2UI_SURFACE_COMPONENT:
            pid = parent.get(cid, A2UI_SURFACE_COMPONENT)
            ptype = types.get(pid, A2UI_SURFACE_COMPONENT)
            if ptype not in allowed:
                out.append(A2UIProblem(code="UNALLOWED_PARENT", path=f"components[id={cid}]", component_id=cid,
                                       message=f"Component '{cid}' ({name}) cannot be placed under parent "
                                               f"'{pid}' ({ptype}). Allowed parents: {allowed}."))
        allowed = catalog.allowed_children.get(name)
        if allowed:
            for ref in children.get(cid, ()):
                ctype = types.get(ref)
                if ctype is not None and ctype not in allowed:
                    out.append(A2UIProblem(code="UNALLOWED_CHILD", path=f"components[id={cid}]",
                                           component_id=None if cid == A2UI_SURFACE_COMPONENT else cid,
                                           message=f"Component '{cid}' ({name}) cannot contain child '{ref}' "
                                                   f"({ctype}). Allowed children: {allowed}."))
    return out


def _tree_depth_problem(components: Sequence[Any], catalog: A2UICatalog | None) -> A2UIProblem | None:
    """A child tree under ``root`` deeper than :data:`MAX_A2UI_DEPTH` (cycles are reported apart)."""
    by_id = {c["id"]: c for c in components if _is_object(c) and isinstance(c.get("id"), str)}
    if "root" not in by_id:
        return None
    depth = {"root": 1}
    queue = ["root"]
    for cid in queue:  # breadth first: each id is visited once, at its shallowest depth
        d = depth[cid]
        if d > MAX_A2UI_DEPTH:
            return A2UIProblem(code="too_deep", path=f"components[id={cid}]", component_id=cid,
                               message=f"The child tree is deeper than {MAX_A2UI_DEPTH} levels under 'root'")
        comp = by_id[cid]
        for _, ref in _ref_edges(comp, _schema_of(comp, catalog)):
            if ref in by_id and ref not in depth:
                depth[ref] = d + 1
                queue.append(ref)
    return None


def validate_components(components: Any, catalog: A2UICatalog | None = None, *,
                        own: Sequence[list[A2UIProblem]] | None = None, version: str | None = None) -> list[A2UIProblem]:
    """Every reason ``components`` (a flat v0.9 list) cannot be drawn; ``[]`` when it can.

    The toolkit's checks in its order and words (``empty_components``, ``duplicate_id``,
    ``missing_id``, ``missing_component_type``, ``unknown_component`` and
    ``missing_required_prop`` with a catalog, ``unresolved_child``, ``child_cycle``, ``no_root``),
    with ``invalid_props`` (the catalog schema) after a component's own checks, and
    ``too_many_components`` / ``too_deep`` (this module's limits). ``own``: the per-component
    problems already computed (by a stream), so props are never validated twice. Binding
    paths are not resolved (the middleware's ``validateBindings: false``). ``version`` (default: the
    catalog's, else v0.9): v1.0 adds ``reserved_component`` and, with a catalog, ``UNALLOWED_PARENT`` /
    ``UNALLOWED_CHILD`` (after the cycle check). Raises nothing.
    """
    if not isinstance(components, list) or not components:
        return [A2UIProblem(code="empty_components", path="components", pointer="/components",
                            message="A2UI components must be a non-empty array")]
    if len(components) > MAX_A2UI_COMPONENTS:
        return [A2UIProblem(code="too_many_components", path="components", pointer="/components",
                            message=f"A surface holds at most {MAX_A2UI_COMPONENTS} components, "
                                    f"got {len(components)}")]
    problems: list[A2UIProblem] = []
    ids: set[str] = set()
    for comp in components:
        cid = comp.get("id") if _is_object(comp) else None
        if isinstance(cid, str):
            if cid in ids:
                problems.append(A2UIProblem(code="duplicate_id", path=f"components[id={cid}]", component_id=cid,
                                            message=f"Duplicate component id '{cid}'"))
            ids.add(cid)
    for i, comp in enumerate(components):
        problems.extend(own[i] if own is not None and i < len(own) else _own_problems(comp, i, catalog, version))
        if _is_object(comp):
            cid = comp.get("id")
            for suffix, ref in _ref_edges(comp, _schema_of(comp, catalog)):
                if ref not in ids:
                    problems.append(A2UIProblem(
                        code="unresolved_child", path=f"components[{i}].{suffix}",
                        message=f"Child reference '{ref}' does not match any component id",
                        component_id=cid if isinstance(cid, str) else None,
                        pointer=f"/components/{i}/" + suffix.replace("[", "/").replace("]", "").replace(".", "/")))
    for cycle in _cycles(components, catalog):
        problems.append(A2UIProblem(code="child_cycle", path=f"components[id={cycle[0]}]", component_id=cycle[0],
                                    message="Child reference cycle detected: " + " -> ".join([*cycle, cycle[0]])))
    if "root" not in ids or not any(_is_object(c) and c.get("id") == "root" for c in components):
        problems.append(A2UIProblem(code="no_root", path="components", pointer="/components",
                                    message="No component has id 'root'"))
    if not problems and catalog is not None and _version_of(catalog, version) == A2UI_V1_VERSION:
        problems.extend(_composition_problems(components, catalog))
    if not problems:
        deep = _tree_depth_problem(components, catalog)
        if deep is not None:
            problems.append(deep)
    return problems


# --------------------------------------------------------------------------- resource-bound data
class A2UIResourceBinding(msgspec.Struct, frozen=True, kw_only=True):
    """A data-model path a client fills from a server resource: ``path`` (a JSON Pointer in the
    surface's data model), the resource id and its params (what ``POST <path>/data/query`` sends)."""

    surface_id: str
    path: str
    resource_id: str
    params: dict[str, Any]


def _resource_ref(value: Any) -> Any:
    """The ``{"resourceId", "params"?}`` body of a ``{"$resource": ...}`` value, else ``None``."""
    if _is_object(value) and len(value) == 1 and A2UI_RESOURCE_KEY in value:
        return value[A2UI_RESOURCE_KEY]
    return None


def _walk_refs(value: Any, pointer: str, out: list[tuple[str, Any]]) -> None:
    """Every ``$resource`` value under ``value`` as ``(pointer, body)``, in document order. The
    nesting is bounded already (the arguments' ``MAX_A2UI_JSON_DEPTH``, a client's own JSON)."""
    body = _resource_ref(value)
    if body is not None:
        out.append((pointer, body))
    elif _is_object(value):
        for key, item in value.items():
            _walk_refs(item, f"{pointer}/{escape_token(str(key))}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk_refs(item, f"{pointer}/{i}", out)


def _resource_problems(data: Any, registry: ResourceRegistry) -> list[A2UIProblem]:
    """Why the ``$resource`` values of a call's ``data`` cannot be queried: not
    ``{"resourceId": str, "params"?: object}``, an id the server does not serve, params that do not
    fit the resource's schema, more than :data:`MAX_A2UI_RESOURCE_BINDINGS`. Raises nothing."""
    found: list[tuple[str, Any]] = []
    _walk_refs(data, "/data", found)
    problems: list[A2UIProblem] = []
    if len(found) > MAX_A2UI_RESOURCE_BINDINGS:
        return [A2UIProblem(code="too_many_resources", path="data", pointer="/data",
                            message=f"A surface binds at most {MAX_A2UI_RESOURCE_BINDINGS} data paths to resources, "
                                    f"got {len(found)}")]
    for pointer, body in found:
        at = pointer + "/" + A2UI_RESOURCE_KEY
        toolkit = pointer[1:].replace("/", ".") + "." + A2UI_RESOURCE_KEY
        rid = body.get("resourceId") if _is_object(body) else None
        params = body.get("params", {}) if _is_object(body) else None
        if not isinstance(rid, str) or not _is_object(params):
            problems.append(A2UIProblem(code="invalid_resource", path=toolkit, pointer=at,
                                        message='A resource binding is {"$resource": {"resourceId": string, '
                                                '"params": object}}'))
        elif rid not in registry:
            problems.append(A2UIProblem(code="unknown_resource", path=toolkit + ".resourceId",
                                        pointer=at + "/resourceId",
                                        message=f"No resource {rid[:128]!r} is served here (known: "
                                                f"{', '.join(registry.ids) or 'none'})"))
        else:
            bad = registry.get(rid).params_problem(params, root="$.params")
            if bad is not None:
                message, path = bad
                problems.append(A2UIProblem(code="invalid_params", path=toolkit + path[1:],
                                            pointer=at + "/params" + _dotted_to_pointer(path[len("$.params"):]),
                                            message=message))
    return problems


def _dotted_to_pointer(dotted: str) -> str:
    """``.city[0]`` (a params error's path tail) -> ``/city/0``."""
    return dotted.replace("[", ".").replace("]", "").replace(".", "/")


def _data_op_path(body: dict[str, Any]) -> str:
    """The data-model pointer an ``updateDataModel`` writes at (``/``: the whole model)."""
    path = body.get("path")
    return path if isinstance(path, str) else "/"


def a2ui_resource_bindings(operations: Iterable[Any]) -> list[A2UIResourceBinding]:
    """The resource-bound paths of a surface's operations: every ``{"$resource": {resourceId,
    params}}`` value an ``updateDataModel`` writes, as the data-model pointer it lands at (``path``
    of the operation + the pointer inside its ``value``). A later write of the same path replaces
    an earlier binding; a malformed binding (not a string id, params not an object) is skipped (the
    server refuses those to the model). Raises nothing."""
    found: dict[str, A2UIResourceBinding] = {}
    for op in operations:
        body = op.get("updateDataModel") if _is_object(op) else None
        if not _is_object(body) or not isinstance(body.get("surfaceId"), str):
            continue
        raw = _data_op_path(body)
        base = "" if raw == "/" else raw.rstrip("/")
        refs: list[tuple[str, Any]] = []
        _walk_refs(body.get("value"), base, refs)
        for stale in [p for p in found if p == base or p.startswith(base + "/") or not base]:
            del found[stale]
        for pointer, ref in refs:
            rid = ref.get("resourceId") if _is_object(ref) else None
            params = ref.get("params", {}) if _is_object(ref) else None
            if isinstance(rid, str) and rid and _is_object(params):
                found[pointer or "/"] = A2UIResourceBinding(surface_id=body["surfaceId"], path=pointer or "/",
                                                            resource_id=rid, params=params)
    return list(found.values())


def _set_pointer(doc: Any, pointer: str, value: Any) -> Any:
    """``doc`` with ``value`` at ``pointer`` (objects made on the way, an array index replaced or
    appended); the root pointer replaces ``doc``."""
    if pointer in ("", "/"):
        return value
    tokens = [unescape_token(t) for t in pointer[1:].split("/")]
    root = doc if _is_object(doc) or isinstance(doc, list) else {}
    node: Any = root
    for i, token in enumerate(tokens):
        last = i == len(tokens) - 1
        if isinstance(node, list):
            index = len(node) if token == "-" else int(token) if token.isdigit() else -1
            if not 0 <= index <= len(node):
                return root  # a path the data model cannot hold: left as it is
            if last:
                node[index:index + 1] = [value]
                return root
            if index == len(node) or not (_is_object(node[index]) or isinstance(node[index], list)):
                node[index:index + 1] = [{}]
            node = node[index]
        else:
            if last:
                node[token] = value
                return root
            if not (_is_object(node.get(token)) or isinstance(node.get(token), list)):
                node[token] = {}
            node = node[token]
    return root


def a2ui_data_model(operations: Iterable[Any], filled: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The data model a surface's ``updateDataModel`` operations leave (in order, each writing its
    ``value`` at its ``path``), with ``filled`` (data-model pointer -> value, e.g. the answers of
    :func:`a2ui_resource_bindings`' queries) written over it. Works on a copy; raises nothing."""
    model: Any = {}
    for op in operations:
        body = op.get("updateDataModel") if _is_object(op) else None
        if _is_object(body):
            model = _set_pointer(model, _data_op_path(body), json.loads(json.dumps(body.get("value"))))
    for pointer, value in (filled or {}).items():
        model = _set_pointer(model, pointer, value)
    return model if _is_object(model) else {}


# --------------------------------------------------------------------------- the tool
_TOOL_DESCRIPTION: Final = ("Render a dynamic A2UI v0.9 surface with structured parameters. "
                            "Follow the A2UI render tool usage guide provided in context.")


def _tool_parameters(registry: ResourceRegistry | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "type": "object",
        "properties": {
            "surfaceId": {"type": "string", "description": "Unique surface identifier."},
            "components": {"type": "array",
                           "description": 'A2UI v0.9 component array (flat format). The root component must '
                                          'have id "root".',
                           "items": {"type": "object"}},
            "data": {"type": "object",
                     "description": "Initial data model for the surface. Written to the root path. Use for "
                                    'pre-filling form values (e.g. {"form": {"name": "Alice"}}) or providing data '
                                    "for components bound to data model paths."},
        },
        "required": ["surfaceId", "components"],
    }
    if registry is not None and len(registry):
        # offered only when the server has resources: a data member may then be a binding the client
        # fills through the gateway (POST <path>/data/query), never a URL the model writes
        data = params["properties"]["data"]
        data["description"] += _RESOURCE_DATA_HINT
        data["additionalProperties"] = {"anyOf": [_resource_ref_schema(registry), {}]}
    return params


_RESOURCE_DATA_HINT: Final = (
    ' A data member may instead be filled by the server from a data resource: '
    '{"$resource": {"resourceId": "<id>", "params": {...}}} (the ids and their params are in this schema); '
    'bind components to its path as to any data.')


def _resource_ref_schema(registry: ResourceRegistry) -> dict[str, Any]:
    choices = []
    for resource in registry:
        body: dict[str, Any] = {"type": "object",
                                "properties": {"resourceId": {"const": resource.id}, "params": resource.params_schema},
                                "required": ["resourceId", "params"], "additionalProperties": False}
        if resource.description:
            body["description"] = resource.description
        choices.append(body)
    return {"type": "object", "properties": {A2UI_RESOURCE_KEY: {"anyOf": choices}},
            "required": [A2UI_RESOURCE_KEY], "additionalProperties": False}


def render_a2ui_tool(name: str = A2UI_TOOL, *, resources: ResourceRegistry | None = None) -> LLMTool:
    """The tool as a model sees it: the middleware's name, description and parameters (not strict:
    components are free-form objects). With ``resources`` (a non-empty registry) the ``data``
    schema also offers resource bindings (``{"$resource": {resourceId, params}}``, one choice per
    resource with its params schema)."""
    return LLMTool(name=name, description=_TOOL_DESCRIPTION, parameters=_tool_parameters(resources))


def a2ui_guide(name: str = A2UI_TOOL) -> str:
    """The usage guide the middleware puts in the context for the tool named ``name``."""
    return f"""## How to call {name}

You MUST provide ALL required arguments when calling {name}:

- **surfaceId** (string, required): Unique ID for the surface (e.g. "sales-dashboard").
- **components** (array, REQUIRED): A2UI v0.9 flat component array. NEVER omit this.
- **data** (object, optional): Initial data model for path-bound component values.

Note: the catalog id is set by the host, not by you. Do not include a catalogId argument.

### Component format (v0.9 flat)

Components are a flat array \u2014 children are referenced by ID, not nested:
- Every component has `id` (unique) and `component` (type name from the available catalog).
- The root component MUST have `id: "root"`.
- Properties go directly on the component object.
- Use `children: ["id1", "id2"]` for multiple children, `child: "id"` for a single child.

### Minimal example

```json
{{
  "surfaceId": "my-dashboard",
  "components": [
    {{ "id": "root", "component": "Column", "children": ["title", "row1"] }},
    {{ "id": "title", "component": "Title", "text": "Overview" }},
    {{ "id": "row1", "component": "Row", "children": ["m1", "m2"], "gap": 16 }},
    {{ "id": "m1", "component": "Metric", "label": "Users", "value": "1,200" }},
    {{ "id": "m2", "component": "Metric", "label": "Revenue", "value": "$50K" }}
  ]
}}
```

### Key rules

1. NEVER call {name} without the `components` array \u2014 the UI will be empty.
2. Root must be a layout component (Column, Row, Card) \u2014 not Text or Button.
3. Component IDs must be unique. A component must NOT reference itself as child.
4. Only use component names from the Available Components schema in context.
5. For data binding use `{{ "path": "/key" }}` (absolute) or `{{ "path": "key" }}` (relative inside templates).
6. For repeating content: `children: {{ componentId: "card-id", path: "/items" }}` repeats per array item.
7. Button actions: `"action": {{ "event": {{ "name": "action_name", "context": {{ ... }} }} }}` \u2014 event must be an object.
8. No placeholder images \u2014 only use real URLs or Icon components."""


def a2ui_context(catalog: A2UICatalog | None, tool_name: str = A2UI_TOOL) -> list[Context]:
    """The context entries a run adds for the model: the catalog (when the host has one) and the
    usage guide, in the middleware's order and descriptions."""
    out = [catalog.context_entry()] if catalog is not None and catalog.components else []
    out.append(Context(description=A2UI_GUIDE_CONTEXT_DESCRIPTION.format(tool_name), value=a2ui_guide(tool_name)))
    return out


# --------------------------------------------------------------------------- the surface stream
def _op(kind: str, body: dict[str, Any], version: str = A2UI_VERSION) -> dict[str, Any]:
    return {"version": version, kind: body}


def _utf16_len(text: str) -> int:
    # The middleware counts JavaScript string length (UTF-16 units) for its token estimate.
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


class A2UISurfaceStream:
    """One ``render_a2ui`` call's arguments in, ``a2ui-surface`` activity events out.

    ``A2UISurfaceStream(tool_call_id, *, catalog=None, catalog_id=None, message_id=None,
    attempt=1, max_attempts=MAX_A2UI_ATTEMPTS, progress=True)``: ``catalog`` validates the
    components (``None``: structure only); ``catalog_id`` is the host's (``None``: the
    arguments' ``catalogId`` unless ``"basic"``, else :data:`BASIC_CATALOG_ID`, as the
    middleware); ``message_id`` defaults to ``"a2ui-surface-" + tool_call_id``; ``attempt``
    counts this call among the attempts at one surface (a ``retrying`` snapshot says attempt
    ``min(attempt + 1, max_attempts)``); ``progress``: ``building`` snapshots with
    ``progressTokens``; ``resources``: the server's registry, against which the ``$resource`` data
    bindings are checked when the call ends (an unknown id or bad params refuse the call);
    ``version``: the A2UI version (default the catalog's); ``snapshots``: the surface's progress as
    whole ``ACTIVITY_SNAPSHOT`` events (``replace: true``, the whole content so far) at each step where
    an ``ACTIVITY_DELTA`` would go, for clients that do not apply activity deltas (assistant-ui):
    still component by component, the same final content, more bytes (``spec/a2ui.md``).

    :meth:`start` -> ``[building]``; :meth:`feed` (an arguments fragment) and :meth:`close`
    -> activity events. Bad arguments (malformed JSON, a limit, a refused component) are never
    raised: the call is refused (:attr:`problems`, a ``retrying`` snapshot) and later fragments
    are ignored. Raises :class:`UsageError` for a feed after :meth:`close`.
    """

    __slots__ = ("_catalog_arg", "_closed_components", "_comps", "_data", "_data_op", "_data_queue", "_emitted_tokens",
                 "_head_sent", "_ids", "_mirror", "_own", "_painted", "_ps", "_root", "_sent_components",
                 "_steps_pending", "_steps_sent", "_u16",
                 "aliases", "attempt", "catalog", "catalog_id", "closed", "components_closed", "data_closed", "max_attempts",
                 "message_id", "problems", "progress", "quiet", "resources", "snapshots", "surface_id", "tool_call_id",
                 "version")

    def __init__(self, tool_call_id: str, *, catalog: A2UICatalog | None = None, catalog_id: str | None = None,
                 message_id: str | None = None, attempt: int = 1, max_attempts: int = MAX_A2UI_ATTEMPTS,
                 progress: bool = True, resources: ResourceRegistry | None = None, version: str | None = None,
                 snapshots: bool = False, aliases: bool = False) -> None:
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise UsageError(f"max_attempts must be a positive int, got {max_attempts!r}")
        if version is not None and version not in A2UI_VERSIONS:
            raise UsageError(f"A2UI versions are {list(A2UI_VERSIONS)}, got {version!r}")
        #: The A2UI version the operations carry and whose rules apply (default: the catalog's, else v0.9).
        self.version = _version_of(catalog, version)
        #: Progress as whole snapshots instead of deltas (clients without ACTIVITY_DELTA).
        self.snapshots = snapshots
        #: Snapshot mode: each component also carries the aliases assistant-ui's converter reads
        #: (:func:`~agui_engine.genui.a2ui_clients.whole_surface_component`).
        self.aliases = aliases and snapshots
        self._steps_sent = 0  # snapshot mode: steps the client has, and steps since its last snapshot
        self._steps_pending = 0
        self.tool_call_id = tool_call_id
        self.catalog = catalog
        self.catalog_id = catalog_id or None
        self.message_id = message_id or f"a2ui-surface-{tool_call_id}"
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.progress = progress
        #: The server's resources: ``$resource`` data bindings are checked against them at the close
        #: (``None``: a ``$resource`` value is plain data, as the middleware passes it).
        self.resources = resources
        self._ps = PatchStream(append_strings=True, max_depth=MAX_A2UI_JSON_DEPTH, max_bytes=MAX_A2UI_ARGS_BYTES)
        self._root: dict[str, Any] | None = None
        self._comps: list[Any] | None = None
        self._own: list[list[A2UIProblem]] = []
        self._ids: set[str] = set()
        self._closed_components = 0  # components whose object has closed (all checked on their own)
        self._sent_components = 0  # of those, how many the client has
        self._painted = False
        self._data: dict[str, Any] | None = None
        self._data_queue: deque[str] = deque()  # data members begun, not yet sent whole
        self._head_sent = -1  # elements of the head member (an array) already sent; -1: member not sent
        self._mirror: dict[str, Any] = {}  # what the client's updateDataModel value holds
        self._data_op = False  # whether the client has the updateDataModel operation
        self._catalog_arg: str | None = None
        self._u16 = 0
        self._emitted_tokens = 0
        #: The ``surfaceId`` argument once its string has closed.
        self.surface_id: str | None = None
        #: Why the call is refused (empty while it is not).
        self.problems: list[A2UIProblem] = []
        self.components_closed = False
        self.data_closed = False
        self.closed = False
        #: No progress snapshots (set while an earlier attempt's ``retrying`` is on the client).
        self.quiet = False

    # ------------------------------------------------------------------ public
    @property
    def valid(self) -> bool:
        """Whether the call is (so far) drawable: not refused."""
        return not self.problems

    @property
    def painted(self) -> bool:
        """Whether the client has the surface (a ``createSurface`` has been sent and not withdrawn)."""
        return self._painted and not self.problems

    @property
    def resolved_catalog_id(self) -> str:
        """The catalog id ``createSurface`` carries (host's, else the arguments', else basic)."""
        if self.catalog_id:
            return self.catalog_id
        if self._catalog_arg and self._catalog_arg != "basic":
            return self._catalog_arg
        return BASIC_CATALOG_V1_ID if self.version == A2UI_V1_VERSION else BASIC_CATALOG_ID

    @property
    def operations(self) -> list[dict[str, Any]] | None:
        """The surface's operations after a valid :meth:`close` (``None`` otherwise)."""
        if not self.closed or self.problems or self.surface_id is None or self._comps is None:
            return None
        return self._operations(list(self._comps), self._data if self.data_closed else None)

    def start(self) -> ActivitySnapshotEvent:
        """The ``building`` snapshot a call begins with."""
        return self._snapshot({"status": "building"})

    def feed(self, fragment: str) -> list[AnyEvent]:
        """The next fragment of the arguments -> the activity events it causes, in order."""
        if self.closed:
            raise UsageError(f"A2UISurfaceStream.feed() after close() (tool call {self.tool_call_id})")
        if self.problems:
            return []
        out: list[AnyEvent] = []
        if self.progress and not self._painted and not self.quiet:
            self._u16 += _utf16_len(fragment)
            tokens = (self._u16 + 2) // 4  # Math.round(length / 4)
            if tokens - self._emitted_tokens >= A2UI_PROGRESS_TOKEN_STEP:
                self._emitted_tokens = tokens
                out.append(self._snapshot({"status": "building", "progressTokens": tokens}))
        try:
            ops = self._ps.feed(fragment)
        except JSONStreamError as exc:
            return out + self._refuse([self._json_problem(exc)])
        return out + self._advance(ops)

    def close(self) -> list[AnyEvent]:
        """End of the arguments -> the last events: a refusal if they stopped early or the call
        never gave what a surface needs. Calling it again returns ``[]``."""
        if self.closed:
            return []
        self.closed = True
        if self.problems:
            return []
        try:
            ops = self._ps.close()
        except JSONStreamError as exc:
            return self._refuse([self._json_problem(exc)])
        out = self._advance(ops)
        if self.problems:
            return out
        root = self._root
        if not isinstance(root, dict) or not isinstance(root.get("surfaceId"), str):
            return out + self._refuse([A2UIProblem(code="missing_surface_id", path="surfaceId", pointer="/surfaceId",
                                                   message="The arguments have no string 'surfaceId'")])
        if not self.components_closed:
            return out + self._refuse(validate_components(root.get("components")))
        if self.resources is not None and "data" in root:
            bad = _resource_problems(root["data"], self.resources)
            if bad:
                return out + self._refuse(bad)
        if self._steps_pending:  # snapshot mode: what the last steps added, shown at the end
            out.append(self._whole())
        return out

    def tool_result(self) -> tuple[str, str | None]:
        """What the model reads after the call: ``(content, error or None)``. A refusal lists every
        problem (code, toolkit path, component id, JSON Pointer, message) and the attempts left."""
        if not self.problems:
            return _RENDERED_RESULT, None
        first = self.problems[0]
        error = f"the A2UI surface was refused: [{first.code}] {first.path}: {first.message}"
        left = self.max_attempts - self.attempt
        tail = (f"Fix these and call {A2UI_TOOL} again ({left} attempt{'s' if left != 1 else ''} left)."
                if left > 0 else "No attempts are left; do not call it again for this surface.")
        lines = "\n".join(p.describe() for p in self.problems)
        return (f"Error: the A2UI surface was not shown. Nothing of it is on the screen.\n{lines}\n{tail}", error)

    def attempt_record(self) -> dict[str, Any]:
        """This call as the toolkit records an attempt: ``{attempt, ok, errors}``."""
        return {"attempt": self.attempt, "ok": not self.problems, "errors": [p.to_json() for p in self.problems]}

    def failed_snapshot(self, attempts: list[dict[str, Any]]) -> ActivitySnapshotEvent:
        """The ``failed`` snapshot once the attempts at this surface are used up."""
        return self._snapshot({"status": "failed",
                               "error": f"Failed to generate valid A2UI after {self.max_attempts} attempt(s)",
                               "attempts": attempts, "maxAttempts": self.max_attempts})

    # ------------------------------------------------------------------ internals
    def _snapshot(self, content: dict[str, Any]) -> ActivitySnapshotEvent:
        return ActivitySnapshotEvent(message_id=self.message_id, activity_type=A2UI_ACTIVITY_TYPE, content=content,
                                     replace=True)

    def _step(self, patch: JsonPatch) -> list[AnyEvent]:
        """The events of the step ``patch`` makes: the patch itself as an ``ACTIVITY_DELTA``, or
        (``snapshots``) the whole content after it when :data:`A2UI_SNAPSHOT_GROWTH` says a snapshot is due."""
        if not patch:
            return []
        if not self.snapshots:
            return [ActivityDeltaEvent(message_id=self.message_id, activity_type=A2UI_ACTIVITY_TYPE, patch=patch)]
        self._steps_pending += len(patch)
        if self._steps_pending < max(1, self._steps_sent // A2UI_SNAPSHOT_GROWTH):
            return []
        return [self._whole()]

    def _whole(self) -> ActivitySnapshotEvent:
        """Snapshot mode: the whole content the client should have now (the components sent, and the data
        model when the updateDataModel operation was sent)."""
        self._steps_sent += self._steps_pending
        self._steps_pending = 0
        sent = list((self._comps or [])[:self._sent_components])
        return self._snapshot({A2UI_OPERATIONS_KEY: self._operations(
            sent, self._mirror_copy() if self._data_op else None)})

    def _operations(self, components: list[Any], data: dict[str, Any] | None) -> list[dict[str, Any]]:
        if self.aliases:
            components = [whole_surface_component(c) for c in components]
        sid = self.surface_id
        v = self.version
        ops = [_op("createSurface", {"surfaceId": sid, "catalogId": self.resolved_catalog_id}, v),
               _op("updateComponents", {"surfaceId": sid, "components": components}, v)]
        if data is not None:
            ops.append(_op("updateDataModel", {"surfaceId": sid, "path": "/", "value": data}, v))
        return ops

    def _json_problem(self, exc: JSONStreamError) -> A2UIProblem:
        code = "too_large" if isinstance(exc, LimitExceededError) else "invalid_arguments"
        return A2UIProblem(code=code, path="arguments", message=f"The arguments are not valid here: {exc.message}",
                           pointer=getattr(exc, "pointer", "") or "")

    def _refuse(self, problems: list[A2UIProblem]) -> list[AnyEvent]:
        self.problems = problems
        attempt = min(self.attempt + 1, self.max_attempts)
        return [self._snapshot({"status": "retrying", "attempt": attempt, "maxAttempts": self.max_attempts,
                                "errors": [p.to_json() for p in problems]})]

    def _advance(self, ops: list[dict[str, Any]]) -> list[AnyEvent]:
        """Look at what closed since the last fragment (O(1) probes of the tokenizer's open chain,
        plus the values that closed): components, ``surfaceId``, ``catalogId``, data members."""
        ps = self._ps
        root = self._root
        if root is None:
            value = ps.value
            if value is None:
                return []
            if not isinstance(value, dict):
                return self._refuse([A2UIProblem(code="invalid_arguments", path="arguments", pointer="",
                                                 message="The arguments must be a JSON object")])
            root = self._root = value
        open1 = ps.open_pointer(1)
        if self.surface_id is None and open1 != "/surfaceId" and isinstance(root.get("surfaceId"), str):
            self.surface_id = root["surfaceId"]
        if self._catalog_arg is None and open1 != "/catalogId" and isinstance(root.get("catalogId"), str):
            self._catalog_arg = root["catalogId"]
            known = {"basic", self.catalog.catalog_id if self.catalog is not None else "", self.catalog_id or ""}
            if self.catalog is not None and self._catalog_arg not in known:
                # the client would be asked to draw with a catalog nobody validated (or has)
                return self._refuse([A2UIProblem(
                    code="unknown_catalog", path="catalogId", pointer="/catalogId",
                    message=f"Catalog '{self._catalog_arg}' is not this host's; omit catalogId "
                            f"(the host's is '{self.catalog.catalog_id}')")])
        comps = self._comps
        if comps is None and "components" in root:
            value = root["components"]
            if not isinstance(value, list):
                if open1 == "/components":
                    return []  # a scalar still being typed: judged when it closes
                return self._refuse(validate_components(value))
            comps = self._comps = value
        if comps is not None and not self.components_closed:
            refused = self._advance_components(comps, open1)
            if refused:
                return refused
        data_patch = self._advance_data(root, open1, ops)
        if self.surface_id is None or self._closed_components == 0 or comps is None:
            return []
        if not self._painted:
            self._painted = True
            self._sent_components = self._closed_components
            self._steps_sent = max(1, self._closed_components)
            self._data_op = bool(self._mirror) or self.data_closed
            content = {A2UI_OPERATIONS_KEY: self._operations(list(comps[:self._closed_components]),
                                                             self._mirror_copy() if self._data_op else None)}
            return [self._snapshot(content)]
        patch: JsonPatch = []
        if self._sent_components < self._closed_components:
            path = f"/{A2UI_OPERATIONS_KEY}/1/updateComponents/components/-"
            patch += [AddOperation(path=path, value=comps[i])
                      for i in range(self._sent_components, self._closed_components)]
            self._sent_components = self._closed_components
        patch += data_patch
        return self._step(patch)

    def _advance_components(self, comps: list[Any], open1: str | None) -> list[AnyEvent]:
        """Check each component that closed on its own (a refusal comes back at once); the whole
        list when the array closed. Returns the refusal's events, ``[]`` while all is well."""
        if open1 == "/components":
            open2 = self._ps.open_pointer(2)
            closed = len(comps) if open2 is None else int(open2.rsplit("/", 1)[1])
        else:
            closed = len(comps)
            self.components_closed = True
        while self._closed_components < closed:
            i = self._closed_components
            if i >= MAX_A2UI_COMPONENTS:
                self.components_closed = True
                return self._refuse([A2UIProblem(
                    code="too_many_components", path="components", pointer=f"/components/{i}",
                    message=f"A surface holds at most {MAX_A2UI_COMPONENTS} components")])
            comp = comps[i]
            own = _own_problems(comp, i, self.catalog, self.version)
            self._own.append(own)
            cid = comp.get("id") if _is_object(comp) else None
            if isinstance(cid, str):
                if cid in self._ids:  # certain already; the close lists every problem in the toolkit's order
                    own = [*own, A2UIProblem(code="duplicate_id", path=f"components[id={cid}]", component_id=cid,
                                             message=f"Duplicate component id '{cid}'", pointer=f"/components/{i}/id")]
                self._ids.add(cid)
            if own:
                return self._refuse(own)
            self._closed_components = i + 1
        if self.components_closed:
            problems = validate_components(comps, self.catalog, own=self._own, version=self.version)
            if problems:
                return self._refuse(problems)
        return []

    # Data members: each sent whole when it closes, an array member element by element. Until the
    # surface paints they only collect in the mirror (``_mirror``: what the client's
    # updateDataModel value holds), which the paint sends at once.
    def _advance_data(self, root: dict[str, Any], open1: str | None, ops: list[dict[str, Any]]) -> JsonPatch:
        if self.data_closed:
            return []
        data = self._data
        if data is None:
            value = root.get("data")
            if not isinstance(value, dict):
                return []
            data = self._data = value
        for op in ops:  # members begin with an add of /data/<key> (the tokenizer's ops: no dict scan)
            path = op["path"]
            if op["op"] == "add" and path.startswith("/data/") and path.count("/") == 2:
                self._data_queue.append(unescape_token(path[6:]))
        data_open = open1 == "/data"
        open2 = self._ps.open_pointer(2) if data_open else None
        changes: list[tuple[str, str, Any]] = []
        queue = self._data_queue
        while queue:
            key = queue[0]
            value = data.get(key)
            still_open = open2 == "/data/" + escape_token(key)
            if isinstance(value, list):
                closed = len(value)
                if still_open:
                    open3 = self._ps.open_pointer(3)
                    if open3 is not None:
                        closed = int(open3.rsplit("/", 1)[1])
                if self._head_sent < 0:
                    if closed or not still_open:
                        changes.append(("set", key, list(value[:closed])))
                        self._head_sent = closed
                else:
                    changes += [("append", key, value[j]) for j in range(self._head_sent, closed)]
                    self._head_sent = max(self._head_sent, closed)
            elif not still_open:
                changes.append(("set", key, value))
            if still_open:
                break
            queue.popleft()
            self._head_sent = -1
        if not data_open:
            self.data_closed = True
            changes.append(("close", "", None))
        return self._apply_data(changes)

    def _apply_data(self, changes: list[tuple[str, str, Any]]) -> JsonPatch:
        mirror = self._mirror
        patch: JsonPatch = []
        base = f"/{A2UI_OPERATIONS_KEY}/2"
        for kind, key, value in changes:
            if kind == "set":
                mirror[key] = value
            elif kind == "append":
                mirror[key].append(value)
            if not self._painted:
                continue
            if not self._data_op:
                if kind == "close" or mirror:
                    self._data_op = True
                    patch.append(AddOperation(path=base, value=_op(
                        "updateDataModel", {"surfaceId": self.surface_id, "path": "/", "value": self._mirror_copy()},
                        self.version)))
            elif kind == "set":
                patch.append(AddOperation(path=f"{base}/updateDataModel/value/{escape_token(key)}",
                                          value=list(value) if isinstance(value, list) else value))
            elif kind == "append":
                patch.append(AddOperation(path=f"{base}/updateDataModel/value/{escape_token(key)}/-", value=value))
        return patch

    def _mirror_copy(self) -> dict[str, Any]:
        # Top-level lists of the mirror are this stream's own and still grow: a sent copy stays as sent.
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self._mirror.items()}


# --------------------------------------------------------------------------- the middleware as a feed
def _context_catalog_id(run_input: RunAgentInput | None) -> str | None:
    """The ``catalogId`` of the front end's catalog entry (the middleware reads only the id here;
    an entry that is not JSON names none)."""
    if run_input is None:
        return None
    for entry in run_input.context:
        if entry.description == A2UI_SCHEMA_CONTEXT_DESCRIPTION:
            try:
                value = json.loads(entry.value)
            except ValueError:
                return None
            cid = value.get("catalogId") if isinstance(value, dict) else None
            return cid if isinstance(cid, str) and cid else None
    return None


def _operations_envelope(content: Any) -> list[dict[str, Any]] | None:
    """The operations of a tool result holding ``{"a2ui_operations": [...]}`` (or that JSON as a
    JSON string), non-objects dropped; ``None`` for any other content."""
    if not isinstance(content, str):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict) and isinstance(value.get(A2UI_OPERATIONS_KEY), list):
        return [op for op in value[A2UI_OPERATIONS_KEY] if isinstance(op, dict)]
    return None


def _exhausted_envelope(content: Any) -> dict[str, Any] | None:
    if not isinstance(content, str):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("code") == _RECOVERY_EXHAUSTED:
        return value
    return None


def _operation_surface(op: dict[str, Any]) -> str | None:
    for kind in ("createSurface", "updateComponents", "updateDataModel", "deleteSurface"):
        body = op.get(kind)
        if isinstance(body, dict) and body.get("surfaceId") is not None:
            sid = body["surfaceId"]
            return sid if isinstance(sid, str) else str(sid)
    return None


def _js_json(value: Any) -> str:
    # JSON.stringify's form: no spaces, non-ASCII kept.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class A2UITransformer:
    """``@ag-ui/a2ui-middleware``'s stream processing as a feed: an inner agent's events in, the same
    events plus ``a2ui-surface`` activities out.

    ``A2UITransformer(run_input=None, *, catalog=None, catalog_id=None, tool_names=(A2UI_TOOL,),
    max_attempts=MAX_A2UI_ATTEMPTS, progress=True, ids=new_id)``: ``catalog`` validates the
    components; ``catalog_id`` is the host's (else the front end's context entry's, else the
    arguments', else basic); ``tool_names`` are the tools whose calls are surfaces (an agent's own
    A2UI tool name); ``ids`` mints the message ids of the tool results it adds; ``resources``: the
    server's registry (each surface stream checks its ``$resource`` bindings against it).

    :meth:`feed` an event -> events: a surface tool call's activity events come before the
    event that caused them; a call of another tool is the *outer* call of the surface calls made
    while it runs (one activity, attempts counted together); a tool result holding
    ``{"a2ui_operations": [...]}`` is drawn (an agent that renders A2UI by other means), one holding
    the toolkit's ``a2ui_recovery_exhausted`` envelope shows ``failed``. ``RUN_FINISHED`` is held:
    :meth:`close` adds a ``TOOL_CALL_RESULT`` for every surface call nobody answered
    (``{"status":"rendered"}``, or the refusal the model must read) and then releases it.
    Raises nothing for bad input (a refused surface is an activity and a tool result).
    """

    __slots__ = ("_answered", "_held", "_ids", "_outer", "_painted_surfaces", "_pending", "_retrying", "_starts",
                 "_streams", "aliases", "catalog", "catalog_id", "max_attempts", "progress", "resources", "snapshots",
                 "tool_names")

    def __init__(self, run_input: RunAgentInput | None = None, *, catalog: A2UICatalog | None = None,
                 catalog_id: str | None = None, tool_names: Iterable[str] = (A2UI_TOOL,),
                 max_attempts: int = MAX_A2UI_ATTEMPTS, progress: bool = True, ids: IdFactory = new_id,
                 resources: ResourceRegistry | None = None, snapshots: bool = False, aliases: bool = False) -> None:
        self.tool_names = frozenset(tool_names)
        #: Surfaces' progress as whole snapshots (:class:`A2UISurfaceStream` ``snapshots``), with the
        #: converter aliases (``aliases``).
        self.snapshots = snapshots
        self.aliases = aliases
        if not self.tool_names or not all(isinstance(n, str) and n for n in self.tool_names):
            raise UsageError(f"tool_names must be non-empty tool names, got {tool_names!r}")
        self.catalog = catalog
        self.catalog_id = catalog_id or _context_catalog_id(run_input)
        self.max_attempts = max_attempts
        self.progress = progress
        self.resources = resources
        self._ids = ids
        self._streams: dict[str, A2UISurfaceStream] = {}
        self._outer: str | None = None
        self._starts: dict[str, int] = {}
        self._retrying: set[str] = set()
        self._painted_surfaces: set[str] = set()
        self._held: AnyEvent | None = None
        self._pending: list[str] = []
        self._answered: set[str] = set()
        if run_input is not None:
            answered = {m.tool_call_id for m in run_input.messages if isinstance(m, ToolMessage)}
            for m in run_input.messages:
                if isinstance(m, AssistantMessage):
                    self._pending += [c.id for c in m.tool_calls or () if c.function.name in self.tool_names
                                      and c.id not in answered]

    def stream(self, tool_call_id: str) -> A2UISurfaceStream | None:
        """The surface stream of a call of a surface tool (``None`` for other calls)."""
        return self._streams.get(tool_call_id)

    def feed(self, event: AnyEvent) -> list[AnyEvent]:
        """One inner event -> the events to send on, in order (see the class docstring)."""
        out: list[AnyEvent] = []
        if isinstance(event, ToolCallStartEvent):
            if event.tool_call_name in self.tool_names:
                key = self._outer or event.tool_call_id
                self._starts[key] = self._starts.get(key, 0) + 1
                stream = A2UISurfaceStream(event.tool_call_id, catalog=self.catalog, catalog_id=self.catalog_id,
                                           message_id=f"a2ui-surface-{key}", attempt=self._starts[key],
                                           max_attempts=self.max_attempts, progress=self.progress,
                                           resources=self.resources, snapshots=self.snapshots,
                                           aliases=self.aliases)
                self._streams[event.tool_call_id] = stream
                self._pending.append(event.tool_call_id)
                stream.quiet = key in self._retrying
                if not stream.quiet:
                    out.append(stream.start())
            elif event.tool_call_name != A2UI_LOG_EVENT_TOOL:
                self._outer = event.tool_call_id
        elif isinstance(event, ToolCallArgsEvent):
            open_stream = self._streams.get(event.tool_call_id)
            if open_stream is not None and not open_stream.closed:
                out += self._followed(open_stream, open_stream.feed(event.delta))
        elif event.type == "TOOL_CALL_END":
            open_stream = self._streams.get(getattr(event, "tool_call_id", ""))
            if open_stream is not None:
                out += self._followed(open_stream, open_stream.close())
        if self._held is not None:
            out.append(self._held)
            self._held = None
        if isinstance(event, RunFinishedEvent):
            self._held = event
            return out
        out.append(event)
        if isinstance(event, ToolCallResultEvent):
            out += self._result(event)
        return out

    def close(self) -> list[AnyEvent]:
        """End of the inner stream -> the tool results nobody gave, then the held ``RUN_FINISHED``."""
        if self._held is None:
            return []
        out: list[AnyEvent] = []
        for call_id in self._pending:
            if call_id in self._answered:
                continue
            self._answered.add(call_id)
            stream = self._streams.get(call_id)
            content = stream.tool_result()[0] if stream is not None else _RENDERED_RESULT
            out.append(ToolCallResultEvent(message_id=self._ids(), tool_call_id=call_id, content=content))
        out.append(self._held)
        self._held = None
        return out

    def _followed(self, stream: A2UISurfaceStream, events: list[AnyEvent]) -> list[AnyEvent]:
        key = stream.message_id[len("a2ui-surface-"):]
        if stream.problems:
            self._retrying.add(key)
        elif stream.painted:
            self._retrying.discard(key)
            if stream.surface_id is not None:
                self._painted_surfaces.add(stream.surface_id)
        return events

    def _result(self, event: ToolCallResultEvent) -> list[AnyEvent]:
        call_id = event.tool_call_id
        self._answered.add(call_id)
        out: list[AnyEvent] = []
        stream = self._streams.get(call_id)
        shown = stream is not None and stream.painted
        if not shown:
            shown = any(s.painted and s.message_id == f"a2ui-surface-{call_id}" and s.tool_call_id != call_id
                        for s in self._streams.values())
        if not shown:
            anchor = self._outer or call_id
            ops = _operations_envelope(event.content)
            if ops is not None:
                if self._painted_surfaces:
                    ops = [op for op in ops if (_operation_surface(op) or None) not in self._painted_surfaces
                           or _operation_surface(op) is None]
                out += self._activities(ops, anchor)
            else:
                failed = _exhausted_envelope(event.content)
                if failed is not None:
                    attempts = failed.get("attempts")
                    attempts = attempts if attempts is not None else []
                    content = {"status": "failed", "error": str(failed.get("error") or "A2UI generation failed"),
                               "attempts": attempts,
                               "maxAttempts": len(attempts) if isinstance(attempts, list) and attempts
                               else self.max_attempts}
                    out.append(ActivitySnapshotEvent(message_id=f"a2ui-surface-{anchor}",
                                                     activity_type=A2UI_ACTIVITY_TYPE, content=content, replace=True))
                    self._retrying.discard(anchor)
        if self._outer == call_id:
            self._outer = None
        return out

    def _activities(self, ops: list[dict[str, Any]], anchor: str) -> list[AnyEvent]:
        """Operations from a tool result: one snapshot per surface (named by the surface when there
        are several), as the middleware groups them."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for op in ops:
            groups.setdefault(_operation_surface(op) or "default", []).append(op)
        single = len(groups) == 1
        return [ActivitySnapshotEvent(message_id=f"a2ui-surface-{anchor}" if single else f"a2ui-surface-{sid}-{anchor}",
                                      activity_type=A2UI_ACTIVITY_TYPE, content={A2UI_OPERATIONS_KEY: group},
                                      replace=True)
                for sid, group in groups.items()]


# --------------------------------------------------------------------------- user actions
def a2ui_user_action(run_input: RunAgentInput, *, known_surfaces: Iterable[str] | None = None,
                     ids: IdFactory = new_id) -> RunAgentInput:
    """``run_input`` with its A2UI user action, if any, turned into messages the model reads.

    A front end sends a button action or a form submit as
    ``forwardedProps.a2uiAction.userAction`` = ``{name, surfaceId, sourceComponentId?, context?}``;
    like the middleware, this appends an assistant message calling :data:`A2UI_LOG_EVENT_TOOL`
    (arguments: the action) and its tool result (``User performed action "submit" on surface
    "form" (component: btn). Context: {...}``), so the next model turn answers it. ``run_input``
    is returned unchanged without an action. Raises :class:`A2UIActionError` for an action that
    is not an object, or (with ``known_surfaces``, the surfaces this thread rendered) one on a
    surface that does not exist.
    """
    props = run_input.forwarded_props
    holder = props.get("a2uiAction") if isinstance(props, dict) else None
    action = holder.get("userAction") if isinstance(holder, dict) else None
    if not action:
        return run_input
    if not isinstance(action, dict):
        raise A2UIActionError("forwardedProps.a2uiAction.userAction must be an object "
                              f"{{name, surfaceId, ...}}, got {type(action).__name__}")
    name = action.get("name") if action.get("name") is not None else "unknown_action"
    surface = action.get("surfaceId") if action.get("surfaceId") is not None else "unknown_surface"
    if known_surfaces is not None and surface not in set(known_surfaces):
        raise A2UIActionError(f"the A2UI action {name!r} (forwardedProps.a2uiAction.userAction) names surface "
                              f"{surface!r}, which this thread never rendered")
    call_id = ids()
    text = f'User performed action "{name}" on surface "{surface}"'
    if action.get("sourceComponentId"):
        text += f" (component: {action['sourceComponentId']})"
    text += f". Context: {_js_json(action['context']) if action.get('context') else '{}'}"
    call = AssistantMessage(id=ids(), content="", tool_calls=[ToolCall(id=call_id, function=FunctionCall(
        name=A2UI_LOG_EVENT_TOOL, arguments=_js_json(action)))])
    result = ToolMessage(id=ids(), tool_call_id=call_id, content=text)
    return msgspec.structs.replace(run_input, messages=[*run_input.messages, call, result])


# --------------------------------------------------------------------------- one run, as a loop offers it
#: The ``forwardedProps`` flag ``@ag-ui/a2ui-middleware`` sets when it injects its tool (``injectA2UITool``).
A2UI_INJECT_FLAG: Final = "injectA2UITool"


def a2ui_client_applies(run_input: RunAgentInput, tool_name: str = A2UI_TOOL) -> bool:
    """Whether a client-side A2UI middleware already applies A2UI to this run: ``@ag-ui/a2ui-middleware``
    with ``injectA2UITool`` puts its ``render_a2ui`` tool into ``RunAgentInput.tools`` (and sets
    ``forwardedProps.injectA2UITool``) before the run reaches the agent, then turns the calls into
    surfaces itself. Either sign says so. A loop that sees it must not apply A2UI a second time (the two
    would write surfaces under the same message ids)."""
    props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    flag = props.get(A2UI_INJECT_FLAG)
    return bool(flag) or any(tool.name == tool_name for tool in run_input.tools)


def a2ui_catalog_option(a2ui: A2UICatalog | bool | None, where: str) -> A2UICatalog | None:
    """A loop's ``a2ui=`` argument: a catalog, ``True`` (the basic catalog) or ``None``/``False``
    (no A2UI). Raises :class:`UsageError` naming ``where`` for anything else."""
    if a2ui is None or a2ui is False:
        return None
    if a2ui is True:
        return A2UICatalog.basic()
    if isinstance(a2ui, A2UICatalog):
        return a2ui
    raise UsageError(f"{where}: a2ui must be an A2UICatalog or True, got {type(a2ui).__name__}")


def a2ui_negotiate(run_input: RunAgentInput, host: A2UICatalog) -> A2UICatalog:
    """The catalog (and so the A2UI version) a run's surfaces use, from what the client declares.

    In order: the front end's catalog in ``RunAgentInput.context`` (the middleware's entry; its
    ``protocolVersion`` says its version, absent = v0.9); else the client's renderer capabilities in
    ``forwardedProps.a2uiClientCapabilities`` (``{"v1.0": {"supportedCatalogIds": [...]}, "v0.9": ...}``,
    the A2A extension's shape), newest version first: the host's catalog when its version and id are
    declared, or the basic catalog of that version when the host serves the basic catalog and the client
    lists its id; else the host's catalog (a client that declares nothing gets what it gets today).
    Raises :class:`A2UICatalogError` for a context entry or capabilities that are malformed."""
    client = A2UICatalog.from_context(run_input.context)
    if client is not None:
        return client
    props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    caps = props.get(A2UI_CLIENT_CAPABILITIES_KEY)
    if caps is None:
        return host
    if not _is_object(caps):
        raise A2UICatalogError(f"forwardedProps.{A2UI_CLIENT_CAPABILITIES_KEY} must be an object keyed by A2UI "
                               "version, e.g. {\"v1.0\": {\"supportedCatalogIds\": [...]}}")
    basic_host = host.catalog_id in (BASIC_CATALOG_ID, BASIC_CATALOG_V1_ID)
    for version in reversed(A2UI_VERSIONS):
        entry = caps.get(version)
        if entry is None:
            continue
        ids = entry.get("supportedCatalogIds") if _is_object(entry) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise A2UICatalogError(f"forwardedProps.{A2UI_CLIENT_CAPABILITIES_KEY}.{version}.supportedCatalogIds "
                                   "must be a list of catalog ids")
        if host.version == version and host.catalog_id in ids:
            return host
        if basic_host and A2UICatalog.basic(version).catalog_id in ids:
            return A2UICatalog.basic(version)
    return host


def prepare_a2ui_run(run_input: RunAgentInput, catalog: A2UICatalog, *, tool_name: str = A2UI_TOOL,
                     ids: IdFactory = new_id, resources: ResourceRegistry | None = None,
                     snapshots: A2UISnapshots = False) -> tuple[RunAgentInput, A2UITransformer]:
    """What a loop does before an agent runs with A2UI, as the middleware does: the user action in
    ``forwardedProps`` becomes a ``log_a2ui_event`` call and result, ``render_a2ui`` joins the tools
    (replacing one of that name), the host's catalog replaces the front end's context entry and the
    usage guide is added. Returns the agent's input and the transformer of its events (which
    validates against the front end's catalog when it sent one, else ``catalog``). ``resources``
    (a non-empty registry): the tool offers ``$resource`` data bindings and the transformer checks them.
    ``snapshots``: surfaces progress as whole snapshots (clients without ``ACTIVITY_DELTA``); ``"auto"``:
    when the run's client is one of those (:func:`~agui_engine.genui.a2ui_clients.run_wants_snapshots`).
    A run from assistant-ui's runtime in snapshot mode also gets the aliases its converter reads.

    Raises :class:`A2UIActionError` / :class:`A2UICatalogError` for a bad action or a front-end
    catalog that is not one (remote input: the request is refused before the run)."""
    client = A2UICatalog.from_context(run_input.context)
    if client is None:  # the version and catalog the client declares it renders (a2ui_negotiate)
        catalog = a2ui_negotiate(run_input, catalog)
    out = a2ui_user_action(run_input, ids=ids)
    registry = resources if resources is not None and len(resources) else None
    tool = render_a2ui_tool(tool_name, resources=registry)
    tools = [t for t in out.tools if t.name != tool_name]
    tools.append(_protocol_tool(tool))
    guide = A2UI_GUIDE_CONTEXT_DESCRIPTION.format(tool_name)
    context = [c for c in out.context if c.description not in (A2UI_SCHEMA_CONTEXT_DESCRIPTION, guide)]
    context += a2ui_context(catalog, tool_name)
    inner = msgspec.structs.replace(out, tools=tools, context=context)
    whole = run_wants_snapshots(run_input, snapshots)
    transformer = A2UITransformer(run_input, catalog=client or catalog, tool_names=(tool_name,), ids=ids,
                                  resources=registry, snapshots=whole,
                                  aliases=whole and from_assistant_ui(run_input))
    return inner, transformer


def a2ui_wire_tools(catalog: A2UICatalog | None, tool_name: str = A2UI_TOOL, *,
                    resources: ResourceRegistry | None = None) -> list[Tool]:
    """``[render_a2ui]`` as an AG-UI tool when a loop offers A2UI (``catalog`` not ``None``), else ``[]``:
    what ``capabilities()`` adds to ``tools.items`` (with ``resources``, its resource bindings)."""
    if catalog is None:
        return []
    registry = resources if resources is not None and len(resources) else None
    return [_protocol_tool(render_a2ui_tool(tool_name, resources=registry))]


def _protocol_tool(tool: LLMTool) -> Tool:
    return Tool(name=tool.name, description=tool.description, parameters=tool.parameters)
