"""The envelope of the WebSocket and stdio protocols: the JSON messages around AG-UI
events, as msgspec Structs that the servers and the client agents both use (one
definition of the wire format, encoded and decoded by msgspec). ``spec/transports.md``
§6 and §7 document it.

Client -> server (WebSocket; stdio takes a bare ``RunAgentInput`` and ``cancel``), tagged
by ``"type"``::

    {"type": "run",    "input": <RunAgentInput>, "runKey": "..."}  RunMessage (runKey optional)
    {"type": "cancel", "runId": "...", "runKey": "..."}      CancelMessage (runKey optional)
    {"type": "resume", "runId": "...", "lastEventId": "...", "runKey": "..."}  ResumeMessage
    {"type": "query",  "queryId": "...", "resourceId": "...", "params": {...}}  QueryMessage
    {"type": "capabilities"}                                  CapabilitiesMessage (stdio too)
    {"type": "threads", "queryId": "...", "action": "list"|"get"|"rename"|"delete", ...}  ThreadsMessage

Server -> client, one JSON object per line (:class:`ServerLine`)::

    {"id": "<runId>:<seq>", "event": {...AG-UI event...}}    an event of a run
    {"id": "<runId>:1", "event": {...}, "runKey": "..."}     the first, to the client that started it
    {"runId": "...", "error": {"code", "message", "status"}} an error (runId: when it belongs to a run)
    {"queryId": "...", "result": <data>}                     the answer to a query
    {"queryId": "...", "error": {"code", "message", "status", "path"?}}  a query refused
    {"capabilities": <AgentCapabilities>}                    the answer to ``capabilities``

and, on stdio only, a bare AG-UI event (it has ``"type"``) while a single run is in flight.

``RunMessage.input`` stays raw JSON until :func:`~agui_engine.transports.input_decoding.decode_run_input`
decodes it, so a bad input is an ``InvalidInputError`` (4422) with its JSON path and the
size limit applies to it, exactly as for an HTTP body. A line of events is built from the
run's already-encoded event bytes (``msgspec.Raw``): an event is encoded once, whatever
the transport.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, NamedTuple

import msgspec

from agui_engine.protocol.capabilities import AgentCapabilities, encode_capabilities
from agui_engine.protocol.codec import LegacyThinkingMapper, decode_event
from agui_engine.protocol.errors import AguiEngineError, RemoteInputError
from agui_engine.protocol.events import AnyEvent, RunAgentInput

__all__ = [
    "CancelMessage",
    "CapabilitiesMessage",
    "ClientMessage",
    "ErrorBody",
    "EventLines",
    "MAX_QUERY_ID_LENGTH",
    "ProtocolLine",
    "QueryMessage",
    "READ_CHUNK_BYTES",
    "ResumeMessage",
    "RunMessage",
    "ServerLine",
    "ThreadsMessage",
    "capabilities_line",
    "decode_client_message",
    "decode_protocol_line",
    "encode_client_message",
    "error_line",
    "keyed_event_line",
    "message_query_id",
    "message_run_id",
    "query_result_line",
    "run_message",
]

#: Bytes per read of a stdio pipe where lines are not wanted whole: the server skipping the
#: rest of an over-long input line, the client (StdioAgent) draining a child's stdout. A
#: typical pipe read, so skipping costs few calls while no more than this is held at once.
READ_CHUNK_BYTES = 64 * 1024

#: Longest ``queryId`` of a WebSocket ``query`` message. The client picks it and the
#: server echoes it on the answer line; 256 characters (MAX_RUN_ID_LENGTH's figure) fits
#: any UUID/ULID scheme with a prefix while bounding what each answer line repeats.
MAX_QUERY_ID_LENGTH: Final = 256


# --------------------------------------------------------------------------- client -> server


class RunMessage(
    msgspec.Struct, tag="run", tag_field="type", frozen=True, kw_only=True, rename="camel", omit_defaults=True
):
    """Start a run. ``input`` is the RunAgentInput's JSON, decoded by the server with
    :func:`~agui_engine.transports.input_decoding.decode_run_input` (size limit, JSON path).
    ``run_key``: the run key of an earlier run of the same thread, so that the run joins
    that thread's history (spec/transports.md §4.4)."""

    input: msgspec.Raw
    run_key: str | None = None


