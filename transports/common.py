"""What every transport shares: decoding a ``RunAgentInput`` from the wire,
bearer-token checks, the transports' error types and the input limits.

Theory of operation
-------------------
A request that starts a run (an HTTP body, a WebSocket ``run`` message, a stdio
line) is decoded by :func:`decode_run_input` in one msgspec pass. Malformed JSON
is a :class:`MalformedInputError` (HTTP 400, with the byte offset); well-formed
JSON of the wrong shape is an :class:`InvalidInputError` (HTTP 422, with the
JSON path); input over the size limit a
:class:`~agui_engine.errors.LimitExceededError` (413). Each error knows its
WebSocket close code and its ``RUN_ERROR``, so every transport answers the same
mistake the same way (see ``spec/transports.md``).
"""

from __future__ import annotations

import hmac
from typing import Any

import msgspec

from agui_engine.errors import LimitExceededError, RemoteInputError, UpstreamError
from agui_engine.events import RunAgentInput

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_RUN_ID_LENGTH",
    "WS_CLOSE_UNAUTHORIZED",
    "WS_CLOSE_INVALID_INPUT",
    "MalformedInputError",
    "InvalidInputError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "NotAcceptableError",
    "decode_run_input",
    "check_bearer",
    "extract_bearer",
    "check_body_size",
    "RemoteAgentError",
    "ConnectionLostError",
    "RETRYABLE_STATUSES",
    "remote_error_from_body",
]

#: Largest accepted RunAgentInput (HTTP body, WebSocket message, stdio line). A
#: long conversation with tool results and a state document is a few hundred
#: KiB; 8 MiB leaves room for inline images (base64) while capping what one
#: request can make the server hold.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

#: A run id becomes part of every event id (``<runId>:<seq>``) and of URLs; 256
#: characters fits any UUID/ULID scheme with room for a prefix.
MAX_RUN_ID_LENGTH = 256

#: WebSocket close codes (application range 4000-4999), documented in spec/transports.md.
WS_CLOSE_UNAUTHORIZED = 4401
WS_CLOSE_INVALID_INPUT = 4422

_RUN_ID_FORBIDDEN = ("\n", "\r", "\x00")


class MalformedInputError(RemoteInputError):
    """The input is not JSON (HTTP 400). The message names the byte offset."""

    default_code = "malformed_json"


class InvalidInputError(RemoteInputError):
    """The input is JSON but not a valid RunAgentInput (HTTP 422). The message names the JSON path."""

    http_status = 422
    ws_close_code = WS_CLOSE_INVALID_INPUT
    default_code = "invalid_input"


class UnauthorizedError(RemoteInputError):
    """Missing or wrong bearer token (HTTP 401, WebSocket 4401)."""

    http_status = 401
    ws_close_code = WS_CLOSE_UNAUTHORIZED
    default_code = "unauthorized"


class UnsupportedMediaTypeError(RemoteInputError):
    """The request body is not ``application/json`` (HTTP 415)."""

    http_status = 415
    default_code = "unsupported_media_type"


class NotAcceptableError(RemoteInputError):
    """The client accepts neither ``text/event-stream`` nor ``application/x-ndjson`` (HTTP 406)."""

    http_status = 406
    default_code = "not_acceptable"


def check_body_size(size: int, limit: int) -> None:
    """Raise LimitExceededError if ``size`` bytes exceed ``limit``."""
    if size > limit:
        raise LimitExceededError(f"the RunAgentInput is {size} bytes; the limit is {limit} bytes")


def decode_run_input(data: bytes | str | Any, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> RunAgentInput:
    """Decode and validate one RunAgentInput.

    ``data`` is JSON text (bytes or str) or an already-decoded JSON value (a dict
    taken out of a WebSocket envelope). Raises LimitExceededError (over
    ``max_bytes``), MalformedInputError (not JSON; says where), InvalidInputError
    (wrong shape; says the JSON path, or a run id unusable in an event id).
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            check_body_size(len(data), max_bytes)
            value = msgspec.json.decode(data, type=RunAgentInput)
        else:
            value = msgspec.convert(data, RunAgentInput)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(f"not a valid RunAgentInput: {exc}") from None
    except msgspec.DecodeError as exc:
        raise MalformedInputError(f"the RunAgentInput is not valid JSON: {exc}") from None
    run_id = value.run_id
    if not run_id or len(run_id) > MAX_RUN_ID_LENGTH or any(c in run_id for c in _RUN_ID_FORBIDDEN):
        raise InvalidInputError(
            f"runId must be 1..{MAX_RUN_ID_LENGTH} characters without CR, LF or NUL "
            "(it becomes part of every event id) - at `$.runId`"
        )
    return value


def extract_bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def check_bearer(authorization: str | None, expected: str | None) -> None:
    """Raise UnauthorizedError unless the header carries ``expected`` (no-op when
    ``expected`` is None). Compared in constant time (``hmac.compare_digest``),
    so response timing does not leak how much of a guess was right."""
    if expected is None:
        return
    token = extract_bearer(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token (send Authorization: Bearer <token>)")
    if not hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8")):
        raise UnauthorizedError("invalid bearer token")


class RemoteAgentError(UpstreamError):
    """A remote AG-UI endpoint refused a request (a non-2xx answer, a WebSocket
    error message or close code). ``status`` is the HTTP status (or the close
    code), ``code`` the remote's machine-readable error code when it sent one
    (``cursor_expired``, ``unauthorized``, ``invalid_input`` ...)."""

    default_code = "remote_refused"

    def __init__(self, message: str, *, status: int, code: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.status = status


class ConnectionLostError(UpstreamError):
    """The connection to a remote AG-UI endpoint dropped and resuming failed
    after the bounded retries (or the endpoint could not be reached at all)."""

    default_code = "connection_lost"

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


#: HTTP statuses after which trying again later may succeed.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def remote_error_from_body(status: int, body: bytes, *, where: str) -> RemoteAgentError:
    """A RemoteAgentError for a refused request, using the ``{"error": {code,
    message}}`` body this project's servers send when it is there. The message
    is cut to 500 characters and never contains request headers."""
    code: str | None = None
    message = ""
    try:
        doc = msgspec.json.decode(body)
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = err.get("code") if isinstance(err.get("code"), str) else None
            message = err.get("message") if isinstance(err.get("message"), str) else ""
    except msgspec.DecodeError:
        message = body[:500].decode("utf-8", "replace")
    text = f"{where} answered {status}" + (f" ({code})" if code else "") + (f": {message[:500]}" if message else "")
    return RemoteAgentError(text, status=status, code=code, retryable=status in RETRYABLE_STATUSES)
