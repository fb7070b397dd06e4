"""Data resources: what a component may fetch through the gateway, declared on the server.

Theory of operation
-------------------
A component that shows live data should not receive a URL the model wrote. The
model chooses *business meaning* -- a resource id and its params -- and the
component asks the gateway for the data (``POST <path>/data/query
{resourceId, params}``, or a ``query`` message on the WebSocket). The server
decides what each id means:

* :class:`Resource` -- an id (``weather.current``), a params schema (a JSON Schema
  object or a msgspec ``Struct`` type), a *resolver* ``resolver(params, identity)``
  (sync or ``async def``) returning JSON-encodable data, a timeout, an optional cache
  TTL, an optional concurrency limit, a largest result size, and an optional
  *permission* hook ``permission(identity, params) -> bool`` (sync or async).
  ``identity`` is the principal the gateway's bearer auth names (``None`` with auth
  off, ``""`` for the single shared token).
* :class:`ResourceRegistry` -- the resources a server serves, by id.
* A :class:`~agui_engine.genui.components.Component` built with ``resources=[...]`` gets
  ``resourceId`` (an ``enum`` of exactly those ids) and ``params`` (the resources'
  params schemas) in its props schema, so the model can only choose among them;
  when the call ends ``props_problem`` validates ``params`` against the chosen
  resource's schema (:meth:`Resource.params_problem`), and a mismatch goes back to
  the model like every props mismatch.

The core only declares and validates. Calling resolvers, timeouts, caching and
concurrency belong to the transports (``agui_engine.transports.data``), which raise
the errors declared here so that the HTTP endpoint, the WebSocket message and the
Python clients share one vocabulary:

=============================  ======  ====  =======================  ==============================
error                          HTTP    WS    code                     when
=============================  ======  ====  =======================  ==============================
UnknownResourceError           404     4404  ``unknown_resource``     no resource has that id
ResourceParamsError            422     4422  ``invalid_params``       params do not fit the schema
                                                                      (``path``: the JSON path)
ResourcePermissionError        403     4403  ``forbidden``            the permission hook said no
ResourceBusyError              503     4503  ``resource_busy``        the concurrency limit stayed
                                                                      full for the whole wait
ResourceFailedError            502     4502  ``resource_failed``      the resolver (or the hook)
                                                                      raised, or returned non-JSON
ResourceResultTooLargeError    502     4502  ``result_too_large``     the result's JSON is larger
                                                                      than ``max_result_bytes``
ResourceTimeoutError           504     4504  ``resource_timeout``     the resolver did not return
                                                                      within ``timeout`` seconds
=============================  ======  ====  =======================  ==============================

No IO happens here.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import msgspec

from ..protocol.errors import AguiEngineError, CapacityError, RemoteInputError, UpstreamError, UsageError
from .schemas import check_object_schema, schema_from_struct

__all__ = [
    "DEFAULT_RESOURCE_CONCURRENCY",
    "DEFAULT_RESOURCE_TIMEOUT_SECONDS",
    "MAX_RESOURCE_ID_LENGTH",
    "MAX_RESOURCE_RESULT_BYTES",
    "PARAMS_PROP",
    "Permission",
    "RESOURCE_ID_PROP",
    "Resolver",
    "Resource",
    "ResourceBusyError",
    "ResourceError",
    "ResourceFailedError",
    "ResourceParamsError",
    "ResourcePermissionError",
    "ResourceRegistry",
    "ResourceResultTooLargeError",
    "ResourceTimeoutError",
    "UnknownResourceError",
    "WS_CLOSE_FORBIDDEN",
    "WS_CLOSE_NOT_FOUND",
    "WS_CLOSE_TIMEOUT",
    "collect_resources",
    "error_for_code",
]

#: The props a resource-bound component gets (the names of Tambo's seed example).
RESOURCE_ID_PROP: Final = "resourceId"
PARAMS_PROP: Final = "params"

#: Longest resource id. Ids are business names (``weather.current``,
#: ``crm.account.open_deals``); 128 characters is far beyond any real one while
#: keeping ids cheap as cache keys and readable in error messages and logs.
MAX_RESOURCE_ID_LENGTH: Final = 128

#: Seconds a resolver may take by default. A user is looking at a component that
#: waits for this data; a backend call slower than 10 s is broken or overloaded, and
#: answering 504 lets the front end show an error instead of a spinner forever.
DEFAULT_RESOURCE_TIMEOUT_SECONDS: Final = 10.0

#: Resolver calls of one resource running at once, by default. Resolvers usually
#: call a backend with its own connection pool (httpx and aiohttp default to 10-100
#: connections); 16 keeps a burst of UI queries from opening more backend requests
#: than such a pool serves, while independent resources have independent limits.
DEFAULT_RESOURCE_CONCURRENCY: Final = 16

#: Largest resolver result (bytes of its JSON), by default. Component data is
#: something a screen shows: a few KiB, a table of some hundred rows at most. 1 MiB
#: is MAX_TOOL_RESULT_CHARS's figure: past it the data belongs in pages, and a
#: result this large would otherwise be cached and sent whole to every caller.
MAX_RESOURCE_RESULT_BYTES: Final = 1024 * 1024

#: WebSocket statuses of the resource errors (application range, HTTP number + 4000,
#: as the other codes of ``spec/errors.md``).
WS_CLOSE_FORBIDDEN: Final = 4403
WS_CLOSE_NOT_FOUND: Final = 4404
WS_CLOSE_TIMEOUT: Final = 4504
_WS_INVALID_PARAMS: Final = 4422  # = transports.input_errors.WS_CLOSE_INVALID_INPUT (the core cannot import it)

_ID_RE = re.compile(r"[A-Za-z0-9_.:-]+\Z")


# --------------------------------------------------------------------------- errors


class ResourceError(AguiEngineError):
    """Base of every refusal of a data query (``except ResourceError`` handles them all).
    Never raised itself: each subclass is also in its branch of the tree (a
    RemoteInputError, an UpstreamError or a CapacityError) and has that branch's status."""


