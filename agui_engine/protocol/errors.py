"""The engine's error tree.

Theory of operation
-------------------
Every error the engine raises on purpose is an :class:`AguiEngineError`. The tree
has four branches, because a transport must treat them differently:

* :class:`UsageError` -- the *caller* (the program embedding the engine) misused
  an API: fed ``str`` then ``bytes`` into one stream, called ``feed`` after
  ``close``, registered two components with one name. It is a bug in the
  embedding program; a server answers 500 and never blames the remote peer.
* :class:`RemoteInputError` -- the *remote peer* sent something bad: malformed
  JSON, an event of the wrong shape, a protocol violation, an oversized frame.
  It carries where it happened (byte offset, JSON path, event index) and maps to
  a 4xx status, a WebSocket close code in the 4000-4999 application range, and a
  ready ``RUN_ERROR`` event.
* :class:`UpstreamError` -- something the engine depends on (an LLM provider, a
  remote agent) failed; maps to 502/503.

* :class:`CapacityError` -- the request and every dependency are fine, but the
  server will not take more work now (concurrent-run limit, shutting down); maps
  to 503 (or 429) with ``Retry-After``, and a client may simply try again later.
  ``agui_engine.transports.admission.ServerBusyError`` and ``agui_engine.transports.websocket_server._TooManyRuns``
  are its transport-level subclasses.

Every error knows three things a transport needs: :attr:`~AguiEngineError.http_status`,
:attr:`~AguiEngineError.ws_close_code` and :attr:`~AguiEngineError.code` (the ``RUN_ERROR`` code:
``RunErrorEvent.from_error(error)`` in :mod:`~agui_engine.protocol.events` builds the event, so that
this tree, and the JSON tokenizer that raises from it, know nothing of AG-UI events).
Messages never contain secrets (API keys, authorization headers) or tracebacks.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AguiEngineError",
    "CapacityError",
    "LimitExceededError",
    "MAX_ERROR_MESSAGE_CHARS",
    "RemoteInputError",
    "UpstreamError",
    "UsageError",
    "WS_CLOSE_BAD_INPUT",
    "WS_CLOSE_BUSY",
    "WS_CLOSE_INTERNAL",
    "WS_CLOSE_LIMIT",
    "WS_CLOSE_UPSTREAM",
]

#: Characters of a remote error message (provider error body, remote agent's
#: error line / HTTP error) kept before it goes into an exception or RUN_ERROR:
#: enough for every real message, short enough for one log line. One number for
#: the adapters and the transports (both import it from here).
MAX_ERROR_MESSAGE_CHARS = 1000

#: WebSocket close codes in the application range (RFC 6455 §7.4.2 reserves
#: 4000-4999 for applications). Documented in ``spec/transports.md``.
WS_CLOSE_BAD_INPUT = 4400
WS_CLOSE_LIMIT = 4413
WS_CLOSE_UPSTREAM = 4502
WS_CLOSE_INTERNAL = 4500
WS_CLOSE_BUSY = 4503


class AguiEngineError(Exception):
    """Base of every error the engine raises on purpose.

    ``code`` is a short stable machine-readable string that ends up in
    ``RUN_ERROR.code``; ``message`` is for humans.
    """

    http_status: ClassVar[int] = 500
    ws_close_code: ClassVar[int] = WS_CLOSE_INTERNAL
    default_code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code

    def to_json(self) -> dict[str, Any]:
        """The JSON body an HTTP transport answers with."""
        return {"error": {"code": self.code, "message": self.message}}


class UsageError(AguiEngineError, TypeError):
    """The embedding program called an API in a way it does not allow."""

    http_status = 500
    ws_close_code = WS_CLOSE_INTERNAL
    default_code = "usage_error"


class RemoteInputError(AguiEngineError, ValueError):
    """Bad input from the remote peer; says where (offset, path, index) and why."""

    http_status = 400
    ws_close_code = WS_CLOSE_BAD_INPUT
    default_code = "bad_input"


class LimitExceededError(RemoteInputError):
    """The remote input crossed a named, documented limit (size, depth, count)."""

    http_status = 413
    ws_close_code = WS_CLOSE_LIMIT
    default_code = "limit_exceeded"


class UpstreamError(AguiEngineError):
    """A dependency (LLM provider, remote agent) failed.

    ``retryable`` tells whether trying again later may succeed (429, 5xx, overloaded).
    """

    http_status = 502
    ws_close_code = WS_CLOSE_UPSTREAM
    default_code = "upstream_error"

    def __init__(self, message: str, *, code: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code)
        self.retryable = retryable


class CapacityError(AguiEngineError):
    """The server refuses for capacity: nothing is wrong with the request, try again later."""

    http_status = 503
    ws_close_code = WS_CLOSE_BUSY
    default_code = "server_busy"
