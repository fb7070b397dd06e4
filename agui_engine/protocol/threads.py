"""Durable threads, the pure parts: what a thread store keeps beside the runs' records.

Theory of operation
-------------------
A thread store (``agui_engine.transports.thread_store``; spec/transports.md §4.4, "Durable
threads") keeps each thread's kept run records (the compacted ``HistoryRun`` JSON that
``transports.history.build_record`` writes) and, per thread, a :class:`ThreadSummary`: its
title, when it was created and last written, how many runs it keeps and its latest one. This
module holds what every store computes the same way, without IO:

* :func:`record_facts` -- what a store reads of one record to index it: the run, its parent,
  who ran it (principal, run key hash), its size, the title its input gives
  (:func:`title_from_input`: the first user message's text, whitespace collapsed, cut at
  :data:`AUTO_TITLE_CHARS`) and the interrupts it ended open with (:func:`open_interrupts`).
* The listing's order and its cursor: threads newest first by ``(updatedAt, threadId)``, both
  descending; a page's cursor (:func:`encode_cursor`) is the last listed thread's key, opaque
  to the client (base64url of ``[updatedAt, threadId]``), so a page is one index range scan
  whatever the thread count, and a thread written meanwhile moves to the front without
  making a page repeat or skip the others. :func:`decode_cursor`, :func:`page_limit`,
  :func:`check_title` and :func:`check_search` check what a client sends (400 naming why).
* :func:`check_resume` -- AG-UI 1.0's interrupt rules for ``RunAgentInput.resume`` against the
  interrupts a thread's branch ended open with (422 naming the interrupt and what is wrong).
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Sequence
from typing import Any

import msgspec

from .codec import EventDecodeError, decode_event
from .errors import RemoteInputError
from .events import (
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextPart,
    UserMessage,
)
from .pointer import escape_token

__all__ = [
    "AUTO_TITLE_CHARS",
    "BadThreadRequestError",
    "DEFAULT_THREAD_PAGE",
    "MAX_THREAD_PAGE",
    "MAX_TITLE_CHARS",
    "MAX_TITLE_SEARCH_CHARS",
    "RecordFacts",
    "ResumeRejectedError",
    "ThreadPage",
    "ThreadSummary",
    "check_resume",
    "check_search",
    "check_title",
    "decode_cursor",
    "encode_cursor",
    "like_pattern",
    "open_interrupts",
    "page_limit",
    "page_of",
    "record_facts",
    "title_from_input",
]

#: Characters of the title a thread gets from its first user message (a list shows one line).
AUTO_TITLE_CHARS = 80

#: Characters a title set by the client (``PATCH``) may have at most: a long sentence.
MAX_TITLE_CHARS = 200

#: Characters of a title search (``?q=``) at most.
MAX_TITLE_SEARCH_CHARS = 200

#: Threads one page of ``GET <path>/threads`` holds unless ``?limit=`` says otherwise.
DEFAULT_THREAD_PAGE = 20

#: Threads one page holds at most (``?limit=``): one index range scan of this many rows is
#: well under a millisecond; a client wanting more follows the cursor.
MAX_THREAD_PAGE = 100


class BadThreadRequestError(RemoteInputError):
    """A thread request the client got wrong (a cursor this server did not write, a limit
    out of range, a title that is not a short string): 400, saying which and why."""

    default_code = "bad_thread_request"


class ResumeRejectedError(RemoteInputError):
    """``RunAgentInput.resume`` does not answer the interrupts the thread ended with: an id
    that is not one of them (``unknown_interrupt``), one past its ``expiresAt``
    (``interrupt_expired``), a payload its ``responseSchema`` refuses
    (``invalid_resume_payload``). 422; ``interrupt_id`` names it."""

    http_status = 422
    default_code = "invalid_resume"

    def __init__(self, message: str, *, code: str, interrupt_id: str, path: str = "") -> None:
        super().__init__(message, code=code)
        self.interrupt_id = interrupt_id
        self.path = path

    def to_json(self) -> dict[str, Any]:
        body = super().to_json()
        body["error"]["interruptId"] = self.interrupt_id
        if self.path:
            body["error"]["path"] = self.path
        return body


class ThreadSummary(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One thread in a listing. Times are Unix epoch milliseconds (wall clock)."""

    thread_id: str
    title: str
    created_at: int
    updated_at: int
    runs: int
    latest_run_id: str


