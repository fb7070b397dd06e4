"""Wire codecs for AG-UI events: JSON, SSE frames and NDJSON lines, both directions.

Theory of operation
-------------------
**Encoding** is one module-level :class:`msgspec.json.Encoder` over the event Structs of
:mod:`agui_engine.protocol.events`: compact JSON, camelCase keys, unset optionals omitted, non-ASCII as
raw UTF-8 -- byte for byte what the official SDK's ``EventEncoder`` writes. An SSE frame is
``[id: <id>\\n][event: <name>\\n]data: <json>\\n\\n``: a JSON text never contains a raw CR or
LF (they are escaped inside strings), so one ``data:`` line always carries the whole event and
nothing a value contains can break the framing. Ids and event names are checked for CR, LF and
NUL (:class:`~agui_engine.protocol.errors.UsageError`): they come from the caller, not the peer.

**Decoding** is feed-style (h11 / wsproto): ``feed(bytes) -> list`` and an explicit
``close() -> list``; an empty chunk is just an empty chunk. Every decoder gives the same output
for any split of the same input, down to one byte at a time, because it only ever interprets
*complete lines*: a partial line is held back as raw bytes (pieces are joined once, so feeding
a large frame byte by byte stays linear) and is decoded when its terminator arrives.

* :class:`SSEDecoder` follows the WHATWG ``text/event-stream`` rules (HTML §9.2): CR, LF and
  CRLF line ends (a CR that ends one chunk and an LF that starts the next are one line end);
  exactly one leading BOM stripped, even when split across chunks; ``:`` comment lines; the
  field name is everything before the first colon and one leading space is dropped from the
  value; multi-line ``data`` joined with LF; ``id`` containing NUL ignored; the last-event-ID
  persists across events; ``retry`` only when all ASCII digits; a block without data
  dispatches nothing; an unfinished event at the end of input is dropped. It splits on CR and
  LF only -- never on U+2028, U+0085 or the other separators ``str.splitlines`` knows.
  One deliberate deviation: invalid UTF-8 is an error naming its byte offset instead of
  being replaced by U+FFFD, because a gateway must not silently corrupt an event.
* :class:`NDJSONDecoder` yields one complete line per JSON text (LF ends a line, a CR before
  it is dropped, blank lines are skipped); a final line without LF is returned by ``close()``.
* :class:`EventStreamDecoder` puts either framing in front of :func:`decode_event`.

**Fast paths** (speed is the point of this module: see ``benchmarks/bench_codec.py``): input made
only of ``data: <json>\n\n`` frames (the SDK's shape), optionally with an ``id:`` line (ours), is
split in bulk by C-level bytes methods, and a ``feed`` that carries exactly one such frame skips
the line parser. A fast path never decides anything the general parser would decide differently:
it only runs from a clean state (between frames), and on anything unusual -- another shape,
invalid UTF-8, an oversized frame, an event that does not decode -- it gives the input to the
general parser from that same state, which produces the canonical result or error.

**Errors.** Bad remote bytes raise :class:`EventDecodeError` (a ``RemoteInputError``) naming
the byte offset, the frame index and, for a malformed event, the JSON path and why
(``frame 3 at byte 120: $.delta: expected str, got int``). An oversized frame raises
:class:`FrameTooLargeError` and JSON nested deeper than msgspec decodes raises
:class:`JSONTooDeepError` (both ``LimitExceededError``: 413 / 4413). Nothing accepted before the bad input
is lost: when a ``feed`` call has already decoded items before hitting the error it returns
them, and the error is raised by the next ``feed``/``close``; after an error the decoder stays
failed and raises the same error again.

**Tolerance.** Strict by default: an unknown event type is an error. ``tolerant=True``
applies the AG-UI 1.1 processing rule ("unrecognised material is not an error, a malformed
known value is"): an unknown event type becomes an :class:`~agui_engine.protocol.events.UnknownEvent`
(re-encoded unchanged), unknown JSON Patch ops, unknown outcome types, messages with an
unknown role and content parts of an unknown type are dropped with a warning; a wrong-typed
known field is still an error. Unknown *fields* are dropped in both modes. The deprecated
``THINKING_*`` events are accepted by :class:`EventStreamDecoder` in both modes and mapped to
``REASONING_*`` as the TypeScript client's ``BackwardCompatibility_0_0_45`` middleware does
(:class:`LegacyThinkingMapper`).

Nothing here does IO.
"""

from __future__ import annotations

import abc
import re
import uuid
from collections.abc import Callable
from itertools import accumulate, repeat
from operator import add
from typing import Any, Final, Literal, NamedTuple, Union, cast, get_args

import msgspec

from .errors import LimitExceededError, RemoteInputError, UsageError
from .events import (
    AnyEvent,
    BinaryInputContent,
    ContentPart,
    Event,
    EventType,
    JsonPatchOperation,
    Message,
    RunFinishedOutcome,
    SubagentFinishedOutcome,
    UnknownEvent,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "EventDecodeError",
    "EventStreamDecoder",
    "FrameTooLargeError",
    "JSONTooDeepError",
    "LegacyThinkingMapper",
    "MSGSPEC_MAX_JSON_DEPTH",
    "NDJSONDecoder",
    "NDJSON_CONTENT_TYPE",
    "SSEDecoder",
    "SSEMessage",
    "SSE_CONTENT_TYPE",
    "decode_event",
    "decode_event_list",
    "deliver_or_defer",
    "encode_event",
    "encode_ndjson",
    "encode_sse",
    "encode_sse_comment",
]

