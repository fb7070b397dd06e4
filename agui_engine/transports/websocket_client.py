"""AG-UI over WebSocket (on the ``websockets`` library), the client:
:class:`WebSocketAgent`, a remote AG-UI WebSocket endpoint as an
:class:`~agui_engine.protocol.agent.Agent`.

It speaks the messages of :mod:`~agui_engine.transports.envelope` (the protocol is described
in :mod:`~transports.websocket_server`): ``run`` to start, ``resume`` with the last event id
after a drop, ``cancel`` when its caller stops reading; ``query`` and ``capabilities`` each on a
connection of their own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import msgspec
import websockets
from websockets.asyncio.client import ClientConnection, connect

from agui_engine.genui.resources import ResourceTimeoutError
from agui_engine.loops.observe import trace_headers
from agui_engine.loops.tool_runner import ToolRunner
from agui_engine.protocol.capabilities import AgentCapabilities
from agui_engine.protocol.codec import LegacyThinkingMapper
from agui_engine.protocol.events import RunAgentInput

from .capabilities import CAPABILITIES_TIMEOUT_SECONDS, capabilities_answer
from .data import QUERY_REQUEST_TIMEOUT_SECONDS, query_answer
from .envelope import (
    CancelMessage,
    CapabilitiesMessage,
    ClientMessage,
    QueryMessage,
    ResumeMessage,
    ThreadsMessage,
    decode_protocol_line,
    encode_client_message,
    run_message,
)
from .input_decoding import DEFAULT_MAX_BODY_BYTES
from .retrying_client import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_MAX_RETRIES,
    AttemptItem,
    ConnectionLostError,
    RemoteClientBase,
    remote_error_from_body,
    remote_error_from_line,
)
from .thread_messages import ThreadsByMessage
from .tool_runner import STANDARD_TOOL_RUNNER

__all__ = ["WebSocketAgent"]

_T = TypeVar("_T")


class _WebSocketSession:
    """The connection of one WebSocketAgent run (replaced on each reconnect)."""

    __slots__ = ("key", "ws")

    def __init__(self) -> None:
        self.ws: ClientConnection | None = None
        #: The run key of the run's first line (its resume and cancel present it).
        self.key: str | None = None


class WebSocketAgent(ThreadsByMessage, RemoteClientBase):
    """A remote AG-UI WebSocket endpoint as an :class:`~agui_engine.protocol.agent.Agent`.

    Each ``run()`` opens a connection, sends ``run``, and yields the events of its
    run. When the connection drops before the terminal event it reconnects and
    sends ``resume`` with the last event id (``max_retries`` attempts, backoff:
    :class:`~transports.retrying_client.RetryPolicy`), skipping any ``seq`` already
    delivered. Closing the generator early sends ``cancel``. Errors: as
    :class:`~transports.sse_client.SSEAgent` (RemoteAgentError / ConnectionLostError
    before the first event, ``RUN_ERROR`` after it). Lines are decoded by
    :func:`~agui_engine.transports.envelope.decode_protocol_line`, the loop is
    :meth:`RemoteClientBase.run <transports.retrying_client.RemoteClientBase.run>`.
    """

    #: The runner a :class:`~agui_engine.loops.thread.Thread` over this client runs its sync
    #: client tools with (the standard one: worker threads).
    tool_runner: ToolRunner = STANDARD_TOOL_RUNNER

    _drops = (TimeoutError, websockets.ConnectionClosed, websockets.InvalidHandshake, OSError)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
        max_size: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        super().__init__(
            url, headers=headers, max_retries=max_retries, backoff_initial=backoff_initial, backoff_max=backoff_max
        )
        self.max_size = max_size

    async def query(self, resource_id: str, params: Any = None, *, timeout: float = QUERY_REQUEST_TIMEOUT_SECONDS) -> Any:
        """A resource's data over a ``query`` message (on a connection of its own).

        Returns the decoded data. Raises the typed errors of
        :mod:`agui_engine.genui.resources` for the server's refusals (404, 422 with
        ``path``, 403, 503, 504, 502), RemoteAgentError for any other refusal (a
        refused handshake: 401 ...), ConnectionLostError when the server cannot be
        reached or closes, ResourceTimeoutError when no answer comes within ``timeout``.
        """
        where = f"WebSocket {self.url}"
        query_id = uuid.uuid4().hex
        message = QueryMessage(query_id=query_id, resource_id=resource_id, params={} if params is None else params)
        try:
            answer = await self._ask(message, lambda line: query_answer(line, query_id, where),
                                     timeout=timeout, what=f"the query of {resource_id}")
        except TimeoutError:
            raise ResourceTimeoutError(f"{where} did not answer the query of {resource_id} within {timeout:g} s") from None
        return msgspec.json.decode(answer)

    async def ask_threads(self, message: ThreadsMessage, timeout: float) -> bytes:
        """The answer to a ``threads`` message, on a connection of its own
        (:class:`~transports.thread_messages.ThreadsByMessage`: ``list_threads``, ``history``,
        ``rename_thread``, ``delete_thread``)."""
        where = f"WebSocket {self.url}"
        try:
            answer = await self._ask(message, lambda line: query_answer(line, message.query_id, where),
                                     timeout=timeout, what=f"threads {message.action}")
        except TimeoutError:
            raise ConnectionLostError(f"{where} did not answer threads {message.action} within {timeout:g} s") from None
        return bytes(answer)

    def presented_key(self, thread_id: str) -> str | None:
        return self.thread_key(thread_id)

    def _where(self) -> str:
        return f"WebSocket {self.url}"

    async def capabilities(self, *, timeout: float = CAPABILITIES_TIMEOUT_SECONDS) -> AgentCapabilities:
        """The remote agent's capabilities, asked with a ``capabilities`` message (on a
        connection of its own). A server that does not know the message (it answers
        ``bad_input``: an older server) declares nothing: ``AgentCapabilities()``.

        Raises RemoteAgentError for a refused handshake (401 ...) or any other error line,
        ConnectionLostError when the server cannot be reached, closes, or does not answer
        within ``timeout`` seconds, CapabilitiesDecodeError / LimitExceededError for a
        document that is not an AgentCapabilities or too large."""
        where = f"WebSocket {self.url}"
        try:
            return await self._ask(CapabilitiesMessage(), lambda line: capabilities_answer(line, where=where),
                                   timeout=timeout, what="the capabilities message")
        except TimeoutError:
            raise ConnectionLostError(f"{where} did not answer the capabilities message within {timeout:g} s") from None

    async def _ask(self, message: ClientMessage, pick: Callable[[bytes], _T | None], *, timeout: float, what: str) -> _T:
        """Send ``message`` on a connection of its own and return the first ``pick(line)``
        that is not None. Raises TimeoutError after ``timeout`` seconds, RemoteAgentError for a
        refused handshake, ConnectionLostError when the connection fails or closes first, and
        what ``pick`` raises."""
        where = f"WebSocket {self.url}"
        try:
            async with asyncio.timeout(timeout):
                try:
                    ws = await connect(self.url, additional_headers=self.headers, max_size=self.max_size, compression=None)
                except websockets.InvalidStatus as exc:
                    raise remote_error_from_body(
                        exc.response.status_code, bytes(exc.response.body or b""), where=where
                    ) from None
                async with ws:
                    await ws.send(encode_client_message(message), text=True)
                    async for frame in ws:
                        for line in (frame.encode() if isinstance(frame, str) else frame).split(b"\n"):
                            answer = pick(line)
                            if answer is not None:
                                return answer
        except TimeoutError:
            raise  # an OSError too: the caller's to name
        except (websockets.ConnectionClosed, websockets.InvalidHandshake, OSError) as exc:
            raise ConnectionLostError(f"{where}: {what} got no answer ({type(exc).__name__})") from None
        raise ConnectionLostError(f"{where} closed the connection before answering {what}")

    async def _open(self) -> _WebSocketSession:
        return _WebSocketSession()

    async def _close(self, session: _WebSocketSession) -> None:
        if session.ws is not None:
            await session.ws.close()

    async def _cancel(self, session: _WebSocketSession, run_id: str) -> None:
        if session.ws is None:
            return
        try:
            await session.ws.send(encode_client_message(CancelMessage(run_id=run_id, run_key=session.key)), text=True)
        except (websockets.ConnectionClosed, OSError, RuntimeError):
            pass  # the connection is gone: the server's grace period ends the run

    async def _attempt(self, session: _WebSocketSession, input: RunAgentInput, last_id: str | None) -> AsyncIterator[AttemptItem]:
        run_id = input.run_id
        where = f"WebSocket {self.url}"
        if session.ws is not None:
            await session.ws.close()
            session.ws = None
        try:
            ws = session.ws = await connect(  # a traced run's context goes with the handshake (loops/observe.py)
                self.url, additional_headers={**self.headers, **trace_headers()}, max_size=self.max_size,
                compression=None,
            )
        except websockets.InvalidStatus as exc:
            raise remote_error_from_body(
                exc.response.status_code, bytes(exc.response.body or b""), where=where
            ) from None
        opening = (
            run_message(input, run_key=self.thread_key(input.thread_id))
            if last_id is None
            else ResumeMessage(run_id=run_id, last_event_id=last_id, run_key=session.key)
        )
        await ws.send(encode_client_message(opening), text=True)
        # Sent: a drop from here on resumes the run (a server that never got it answers unknown_run).
        yield None
        legacy = LegacyThinkingMapper()
        async for message in ws:
            for line in (message.encode() if isinstance(message, str) else message).split(b"\n"):
                item = decode_protocol_line(line, where=where, legacy=legacy)
                if item.error is not None:
                    if item.run_id in (None, run_id):
                        raise remote_error_from_line(item.error, where=where)
                elif item.event_id is not None and item.event_id.rpartition(":")[0] == run_id:
                    if item.run_key is not None:
                        session.key = item.run_key
                        self.remember_thread_key(input.thread_id, item.run_key)
                    yield item.event_id, [item.event]  # type: ignore[list-item]
                # else: another run's event on a shared connection


