"""The thread API every server answers (spec/transports.md §4.4, "Durable threads"): list the
caller's threads, delete one, set its title. Transport-neutral: a server decodes the request,
calls one of these with the registry and the :class:`~transports.runs.Caller`, and frames the
answer or the typed error.

Who may touch a thread is the history's rule (§2.6, :func:`~transports.runs.may_touch`): the
caller is the named principal of one of its kept runs, or presents the run key of one. Unknown,
expired, deleted and another's thread are the same ``404 unknown_thread``. A listing is per
principal: the threads whose first kept run the caller's named principal ran. A caller
without a named principal (auth off, or one shared token: callers are not told apart) gets
``403 principal_required``; the embedding program and stdio's one client (no caller) list
and touch every thread. :func:`answer_threads_message` answers the ``threads`` message of the
WebSocket and stdio servers.
"""

from __future__ import annotations

from typing import Any

import msgspec

from agui_engine.protocol.errors import RemoteInputError
from agui_engine.protocol.threads import (
    BadThreadRequestError,
    ThreadPage,
    check_search,
    check_title,
    decode_cursor,
    page_limit,
)

from .admission import Caller, may_touch
from .envelope import ThreadsMessage
from .history import UnknownThreadError
from .input_decoding import MAX_RUN_ID_LENGTH
from .runs import RunRegistry
from .thread_store import DurableThreadStore

__all__ = [
    "PrincipalRequiredError",
    "ThreadTitle",
    "ThreadsNotListedError",
    "answer_threads_message",
    "delete_thread",
    "list_threads",
    "rename_thread",
]


class PrincipalRequiredError(RemoteInputError):
    """A listing asked by a caller without a named principal (auth off, one shared token)."""

    http_status = 403
    default_code = "principal_required"


class ThreadsNotListedError(RemoteInputError):
    """This gateway keeps no durable thread store (``--store memory``, ``--no-history``)."""

    http_status = 404
    default_code = "threads_not_listed"


class ThreadTitle(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The answer to a title change."""

    thread_id: str
    title: str


def _store(registry: RunRegistry) -> DurableThreadStore:
    store = registry.threads
    if not isinstance(store, DurableThreadStore):
        raise ThreadsNotListedError(
            "this gateway keeps thread history only in its event log (serve --store memory, or --no-history): "
            "threads are listed, deleted and renamed with a durable store (--store sqlite:PATH or postgresql://...)"
        )
    return store


async def list_threads(
    registry: RunRegistry, caller: Caller | None, *, limit: str | None = None, cursor: str | None = None,
    search: str | None = None,
) -> ThreadPage:
    """One page of the caller's threads, newest first (``limit``, ``cursor``, ``search``: the
    query's raw ``limit``, ``cursor`` and ``q``). Raises BadThreadRequestError (400),
    PrincipalRequiredError (403), ThreadsNotListedError (404), EventLogUnavailableError (503)."""
    store = _store(registry)
    size = page_limit(limit)
    after = decode_cursor(cursor) if cursor else None
    text = check_search(search)
    if caller is not None and not caller.principal:
        raise PrincipalRequiredError(
            "listing threads needs a per-client bearer token (serve --auth-tokens-file): with auth off or one "
            "shared token callers are not told apart; read a thread you ran with its run key instead"
        )
    principal = None if caller is None else caller.principal
    return await store.list_threads(principal, limit=size, after=after, search=text, now=registry.wall_time())


async def _check(registry: RunRegistry, store: DurableThreadStore, thread_id: str, caller: Caller | None) -> None:
    access = [] if len(thread_id) > MAX_RUN_ID_LENGTH else await store.thread_access(thread_id, registry.wall_time())
    if not any(may_touch(principal, key_hash, caller) for principal, key_hash in access):
        raise UnknownThreadError(
            f"unknown thread {thread_id[:MAX_RUN_ID_LENGTH]!r}: it has no history here that you may change (present "
            "the run key of one of its runs, X-AGUI-Run-Key or ?runKey=, or the bearer token of the principal that "
            "ran them)"
        )


async def delete_thread(registry: RunRegistry, thread_id: str, caller: Caller | None) -> None:
    """Delete the caller's thread. Raises UnknownThreadError (404: unknown, expired, deleted
    or another's), ThreadsNotListedError, EventLogUnavailableError."""
    store = _store(registry)
    await _check(registry, store, thread_id, caller)
    await store.delete_thread(thread_id)


async def rename_thread(registry: RunRegistry, thread_id: str, body: Any, caller: Caller | None) -> ThreadTitle:
    """Set the caller's thread's title from a body ``{"title": "..."}``. Raises
    BadThreadRequestError (400), UnknownThreadError (404), ThreadsNotListedError,
    EventLogUnavailableError."""
    store = _store(registry)
    title = check_title(body)
    await _check(registry, store, thread_id, caller)
    if not await store.set_title(thread_id, title):  # deleted meanwhile
        raise UnknownThreadError(f"unknown thread {thread_id!r}: it was deleted")
    return ThreadTitle(thread_id=thread_id, title=title)


async def answer_threads_message(registry: RunRegistry, msg: ThreadsMessage, caller: Caller | None) -> bytes:
    """The encoded result of a ``threads`` message (WebSocket, stdio): a page, the branch's
    events as a JSON array (``get``, as ``GET <path>/threads/<threadId>`` answers), ``{"threadId",
    "title"}``, or ``null``. ``caller``: who asks (None: stdio's one client, who may touch
    every thread). Raises what :func:`list_threads`, :func:`rename_thread` and
    :func:`delete_thread` raise, UnknownThreadError for a ``get`` of a thread the caller may
    not read, and BadThreadRequestError for a get, rename or delete without ``threadId``."""
    if msg.action == "list":
        page = await list_threads(registry, caller, limit=None if msg.limit is None else str(msg.limit),
                                  cursor=msg.cursor, search=msg.q)
        return msgspec.json.encode(page)
    if msg.thread_id is None:
        raise BadThreadRequestError(f"a {msg.action} of a thread names its threadId")
    if msg.action == "get":
        _, payloads = await registry.thread_history(msg.thread_id, run_id=msg.run_id, caller=caller)
        return b"[" + b",".join(payloads) + b"]"
    if msg.action == "rename":
        return msgspec.json.encode(await rename_thread(registry, msg.thread_id, {"title": msg.title}, caller))
    await delete_thread(registry, msg.thread_id, caller)
    return b"null"