#: Largest SSE event block (bytes of its lines, terminators excluded) a decoder accepts.
#: One AG-UI event per frame; the largest legitimate ones are MESSAGES_SNAPSHOT /
#: STATE_SNAPSHOT / RUN_STARTED.input of a long conversation, which can carry inline base64
#: images (a few MB each). 16 MiB admits those with room to spare while bounding what one
#: peer can make a connection buffer.
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
#: Largest NDJSON line (one event); same reasoning as :data:`DEFAULT_MAX_FRAME_BYTES`.
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024

SSE_CONTENT_TYPE: Final = "text/event-stream"
NDJSON_CONTENT_TYPE: Final = "application/x-ndjson"

#: The deprecated 0.x reasoning events (removed from the 1.0 enum), accepted on input.
_LEGACY_THINKING_TYPES: Final = frozenset(
    {
        "THINKING_START",
        "THINKING_END",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
    }
)

_KNOWN_TYPES: Final = frozenset(t.value for t in EventType)
_BOM: Final = b"\xef\xbb\xbf"
# CRLF first so that it is one terminator, not CR then an empty line. Captured so that the
# decoder knows each terminator's length (byte offsets stay exact).
_EOL_SPLIT: Final = re.compile(rb"(\r\n|\r|\n)")
# The shapes every AG-UI producer writes (ours with ids, the SDK's EventEncoder without):
# a run of these is decoded in bulk, at C speed, by SSEDecoder._bulk.
_ID_DATA_FRAMES: Final = re.compile(rb"(?:id: [^\n\0]*\ndata: [^\n]*\n\n)+")
_ID_DATA_FRAME: Final = re.compile(rb"id: ([^\n\0]*)\ndata: ([^\n]*)\n\n")


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class EventDecodeError(RemoteInputError):
    """Remote bytes that are not a valid AG-UI event or frame.

    Attributes (``None`` where the raiser does not know them):
    ``reason`` -- why, e.g. ``"expected str, got int"``;
    ``path`` -- JSON path inside the event, e.g. ``"$.delta"``;
    ``offset`` -- absolute byte offset in the stream (the bad byte for invalid UTF-8, the
    frame's first byte otherwise);
    ``frame_index`` -- 0-based index of the frame (SSE event / NDJSON line) in the stream.
    """

    default_code = "invalid_event"

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        frame_index: int | None = None,
        code: str | None = None,
    ) -> None:
        where = []
        if frame_index is not None:
            where.append(f"frame {frame_index}")
        if offset is not None:
            where.append(f"at byte {offset}")
        prefix = " ".join(where)
        detail = f"{path}: {reason}" if path else reason
        super().__init__(f"{prefix}: {detail}" if prefix else detail, code=code)
        self.reason = reason
        self.path = path
        self.offset = offset
        self.frame_index = frame_index

    def located(self, *, offset: int | None, frame_index: int | None) -> EventDecodeError:
        """A copy of this error that also says where in the stream it happened."""
        return type(self)(
            self.reason, path=self.path, offset=offset, frame_index=frame_index, code=self.code
        )


class FrameTooLargeError(LimitExceededError, EventDecodeError):
    """A frame crossed ``max_frame_bytes`` / ``max_line_bytes``; ``offset`` is where it began."""

    default_code = "frame_too_large"


#: How deep an event's JSON may nest, under the interpreter's default recursion limit.
#: The codec does not count brackets itself -- that would be a second pass over every
#: frame on the hot path for input no real event comes near (AG-UI events nest a few
#: levels; a deep state snapshot a few dozen). msgspec bounds the depth with the
#: interpreter's recursion limit (``sys.getrecursionlimit()``, 1000 by default) less the
#: frames already on the stack, so the effective bound is a little under this value
#: (998 from a shallow stack) and moves with ``sys.setrecursionlimit``. Past it msgspec
#: raises ``RecursionError``, which the codec turns into :class:`JSONTooDeepError`.
MSGSPEC_MAX_JSON_DEPTH: Final = 1000


class JSONTooDeepError(LimitExceededError, EventDecodeError):
    """An event's JSON nests deeper than msgspec decodes (see :data:`MSGSPEC_MAX_JSON_DEPTH`).

    A limit, not malformed JSON: the text may be valid, the engine refuses to decode it.
    """

    default_code = "json_too_deep"


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, UnknownEvent):
        return obj.data
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_enc_hook)
_encode: Final = _ENCODER.encode


def _unencodable(event: Any, err: Exception) -> UsageError:
    kind = getattr(event, "type", type(event).__name__)
    return UsageError(f"cannot encode {kind} event: {err}")


def encode_event(event: AnyEvent) -> bytes:
    """One event as compact JSON bytes (what goes in an SSE ``data:`` line or an NDJSON line).

    Raises :class:`UsageError` (a ``TypeError``) for a value that cannot be JSON: an object of
    an unsupported type, a string with a lone surrogate. Non-finite floats inside free-form
    values are written as ``null`` (msgspec's rule, the same output as the SDK's serializer).
    """
    try:
        return _encode(event)
    except (TypeError, UnicodeEncodeError) as err:
        raise _unencodable(event, err) from None


def _check_field(value: str, what: str) -> bytes:
    if "\n" in value or "\r" in value or "\0" in value:
        raise UsageError(f"SSE {what} must not contain CR, LF or NUL: {value!r}")
    return value.encode()


