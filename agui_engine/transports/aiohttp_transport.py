"""httpx's client interface on aiohttp's connection and C parser, with aiohttp's errors
mapped by their cause.

:class:`SSEAgent <transports.sse_client.SSEAgent>` reads a remote agent's stream through
httpx. httpx's own transport parses HTTP in Python (h11): one parser step per chunk of a
chunked body, and an AG-UI server writes one chunk per event -- most of the proxy hop's CPU
per event (spec/benchmarks.md). aiohttp's C parser hands over whatever the socket delivered,
many events at once. :class:`AiohttpTransport` is ``httpx_aiohttp``'s transport with one
change: its errors. ``httpx_aiohttp`` maps every ``aiohttp.ClientConnectionError`` to
``httpx.ConnectTimeout``, so a refused connection, a reset and a server that vanished
mid-stream all read as a timeout. Here each aiohttp error becomes the httpx error that
httpx's own transport raises for the same cause (:func:`httpx_error`), chained to it (a TLS
failure's reason stays reachable: ``retrying_client.tls_failure``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import NoReturn

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport as _BaseTransport

__all__ = ["AiohttpTransport", "httpx_error"]


def httpx_error(exc: aiohttp.ClientError) -> httpx.TransportError:
    """The httpx error for an aiohttp error of the same cause (the message is aiohttp's):
    a proxy that failed -> ProxyError; no connection within the connect timeout ->
    ConnectTimeout; no data within the read timeout -> ReadTimeout; refused, unresolvable or
    a failed TLS handshake -> ConnectError; a URL that is not http(s) -> UnsupportedProtocol;
    the server closed or broke the response (a truncated body, a bad status line) ->
    RemoteProtocolError; a reset or other socket error -> ReadError; anything else ->
    TransportError."""
    message = str(exc) or type(exc).__name__
    error: type[httpx.TransportError]
    if isinstance(exc, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)):
        error = httpx.ProxyError
    elif isinstance(exc, aiohttp.ConnectionTimeoutError):
        error = httpx.ConnectTimeout
    elif isinstance(exc, aiohttp.ServerTimeoutError):  # SocketTimeoutError: the read timeout
        error = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake
        error = httpx.ConnectError
    elif isinstance(exc, (aiohttp.InvalidUrlClientError, aiohttp.NonHttpUrlClientError)):
        error = httpx.UnsupportedProtocol
    elif isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        error = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.ClientOSError):
        error = httpx.ReadError
    else:
        error = httpx.TransportError
    mapped = error(message)
    mapped.__cause__ = exc
    return mapped


def _remapped(exc: Exception) -> Exception:
    """``exc`` with an aiohttp cause (httpx_aiohttp's mapping) or an aiohttp error itself
    (one it leaves unmapped) as :func:`httpx_error` maps it; any other error unchanged."""
    cause = exc if isinstance(exc, aiohttp.ClientError) else exc.__cause__
    if isinstance(exc, (httpx.TransportError, aiohttp.ClientError)) and isinstance(cause, aiohttp.ClientError):
        return httpx_error(cause)
    return exc


def _raise_mapped(exc: Exception) -> NoReturn:
    mapped = _remapped(exc)
    if mapped is exc:
        raise exc
    raise mapped from mapped.__cause__


class _MappedStream(httpx.AsyncByteStream):
    """A response body whose read and close errors are mapped by :func:`_remapped`."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            _raise_mapped(exc)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            _raise_mapped(exc)


class AiohttpTransport(_BaseTransport):
    """``httpx_aiohttp.AiohttpTransport`` whose request and body errors are those httpx's
    own transport raises (:func:`httpx_error`). Arguments: ``verify`` (an SSL context, or
    as httpx's) and ``limits``; proxies come from the environment (``HTTP(S)_PROXY``,
    ``NO_PROXY``) as for httpx's own client. A response body is read in the pieces aiohttp
    has (up to 16 KiB: many SSE events of a busy stream at once)."""

    def get_client(self) -> aiohttp.ClientSession:
        limit = self.limits.max_connections or 0  # 0: aiohttp's "no limit"
        connector = aiohttp.TCPConnector(ssl=self.ssl_context, limit=limit,
                                         keepalive_timeout=self.limits.keepalive_expiry)
        return aiohttp.ClientSession(connector=connector, trust_env=True)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await super().handle_async_request(request)
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            _raise_mapped(exc)
        assert isinstance(response.stream, httpx.AsyncByteStream)  # httpx_aiohttp's body
        response.stream = _MappedStream(response.stream)
        return response
