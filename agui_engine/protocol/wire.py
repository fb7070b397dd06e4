"""AG-UI wire versions: the 1.0 wire and the 0.0.5x wire that deployed front ends still pin.

Theory of operation
-------------------
CopilotKit 1.74 (``@copilotkit/react-core``, ``@copilotkit/runtime`` 1.75) and assistant-ui's
``@assistant-ui/react-ag-ui`` 0.0.58 pin ``@ag-ui/client`` / ``@ag-ui/core`` **0.0.59**, whose
zod schemas reject a few shapes that AG-UI 1.0 made valid (its ``HttpAgent`` throws, and the
run ends in an error on the page). A 1.x client says what it speaks: ``@ag-ui/client`` 1.0 puts
``protocolVersion: "1.0"`` in every ``RunAgentInput`` it sends (``prepareRunAgentInput``); a
0.0.5x client sends no ``protocolVersion``. So a server picks the wire per run
(:func:`wire_for`): ``"1"`` for an input declaring a 1.x version, ``"0"`` for one declaring
none (or a 0.x version), unless configured to one of them (``serve --wire 0|1|auto``).

:func:`to_wire0` turns one encoded 1.0 event (the JSON payload a transport frames) into one
that ``@ag-ui/core`` 0.0.59 accepts. What 0.x cannot carry in its own field is kept under the
event's (or message's) ``metadata["ag-ui"]`` (``metadata`` is an open record in 0.0.59 too),
so nothing is lost, only moved:

=====================================  ===========================================================
1.0 shape (0.0.59 rejects it)          on the 0.x wire
=====================================  ===========================================================
``RUN_FINISHED.outcome``               ``outcome: {type: "success"}``; the 1.0 outcome in
``{type: "success", pendingToolCallIds}``  ``metadata["ag-ui"].outcome``
``RUN_FINISHED.outcome``               no ``outcome`` (0.x: success); the 1.0 outcome in
``{type: "cancelled"}``                ``metadata["ag-ui"].outcome``
``TOOL_CALL_RESULT.content`` parts     the parts' text joined (``contentToText``); the parts in
                                       ``metadata["ag-ui"].content`` when any is not text
a ``tool`` message's content parts     the same, on the message (``MESSAGES_SNAPSHOT``,
                                       ``RUN_STARTED.input.messages``)
a part with a ``file`` source          the 0.x ``binary`` part ``{mimeType, id}`` (filename from
                                       ``metadata.filename``), the inverse of the upgrade a
                                       server applies to a 0.x ``binary`` part it receives
``RUN_STARTED.input`` without          ``tools: []`` / ``context: []`` (0.0.59 requires both
``tools`` / ``context``                lists; 1.0 makes an absent list an empty one)
``REASONING_MESSAGE_START``            ``role: "reasoning"`` added (0.0.59 requires it)
without ``role``
=====================================  ===========================================================

Every other event passes unchanged, byte for byte (the fast path reads only the type at the
head of the payload). ``spec/wire-versions.md`` holds the table with the schema lines it comes
from and the tests that check it against the real 0.0.59 package.

Nothing here does IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, cast, get_args

import msgspec

from .errors import UsageError

__all__ = [
    "WIRE0_CHANGED_TYPES",
    "WIRE_CHOICES",
    "WIRE_METADATA_KEY",
    "Wire",
    "WireChoice",
    "check_wire_choice",
    "declares_1x",
    "event_to_wire0",
    "to_wire0",
    "wire_for",
    "wire_translator",
]

#: A wire a server writes: ``"1"`` (AG-UI 1.0) or ``"0"`` (what ``@ag-ui/core`` 0.0.5x accepts).
Wire = Literal["0", "1"]
#: What a server is configured with: a fixed wire, or ``"auto"`` (by the input's ``protocolVersion``).
WireChoice = Literal["0", "1", "auto"]
#: The accepted values of a :data:`WireChoice` (``serve --wire``).
WIRE_CHOICES: Final[tuple[str, ...]] = get_args(WireChoice)

#: The metadata key under which the 0.x wire keeps what 0.x has no field for (AG-UI's own
#: reserved key: ``@ag-ui/core``'s ``AGUI_METADATA_KEY``).
WIRE_METADATA_KEY: Final = "ag-ui"

#: The event types :func:`to_wire0` may change; every other type passes unchanged.
WIRE0_CHANGED_TYPES: Final[frozenset[str]] = frozenset(
    {"MESSAGES_SNAPSHOT", "REASONING_MESSAGE_START", "RUN_FINISHED", "RUN_STARTED", "TOOL_CALL_RESULT"}
)

_TYPE_HEAD: Final = b'{"type":"'
_CHANGED_HEADS: Final = tuple(_TYPE_HEAD + kind.encode() + b'"' for kind in sorted(WIRE0_CHANGED_TYPES))
_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def check_wire_choice(value: str, where: str) -> WireChoice:
    """``value`` as a :data:`WireChoice`; UsageError naming ``where`` otherwise."""
    if value not in WIRE_CHOICES:
        raise UsageError(f"{where}: wire must be one of {', '.join(WIRE_CHOICES)}, got {value!r}")
    return cast(WireChoice, value)


def declares_1x(protocol_version: str | None) -> bool:
    """Whether a ``RunAgentInput.protocolVersion`` declares AG-UI 1.x or later (``"1.0"``,
    ``"1.1"``, ``"2"``); ``None``, ``"0.x"`` and anything without a leading number do not."""
    if not protocol_version:
        return False
    major = protocol_version.split(".", 1)[0].strip()
    return major.isdigit() and int(major) >= 1


def wire_for(choice: WireChoice, protocol_version: str | None) -> Wire:
    """The wire a run is written in: ``choice`` when fixed, else by what the input declares."""
    if choice != "auto":
        return choice
    return "1" if declares_1x(protocol_version) else "0"


def wire_translator(wire: Wire) -> Callable[[bytes], bytes] | None:
    """What a transport applies to each encoded event for ``wire`` (None: nothing to do)."""
    return to_wire0 if wire == "0" else None


def to_wire0(payload: bytes) -> bytes:
    """One encoded AG-UI 1.0 event (compact JSON, as the codec writes it) as the 0.x wire
    carries it (see the module's table). Returns ``payload`` itself when nothing changes."""
    if payload.startswith(_TYPE_HEAD) and not payload.startswith(_CHANGED_HEADS):
        return payload  # the fast path: one C-level prefix test (the codec writes the type first)
    try:
        obj = _decoder.decode(payload)
    except msgspec.DecodeError:
        return payload  # not ours to judge: the codec wrote it, the client will say
    if not isinstance(obj, dict):
        return payload
    changed = event_to_wire0(obj)
    return payload if changed is obj else _encoder.encode(changed)


def event_to_wire0(event: dict[str, Any]) -> dict[str, Any]:
    """The 0.x form of one 1.0 event (a JSON object); ``event`` itself when nothing changes
    (it is never modified: a changed event is a new dict)."""
    kind = event.get("type")
    if kind == "RUN_FINISHED":
        return _run_finished(event)
    if kind == "TOOL_CALL_RESULT":
        content = event.get("content")
        if isinstance(content, list):
            return _flatten_content(event, content)
        return event
    if kind == "MESSAGES_SNAPSHOT":
        messages = event.get("messages")
        if isinstance(messages, list):
            new = _messages(messages)
            if new is not messages:
                return {**event, "messages": new}
        return event
    if kind == "RUN_STARTED":
        return _run_started(event)
    if kind == "REASONING_MESSAGE_START" and "role" not in event:
        return {**event, "role": "reasoning"}
    return event


def _with_meta(obj: dict[str, Any], **kept: Any) -> dict[str, Any]:
    """``obj`` with ``kept`` merged into ``metadata["ag-ui"]`` (a new dict)."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    ours = meta.get(WIRE_METADATA_KEY)
    meta[WIRE_METADATA_KEY] = {**(ours if isinstance(ours, dict) else {}), **kept}
    return {**obj, "metadata": meta}


def _run_finished(event: dict[str, Any]) -> dict[str, Any]:
    outcome = event.get("outcome")
    if not isinstance(outcome, dict):
        return event
    kind = outcome.get("type")
    if kind == "success" and set(outcome) != {"type"}:
        return _with_meta({**event, "outcome": {"type": "success"}}, outcome=outcome)
    if kind == "interrupt" and set(outcome) - {"type", "interrupts"}:
        # 0.0.59's interrupt outcome is .strict() too: only its two keys
        return _with_meta({**event, "outcome": {"type": "interrupt", "interrupts": outcome.get("interrupts")}},
                          outcome=outcome)
    if kind not in ("success", "interrupt"):
        rest = {k: v for k, v in event.items() if k != "outcome"}
        return _with_meta(rest, outcome=outcome)
    return event


def _text_of(parts: list[Any]) -> str:
    """``@ag-ui/core``'s ``contentToText``: the text parts' text, joined."""
    return "".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                   and isinstance(p.get("text"), str))


def _flatten_content(obj: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    flat = {**obj, "content": _text_of(parts)}
    if any(not (isinstance(p, dict) and p.get("type") == "text") for p in parts):
        return _with_meta(flat, content=parts)
    return flat


def _binary_part(part: dict[str, Any]) -> dict[str, Any]:
    """A part with a ``file`` source as the 0.x ``binary`` part naming the file by id."""
    source = part["source"]
    binary: dict[str, Any] = {"type": "binary", "mimeType": source.get("mimeType") or "application/octet-stream",
                              "id": source.get("value", "")}
    meta = part.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("filename"), str):
        binary["filename"] = meta["filename"]
    return binary


def _is_file_part(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("source"), dict) and part["source"].get("type") == "file"


def _message(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if not isinstance(content, list):
        return message
    role = message.get("role")
    if role == "tool":
        return _flatten_content(message, content)
    if role == "user" and any(_is_file_part(p) for p in content):
        return {**message, "content": [_binary_part(p) if _is_file_part(p) else p for p in content]}
    return message


def _messages(messages: list[Any]) -> list[Any]:
    """``messages`` with each message in its 0.x form; the same list when none changes."""
    new = [_message(m) for m in messages]
    return messages if all(a is b for a, b in zip(new, messages)) else new


def _run_started(event: dict[str, Any]) -> dict[str, Any]:
    run_input = event.get("input")
    if not isinstance(run_input, dict):
        return event
    fixed = dict(run_input)
    fixed.setdefault("tools", [])
    fixed.setdefault("context", [])
    messages = fixed.get("messages")
    if isinstance(messages, list):
        fixed["messages"] = _messages(messages)
    if fixed == run_input and all(fixed[k] is run_input.get(k) for k in fixed):
        return event
    return {**event, "input": fixed}