def encode_sse(event_or_json: AnyEvent | bytes, id: str | None = None, event: str | None = None) -> bytes:
    """One SSE frame: optional ``id:`` and ``event:`` lines, one ``data:`` line, LF endings.

    (``id`` and ``event`` are deliberately not keyword-only: CPython 3.11 specialises
    calls to functions with positional defaults but not to ones with keyword-only
    parameters, and that call overhead is ~10% of encoding one event.)

    ``event_or_json`` is an event or already-encoded JSON bytes (from :func:`encode_event`;
    a transport that fans one event out to many subscribers encodes it once).
    Raises :class:`UsageError` when ``id`` or ``event`` contains CR, LF or NUL, when
    pre-encoded bytes contain a raw CR or LF (they would split the frame), or when the event
    cannot be encoded (see :func:`encode_event`).
    """
    if type(event_or_json) is bytes:
        payload = event_or_json
        if b"\n" in payload or b"\r" in payload:
            raise UsageError("pre-encoded SSE payload contains a raw CR or LF")
    elif id is None and event is None:
        try:
            return b"data: %b\n\n" % _encode(event_or_json)  # the hot path: one allocation
        except (TypeError, UnicodeEncodeError) as err:
            raise _unencodable(event_or_json, err) from None
    else:  # (`type() is bytes` is the fast test, but type checkers do not narrow on it)
        payload = encode_event(cast(AnyEvent, event_or_json))
    head = b""
    if id is not None:
        head = b"id: " + _check_field(id, "id") + b"\n"
    if event is not None:
        head += b"event: " + _check_field(event, "event name") + b"\n"
    return b"%bdata: %b\n\n" % (head, payload)


def encode_sse_comment(text: str = "") -> bytes:
    """An SSE comment frame (keep-alive): ``:<text>\\n\\n``; ignored by every SSE parser.

    Raises :class:`UsageError` when ``text`` contains CR, LF or NUL.
    """
    return b":" + _check_field(text, "comment") + b"\n\n"


def encode_ndjson(event: AnyEvent) -> bytes:
    """One event as one NDJSON line (compact JSON + LF). Raises as :func:`encode_event`."""
    return encode_event(event) + b"\n"


# ---------------------------------------------------------------------------------------------
# Decoding one event
# ---------------------------------------------------------------------------------------------

_DECODER: Final[msgspec.json.Decoder[Event]] = msgspec.json.Decoder(Event)
_decode: Final = _DECODER.decode
_DECODE_ERRORS: Final = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)
_ANY_DECODER: Final = msgspec.json.Decoder()


