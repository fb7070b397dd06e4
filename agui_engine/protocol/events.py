"""The AG-UI 1.0 event model: every event, message, content part and run type as a msgspec Struct.

Theory of operation
-------------------
Each AG-UI 1.0 type is a frozen, keyword-only :class:`msgspec.Struct` named exactly as in the
official Python SDK (``ag_ui.core``): ``RunStartedEvent``, ``TextMessageContentEvent``, ...

* **Attribute names** are snake_case (``message_id``), **wire names** camelCase (``messageId``)
  through ``rename="camel"``; the one exception is the JSON Patch ``from`` member, spelled
  ``from_`` in Python (as in the SDK).
* **Events are tagged on ``type``** (``tag_field="type"``, ``tag="RUN_STARTED"``), so
  :data:`Event` is a msgspec tagged union that decodes in one pass with no trial-and-error.
  Messages are tagged on ``role`` (:data:`Message`), content parts, media sources and run
  outcomes on ``type``, patch operations on ``op``. A tag is always written on output.
* **Optional fields are omitted when unset** (``omit_defaults=True``): an optional field whose
  value is its default (``None`` for most of them, ``[]`` for ``RunAgentInput.tools`` /
  ``context``) never reaches the wire, exactly as the SDK leaves it out. Required fields are
  always written, even when their value is ``null`` (``CustomEvent.value``,
  ``RawEvent.event``, ``StateSnapshotEvent.snapshot``, a patch ``value``).
  ``ReasoningMessageStartEvent.role`` is required on the wire (the TypeScript schema demands
  it) but defaulted in Python; a factory default keeps msgspec from treating it as omittable.
* **Field order on the wire** follows the SDK: ``type, timestamp, rawEvent, metadata,
  subagentRunId, <event fields>`` (every subclass repeats ``kw_only=True`` so msgspec keeps
  declaration order along the inheritance chain).
* **Validation** happens when decoding (:mod:`agui_engine.protocol.codec`), not in constructors:
  msgspec is strict (``"123"`` is not an int, ``1.5`` is not a timestamp), ``timestamp`` and
  token counts are bounded to the integers JSON round-trips exactly, JSON Pointers must match
  RFC 6901, an interrupt outcome needs at least one interrupt. Unknown *fields* are dropped
  on decode (the AG-UI 1.1 processing rule strips them); unknown *event types* are an error
  unless the codec runs in tolerant mode, where they become :class:`UnknownEvent`.
* This module has no clock and makes no ids: ``timestamp`` is an optional int the caller sets,
  and every id comes from the caller.

Nothing here does IO.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, NoReturn, Union

import msgspec

if TYPE_CHECKING:  # pragma: no cover
    from .errors import AguiEngineError

__all__ = [
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "AddOperation",
    "AnyEvent",
    "AssistantMessage",
    "AudioInputContent",
    "AudioPart",
    "BaseEvent",
    "BinaryInputContent",
    "ContentPart",
    "Context",
    "CopyOperation",
    "CustomEvent",
    "DataSource",
    "DeveloperMessage",
    "DocumentInputContent",
    "DocumentPart",
    "EVENT_CLASSES",
    "Event",
    "EventType",
    "FileSource",
    "FunctionCall",
    "ImageInputContent",
    "ImagePart",
    "InputContent",
    "Interrupt",
    "JsonPatch",
    "JsonPatchOperation",
    "MAX_SAFE_INTEGER",
    "Message",
    "MessagesSnapshotEvent",
    "Metadata",
    "MoveOperation",
    "PROTOCOL_VERSION",
    "PartSource",
    "RawEvent",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "RemoveOperation",
    "ReplaceOperation",
    "ResumeEntry",
    "Role",
    "RunAgentInput",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedOutcome",
    "RunFinishedSuccessOutcome",
    "RunStartedEvent",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedOutcome",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentStartedEvent",
    "SystemMessage",
    "TestOperation",
    "TextInputContent",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageRole",
    "TextMessageStartEvent",
    "TextPart",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "UnknownEvent",
    "UrlSource",
    "UserMessage",
    "VideoInputContent",
    "VideoPart",
    "upgrade_binary_part",
]

#: The AG-UI protocol version this model implements (``ag_ui.core.PROTOCOL_VERSION``).
PROTOCOL_VERSION: Final = "1.0"

#: 2**53 - 1: the largest integer a JSON number survives a round trip through an IEEE double
#: (JavaScript's ``Number.MAX_SAFE_INTEGER``). The 1.0 schema bounds ``timestamp`` and token
#: counts to it so that the value a consumer reads is the value the producer wrote.
MAX_SAFE_INTEGER: Final = 9007199254740991

#: RFC 6901 JSON Pointer, as the 1.0 schema (and the Python SDK) constrain patch paths.
_JSON_POINTER_PATTERN: Final = r"^(/([^/~]|~[01])*)*$"

_Timestamp = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
_TokenCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
_JsonPointer = Annotated[str, msgspec.Meta(pattern=_JSON_POINTER_PATTERN)]
Metadata = dict[str, Any]


class EventType(str, enum.Enum):
    """The 31 AG-UI 1.0 event types (the wire value of ``type``)."""

    TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
    TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
    TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
    TEXT_MESSAGE_CHUNK = "TEXT_MESSAGE_CHUNK"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_CALL_CHUNK = "TOOL_CALL_CHUNK"
    TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
    STATE_SNAPSHOT = "STATE_SNAPSHOT"
    STATE_DELTA = "STATE_DELTA"
    MESSAGES_SNAPSHOT = "MESSAGES_SNAPSHOT"
    ACTIVITY_SNAPSHOT = "ACTIVITY_SNAPSHOT"
    ACTIVITY_DELTA = "ACTIVITY_DELTA"
    RAW = "RAW"
    CUSTOM = "CUSTOM"
    RUN_STARTED = "RUN_STARTED"
    RUN_FINISHED = "RUN_FINISHED"
    RUN_ERROR = "RUN_ERROR"
    STEP_STARTED = "STEP_STARTED"
    STEP_FINISHED = "STEP_FINISHED"
    REASONING_START = "REASONING_START"
    REASONING_MESSAGE_START = "REASONING_MESSAGE_START"
    REASONING_MESSAGE_CONTENT = "REASONING_MESSAGE_CONTENT"
    REASONING_MESSAGE_END = "REASONING_MESSAGE_END"
    REASONING_MESSAGE_CHUNK = "REASONING_MESSAGE_CHUNK"
    REASONING_END = "REASONING_END"
    REASONING_ENCRYPTED_VALUE = "REASONING_ENCRYPTED_VALUE"
    SUBAGENT_STARTED = "SUBAGENT_STARTED"
    SUBAGENT_FINISHED = "SUBAGENT_FINISHED"
    SUBAGENT_ERROR = "SUBAGENT_ERROR"


#: Every message role.
Role = Literal["developer", "system", "assistant", "user", "tool", "activity", "reasoning"]
#: The roles a streamed text message may take (``tool`` results travel as TOOL_CALL_RESULT).
TextMessageRole = Literal["developer", "system", "assistant", "user"]


class _Model(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Base of every non-event type: frozen, keyword-only, camelCase, unset optionals omitted."""


