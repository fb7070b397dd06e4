"""OpenAI Chat Completions and OpenAI-compatible servers as :class:`LLMClient`s.

Theory of operation
-------------------
``POST {base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage``; the answer is ``data:``-only SSE ending in
``data: [DONE]``. :class:`ChatStreamParser` reads one chunk per frame:

* ``choices[0].delta``: ``reasoning_content`` / ``reasoning`` (OpenAI-compatible
  servers: DeepSeek, vLLM, OpenRouter, litellm) -> ``ReasoningDelta``; ``content`` and
  ``refusal`` -> ``TextDelta``; ``tool_calls[]`` -> routed by their ``index`` through
  the tool-call tracker. The whole delta is read *before* ``finish_reason`` on the
  same chunk, so a finishing chunk still delivers its content and calls.
* ``finish_reason`` ends every open call and is remembered; ``usage`` (the extra
  ``choices: []`` chunk, or inline on compatible servers) is remembered; ``[DONE]``
  emits usage and ``Finish``.
* A top-level ``error`` object -> ``StreamError``. EOF without ``[DONE]`` ->
  ``StreamError`` (``truncated``); a compatible server (``lenient_eof``) may end with
  plain EOF after a ``finish_reason``, as some do.

Tolerated quirks of compatible servers: a missing ``index`` (a new ``id`` opens a new
call, a fragment without one continues the last call), the id repeated on every
fragment, a different id under an index already in use (a new call, never merged),
name and whole arguments in one fragment, arguments before the id/name, and a
``function.name`` split across fragments: the name's pieces are joined and the call
starts (``ToolCallStart`` with the whole name) when its arguments begin, another call
begins, or the choice finishes. A fragment repeating the whole name so far is a
repeat (servers that send the name on every fragment), not a piece.

:func:`encode_chat_stream` is the inverse: it renders any ``LLMStreamItem`` stream
as Chat Completions SSE bytes (used to put an in-process model behind the replay
server so that the production adapter path is exercised end to end).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable, Sequence
from typing import Any, ClassVar

import msgspec

from agui_engine.llm import (
    Finish,
    FinishReason,
    LLMStreamItem,
    LLMTool,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    Usage,
    resolve_tool_choice,
)
from agui_engine.protocol.capabilities import ReasoningCapabilities
from agui_engine.protocol.errors import RemoteInputError
from agui_engine.protocol.events import (
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    FunctionCall,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UrlSource,
    UserMessage,
)

from .prompt import (
    Part,
    TextChunk,
    data_url,
    group_turns,
    provider_parts,
    tool_result_text,
)
from .provider import (
    CompletionRequest,
    MalformedStream,
    StreamingLLMClient,
    StreamParser,
)

__all__ = [
    "ChatStreamParser",
    "OPENAI_DEFAULT_BASE_URL",
    "OpenAIChatClient",
    "OpenAICompatibleClient",
    "OpenAIPlatformClient",
    "build_chat_body",
    "build_chat_messages",
    "encode_chat_stream",
    "parse_chat_request",
]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


class ChatStreamParser(StreamParser):
    provider = "openai"
    terminal_marker = "data: [DONE]"

    def __init__(
        self, *, provider: str = "openai", lenient_eof: bool = False, id_factory: Callable[[], str] | None = None
    ) -> None:
        super().__init__(id_factory=id_factory)
        self.provider = provider  # type: ignore[misc]
        self._lenient_eof = lenient_eof
        self._finish_reason: str | None = None
        self._last_key: int | None = None
        #: call key -> the name pieces so far of a call not started yet.
        self._names: dict[int, str] = {}

    def _handle(self, event: str, data: str) -> list[LLMStreamItem]:
        if data.startswith("[DONE]"):
            return self._done()
        chunk = self.decode_object(data)
        error = chunk.get("error")
        if error is not None:
            if isinstance(error, dict):
                code = error.get("type") or error.get("code")
                return self.in_band_error(
                    None if code is None else str(code), error.get("message"), status=error.get("code")
                )
            return self.in_band_error(None, str(error))
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        items: list[LLMStreamItem] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we never ask for n > 1
            delta = choice.get("delta") or {}
            items += self._delta(delta)
            reason = choice.get("finish_reason")
            if reason:
                self._finish_reason = reason
                items += self._start_named()
                items += self.tools.end_all()
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        return items

    def _delta(self, delta: dict[str, Any]) -> list[LLMStreamItem]:
        items: list[LLMStreamItem] = []
        for key in ("reasoning_content", "reasoning"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                items.append(ReasoningDelta(text=text))
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                items.append(TextDelta(text=text))
        for call in delta.get("tool_calls") or ():
            items += self._tool_call(call)
        return items

    def _tool_call(self, call: Any) -> list[LLMStreamItem]:
        if not isinstance(call, dict):
            raise MalformedStream("tool_calls entry is not an object")
        function = call.get("function") or {}
        call_id = call.get("id") or None
        key = call.get("index")
        if not isinstance(key, int):
            # No index (some compatible servers): a new id is a new call, else the last one.
            if call_id is not None and all(self.tools.current_id(k) != call_id for k in range(self._keys())):
                key = self._keys()
            else:
                key = self._last_key if self._last_key is not None else 0
        known_id = self.tools.current_id(key)
        new = self.tools.knows(key) and call_id is not None and known_id is not None and call_id != known_id
        self._last_key = key
        # A new call (another key, or a new id under this one) means the names of the
        # calls before it are complete.
        items = self._start_named(except_key=None if new else key)
        items += self.tools.open(key, id=call_id, new=new)
        name = function.get("name")
        if isinstance(name, str) and name and not self.tools.started(key):
            so_far = self._names.get(key, "")
            if name != so_far:
                self._names[key] = so_far + name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send the object itself
            arguments = msgspec.json.encode(arguments).decode()
        if isinstance(arguments, str) and arguments:
            items += self._start_named(only_key=key)
            items += self.tools.args(key, arguments)
        return items

    def _start_named(self, *, except_key: int | None = None, only_key: int | None = None) -> list[LLMStreamItem]:
        """Start the calls whose (possibly split) names are complete: all of them, all
        but ``except_key``, or only ``only_key``."""
        items: list[LLMStreamItem] = []
        for key in list(self._names):
            if key == except_key or (only_key is not None and key != only_key):
                continue
            items += self.tools.open(key, name=self._names.pop(key))
        return items

    def _keys(self) -> int:
        return self.tools.count

    def _usage(self, usage: dict[str, Any]) -> None:
        prompt = usage.get("prompt_tokens_details") or {}
        completion = usage.get("completion_tokens_details") or {}
        self.set_usage(
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            total_tokens=usage.get("total_tokens"),
            reasoning_tokens=completion.get("reasoning_tokens") if isinstance(completion, dict) else None,
            cached_input_tokens=prompt.get("cached_tokens") if isinstance(prompt, dict) else None,
        )

    def _done(self) -> list[LLMStreamItem]:
        items = self._start_named()
        raw = self._finish_reason
        reason: FinishReason = self.natural_finish() if raw is None else _FINISH.get(raw, "other")
        return items + self.finish(reason, raw)

    def _at_eof(self) -> list[LLMStreamItem]:
        if self._lenient_eof and self._finish_reason is not None:
            return self._done()
        return super()._at_eof()


def _chat_part(part: Part) -> dict[str, Any] | None:
    """One part as Chat Completions takes it; None for what Chat cannot take (video, remote
    audio, image file handles)."""
    if isinstance(part, TextChunk):
        return {"type": "text", "text": part.text}
    if part.kind == "image" and part.source in ("data", "url"):
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if part.kind == "audio" and part.source == "data" and part.mime_type in _AUDIO_FORMATS:
        return {"type": "input_audio", "input_audio": {"data": part.value, "format": _AUDIO_FORMATS[part.mime_type]}}
    if part.kind == "document" and part.source == "data":
        return {"type": "file", "file": {"filename": "document", "file_data": data_url(part)}}
    if part.kind == "document" and part.source == "file":
        return {"type": "file", "file": {"file_id": part.value}}
    return None


def _chat_parts(content: Any) -> str | list[dict[str, Any]]:
    return provider_parts(content, _chat_part)


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def build_chat_messages(messages: Sequence[Any], *, developer_role: bool = True) -> list[dict[str, Any]]:
    """AG-UI messages as Chat Completions ``messages``.

    ``developer_role=False`` sends developer messages as ``system`` (compatible
    servers do not know the ``developer`` role). Reasoning is not sent back: Chat
    has no field for it and DeepSeek rejects ``reasoning_content`` in the input.
    """
    out: list[dict[str, Any]] = []
    for turn in group_turns(messages):
        message = turn.message
        if isinstance(message, SystemMessage | DeveloperMessage):
            role = "developer" if isinstance(message, DeveloperMessage) and developer_role else "system"
            entry: dict[str, Any] = {"role": role, "content": message.content}
            if message.name:
                entry["name"] = message.name
            out.append(entry)
        elif isinstance(message, UserMessage):
            entry = {"role": "user", "content": _chat_parts(message.content)}
            if message.name:
                entry["name"] = message.name
            out.append(entry)
        elif isinstance(message, AssistantMessage):
            entry = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                    for c in message.tool_calls
                ]
            if entry["content"] is None and "tool_calls" not in entry:
                continue  # an empty assistant turn (reasoning only) says nothing to Chat
            out.append(entry)
        elif isinstance(message, ToolMessage):
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": tool_result_text(message)})
    return out


def _chat_tools(tools: Sequence[LLMTool], tool_choice: ToolChoice, *, strict_supported: bool = True) -> dict[str, Any]:
    """``tools`` / ``tool_choice`` fields of a Chat request (empty without tools)."""
    if not tools:
        return {}
    mode, name = resolve_tool_choice(tool_choice, [t.name for t in tools])
    entries = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        if tool.strict and strict_supported:
            function["strict"] = True
        entries.append({"type": "function", "function": function})
    choice: Any = mode if name is None else {"type": "function", "function": {"name": name}}
    return {"tools": entries, "tool_choice": choice}


def build_chat_body(
    model: str, request: CompletionRequest, *, compatible: bool = False, strict_tools: bool = True
) -> dict[str, Any]:
    """The JSON body of a streaming Chat Completions request."""
    body: dict[str, Any] = {
        "model": model,
        "messages": build_chat_messages(request.messages, developer_role=not compatible),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(_chat_tools(request.tools, request.tool_choice, strict_supported=strict_tools))
    if request.tools and not request.parallel_tool_calls:
        # On by default in the API; sent only to turn it off, because some reasoning
        # models and compatible servers reject the parameter itself.
        body["parallel_tool_calls"] = False
    if request.max_output_tokens is not None:
        # OpenAI renamed max_tokens (rejected by reasoning models); servers that copy
        # the API mostly still know only the old name.
        body["max_tokens" if compatible else "max_completion_tokens"] = request.max_output_tokens
    return body


class OpenAIPlatformClient(StreamingLLMClient):
    """What both OpenAI APIs (Chat Completions, Responses) share: the key from
    ``OPENAI_API_KEY``, the base URL from ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``) unless given, and bearer authentication (none
    without a key: local compatible servers)."""

    provider: ClassVar[str] = "openai"
    label: ClassVar[str] = "OpenAI"
    key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    default_base_url: ClassVar[str | None] = OPENAI_DEFAULT_BASE_URL

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}


class OpenAIChatClient(OpenAIPlatformClient):
    """OpenAI Chat Completions (key and base URL: :class:`OpenAIPlatformClient`).
    ``reasoning_effort`` is passed through for reasoning models."""

    _compatible: ClassVar[bool] = False

    def __init__(
        self, model: str, *, reasoning_effort: str | None = None, strict_tools: bool = True, **options: Any
    ) -> None:
        super().__init__(model, **options)
        self.reasoning_effort = reasoning_effort
        self.strict_tools = strict_tools

    def new_parser(self) -> StreamParser:
        return ChatStreamParser(provider=self.provider, lenient_eof=self._compatible, id_factory=self.id_factory)

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body = build_chat_body(self.model, request, compatible=self._compatible, strict_tools=self.strict_tools)
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        return f"{self.base_url}/chat/completions", body

    def reasoning_capabilities(self) -> ReasoningCapabilities | None:
        """OpenAI's Chat Completions never streams a reasoning model's reasoning: none
        reaches the client. A compatible server's model may stream ``reasoning_content``
        (read when it comes): not declared, the server decides."""
        return None if self._compatible else ReasoningCapabilities(supported=False)


class OpenAICompatibleClient(OpenAIChatClient):
    """A server that speaks Chat Completions (vLLM, Ollama, llama.cpp, LM Studio,
    OpenRouter, litellm ...). ``base_url`` is required (``.../v1``). The key comes only
    from ``api_key=`` or ``OPENAI_COMPATIBLE_API_KEY`` -- never ``OPENAI_API_KEY``, which
    must not be sent to a third-party server -- and may be absent (local servers).
    Tools are sent without ``strict`` unless ``strict_tools=True``; developer messages
    go as ``system``; reasoning deltas (``reasoning_content`` / ``reasoning``) are read.
    """

    provider: ClassVar[str] = "openai-compatible"
    label: ClassVar[str] = "An OpenAI-compatible server"
    key_env: ClassVar[tuple[str, ...]] = ("OPENAI_COMPATIBLE_API_KEY",)
    key_required: ClassVar[bool] = False
    base_url_env: ClassVar[str | None] = None
    default_base_url: ClassVar[str | None] = None
    _compatible: ClassVar[bool] = True

    def __init__(self, model: str, *, strict_tools: bool = False, **options: Any) -> None:
        super().__init__(model, strict_tools=strict_tools, **options)


# --------------------------------------------------------------------------- serving


def _parts_from_chat(content: Any, where: str) -> str | list[Any]:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise RemoteInputError(f"{where}: content must be a string or a list of parts")
    parts: list[Any] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(TextPart(text=part["text"]))
        elif kind == "image_url" and isinstance((part.get("image_url") or {}).get("url"), str):
            url = part["image_url"]["url"]
            head, comma, data = url.partition(",")
            if url.startswith("data:") and comma and head.endswith(";base64"):
                parts.append(ImagePart(source=DataSource(value=data, mime_type=head[5:-7])))
            else:
                parts.append(ImagePart(source=UrlSource(value=url)))
        else:
            raise RemoteInputError(f"{where}.content[{index}]: unsupported part {kind!r}")
    return parts


def parse_chat_request(body: Any) -> tuple[str, CompletionRequest]:
    """``(model, request)`` from a Chat Completions request body -- the inverse of
    :func:`build_chat_body`, for serving an in-process :class:`LLMClient` over the
    Chat Completions wire format. Raises :class:`RemoteInputError` naming the JSON path."""
    if not isinstance(body, dict):
        raise RemoteInputError("$: request body must be a JSON object")
    model = body.get("model")
    raw_messages = body.get("messages")
    if not isinstance(model, str) or not isinstance(raw_messages, list):
        raise RemoteInputError("$: model (string) and messages (array) are required")
    messages: list[Any] = []
    for index, raw in enumerate(raw_messages):
        where = f"$.messages[{index}]"
        if not isinstance(raw, dict):
            raise RemoteInputError(f"{where}: must be an object")
        role, mid = raw.get("role"), f"msg-{index}"
        content = raw.get("content")
        if role in ("system", "developer"):
            text = _parts_from_chat(content, where)
            cls = SystemMessage if role == "system" else DeveloperMessage
            messages.append(cls(id=mid, content=text if isinstance(text, str) else "".join(p.text for p in text)))
        elif role == "user":
            messages.append(UserMessage(id=mid, content=_parts_from_chat(content, where)))
        elif role == "assistant":
            calls = [
                ToolCall(id=c["id"], function=FunctionCall(name=c["function"]["name"], arguments=c["function"].get("arguments") or ""))
                for c in raw.get("tool_calls") or ()
            ]
            messages.append(AssistantMessage(id=mid, content=content or None, tool_calls=calls or None))
        elif role == "tool":
            if not isinstance(raw.get("tool_call_id"), str):
                raise RemoteInputError(f"{where}.tool_call_id: required for a tool message")
            messages.append(ToolMessage(id=mid, tool_call_id=raw["tool_call_id"], content=_parts_from_chat(content, where)))
        else:
            raise RemoteInputError(f"{where}.role: unknown role {role!r}")
    tools = [
        LLMTool(
            name=t["function"]["name"],
            description=t["function"].get("description") or "",
            parameters=t["function"].get("parameters") or {"type": "object", "properties": {}},
            strict=bool(t["function"].get("strict")),
        )
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("type") == "function"
    ]
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name") or "auto"
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return model, CompletionRequest(
        messages=messages,
        tools=tools,
        tool_choice=choice if isinstance(choice, str) else "auto",
        parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        max_output_tokens=max_tokens if isinstance(max_tokens, int) else None,
    )


# --------------------------------------------------------------------------- rendering

_FINISH_OUT = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter"}


async def encode_chat_stream(
    items: AsyncIterable[LLMStreamItem], *, model: str, completion_id: str = "chatcmpl-agui-engine", created: int = 0
) -> AsyncGenerator[bytes, None]:
    """Render ``LLMStreamItem``s as Chat Completions SSE frames (the exact wire format
    :class:`ChatStreamParser` and the official SDK read), ending with ``[DONE]``;
    a ``StreamError`` becomes an in-band ``error`` chunk and no ``[DONE]``.

    Reasoning goes out as ``reasoning_content`` (the compatible-server convention).
    Items that Chat cannot express (signatures, encrypted reasoning) are dropped.
    """
    enc = msgspec.json.Encoder()
    role_sent = False

    def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None) -> bytes:
        nonlocal role_sent
        body: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
        if usage is not None:
            body["choices"] = []
            body["usage"] = usage
        else:
            delta = dict(delta or {})
            if not role_sent:
                delta = {"role": "assistant", **delta}
                role_sent = True
            body["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            body["usage"] = None
        return b"data: " + enc.encode(body) + b"\n\n"

    usage_item: Usage | None = None
    async for item in items:
        if isinstance(item, TextDelta):
            if item.text:
                yield chunk({"content": item.text})
        elif isinstance(item, ReasoningDelta):
            if item.text:
                yield chunk({"reasoning_content": item.text})
        elif isinstance(item, ToolCallStart):
            yield chunk(
                {"tool_calls": [{"index": item.index, "id": item.id, "type": "function", "function": {"name": item.name, "arguments": ""}}]}
            )
        elif isinstance(item, ToolCallArgsDelta):
            yield chunk({"tool_calls": [{"index": item.index, "function": {"arguments": item.delta}}]})
        elif isinstance(item, ToolCallEnd):
            continue
        elif isinstance(item, Usage):
            usage_item = item
        elif isinstance(item, Finish):
            yield chunk({}, _FINISH_OUT.get(item.reason, "stop"))
            if usage_item is not None:
                usage: dict[str, Any] = {
                    "prompt_tokens": usage_item.input_tokens or 0,
                    "completion_tokens": usage_item.output_tokens or 0,
                    "total_tokens": usage_item.total_tokens
                    if usage_item.total_tokens is not None
                    else (usage_item.input_tokens or 0) + (usage_item.output_tokens or 0),
                }
                if usage_item.cached_input_tokens is not None:
                    usage["prompt_tokens_details"] = {"cached_tokens": usage_item.cached_input_tokens}
                if usage_item.reasoning_tokens is not None:
                    usage["completion_tokens_details"] = {"reasoning_tokens": usage_item.reasoning_tokens}
                yield chunk(usage=usage)
            yield b"data: [DONE]\n\n"
            return
        elif isinstance(item, StreamError):
            body = {"error": {"message": item.message, "type": item.code or "server_error", "param": None, "code": item.code}}
            yield b"data: " + enc.encode(body) + b"\n\n"
            return
    # The model's iterator ended without Finish: leave the stream without [DONE] so the
    # reader sees a truncated stream, as it would from a real server.
