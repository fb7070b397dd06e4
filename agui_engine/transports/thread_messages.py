"""The thread API as a client asks it with ``threads`` messages (spec/transports.md §4.4,
"Durable threads"; :class:`~transports.envelope.ThreadsMessage`): list, read, rename and
delete threads the way ``SSEAgent`` does over HTTP. :class:`ThreadsByMessage` is what
:class:`~transports.websocket_client.WebSocketAgent` and
:class:`~transports.stdio_client.StdioAgent` share: each says how one message is asked
(``ask_threads``: a WebSocket connection of its own, a run of the stdio command) and which run
key it presents for a thread; the messages and the answers' decoding are here.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from agui_engine.protocol.codec import decode_event_list
from agui_engine.protocol.errors import UpstreamError
from agui_engine.protocol.events import AnyEvent
from agui_engine.protocol.threads import ThreadPage

from .envelope import ThreadsMessage

__all__ = ["MAX_THREADS_ANSWER_BYTES", "THREADS_MESSAGE_TIMEOUT_SECONDS", "ThreadsByMessage"]

#: Seconds a ``threads`` message waits for its answer (connect, or the stdio command's start,
#: included): as ``SSEAgent``'s HISTORY_REQUEST_TIMEOUT_SECONDS, since a ``get`` carries a
#: whole branch and a stdio command imports its agent first.
THREADS_MESSAGE_TIMEOUT_SECONDS = 30.0

#: Bytes of one answer line ``StdioAgent`` reads to a ``threads`` message: as ``SSEAgent``'s
#: MAX_HISTORY_RESPONSE_BYTES, a whole branch of a full thread (1 MiB of records served with
#: their inputs) with room to spare, while a runaway line cannot take the client's memory.
MAX_THREADS_ANSWER_BYTES = 16 * 1024 * 1024


class ThreadsByMessage:
    """The thread methods of a client that asks them with ``threads`` messages. A subclass
    implements :meth:`ask_threads`; :meth:`presented_key` (default: none) is the run key it
    presents for a thread when the caller gives none."""

    async def ask_threads(self, message: ThreadsMessage, timeout: float) -> bytes:
        """The encoded ``result`` of the answer to ``message``. Raises the server's refusal
        (RemoteAgentError ...), ConnectionLostError."""
        raise NotImplementedError

    def presented_key(self, thread_id: str) -> str | None:
        """The run key presented for ``thread_id`` when the caller gives none."""
        return None

    def _where(self) -> str:
        return type(self).__name__

    async def list_threads(
        self, *, limit: int | None = None, cursor: str | None = None, search: str | None = None,
        timeout: float = THREADS_MESSAGE_TIMEOUT_SECONDS,
    ) -> ThreadPage:
        """One page of this caller's threads, newest first (as ``SSEAgent.list_threads``).
        Raises RemoteAgentError for a refusal (403 ``principal_required``, 404
        ``threads_not_listed``, 400), ConnectionLostError, UpstreamError (``invalid_threads``:
        an answer that is no page)."""
        answer = await self.ask_threads(ThreadsMessage(query_id=uuid.uuid4().hex, action="list", limit=limit,
                                                       cursor=cursor, q=search), timeout)
        try:
            return msgspec.json.decode(answer, type=ThreadPage)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UpstreamError(f"{self._where()}: not a page of threads ({exc})", code="invalid_threads") from None

    async def history(
        self, thread_id: str, *, run_id: str | None = None, run_key: str | None = None,
        timeout: float = THREADS_MESSAGE_TIMEOUT_SECONDS,
    ) -> list[AnyEvent]:
        """The thread's compacted history, the branch ending at ``run_id`` (default: its
        latest run), as ``SSEAgent.history`` reads it (what ``Thread.restore`` reads).
        Raises RemoteAgentError (404 ``unknown_thread``), ConnectionLostError,
        EventDecodeError (an answer that is not a list of events)."""
        answer = await self.ask_threads(ThreadsMessage(
            query_id=uuid.uuid4().hex, action="get", thread_id=thread_id, run_id=run_id,
            run_key=run_key or self.presented_key(thread_id)), timeout)
        return decode_event_list(answer, where=f"{self._where()}: the history of {thread_id!r}")

    async def rename_thread(
        self, thread_id: str, title: str, *, run_key: str | None = None,
        timeout: float = THREADS_MESSAGE_TIMEOUT_SECONDS,
    ) -> str:
        """Set a thread's title (as ``SSEAgent.rename_thread``); the title as kept."""
        answer = await self.ask_threads(ThreadsMessage(
            query_id=uuid.uuid4().hex, action="rename", thread_id=thread_id, title=title,
            run_key=run_key or self.presented_key(thread_id)), timeout)
        done: Any = msgspec.json.decode(answer)
        return str(done["title"]) if isinstance(done, dict) and "title" in done else title

    async def delete_thread(
        self, thread_id: str, *, run_key: str | None = None, timeout: float = THREADS_MESSAGE_TIMEOUT_SECONDS
    ) -> None:
        """Delete a thread (as ``SSEAgent.delete_thread``): 404 ``unknown_thread`` when not
        the caller's."""
        await self.ask_threads(ThreadsMessage(query_id=uuid.uuid4().hex, action="delete", thread_id=thread_id,
                                              run_key=run_key or self.presented_key(thread_id)), timeout)