# --------------------------------------------------------------------------------------------
# Content parts (discriminated by ``type``) and their sources
# --------------------------------------------------------------------------------------------


class TextPart(_Model, frozen=True, kw_only=True, tag_field="type", tag="text"):
    id: str | None = None
    text: str
    metadata: Any = None


class DataSource(_Model, frozen=True, kw_only=True, tag_field="type", tag="data"):
    """Inline bytes: ``value`` is base64, ``mime_type`` is required."""

    value: str
    mime_type: str


class UrlSource(_Model, frozen=True, kw_only=True, tag_field="type", tag="url"):
    value: str
    mime_type: str | None = None


class FileSource(_Model, frozen=True, kw_only=True, tag_field="type", tag="file"):
    """A handle a provider issued (an uploaded file id); opaque to the protocol."""

    value: str
    provider: str | None = None
    mime_type: str | None = None


PartSource = Union[DataSource, UrlSource, FileSource]


class ImagePart(_Model, frozen=True, kw_only=True, tag_field="type", tag="image"):
    id: str | None = None
    source: PartSource
    metadata: Any = None


class AudioPart(_Model, frozen=True, kw_only=True, tag_field="type", tag="audio"):
    id: str | None = None
    source: PartSource
    metadata: Any = None


class VideoPart(_Model, frozen=True, kw_only=True, tag_field="type", tag="video"):
    id: str | None = None
    source: PartSource
    metadata: Any = None


