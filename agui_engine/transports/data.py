"""Data queries: resolving a component's resource for a caller, with cache and limits.

Theory of operation
-------------------
:class:`ResourceBroker` is the one piece of code behind every data query -- the SSE
gateway's ``POST <path>/data/query``, the WebSocket ``query`` message and the
terminal demo's in-process lookups; the transports only frame what it answers.
:meth:`ResourceBroker.query` takes ``(resource id, params, identity)`` and returns
the JSON bytes of the data, in this order:

====  ==================================================  =========================================
step  what                                                refusal
====  ==================================================  =========================================
1     find the resource                                   404 ``unknown_resource``
2     validate the params (the resource's schema)         422 ``invalid_params`` with ``path``
3     ask its permission hook (identity, params)           403 ``forbidden``; a hook that raises:
                                                          502 ``resource_failed`` (logged)
4     the cache: (id, canonical params, identity)         -- (a hit answers here; an identical query
                                                          being resolved is waited for, not repeated)
5     a slot of its concurrency limit, waiting at most    503 ``resource_busy`` + ``Retry-After``
      ``queue_timeout`` seconds
6     the resolver, bounded by the resource's timeout     504 ``resource_timeout``; it raises or
                                                          returns non-JSON: 502 ``resource_failed``
                                                          (traceback logged, never sent)
7     encode; bound by ``max_result_bytes``               502 ``result_too_large``
8     store in the cache (when the resource has a TTL)
====  ==================================================  =========================================

An ``async def`` resolver runs on the event loop (a timeout cancels it); a sync one
runs in a thread pool of its own resource (at most ``min(max_concurrency,``
:data:`MAX_RESOLVER_THREADS` ``)`` threads), so a slow resolver never blocks other
queries or streams, and a hung one holds only its own resource's threads and slots.
A sync resolver past its timeout cannot be killed: the query answers 504 at once, the
thread runs to its end and its result is dropped, and it keeps its concurrency slot
until then (so the limit bounds threads too); a call still queued in the pool at its
timeout is dropped. The pools are the broker's (this layer owns threads; the core's
:class:`~agui_engine.genui.resources.Resource` only describes the resolver);
:meth:`ResourceBroker.close` stops them. Cached entries are the encoded bytes: a hit costs a dict lookup, the same bytes
go to every transport. The cache is per resource, LRU, bounded by
:data:`MAX_CACHE_ENTRIES` and :data:`MAX_CACHE_BYTES`; expiry is read from the
:class:`~transports.clock.Clock` (a test moves a ``ManualClock``). Identical queries of a
cached resource that arrive while one is being resolved share that resolution (single
flight): the resolver runs once for all of them.

Request bodies (:func:`decode_query`): ``{"resourceId": str, "params": any}``
(``params`` defaults to ``{}``), with the size and depth limits of a run's body:
400 ``malformed_json``, 413, 422 ``invalid_input`` with the JSON path.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import msgspec

from agui_engine.genui.resources import (
    Resource,
    ResourceBusyError,
    ResourceFailedError,
    ResourcePermissionError,
    ResourceRegistry,
    ResourceResultTooLargeError,
    ResourceTimeoutError,
    error_for_code,
)
from agui_engine.protocol.errors import AguiEngineError, CapacityError, RemoteInputError, UpstreamError, UsageError

from .clock import Clock, LoopClock
from .envelope import ErrorBody, ServerLine
from .input_decoding import DEFAULT_MAX_BODY_BYTES, check_body_size, decode_json_input
from .input_errors import InvalidInputError
from .retrying_client import remote_error_from_body, remote_error_from_line

__all__ = [
    "BUSY_RETRY_AFTER_SECONDS",
    "MAX_CACHE_BYTES",
    "MAX_CACHE_ENTRIES",
    "MAX_RESOLVER_THREADS",
    "QUERY_QUEUE_TIMEOUT_SECONDS",
    "QUERY_REQUEST_TIMEOUT_SECONDS",
    "QueryAnswer",
    "QueryRequest",
    "ResourceBroker",
    "broker_for",
    "decode_query",
    "encode_answer",
    "query_answer",
    "query_error_from_body",
    "query_error_from_line",
]

_log = logging.getLogger("agui_engine.transports")

#: Seconds a query waits for a slot of its resource's concurrency limit before it is
#: refused with 503 ``resource_busy``. A component shows a spinner meanwhile; 5 s covers
#: a burst (a page of cards opening at once) behind a resolver of ~1 s, while a resource
#: that stays saturated answers fast enough for the front end to retry or show an error.
QUERY_QUEUE_TIMEOUT_SECONDS: Final = 5.0

#: Seconds SSEAgent.query / WebSocketAgent.query wait for an answer (connect included).
#: Above the server's own bounds -- DEFAULT_RESOURCE_TIMEOUT_SECONDS (10 s) plus
#: QUERY_QUEUE_TIMEOUT_SECONDS (5 s) -- so the server's 503/504 arrives first; past it
#: the gateway is not answering at all (ResourceTimeoutError).
QUERY_REQUEST_TIMEOUT_SECONDS: Final = 30.0

#: Cached results kept per resource (least recently used out first). Keys include the
#: caller's identity, so this bounds per-user fan-out: 1,024 users x one params set, or
#: one user paging through 1,024 params sets, in a few MiB of typical results.
MAX_CACHE_ENTRIES: Final = 1024

#: Bytes of cached results kept per resource. Results may be up to
#: resources.MAX_RESOURCE_RESULT_BYTES (1 MiB) each, so the entry count alone would
#: allow 1 GiB; 32 MiB per resource keeps a gateway serving a dozen resources well
#: under a container's memory while caching thousands of typical (KiB) results.
MAX_CACHE_BYTES: Final = 32 * 1024 * 1024

#: Worker threads of one resource's sync resolver: each resource has its own pool
#: (ResourceBroker._pool), sized by its ``max_concurrency`` up to this. A sync
#: resolver past its timeout cannot be stopped and keeps its thread, so with one
#: shared pool 32 hung calls of one resource made every other sync resource answer
#: 504 (issue 22); per resource they hold only their own. 16 is the default
#: ``max_concurrency`` (resources.DEFAULT_RESOURCE_CONCURRENCY): a resource needing
#: more parallel blocking calls is better written ``async def``.
MAX_RESOLVER_THREADS: Final = 16

#: Seconds a client is asked to wait after 503 ``resource_busy`` (``Retry-After``).
#: The queue wait already spent QUERY_QUEUE_TIMEOUT_SECONDS; one more second lets the
#: running resolvers finish without the whole page hammering the resource at once.
BUSY_RETRY_AFTER_SECONDS: Final = 1


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The body of ``POST <path>/data/query``."""

    resource_id: str
    params: Any = msgspec.field(default_factory=dict)