class CancelMessage(
    msgspec.Struct, tag="cancel", tag_field="type", frozen=True, kw_only=True, rename="camel", omit_defaults=True
):
    """Cancel a run (the run ends with ``RUN_ERROR{code: "cancelled"}``). ``run_key``:
    the run's key, when this connection did not start the run (spec/transports.md §2.6)."""

    run_id: str
    run_key: str | None = None


class ResumeMessage(
    msgspec.Struct, tag="resume", tag_field="type", frozen=True, kw_only=True, rename="camel", omit_defaults=True
):
    """Stream a run again from after ``last_event_id`` (``<runId>:<seq>``), presenting
    its ``run_key`` (the one the run's first line carried)."""

    run_id: str
    last_event_id: str
    run_key: str | None = None


class QueryMessage(msgspec.Struct, tag="query", tag_field="type", frozen=True, kw_only=True, rename="camel"):
    """Ask for a resource's data (``transports.data``); answered by one line carrying
    ``queryId``: ``result`` or ``error``. ``params`` defaults to ``{}``."""

    query_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_ID_LENGTH)]
    resource_id: str
    params: Any = msgspec.field(default_factory=dict)


class CapabilitiesMessage(msgspec.Struct, tag="capabilities", tag_field="type", frozen=True, kw_only=True):
    """Ask for the served agent's capabilities; answered by one line ``{"capabilities":
    {...}}`` (:func:`capabilities_line`), or an error line naming no run."""


class ThreadsMessage(msgspec.Struct, tag="threads", tag_field="type", frozen=True, kw_only=True, rename="camel"):
    """The thread API (spec/transports.md §4.4, "Durable threads") on a WebSocket or stdio:
    ``action`` ``list`` (``limit``, ``cursor``, ``q``), ``get`` (``threadId``, ``runId``: the
    branch's history), ``rename`` (``threadId``, ``title``) or ``delete`` (``threadId``),
    presenting ``runKey`` when given. Answered as a query is: one line carrying ``queryId``
    with ``result`` (a page; a JSON array of events; ``{"threadId", "title"}``; ``null``) or
    ``error``."""

    query_id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_ID_LENGTH)]
    action: Literal["delete", "get", "list", "rename"]
    thread_id: str | None = None
    run_id: str | None = None
    title: Any = None
    limit: int | None = None
    cursor: str | None = None
    q: str | None = None
    run_key: str | None = None


#: A message a client sends; the ``"type"`` member says which.
ClientMessage = RunMessage | CancelMessage | ResumeMessage | QueryMessage | CapabilitiesMessage | ThreadsMessage

_CLIENT_DECODER: Final = msgspec.json.Decoder(ClientMessage)
_ENCODER: Final = msgspec.json.Encoder()


class _RunIdProbe(msgspec.Struct, rename="camel"):
    """The members that name a run, read leniently from a message that failed to decode
    so that its error line can still say which run it was about."""

    run_id: Any = None
    input: Any = None
    query_id: Any = None


_PROBE_DECODER: Final = msgspec.json.Decoder(_RunIdProbe)


def run_message(input: RunAgentInput, run_key: str | None = None) -> RunMessage:
    """The ``run`` message for ``input``."""
    return RunMessage(input=msgspec.Raw(_ENCODER.encode(input)), run_key=run_key)


def encode_client_message(message: ClientMessage) -> bytes:
    """``message`` as JSON text (the ``"type"`` tag first)."""
    return _ENCODER.encode(message)