class DocumentPart(_Model, frozen=True, kw_only=True, tag_field="type", tag="document"):
    id: str | None = None
    source: PartSource
    metadata: Any = None


ContentPart = Union[TextPart, ImagePart, AudioPart, VideoPart, DocumentPart]


class BinaryInputContent(_Model, frozen=True, kw_only=True, tag_field="type", tag="binary"):
    """The 0.x ``binary`` content part, removed in AG-UI 1.0 and still sent by older clients
    and frameworks (pydantic-ai and ag-ui-langgraph accept it). Accepted on input only: a
    message's parts are upgraded when the message is built or decoded (:func:`upgrade_binary_part`),
    so no message ever holds one."""

    mime_type: str
    id: str | None = None
    url: str | None = None
    data: str | None = None
    filename: str | None = None


#: Media part by MIME type prefix (anything else is a document), as the TypeScript SDK maps it.
_MEDIA_BY_PREFIX: Final = (("image/", ImagePart), ("audio/", AudioPart), ("video/", VideoPart))


def upgrade_binary_part(part: BinaryInputContent) -> ContentPart:
    """The 1.0 media part for a 0.x ``binary`` part, as the TypeScript SDK's
    ``convertBinaryToNewFormat`` makes it: ``image`` / ``audio`` / ``video`` by the MIME type's
    prefix, else ``document``; source ``data`` (``data`` given) or ``url``; ``filename`` kept as
    ``metadata.filename``. An ``id``-only part (an uploaded file's id), which the SDK drops, is
    kept as a ``file`` source. Raises ValueError for a part with none of data, url, id."""
    cls = next((c for prefix, c in _MEDIA_BY_PREFIX if part.mime_type.startswith(prefix)), DocumentPart)
    source: PartSource
    if part.data:
        source = DataSource(value=part.data, mime_type=part.mime_type)
    elif part.url:
        source = UrlSource(value=part.url, mime_type=part.mime_type)
    elif part.id:
        source = FileSource(value=part.id, mime_type=part.mime_type)
    else:
        raise ValueError("a binary content part needs data, url or id")
    return cls(source=source, metadata={"filename": part.filename} if part.filename else None)


if TYPE_CHECKING:
    _PartsIn = list[ContentPart]
else:
    # What a message's content decodes from: the 1.0 parts and the 0.x binary part, which
    # __post_init__ upgrades at once (so the static type, ContentPart only, holds).
    _PartsIn = list[TextPart | ImagePart | AudioPart | VideoPart | DocumentPart | BinaryInputContent]


def _upgrade_content(message: Any) -> None:
    content = message.content
    if content.__class__ is list:
        for part in content:
            if part.__class__ is BinaryInputContent:
                upgraded = []
                for i, p in enumerate(content):
                    try:
                        upgraded.append(upgrade_binary_part(p) if p.__class__ is BinaryInputContent else p)
                    except ValueError as exc:
                        raise ValueError(f"content[{i}]: {exc}") from None
                msgspec.structs.force_setattr(message, "content", upgraded)
                return

# Aliases kept by the SDK in ``ag_ui.core.types`` for 0.x code.
TextInputContent = TextPart
ImageInputContent = ImagePart
AudioInputContent = AudioPart
VideoInputContent = VideoPart
DocumentInputContent = DocumentPart
InputContent = ContentPart

# --------------------------------------------------------------------------------------------
# JSON Patch (RFC 6902), discriminated by ``op``
# --------------------------------------------------------------------------------------------


class AddOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="add"):
    path: _JsonPointer
    value: Any


class RemoveOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="remove"):
    path: _JsonPointer


class ReplaceOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="replace"):
    path: _JsonPointer
    value: Any


class MoveOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="move"):
    from_: _JsonPointer = msgspec.field(name="from")
    path: _JsonPointer


class CopyOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="copy"):
    from_: _JsonPointer = msgspec.field(name="from")
    path: _JsonPointer


class TestOperation(_Model, frozen=True, kw_only=True, tag_field="op", tag="test"):
    __test__ = False  # not a pytest test class, whatever its name says

    path: _JsonPointer
    value: Any


JsonPatchOperation = Union[
    AddOperation, RemoveOperation, ReplaceOperation, MoveOperation, CopyOperation, TestOperation
]
JsonPatch = list[JsonPatchOperation]

# --------------------------------------------------------------------------------------------
# Messages (discriminated by ``role``)
# --------------------------------------------------------------------------------------------


class FunctionCall(_Model, frozen=True, kw_only=True):
    name: str
    #: The arguments as JSON *text* (not parsed), exactly as the model produced them.
    arguments: str


class ToolCall(_Model, frozen=True, kw_only=True, tag_field="type", tag="function"):
    id: str
    function: FunctionCall
    encrypted_value: str | None = None
    metadata: Metadata | None = None


class _Message(_Model, frozen=True, kw_only=True, tag_field="role"):
    subagent_run_id: str | None = None
    id: str


class DeveloperMessage(_Message, frozen=True, kw_only=True, tag="developer"):
    name: str | None = None
    encrypted_value: str | None = None
    metadata: Metadata | None = None
    content: str


class SystemMessage(_Message, frozen=True, kw_only=True, tag="system"):
    name: str | None = None
    encrypted_value: str | None = None
    metadata: Metadata | None = None
    content: str


class AssistantMessage(_Message, frozen=True, kw_only=True, tag="assistant"):
    name: str | None = None
    encrypted_value: str | None = None
    metadata: Metadata | None = None
    content: str | None = None
    tool_calls: list[ToolCall] | None = None


class UserMessage(_Message, frozen=True, kw_only=True, tag="user"):
    name: str | None = None
    encrypted_value: str | None = None
    metadata: Metadata | None = None
    content: str | _PartsIn

    def __post_init__(self) -> None:
        _upgrade_content(self)  # a 0.x binary part becomes its 1.0 media part


class ToolMessage(_Message, frozen=True, kw_only=True, tag="tool"):
    content: str | _PartsIn
    tool_call_id: str
    error: str | None = None
    encrypted_value: str | None = None
    metadata: Metadata | None = None

    def __post_init__(self) -> None:
        _upgrade_content(self)


class ActivityMessage(_Message, frozen=True, kw_only=True, tag="activity"):
    activity_type: str
    content: dict[str, Any]
    metadata: Metadata | None = None


class ReasoningMessage(_Message, frozen=True, kw_only=True, tag="reasoning"):
    content: str
    encrypted_value: str | None = None
    metadata: Metadata | None = None


Message = Union[
    DeveloperMessage,
    SystemMessage,
    AssistantMessage,
    UserMessage,
    ToolMessage,
    ActivityMessage,
    ReasoningMessage,
]

# --------------------------------------------------------------------------------------------
# Run input, tools, interrupts, usage, outcomes
# --------------------------------------------------------------------------------------------


class Tool(_Model, frozen=True, kw_only=True):
    name: str
    description: str
    #: JSON Schema of the arguments; opaque to the protocol.
    parameters: Any = None
    metadata: Metadata | None = None


class Context(_Model, frozen=True, kw_only=True):
    description: str
    value: str


class ResumeEntry(_Model, frozen=True, kw_only=True):
    """The answer to one interrupt, carried by the next run's ``RunAgentInput.resume``."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    metadata: Metadata | None = None


class _NotGiven(list):  # type: ignore[type-arg]
    """The empty list an absent ``RunAgentInput.tools`` / ``.context`` reads as: one shared,
    read-only instance (:data:`_NOT_GIVEN`). msgspec leaves a field out when its value *is* its
    default, so an absent list stays absent on output while a list the sender gave, ``[]``
    included, is written back: the official SDKs' behaviour (the null-omission fixture)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("RunAgentInput.tools / .context was not given: it is a read-only empty list "
                        "(build a new list, e.g. [*input.tools, tool], and msgspec.structs.replace the input)")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> _NotGiven:
        return self

    def __deepcopy__(self, memo: Any) -> _NotGiven:
        return self

    def __reduce__(self) -> str:
        return "_NOT_GIVEN"


