"""Decoding a ``RunAgentInput`` (and any JSON input) from the wire, with the input limits.

Theory of operation
-------------------
A request that starts a run (an HTTP body, a WebSocket ``run`` message, a stdio
line) is decoded by :func:`decode_run_input` in one msgspec pass. Malformed JSON
is a :class:`~transports.input_errors.MalformedInputError` (HTTP 400, with the byte offset); well-formed
JSON of the wrong shape is an :class:`~transports.input_errors.InvalidInputError` (HTTP 422, with the
JSON path); input over the size limit a
:class:`~agui_engine.protocol.errors.LimitExceededError` (413), deeper than MAX_INPUT_DEPTH an
:class:`~transports.input_errors.InputTooDeepError`. Each error knows its
WebSocket close code and its ``RUN_ERROR``, so every transport answers the same
mistake the same way (see ``spec/transports.md``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from agui_engine.protocol.errors import (
    LimitExceededError,
)
from agui_engine.protocol.events import (
    RunAgentInput,
)

from .input_errors import InputTooDeepError, InvalidInputError, MalformedInputError

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_INPUT_DEPTH",
    "MAX_RUN_ID_LENGTH",
    "MAX_SEQ_DIGITS",
    "check_body_size",
    "check_input_depth",
    "check_run_id",
    "decode_json_input",
    "decode_run_input",
]


#: Largest accepted RunAgentInput (HTTP body, WebSocket message, stdio line). A
#: long conversation with tool results and a state document is a few hundred
#: KiB; 8 MiB leaves room for inline images (base64) while capping what one
#: request can make the server hold.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024


#: A run id becomes part of every event id (``<runId>:<seq>``) and of URLs; 256
#: characters fits any UUID/ULID scheme with room for a prefix.
MAX_RUN_ID_LENGTH = 256


#: Levels of JSON nesting (arrays and objects) accepted in client input: an HTTP
#: body, a WebSocket message (its envelope counts), a stdio line -- so also a
#: RunAgentInput's ``state``, ``forwardedProps`` and tool results. Deeper input is an
#: :class:`InputTooDeepError` (413 / 4413 / an error line), never a RecursionError.
#: Real states nest a few dozen levels; 512 is jsonstream.MAX_DEPTH (it still takes
#: JSONTestSuite's 500-deep arrays) and stays well under msgspec's bound (the
#: interpreter's recursion limit, ~1000 less the caller's stack), so everything
#: accepted here can also be encoded into events and decoded again by a client.
MAX_INPUT_DEPTH = 512


def check_body_size(size: int, limit: int, *, what: str = "the RunAgentInput") -> None:
    """Raise LimitExceededError if ``size`` bytes exceed ``limit`` (``what`` names the body)."""
    if size > limit:
        raise LimitExceededError(f"{what} is {size} bytes; the limit is {limit} bytes")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests arrays/objects deeper than ``limit``;
    iterative, so the check itself cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _deep_error(where: str) -> InputTooDeepError:
    return InputTooDeepError(f"{where} nests deeper than {MAX_INPUT_DEPTH} levels of arrays/objects")


def _bracket_count(data: bytes | str) -> int:
    # An upper bound of the nesting depth, at C speed: input that cannot be too
    # deep (nearly all of it) is never walked.
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def check_input_depth(data: bytes | str, *, where: str = "the input", max_depth: int = MAX_INPUT_DEPTH) -> None:
    """Raise InputTooDeepError when JSON text ``data`` nests arrays/objects deeper
    than ``max_depth``; text that is not JSON is left to the caller's decoder. For
    decoders that recurse and cannot be bounded themselves (the WebSocket envelope)."""
    if _bracket_count(data) <= max_depth:
        return
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise _deep_error(where) from None
    except msgspec.DecodeError:
        return
    if _too_deep(value, max_depth):
        raise _deep_error(where)


def decode_json_input(
    data: bytes | str, *, where: str = "the input", type: Any = Any, max_depth: int = MAX_INPUT_DEPTH
) -> Any:
    """Decode client JSON (as ``type``) with its nesting bounded by ``max_depth``
    (0: only by msgspec's own recursion bound, for text whose depth was checked).

    Raises InputTooDeepError (too deep: found by msgspec's own recursion bound, or by
    an iterative walk when the text holds more brackets than ``max_depth``, so input
    that cannot be too deep costs one ``count`` pass), MalformedInputError (not JSON;
    names the byte offset) and msgspec.ValidationError (JSON of the wrong shape, for
    the caller to word).
    """
    try:
        value = msgspec.json.decode(data, type=type)
    except RecursionError:
        raise _deep_error(where) from None
    except msgspec.ValidationError:
        raise  # a DecodeError subclass: the wrong shape, for the caller to word
    except msgspec.DecodeError as exc:
        at = "" if "byte" in str(exc) else f" (at byte {len(data)}, the end of the input)"
        raise MalformedInputError(f"{where} is not valid JSON: {exc}{at}") from None
    if max_depth and _bracket_count(data) > max_depth and _too_deep(
        value if type is Any else msgspec.to_builtins(value), max_depth
    ):
        raise _deep_error(where)
    return value


def decode_run_input(
    data: bytes | str | Any, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES, depth_checked: bool = False
) -> RunAgentInput:
    """Decode and validate one RunAgentInput.

    ``data`` is JSON text (bytes or str) or an already-decoded JSON value (a dict
    taken out of a WebSocket envelope, whose depth :func:`decode_json_input`
    checked with the envelope; ``depth_checked``: the text's depth was checked with
    its envelope too, by :func:`check_input_depth`). Raises LimitExceededError (over ``max_bytes``),
    InputTooDeepError (nested over MAX_INPUT_DEPTH), MalformedInputError (not JSON;
    says where), InvalidInputError (wrong shape; says the JSON path, or a run id
    unusable in an event id).
    """
    value: RunAgentInput
    try:
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            check_body_size(len(data), max_bytes)
            value = decode_json_input(
                bytes(data) if isinstance(data, (bytearray, memoryview)) else data,
                where="the RunAgentInput",
                type=RunAgentInput,
                max_depth=0 if depth_checked else MAX_INPUT_DEPTH,
            )
        else:
            value = msgspec.convert(data, RunAgentInput)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(f"not a valid RunAgentInput: {exc}") from None
    check_run_id(value.run_id)
    return value


def check_run_id(run_id: str) -> None:
    """Raise InvalidInputError unless ``run_id`` can be part of an event id
    (``<runId>:<seq>`` in an SSE ``id:`` line, a URL, a log key)."""
    # isprintable(): no C0/C1 control (CR, LF, NUL, VT, DEL ...), no line/paragraph
    # separator, no lone surrogate -- none of which an HTTP header (X-AGUI-Run-Id), an
    # SSE id line or a log key can carry.
    if not run_id or len(run_id) > MAX_RUN_ID_LENGTH or not run_id.isprintable():
        raise InvalidInputError(
            f"runId must be 1..{MAX_RUN_ID_LENGTH} printable characters (no control characters: "
            "it becomes part of every event id and of the X-AGUI-Run-Id header) - at `$.runId`"
        )


#: Digits an event id's ``seq`` may have (``<runId>:<seq>``). 18 decimal digits
#: always fit a signed 64-bit integer (< 9.22e18), so a cursor can never name a
#: number no log could hold, and parsing it is O(1); a longer one is foreign.
MAX_SEQ_DIGITS = 18