def decode_client_message(data: str | bytes) -> ClientMessage:
    """Decode one client message. Raises RemoteInputError: ``malformed_json`` when it is
    not JSON, ``bad_input`` (with the JSON path) when it is not a run / cancel / resume
    message of the right shape. :func:`message_run_id` says which run a bad message named."""
    try:
        return _CLIENT_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise RemoteInputError(f"not a run, cancel, resume, query, capabilities or threads message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise RemoteInputError(f"the message is not valid JSON: {exc}", code="malformed_json") from None


def message_run_id(data: str | bytes) -> str | None:
    """The run a message names (``runId``, or ``input.runId`` of a ``run``), read
    leniently; None when it names none or is not a JSON object."""
    try:
        probe = _PROBE_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    rid = probe.run_id
    if rid is None and isinstance(probe.input, dict):
        rid = probe.input.get("runId")
    return rid if isinstance(rid, str) else None


def message_query_id(data: str | bytes) -> str | None:
    """The ``queryId`` a message names, read leniently (its error line echoes it); None
    when it names none, it is too long to echo, or the text is not a JSON object."""
    try:
        probe = _PROBE_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    qid = probe.query_id
    return qid if isinstance(qid, str) and 0 < len(qid) <= MAX_QUERY_ID_LENGTH else None


# --------------------------------------------------------------------------- server -> client


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What went wrong: the error's ``code``, its message, and on WebSocket its
    application status (4000-4999, the close-code numbering of ``spec/errors.md``)."""

    code: str
    message: str
    status: int | None = None
    #: The JSON path of a query's invalid params (``$.params.city``).
    path: str | None = None


class ServerLine(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """One line from the server: an event line (``id`` and ``event``) or an error line
    (``error``, plus ``runId`` when it belongs to a run and, on stdio, the input ``line``
    it answers). One Struct for both shapes because msgspec decodes tagged unions only and
    these lines carry no tag; ``type`` is set when the line is a bare AG-UI event (stdio,
    one run in flight) and is never written by :class:`EventLines` / :func:`error_line`."""

    type: Any = None
    id: str | None = None
    event: msgspec.Raw = msgspec.Raw()  # empty: absent (msgspec cannot decode Raw | None)
    run_id: str | None = None
    error: ErrorBody | None = None
    line: int | None = None
    query_id: str | None = None
    result: msgspec.Raw = msgspec.Raw()  # a query's data (empty: absent)
    #: The answer to a ``capabilities`` message: an AgentCapabilities document (empty: absent).
    capabilities: msgspec.Raw = msgspec.Raw()
    #: On the first event line of a run started on this connection only: the run key
    #: that its resume and cancel present (spec/transports.md §2.6).
    run_key: str | None = None


_LINE_DECODER: Final = msgspec.json.Decoder(ServerLine)


#: Placeholders rendered into a run's line template (``@`` is never escaped in JSON text and
#: a Raw value is copied as is); the template is checked against ServerLine once per run.
_SEQ_MARK: Final = b"@@seq@@"
_EVENT_MARK: Final = b"@@event@@"


class EventLines:
    """Writes the event lines of one run: ``ServerLine(id="<run_id>:<seq>", event=<payload>)``,
    the payload being the event's already-encoded bytes (copied, not re-encoded).

    The line is rendered once from :class:`ServerLine` with placeholders and reused as a
    ``%`` template, so the shape has one definition and each event costs one bytes
    formatting, not a Struct encode (the server writes every event of every run through
    here). The template is checked once against a real ServerLine encoding; a run id for
    which it would differ (none known) falls back to encoding each ServerLine."""

    __slots__ = ("_run_id", "_template")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        marked = ServerLine(id=f"{run_id}:{_SEQ_MARK.decode()}", event=msgspec.Raw(_EVENT_MARK))
        rendered = _ENCODER.encode(marked)
        head, _, rest = rendered.rpartition(_SEQ_MARK)
        middle, _, tail = rest.partition(_EVENT_MARK)
        head, middle, tail = (part.replace(b"%", b"%%") for part in (head, middle, tail))  # literal % in a run id
        template = head + b"%d" + middle + b"%b" + tail
        probe = b'{"type":"RUN_STARTED"}'
        self._template: bytes | None = template if template % (7, probe) == self._encode(7, probe) else None

    def _encode(self, seq: int, payload: bytes) -> bytes:
        return _ENCODER.encode(ServerLine(id=f"{self._run_id}:{seq}", event=msgspec.Raw(payload)))

    def __call__(self, first_seq: int, payloads: list[bytes]) -> list[bytes]:
        """The lines of ``payloads`` numbered from ``first_seq``. Changes no state."""
        template = self._template
        if template is None:
            return [self._encode(first_seq + i, payload) for i, payload in enumerate(payloads)]
        return [template % (first_seq + i, payload) for i, payload in enumerate(payloads)]


def keyed_event_line(run_id: str, seq: int, payload: bytes, run_key: str) -> bytes:
    """The event line of event ``seq`` carrying the run's ``runKey`` as well (the first
    line a client that started the run gets)."""
    return _ENCODER.encode(ServerLine(id=f"{run_id}:{seq}", event=msgspec.Raw(payload), run_key=run_key))


def error_line(
    exc: AguiEngineError,
    run_id: str | None = None,
    *,
    status: bool = True,
    line: int | None = None,
    query_id: str | None = None,
) -> bytes:
    """The error line for ``exc``: its code and message, its WebSocket status unless
    ``status`` is False (stdio), the ``run_id`` / ``query_id`` it belongs to, the input
    ``line`` it answers, and the JSON ``path`` of invalid params, when given."""
    path = getattr(exc, "path", None)
    body = ErrorBody(
        code=exc.code,
        message=exc.message,
        status=exc.ws_close_code if status else None,
        path=path if isinstance(path, str) else None,
    )
    return _ENCODER.encode(ServerLine(run_id=run_id, error=body, line=line, query_id=query_id))


def query_result_line(query_id: str, data: bytes) -> bytes:
    """The answer line of a query: ``{"queryId": ..., "result": <data>}`` (``data``:
    the already-encoded JSON, copied as is)."""
    return _ENCODER.encode(ServerLine(query_id=query_id, result=msgspec.Raw(data)))


def capabilities_line(capabilities: AgentCapabilities) -> bytes:
    """The answer line of a ``capabilities`` message: ``{"capabilities": {...}}``."""
    return _ENCODER.encode(ServerLine(capabilities=msgspec.Raw(encode_capabilities(capabilities))))


class ProtocolLine(NamedTuple):
    """One decoded server line, as a client agent uses it."""

    #: ``<runId>:<seq>`` of an enveloped event, else None.
    event_id: str | None
    #: The event (enveloped or bare), else None.
    event: AnyEvent | None
    #: The error line's body, else None.
    error: ErrorBody | None
    #: The ``runId`` an error line names (None: it names no run).
    run_id: str | None
    #: The run key an event line carries (the first line of a run started by this client).
    run_key: str | None = None


def decode_protocol_line(
    line: bytes, *, where: str, legacy: LegacyThinkingMapper | None = None, tolerant: bool = False
) -> ProtocolLine:
    """Decode one server line of the WebSocket or stdio protocol (:class:`ServerLine`).
    The event is decoded straight from its bytes (no re-encoding), ``THINKING_*`` mapped
    when ``legacy`` is given. Raises RemoteInputError naming ``where`` (not JSON, no
    known shape) and the codec's EventDecodeError (not a valid event)."""
    try:
        head = _LINE_DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RemoteInputError(f"{where}: not a protocol line ({exc})", code="malformed_json") from None
    if head.type is not None:
        return ProtocolLine(None, decode_event(line, legacy=legacy, tolerant=tolerant), None, None)
    if len(head.event) and head.id is not None:
        event = decode_event(bytes(head.event), legacy=legacy, tolerant=tolerant)
        return ProtocolLine(head.id, event, None, None, head.run_key)
    if head.query_id is not None or len(head.capabilities):
        # the answer to a data query or a capabilities message (read by WebSocketAgent.query /
        # .capabilities themselves): no run's business
        return ProtocolLine(None, None, None, None)
    if head.error is not None:
        return ProtocolLine(None, None, head.error, head.run_id)
    raise RemoteInputError(
        f"{where}: a line must be an event, an {{\"id\", \"event\"}} envelope or an error line", code="bad_line"
    )
