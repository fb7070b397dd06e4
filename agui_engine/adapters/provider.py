"""Machinery shared by every LLM provider adapter: errors, stream parsing, HTTP.

Theory of operation
-------------------
A provider adapter is three pieces, and only the first two differ per provider:

1. A *request builder* turns AG-UI messages and tools into the provider's JSON body.
2. A *stream parser* (:class:`StreamParser` subclass) is a feed-style state machine
   with no IO: ``feed(event, data)`` takes one decoded SSE message and returns
   :data:`~agui_engine.llm.LLMStreamItem` values; ``close()`` is the end of input.
   Each subclass routes provider events through a ``HANDLERS`` table (event kind ->
   method name) in one place; :class:`TypedEventParser` does the routing for the
   providers whose frames name their kind. Tool calls go through :class:`ToolCallTracker`, which
   keys them by the provider's routing key and guarantees the item contract below.
3. :class:`StreamingLLMClient` does the IO for all of them: POST with httpx,
   decode the body with the engine's :class:`~agui_engine.protocol.codec.SSEDecoder`, feed the
   parser, yield its items. It maps HTTP failures to :class:`ProviderError`, retries a
   bounded number of times (honouring ``Retry-After``) *only before the first item has
   been yielded*, and closes the HTTP response the moment the consumer closes the
   iterator.

The item contract every parser keeps (``spec/providers.md``):

* ``ToolCallStart`` precedes every ``ToolCallArgsDelta`` of its index; each started
  call gets exactly one ``ToolCallEnd`` before a normal end; a call whose arguments
  never arrived (or arrived whole) still gets one ``ToolCallArgsDelta`` (``"{}"``
  when empty).
* The stream ends with exactly one terminal item, the last one: ``Finish`` (normal)
  or ``StreamError`` (in-band error, malformed stream, or EOF without the provider's
  terminal marker). ``Usage`` appears at most once, right before the terminal item.
* Empty text / reasoning deltas are never emitted.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import email.utils
import logging
import math
import os
import random
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Mapping,
    Sequence,
)
from typing import Any, ClassVar

import httpx
import msgspec

from agui_engine.adapters.redaction import redact
from agui_engine.llm import (
    Finish,
    FinishReason,
    LLMStreamItem,
    LLMTool,
    StreamError,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    Usage,
)
from agui_engine.loops.observe import trace_headers
from agui_engine.protocol.codec import SSEDecoder
from agui_engine.protocol.errors import MAX_ERROR_MESSAGE_CHARS, RemoteInputError, UpstreamError, UsageError
from agui_engine.protocol.ids import random_id

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "CONNECT_TIMEOUT_SECONDS",
    "CompletionRequest",
    "DEFAULT_MAX_RETRIES",
    "DRAIN_TIMEOUT_SECONDS",
    "Handler",
    "MAX_DRAIN_BYTES",
    "MAX_ERROR_BODY_BYTES",
    "MAX_PROVIDER_FRAME_BYTES",
    "MAX_RETRY_AFTER_SECONDS",
    "MalformedStream",
    "MissingAPIKeyError",
    "ProviderError",
    "ProviderStream",
    "READ_TIMEOUT_SECONDS",
    "RETRY_JITTER_FRACTION",
    "StreamParser",
    "StreamingLLMClient",
    "ToolCallTracker",
    "TypedEventParser",
    "api_key_from",
    "extract_error",
    "is_retryable_status",
    "parse_retry_after",
    "scrub",
]

_log = logging.getLogger(__name__)

#: Largest single SSE frame accepted from a provider. The biggest legitimate frames are
#: the Responses API's ``response.completed`` (it repeats the whole output, including
#: encrypted reasoning) and Gemini chunks carrying inline images; 32 MiB is far above
#: both and still bounds memory against a runaway upstream.
MAX_PROVIDER_FRAME_BYTES = 32 * 1024 * 1024
#: An HTTP error body is read at most this far: provider error JSON is well under 4 KiB;
#: a proxy's HTML error page is cut here rather than buffered whole.
MAX_ERROR_BODY_BYTES = 64 * 1024
#: After a stream's terminal marker (``[DONE]``, ``response.completed``,
#: ``message_stop``) the rest of the body is read and dropped, at most this many bytes,
#: so httpx sees the body end and returns the connection to its pool: the next request
#: of a tool loop reuses it instead of paying a new TCP/TLS handshake. A provider sends
#: nothing or a few bytes (the last chunk, a trailing newline) after its marker; a body
#: that keeps going past 64 KiB is not worth reading, and its connection is dropped.
MAX_DRAIN_BYTES = 64 * 1024
#: The longest wait for the body's end after the terminal marker (same reasoning): the
#: end follows the marker within milliseconds; a server that holds the connection open
#: costs the caller at most this much before the connection is dropped instead.
DRAIN_TIMEOUT_SECONDS = 1.0
#: ``MAX_ERROR_MESSAGE_CHARS`` (imported above, still importable from here) is
#: :data:`agui_engine.protocol.errors.MAX_ERROR_MESSAGE_CHARS`: a provider's error message is cut
#: to it before it goes into a ``ProviderError`` / ``RUN_ERROR``, as the transports cut
#: a remote agent's.
#: Retries after the first attempt (so 3 requests at most), as the official SDKs do (2).
DEFAULT_MAX_RETRIES = 2
#: A ``Retry-After`` longer than this is not waited for: the error is raised at once
#: (a UI waiting a minute for the first token is worse than an error it can act on).
MAX_RETRY_AFTER_SECONDS = 60.0
#: Exponential backoff without ``Retry-After``: 0.5 s, 1 s, 2 s ... capped at 8 s, with
#: jitter (the SDKs use 0.5 s initial and 8 s maximum).
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 8.0
#: Each backoff delay is shortened by a random fraction in [0, this): the delay is a
#: factor in [0.75, 1.0] of the exponential value. The same jitter as the official OpenAI
#: and Anthropic SDKs (``1 - 0.25 * random()``): enough to spread the retries of many
#: runs hit by one outage, and only ever shortening, so ``BACKOFF_MAX_SECONDS`` stays a
#: true maximum. (``transports.retrying_client.RetryPolicy`` reconnects with a wider 0.5-1.0:
#: reconnect storms after a server restart are larger and less urgent than one request.)
RETRY_JITTER_FRACTION = 0.25
#: Time to establish the TCP/TLS connection. A handshake to a provider takes well under
#: a second even across continents; the official SDKs allow 5 s. 10 s also survives two
#: lost SYNs (Linux retransmits after 1 s and 3 s) and a slow TLS-inspecting proxy, while a
#: dead host still fails within ~30 s over ``DEFAULT_MAX_RETRIES`` + 1 attempts.
CONNECT_TIMEOUT_SECONDS = 10.0
#: Longest silence between two reads of the stream. Reasoning models can think for
#: minutes before their first byte; 600 s matches the official SDKs' default timeout.
READ_TIMEOUT_SECONDS = 600.0

#: HTTP statuses worth retrying: request timeout, conflict (lock timeout, retried by the
#: OpenAI SDK), rate limit, and every 5xx (including Anthropic's 529 "overloaded").
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Provider error types / codes that mean "try again later", whatever the HTTP status.
_RETRYABLE_ERROR_TYPES = frozenset(
    {
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        "server_error",
        "rate_limit_exceeded",
        "internal_error",
        "timeout",
        "UNAVAILABLE",
        "RESOURCE_EXHAUSTED",
        "INTERNAL",
        "DEADLINE_EXCEEDED",
    }
)


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status from a provider is worth retrying later."""
    return status in _RETRYABLE_STATUSES or status >= 500