#: The default of ``RunAgentInput.tools`` and ``.context`` (:class:`_NotGiven`).
_NOT_GIVEN: list[Any] = _NotGiven()


class RunAgentInput(_Model, frozen=True, kw_only=True):
    """What a client sends to start a run.

    ``tools`` and ``context`` are empty lists when absent (the 1.0 spec makes an absent list
    equivalent to an empty one); an absent one is left out on output, a given one is written back,
    ``[]`` included, as the official SDKs write them (an absent list is a shared read-only empty
    list: build a new list rather than append to it).
    """

    thread_id: str
    run_id: str
    protocol_version: str | None = None
    parent_run_id: str | None = None
    state: Any = None
    messages: list[Message]
    tools: list[Tool] = _NOT_GIVEN
    context: list[Context] = _NOT_GIVEN
    forwarded_props: Any = None
    resume: list[ResumeEntry] | None = None


class Interrupt(_Model, frozen=True, kw_only=True):
    subagent_run_id: str | None = None
    id: str
    reason: str
    message: str | None = None
    tool_call_id: str | None = None
    response_schema: dict[str, Any] | None = None
    #: ISO 8601 by convention; the protocol does not parse it.
    expires_at: str | None = None
    metadata: Metadata | None = None


class TokenUsage(_Model, frozen=True, kw_only=True):
    """Token counts; reasoning and cached counts are parts of the totals, not additions."""

    provider: str | None = None
    model: str | None = None
    input_tokens: _TokenCount | None = None
    output_tokens: _TokenCount | None = None
    total_tokens: _TokenCount | None = None
    reasoning_tokens: _TokenCount | None = None
    cached_input_tokens: _TokenCount | None = None
    cache_write_input_tokens: _TokenCount | None = None


class RunFinishedSuccessOutcome(_Model, frozen=True, kw_only=True, tag_field="type", tag="success"):
    #: Client-side tool calls the run ended on, waiting for their results.
    pending_tool_call_ids: list[str] | None = None


class RunFinishedInterruptOutcome(_Model, frozen=True, kw_only=True, tag_field="type", tag="interrupt"):
    interrupts: Annotated[list[Interrupt], msgspec.Meta(min_length=1)]


class RunFinishedCancelledOutcome(_Model, frozen=True, kw_only=True, tag_field="type", tag="cancelled"):
    pass


RunFinishedOutcome = Union[
    RunFinishedSuccessOutcome, RunFinishedInterruptOutcome, RunFinishedCancelledOutcome
]


class SubagentFinishedSuccessOutcome(_Model, frozen=True, kw_only=True, tag_field="type", tag="success"):
    pass


class SubagentFinishedSuspendedOutcome(_Model, frozen=True, kw_only=True, tag_field="type", tag="suspended"):
    interrupt_ids: list[str] | None = None


SubagentFinishedOutcome = Union[SubagentFinishedSuccessOutcome, SubagentFinishedSuspendedOutcome]

# --------------------------------------------------------------------------------------------
# Events (discriminated by ``type``)
# --------------------------------------------------------------------------------------------


class BaseEvent(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    omit_defaults=True,
    tag_field="type",
):
    """Fields every event carries. ``timestamp``: integer, milliseconds since the epoch by
    convention; ``raw_event``: the provider-native event it was translated from."""

    #: The event's :class:`EventType` (its wire ``type``); a class attribute, set on every
    #: event class below from its tag.
    type: ClassVar[EventType]

    timestamp: _Timestamp | None = None
    raw_event: Any = None
    metadata: Metadata | None = None


class _AttributableEvent(BaseEvent, frozen=True, kw_only=True):
    #: The sub-agent invocation this event belongs to; absent = the parent agent.
    subagent_run_id: str | None = None


class TextMessageStartEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TEXT_MESSAGE_START"):
    message_id: str
    #: Absent means ``assistant``.
    role: TextMessageRole | None = None
    name: str | None = None


class TextMessageContentEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TEXT_MESSAGE_CONTENT"):
    message_id: str
    #: May be ``""`` in 1.0.
    delta: str


class TextMessageEndEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TEXT_MESSAGE_END"):
    message_id: str


class TextMessageChunkEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TEXT_MESSAGE_CHUNK"):
    message_id: str | None = None
    role: TextMessageRole | None = None
    delta: str | None = None
    name: str | None = None


class ToolCallStartEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TOOL_CALL_START"):
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | None = None


class ToolCallArgsEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TOOL_CALL_ARGS"):
    tool_call_id: str
    #: A fragment of the arguments' JSON text; fragments concatenate.
    delta: str


class ToolCallEndEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TOOL_CALL_END"):
    tool_call_id: str


class ToolCallChunkEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TOOL_CALL_CHUNK"):
    tool_call_id: str | None = None
    tool_call_name: str | None = None
    parent_message_id: str | None = None
    delta: str | None = None


class ToolCallResultEvent(_AttributableEvent, frozen=True, kw_only=True, tag="TOOL_CALL_RESULT"):
    message_id: str
    tool_call_id: str
    content: str | list[ContentPart]
    role: Literal["tool"] | None = None


class StateSnapshotEvent(_AttributableEvent, frozen=True, kw_only=True, tag="STATE_SNAPSHOT"):
    #: Any JSON value, ``null`` included (always written).
    snapshot: Any


class StateDeltaEvent(_AttributableEvent, frozen=True, kw_only=True, tag="STATE_DELTA"):
    delta: JsonPatch


class MessagesSnapshotEvent(BaseEvent, frozen=True, kw_only=True, tag="MESSAGES_SNAPSHOT"):
    messages: list[Message]


class ActivitySnapshotEvent(_AttributableEvent, frozen=True, kw_only=True, tag="ACTIVITY_SNAPSHOT"):
    message_id: str
    activity_type: str
    content: dict[str, Any]
    #: Absent means ``True``.
    replace: bool | None = None


class ActivityDeltaEvent(_AttributableEvent, frozen=True, kw_only=True, tag="ACTIVITY_DELTA"):
    message_id: str
    activity_type: str
    patch: JsonPatch


class RawEvent(_AttributableEvent, frozen=True, kw_only=True, tag="RAW"):
    #: Any JSON value (always written, ``null`` included).
    event: Any
    source: str | None = None


class CustomEvent(_AttributableEvent, frozen=True, kw_only=True, tag="CUSTOM"):
    name: str
    #: Any JSON value; required, so ``None`` is written as ``null``.
    value: Any


class RunStartedEvent(BaseEvent, frozen=True, kw_only=True, tag="RUN_STARTED"):
    thread_id: str
    run_id: str
    protocol_version: str | None = None
    parent_run_id: str | None = None
    input: RunAgentInput | None = None


class RunFinishedEvent(BaseEvent, frozen=True, kw_only=True, tag="RUN_FINISHED"):
    thread_id: str
    run_id: str
    result: Any = None
    #: Absent means success.
    outcome: RunFinishedOutcome | None = None
    usage: list[TokenUsage] | None = None


class RunErrorEvent(BaseEvent, frozen=True, kw_only=True, tag="RUN_ERROR"):
    message: str
    code: str | None = None
    usage: list[TokenUsage] | None = None

    @classmethod
    def from_error(cls, error: AguiEngineError) -> RunErrorEvent:
        """The ``RUN_ERROR`` that reports ``error``: its message and its stable ``code``.

        It lives here, not on the error, so that the error tree (and the tokenizer,
        which raises from it) knows nothing of AG-UI events."""
        return cls(message=error.message, code=error.code)


class StepStartedEvent(_AttributableEvent, frozen=True, kw_only=True, tag="STEP_STARTED"):
    step_name: str


class StepFinishedEvent(_AttributableEvent, frozen=True, kw_only=True, tag="STEP_FINISHED"):
    step_name: str


class ReasoningStartEvent(_AttributableEvent, frozen=True, kw_only=True, tag="REASONING_START"):
    #: The reasoning span's id.
    message_id: str


def _reasoning_role() -> Literal["reasoning"]:
    return "reasoning"


