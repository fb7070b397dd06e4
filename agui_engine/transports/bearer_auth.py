"""Bearer-token checks of the servers: one shared token, or a mapping token ->
principal name (:func:`check_bearer`); a wrong or missing token is an
:class:`UnauthorizedError` (401 / 4401).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from agui_engine.protocol.errors import (
    RemoteInputError,
)

__all__ = [
    "UnauthorizedError",
    "WS_CLOSE_UNAUTHORIZED",
    "check_bearer",
    "extract_bearer",
]


#: WebSocket close codes (application range 4000-4999), documented in spec/transports.md.
WS_CLOSE_UNAUTHORIZED = 4401


class UnauthorizedError(RemoteInputError):
    """Missing or wrong bearer token (HTTP 401, WebSocket 4401)."""

    http_status = 401
    ws_close_code = WS_CLOSE_UNAUTHORIZED
    default_code = "unauthorized"


def extract_bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def check_bearer(authorization: str | None, expected: str | Mapping[str, str] | None) -> str | None:
    """Check an ``Authorization: Bearer`` header and return the *principal* it
    authenticates: ``None`` when auth is off (``expected`` None), ``""`` for the
    one shared token (``expected`` a str: everyone holding it is one principal),
    else the name ``expected`` (token -> principal) maps the token to. Raises
    UnauthorizedError. Tokens are compared in constant time
    (``hmac.compare_digest``), every configured one on every request, so response
    timing leaks neither how much of a guess was right nor which token matched."""
    if expected is None:
        return None
    token = extract_bearer(authorization)
    if token is None:
        raise UnauthorizedError("missing bearer token (send Authorization: Bearer <token>)")
    # surrogateescape: a header's non-UTF-8 bytes arrive as lone surrogates (aiohttp,
    # websockets); they make a wrong token, not an encoding error.
    got = token.encode("utf-8", "surrogateescape")
    if isinstance(expected, str):
        if not hmac.compare_digest(got, expected.encode("utf-8")):
            raise UnauthorizedError("invalid bearer token")
        return ""
    principal: str | None = None
    for candidate, name in expected.items():
        if hmac.compare_digest(got, candidate.encode("utf-8")):
            principal = name
    if principal is None:
        raise UnauthorizedError("invalid bearer token")
    return principal