class QueryAnswer(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The 200 answer: the resource id and the resolver's data (already-encoded JSON)."""

    resource_id: str
    data: msgspec.Raw


_ENCODER: Final = msgspec.json.Encoder()
_SORTED: Final = msgspec.json.Encoder(order="sorted")


def decode_query(body: bytes, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> QueryRequest:
    """Decode a query body. Raises LimitExceededError (over ``max_bytes``),
    InputTooDeepError, MalformedInputError (not JSON, with the byte offset) and
    InvalidInputError (not ``{resourceId, params}``, with the JSON path)."""
    check_body_size(len(body), max_bytes, what="the query")
    try:
        request: QueryRequest = decode_json_input(body, where="the query", type=QueryRequest)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(f"not a data query {{resourceId, params}}: {exc}") from None
    return request


def encode_answer(resource_id: str, data: bytes) -> bytes:
    """The 200 body ``{"resourceId": ..., "data": ...}`` around encoded ``data``."""
    return _ENCODER.encode(QueryAnswer(resource_id=resource_id, data=msgspec.Raw(data)))


class _Cache:
    """One resource's results: key -> (expiry, bytes), LRU, bounded in entries and bytes."""

    __slots__ = ("bytes", "entries")

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[bytes, str | None], tuple[float, bytes]] = OrderedDict()
        self.bytes = 0

    def get(self, key: tuple[bytes, str | None], now: float) -> bytes | None:
        found = self.entries.get(key)
        if found is None:
            return None
        if found[0] <= now:
            self._drop(key)
            return None
        self.entries.move_to_end(key)
        return found[1]

    def put(self, key: tuple[bytes, str | None], expires: float, data: bytes) -> None:
        if key in self.entries:
            self._drop(key)
        if len(data) > MAX_CACHE_BYTES:
            return
        self.entries[key] = (expires, data)
        self.bytes += len(data)
        while len(self.entries) > MAX_CACHE_ENTRIES or self.bytes > MAX_CACHE_BYTES:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: tuple[bytes, str | None]) -> None:
        _, data = self.entries.pop(key)
        self.bytes -= len(data)


