"""Anthropic Messages API as an :class:`LLMClient`.

Theory of operation
-------------------
``POST {base_url}/v1/messages`` with ``stream: true``; SSE with ``event:`` lines (the
official SDK ignores frames without one) and the same name in ``data.type``.
:class:`AnthropicStreamParser` routes on the type through ``HANDLERS``:

* ``content_block_start`` records the block's kind under its ``index``: ``text``,
  ``thinking``, ``redacted_thinking`` (opaque ``data`` ->
  ``ReasoningDelta(encrypted="redacted_thinking:<data>")``, see :func:`pack_redacted`)
  or ``tool_use`` (a tool call keyed by the block index, id ``toolu_...``).
* ``content_block_delta``: ``text_delta`` -> ``TextDelta``; ``thinking_delta`` ->
  ``ReasoningDelta``; ``signature_delta`` -> ``ReasoningDelta(signature=)`` (must reach
  the client as ``REASONING_ENCRYPTED_VALUE`` and be replayed byte-exact);
  ``input_json_delta`` -> tool-call argument fragments.
* ``content_block_stop`` ends a tool call (arguments that came whole in the start
  block's ``input`` are sent here).
* ``message_start`` / ``message_delta`` carry usage (``input_tokens`` counts only the
  uncached part: the cache reads and writes are added to get the total) and the
  ``stop_reason``; ``message_stop`` emits usage and ``Finish``.
* ``event: error`` -> ``StreamError`` (``overloaded_error`` is retryable); EOF without
  ``message_stop`` -> ``StreamError`` (truncated). ``ping`` is ignored.

Requests: system and developer messages go to the top-level ``system``; tool results
are ``tool_result`` blocks in a user turn; consecutive turns of one role are merged
(the API requires alternation); a reasoning message before an assistant message is
replayed as its own block: a ``redacted_thinking`` block when its opaque value says
so, else a ``thinking`` block with its signature (also when its text is empty: a
signed thinking block whose text the API omitted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from agui_engine.llm import FinishReason, LLMStreamItem, ReasoningDelta, TextDelta, resolve_tool_choice
from agui_engine.protocol.capabilities import ReasoningCapabilities
from agui_engine.protocol.events import (
    AssistantMessage,
    ToolMessage,
    UserMessage,
)

from .prompt import (
    TextChunk,
    append_turn,
    content_parts,
    parse_arguments,
    split_instructions,
    tool_result_text,
)
from .provider import (
    CompletionRequest,
    Handler,
    MalformedStream,
    StreamingLLMClient,
    StreamParser,
    TypedEventParser,
)

__all__ = [
    "ANTHROPIC_DEFAULT_BASE_URL",
    "AnthropicClient",
    "AnthropicStreamParser",
    "DEFAULT_ANTHROPIC_MAX_TOKENS",
    "build_anthropic_body",
    "build_anthropic_messages",
    "pack_redacted",
]

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The API version header value; the stable version every current model accepts.
_ANTHROPIC_VERSION = "2023-06-01"
#: ``max_tokens`` is required by the Messages API; used when the caller gives none.
#: 8192 fits every current Claude model's output limit and a long tool-call argument.
DEFAULT_ANTHROPIC_MAX_TOKENS = 8192

#: Marks the opaque value of a ``redacted_thinking`` block. A thinking block's signature
#: and a redacted block's data are both base64 (no ``:``), and the decision loop keeps
#: either as a reasoning message's one opaque value; without the mark a signed thinking
#: block with empty text and a redacted block would look alike, and replaying one as
#: the other is refused by the API.
_REDACTED_THINKING_PREFIX = "redacted_thinking:"


def pack_redacted(data: str) -> str:
    """The opaque value a client stores for a ``redacted_thinking`` block."""
    return _REDACTED_THINKING_PREFIX + data


_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


class AnthropicStreamParser(TypedEventParser):
    provider = "anthropic"
    terminal_marker = "message_stop"

    def __init__(self, *, id_factory: Callable[[], str] | None = None) -> None:
        super().__init__(id_factory=id_factory)
        self._blocks: dict[int, str] = {}
        self._whole_input: dict[int, Any] = {}
        self._stop_reason: str | None = None
        self._input = (0, 0, 0)  # uncached input, cache reads, cache writes

    def _ignore(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        return []

    def _set_usage(self, usage: dict[str, Any]) -> None:
        uncached, reads, writes = self._input
        uncached = usage.get("input_tokens", uncached) or 0
        reads = usage.get("cache_read_input_tokens", reads) or 0
        writes = usage.get("cache_creation_input_tokens", writes) or 0
        self._input = (uncached, reads, writes)
        total_in = uncached + reads + writes
        output = usage.get("output_tokens")
        if output is None and self.usage is not None:
            output = self.usage.output_tokens
        self.set_usage(
            input_tokens=total_in,
            output_tokens=output,
            total_tokens=total_in + (output or 0),
            cached_input_tokens=reads,
        )

    def _on_message_start(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        message = payload.get("message") or {}
        if isinstance(message.get("model"), str):
            self.model = message["model"]
        if isinstance(message.get("usage"), dict):
            self._set_usage(message["usage"])
        return []

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if not isinstance(index, int):
            raise MalformedStream(f"{payload.get('type')} without an integer index")
        return index

    def _on_block_start(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        index = self._index(payload)
        block = payload.get("content_block") or {}
        kind = block.get("type")
        self._blocks[index] = str(kind)
        if kind == "text" and block.get("text"):
            return [TextDelta(text=block["text"])]
        if kind == "thinking" and block.get("thinking"):
            return [ReasoningDelta(text=block["thinking"])]
        if kind == "redacted_thinking" and block.get("data"):
            return [ReasoningDelta(encrypted=pack_redacted(block["data"]))]
        if kind == "tool_use":
            if block.get("input"):
                self._whole_input[index] = block["input"]
            return self.tools.open(index, id=block.get("id") or None, name=block.get("name") or None)
        return []  # server tools, search results ...: not the engine's business

    def _on_block_delta(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        index = self._index(payload)
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextDelta(text=delta["text"])] if delta.get("text") else []
        if kind == "thinking_delta":
            return [ReasoningDelta(text=delta["thinking"])] if delta.get("thinking") else []
        if kind == "signature_delta":
            return [ReasoningDelta(signature=delta["signature"])] if delta.get("signature") else []
        if kind == "input_json_delta":
            if self._blocks.get(index) != "tool_use":
                return []  # server_tool_use input also streams this way
            fragment = delta.get("partial_json")
            return self.tools.args(index, fragment) if isinstance(fragment, str) else []
        return []  # citations_delta ...

    def _on_block_stop(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        index = self._index(payload)
        if self._blocks.get(index) != "tool_use":
            return []
        whole = self._whole_input.pop(index, None)
        items: list[LLMStreamItem] = []
        if whole is not None and not self.tools.has_args(index):
            items += self.tools.args(index, msgspec.json.encode(whole).decode())
        return items + self.tools.end(index)

    def _on_message_delta(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        delta = payload.get("delta") or {}
        if delta.get("stop_reason"):
            self._stop_reason = delta["stop_reason"]
        if isinstance(payload.get("usage"), dict):
            self._set_usage(payload["usage"])
        return []

    def _on_message_stop(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        raw = self._stop_reason
        reason: FinishReason = _FINISH.get(raw, "other") if raw else self.natural_finish()
        return self.finish(reason, raw)

    def _on_error(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        error = payload.get("error") or {}
        return self.in_band_error(error.get("type"), error.get("message"))

    HANDLERS: ClassVar[Mapping[str, Handler]] = {
        "message_start": _on_message_start,
        "content_block_start": _on_block_start,
        "content_block_delta": _on_block_delta,
        "content_block_stop": _on_block_stop,
        "message_delta": _on_message_delta,
        "message_stop": _on_message_stop,
        "error": _on_error,
        "ping": _ignore,
    }


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in content_parts(content):
        if isinstance(part, TextChunk):
            blocks.append({"type": "text", "text": part.text})
        elif part.kind in ("image", "document"):
            if part.source == "data":
                source: dict[str, Any] = {"type": "base64", "media_type": part.mime_type, "data": part.value}
            elif part.source == "url":
                source = {"type": "url", "url": part.value}
            else:
                source = {"type": "file", "file_id": part.value}
            blocks.append({"type": part.kind, "source": source})
        # audio and video: not accepted by the Messages API; dropped.
    return blocks


def build_anthropic_messages(messages: Sequence[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system_blocks, messages)`` for the Messages API."""
    instructions, turns = split_instructions(messages)
    system = [{"type": "text", "text": text} for text in instructions]
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        append_turn(out, role, blocks, field="content")

    for turn in turns:
        message = turn.message
        if isinstance(message, UserMessage):
            add("user", _user_blocks(message.content))
        elif isinstance(message, ToolMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": tool_result_text(message),
            }
            if message.error:
                block["is_error"] = True
            add("user", [block])
        elif turn.role == "assistant":
            blocks: list[dict[str, Any]] = []
            for reasoning in turn.reasoning:
                value = reasoning.encrypted_value
                if not value:
                    continue  # thinking without its signature is rejected by the API
                if value.startswith(_REDACTED_THINKING_PREFIX):
                    blocks.append({"type": "redacted_thinking", "data": value[len(_REDACTED_THINKING_PREFIX) :]})
                else:
                    blocks.append({"type": "thinking", "thinking": reasoning.content, "signature": value})
            if isinstance(message, AssistantMessage):
                if message.content:
                    blocks.append({"type": "text", "text": message.content})
                for call in message.tool_calls or ():
                    blocks.append(
                        {"type": "tool_use", "id": call.id, "name": call.function.name, "input": parse_arguments(call.function.arguments)}
                    )
            add("assistant", blocks)
    return system, out


