"""AG-UI agent capabilities: what an agent declares it supports, as msgspec Structs.

Theory of operation
-------------------
Each type is the official Python SDK's (``ag_ui.core.capabilities``, AG-UI 1.0), field for
field and in the same order, written the way :mod:`agui_engine.protocol.events` writes the
events: frozen, keyword-only Structs, snake_case attributes and camelCase wire names
(``rename="camel"``: ``humanInTheLoop``, ``httpBinary``, ``documentationUrl``), every field
optional and omitted from the wire when unset (``omit_defaults=True``). An omitted field means
*not declared* (unknown), never *unsupported*: an agent that lacks a capability says
``False``.

:class:`AgentCapabilities` is the document; ``tools.items`` are the events module's
:class:`~agui_engine.protocol.events.Tool` values, ``identity.metadata`` a
:data:`~agui_engine.protocol.events.Metadata` object, ``custom`` any JSON object.
:func:`decode_capabilities` reads one from JSON text (msgspec-strict: a ``"true"`` is not a
bool; ``maxIterations`` / ``maxExecutionTime`` are integers in ``0..2**53-1``, the SDK's bounds;
unknown members are dropped, as for events) and raises :class:`CapabilitiesDecodeError` with the
JSON path. :func:`encode_capabilities` writes one. :func:`merge_capabilities` lays one
document over another, category by category (what an agent loop adds to its inner agent's,
what a server adds to its agent's).

Nothing here does IO; the servers serve the document (``GET <path>/capabilities``, the
``capabilities`` message of the WebSocket and stdio protocols: ``spec/transports.md`` §11).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

from .errors import RemoteInputError
from .events import MAX_SAFE_INTEGER, Metadata, Tool

__all__ = [
    "AgentCapabilities",
    "CapabilitiesDecodeError",
    "ExecutionCapabilities",
    "HumanInTheLoopCapabilities",
    "IdentityCapabilities",
    "MultiAgentCapabilities",
    "MultimodalCapabilities",
    "MultimodalInputCapabilities",
    "MultimodalOutputCapabilities",
    "OutputCapabilities",
    "ReasoningCapabilities",
    "StateCapabilities",
    "SubagentInfo",
    "ToolsCapabilities",
    "TransportCapabilities",
    "decode_capabilities",
    "encode_capabilities",
    "merge_capabilities",
]

_NonNegative = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]


class _Caps(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The options every capability Struct shares."""


class SubagentInfo(_Caps, frozen=True, kw_only=True):
    """A subagent a parent agent can invoke."""

    name: str
    description: str | None = None


class IdentityCapabilities(_Caps, frozen=True, kw_only=True):
    """Who the agent is: name, framework (``type``), description, version, provider."""

    name: str | None = None
    type: str | None = None
    description: str | None = None
    version: str | None = None
    provider: str | None = None
    documentation_url: str | None = None
    metadata: Metadata | None = None


class TransportCapabilities(_Caps, frozen=True, kw_only=True):
    """How the agent can be reached: SSE streaming, WebSocket, the protobuf encoding over
    HTTP (``httpBinary``), webhooks after a run, resume by sequence number."""

    streaming: bool | None = None
    websocket: bool | None = None
    http_binary: bool | None = None
    push_notifications: bool | None = None
    resumable: bool | None = None


class ToolsCapabilities(_Caps, frozen=True, kw_only=True):
    """Tool calling: whether at all, the agent's own tools (``items``), parallel calls,
    whether tools a client passes in ``RunAgentInput.tools`` are used."""

    supported: bool | None = None
    items: list[Tool] | None = None
    parallel_calls: bool | None = None
    client_provided: bool | None = None


class OutputCapabilities(_Caps, frozen=True, kw_only=True):
    """Output formats: structured (JSON Schema) output, the MIME types produced."""

    structured_output: bool | None = None
    supported_mime_types: list[str] | None = None


class StateCapabilities(_Caps, frozen=True, kw_only=True):
    """Shared state: ``STATE_SNAPSHOT`` / ``STATE_DELTA`` events, long-term memory, state kept
    across the runs of a thread."""

    snapshots: bool | None = None
    deltas: bool | None = None
    memory: bool | None = None
    persistent_state: bool | None = None


class MultiAgentCapabilities(_Caps, frozen=True, kw_only=True):
    """Coordination with other agents: delegation, handoffs, the subagents it can invoke."""

    supported: bool | None = None
    delegation: bool | None = None
    handoffs: bool | None = None
    subagents: list[SubagentInfo] | None = None


class ReasoningCapabilities(_Caps, frozen=True, kw_only=True):
    """Reasoning visible to the client: at all, streamed, as opaque encrypted values."""

    supported: bool | None = None
    streaming: bool | None = None
    encrypted: bool | None = None