class ResourceBroker:
    """Resolves data queries for a :class:`~agui_engine.genui.resources.ResourceRegistry`
    (see the module docstring). ``queue_timeout``: seconds a query waits for a slot of
    a full concurrency limit (:data:`QUERY_QUEUE_TIMEOUT_SECONDS`). ``clock``: cache
    expiry (default: the loop's). State: a cache and a semaphore per resource."""

    def __init__(
        self,
        resources: ResourceRegistry | Sequence[Resource] = (),
        *,
        queue_timeout: float = QUERY_QUEUE_TIMEOUT_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.resources = resources if isinstance(resources, ResourceRegistry) else ResourceRegistry(resources)
        if isinstance(queue_timeout, bool) or not isinstance(queue_timeout, (int, float)) or queue_timeout < 0:
            raise UsageError(f"queue_timeout must be a number of seconds >= 0, got {queue_timeout!r}")
        self.queue_timeout = float(queue_timeout)
        self.clock: Clock = clock or LoopClock()
        self._caches: dict[str, _Cache] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._inflight: dict[tuple[str, tuple[bytes, str | None]], asyncio.Task[bytes]] = {}
        self._pools: dict[str, ThreadPoolExecutor] = {}

    def __repr__(self) -> str:
        return f"ResourceBroker({self.resources.ids!r})"

    async def answer(self, body: bytes, identity: str | None, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> bytes:
        """The 200 body for a raw HTTP query body. Raises the errors of :func:`decode_query`
        and :meth:`query`."""
        request = decode_query(body, max_bytes=max_bytes)
        data = await self.query(request.resource_id, request.params, identity)
        return encode_answer(request.resource_id, data)

    async def fetch(self, resource_id: str, params: Any = None, identity: str | None = None) -> Any:
        """:meth:`query`'s data decoded: what an in-process front end (the terminal demo)
        shows. Raises what :meth:`query` raises."""
        return msgspec.json.decode(await self.query(resource_id, {} if params is None else params, identity))

    async def query(self, resource_id: str, params: Any, identity: str | None) -> bytes:
        """The JSON bytes of ``resource_id``'s data for ``params`` as ``identity`` sees it.

        Raises UnknownResourceError (404), ResourceParamsError (422, ``path``),
        ResourcePermissionError (403), ResourceBusyError (503), ResourceTimeoutError
        (504), ResourceFailedError / ResourceResultTooLargeError (502). Changes: the
        resource's cache (a new entry, expired ones dropped)."""
        resource = self.resources.get(resource_id)
        validated = resource.validate_params(params)
        await self._check_permission(resource, validated, identity)
        ttl = resource.cache_ttl
        if ttl is None:
            return await self._resolve_limited(resource, validated, identity)
        key = (_SORTED.encode(params), identity)
        cache = self._caches.setdefault(resource.id, _Cache())
        hit = cache.get(key, self.clock.time())
        if hit is not None:
            return hit
        # Single flight: identical queries arriving while one is being resolved (a page of
        # cards showing the same data) share its resolution instead of each calling the
        # resolver. It runs as its own task, so a caller that goes away (a closed
        # connection) cancels neither it nor the others waiting on it.
        flight = self._inflight.get((resource.id, key))
        if flight is None:
            flight = asyncio.get_running_loop().create_task(self._resolve_limited(resource, validated, identity))
            self._inflight[(resource.id, key)] = flight
            flight.add_done_callback(lambda task: self._landed(resource.id, key, ttl, task))
        return await asyncio.shield(flight)

    def _landed(self, resource_id: str, key: tuple[bytes, str | None], ttl: float, task: asyncio.Task[bytes]) -> None:
        """A shared resolution ended: cache its data (an error is not cached) and forget it."""
        self._inflight.pop((resource_id, key), None)
        if not task.cancelled() and task.exception() is None:
            self._caches[resource_id].put(key, self.clock.time() + ttl, task.result())

    async def _check_permission(self, resource: Resource, params: Any, identity: str | None) -> None:
        if resource.permission is None:
            return
        try:
            allowed = resource.permission(identity, params)
            if inspect.isawaitable(allowed):
                async with asyncio.timeout(resource.timeout):
                    allowed = await allowed
        except (RemoteInputError, UpstreamError, CapacityError):
            raise  # a hook may refuse on purpose with its own typed error (a 403 saying why)
        except Exception:  # noqa: BLE001 - the hook's failure is the server's, logged, not sent
            _log.exception("data query %s: the permission hook raised", resource.id)
            raise ResourceFailedError(f"the permission check of {resource.id} failed (see the server log)") from None
        if not allowed:
            who = "an anonymous caller" if identity is None else "this caller"
            raise ResourcePermissionError(f"{who} may not query {resource.id}")

    async def _resolve_limited(self, resource: Resource, params: Any, identity: str | None) -> bytes:
        if resource.max_concurrency is None:
            return await self._resolve(resource, params, identity, None)
        slots = self._slots.get(resource.id)
        if slots is None:
            slots = self._slots[resource.id] = asyncio.Semaphore(resource.max_concurrency)
        try:
            async with asyncio.timeout(self.queue_timeout):
                await slots.acquire()
        except TimeoutError:
            raise ResourceBusyError(
                f"{resource.id} already runs {resource.max_concurrency} queries (its max_concurrency) and none "
                f"ended within {self.queue_timeout:g} s; try again shortly",
                retry_after=BUSY_RETRY_AFTER_SECONDS,
            ) from None
        return await self._resolve(resource, params, identity, slots)

    def _pool(self, resource: Resource) -> ThreadPoolExecutor:
        """The threads of ``resource``'s sync resolver: its own pool (made on its first
        sync query), so a resolver that hangs holds only its own resource's threads."""
        pool = self._pools.get(resource.id)
        if pool is None:
            size = min(resource.max_concurrency or MAX_RESOLVER_THREADS, MAX_RESOLVER_THREADS)
            pool = self._pools[resource.id] = ThreadPoolExecutor(size, thread_name_prefix=f"agui-resource-{resource.id}")
        return pool

    def close(self) -> None:
        """Stop the resolver pools (idempotent; the server's shutdown calls it): queued
        calls are dropped, running ones end by themselves (a thread cannot be stopped).
        A later query makes a new pool."""
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.shutdown(wait=False, cancel_futures=True)

    async def _resolve(
        self, resource: Resource, params: Any, identity: str | None, slots: asyncio.Semaphore | None
    ) -> bytes:
        """Call the resolver (holding a slot of ``slots``, released here or, for a sync
        resolver still running after its timeout, when its thread ends)."""
        loop = asyncio.get_running_loop()
        release_later = False
        deadline = asyncio.timeout(resource.timeout)
        try:
            async with deadline:
                if resource.is_async:
                    result = await resource.resolver(params, identity)
                else:
                    job = self._pool(resource).submit(resource.resolver, params, identity)
                    future = asyncio.wrap_future(job, loop=loop)
                    try:
                        result = await asyncio.shield(future)
                    except (TimeoutError, asyncio.CancelledError):
                        # still queued in the resource's pool: dropped; already running:
                        # the thread goes on and its slot is freed when it really ends
                        if not job.cancel() and not future.done() and slots is not None:
                            future.add_done_callback(lambda _f: slots.release())
                            release_later = True
                        raise
                    if inspect.isawaitable(result):  # a sync function returning a coroutine
                        result = await result
        except TimeoutError:
            if deadline.expired():
                raise ResourceTimeoutError(
                    f"{resource.id} did not answer within {resource.timeout:g} s (its timeout)"
                ) from None
            _log.exception("data query %s: the resolver raised", resource.id)
            raise ResourceFailedError(f"the resolver of {resource.id} failed (see the server log)") from None
        except (RemoteInputError, UpstreamError, CapacityError):
            # a resolver may refuse on purpose with a typed error of the tree (403, 404, 422, 503 ...)
            raise
        except Exception:  # noqa: BLE001 - the resolver's failure: logged with its traceback, never sent
            _log.exception("data query %s: the resolver raised", resource.id)
            raise ResourceFailedError(f"the resolver of {resource.id} failed (see the server log)") from None
        finally:
            if slots is not None and not release_later:
                slots.release()
        try:
            data = _ENCODER.encode(result)
        except Exception:  # noqa: BLE001 - TypeError (not JSON), OverflowError, RecursionError
            _log.exception("data query %s: the resolver returned %s, which is not JSON", resource.id,
                             type(result).__name__)
            raise ResourceFailedError(f"the resolver of {resource.id} returned data that is not JSON") from None
        if len(data) > resource.max_result_bytes:
            _log.warning("data query %s: a %d-byte result refused (max_result_bytes %d)", resource.id, len(data),
                           resource.max_result_bytes)
            raise ResourceResultTooLargeError(
                f"the data of {resource.id} is {len(data)} bytes, more than its max_result_bytes "
                f"({resource.max_result_bytes})"
            )
        return data


def broker_for(source: object, resources: object = None, **options: Any) -> ResourceBroker | None:
    """The broker a server uses: ``resources`` when given (a ResourceBroker as is, a
    registry or a list of Resources wrapped), else the ``resources`` registry of the
    served agent ``source`` (``LLMAgent``, ``AgentLoop``), else None (no data queries).
    Raises UsageError for anything else."""
    if resources is None:
        resources = getattr(source, "resources", None)
        if not isinstance(resources, ResourceRegistry) or not len(resources):
            return None
    if isinstance(resources, ResourceBroker):
        return resources
    if isinstance(resources, ResourceRegistry):
        return ResourceBroker(resources, **options)
    if isinstance(resources, (list, tuple)) and all(isinstance(r, Resource) for r in resources):
        return ResourceBroker(list(resources), **options)
    raise UsageError(
        f"resources must be a ResourceRegistry, a list of Resource or a ResourceBroker, got {type(resources).__name__}"
    )


# --------------------------------------------------------------------------- clients


class _ErrorDoc(msgspec.Struct):
    error: ErrorBody


def query_error_from_body(status: int, body: bytes, *, where: str) -> AguiEngineError:
    """The error a client raises for a refused HTTP query: the typed resource error its
    ``{"error": {code, message, path?}}`` body names, else a RemoteAgentError
    (401, 415, 400, 422 ``invalid_input`` ... or a body that is not this server's)."""
    try:
        err = msgspec.json.decode(body, type=_ErrorDoc).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return remote_error_from_body(status, body, where=where)
    typed = error_for_code(err.code, err.message, path=err.path)
    return typed if typed is not None else remote_error_from_body(status, body, where=where)


def query_error_from_line(err: ErrorBody, *, where: str) -> AguiEngineError:
    """The error a client raises for a WebSocket query's error line (as
    :func:`query_error_from_body`)."""
    typed = error_for_code(err.code, err.message, path=err.path)
    return typed if typed is not None else remote_error_from_line(err, where=where)


_LINE_DECODER = msgspec.json.Decoder(ServerLine)


def query_answer(line: bytes, query_id: str, where: str) -> bytes | None:
    """The data bytes of the answer to ``query_id`` in one WebSocket / stdio server line
    (``{"queryId", "result"}``), None for any other line. Raises the query's typed error
    (:func:`query_error_from_line`) when the line refuses it, or refuses a message the
    server could not read at all (no ``queryId`` to echo); RemoteInputError
    (``malformed_json``) for a line that is not a protocol line."""
    try:
        head = _LINE_DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise RemoteInputError(f"{where}: not a protocol line", code="malformed_json") from None
    if head.query_id == query_id:
        if head.error is not None:
            raise query_error_from_line(head.error, where=where)
        return bytes(head.result) if len(head.result) else b"null"
    if head.query_id is None and head.run_id is None and head.error is not None:
        # the server could not read the message at all (no queryId to echo)
        raise query_error_from_line(head.error, where=where)
    return None