def build_anthropic_body(
    model: str, request: CompletionRequest, *, thinking: Mapping[str, Any] | None = None, strict_tools: bool = False
) -> dict[str, Any]:
    """The JSON body of a streaming Messages request. ``strict_tools=True`` sends
    ``strict: true`` on the tools whose ``LLMTool.strict`` is set (see
    :class:`AnthropicClient` for why it is off by default)."""
    system, converted = build_anthropic_messages(request.messages)
    tools = request.tools
    body: dict[str, Any] = {
        "model": model,
        "messages": converted,
        "max_tokens": request.max_output_tokens or DEFAULT_ANTHROPIC_MAX_TOKENS,
        "stream": True,
    }
    if system:
        body["system"] = system
    if tools:
        mode, name = resolve_tool_choice(request.tool_choice, [t.name for t in tools])
        entries = []
        for tool in tools:
            entry: dict[str, Any] = {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            if strict_tools and tool.strict:
                entry["strict"] = True
            entries.append(entry)
        body["tools"] = entries
        choice: dict[str, Any] = {"type": {"required": "any"}.get(mode, mode)}
        if name is not None:
            choice["name"] = name
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = not request.parallel_tool_calls
        body["tool_choice"] = choice
    if thinking is not None:
        body["thinking"] = dict(thinking)
    return body


class AnthropicClient(StreamingLLMClient):
    """Anthropic Messages API. Key from ``ANTHROPIC_API_KEY``, base URL from
    ``ANTHROPIC_BASE_URL`` (default ``https://api.anthropic.com``). ``thinking``
    (e.g. ``{"type": "enabled", "budget_tokens": 2048}``) turns extended thinking on.

    ``strict_tools=True`` sends ``strict: true`` (grammar-constrained tool input) on
    the strict tools. Off by default, unlike OpenAI: Anthropic compiles all strict
    schemas of a request into one grammar and refuses the whole request (HTTP 400)
    past a size limit it does not document, which a dozen component tools can reach;
    non-strict tools always work, and the engine's null policy reads either form."""

    provider: ClassVar[str] = "anthropic"
    label: ClassVar[str] = "Anthropic"
    key_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    base_url_env: ClassVar[str | None] = "ANTHROPIC_BASE_URL"
    default_base_url: ClassVar[str | None] = ANTHROPIC_DEFAULT_BASE_URL
    parser_class: ClassVar[type[StreamParser]] = AnthropicStreamParser

    def __init__(
        self, model: str, *, thinking: Mapping[str, Any] | None = None, strict_tools: bool = False, **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.thinking = dict(thinking) if thinking is not None else None
        self.strict_tools = strict_tools

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key or "", "anthropic-version": _ANTHROPIC_VERSION}

    def reasoning_capabilities(self) -> ReasoningCapabilities:
        """Extended thinking on (``thinking`` given, not ``{"type": "disabled"}``): thinking
        text streamed, with its signatures and redacted blocks as opaque encrypted values.
        Off: no reasoning reaches the client."""
        on = self.thinking is not None and self.thinking.get("type") != "disabled"
        return ReasoningCapabilities(supported=True, streaming=True, encrypted=True) if on else ReasoningCapabilities(supported=False)

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        return f"{self.base_url}/v1/messages", build_anthropic_body(
            self.model, request, thinking=self.thinking, strict_tools=self.strict_tools
        )