def _describe(err: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's ``Expected `str`, got `int` - at `$.delta``` -> ("$.delta", "expected str, got int")."""
    message = str(err)
    reason, sep, path = message.rpartition(" - at `")
    if sep:
        path = path[:-1]
    else:
        reason, path = message, "$"
    reason = reason.replace("`", "")
    return path, reason[:1].lower() + reason[1:]


class LegacyThinkingMapper:
    """Maps the deprecated ``THINKING_*`` events to ``REASONING_*`` (stateful, one per stream).

    Mirrors the TypeScript client's ``BackwardCompatibility_0_0_45`` middleware:
    ``THINKING_START`` -> ``REASONING_START`` with a fresh id (its ``title`` is dropped);
    ``THINKING_TEXT_MESSAGE_START`` -> ``REASONING_MESSAGE_START`` with a fresh id and
    ``role: "reasoning"``; ``..._CONTENT`` / ``..._END`` reuse the open message's id;
    ``THINKING_END`` -> ``REASONING_END`` with the span's id. The 0.x events carry no ids, so
    ids come from ``id_factory`` (default: random UUIDs, as the TS client does).
    """

    def __init__(self, id_factory: Callable[[], str] | None = None) -> None:
        self._new_id = id_factory or (lambda: str(uuid.uuid4()))
        self._reasoning_id: str | None = None
        self._message_id: str | None = None

    def map(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The ``REASONING_*`` JSON object for a ``THINKING_*`` one (a new dict).

        Raises :class:`UsageError` when ``obj["type"]`` is not a legacy THINKING type.
        """
        kind = obj.get("type")
        out = dict(obj)
        if kind == "THINKING_START":
            self._reasoning_id = self._new_id()
            out.pop("title", None)
            out["type"] = "REASONING_START"
            out["messageId"] = self._reasoning_id
        elif kind == "THINKING_TEXT_MESSAGE_START":
            self._message_id = self._new_id()
            out["type"] = "REASONING_MESSAGE_START"
            out["messageId"] = self._message_id
            out["role"] = "reasoning"
        elif kind == "THINKING_TEXT_MESSAGE_CONTENT":
            out["type"] = "REASONING_MESSAGE_CONTENT"
            out["messageId"] = self._message_id or self._new_id()
        elif kind == "THINKING_TEXT_MESSAGE_END":
            out["type"] = "REASONING_MESSAGE_END"
            out["messageId"] = self._message_id or self._new_id()
        elif kind == "THINKING_END":
            out["type"] = "REASONING_END"
            out["messageId"] = self._reasoning_id or self._new_id()
        else:
            raise UsageError(f"not a legacy THINKING event type: {kind!r}")
        return out


class _Members(NamedTuple):
    """The known members of one open union: the tag field and its values."""

    field: str
    tags: frozenset[str]


def _members(union: Any) -> _Members:
    """The tag field and tag values of a union of tagged Structs in :mod:`~agui_engine.protocol.events`.
    Derived, never restated: a role, part type, patch op or outcome added to the event model
    is known here at once instead of being pruned as unknown."""
    configs = [cls.__struct_config__ for cls in get_args(union)]
    fields = {config.tag_field for config in configs}
    if len(fields) != 1 or any(not isinstance(config.tag, str) for config in configs):
        raise TypeError(f"{union!r} is not a union of Structs tagged by one field")  # a bug in events.py
    return _Members(fields.pop(), frozenset(cast(str, config.tag) for config in configs))


# Known members of the open unions the tolerant mode prunes (AG-UI 1.1: "unknown union
# member ⇒ dropped/stripped with a warning"), from the event model's own unions.
_PATCH_OPS: Final = _members(JsonPatchOperation)
_RUN_OUTCOMES: Final = _members(RunFinishedOutcome)
_SUBAGENT_OUTCOMES: Final = _members(SubagentFinishedOutcome)
_ROLES: Final = _members(Message)
# (with the 0.x binary part, which a message upgrades when it is decoded: events.upgrade_binary_part)
_PART_TYPES: Final = _members(Union[ContentPart, BinaryInputContent])


def _prune_list(items: Any, known: _Members, where: str, warn: list[str]) -> Any:
    if not isinstance(items, list):
        return items
    kept = []
    key, tags = known
    for i, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get(key), str) and item[key] not in tags:
            warn.append(f"{where}[{i}]: dropped unknown {key} {item[key]!r}")
        else:
            kept.append(item)
    return kept


def _prune_messages(messages: Any, where: str, warn: list[str]) -> Any:
    messages = _prune_list(messages, _ROLES, where, warn)
    if isinstance(messages, list):
        for i, m in enumerate(messages):
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                m["content"] = _prune_list(
                    m["content"], _PART_TYPES, f"{where}[{i}].content", warn
                )
    return messages


def _prune_unknown_members(obj: dict[str, Any], warn: list[str]) -> dict[str, Any]:
    """Drop unknown union members from a known event's JSON object (in place); record why."""
    kind = obj["type"]
    if kind == "STATE_DELTA":
        obj["delta"] = _prune_list(obj.get("delta"), _PATCH_OPS, "$.delta", warn)
    elif kind == "ACTIVITY_DELTA":
        obj["patch"] = _prune_list(obj.get("patch"), _PATCH_OPS, "$.patch", warn)
    elif kind in ("RUN_FINISHED", "SUBAGENT_FINISHED"):
        known = _RUN_OUTCOMES if kind == "RUN_FINISHED" else _SUBAGENT_OUTCOMES
        outcome = obj.get("outcome")
        if isinstance(outcome, dict) and isinstance(outcome.get(known.field), str):
            if outcome[known.field] not in known.tags:
                warn.append(f"$.outcome: dropped unknown outcome {known.field} {outcome[known.field]!r}")
                del obj["outcome"]
    elif kind == "MESSAGES_SNAPSHOT":
        obj["messages"] = _prune_messages(obj.get("messages"), "$.messages", warn)
    elif kind == "RUN_STARTED" and isinstance(obj.get("input"), dict):
        inp = obj["input"]
        inp["messages"] = _prune_messages(inp.get("messages"), "$.input.messages", warn)
    elif kind == "TOOL_CALL_RESULT" and isinstance(obj.get("content"), list):
        obj["content"] = _prune_list(obj["content"], _PART_TYPES, "$.content", warn)
    return obj


def decode_event(
    data: bytes | str,
    *,
    tolerant: bool = False,
    legacy: LegacyThinkingMapper | None = None,
    warnings: list[str] | None = None,
) -> AnyEvent:
    """Decode one event from its JSON text.

    ``tolerant``: see the module docstring (unknown types become :class:`UnknownEvent`,
    unknown union members are dropped and a line is appended to ``warnings`` if given).
    ``legacy``: a :class:`LegacyThinkingMapper` that turns ``THINKING_*`` into ``REASONING_*``
    (without one they are unknown types).

    Raises :class:`EventDecodeError` with the JSON path and the reason (no stream position:
    the stream decoders add it).
    """
    try:
        return _decode(data)
    except msgspec.ValidationError as err:
        first_error: msgspec.ValidationError = err
    except msgspec.DecodeError as err:
        raise EventDecodeError(f"not valid JSON: {err}", code="invalid_json") from None
    except RecursionError:
        raise JSONTooDeepError(
            f"JSON nested too deeply (more than about MSGSPEC_MAX_JSON_DEPTH={MSGSPEC_MAX_JSON_DEPTH} levels)"
        ) from None
    # Slow path, only for input the fast path rejected.
    try:
        obj = _ANY_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):
        obj = None  # the shape error found first is the one to report
    kind = obj.get("type") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind not in _KNOWN_TYPES:
        if legacy is not None and kind in _LEGACY_THINKING_TYPES:
            mapped = legacy.map(obj)
            if warnings is not None:
                warnings.append(f"deprecated {kind} mapped to {mapped['type']}")
            return _convert(mapped)
        if tolerant:
            return UnknownEvent(kind, obj)
        raise EventDecodeError(f"unknown event type {kind!r}", path="$.type", code="unknown_event")
    if tolerant and isinstance(kind, str):
        warn: list[str] = []
        event = _convert(_prune_unknown_members(obj, warn))
        if warnings is not None:
            warnings.extend(f"{kind} {w}" for w in warn)
        return event
    path, reason = _describe(first_error)
    raise EventDecodeError(reason, path=path)


def _convert(obj: dict[str, Any]) -> Event:
    try:
        event: Event = msgspec.convert(obj, Event)
        return event
    except msgspec.ValidationError as err:
        path, reason = _describe(err)
        raise EventDecodeError(reason, path=path) from None


# ---------------------------------------------------------------------------------------------
# SSE
# ---------------------------------------------------------------------------------------------


class SSEMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatched SSE event.

    ``id`` is the stream's last-event-ID at dispatch (it persists across events, WHATWG), or
    ``None`` when empty; ``retry`` is the reconnection time set inside this event's block.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class _LineBuffer:
    """Holds back the partial last line between feeds; shared by the SSE and NDJSON decoders.

    ``take(data)`` returns everything up to the last line end now available and keeps the rest
    (as a list of pieces, joined once when its line end arrives). ``offset`` is the absolute
    stream offset of the first byte not yet returned. With ``cr_is_eol`` a CR ending one chunk
    and an LF starting the next are one line end.
    """

    __slots__ = ("_parts", "partial_len", "offset", "_skip_lf", "_cr_is_eol")

    def __init__(self, *, cr_is_eol: bool) -> None:
        self._parts: list[bytes] = []
        self.partial_len = 0
        self.offset = 0
        self._skip_lf = False
        self._cr_is_eol = cr_is_eol

    def has_partial(self) -> bool:
        return self.partial_len > 0

    def partial(self) -> bytes:
        return b"".join(self._parts)

    def take(self, data: bytes) -> tuple[bytes, bool, int]:
        """-> (the complete lines now available, as one buffer ending with a line end;
        whether it holds a CR line end; its stream offset). Keeps the partial rest."""
        if self._skip_lf:
            # The previous chunk ended in CR: an LF starting this one completes that CRLF.
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
                self.offset += 1
        has_cr = self._cr_is_eol and b"\r" in data
        last = data.rfind(b"\n")
        if has_cr:
            last = max(last, data.rfind(b"\r"))
        if last < 0:
            if data:
                self._parts.append(data)
                self.partial_len += len(data)
            return b"", False, self.offset
        if self._parts:
            last += self.partial_len
            self._parts.append(data)
            data = b"".join(self._parts)
            self._parts = []
        start = self.offset
        end = last + 1
        complete = data[:end] if end < len(data) else data
        rest = data[end:]
        if rest:
            self._parts.append(rest)
        elif has_cr and data[last] == 0x0D:
            self._skip_lf = True
        self.partial_len = len(rest)
        self.offset = start + end
        return complete, has_cr, start


def _split_lines(complete: bytes, has_cr: bool) -> tuple[list[bytes], list[bytes] | None]:
    """Complete lines and their terminators (``None``: every terminator is one LF)."""
    if has_cr:
        pieces = _EOL_SPLIT.split(complete)
        pieces.pop()  # b"": ``complete`` ends with a terminator
        return pieces[0::2], pieces[1::2]
    lines = complete.split(b"\n")
    lines.pop()
    return lines, None


class _Framer(abc.ABC):
    """What the SSE and NDJSON splitters share: input checks, the failed and closed states,
    deferred errors (see :func:`deliver_or_defer`) and the offsets of the frames last returned."""

    _name = "decoder"

    def __init__(self, *, cr_is_eol: bool) -> None:
        self._lines = _LineBuffer(cr_is_eol=cr_is_eol)
        self._offsets: list[int] = []  # stream offset of each frame the last call returned
        # (first index, stream offset, frame lengths) of frames decoded in bulk: resolved into
        # ``_offsets`` by frame_offsets() only when an error needs them.
        self._lazy_offsets: list[tuple[int, int, Any]] = []
        self._error: Exception | None = None
        self._closed = False
        # True while the decoder sits exactly between frames with nothing pending: the only
        # state in which the one-frame fast path may run. Recomputed after every general feed.
        self._idle = False

    def feed(self, data: bytes) -> list[Any]:
        """Parse more bytes; return the frames they complete (see the class docstring)."""
        out, error = self._general_feed(data)
        return deliver_or_defer(self, out, error)

    def _general_feed(self, data: bytes) -> tuple[list[Any], Exception | None]:
        self._idle = False
        out, error = self._feed(data)
        self._idle = error is None and self._is_idle()
        return out, error

    def _is_idle(self) -> bool:
        return not self._lines.partial_len and not self._lines._skip_lf

    def close(self) -> list[Any]:
        """End of input (see the class docstring). Raises a pending error."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        self._idle = False
        self._offsets = []
        self._lazy_offsets = []
        return self._finish()

    def frame_offsets(self) -> list[int]:
        """The stream offset of each frame the last ``feed``/``close`` returned."""
        for first, pos, frame_lens in self._lazy_offsets:
            offsets = list(accumulate(frame_lens, initial=pos))
            offsets.pop()
            self._offsets[first : first + len(offsets)] = offsets
        self._lazy_offsets = []
        return self._offsets

    def _accept(self, data: bytes) -> bytes:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError(f"{self._name}.feed() after close()")
        self._offsets = []
        self._lazy_offsets = []
        if type(data) is bytes:
            return data
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise UsageError(f"{self._name}.feed() takes bytes, not {type(data).__name__}")

    @abc.abstractmethod
    def _feed(self, data: bytes) -> tuple[list[Any], Exception | None]:
        """Split ``data`` into frames: (complete frames, the error that stopped it or None)."""

    @abc.abstractmethod
    def _finish(self) -> list[Any]:
        """The frames the end of input completes (called once, by ``close()``)."""

    # The one-frame-per-read fast path (see EventStreamDecoder.feed): when ``data`` is exactly
    # one frame of the common shape, arriving between frames, and its payload decodes, record
    # the frame as consumed and return the event; otherwise return None having changed
    # nothing, and the general path parses ``data`` from the same state -- so results never
    # depend on which path ran. One method call: per-call overhead is what this path saves.

    def _decode_one(self, data: bytes) -> Event | None:
        return None


class SSEDecoder(_Framer):
    """Incremental WHATWG ``text/event-stream`` parser (see the module docstring).

    ``feed(bytes) -> list[SSEMessage]``; ``close() -> list[SSEMessage]`` (always empty: an
    unfinished event at the end of input is dropped, and :attr:`truncated` says whether one
    was). :attr:`last_event_id` and :attr:`retry` track the stream-level values.

    Raises :class:`EventDecodeError` (invalid UTF-8 in a used field, naming its byte offset),
    :class:`FrameTooLargeError` (an event block over ``max_frame_bytes``), :class:`UsageError`
    (non-bytes input, feed after close).
    """

    _name = "SSEDecoder"

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        super().__init__(cr_is_eol=True)
        self.max_frame_bytes = max_frame_bytes
        self.last_event_id = ""
        self.retry: int | None = None
        self.truncated = False
        self._at_start = True
        self._head = b""  # the first bytes while a BOM may still be arriving
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._block_retry: int | None = None
        self._block_len = 0
        self._block_start = -1
        self._frames = 0
        # EventStreamDecoder sets this: yield each event's data as a plain str (no SSEMessage).
        self._raw = False

    def _is_idle(self) -> bool:
        return (
            super()._is_idle() and self._block_start < 0 and not self._data and not self._at_start
        )

    def _decode_one(self, data: bytes) -> Event | None:
        # The shapes: "data: <json>\n\n" (the SDK's) and "id: <id>\ndata: <json>\n\n" (ours).
        # Byte tests are int membership and indexing: the cheapest checks CPython has, and
        # this runs once per read. A CR anywhere is a line end to WHATWG (and whitespace to
        # JSON), an LF inside the payload splits the frame: both go to the general path.
        if not self._idle or not 8 <= len(data) <= self.max_frame_bytes or data[-1] != 10:
            return None
        if data[:6] == b"data: ":
            payload = data[6:-2]
            ident = None
        elif data[:4] == b"id: ":
            nl = data.find(b"\n")
            if data[nl + 1 : nl + 7] != b"data: " or 0 in data[4:nl]:
                return None
            payload = data[nl + 7 : -2]
            ident = data[4:nl]
        else:
            return None
        if data[-2] != 10 or 10 in payload or 13 in data:
            return None
        try:
            event = _decode(payload)
            if ident is not None:
                self._id = self.last_event_id = ident.decode()
            # else: idle means the last line was blank, which already set last_event_id.
        except (UnicodeDecodeError, *_DECODE_ERRORS):
            return None
        self._lines.offset += len(data)
        self._frames += 1
        return event

    def _finish(self) -> list[SSEMessage]:
        # WHATWG: an unfinished event at the end of input is dropped, never dispatched.
        self.truncated = bool(
            self._lines.has_partial() or self._head or self._block_start >= 0 or self._data
        )
        return []

    # Internals ------------------------------------------------------------------------------

    def _feed(self, data: bytes) -> tuple[list[SSEMessage], Exception | None]:
        data = self._accept(data)
        if self._at_start:
            data = self._head + data
            if len(data) < len(_BOM) and _BOM.startswith(data):
                self._head = data  # could still become a BOM
                return [], None
            self._head = b""
            self._at_start = False
            if data.startswith(_BOM):
                data = data[len(_BOM) :]
                self._lines.offset = len(_BOM)
        if not data:
            return [], None
        complete, has_cr, pos = self._lines.take(data)
        out: list[Any] = []
        try:
            if has_cr:
                lines, terms = _split_lines(complete, True)
                self._process(lines, terms, pos, out)
            elif complete:
                self._process_lf(complete, pos, out)
            pending = self._lines.partial_len
            if pending and self._block_len + pending > self.max_frame_bytes:
                start = self._block_start if self._block_start >= 0 else self._lines.offset
                raise self._too_large(start)
        except EventDecodeError as err:
            return out, err
        return out, None

    def _too_large(self, start: int) -> FrameTooLargeError:
        return FrameTooLargeError(
            f"SSE event larger than max_frame_bytes={self.max_frame_bytes}",
            offset=start,
            frame_index=self._frames,
        )

    def _process_lf(self, complete: bytes, pos: int, out: list[Any]) -> None:
        """LF-only input: split into event blocks at blank lines and take the common shapes --
        ``data: <json>`` and ``id: <id>`` + ``data: <json>`` -- without going line by line.
        Anything else goes through :meth:`_process`, which gives the same result (the fast path
        is an optimisation, never a different parser)."""
        if self._block_start < 0 and not self._data and self._bulk(complete, pos, out):
            return
        blocks = complete.split(b"\n\n")
        tail = blocks.pop()  # after the last blank line; ends with LF (or is empty)
        max_frame = self.max_frame_bytes
        raw = self._raw
        for block in blocks:
            size = len(block)
            if self._block_start < 0 and not self._data and 6 <= size <= max_frame:
                data_at = -1
                if block[:6] == b"data: " and b"\n" not in block:
                    data_at = 6
                elif block[:4] == b"id: ":
                    nl = block.find(b"\n")
                    if (
                        nl > 0
                        and block[nl + 1 : nl + 7] == b"data: "
                        and block.find(b"\n", nl + 1) < 0
                        and b"\0" not in block[4:nl]
                        and size - 1 <= max_frame  # content bytes, the LF excluded
                    ):
                        try:
                            self._id = block[4:nl].decode()
                        except UnicodeDecodeError:
                            pass  # the line-by-line path reports it with its offset
                        else:
                            data_at = nl + 7
                if data_at > 0:
                    try:
                        text = block[data_at:].decode()
                    except UnicodeDecodeError:
                        pass
                    else:
                        self.last_event_id = self._id
                        out.append(
                            text if raw else SSEMessage(data=text, id=self._id or None)
                        )
                        self._offsets.append(pos)
                        self._frames += 1
                        pos += size + 2
                        continue
            lines = block.split(b"\n")
            lines.append(b"")  # the blank line that ended the block
            self._process(lines, None, pos, out)
            pos += size + 2
        if tail:
            lines = tail.split(b"\n")
            lines.pop()
            self._process(lines, None, pos, out)

    def _bulk(self, complete: bytes, pos: int, out: list[Any]) -> bool:
        """Decode ``complete`` at once if it is nothing but ``[id: X\\n]data: Y\\n\\n`` frames
        (checked by one regex), all valid UTF-8 and within the size limit; else return False
        and leave everything to the general path (which then reports any error exactly)."""
        if complete[:6] == b"data: " and complete[-2:] == b"\n\n":
            ids: list[bytes] | None = None
            payloads = complete[6:-2].split(b"\n\ndata: ")
            if complete.count(b"\n") != 2 * len(payloads):
                return False  # some frame is not a single data line: not this shape
            frame_lens: Any = map(add, map(len, payloads), repeat(8))
            if len(complete) > self.max_frame_bytes and 6 + max(map(len, payloads)) > self.max_frame_bytes:
                return False
        elif _ID_DATA_FRAMES.fullmatch(complete):
            pairs = _ID_DATA_FRAME.findall(complete)
            ids = [pair[0] for pair in pairs]
            payloads = [pair[1] for pair in pairs]
            lens = list(map(add, map(len, ids), map(len, payloads)))
            frame_lens = map(add, lens, repeat(13))
            if 10 + max(lens) > self.max_frame_bytes:
                return False
        else:
            return False
        try:
            complete.decode()  # validates every byte at once
        except UnicodeDecodeError:
            return False
        if ids is not None:
            self._id = ids[-1].decode()
            self.last_event_id = self._id
        if self._raw:
            out.extend(payloads)  # msgspec decodes the (validated) UTF-8 bytes directly
        elif ids is None:
            last_id = self._id or None
            out.extend(SSEMessage(data=p.decode(), id=last_id) for p in payloads)
        else:
            out.extend(
                SSEMessage(data=p.decode(), id=i.decode() or None) for i, p in zip(ids, payloads)
            )
        # Frame offsets are only needed to locate an error: computed when asked for.
        self._lazy_offsets.append((len(self._offsets), pos, frame_lens))
        self._offsets.extend(repeat(-1, len(payloads)))
        self._frames += len(payloads)
        return True

    def _process(
        self, lines: list[bytes], terms: list[bytes] | None, pos: int, out: list[Any]
    ) -> None:
        max_frame = self.max_frame_bytes
        for i, line in enumerate(lines):
            line_start = pos
            pos += len(line) + (1 if terms is None else len(terms[i]))
            if not line:
                # Blank line: dispatch (WHATWG "dispatch the event").
                self.last_event_id = self._id
                if self._data:
                    data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
                    out.append(
                        data
                        if self._raw
                        else SSEMessage(
                            data=data,
                            event=self._event or "message",
                            id=self._id or None,
                            retry=self._block_retry,
                        )
                    )
                    self._offsets.append(self._block_start)
                    self._frames += 1
                    self._data = []
                self._event = ""
                self._block_retry = None
                self._block_len = 0
                self._block_start = -1
                continue
            if self._block_start < 0:
                self._block_start = line_start
            self._block_len += len(line)
            if self._block_len > max_frame:
                raise self._too_large(self._block_start)
            if line[0] == 0x3A:  # ":" comment
                continue
            colon = line.find(b":")
            if colon < 0:
                name, value, vstart = line, b"", len(line)
            else:
                name = line[:colon]
                vstart = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
                value = line[vstart:]
            if name == b"data":
                self._data.append(self._text(value, line_start + vstart))
            elif name == b"event":
                self._event = self._text(value, line_start + vstart)
            elif name == b"id":
                if b"\0" not in value:
                    self._id = self._text(value, line_start + vstart)
            elif name == b"retry":
                if value and value.isdigit():  # bytes.isdigit: ASCII digits only
                    self.retry = self._block_retry = int(value)
            # Any other field name is ignored (WHATWG).

    def _text(self, value: bytes, offset: int) -> str:
        try:
            return value.decode()
        except UnicodeDecodeError as err:
            raise EventDecodeError(
                "invalid UTF-8", offset=offset + err.start, frame_index=self._frames,
                code="invalid_utf8",
            ) from None


def deliver_or_defer(decoder: Any, out: list[Any], error: Exception | None) -> list[Any]:
    """Return what was decoded; raise the error now if nothing was, else on the next call
    (it is kept on ``decoder._error``): the "nothing accepted is lost" rule every feed-style
    decoder of the engine follows (this module's and :mod:`agui_engine.protocol.proto`'s)."""
    if error is not None:
        decoder._error = error
        if not out:
            raise error
    return out


# ---------------------------------------------------------------------------------------------
# NDJSON
# ---------------------------------------------------------------------------------------------

_JSON_WS: Final = b" \t\r"


class NDJSONDecoder(_Framer):
    """Incremental NDJSON splitter: ``feed(bytes) -> list[bytes]``, one JSON text per item.

    LF ends a line (a CR before it is dropped); blank lines are skipped; ``close()`` returns a
    final line that has no LF. Items are raw bytes, without the line end.

    Raises :class:`FrameTooLargeError` for a line over ``max_line_bytes`` (naming its offset
    and index) and :class:`UsageError` for non-bytes input or feed after close.
    """

    _name = "NDJSONDecoder"

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        super().__init__(cr_is_eol=False)
        self.max_line_bytes = max_line_bytes
        self._index = 0

    def _decode_one(self, data: bytes) -> Event | None:
        if (
            not self._idle
            or data[-1:] != b"\n"
            or len(data) > self.max_line_bytes
            or data.count(b"\n") != 1
        ):
            return None
        try:
            event = _decode(data)  # msgspec skips the trailing whitespace (LF, CR)
        except _DECODE_ERRORS:
            return None
        self._lines.offset += len(data)
        self._index += 1
        return event

    def _finish(self) -> list[bytes]:
        # The last line may lack its LF: it is complete at the end of input.
        rest = self._lines.partial()
        out: list[bytes] = []
        line = rest[:-1] if rest[-1:] == b"\r" else rest
        if len(line) > self.max_line_bytes:
            self._error = self._too_large(self._lines.offset)
            raise self._error
        if line.strip(_JSON_WS):
            out.append(line)
            self._offsets.append(self._lines.offset)
            self._index += 1
        return out

    def _feed(self, data: bytes) -> tuple[list[bytes], Exception | None]:
        data = self._accept(data)
        if not data:
            return [], None
        complete, _, pos = self._lines.take(data)
        lines, _ = _split_lines(complete, False)
        out: list[bytes] = []
        limit = self.max_line_bytes
        for line in lines:
            start = pos
            pos += len(line) + 1
            if line[-1:] == b"\r":
                line = line[:-1]
            if len(line) > limit:
                return out, self._too_large(start)
            if not line or not line.strip(_JSON_WS):
                continue
            out.append(line)
            self._offsets.append(start)
            self._index += 1
        if self._lines.partial_len > limit + 1:  # + 1: the partial may end in the CR of CRLF
            return out, self._too_large(self._lines.offset)
        return out, None

    def _too_large(self, start: int) -> FrameTooLargeError:
        return FrameTooLargeError(
            f"NDJSON line larger than max_line_bytes={self.max_line_bytes}",
            offset=start,
            frame_index=self._index,
        )


# ---------------------------------------------------------------------------------------------
# Framing + events
# ---------------------------------------------------------------------------------------------


class EventStreamDecoder:
    """Bytes of an SSE or NDJSON stream in, AG-UI events out.

    ``feed(bytes) -> list[AnyEvent]``; ``close() -> list[AnyEvent]``. Every SSE event's
    ``data`` is one AG-UI event (the SSE ``event`` name is ignored, as the TypeScript client
    does). ``THINKING_*`` events are mapped to ``REASONING_*`` (:class:`LegacyThinkingMapper`,
    ids from ``id_factory``). ``warnings`` collects what tolerant mode dropped and the legacy
    mappings performed.

    Raises :class:`EventDecodeError` / :class:`FrameTooLargeError` naming the frame index and
    byte offset (deferred to the next call when items were already decoded in this one) and
    :class:`UsageError` for misuse.
    """

    def __init__(
        self,
        format: Literal["sse", "ndjson"] = "sse",
        *,
        tolerant: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        if format == "sse":
            sse = SSEDecoder(max_frame_bytes=max_frame_bytes)
            sse._raw = True
            self._framer: _Framer = sse
        elif format == "ndjson":
            self._framer = NDJSONDecoder(max_line_bytes=max_frame_bytes)
        else:
            raise UsageError(f"format must be 'sse' or 'ndjson', not {format!r}")
        self._decode_one = self._framer._decode_one
        self.format = format
        self.tolerant = tolerant
        self.legacy = LegacyThinkingMapper(id_factory)
        self.warnings: list[str] = []
        self.events_decoded = 0
        self._error: Exception | None = None

    def feed(self, data: bytes) -> list[AnyEvent]:
        """Decode the events completed by ``data``."""
        if self._error is not None:
            raise self._error
        if type(data) is bytes:
            # Fast path: a read that carries exactly one frame of the usual shape.
            event = self._decode_one(data)
            if event is not None:
                self.events_decoded += 1
                return [event]
        frames, error = self._framer._general_feed(data)
        if error is not None:
            self._framer._error = error
        return self._decode_frames(frames, error)

    def close(self) -> list[AnyEvent]:
        """End of input (an unfinished SSE event is dropped; a last NDJSON line is decoded)."""
        if self._error is not None:
            raise self._error
        frames = self._framer.close()
        return self._decode_frames(frames, None)

    @property
    def last_event_id(self) -> str | None:
        """SSE: the stream's last-event-ID so far (what a reconnect sends as ``Last-Event-ID``),
        ``None`` when none was set. NDJSON: always ``None``."""
        return getattr(self._framer, "last_event_id", None) or None

    @property
    def truncated(self) -> bool:
        """True after ``close()`` when the input ended inside a frame (SSE)."""
        return getattr(self._framer, "truncated", False)

    def _decode_frames(self, frames: list[Any], error: Exception | None) -> list[AnyEvent]:
        if error is None:
            try:
                decoded: list[AnyEvent] = list(map(_decode, frames))
            except _DECODE_ERRORS:
                pass  # redo one by one to locate it (or to apply tolerance / legacy mapping)
            else:
                self.events_decoded += len(decoded)
                return decoded
        out: list[AnyEvent] = []
        offsets = self._framer.frame_offsets()
        for i, payload in enumerate(frames):
            try:
                out.append(_decode(payload))
            except _DECODE_ERRORS:
                try:
                    out.append(self._slow_decode(payload))
                except EventDecodeError as err:
                    error = err.located(offset=offsets[i], frame_index=self.events_decoded)
                    break
            self.events_decoded += 1
        return deliver_or_defer(self, out, error)

    def _slow_decode(self, payload: bytes | str) -> AnyEvent:
        warn: list[str] = []
        event = decode_event(payload, tolerant=self.tolerant, legacy=self.legacy, warnings=warn)
        index = self.events_decoded
        self.warnings.extend(f"frame {index}: {w}" for w in warn)
        return event


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def decode_event_list(data: bytes, *, where: str = "the answer", tolerant: bool = False) -> list[AnyEvent]:
    """Decode a JSON array of events (a thread history, ``GET <path>/threads/<threadId>``);
    ``tolerant`` as :func:`decode_event` (an unknown type becomes an :class:`UnknownEvent`).

    Raises :class:`EventDecodeError`: not a JSON array (code ``invalid_json``), or the
    event at ``frame_index`` (its index in the array) is not a valid event (its JSON
    path and reason, as :func:`decode_event`)."""
    try:
        items = _RAW_LIST.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise EventDecodeError(f"{where} is not a JSON array of events: {err}", code="invalid_json") from None
    except RecursionError:
        raise JSONTooDeepError(f"{where}: JSON nested too deeply") from None
    events: list[AnyEvent] = []
    for index, raw in enumerate(items):
        try:
            events.append(decode_event(bytes(raw), tolerant=tolerant))
        except EventDecodeError as err:
            raise err.located(offset=None, frame_index=index) from None
    return events