class UnknownResourceError(ResourceError, RemoteInputError):
    """No resource has this id (HTTP 404)."""

    http_status = 404
    ws_close_code = WS_CLOSE_NOT_FOUND
    default_code = "unknown_resource"


class ResourceParamsError(ResourceError, RemoteInputError):
    """The params do not fit the resource's schema (HTTP 422). ``path`` is the JSON path
    of the mismatch (``$.params.city``), also sent as the error body's ``path`` member."""

    http_status = 422
    ws_close_code = _WS_INVALID_PARAMS
    default_code = "invalid_params"

    def __init__(self, message: str, *, path: str, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.path = path

    def to_json(self) -> dict[str, Any]:
        body = super().to_json()
        body["error"]["path"] = self.path
        return body


class ResourcePermissionError(ResourceError, RemoteInputError):
    """The resource's permission hook refused this caller (HTTP 403)."""

    http_status = 403
    ws_close_code = WS_CLOSE_FORBIDDEN
    default_code = "forbidden"


class ResourceBusyError(ResourceError, CapacityError):
    """The resource's concurrency limit stayed full for the whole queue wait (HTTP 503,
    ``Retry-After``): nothing is wrong with the query, try again shortly."""

    default_code = "resource_busy"

    def __init__(self, message: str, *, retry_after: int = 1, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class ResourceFailedError(ResourceError, UpstreamError):
    """The resolver raised or returned something that is not JSON (HTTP 502). The message
    never carries the resolver's exception text: that stays in the server's log."""

    default_code = "resource_failed"


class ResourceResultTooLargeError(ResourceFailedError):
    """The resolver's result is larger than the resource's ``max_result_bytes`` (HTTP 502)."""

    default_code = "result_too_large"


class ResourceTimeoutError(ResourceError, UpstreamError):
    """The resolver did not return within the resource's timeout (HTTP 504)."""

    http_status = 504
    ws_close_code = WS_CLOSE_TIMEOUT
    default_code = "resource_timeout"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message, code=code, retryable=True)


_BY_CODE: Final[dict[str, type[Any]]] = {
    cls.default_code: cls
    for cls in (
        UnknownResourceError,
        ResourceParamsError,
        ResourcePermissionError,
        ResourceBusyError,
        ResourceFailedError,
        ResourceResultTooLargeError,
        ResourceTimeoutError,
    )
}


def error_for_code(code: str | None, message: str, *, path: str | None = None) -> AguiEngineError | None:
    """The typed error a client raises for a query error body (``code``, ``message``,
    ``path``), or ``None`` when ``code`` is not a resource error's."""
    cls = _BY_CODE.get(code or "")
    if cls is None:
        return None
    if cls is ResourceParamsError:
        return ResourceParamsError(message, path=path or "$")
    error: AguiEngineError = cls(message)
    return error


# --------------------------------------------------------------------------- resources

#: ``resolver(params, identity)``: the data (JSON-encodable), or an awaitable of it.
Resolver = Callable[[Any, "str | None"], Any]
#: ``permission(identity, params)``: may this caller see this data (bool, or an awaitable of one).
Permission = Callable[["str | None", Any], Any]

_NO_PARAMS: Final[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}
_MSGSPEC_PATH = re.compile(r" - at `\$(.*)`\Z")


def _positive(value: object, what: str, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UsageError(f"{what} must be a positive number{' or None' if allow_none else ''}, got {value!r}")


class Resource:
    """A data resource a component may query (see the module docstring).

    ``Resource(id, resolver, *, params=None, description="", timeout=10.0,
    cache_ttl=None, max_concurrency=16, permission=None, max_result_bytes=1 MiB)``.
    ``params``: a JSON Schema object (copied; checked now) or a msgspec ``Struct``
    type (the resolver then gets an instance); ``None``: no params (``{}``).
    ``cache_ttl``: seconds a result stays cached per (id, params, identity); ``None``
    caches nothing. ``max_concurrency``: resolver calls at once (``None``: no limit).
    Raises :class:`UsageError` for an invalid id, schema, callable or number.
    """

    __slots__ = (
        "_validator",
        "cache_ttl",
        "description",
        "id",
        "max_concurrency",
        "max_result_bytes",
        "params_schema",
        "permission",
        "resolver",
        "struct_type",
        "timeout",
    )

    def __init__(
        self,
        id: str,
        resolver: Resolver,
        *,
        params: Mapping[str, Any] | type[msgspec.Struct] | None = None,
        description: str = "",
        timeout: float = DEFAULT_RESOURCE_TIMEOUT_SECONDS,
        cache_ttl: float | None = None,
        max_concurrency: int | None = DEFAULT_RESOURCE_CONCURRENCY,
        permission: Permission | None = None,
        max_result_bytes: int = MAX_RESOURCE_RESULT_BYTES,
    ) -> None:
        if not isinstance(id, str) or not _ID_RE.match(id) or len(id) > MAX_RESOURCE_ID_LENGTH:
            raise UsageError(
                f"resource id {id!r} must be 1..{MAX_RESOURCE_ID_LENGTH} letters, digits, '_', '.', ':' or '-'"
            )
        if not callable(resolver):
            raise UsageError(f"resource {id}: resolver must be callable, got {type(resolver).__name__}")
        if permission is not None and not callable(permission):
            raise UsageError(f"resource {id}: permission must be callable, got {type(permission).__name__}")
        if not isinstance(description, str):
            raise UsageError(f"resource {id}: description must be a string")
        _positive(timeout, f"resource {id}: timeout", allow_none=False)
        _positive(cache_ttl, f"resource {id}: cache_ttl", allow_none=True)
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1
        ):
            raise UsageError(f"resource {id}: max_concurrency must be a positive int or None, got {max_concurrency!r}")
        if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int) or max_result_bytes < 1:
            raise UsageError(f"resource {id}: max_result_bytes must be a positive int, got {max_result_bytes!r}")
        self.id: str = id
        self.resolver = resolver
        self.permission = permission
        self.description = description
        self.timeout = float(timeout)
        self.cache_ttl = None if cache_ttl is None else float(cache_ttl)
        self.max_concurrency = max_concurrency
        self.max_result_bytes = max_result_bytes
        self.struct_type: type[msgspec.Struct] | None = None
        if params is None:
            schema: dict[str, Any] = dict(_NO_PARAMS)
        elif isinstance(params, type) and issubclass(params, msgspec.Struct):
            self.struct_type = params
            schema = schema_from_struct(params)
        elif isinstance(params, Mapping):
            schema = copy.deepcopy(dict(params))
        else:
            raise UsageError(f"resource {id}: params must be a JSON Schema object or a msgspec Struct type")
        check_object_schema(schema, f"resource {id} params schema")
        self.params_schema: dict[str, Any] = schema
        self._validator: Any = None
        if self.struct_type is None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise UsageError(f"resource {id}: the params schema is not valid JSON Schema: {exc.message}") from None
            self._validator = Draft202012Validator(schema)

    def __repr__(self) -> str:
        return f"Resource({self.id!r})"

    @property
    def is_async(self) -> bool:
        """True when the resolver is an ``async def`` function (awaited on the loop)."""
        return inspect.iscoroutinefunction(self.resolver)

    def params_problem(self, params: Any, *, root: str = "$.params") -> tuple[str, str] | None:
        """``(message, JSON path)`` of why ``params`` do not fit the schema, or ``None``.

        ``root`` prefixes the path (``$.params`` inside props and query bodies). A Struct
        schema is checked by msgspec, a JSON Schema by ``jsonschema`` (Draft 2020-12,
        every keyword). Raises nothing: a problem is the answer.
        """
        try:
            self._convert(params, root)
        except ResourceParamsError as exc:
            return exc.message, exc.path
        return None

    def validate_params(self, params: Any, *, root: str = "$.params") -> Any:
        """The params as the resolver gets them: a Struct instance for a Struct schema,
        else the JSON value itself. Raises :class:`ResourceParamsError` naming the JSON
        path (``root`` + the path inside the params)."""
        return self._convert(params, root)

    def _convert(self, params: Any, root: str = "$.params") -> Any:
        if self.struct_type is not None:
            try:
                return msgspec.convert(params, self.struct_type)
            except msgspec.ValidationError as exc:
                text = str(exc)
                match = _MSGSPEC_PATH.search(text)
                inner = match.group(1) if match else ""
                message = text[: match.start()] if match else text
                path = root + inner
                raise ResourceParamsError(
                    f"params of {self.id} do not match its schema: {message} - at {path}", path=path
                ) from None
        from jsonschema.exceptions import best_match

        try:
            error = best_match(self._validator.iter_errors(params))
        except RecursionError:  # a schema that recurses as deep as hostile params nest
            raise ResourceParamsError(f"params of {self.id} nest too deeply to check - at {root}", path=root) from None
        if error is None:
            return params
        path = root + error.json_path[1:]
        raise ResourceParamsError(f"params of {self.id} do not match its schema: {error.message} - at {path}", path=path)


