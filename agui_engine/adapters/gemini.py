"""Google Gemini (``streamGenerateContent?alt=sse``) as an :class:`LLMClient`.

Theory of operation
-------------------
``POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse`` (without
``alt=sse`` the endpoint streams one growing JSON array instead). Every ``data:``
frame (blocks end with CRLF CRLF) is a whole ``GenerateContentResponse``;
:class:`GeminiStreamParser` reads each in order:

* ``candidates[0].content.parts[]`` in order: ``{text, thought: true}`` ->
  ``ReasoningDelta``; ``{text}`` -> ``TextDelta``; ``{functionCall: {name, args, id?}}``
  -> ``ToolCallStart`` (the provider's id, or a minted one: the Gemini API usually
  sends none), **one** ``ToolCallArgsDelta`` with the whole ``args`` as JSON text, and
  ``ToolCallEnd`` at once -- never dropping arguments that came with the name.
  A ``functionCall`` part's ``thoughtSignature`` is that call's
  ``ToolCallStart.signature``; on any other part it becomes
  ``ReasoningDelta(signature=)`` after the part's text.
* ``finishReason`` is remembered (``STOP`` with calls means ``tool_calls``);
  ``usageMetadata`` is cumulative (last wins). EOF is the normal end -- *after* a
  ``finishReason``; EOF before any is a truncated stream.
* ``{"error": {...}}`` on an HTTP 200 -> ``StreamError``; ``promptFeedback.blockReason``
  with no candidates -> ``StreamError`` (``prompt_blocked``).

Requests: system/developer -> ``systemInstruction``; roles ``user`` / ``model``; tool
results -> ``functionResponse`` parts (named after the call they answer); tools as
``functionDeclarations`` with ``parametersJsonSchema`` (full JSON Schema). A tool
call's own signature (its ``encrypted_value``) goes back on its ``functionCall``
part; the turn's reasoning signature goes on the first call when that call has
none of its own, else on the turn's text part; a signature right *after* an assistant
turn (Gemini 3 signs the trailing text part, so it streams after the text) goes back
on that turn's last text part. Minted ids
(prefix :data:`MINTED_ID_PREFIX`) are not sent back; provider ids are.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from agui_engine.llm import FinishReason, LLMStreamItem, ReasoningDelta, TextDelta, resolve_tool_choice
from agui_engine.protocol.capabilities import ReasoningCapabilities
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    ToolMessage,
    UserMessage,
)
from agui_engine.protocol.ids import random_id

from .prompt import (
    TextChunk,
    append_turn,
    content_parts,
    parse_arguments,
    split_instructions,
    text_of,
    tool_result_text,
)
from .provider import (
    CompletionRequest,
    MalformedStream,
    StreamingLLMClient,
    StreamParser,
)

__all__ = [
    "GEMINI_DEFAULT_BASE_URL",
    "GeminiClient",
    "GeminiStreamParser",
    "MINTED_ID_PREFIX",
    "build_gemini_body",
    "build_gemini_contents",
]

GEMINI_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: Tool call ids the adapter made up (the Gemini API sends none) start with this, so
#: that they are not sent back to the API as if it had issued them.
MINTED_ID_PREFIX = "call_gm_"

_FINISH: dict[str, FinishReason] = {
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
}


def _mint_gemini_id() -> str:
    return random_id(MINTED_ID_PREFIX, 20)


class GeminiStreamParser(StreamParser):
    provider = "google"
    terminal_marker = "a finishReason"

    def __init__(self, *, id_factory: Callable[[], str] | None = None) -> None:
        super().__init__(id_factory=id_factory or _mint_gemini_id)
        self._finish_reason: str | None = None
        self._parts = 0

    def _handle(self, event: str, data: str) -> list[LLMStreamItem]:
        chunk = self.decode_object(data)
        error = chunk.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            return self.in_band_error(
                error.get("status") or (str(code) if code is not None else None), error.get("message"), status=code
            )
        if isinstance(chunk.get("modelVersion"), str):
            self.model = chunk["modelVersion"]
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            candidates = usage.get("candidatesTokenCount")
            thoughts = usage.get("thoughtsTokenCount")
            output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
            self.set_usage(
                input_tokens=usage.get("promptTokenCount"),
                output_tokens=output,
                total_tokens=usage.get("totalTokenCount"),
                reasoning_tokens=thoughts,
                cached_input_tokens=usage.get("cachedContentTokenCount"),
            )
        candidates = chunk.get("candidates")
        if not candidates:
            block = (chunk.get("promptFeedback") or {}).get("blockReason")
            if block:
                return self.fail(f"google blocked the prompt ({block})", code="prompt_blocked")
            return []
        candidate = candidates[0]
        items: list[LLMStreamItem] = []
        for part in (candidate.get("content") or {}).get("parts") or ():
            items += self._part(part)
        reason = candidate.get("finishReason")
        if reason:
            self._finish_reason = reason
        return items

    def _part(self, part: Any) -> list[LLMStreamItem]:
        if not isinstance(part, dict):
            raise MalformedStream("content part is not an object")
        self._parts += 1
        signature = part.get("thoughtSignature")
        items: list[LLMStreamItem] = []
        call = part.get("functionCall")
        if isinstance(call, dict):
            name = call.get("name")
            if not name:
                raise MalformedStream("functionCall without a name")
            key = ("part", self._parts)
            # the signature belongs to this call: it goes back on this functionCall part
            items += self.tools.open(key, id=call.get("id") or None, name=name, signature=signature or None)
            args = call.get("args")
            items += self.tools.args(key, msgspec.json.encode(args).decode() if args is not None else "{}")
            return items + self.tools.end(key)
        text = part.get("text")
        if isinstance(text, str) and text:
            items.append(ReasoningDelta(text=text) if part.get("thought") else TextDelta(text=text))
        if signature:
            items.append(ReasoningDelta(signature=signature))
        return items  # executableCode, inlineData ...: not streamed to the engine

    def _at_eof(self) -> list[LLMStreamItem]:
        raw = self._finish_reason
        if raw is None:
            return super()._at_eof()
        reason: FinishReason = self.natural_finish() if raw == "STOP" else _FINISH.get(raw, "other")
        return self.finish(reason, raw)


def _is_signature(value: str | None) -> bool:
    """Whether ``value`` can be a Gemini thought signature (base64). Another provider's
    opaque reasoning (a conversation that switched models) is not sent: the API
    refuses the whole request for an undecodable signature."""
    if not value:
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _media_part(part: Any) -> dict[str, Any]:
    if part.source == "data":
        return {"inlineData": {"mimeType": part.mime_type, "data": part.value}}
    file_data: dict[str, Any] = {"fileUri": part.value}
    if part.mime_type:
        file_data["mimeType"] = part.mime_type
    return {"fileData": file_data}


def build_gemini_contents(messages: Sequence[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system_parts, contents)`` for ``generateContent``."""
    instructions, turns = split_instructions(messages)
    system = [{"text": text} for text in instructions]
    contents: list[dict[str, Any]] = []
    call_names: dict[str, str] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        append_turn(contents, role, parts, field="parts")

    for turn in turns:
        message = turn.message
        if isinstance(message, UserMessage):
            add("user", [{"text": p.text} if isinstance(p, TextChunk) else _media_part(p) for p in content_parts(message.content)])
        elif isinstance(message, ToolMessage):
            name = call_names.get(message.tool_call_id)
            if name is None:
                raise UsageError(f"tool message answers unknown tool call {message.tool_call_id!r}")
            text = text_of(message.content)
            response: dict[str, Any]
            if message.error:
                response = {"error": tool_result_text(message)}
            else:
                try:
                    value = msgspec.json.decode(text) if text else None
                except msgspec.DecodeError:
                    value = None
                response = value if isinstance(value, dict) else {"result": text}
            function_response: dict[str, Any] = {"name": name, "response": response}
            if not message.tool_call_id.startswith(MINTED_ID_PREFIX):
                function_response["id"] = message.tool_call_id
            add("user", [{"functionResponse": function_response}])
        elif turn.role == "assistant":
            parts: list[dict[str, Any]] = []
            signatures = [r.encrypted_value for r in turn.reasoning if _is_signature(r.encrypted_value)]
            spare = signatures[0] if signatures else None  # the turn's reasoning signature, not placed yet
            if isinstance(message, AssistantMessage):
                if message.content:
                    parts.append({"text": message.content})
                first_call = True
                for call in message.tool_calls or ():
                    call_names[call.id] = call.function.name
                    function_call: dict[str, Any] = {"name": call.function.name, "args": parse_arguments(call.function.arguments)}
                    if not call.id.startswith(MINTED_ID_PREFIX):
                        function_call["id"] = call.id
                    entry: dict[str, Any] = {"functionCall": function_call}
                    # the call's own signature (ToolCallStart.signature -> ToolCall.encrypted_value);
                    # a first call without one takes the turn's reasoning signature (history
                    # that kept the call's signature as a reasoning message)
                    signature = call.encrypted_value if _is_signature(call.encrypted_value) else None
                    if signature is None and first_call and spare is not None:
                        signature, spare = spare, None
                    if signature:
                        entry["thoughtSignature"] = signature
                    first_call = False
                    parts.append(entry)
                if spare is not None and parts and "text" in parts[0]:
                    parts[0]["thoughtSignature"] = spare  # a text part's own signature goes back on it
                    spare = None
            if spare is not None and not parts and contents and contents[-1]["role"] == "model" and contents[-1]["parts"]:
                # Gemini 3 signs the turn's trailing text part; the signature streamed after
                # that text, so it is a reasoning message after the assistant message: it
                # goes back on the text part it came with.
                last = contents[-1]["parts"][-1]
                if "text" in last and "thoughtSignature" not in last:
                    last["thoughtSignature"] = spare
            add("model", parts)
    return system, contents


