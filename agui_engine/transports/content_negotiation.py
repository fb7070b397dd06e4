"""Content negotiation of the HTTP gateway (RFC 9110 section 12.5.1): which stream
encoding (SSE, NDJSON, protobuf) a run's request is answered with, and which encoding (JSON,
protobuf) a thread history. Pure functions of the ``Accept`` header; the server
(``sse_server``) calls them before any stream starts, so a refusal is a 406.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agui_engine.protocol.codec import NDJSON_CONTENT_TYPE, SSE_CONTENT_TYPE
from agui_engine.protocol.proto import PROTO_CONTENT_TYPE

from .input_errors import NotAcceptableError

__all__ = ["MAX_ECHOED_HEADER_CHARS", "NDJSON_TYPES", "negotiate", "negotiate_history"]

#: Characters of a client's Accept / Content-Type header quoted in a 406 / 415
#: message: any real value (< 100 characters) is shown whole so the client sees
#: what it sent, a hostile multi-KiB header is not reflected into the body / logs.
MAX_ECHOED_HEADER_CHARS = 200

#: The media types an NDJSON stream is asked for by.
NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"})

#: RFC 9110 section 12.4.2: ``qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )``.
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


def _qvalue(text: str) -> float:
    """The weight of an Accept ``q`` parameter; 0 (the range is not acceptable) for
    anything outside RFC 9110's grammar: ``inf``, ``nan``, ``2``, ``-1``, ``1e0``."""
    return float(text) if _QVALUE.fullmatch(text) else 0.0


#: What a stream request (negotiate) and a history request (negotiate_history) can be answered
#: with: media type -> answer, in the order ties go (the textual default first, the binary
#: encoding last, so a bare wildcard never picks it).
_STREAM_KINDS: Mapping[str, str] = {
    SSE_CONTENT_TYPE: "sse",
    **dict.fromkeys(sorted(NDJSON_TYPES), "ndjson"),
    PROTO_CONTENT_TYPE: "proto",
}
_HISTORY_KINDS: Mapping[str, str] = {
    "application/json": "json",
    PROTO_CONTENT_TYPE: "proto",
}


def _specificity(media_range: str, answer_type: str) -> int:
    """How specifically ``media_range`` names ``answer_type``: 3 exactly, 2 as ``type/*``,
    1 as ``*/*``, 0 not at all (RFC 9110 section 12.5.1)."""
    if media_range == answer_type:
        return 3
    if media_range == answer_type.partition("/")[0] + "/*":
        return 2
    return 1 if media_range == "*/*" else 0


def _accept_elements(accept: str) -> list[list[str]]:
    """An Accept header's elements, each as its media range then its parameters: split at
    the commas and semicolons outside quoted strings (RFC 9110 5.6.6: a parameter value may be
    a quoted string holding either, ``text/event-stream;note="a,b";q=0.1``)."""
    if '"' not in accept:  # the usual header: no quoted string, plain splits
        return [part.split(";") for part in accept.split(",")]
    elements: list[list[str]] = [[]]
    segment: list[str] = []
    quoted = escaped = False
    for ch in accept:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
            segment.append(ch)
        elif ch in ",;":
            elements[-1].append("".join(segment))
            segment = []
            if ch == ",":
                elements.append([])
        else:
            quoted = ch == '"'
            segment.append(ch)
    elements[-1].append("".join(segment))
    return elements


def _best(accept: str, kinds: Mapping[str, str], names: str) -> str:
    # RFC 9110 12.5.1: each media type we can answer with takes the q of the most specific
    # range that names it (``text/event-stream;q=0, */*`` refuses SSE, the wildcard does not
    # bring it back); the highest q wins; ties go in ``kinds``' order; q=0 is "not acceptable".
    weights: dict[str, tuple[int, float]] = {}  # media type -> (specificity, q)
    for media, *params in _accept_elements(accept):
        media = media.strip().lower()
        q = 1.0
        for param in params:
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "q":
                q = _qvalue(val.strip())
        for answer_type in kinds:
            level = _specificity(media, answer_type)
            if not level:
                continue
            held = weights.get(answer_type)
            if held is None or level > held[0] or (level == held[0] and q > held[1]):
                weights[answer_type] = (level, q)
    best_q = 0.0
    best = ""
    for answer_type, kind in kinds.items():  # in tie order: a later type must weigh strictly more
        q = weights.get(answer_type, (0, 0.0))[1]
        if q > best_q:
            best_q, best = q, kind
    if not best:
        raise NotAcceptableError(f"Accept {accept[:MAX_ECHOED_HEADER_CHARS]!r} admits none of {names}")
    return best


def negotiate(accept: str | None) -> str:
    """``"sse"``, ``"ndjson"`` or ``"proto"`` for an Accept header (RFC 9110 12.5.1: each
    type takes the q of the most specific range naming it, the highest q wins; SSE on ties,
    a bare wildcard and a missing header; a range whose q is outside RFC 9110's grammar
    counts as q=0). Raises NotAcceptableError."""
    names = f"{SSE_CONTENT_TYPE}, {NDJSON_CONTENT_TYPE}, {PROTO_CONTENT_TYPE}"
    return _best(accept, _STREAM_KINDS, names) if accept else "sse"


def negotiate_history(accept: str | None) -> str:
    """``"json"`` or ``"proto"`` for the Accept header of a thread history request
    (``GET <path>/threads/<threadId>``), by the same rules as :func:`negotiate`: JSON on
    ties, wildcards and a missing header. Raises NotAcceptableError."""
    return _best(accept, _HISTORY_KINDS, f"application/json, {PROTO_CONTENT_TYPE}") if accept else "json"

