"""AG-UI over HTTP, the client: :class:`SSEAgent`, a remote AG-UI endpoint (HTTP + SSE)
as an :class:`~agui_engine.protocol.agent.Agent`.

Theory of operation
-------------------
:class:`SSEAgent` is an Agent over httpx. It
POSTs the input, decodes the stream with the codec's EventStreamDecoder,
remembers the last event id, and when the connection drops before the terminal
event it POSTs again with ``Last-Event-ID`` (bounded retries, exponential backoff
with jitter) -- only with an id the server sent (or ``<runId>:0`` when the server gave
the run a run key): a server without ids is never asked to run the input twice, the
run ends with ``upstream_stopped`` (``retrying_client.unresumable``). Closing its generator early cancels the remote run (``DELETE``).
The reconnect loop is shared with WebSocketAgent (``RemoteClientBase.run``). The server
is :mod:`~transports.sse_server`; the names both speak are in :mod:`~transports.http_headers`
and :mod:`~transports.event_ids`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from agui_engine.genui.resources import ResourceTimeoutError
from agui_engine.loops.observe import trace_headers
from agui_engine.loops.tool_runner import ToolRunner
from agui_engine.protocol.capabilities import AgentCapabilities
from agui_engine.protocol.codec import SSE_CONTENT_TYPE, EventStreamDecoder, decode_event_list
from agui_engine.protocol.errors import LimitExceededError, RemoteInputError, UpstreamError
from agui_engine.protocol.events import PROTOCOL_VERSION, AnyEvent, RunAgentInput
from agui_engine.protocol.proto import PROTO_CONTENT_TYPE, ProtoDecodeError, ProtoEventDecoder
from agui_engine.protocol.threads import ThreadPage

from .capabilities import CAPABILITIES_TIMEOUT_SECONDS, MAX_CAPABILITIES_BYTES, read_capabilities
from .data import QUERY_REQUEST_TIMEOUT_SECONDS, QueryRequest, query_error_from_body
from .event_ids import event_id, resume_cursor
from .http_headers import RESUMABLE_HEADER, RUN_KEY_HEADER
from .retrying_client import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_RETRIES,
    AttemptItem,
    ConnectionLostError,
    RemoteClientBase,
    media_type,
    remote_error_from_body,
)
from .tool_runner import STANDARD_TOOL_RUNNER

__all__ = [
    "CANCEL_REQUEST_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "HISTORY_REQUEST_TIMEOUT_SECONDS",
    "MAX_HISTORY_RESPONSE_BYTES",
    "SSEAgent",
]

#: Connect timeout of SSEAgent. Reads have no timeout: a run may be silent for
#: minutes (the server's keep-alive shows the connection is alive). 10 s lets
#: TCP retransmit a lost SYN three times (after 1, 3 and 7 s) plus a TLS
#: handshake; longer only delays the error when the server is really down.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: Seconds SSEAgent gives its DELETE of a run it abandons (the caller stopped
#: reading). Best effort while the caller is tearing down, so it must not hold
#: it up long; if it fails the server cancels the run after its grace period.
CANCEL_REQUEST_TIMEOUT = 2.0

#: Bytes of a thread history ``SSEAgent.history`` reads at most (then LimitExceededError).
#: A gateway keeps HISTORY_MAX_THREAD_BYTES (1 MiB) per thread by default and serves less
#: (inputs reduced to what is new); 16 MiB, the codec's frame limit, leaves room for a
#: gateway configured with a larger budget.
MAX_HISTORY_RESPONSE_BYTES = 16 * 1024 * 1024
#: Seconds ``SSEAgent.history`` (so ``Thread.restore``) waits for the whole history, connect to
#: last byte: a server that trickles its answer cannot hold a restore open (httpx's timeouts
#: bound each read, not the sum).
HISTORY_REQUEST_TIMEOUT_SECONDS = 30.0

@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process: building it (loading the CA
    bundle) costs ~150 ms, which every new client would otherwise pay -- per run and per
    query -- blocking the event loop meanwhile."""
    return httpx.create_ssl_context()


class _QueryAnswerDoc(msgspec.Struct):
    """A 200 query answer as a client reads it (only ``data`` matters)."""

    data: Any = None


