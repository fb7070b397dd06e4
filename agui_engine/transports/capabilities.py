"""What a server answers when asked for its agent's capabilities, and how a client reads it.

Theory of operation
-------------------
Every server serves one document, the same on every transport: the served agent's own
capabilities (:func:`~agui_engine.protocol.agent.agent_capabilities`: what its
``capabilities()`` returns -- a remote agent's are asked of its server, through the agent
loop it is served in -- or nothing declared) with ``transport`` replaced by what *this*
server speaks (:func:`served_capabilities`): a client talks to this server, not to whatever
is behind it, so a proxy's remote transport never shows through, while everything else does.

=================  =========  ==========  ===========  =========
server             streaming  websocket   httpBinary   resumable
=================  =========  ==========  ===========  =========
SSE (HTTP)         true       (mounted)   true         true
WebSocket          false      true        false        true
stdio              false      false       false        false
=================  =========  ==========  ===========  =========

(``pushNotifications`` is always false: no server here calls webhooks.) The SSE server
answers ``GET <path>/capabilities``; the WebSocket and stdio servers answer the
``{"type": "capabilities"}`` message with a ``{"capabilities": {...}}`` line
(``transports/envelope.py``, ``spec/transports.md`` §11).

An agent whose ``capabilities()`` fails answers with the error, never a 500 with a
traceback: a remote's refusal or unreachability is the remote's (502), a document from the
remote that does not decode too (502, ``invalid_capabilities``), so is an agent that does not
answer within :data:`CAPABILITIES_TIMEOUT_SECONDS` (502, ``capabilities_timeout``); an agent that breaks the
contract is the server's own misconfiguration (500 ``usage_error``). Clients read a document
with :func:`read_capabilities`: at most :data:`MAX_CAPABILITIES_BYTES`, nested at most
``MAX_INPUT_DEPTH`` deep, then decoded (a bad one is a ``CapabilitiesDecodeError`` naming
where and the JSON path).
"""

from __future__ import annotations

import asyncio
from typing import Final

import msgspec

from agui_engine.protocol.agent import agent_capabilities
from agui_engine.protocol.capabilities import AgentCapabilities, TransportCapabilities, decode_capabilities
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError, RemoteInputError, UpstreamError

from .envelope import ServerLine
from .input_decoding import check_input_depth
from .retrying_client import remote_error_from_line

__all__ = [
    "CAPABILITIES_TIMEOUT_SECONDS",
    "MAX_CAPABILITIES_BYTES",
    "STDIO_TRANSPORT",
    "UNKNOWN_MESSAGE_CODES",
    "WEBSOCKET_TRANSPORT",
    "capabilities_answer",
    "read_capabilities",
    "served_capabilities",
    "sse_transport",
]

#: Seconds a client (``SSEAgent`` / ``WebSocketAgent`` / ``StdioAgent.capabilities()``) waits
#: for the answer, connecting included, and a server for its agent's ``capabilities()``. The document is built from configuration (or, on a
#: proxy, one more such request upstream), so an answer takes milliseconds; 10 s covers a
#: proxy chain and a slow TLS handshake while a hung server fails the caller in bounded time.
CAPABILITIES_TIMEOUT_SECONDS: Final = 10.0

#: Largest capabilities document a client reads. The document lists the agent's tools with
#: their JSON Schemas: the demo agent's (3 tools, 4.4 KiB; 6.3 KiB with render_ui); 4 MiB
#: holds hundreds of large schemas while bounding what a hostile server can make us hold.
MAX_CAPABILITIES_BYTES: Final = 4 * 1024 * 1024

#: What the WebSocket server speaks (runs and resume over one connection; no SSE, no protobuf).
WEBSOCKET_TRANSPORT: Final = TransportCapabilities(
    streaming=False, websocket=True, http_binary=False, push_notifications=False, resumable=True
)

#: What the stdio server speaks: lines on a pipe, no resume (a run lives as long as the pipe).
STDIO_TRANSPORT: Final = TransportCapabilities(
    streaming=False, websocket=False, http_binary=False, push_notifications=False, resumable=False
)