class ReasoningMessageStartEvent(_AttributableEvent, frozen=True, kw_only=True, tag="REASONING_MESSAGE_START"):
    message_id: str
    #: Fixed. Filled in when absent on input, always written on output (a factory default is
    #: never "equal to the default" for ``omit_defaults``; the TypeScript schema requires it).
    role: Literal["reasoning"] = msgspec.field(default_factory=_reasoning_role)


class ReasoningMessageContentEvent(
    _AttributableEvent, frozen=True, kw_only=True, tag="REASONING_MESSAGE_CONTENT"
):
    message_id: str
    delta: str


class ReasoningMessageEndEvent(_AttributableEvent, frozen=True, kw_only=True, tag="REASONING_MESSAGE_END"):
    message_id: str


class ReasoningMessageChunkEvent(_AttributableEvent, frozen=True, kw_only=True, tag="REASONING_MESSAGE_CHUNK"):
    message_id: str | None = None
    delta: str | None = None


class ReasoningEndEvent(_AttributableEvent, frozen=True, kw_only=True, tag="REASONING_END"):
    message_id: str


class ReasoningEncryptedValueEvent(
    _AttributableEvent, frozen=True, kw_only=True, tag="REASONING_ENCRYPTED_VALUE"
):
    """An opaque provider blob (thinking signature, encrypted reasoning) attached to a tool call
    (``subtype="tool-call"``, ``entity_id`` = toolCallId) or a message (``"message"``)."""

    subtype: Literal["tool-call", "message"]
    entity_id: str
    encrypted_value: str


class SubagentStartedEvent(BaseEvent, frozen=True, kw_only=True, tag="SUBAGENT_STARTED"):
    #: Identifies the sub-agent invocation (not an attribution, hence required here).
    subagent_run_id: str
    name: str
    description: str | None = None
    parent_subagent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None


class SubagentFinishedEvent(BaseEvent, frozen=True, kw_only=True, tag="SUBAGENT_FINISHED"):
    subagent_run_id: str
    result: Any = None
    #: Absent means success.
    outcome: SubagentFinishedOutcome | None = None


class SubagentErrorEvent(BaseEvent, frozen=True, kw_only=True, tag="SUBAGENT_ERROR"):
    subagent_run_id: str
    message: str
    code: str | None = None


Event = Union[
    TextMessageStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageChunkEvent,
    ToolCallStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    StateSnapshotEvent,
    StateDeltaEvent,
    MessagesSnapshotEvent,
    ActivitySnapshotEvent,
    ActivityDeltaEvent,
    RawEvent,
    CustomEvent,
    RunStartedEvent,
    RunFinishedEvent,
    RunErrorEvent,
    StepStartedEvent,
    StepFinishedEvent,
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningEndEvent,
    ReasoningEncryptedValueEvent,
    SubagentStartedEvent,
    SubagentFinishedEvent,
    SubagentErrorEvent,
]
"""Any AG-UI 1.0 event: a msgspec tagged union on ``type``."""

#: ``EventType`` -> its Struct class, for all 31 types.
EVENT_CLASSES: Final[dict[EventType, type[BaseEvent]]] = {
    EventType(cls.__struct_config__.tag): cls for cls in Event.__args__  # type: ignore[attr-defined]
}
assert len(EVENT_CLASSES) == len(EventType) == 31
for _type, _cls in EVENT_CLASSES.items():
    _cls.type = _type
del _type, _cls


class UnknownEvent:
    """An event whose ``type`` this engine does not know, kept whole in tolerant mode.

    ``type`` is the wire ``type`` string; ``data`` the whole decoded JSON object (``type``
    included). Encoding an UnknownEvent writes ``data`` back unchanged, so an intermediary
    relays events from a newer protocol version it does not understand.
    """

    __slots__ = ("type", "data")

    def __init__(self, type: str, data: dict[str, Any]) -> None:
        self.type = type
        self.data = data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UnknownEvent):
            return NotImplemented
        return self.type == other.type and self.data == other.data

    __hash__ = None  # type: ignore[assignment]  # mutable payload

    def __repr__(self) -> str:
        return f"UnknownEvent(type={self.type!r}, data={self.data!r})"


#: What a tolerant decoder yields.
AnyEvent = Union[Event, UnknownEvent]