class _SSESession:
    """What one SSEAgent run holds: the HTTP client, and the run key the server
    answered its start with (None until then, or from a server without run keys)."""

    __slots__ = ("client", "key")

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.key: str | None = None


class SSEAgent(RemoteClientBase):
    """A remote AG-UI endpoint (HTTP + SSE) as an :class:`~agui_engine.protocol.agent.Agent`.

    ``run(input)`` raises, before its first event, :class:`~transports.retrying_client.RemoteAgentError`
    (the server refused: status + remote error code) or
    :class:`~transports.retrying_client.ConnectionLostError` (unreachable). After the
    first event it never raises (Agent contract): a drop is resumed with
    ``Last-Event-ID`` (an id the server sent; none: ``UpstreamStoppedError``) up to ``max_retries`` times (backoff: see
    :class:`~transports.retrying_client.RetryPolicy`), and when that fails the stream ends
    with ``RUN_ERROR`` carrying the error's code (``connection_lost``,
    ``cursor_expired`` ...). Closing the generator early cancels the remote run
    (``DELETE <url>/runs/<runId>``). The stream is decoded by the codec's
    :class:`~agui_engine.protocol.codec.EventStreamDecoder` (a bad frame is an
    EventDecodeError naming its frame index and byte offset; ``THINKING_*`` events
    of older servers are mapped to ``REASONING_*``). With ``binary=True`` it asks for the
    protobuf encoding and decodes it with :class:`~agui_engine.protocol.proto.ProtoEventDecoder`
    (resume positions counted in frames). The loop itself is
    :meth:`RemoteClientBase.run <transports.retrying_client.RemoteClientBase.run>`.
    """

    #: The runner a :class:`~agui_engine.loops.thread.Thread` over this client runs its sync
    #: client tools with (the standard one: worker threads).
    tool_runner: ToolRunner = STANDARD_TOOL_RUNNER

    _drops = (httpx.TransportError,)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        client: httpx.AsyncClient | None = None,
        tolerant: bool = False,
        binary: bool = False,
    ) -> None:
        super().__init__(
            url, headers=headers, max_retries=max_retries, backoff_initial=backoff_initial, backoff_max=backoff_max
        )
        self.connect_timeout = connect_timeout
        self.tolerant = tolerant
        #: ask for the binary encoding (``Accept: application/vnd.ag-ui.event+proto``); the
        #: answer's Content-Type decides the decoder, so an SSE-only server still works
        self.binary = binary
        self._client = client

    async def history(
        self, thread_id: str, *, run_id: str | None = None, run_key: str | None = None,
        timeout: float = HISTORY_REQUEST_TIMEOUT_SECONDS,
    ) -> list[AnyEvent]:
        """The thread's compacted history from the gateway (``GET <url>/threads/<threadId>``):
        the branch ending at ``run_id`` (default: the latest run), as events, protobuf when
        ``binary``. Presents ``run_key`` (else the key of the thread's latest run started by
        this agent) for a gateway without per-client tokens; a key given here is remembered
        for the thread's next run. Raises RemoteAgentError (404 ``unknown_thread``: no
        history, or not yours), ConnectionLostError (unreachable, or the whole answer not in
        within ``timeout`` seconds), LimitExceededError (over
        MAX_HISTORY_RESPONSE_BYTES), EventDecodeError / ProtoDecodeError (a bad answer; an
        event type unknown to this version too, unless the agent is ``tolerant``: then the JSON
        one is kept as an UnknownEvent and the protobuf one dropped, as on a run's stream)."""
        url = self.url.rstrip("/") + "/threads/" + quote(thread_id, safe="")
        key = run_key or self.thread_key(thread_id)
        headers = {**self.headers, "Accept": PROTO_CONTENT_TYPE if self.binary else "application/json"}
        if key:
            headers[RUN_KEY_HEADER] = key
        try:
            async with asyncio.timeout(timeout):
                status, content_type, body = await self._get_bounded(
                    url, headers, MAX_HISTORY_RESPONSE_BYTES,
                    httpx.Timeout(timeout, connect=self.connect_timeout),
                    params={"runId": run_id} if run_id else None,
                )
        except TimeoutError:
            raise ConnectionLostError(
                f"GET {url}: the history did not arrive within {timeout:g} s (HISTORY_REQUEST_TIMEOUT_SECONDS)"
            ) from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"cannot reach {url} ({type(exc).__name__})") from None
        if len(body) > MAX_HISTORY_RESPONSE_BYTES:
            raise LimitExceededError(f"GET {url}: the history is over {MAX_HISTORY_RESPONSE_BYTES} bytes (MAX_HISTORY_RESPONSE_BYTES)")
        if status != 200:
            raise remote_error_from_body(status, body, where=f"GET {url}", content_type=content_type)
        if key and run_key:
            self.remember_thread_key(thread_id, key)
        if media_type(content_type) == PROTO_CONTENT_TYPE:
            frames = ProtoEventDecoder(tolerant=self.tolerant)
            events = frames.feed(body)
            frames.close()
            return list(events)
        return decode_event_list(body, where=f"GET {url}", tolerant=self.tolerant)

    async def list_threads(
        self, *, limit: int | None = None, cursor: str | None = None, search: str | None = None,
        timeout: float = HISTORY_REQUEST_TIMEOUT_SECONDS,
    ) -> ThreadPage:
        """One page of this principal's threads, newest first (``GET <url>/threads``): at most
        ``limit``, after ``cursor`` (the previous page's ``next_cursor``), whose title holds
        ``search``. Raises RemoteAgentError (403 ``principal_required``: the gateway has no
        per-client tokens; 404 ``threads_not_listed``: no durable store; 400 a bad cursor or
        limit), ConnectionLostError, UpstreamError (``invalid_threads``: an answer that is no page)."""
        params = {k: str(v) for k, v in (("limit", limit), ("cursor", cursor), ("q", search)) if v is not None}
        body = await self._thread_request("GET", "/threads", None, params, timeout)
        try:
            return msgspec.json.decode(body, type=ThreadPage)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UpstreamError(f"GET {self.url.rstrip('/')}/threads: not a page of threads ({exc})",
                                code="invalid_threads") from None

    async def delete_thread(
        self, thread_id: str, *, run_key: str | None = None, timeout: float = HISTORY_REQUEST_TIMEOUT_SECONDS
    ) -> None:
        """Delete one of this client's threads (``DELETE <url>/threads/<threadId>``), presenting
        ``run_key`` (else the thread's latest run key this agent knows). Raises RemoteAgentError
        (404 ``unknown_thread``: unknown, already deleted or not yours), ConnectionLostError."""
        await self._thread_request("DELETE", "/threads/" + quote(thread_id, safe=""), None, None, timeout,
                                   key=run_key or self.thread_key(thread_id))

    async def rename_thread(
        self, thread_id: str, title: str, *, run_key: str | None = None,
        timeout: float = HISTORY_REQUEST_TIMEOUT_SECONDS,
    ) -> str:
        """Set one of this client's threads' title (``PATCH <url>/threads/<threadId>``); the
        title as kept (whitespace collapsed). Raises RemoteAgentError (400 a bad title, 404
        ``unknown_thread``), ConnectionLostError."""
        body = await self._thread_request(
            "PATCH", "/threads/" + quote(thread_id, safe=""), msgspec.json.encode({"title": title}), None, timeout,
            key=run_key or self.thread_key(thread_id),
        )
        return str(msgspec.json.decode(body).get("title", title))

    async def _thread_request(
        self, method: str, tail: str, content: bytes | None, params: Mapping[str, str] | None, timeout: float,
        *, key: str | None = None,
    ) -> bytes:
        url = self.url.rstrip("/") + tail
        headers = {**self.headers, "Accept": "application/json"}
        if content is not None:
            headers["Content-Type"] = "application/json"
        if key:
            headers[RUN_KEY_HEADER] = key
        try:
            async with self._one_client() as client:
                resp = await client.request(
                    method, url, content=content, params=params, headers=headers,
                    timeout=httpx.Timeout(timeout, connect=self.connect_timeout),
                )
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"cannot reach {url} ({type(exc).__name__})") from None
        if resp.status_code >= 300:
            raise remote_error_from_body(
                resp.status_code, resp.content, where=f"{method} {url}", content_type=resp.headers.get("Content-Type")
            )
        return resp.content

    async def query(self, resource_id: str, params: Any = None, *, timeout: float = QUERY_REQUEST_TIMEOUT_SECONDS) -> Any:
        """A resource's data: ``POST <url>/data/query {resourceId, params}``.

        Returns the decoded ``data``. Raises the typed errors of
        :mod:`agui_engine.genui.resources` for the server's refusals (UnknownResourceError 404,
        ResourceParamsError 422 with ``path``, ResourcePermissionError 403,
        ResourceBusyError 503, ResourceTimeoutError 504, ResourceFailedError /
        ResourceResultTooLargeError 502), RemoteAgentError for any other refusal (401,
        400, 413 ...), ConnectionLostError when the server cannot be reached, and
        ResourceTimeoutError when no answer comes within ``timeout`` seconds.
        """
        url = self.url.rstrip("/") + "/data/query"
        body = msgspec.json.encode(QueryRequest(resource_id=resource_id, params={} if params is None else params))
        headers = {**self.headers, "Content-Type": "application/json", "Accept": "application/json"}
        try:
            async with self._one_client() as client:
                resp = await client.post(
                    url, content=body, headers=headers, timeout=httpx.Timeout(timeout, connect=self.connect_timeout)
                )
        except httpx.TimeoutException:
            raise ResourceTimeoutError(f"POST {url}: no answer to the query of {resource_id} within {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"cannot reach {url} ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise query_error_from_body(resp.status_code, resp.content, where=f"POST {url}")
        try:
            return msgspec.json.decode(resp.content, type=_QueryAnswerDoc).data
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise RemoteInputError(f"POST {url}: not a query answer {{resourceId, data}}: {exc}") from None

    async def capabilities(self, *, timeout: float = CAPABILITIES_TIMEOUT_SECONDS) -> AgentCapabilities:
        """The remote agent's capabilities: ``GET <url>/capabilities`` (with this agent's
        headers: its bearer token). A server without that route (404 or 405: an AG-UI server
        that does not serve them) declares nothing: ``AgentCapabilities()``.

        Raises RemoteAgentError for any other refusal (401, 502 ...) and for a 200 that is not
        JSON, ConnectionLostError when the server cannot be reached or does not answer within
        ``timeout`` seconds, LimitExceededError past ``MAX_CAPABILITIES_BYTES`` (read no
        further), CapabilitiesDecodeError for a document that is not an AgentCapabilities
        (with its JSON path)."""
        url = self.url.rstrip("/") + "/capabilities"
        where = f"GET {url}"
        headers = {**self.headers, "Accept": "application/json"}
        try:
            async with asyncio.timeout(timeout):
                # past MAX_CAPABILITIES_BYTES nothing more is read, and read_capabilities refuses it
                status, content_type, body = await self._get_bounded(
                    url, headers, MAX_CAPABILITIES_BYTES, httpx.Timeout(timeout)
                )
        except TimeoutError:
            raise ConnectionLostError(f"{where}: no answer within {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise ConnectionLostError(f"{where}: cannot reach the server ({type(exc).__name__})") from None
        if status in (404, 405):
            return AgentCapabilities()
        if status != 200 or media_type(content_type) != "application/json":
            raise remote_error_from_body(status, body, where=where, content_type=content_type)
        return read_capabilities(body, where=where)

    async def _get_bounded(
        self, url: str, headers: Mapping[str, str], limit: int, timeout: httpx.Timeout, *, params: Any = None
    ) -> tuple[int, str | None, bytes]:
        """``GET url``: (status, Content-Type, body); the body is read up to just past
        ``limit`` bytes and no further (a longer body comes back longer than ``limit``).
        Raises httpx.TransportError."""
        body = bytearray()
        async with self._one_client() as client:
            async with client.stream("GET", url, params=params, headers=headers, timeout=timeout) as resp:
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        break
        return resp.status_code, resp.headers.get("content-type"), bytes(body)

    @contextlib.asynccontextmanager
    async def _one_client(self) -> AsyncIterator[httpx.AsyncClient]:
        """The given client, or one made for a single request and closed after it."""
        if self._client is not None:
            yield self._client
            return
        async with httpx.AsyncClient(verify=_ssl_context()) as client:
            yield client

    def _runs_url(self, run_id: str) -> str:
        return self.url.rstrip("/") + "/runs/" + quote(run_id, safe="")

    async def _open(self) -> _SSESession:
        if self._client is not None:
            return _SSESession(self._client)
        # A run's stream is read on aiohttp's connection and C parser (aiohttp_transport): the
        # events that arrived together come out of one read, not one h11 step per event.
        from .aiohttp_transport import AiohttpTransport

        return _SSESession(httpx.AsyncClient(
            transport=AiohttpTransport(verify=_ssl_context()), timeout=httpx.Timeout(None, connect=self.connect_timeout)
        ))

    async def _close(self, session: _SSESession) -> None:
        if self._client is None:
            await session.client.aclose()

    def _keyed(self, session: _SSESession) -> dict[str, str]:
        # The run key the server gave this run (RUN_KEY_HEADER) goes with its resume and cancel.
        return {**self.headers, RUN_KEY_HEADER: session.key} if session.key else dict(self.headers)

    def _keeps_runs(self, session: _SSESession) -> bool:
        return session.key is not None  # our gateway's RUN_KEY_HEADER: the run is kept for a resume

    async def _cancel(self, session: _SSESession, run_id: str) -> None:
        # Cancel now rather than leaving the run to the server's grace period.
        try:
            await session.client.delete(self._runs_url(run_id), headers=self._keyed(session), timeout=CANCEL_REQUEST_TIMEOUT)
        except (httpx.HTTPError, RuntimeError):
            pass

    async def _attempt(
        self, session: _SSESession, input: RunAgentInput, last_id: str | None
    ) -> AsyncIterator[AttemptItem]:
        # It reconnects with Last-Event-ID after a drop, so it asks the server to
        # keep the run for the grace period rather than stop it on a disconnect.
        accept = f"{PROTO_CONTENT_TYPE}, {SSE_CONTENT_TYPE};q=0.5" if self.binary else SSE_CONTENT_TYPE
        headers = {
            **self._keyed(session), "Content-Type": "application/json", "Accept": accept, RESUMABLE_HEADER: "1",
            **trace_headers(),  # the traced run's context continues into the remote agent (loops/observe.py)
        }
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        elif session.key is None and (prior := self.thread_key(input.thread_id)) is not None:
            # a run key of the thread's previous run: the new run joins that thread's history
            headers[RUN_KEY_HEADER] = prior
        if input.protocol_version is None:  # a 1.x client says so: the server then writes the 1.0 wire
            input = msgspec.structs.replace(input, protocol_version=PROTOCOL_VERSION)
        body = msgspec.json.encode(input)
        async with session.client.stream("POST", self.url, content=body, headers=headers) as resp:
            content_type = resp.headers.get("content-type")
            if resp.status_code != 200:
                raw = await resp.aread()
                raise remote_error_from_body(resp.status_code, raw, where=f"POST {self.url}", content_type=content_type)
            binary = self.binary and media_type(content_type) == PROTO_CONTENT_TYPE
            if media_type(content_type) != SSE_CONTENT_TYPE and not binary:
                # not an AG-UI endpoint (a web page, a JSON API): refused, never retried
                raise remote_error_from_body(200, b"", where=f"POST {self.url}", content_type=content_type or "no content type")
            session.key = resp.headers.get(RUN_KEY_HEADER) or session.key
            if session.key is not None:
                self.remember_thread_key(input.thread_id, session.key)
            yield None
            if binary:
                # No ids on a binary stream: the n-th frame after cursor c is event c + n.
                cursor = 0 if last_id is None else resume_cursor(last_id, input.run_id)[1]
                frames = ProtoEventDecoder(tolerant=self.tolerant)
                async for chunk in resp.aiter_raw():
                    events = frames.feed(chunk)
                    if events:
                        yield event_id(input.run_id, cursor + frames.frames_decoded), events
                try:
                    frames.close()
                except ProtoDecodeError as exc:
                    if exc.code != "truncated_protobuf":
                        raise
                    # an unfinished last frame is a drop, as an unfinished SSE event is: resumed
                return
            decoder = EventStreamDecoder("sse", tolerant=self.tolerant)
            async for chunk in resp.aiter_raw():
                events = decoder.feed(chunk)
                if events:
                    # Every frame of this server carries an id, so the decoder's
                    # last event id is the id of the batch's last event.
                    yield decoder.last_event_id, events
            decoder.close()  # an incomplete last frame is discarded (WHATWG): a drop
