"""Reading AG-UI messages for the request builders (shared by every provider).

Theory of operation
-------------------
The request builders (one per provider) all need the same facts from the AG-UI
message Structs of :mod:`agui_engine.protocol.events`: the role, the text, the content parts
(text and media with their source), the tool calls and which tool call a tool
message answers. This module extracts them once, into small neutral values, so
that every builder reads messages the same way:

* :func:`content_parts` -> ``[TextChunk | Media]`` for a ``str`` or a part list;
* :func:`group_turns` folds ``ReasoningMessage``s into the assistant turn they belong
  to (the one right after them), because every provider that replays reasoning
  (Anthropic thinking, Responses reasoning items, Gemini thought signatures) wants
  it inside / next to that turn;
* :func:`provider_parts` gives a content as OpenAI-style requests take it (a plain string
  for text alone, else the provider's parts); :func:`split_instructions` sets the system and
  developer messages apart for the providers that take them beside the turns;
* :func:`tool_result_text` renders a tool message (with its ``error``) as text;
* :func:`append_turn` builds the strictly alternating turn lists of Anthropic and
  Gemini (consecutive entries of one role are merged into one turn).

Parts a provider cannot take (audio, video, documents where unsupported) are dropped,
as the AG-UI spec says a peer does with a part it cannot use; see ``spec/providers.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Union

import msgspec

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    ActivityMessage,
    AssistantMessage,
    AudioPart,
    DataSource,
    DeveloperMessage,
    DocumentPart,
    FileSource,
    ImagePart,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    ToolMessage,
    UrlSource,
    UserMessage,
    VideoPart,
)

__all__ = [
    "Media",
    "Part",
    "TextChunk",
    "Turn",
    "append_turn",
    "content_parts",
    "data_url",
    "group_turns",
    "only_text",
    "parse_arguments",
    "provider_parts",
    "split_instructions",
    "text_of",
    "tool_result_text",
]


class TextChunk(msgspec.Struct, frozen=True):
    text: str


class Media(msgspec.Struct, frozen=True, kw_only=True):
    """A media part: ``kind`` image/audio/video/document; ``source`` data (base64
    ``value``), url (``value`` is the URL) or file (``value`` is a provider handle)."""

    kind: Literal["image", "audio", "video", "document"]
    source: Literal["data", "url", "file"]
    value: str
    mime_type: str | None = None


Part = Union[TextChunk, Media]

_MEDIA_KIND: dict[type, str] = {ImagePart: "image", AudioPart: "audio", VideoPart: "video", DocumentPart: "document"}
_SOURCE_KIND: dict[type, str] = {DataSource: "data", UrlSource: "url", FileSource: "file"}


def content_parts(content: Any) -> list[Part]:
    """The parts of a message's ``content`` (``str``, ``None`` or a list of parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextChunk(content)] if content else []
    parts: list[Part] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                parts.append(TextChunk(part.text))
            continue
        kind = _MEDIA_KIND.get(type(part))
        if kind is None:
            raise UsageError(f"unsupported content part {type(part).__name__}")
        source = part.source
        parts.append(
            Media(
                kind=kind,  # type: ignore[arg-type]
                source=_SOURCE_KIND[type(source)],  # type: ignore[arg-type]
                value=source.value,
                mime_type=source.mime_type,
            )
        )
    return parts


def only_text(parts: Sequence[Part]) -> str | None:
    """The joined text when every part is text (providers then take a plain string), else ``None``."""
    if all(isinstance(p, TextChunk) for p in parts):
        return "".join(p.text for p in parts)  # type: ignore[union-attr]
    return None


def provider_parts(content: Any, convert: Callable[[Part], dict[str, Any] | None]) -> str | list[dict[str, Any]]:
    """A message's ``content`` as an OpenAI-style request takes it: the text alone as a plain
    string when every part is text, else each part as ``convert`` writes it for the provider
    (``None`` drops a part the provider cannot take)."""
    parts = content_parts(content)
    text = only_text(parts)
    if text is not None:
        return text
    return [entry for entry in map(convert, parts) if entry is not None]