class MultimodalInputCapabilities(_Caps, frozen=True, kw_only=True):
    """Input modalities the agent accepts."""

    image: bool | None = None
    audio: bool | None = None
    video: bool | None = None
    pdf: bool | None = None
    file: bool | None = None


class MultimodalOutputCapabilities(_Caps, frozen=True, kw_only=True):
    """Output modalities the agent produces."""

    image: bool | None = None
    audio: bool | None = None


class MultimodalCapabilities(_Caps, frozen=True, kw_only=True):
    """Multimodal input and output."""

    input: MultimodalInputCapabilities | None = None
    output: MultimodalOutputCapabilities | None = None


class ExecutionCapabilities(_Caps, frozen=True, kw_only=True):
    """Execution limits: code execution (sandboxed), iterations per run, wall-clock
    milliseconds per run."""

    code_execution: bool | None = None
    sandboxed: bool | None = None
    max_iterations: _NonNegative | None = None
    max_execution_time: _NonNegative | None = None


class HumanInTheLoopCapabilities(_Caps, frozen=True, kw_only=True):
    """Human input during a run: approvals, interventions, feedback, the AG-UI interrupt
    protocol (``RUN_FINISHED`` with an interrupt outcome, answers in ``RunAgentInput.resume``),
    edited arguments in those answers."""

    supported: bool | None = None
    approvals: bool | None = None
    interventions: bool | None = None
    feedback: bool | None = None
    interrupts: bool | None = None
    approve_with_edits: bool | None = None


class AgentCapabilities(_Caps, frozen=True, kw_only=True):
    """An agent's capabilities, by category; ``custom``: integration-specific ones."""

    identity: IdentityCapabilities | None = None
    transport: TransportCapabilities | None = None
    tools: ToolsCapabilities | None = None
    output: OutputCapabilities | None = None
    state: StateCapabilities | None = None
    multi_agent: MultiAgentCapabilities | None = None
    reasoning: ReasoningCapabilities | None = None
    multimodal: MultimodalCapabilities | None = None
    execution: ExecutionCapabilities | None = None
    human_in_the_loop: HumanInTheLoopCapabilities | None = None
    custom: dict[str, Any] | None = None


class CapabilitiesDecodeError(RemoteInputError):
    """A capabilities document that is not JSON, or not an ``AgentCapabilities`` (the message
    says where: msgspec's JSON path, ``at $.tools.items[0].name``)."""

    default_code = "invalid_capabilities"


_DECODER: Final = msgspec.json.Decoder(AgentCapabilities)
_ENCODER: Final = msgspec.json.Encoder()


def encode_capabilities(capabilities: AgentCapabilities) -> bytes:
    """``capabilities`` as compact JSON (unset fields omitted)."""
    return _ENCODER.encode(capabilities)


def decode_capabilities(data: bytes | str, *, where: str = "the capabilities") -> AgentCapabilities:
    """Decode one ``AgentCapabilities`` document. ``where`` names its source in the error.

    Raises CapabilitiesDecodeError (malformed JSON, or a member of the wrong type, with its
    JSON path). The caller bounds the size and depth of ``data`` (it read it)."""
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if " - at `" not in text:  # the document itself: msgspec names no path for the root
            text += " - at `$`"
        raise CapabilitiesDecodeError(f"{where}: not an AgentCapabilities document: {text}") from None
    except msgspec.DecodeError as exc:
        raise CapabilitiesDecodeError(f"{where}: not JSON: {exc}") from None


def merge_capabilities(base: AgentCapabilities, over: AgentCapabilities) -> AgentCapabilities:
    """``base`` with ``over`` laid on it, field by field: within each category a field
    ``over`` sets replaces ``base``'s (``tools.items``: ``over``'s tools are added after
    ``base``'s, one of the same name replacing it); ``custom`` is merged by key. Changes
    neither argument."""
    changes: dict[str, Any] = {}
    for name in AgentCapabilities.__struct_fields__:
        mine, theirs = getattr(base, name), getattr(over, name)
        if theirs is None:
            continue
        if mine is None:
            changes[name] = theirs
        elif name == "custom":
            changes[name] = {**mine, **theirs}
        else:
            changes[name] = _merge_category(mine, theirs)
    return msgspec.structs.replace(base, **changes) if changes else base


def _merge_category(mine: Any, theirs: Any) -> Any:
    changes: dict[str, Any] = {}
    for name in mine.__struct_fields__:
        value = getattr(theirs, name)
        if value is None:
            continue
        if name == "items" and isinstance(mine, ToolsCapabilities) and mine.items:
            names = {tool.name for tool in value}
            value = [tool for tool in mine.items if tool.name not in names] + list(value)
        elif isinstance(value, msgspec.Struct) and getattr(mine, name) is not None:
            value = _merge_category(getattr(mine, name), value)  # multimodal.input / .output
        changes[name] = value
    return msgspec.structs.replace(mine, **changes)
