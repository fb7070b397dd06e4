"""The errors of bad client input, shared by every transport: malformed JSON (400),
well-formed JSON of the wrong shape (422), input nested too deep (413), a body
that arrives too slowly (408), a wrong media type (415 / 406). Each knows its
HTTP status, WebSocket close code and ``RUN_ERROR`` (agui_engine.protocol.errors).
"""

from __future__ import annotations

from agui_engine.protocol.errors import (
    LimitExceededError,
    RemoteInputError,
)

__all__ = [
    "InputTooDeepError",
    "InvalidInputError",
    "MalformedInputError",
    "MethodNotAllowedError",
    "NotAcceptableError",
    "RequestTimeoutError",
    "RouteNotFoundError",
    "UnsupportedMediaTypeError",
    "WS_CLOSE_INVALID_INPUT",
]


WS_CLOSE_INVALID_INPUT = 4422


class MalformedInputError(RemoteInputError):
    """The input is not JSON (HTTP 400). The message names the byte offset."""

    default_code = "malformed_json"


class InvalidInputError(RemoteInputError):
    """The input is JSON but not a valid RunAgentInput (HTTP 422). The message names the JSON path."""

    http_status = 422
    ws_close_code = WS_CLOSE_INVALID_INPUT
    default_code = "invalid_input"


class InputTooDeepError(LimitExceededError):
    """Client input nests deeper than MAX_INPUT_DEPTH (HTTP 413, WebSocket 4413, a stdio error line)."""

    default_code = "input_too_deep"


class RequestTimeoutError(RemoteInputError):
    """The client did not send its whole request in time (HTTP 408)."""

    http_status = 408
    default_code = "request_timeout"


class UnsupportedMediaTypeError(RemoteInputError):
    """The request body is not ``application/json`` (HTTP 415)."""

    http_status = 415
    default_code = "unsupported_media_type"


class MethodNotAllowedError(RemoteInputError):
    """A route asked with a method it does not answer (HTTP 405; the answer's ``Allow``
    header lists the ones it does)."""

    http_status = 405
    default_code = "method_not_allowed"


class RouteNotFoundError(RemoteInputError):
    """Nothing is served at the request's path (HTTP 404): the ASGI gateway's answer to a path
    below its root that is none of its routes, or a route it does not serve (no metrics, no
    inspector), in the gateway's JSON error form."""

    http_status = 404
    default_code = "not_found"


class NotAcceptableError(RemoteInputError):
    """The client accepts neither ``text/event-stream`` nor ``application/x-ndjson`` (HTTP 406)."""

    http_status = 406
    default_code = "not_acceptable"