#: The error codes with which a WebSocket or stdio server that does not know the
#: ``capabilities`` message refuses it: ``bad_input`` (a message of no known shape),
#: ``invalid_input`` (an older stdio server reads a line of no known ``type`` as a
#: RunAgentInput). A client takes them as "declares nothing", as a 404 over HTTP.
UNKNOWN_MESSAGE_CODES: Final = frozenset({"bad_input", "invalid_input"})

_LINE_DECODER: Final = msgspec.json.Decoder(ServerLine)


def sse_transport(*, websocket: bool = False) -> TransportCapabilities:
    """What the SSE server speaks: SSE (and NDJSON), the protobuf encoding
    (``application/vnd.ag-ui.event+proto``), resume with ``Last-Event-ID``; ``websocket``
    when a WebSocket server serves the same runs beside it."""
    return TransportCapabilities(
        streaming=True, websocket=websocket, http_binary=True, push_notifications=False, resumable=True
    )


async def served_capabilities(
    agent: object, transport: TransportCapabilities, *, timeout: float = CAPABILITIES_TIMEOUT_SECONDS
) -> AgentCapabilities:
    """``agent``'s capabilities with ``transport`` in place of whatever it declared.

    Raises AguiEngineError only: the agent's own errors as they are (a remote's refusal,
    UsageError for an agent that breaks the contract), a RemoteInputError from the agent (a
    remote's document that does not decode) as an UpstreamError with its code and message
    (502: the remote is at fault, not our client), an agent that has not answered within
    ``timeout`` seconds as an UpstreamError ``capabilities_timeout`` (it is cancelled), any
    other exception as an internal error naming its type."""
    try:
        async with asyncio.timeout(timeout):
            capabilities = await agent_capabilities(agent)
    except TimeoutError:
        raise UpstreamError(
            f"the agent's capabilities() did not return within {timeout:g} s", code="capabilities_timeout"
        ) from None
    except RemoteInputError as exc:
        raise UpstreamError(f"the agent's capabilities: {exc.message}", code=exc.code) from None
    except AguiEngineError:
        raise
    except Exception as exc:  # noqa: BLE001 - an agent's bug is an error answer, never a traceback to the client
        raise AguiEngineError(f"the agent's capabilities() raised {type(exc).__name__}") from exc
    return msgspec.structs.replace(capabilities, transport=transport)


def read_capabilities(data: bytes, *, where: str) -> AgentCapabilities:
    """Decode a capabilities document a server sent. Raises LimitExceededError
    (``capabilities_too_large``) past :data:`MAX_CAPABILITIES_BYTES`, InputTooDeepError past
    ``MAX_INPUT_DEPTH``, CapabilitiesDecodeError for anything but an AgentCapabilities;
    ``where`` names the source in each."""
    if len(data) > MAX_CAPABILITIES_BYTES:
        raise LimitExceededError(
            f"{where}: the capabilities document is over {MAX_CAPABILITIES_BYTES} bytes", code="capabilities_too_large"
        )
    check_input_depth(data, where=f"{where}: the capabilities document")
    return decode_capabilities(data, where=where)


def capabilities_answer(line: bytes, *, where: str) -> AgentCapabilities | None:
    """What one WebSocket / stdio server line says to a ``capabilities`` message: the
    document of a ``{"capabilities": ...}`` line (:func:`read_capabilities`),
    ``AgentCapabilities()`` for a refusal with one of :data:`UNKNOWN_MESSAGE_CODES`, None for
    any other line (an event, another run's error). Raises RemoteAgentError for any other
    error line that names no run and no query, RemoteInputError (``malformed_json``) for a
    line that is not a protocol line, and what :func:`read_capabilities` raises."""
    try:
        head = _LINE_DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RemoteInputError(f"{where}: not a protocol line ({exc})", code="malformed_json") from None
    if len(head.capabilities):
        return read_capabilities(bytes(head.capabilities), where=where)
    if head.error is not None and head.run_id is None and head.query_id is None:
        if head.error.code in UNKNOWN_MESSAGE_CODES:
            return AgentCapabilities()
        raise remote_error_from_line(head.error, where=where)
    return None