class ThreadPage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One page of a listing; ``next_cursor`` (None on the last page) asks for the next."""

    threads: list[ThreadSummary]
    next_cursor: str | None = None


class RecordFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a store indexes of one kept run record (:func:`record_facts`)."""

    run_id: str
    parent_run_id: str | None
    principal: str
    key_hash: str
    nbytes: int
    title: str
    interrupts: list[Interrupt]


class _Head(msgspec.Struct, rename="camel"):
    # The fields of transports.history.HistoryRun a store reads; the events stay raw.
    run_id: str
    parent_run_id: str | None = None
    principal: str = ""
    key_hash: str = ""
    events: list[msgspec.Raw] = msgspec.field(default_factory=list)


_head_decoder = msgspec.json.Decoder(_Head)


def record_facts(record: bytes, *, with_title: bool = True) -> RecordFacts:
    """What a store indexes of ``record`` (a ``HistoryRun`` as JSON): its ids, who ran it,
    its size, the title its input gives (``with_title``; else ``""``) and the interrupts it
    ended with. Raises BadThreadRequestError for bytes that are no record."""
    try:
        head = _head_decoder.decode(record)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadThreadRequestError(f"not a kept run record: {exc}") from None
    title = ""
    if with_title and head.events:
        first = _decode(bytes(head.events[0]))
        if isinstance(first, RunStartedEvent) and first.input is not None:
            title = title_from_input(first.input)
    return RecordFacts(
        run_id=head.run_id,
        parent_run_id=head.parent_run_id,
        principal=head.principal,
        key_hash=head.key_hash,
        nbytes=len(record),
        title=title,
        interrupts=open_interrupts(head.events),
    )


def _decode(payload: bytes) -> Any:
    try:
        return decode_event(payload)
    except EventDecodeError:
        return None


def open_interrupts(events: Sequence[bytes | msgspec.Raw]) -> list[Interrupt]:
    """The interrupts a run's events end with: its last event is ``RUN_FINISHED`` with an
    ``interrupt`` outcome (AG-UI 1.0: a client's pending interrupts are exactly those), else
    none."""
    if not events:
        return []
    last = bytes(events[-1])
    if b'"RUN_FINISHED"' not in last or b'"interrupt"' not in last:
        return []
    event = _decode(last)
    if isinstance(event, RunFinishedEvent) and isinstance(event.outcome, RunFinishedInterruptOutcome):
        return list(event.outcome.interrupts)
    return []


def title_from_input(input: RunAgentInput) -> str:
    """The title a thread gets from its first run: the text of the input's first user
    message, whitespace collapsed, at most AUTO_TITLE_CHARS characters (cut with "…");
    ``""`` when it has none."""
    for message in input.messages:
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(part.text for part in content if isinstance(part, TextPart))
            text = " ".join(text.split())
            if len(text) > AUTO_TITLE_CHARS:
                text = text[: AUTO_TITLE_CHARS - 1].rstrip() + "…"
            return text
    return ""


def encode_cursor(updated_at: int, thread_id: str) -> str:
    """The cursor of the page after the thread ``(updated_at, thread_id)``."""
    raw = msgspec.json.encode([updated_at, thread_id])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def page_of(rows: Sequence[Sequence[Any]], limit: int) -> ThreadPage:
    """The page of a listing query that asked for ``limit + 1`` rows of ``(threadId, title,
    createdAt, updatedAt, runs, latestRunId)`` in listing order: the first ``limit``, and the
    cursor after the last of them when there was one more."""
    threads = [
        ThreadSummary(thread_id=r[0], title=r[1], created_at=r[2], updated_at=r[3], runs=r[4], latest_run_id=r[5])
        for r in rows[:limit]
    ]
    more = len(rows) > limit and bool(threads)
    return ThreadPage(threads=threads, next_cursor=encode_cursor(threads[-1].updated_at, threads[-1].thread_id) if more else None)