def _is_retryable_error_type(error_type: str | None) -> bool:
    return error_type is not None and error_type in _RETRYABLE_ERROR_TYPES


class ProviderError(UpstreamError):
    """An LLM provider refused or failed a request before its stream started.

    ``status`` is the HTTP status (``None`` when the provider was unreachable),
    ``error_type`` / ``provider_message`` what the provider said, ``retryable`` whether
    trying again later may succeed, ``retry_after`` the delay it asked for (seconds).
    ``code`` (for ``RUN_ERROR``) is the provider's error type when it gave one, else
    ``http_<status>`` or ``provider_unreachable``. Messages never contain the API key.
    """

    default_code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        error_type: str | None = None,
        provider_message: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.provider = provider
        self.status = status
        self.error_type = error_type
        self.provider_message = provider_message
        self.retry_after = retry_after


class MalformedStream(Exception):
    """Raised inside a parser handler for a stream that breaks the provider's format;
    :meth:`StreamParser.feed` turns it into a ``StreamError`` item."""


# --------------------------------------------------------------------------- errors


def scrub(text: str, secrets: Sequence[str]) -> str:
    """The one path every provider error string takes before it leaves the adapter
    (``ProviderError`` message, type, code, provider message; every ``StreamError``
    message and code, mid-stream ones included): :func:`redact` first, then the cut
    to ``MAX_ERROR_MESSAGE_CHARS`` -- in that order, so a cut can never leave the
    head of a key behind."""
    return _clip(redact(text, secrets))


