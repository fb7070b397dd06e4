"""The normalised LLM interface the decision loop drives.

Theory of operation
-------------------
Every model -- a provider adapter over HTTP (``adapters/``), the embedded demo
model, a test double -- is an :class:`LLMClient`: ``complete(...)`` returns an
async iterator of :data:`LLMStreamItem` values. The items are provider-neutral:

* :class:`TextDelta` -- assistant text.
* :class:`ReasoningDelta` -- reasoning text, optionally with a ``signature``
  (Anthropic thinking) or ``encrypted`` content (OpenAI Responses), which must
  reach the client as ``REASONING_ENCRYPTED_VALUE``.
* :class:`ToolCallStart` / :class:`ToolCallArgsDelta` / :class:`ToolCallEnd` --
  tool calls keyed by ``index`` (the provider's routing key mapped to a small
  integer), so parallel calls interleave freely. ``ToolCallStart`` carries the
  call id and tool name, and optionally the call's own opaque ``signature`` (a
  Gemini ``thoughtSignature`` on a ``functionCall`` part), which must reach the
  client as ``REASONING_ENCRYPTED_VALUE`` (subtype ``tool-call``) and go back on
  that call; argument deltas are raw JSON text fragments.
* :class:`Usage` -- token counts (may arrive more than once; the last wins per field).
* :class:`Finish` -- the model's finish reason, normalised to :data:`FinishReason`.
* :class:`StreamError` -- an in-band error or a truncated stream. After it the
  iterator ends; the consumer ends the run with ``RUN_ERROR``.

A client must emit ``ToolCallStart`` before any delta of that index and
``ToolCallEnd`` for every started call before the iterator ends normally.
Cancelling the consumer (closing the async iterator) must abort the upstream
request at once.

A client may also say whether its model shows reasoning to the client, with a
``reasoning_capabilities()`` method returning a
:class:`~agui_engine.protocol.capabilities.ReasoningCapabilities` (or None: not declared);
:func:`model_reasoning` asks any client, and ``LLMAgent.capabilities()`` reports it.

This module does no IO; it only defines types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Final, Literal, NamedTuple, Protocol, Union, runtime_checkable

import msgspec

from .protocol.capabilities import ReasoningCapabilities
from .protocol.errors import UsageError

__all__ = [
    "Finish",
    "FinishReason",
    "LLMClient",
    "LLMStreamItem",
    "LLMTool",
    "ReasoningDelta",
    "ResolvedToolChoice",
    "StreamError",
    "TOOL_CHOICE_KEYWORDS",
    "TextDelta",
    "ToolCallArgsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolChoice",
    "UnknownToolChoiceError",
    "Usage",
    "model_reasoning",
    "resolve_tool_choice",
]

#: ``"auto"``, ``"required"``, ``"none"``, or the name of one tool the model must call.
ToolChoice = str

#: The :data:`ToolChoice` values that are not tool names.
TOOL_CHOICE_KEYWORDS: Final = frozenset({"auto", "required", "none"})


class UnknownToolChoiceError(UsageError):
    """A tool choice names no tool that the request offers."""

    default_code = "unknown_tool_choice"


class ResolvedToolChoice(NamedTuple):
    """A checked tool choice: ``mode`` is ``"auto"``, ``"required"``, ``"none"``, or
    ``"tool"`` with the forced tool's ``name`` (None otherwise). Unpacks as
    ``mode, name`` (how a provider adapter writes its own tool-choice field)."""

    mode: Literal["auto", "required", "none", "tool"]
    name: str | None

    @property
    def choice(self) -> ToolChoice:
        """Back to a :data:`ToolChoice`: the keyword, or the forced tool's name."""
        return self.name if self.name is not None else self.mode


def resolve_tool_choice(choice: ToolChoice | None, tool_names: Iterable[str]) -> ResolvedToolChoice:
    """Check ``choice`` against the names of the tools offered; the one resolver the
    decision loop, ``LLMAgent`` and every provider adapter use.

    ``None`` is ``"auto"``; a keyword of :data:`TOOL_CHOICE_KEYWORDS` passes; any other
    value must be one of ``tool_names`` (a forced tool), else
    :class:`UnknownToolChoiceError` saying which tools were offered. Changes no state."""
    if choice is None:
        return ResolvedToolChoice("auto", None)
    if choice in TOOL_CHOICE_KEYWORDS:
        return ResolvedToolChoice(choice, None)  # type: ignore[arg-type]
    names = set(tool_names)
    if choice not in names:
        offered = ", ".join(sorted(names)) or "none"
        raise UnknownToolChoiceError(
            f"tool choice {choice!r} is not one of the tools offered to the model (offered: {offered})"
        )
    return ResolvedToolChoice("tool", choice)

#: Normalised finish reasons. ``tool_calls``: the model stopped to let tools run.
FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "other"]


class LLMTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as sent to a model: a JSON Schema for its arguments.

    ``strict`` asks providers that support it (OpenAI structured outputs) to
    constrain the arguments to the schema; the schema must then be in strict
    form (see :mod:`agui_engine.genui.components`).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


class TextDelta(msgspec.Struct, frozen=True, kw_only=True, tag="text"):
    text: str


class ReasoningDelta(msgspec.Struct, frozen=True, kw_only=True, tag="reasoning"):
    """Reasoning text; ``signature`` / ``encrypted`` carry opaque provider material."""

    text: str = ""
    signature: str | None = None
    encrypted: str | None = None


class ToolCallStart(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call_start"):
    """A tool call begins. ``signature``: opaque provider material bound to this call
    (Gemini's ``thoughtSignature``), replayed byte-exact on the same call."""

    index: int
    id: str
    name: str
    signature: str | None = None


class ToolCallArgsDelta(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call_args"):
    index: int
    delta: str


class ToolCallEnd(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call_end"):
    index: int


class Usage(msgspec.Struct, frozen=True, kw_only=True, tag="usage"):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None
    provider: str | None = None
    model: str | None = None


class Finish(msgspec.Struct, frozen=True, kw_only=True, tag="finish"):
    reason: FinishReason
    raw_reason: str | None = None


class StreamError(msgspec.Struct, frozen=True, kw_only=True, tag="error"):
    """An in-band provider error or a stream that ended without its terminal marker."""

    message: str
    code: str | None = None
    retryable: bool = False


LLMStreamItem = Union[
    TextDelta, ReasoningDelta, ToolCallStart, ToolCallArgsDelta, ToolCallEnd, Usage, Finish, StreamError
]


@runtime_checkable
class LLMClient(Protocol):
    """Anything that streams a model's answer as :data:`LLMStreamItem` values.

    ``messages`` are AG-UI message Structs (:mod:`agui_engine.protocol.events`), the system
    prompt first. Raises :class:`~agui_engine.protocol.errors.UpstreamError` (or a subclass)
    for a failure before the first item; failures after that are a
    :class:`StreamError` item.
    """

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]: ...


def model_reasoning(llm: object) -> ReasoningCapabilities | None:
    """What ``llm`` declares about its reasoning: its ``reasoning_capabilities()``, or
    None when it has no such method or declares nothing. Raises UsageError when the
    method returns anything else than a ReasoningCapabilities or None."""
    method = getattr(llm, "reasoning_capabilities", None)
    if method is None:
        return None
    value = method()
    if value is not None and not isinstance(value, ReasoningCapabilities):
        raise UsageError(
            f"{type(llm).__name__}.reasoning_capabilities() returned a {type(value).__name__}, "
            "not a ReasoningCapabilities or None"
        )
    return value
