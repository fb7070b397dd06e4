"""Event ids, ``<runId>:<seq>``: what every transport's server writes (SSE ``id:``, the
WebSocket / stdio envelope's ``id``) and its client sends back to resume (``Last-Event-ID``,
the WebSocket ``lastEventId``). Servers and clients import them from here.
"""

from __future__ import annotations

from .eventlog import BadCursorError
from .input_decoding import MAX_SEQ_DIGITS

__all__ = ["event_id", "resume_cursor"]


def resume_cursor(last_event_id: str, run_id: str | None = None) -> tuple[str, int]:
    """Parse a ``<runId>:<seq>`` resume cursor (SSE ``Last-Event-ID``, the WebSocket
    ``lastEventId``). Raises BadCursorError naming what is wrong."""
    rid, sep, seq_text = last_event_id.rpartition(":")
    # isascii(): str.isdigit() is also true for "²" or "١", which int() refuses.
    if not sep or not rid or not (seq_text.isascii() and seq_text.isdigit()) or len(seq_text) > MAX_SEQ_DIGITS:
        raise BadCursorError(f"resume cursor {last_event_id!r} is not of the form <runId>:<seq>")
    if run_id is not None and rid != run_id:
        raise BadCursorError(f"resume cursor {last_event_id!r} belongs to run {rid!r}, not {run_id!r}")
    return rid, int(seq_text)


def event_id(run_id: str, seq: int) -> str:
    """The id of event ``seq`` of a run, as carried by SSE ``id:`` and the WS envelope."""
    return f"{run_id}:{seq}"