def _clip(text: str) -> str:
    if len(text) <= MAX_ERROR_MESSAGE_CHARS:
        return text
    return text[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def extract_error(body: Any) -> tuple[str | None, str | None, float | None]:
    """``(error_type, message, retry_delay)`` from any provider's error JSON.

    Shapes: OpenAI ``{"error": {"type", "code", "message"}}``; Anthropic
    ``{"type": "error", "error": {"type", "message"}}``; Gemini ``{"error": {"code",
    "status", "message", "details": [RetryInfo]}}`` (also wrapped in a one-element list).
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None, None, None
    err = body.get("error", body)
    if isinstance(err, str):
        return None, err, None
    if not isinstance(err, dict):
        return None, None, None
    error_type = None
    # OpenAI's string ``code`` ("rate_limit_exceeded") is more specific than its
    # ``type`` ("requests"); Anthropic has only ``type``; Gemini's ``code`` is the
    # HTTP number and ``status`` the name.
    for key in ("code", "type", "status"):
        value = err.get(key)
        if isinstance(value, str) and value:
            error_type = value
            break
    if error_type is None and isinstance(err.get("code"), int):
        error_type = str(err["code"])
    message = err.get("message")
    retry_delay = None
    for detail in err.get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            retry_delay = _parse_duration(detail.get("retryDelay"))
    return error_type, message if isinstance(message, str) else None, retry_delay


def _parse_duration(value: Any) -> float | None:
    """A protobuf JSON duration (``"13s"``, ``"0.5s"``) in seconds."""
    if isinstance(value, str) and value.endswith("s"):
        try:
            seconds = float(value[:-1])
        except ValueError:
            return None
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return None


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI/Anthropic) or ``Retry-After``
    (delta-seconds or an HTTP date); ``None`` when absent or unparseable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    return value if math.isfinite(value) and value >= 0 else None


# --------------------------------------------------------------------------- parsing


class ToolCallTracker:
    """Tool calls keyed by the provider's routing key, mapped to indexes 0, 1, 2 ...

    Keeps the item contract for tool calls: ``ToolCallStart`` once the id and name are
    known (argument fragments that arrive earlier are held and flushed after it), one
    ``ToolCallEnd`` per call, ``"{}"`` as the arguments of a call that sent none.
    ``calls`` lists ``(id, name, arguments)`` of every call, in start order.
    """

    class _Call:
        __slots__ = ("index", "id", "name", "started", "ended", "sent", "pending")

        def __init__(self, index: int) -> None:
            self.index = index
            self.id: str | None = None
            self.name: str | None = None
            self.started = False
            self.ended = False
            self.sent: list[str] = []
            self.pending: list[str] = []

    def __init__(self, id_factory: Callable[[], str]) -> None:
        self._id_factory = id_factory
        self._by_key: dict[Hashable, ToolCallTracker._Call] = {}
        self._calls: list[ToolCallTracker._Call] = []

    @property
    def count(self) -> int:
        return len(self._calls)

    @property
    def calls(self) -> list[tuple[str | None, str | None, str]]:
        return [(c.id, c.name, "".join(c.sent)) for c in self._calls]

    def knows(self, key: Hashable) -> bool:
        return key in self._by_key

    def has_args(self, key: Hashable) -> bool:
        call = self._by_key.get(key)
        return call is not None and bool(call.sent or call.pending)

    def started(self, key: Hashable) -> bool:
        """Whether the call under ``key`` has started (its ``ToolCallStart`` went out)."""
        call = self._by_key.get(key)
        return call is not None and call.started

    def current_id(self, key: Hashable) -> str | None:
        call = self._by_key.get(key)
        return None if call is None else call.id

    def open(
        self,
        key: Hashable,
        *,
        id: str | None = None,
        name: str | None = None,
        new: bool = False,
        signature: str | None = None,
    ) -> list[LLMStreamItem]:
        """Create or update the call under ``key``; start it once id and name are known.

        ``signature`` is the call's own opaque value (``ToolCallStart.signature``);
        it must come with the call's start.

        ``new=True`` (a different call id arrived under a key already in use) ends the
        old call and opens a fresh one, so two calls are never merged into one id.
        """
        items: list[LLMStreamItem] = []
        call = self._by_key.get(key)
        if call is not None and new:
            items += self.end(key)
            call = None
        if call is None:
            call = self._Call(len(self._calls))
            self._calls.append(call)
            self._by_key[key] = call
        if id and call.id is None:
            call.id = id
        if name and call.name is None:
            call.name = name
        if not call.started and call.name is not None:
            if call.id is None:
                call.id = self._id_factory()
            call.started = True
            items.append(ToolCallStart(index=call.index, id=call.id, name=call.name, signature=signature))
            for fragment in call.pending:
                items += self._send(call, fragment)
            call.pending.clear()
        return items

    def args(self, key: Hashable, delta: str) -> list[LLMStreamItem]:
        """An argument fragment for ``key`` (held until the call has started)."""
        if not delta:
            return []
        call = self._by_key.get(key)
        if call is None:
            self.open(key)
            call = self._by_key[key]
        if call.ended:
            raise MalformedStream(f"arguments for tool call {call.id!r} after it ended")
        if not call.started:
            call.pending.append(delta)
            return []
        return self._send(call, delta)

    def complete_args(self, key: Hashable, full: str) -> list[LLMStreamItem]:
        """The provider's final arguments text: emit what the deltas did not carry yet."""
        call = self._by_key.get(key)
        if call is None or not full:
            return []
        so_far = "".join(call.sent) + "".join(call.pending)
        if full == so_far:
            return []
        if full.startswith(so_far):
            return self.args(key, full[len(so_far) :])
        if so_far:
            raise MalformedStream(f"final arguments of tool call {call.id!r} disagree with the streamed ones")
        return self.args(key, full)

    def end(self, key: Hashable) -> list[LLMStreamItem]:
        call = self._by_key.get(key)
        if call is None or call.ended:
            return []
        if not call.started:
            raise MalformedStream(f"tool call {call.id or key!r} ended without a name")
        items: list[LLMStreamItem] = []
        if not call.sent:
            items += self._send(call, "{}")
        call.ended = True
        items.append(ToolCallEnd(index=call.index))
        return items

    def end_all(self) -> list[LLMStreamItem]:
        items: list[LLMStreamItem] = []
        for key, call in list(self._by_key.items()):
            if not call.ended:
                items += self.end(key)
        return items

    @staticmethod
    def _send(call: ToolCallTracker._Call, fragment: str) -> list[LLMStreamItem]:
        call.sent.append(fragment)
        return [ToolCallArgsDelta(index=call.index, delta=fragment)]


Handler = Callable[[Any, Any], list[LLMStreamItem]]


class StreamParser(abc.ABC):
    """Base of the per-provider stream parsers (feed-style, no IO).

    ``feed(event, data)`` takes one SSE message (its ``event`` name and ``data``
    text) and returns items; ``close()`` marks the end of input. After the terminal
    item (``Finish`` or ``StreamError``) further input is ignored and ``done`` is true.
    Never raises for bad remote input: that becomes a ``StreamError`` item.
    """

    provider: ClassVar[str] = "provider"
    #: Name of the provider's terminal marker, for the truncation message.
    terminal_marker: ClassVar[str] = "its terminal marker"

    def __init__(self, *, id_factory: Callable[[], str] | None = None) -> None:
        self.tools = ToolCallTracker(id_factory or _default_id_factory)
        self.usage: Usage | None = None
        self.model: str | None = None
        self.done = False
        self.frames = 0
        #: Strings that must never appear in an item (the client's API key), set by
        #: :class:`StreamingLLMClient` for each response: :meth:`fail` scrubs them.
        self.secrets: Sequence[str] = ()

    # -- subclass API
    @abc.abstractmethod
    def _handle(self, event: str, data: str) -> list[LLMStreamItem]:  # pragma: no cover - abstract
        """The items of one SSE message (``event`` name, ``data`` text)."""

    def _at_eof(self) -> list[LLMStreamItem]:
        """Items at the end of input when no terminal item was produced yet."""
        return self.fail(f"{self.provider} stream ended without {self.terminal_marker}", code="truncated", retryable=True)

    # -- public API
    def feed(self, event: str, data: str) -> list[LLMStreamItem]:
        if self.done:
            return []
        self.frames += 1
        try:
            return self._handle(event, data)
        except MalformedStream as exc:
            return self.fail(f"{self.provider} stream, frame {self.frames}: {exc}", code="malformed_stream")
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            # Handlers read remote JSON of a known shape; valid JSON of another shape
            # (a string where an object belongs ...) surfaces here and is bad input too.
            return self.fail(
                f"{self.provider} stream, frame {self.frames}: unexpected JSON shape ({type(exc).__name__}: {exc})",
                code="malformed_stream",
            )

    def close(self) -> list[LLMStreamItem]:
        if self.done:
            return []
        try:
            return self._at_eof()
        except MalformedStream as exc:
            return self.fail(f"{self.provider} stream at end of input: {exc}", code="malformed_stream")

    def fail(self, message: str, *, code: str | None = None, retryable: bool = False) -> list[LLMStreamItem]:
        """End the stream with a ``StreamError`` (after the partial usage, if any)."""
        if self.done:
            return []
        self.done = True
        items: list[LLMStreamItem] = [self.usage] if self.usage is not None else []
        # Upstream text (an in-band error's message and type, a frame that broke the
        # format) may carry the key: scrub() before anything sees it.
        code = None if code is None else scrub(code, self.secrets)
        items.append(StreamError(message=scrub(message, self.secrets), code=code, retryable=retryable))
        return items

    def finish(self, reason: FinishReason, raw_reason: str | None = None) -> list[LLMStreamItem]:
        """End the stream normally: close open tool calls, then usage, then ``Finish``."""
        items = self.tools.end_all()
        self.done = True
        if self.usage is not None:
            items.append(self.usage)
        items.append(Finish(reason=reason, raw_reason=raw_reason))
        return items

    def set_usage(self, **counts: int | None) -> None:
        """Merge token counts into the pending ``Usage`` (later values win per field)."""
        fields = {k: v for k, v in counts.items() if v is not None}
        base = {} if self.usage is None else msgspec.structs.asdict(self.usage)
        base.update(fields)
        base["provider"] = self.provider
        if self.model:
            base["model"] = self.model
        self.usage = Usage(**base)

    def in_band_error(self, error_type: str | None, message: str | None, *, status: Any = None) -> list[LLMStreamItem]:
        """End with the provider's in-band error; ``status`` is a numeric code it gave
        (HTTP-like: 429 / 5xx make the error retryable)."""
        retryable = _is_retryable_error_type(error_type) or (isinstance(status, int) and is_retryable_status(status))
        return self.fail(
            f"{self.provider} error ({error_type or 'unknown'}): {message or 'no message'}",
            code=error_type or "provider_error",
            retryable=retryable,
        )

    def decode_json(self, data: str) -> Any:
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise MalformedStream(f"invalid JSON in data ({exc})") from None

    def decode_object(self, data: str) -> dict[str, Any]:
        """``data`` as a JSON object (every provider's frames are objects); raises
        :class:`MalformedStream` for invalid JSON or any other JSON value."""
        value = self.decode_json(data)
        if not isinstance(value, dict):
            raise MalformedStream("frame data is not a JSON object")
        return value

    def natural_finish(self) -> FinishReason:
        """The reason of a normal stop that the provider did not qualify: ``tool_calls``
        when the model called tools, else ``stop``."""
        return "tool_calls" if self.tools.count else "stop"


class TypedEventParser(StreamParser):
    """A parser for streams whose frames name their kind (Anthropic Messages, OpenAI
    Responses): ``event: <kind>`` and the same ``<kind>`` in ``data.type``.

    ``_handle`` decodes the frame, refuses an ``event:`` line that disagrees with
    ``data.type`` (a frame without an ``event:`` line has the SSE default ``message``),
    runs :meth:`_check`, and calls the method ``HANDLERS`` maps the kind to.
    Kinds not in the table are skipped: providers add event types without notice.
    """

    #: event kind -> the handler method ``(self, payload) -> items``; a subclass lists
    #: its methods themselves (not their names), so type checkers and IDEs see every route.
    HANDLERS: ClassVar[Mapping[str, Handler]] = {}

    def _check(self, payload: dict[str, Any]) -> None:
        """Provider-wide checks on every frame (raise :class:`MalformedStream`)."""

    def _handle(self, event: str, data: str) -> list[LLMStreamItem]:
        payload = self.decode_object(data)
        kind = payload.get("type") or event
        if event not in ("message", kind):
            raise MalformedStream(f"event line {event!r} disagrees with data.type {kind!r}")
        self._check(payload)
        handler = self.HANDLERS.get(kind)
        if handler is None:
            return []
        return handler(self, payload)


class ProviderStream:
    """Bytes of a provider's SSE body -> items: the engine's :class:`SSEDecoder` feeding a
    :class:`StreamParser` (feed-style, no IO). Bad framing or an oversized frame becomes
    a ``StreamError`` item like any other stream failure."""

    def __init__(self, parser: StreamParser, *, max_frame_bytes: int = MAX_PROVIDER_FRAME_BYTES) -> None:
        self.parser = parser
        self._decoder = SSEDecoder(max_frame_bytes=max_frame_bytes)
        #: The body's last bytes (at most ``MAX_ERROR_BODY_BYTES``): an error written as
        #: bare JSON lines instead of an SSE ``data:`` frame is found here at the end.
        self._tail = bytearray()

    @property
    def done(self) -> bool:
        return self.parser.done

    def feed(self, data: bytes) -> list[LLMStreamItem]:
        if self.parser.done:
            return []
        self._tail += data
        if len(self._tail) > MAX_ERROR_BODY_BYTES:
            del self._tail[: len(self._tail) - MAX_ERROR_BODY_BYTES]
        try:
            messages = self._decoder.feed(data)
        except RemoteInputError as exc:
            return self.parser.fail(f"{self.parser.provider} stream: {exc.message}", code=exc.code)
        items: list[LLMStreamItem] = []
        for message in messages:
            items += self.parser.feed(message.event, message.data)
            if self.parser.done:
                break
        return items

    def close(self) -> list[LLMStreamItem]:
        if self.parser.done:
            return []
        try:
            self._decoder.close()
        except RemoteInputError as exc:
            return self.parser.fail(f"{self.parser.provider} stream: {exc.message}", code=exc.code)
        return self._bare_json_error() or self.parser.close()

    def _bare_json_error(self) -> list[LLMStreamItem]:
        """An error the provider wrote as bare JSON lines (not SSE; Gemini does, e.g.
        ``[{"error": {"code": 429, ...}}]`` pretty-printed) at the end of the body: the
        lines of the tail that are not SSE fields, decoded, as an in-band error.
        ``[]`` when there is none (the SSE decoder ignored those lines as unknown fields)."""
        lines = self._tail.decode("utf-8", "replace").splitlines()
        sse = ("data:", "event:", "id:", "retry:", ":")
        # Only the lines after the last SSE field: earlier ones are the stream itself.
        last = max((i for i, line in enumerate(lines) if line.startswith(sse)), default=-1)
        text = "\n".join(lines[last + 1 :]).strip()
        if not text.startswith(("{", "[")):
            return []
        try:
            body = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return []
        first = body[0] if isinstance(body, list) and body else body
        if not isinstance(first, dict) or "error" not in first:
            return []
        error_type, message, _ = extract_error(body)
        error = first["error"]
        status = error.get("code") if isinstance(error, dict) else None
        return self.parser.in_band_error(error_type, message, status=status)


def _default_id_factory() -> str:
    return random_id("call_", 24)  # the shape of OpenAI's own tool call ids


# --------------------------------------------------------------------------- HTTP


class CompletionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of one :meth:`StreamingLLMClient.complete` call, as the request
    builders receive them."""

    messages: Sequence[Any]
    tools: Sequence[LLMTool]
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None


class MissingAPIKeyError(UsageError):
    """A provider client was made without a key: none passed, none in the environment.
    ``provider`` and ``names`` (the environment variables tried) let a command line say
    what to set instead of the library's ``api_key=``."""

    def __init__(self, provider: str, names: Sequence[str]) -> None:
        super().__init__(f"{provider} needs an API key: pass api_key= or set {' or '.join(names)}")
        self.provider = provider
        self.names = tuple(names)


def api_key_from(env: Mapping[str, str], names: Sequence[str], provider: str) -> str:
    """The first non-empty of ``names`` in ``env``; raises :class:`MissingAPIKeyError` naming them."""
    for name in names:
        value = env.get(name)
        if value:
            return value
    raise MissingAPIKeyError(provider, names)


class StreamingLLMClient(abc.ABC):
    """An :class:`~agui_engine.llm.LLMClient` over httpx streaming (base class).

    Subclasses provide ``provider``, the key / base-URL class attributes,
    ``parser_class``, :meth:`build_request` and :meth:`auth_headers`. ``api_key`` and
    ``base_url`` default to the environment (``env``, default ``os.environ``); a missing
    required key raises :class:`UsageError` naming the variables. ``http_client``: an ``httpx.AsyncClient`` to use (the caller
    owns it); without one the client makes its own per event loop and closes it in
    :meth:`aclose`. ``sleep`` is the coroutine used to wait between retries.
    """

    provider: ClassVar[str] = "provider"
    #: Human name used in messages.
    label: ClassVar[str] = "the provider"
    #: Environment variables that may hold the API key, in order of precedence.
    key_env: ClassVar[tuple[str, ...]] = ()
    #: Whether a key is required (local OpenAI-compatible servers need none).
    key_required: ClassVar[bool] = True
    #: Environment variable that may hold the base URL, and the default.
    base_url_env: ClassVar[str | None] = None
    default_base_url: ClassVar[str | None] = None
    #: The provider's stream parser (made once per response by :meth:`new_parser`); every
    #: provider sets it or overrides :meth:`new_parser`.
    parser_class: ClassVar[type[StreamParser]]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        env: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: httpx.Timeout | float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        id_factory: Callable[[], str] | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        if api_key is None:
            if self.key_required:
                api_key = api_key_from(env, self.key_env, self.label)
            else:
                api_key = next((env[name] for name in self.key_env if env.get(name)), None)
        base_url = base_url or (env.get(self.base_url_env) if self.base_url_env else None) or self.default_base_url
        if not base_url:
            raise UsageError(f"{self.label} needs a base_url")
        self.model = model
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self._given_client = http_client
        self._own_client: httpx.AsyncClient | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self.max_retries = max_retries
        self._timeout = (
            timeout
            if isinstance(timeout, httpx.Timeout)
            else httpx.Timeout(timeout if timeout is not None else READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)
        )
        self.extra_body = dict(extra_body or {})
        self.extra_headers = dict(extra_headers or {})
        self.id_factory = id_factory
        self._sleep = sleep or asyncio.sleep

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- subclass API
    @abc.abstractmethod
    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:  # pragma: no cover - abstract
        """``(url, json_body)`` for one streaming request."""

    @abc.abstractmethod
    def auth_headers(self) -> dict[str, str]:  # pragma: no cover - abstract
        """The authentication headers of a request (never logged or shown)."""

    def new_parser(self) -> StreamParser:
        """A fresh parser for one response: :attr:`parser_class` with the client's ids."""
        return self.parser_class(id_factory=self.id_factory)

    # -- LLMClient
    async def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncGenerator[LLMStreamItem, None]:
        """Stream the model's answer. Raises :class:`ProviderError` before the first
        item (after bounded retries); later failures are a ``StreamError`` item.
        Closing the iterator closes the HTTP response at once."""
        url, body = self.build_request(
            CompletionRequest(
                messages=messages,
                tools=tools,
                tool_choice=tool_choice,
                parallel_tool_calls=parallel_tool_calls,
                max_output_tokens=max_output_tokens,
            )
        )
        if self.extra_body:
            body = {**body, **self.extra_body}
        payload = msgspec.json.encode(body)
        attempt = 0
        while True:
            yielded = False
            held_usage: Usage | None = None
            retry_delay: float | None = None
            try:
                async with contextlib.aclosing(self._attempt(url, payload)) as items:
                    async for item in items:
                        if not yielded:
                            # Nothing reached the consumer yet, so a retryable in-band
                            # error can still be retried; usage alone does not count.
                            if isinstance(item, Usage):
                                held_usage = item
                                continue
                            if isinstance(item, StreamError) and item.retryable and attempt < self.max_retries:
                                retry_delay = self._backoff(attempt)
                                break
                            if held_usage is not None:
                                yield held_usage
                            yielded = True
                        yield item
                if retry_delay is None:
                    return
                _log.warning("%s stream failed before its first item; retry %d in %.2fs", self.provider, attempt + 1, retry_delay)
            except ProviderError as exc:
                retry_delay = self._retry_delay(exc, attempt)
                if retry_delay is None:
                    raise
                _log.warning(
                    "%s request failed (%s); retry %d in %.2fs", self.provider, exc.code, attempt + 1, retry_delay
                )
            await self._sleep(retry_delay)
            attempt += 1

    async def aclose(self) -> None:
        """Close the HTTP client this object made (not one it was given)."""
        if self._own_client is not None:
            client, self._own_client = self._own_client, None
            await client.aclose()

    async def __aenter__(self) -> StreamingLLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- internals
    def _secrets(self) -> list[str]:
        return [self._api_key] if self._api_key else []

    def _http(self) -> httpx.AsyncClient:
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._own_client is None or self._own_loop is not loop:
            # An AsyncClient's pooled connections belong to one event loop. httpx's interface on
            # aiohttp's connection and C parser: a provider streams each token as a chunk, which
            # httpx's own transport (h11) parses in pure Python (spec/benchmarks.md)
            from httpx_aiohttp import AiohttpTransport  # imports aiohttp: only when a stream is read

            self._own_client = httpx.AsyncClient(transport=AiohttpTransport(), timeout=self._timeout)
            self._own_loop = loop
        return self._own_client

    def _backoff(self, attempt: int) -> float:
        base = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * (2**attempt))
        return float(base * (1.0 - RETRY_JITTER_FRACTION * random.random()))

    def _retry_delay(self, exc: ProviderError, attempt: int) -> float | None:
        if not exc.retryable or attempt >= self.max_retries:
            return None
        if exc.retry_after is not None:
            return exc.retry_after if exc.retry_after <= MAX_RETRY_AFTER_SECONDS else None
        return self._backoff(attempt)

    def _error_from_response(self, response: httpx.Response, body: bytes) -> ProviderError:
        secrets = self._secrets()
        status = response.status_code
        try:
            decoded = msgspec.json.decode(body)
        except msgspec.DecodeError:
            decoded = None
        error_type, message, retry_delay = extract_error(decoded)
        if message is None:
            text = body.decode("utf-8", "replace").strip()
            message = text or response.reason_phrase or "no body"
        message = scrub(message, secrets)
        if error_type is not None:
            error_type = scrub(error_type, secrets)
        retryable = is_retryable_status(status) or _is_retryable_error_type(error_type)
        should_retry = response.headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        retry_after = parse_retry_after(response.headers)
        if retry_after is None:
            retry_after = retry_delay
        return ProviderError(
            f"{self.provider} API error {status} ({error_type or 'unknown'}): {message}",
            provider=self.provider,
            status=status,
            error_type=error_type,
            provider_message=message,
            retryable=retryable,
            retry_after=retry_after,
            code=error_type or f"http_{status}",
        )

    async def _attempt(self, url: str, payload: bytes) -> AsyncGenerator[LLMStreamItem, None]:
        """One request: raises ProviderError before the stream, else yields items."""
        client = self._http()
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **self.extra_headers,
            **self.auth_headers(),
            **trace_headers(),  # W3C traceparent of the run's chat span, when traced (loops/observe.py)
        }
        request = client.build_request("POST", url, content=payload, headers=headers, timeout=self._timeout)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            # The URL carries no secret (keys travel in headers); redact anyway.
            raise ProviderError(
                scrub(f"{self.provider}: cannot reach {request.url.host}: {type(exc).__name__}: {exc}", self._secrets()),
                provider=self.provider,
                retryable=True,
                code="provider_unreachable",
            ) from None
        try:
            if response.status_code != 200:
                body = await _read_bounded(response)
                raise self._error_from_response(response, body)
            content_type = response.headers.get("content-type", "")
            if content_type.startswith(("application/json", "text/html")):
                body = await _read_bounded(response)
                error = self._error_from_response(response, body)
                raise ProviderError(
                    scrub(
                        f"{self.provider}: expected an event stream, got {content_type.split(';')[0]}: {error.provider_message}",
                        self._secrets(),
                    ),
                    provider=self.provider,
                    status=response.status_code,
                    error_type=error.error_type,
                    provider_message=error.provider_message,
                    code=error.error_type or "not_an_event_stream",
                )
            parser = self.new_parser()
            parser.secrets = self._secrets()
            stream = ProviderStream(parser)
            chunks = response.aiter_bytes()
            try:
                async for chunk in chunks:
                    items = stream.feed(chunk)
                    if stream.done:
                        # Before the terminal item reaches the consumer (who may stop
                        # iterating there): read the body's end so the connection is pooled.
                        await _drain(chunks)
                    for item in items:
                        yield item
                    if stream.done:
                        return
                for item in stream.close():
                    yield item
            except httpx.TimeoutException:
                for item in stream.parser.fail(
                    f"{self.provider} stream stalled: no data for {self._timeout.read} s", code="timeout", retryable=True
                ):
                    yield item
            except httpx.TransportError as exc:
                for item in stream.parser.fail(
                    f"{self.provider} connection lost mid-stream: {type(exc).__name__}: {exc}",
                    code="connection_lost",
                    retryable=True,
                ):
                    yield item
        finally:
            await response.aclose()


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read and drop the rest of a body, at most :data:`MAX_DRAIN_BYTES` within
    :data:`DRAIN_TIMEOUT_SECONDS`. A body read to its end returns its connection to
    httpx's pool when the response closes; past either bound (or on a transport error)
    this gives up silently and the close drops the connection, as before."""

    size = 0
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_TIMEOUT_SECONDS):  # in this task: httpx's stream is not shared
            async for rest in chunks:
                size += len(rest)
                if size > MAX_DRAIN_BYTES:
                    return


async def _read_bounded(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_ERROR_BODY_BYTES:
                break
    except httpx.HTTPError:
        pass  # an error body that cannot be read still leaves the status to report
    return b"".join(chunks)[:MAX_ERROR_BODY_BYTES]