class ResourceRegistry:
    """The resources a server serves, by id.

    ``ResourceRegistry(resources=())``; :meth:`add` more, or declare one with the
    :meth:`resource` decorator. Iterating gives the resources in the order added.
    Raises :class:`UsageError` for two resources with one id.
    """

    __slots__ = ("_resources",)

    def __init__(self, resources: Iterable[Resource] = ()) -> None:
        self._resources: dict[str, Resource] = {}
        for resource in resources:
            self.add(resource)

    def __repr__(self) -> str:
        return f"ResourceRegistry({list(self._resources)!r})"

    def add(self, resource: Resource) -> Resource:
        """Register ``resource``; the same object twice is fine, another with its id is a UsageError."""
        if not isinstance(resource, Resource):
            raise UsageError(f"ResourceRegistry takes Resource values, got {type(resource).__name__}")
        known = self._resources.get(resource.id)
        if known is not None and known is not resource:
            raise UsageError(f"two resources have the id {resource.id!r}")
        self._resources[resource.id] = resource
        return resource

    def resource(self, id: str, **options: Any) -> Callable[[Resolver], Resolver]:
        """Decorator: ``@registry.resource("weather.current", params=..., cache_ttl=60)``
        registers the decorated resolver (returned unchanged)."""

        def register(resolver: Resolver) -> Resolver:
            self.add(Resource(id, resolver, **options))
            return resolver

        return register

    def get(self, id: object) -> Resource:
        """The resource with this id. Raises :class:`UnknownResourceError` (404)."""
        found = self._resources.get(id) if isinstance(id, str) else None
        if found is None:
            shown = id[:MAX_RESOURCE_ID_LENGTH] if isinstance(id, str) else type(id).__name__
            raise UnknownResourceError(f"no resource {shown!r} is served here")
        return found

    @property
    def ids(self) -> list[str]:
        return list(self._resources)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and id in self._resources

    def __iter__(self) -> Iterator[Resource]:
        return iter(self._resources.values())

    def __len__(self) -> int:
        return len(self._resources)

    # used by Component(resources=...) for ids given as strings
    def lookup(self, ids: Iterable[Resource | str], where: str) -> list[Resource]:
        """The resources ``ids`` name (a :class:`Resource` is checked to be this one).
        Raises :class:`UsageError` naming ``where`` for an id this registry does not have."""
        out: list[Resource] = []
        for item in ids:
            if isinstance(item, Resource):
                out.append(self.add(item))
                continue
            if item not in self:
                raise UsageError(f"{where}: no resource {item!r} is declared (known: {', '.join(self.ids) or 'none'})")
            out.append(self._resources[item])
        return out



def collect_resources(
    components: Iterable[Any], resources: ResourceRegistry | Iterable[Resource] | None = None
) -> ResourceRegistry:
    """The registry an agent serves: ``resources`` (a registry, used as is, or an
    iterable of :class:`Resource`) plus every resource its ``components`` name.
    Raises :class:`UsageError` when a component's resource and a given one share an id
    but are different objects."""
    registry = resources if isinstance(resources, ResourceRegistry) else ResourceRegistry(resources or ())
    for component in components:
        for resource in getattr(component, "resources", {}).values():
            registry.add(resource)
    return registry
