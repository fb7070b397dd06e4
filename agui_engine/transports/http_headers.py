"""The HTTP names the SSE gateway and :class:`~transports.sse_client.SSEAgent` both speak:
header and query-parameter names of run keys, resumption and thread histories
(spec/transports.md §2.6, §4.4). The server (``sse_server``) and the client
(``sse_client``) import them from here; neither imports the other.
"""

from __future__ import annotations

__all__ = [
    "HISTORY_TRIMMED_HEADER",
    "LIVE_RUN_HEADER",
    "NOT_RESUMABLE_VALUES",
    "RESUMABLE_HEADER",
    "RUN_ID_HEADER",
    "RUN_KEY_HEADER",
    "RUN_KEY_QUERY",
    "THREAD_ID_HEADER",
]

#: Request header by which a client declares it will reconnect after a drop
#: (``Last-Event-ID``) and so wants the run kept for the grace period when its
#: connection goes. Without it (the official @ag-ui/client), closing the
#: connection stops the run: see RunRegistry.subscribe(resumable=...).
RESUMABLE_HEADER = "X-AGUI-Resumable"
#: Values of RESUMABLE_HEADER that say "no" (any other value says "yes").
NOT_RESUMABLE_VALUES = frozenset({"0", "false", "?0", "no"})

#: Response header of a run's start (the POST's 200) carrying its run key, and the
#: request header by which a client presents it to stream, resume or cancel the run
#: (spec/transports.md §2.6). RUN_KEY_QUERY is the same as a query parameter, for an
#: EventSource, which cannot send headers.
RUN_KEY_HEADER = "X-AGUI-Run-Key"
RUN_KEY_QUERY = "runKey"

#: Response header naming the run a stream (or a thread history's branch) belongs to.
RUN_ID_HEADER = "X-AGUI-Run-Id"

#: Response headers of a thread history (``GET <path>/threads/<threadId>``): the branch's
#: last run goes in RUN_ID_HEADER; HISTORY_TRIMMED_HEADER is ``true`` when runs of the
#: branch are gone (evicted by the history budget) or kept trimmed (spec/transports.md §4.4).
HISTORY_TRIMMED_HEADER = "X-AGUI-History-Trimmed"
THREAD_ID_HEADER = "X-AGUI-Thread-Id"

#: Response header of a thread history naming the thread's run still streaming (on this node,
#: or on any node of a shared log) that the caller may follow and that is not in the history yet:
#: a page reloaded mid-run reads the history, then follows that run (``GET <path>/runs/<runId>``).
LIVE_RUN_HEADER = "X-AGUI-Live-Run-Id"