def build_gemini_body(request: CompletionRequest, *, thinking: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of a ``streamGenerateContent`` request (Gemini has no switch for
    parallel calls: it makes them when it wants)."""
    system, contents = build_gemini_contents(request.messages)
    tools = request.tools
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    if tools:
        mode, name = resolve_tool_choice(request.tool_choice, [t.name for t in tools])
        body["tools"] = [
            {
                "functionDeclarations": [
                    {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters} for t in tools
                ]
            }
        ]
        config: dict[str, Any] = {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE", "tool": "ANY"}[mode]}
        if name is not None:
            config["allowedFunctionNames"] = [name]
        body["toolConfig"] = {"functionCallingConfig": config}
    generation: dict[str, Any] = {}
    if request.max_output_tokens is not None:
        generation["maxOutputTokens"] = request.max_output_tokens
    if thinking is not None:
        generation["thinkingConfig"] = dict(thinking)
    if generation:
        body["generationConfig"] = generation
    return body


class GeminiClient(StreamingLLMClient):
    """Gemini API. Key from ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` (that order, as
    google-genai), base URL from ``GEMINI_BASE_URL``. ``thinking`` is the
    ``thinkingConfig`` (e.g. ``{"includeThoughts": True}`` for thought summaries)."""

    provider: ClassVar[str] = "google"
    label: ClassVar[str] = "Gemini"
    key_env: ClassVar[tuple[str, ...]] = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    base_url_env: ClassVar[str | None] = "GEMINI_BASE_URL"
    default_base_url: ClassVar[str | None] = GEMINI_DEFAULT_BASE_URL
    parser_class: ClassVar[type[StreamParser]] = GeminiStreamParser

    def __init__(
        self, model: str, *, thinking: Mapping[str, Any] | None = None, api_version: str = "v1beta", **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.thinking = dict(thinking) if thinking is not None else None
        self.api_version = api_version

    def auth_headers(self) -> dict[str, str]:
        # In a header, never in the URL (?key=): URLs end up in logs.
        return {"x-goog-api-key": self._api_key or ""}

    def reasoning_capabilities(self) -> ReasoningCapabilities:
        """Thought summaries asked for (``thinking`` with ``includeThoughts``): streamed, with
        their ``thoughtSignature`` as opaque encrypted values. Otherwise the model may think,
        but nothing of it reaches the client."""
        on = bool(self.thinking and self.thinking.get("includeThoughts"))
        return ReasoningCapabilities(supported=True, streaming=True, encrypted=True) if on else ReasoningCapabilities(supported=False)

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        model = self.model if self.model.startswith(("models/", "tunedModels/")) else f"models/{self.model}"
        url = f"{self.base_url}/{self.api_version}/{model}:streamGenerateContent?alt=sse"
        return url, build_gemini_body(request, thinking=self.thinking)