def like_pattern(search: str) -> str:
    """A SQL ``LIKE`` pattern (escape character ``\\``) matching titles containing ``search``."""
    return "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(updated_at, thread_id)`` of a cursor :func:`encode_cursor` wrote.
    Raises BadThreadRequestError (400) for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, thread_id = msgspec.json.decode(raw, type=tuple[int, str])
    except (binascii.Error, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        raise BadThreadRequestError(
            f"cursor {cursor[:64]!r} is not one this server wrote: pass the nextCursor of the previous page"
        ) from None
    return updated_at, thread_id


def page_limit(raw: str | None) -> int:
    """The page size a ``?limit=`` asks for (absent: DEFAULT_THREAD_PAGE).
    Raises BadThreadRequestError unless it is an integer in 1..MAX_THREAD_PAGE."""
    if raw is None or raw == "":
        return DEFAULT_THREAD_PAGE
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6 or not 1 <= int(raw) <= MAX_THREAD_PAGE:
        raise BadThreadRequestError(f"limit={raw[:32]!r}: give an integer from 1 to {MAX_THREAD_PAGE} (MAX_THREAD_PAGE)")
    return int(raw)


def check_search(raw: str | None) -> str | None:
    """The title search a ``?q=`` asks for (None: no search).
    Raises BadThreadRequestError when longer than MAX_TITLE_SEARCH_CHARS."""
    if raw is None or raw.strip() == "":
        return None
    if len(raw) > MAX_TITLE_SEARCH_CHARS:
        raise BadThreadRequestError(f"q is {len(raw)} characters: search with at most {MAX_TITLE_SEARCH_CHARS}")
    return raw.strip()


def check_title(body: Any) -> str:
    """The title a ``PATCH`` body ``{"title": "..."}`` sets, whitespace collapsed.
    Raises BadThreadRequestError for another shape, an empty title or one longer than
    MAX_TITLE_CHARS."""
    if not isinstance(body, dict) or set(body) != {"title"} or not isinstance(body["title"], str):
        raise BadThreadRequestError('send a JSON object with one member, a string: {"title": "..."}')
    title = " ".join(body["title"].split())
    if not title:
        raise BadThreadRequestError("title is empty: give it at least one visible character")
    if len(title) > MAX_TITLE_CHARS:
        raise BadThreadRequestError(f"title is {len(title)} characters: at most {MAX_TITLE_CHARS} (MAX_TITLE_CHARS)")
    return title


def _expires(value: str) -> float | None:
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def check_resume(open: Sequence[Interrupt], input: RunAgentInput, now: float) -> None:
    """Check ``input.resume`` against the interrupts the branch it continues ended with
    (``open``), at wall-clock time ``now`` (Unix seconds). Each entry must name one of them;
    the interrupt must not be past its ``expiresAt`` (ISO 8601; one that does not parse
    never expires: the protocol does not define it); a ``resolved`` answer's ``payload`` must
    match the interrupt's ``responseSchema`` (JSON Schema 2020-12; a schema that is itself
    invalid checks nothing). A ``cancelled`` answer carries no payload to check.
    Raises ResumeRejectedError (422) naming the first entry that fails."""
    if not input.resume:
        return
    by_id = {i.id: i for i in open}
    for entry in input.resume:
        interrupt = by_id.get(entry.interrupt_id)
        if interrupt is None:
            known = ", ".join(repr(i) for i in by_id) or "none"
            raise ResumeRejectedError(
                f"resume names interrupt {entry.interrupt_id!r}, which is not open on this thread's branch "
                f"(open: {known})",
                code="unknown_interrupt",
                interrupt_id=entry.interrupt_id,
            )
        if interrupt.expires_at is not None:
            deadline = _expires(interrupt.expires_at)
            if deadline is not None and now > deadline:
                raise ResumeRejectedError(
                    f"interrupt {interrupt.id!r} expired at {interrupt.expires_at}: it can no longer be answered",
                    code="interrupt_expired",
                    interrupt_id=interrupt.id,
                )
        if entry.status == "resolved" and interrupt.response_schema is not None:
            _check_payload(interrupt, entry.payload)


def _check_payload(interrupt: Interrupt, payload: Any) -> None:
    from jsonschema import Draft202012Validator  # imported on first resume with a schema: ~80 ms
    from jsonschema.exceptions import SchemaError, best_match

    schema = interrupt.response_schema
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return
    error = best_match(Draft202012Validator(schema).iter_errors(payload))
    if error is None:
        return
    path = "/payload" + "".join("/" + escape_token(str(p)) for p in error.absolute_path)
    raise ResumeRejectedError(
        f"the payload answering interrupt {interrupt.id!r} does not match its responseSchema at {path}: {error.message}",
        code="invalid_resume_payload",
        interrupt_id=interrupt.id,
        path=path,
    )