def text_of(content: Any) -> str:
    """All text of a ``content`` joined; media parts are skipped."""
    return "".join(p.text for p in content_parts(content) if isinstance(p, TextChunk))


def data_url(media: Media) -> str:
    """``data:<mime>;base64,<value>`` for a data source, the URL itself for a url source."""
    if media.source == "data":
        return f"data:{media.mime_type or 'application/octet-stream'};base64,{media.value}"
    return media.value


def tool_result_text(message: ToolMessage) -> str:
    """A tool message as text for the model; a failed tool says so first."""
    text = text_of(message.content)
    if message.error:
        return f"Error: {message.error}" + (f"\n{text}" if text else "")
    return text


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as an object (for providers that want one).

    Raises :class:`UsageError` when they are not a JSON object: the history the caller
    passed holds a tool call the provider cannot accept.
    """
    if not arguments.strip():
        return {}
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError as exc:
        raise UsageError(f"tool call arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("tool call arguments must be a JSON object")
    return value


class Turn(msgspec.Struct, kw_only=True):
    """One message for a provider; an assistant turn also carries the reasoning
    messages that came right before it (``reasoning``)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    message: Any
    reasoning: list[ReasoningMessage] = msgspec.field(default_factory=list)


def group_turns(messages: Sequence[Any]) -> list[Turn]:
    """The messages as turns: reasoning folded into the next assistant turn.

    A reasoning message with no assistant message after it (the model only thought)
    becomes an assistant turn with no content of its own. Activity messages are UI
    state, never model input, and are left out.
    """
    turns: list[Turn] = []
    pending: list[ReasoningMessage] = []
    for message in messages:
        if isinstance(message, ReasoningMessage):
            pending.append(message)
            continue
        if isinstance(message, ActivityMessage):
            continue
        if isinstance(message, AssistantMessage):
            turns.append(Turn(role="assistant", message=message, reasoning=pending))
            pending = []
            continue
        if pending:
            turns.append(Turn(role="assistant", message=None, reasoning=pending))
            pending = []
        if isinstance(message, SystemMessage):
            turns.append(Turn(role="system", message=message))
        elif isinstance(message, DeveloperMessage):
            turns.append(Turn(role="developer", message=message))
        elif isinstance(message, UserMessage):
            turns.append(Turn(role="user", message=message))
        elif isinstance(message, ToolMessage):
            turns.append(Turn(role="tool", message=message))
        else:
            raise UsageError(f"not an AG-UI message: {type(message).__name__}")
    if pending:
        turns.append(Turn(role="assistant", message=None, reasoning=pending))
    return turns


def split_instructions(messages: Sequence[Any]) -> tuple[list[str], list[Turn]]:
    """``(instructions, turns)``: the non-empty contents of the system and developer messages,
    in order (Anthropic's ``system``, Gemini's ``systemInstruction``: beside the turns, not
    among them), and the other turns (:func:`group_turns`)."""
    instructions: list[str] = []
    turns: list[Turn] = []
    for turn in group_turns(messages):
        if isinstance(turn.message, SystemMessage | DeveloperMessage):
            if turn.message.content:
                instructions.append(turn.message.content)
        else:
            turns.append(turn)
    return instructions, turns


def append_turn(turns: list[dict[str, Any]], role: str, entries: list[dict[str, Any]], *, field: str) -> None:
    """Add ``entries`` as a ``{"role": role, field: entries}`` turn, or extend the last
    turn when it has the same role: Anthropic (``content``) and Gemini (``parts``)
    require user and model turns to alternate, so tool results and the user message
    after them become one turn. Nothing is added for no entries."""
    if not entries:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1][field].extend(entries)
    else:
        turns.append({"role": role, field: entries})
