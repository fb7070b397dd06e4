"""OpenAI Responses API as an :class:`LLMClient`.

Theory of operation
-------------------
``POST {base_url}/responses`` with ``stream: true``; the answer is SSE with an
``event:`` line per frame and the same name in ``data.type``. No ``[DONE]``: the
stream ends with ``response.completed`` / ``response.incomplete`` /
``response.failed`` (or an ``error`` event). :class:`ResponsesStreamParser` routes
on ``data.type`` through its ``HANDLERS`` table:

* ``response.output_item.added`` of a ``function_call`` starts a tool call keyed by
  the item's ``id`` (``fc_...``) whose tool call id is the item's ``call_id``
  (``call_...``, the id a ``function_call_output`` must reference);
  ``response.function_call_arguments.delta`` is routed by ``item_id``;
  ``...arguments.done`` / ``output_item.done`` deliver whatever the deltas did not and
  end the call.
* ``response.output_text.delta`` / ``response.refusal.delta`` -> ``TextDelta``.
* ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` ->
  ``ReasoningDelta`` (summary parts separated by a blank line);
  ``output_item.done`` of a ``reasoning`` item with ``encrypted_content`` ->
  ``ReasoningDelta(encrypted="<rs_id>:<encrypted_content>")`` (the item id is needed
  to send the item back; see :func:`pack_reasoning`).
* ``response.completed`` -> usage + ``Finish`` (``tool_calls`` when calls were made);
  ``response.incomplete`` -> ``Finish`` with the reason (``length`` /
  ``content_filter``); ``error`` / ``response.failed`` -> ``StreamError`` (whichever
  comes first; a real stream may carry only one of them).

Requests are stateless (``store: false``): reasoning goes back as ``reasoning``
input items with their ``encrypted_content`` (requested with ``include``) when the
caller configured ``reasoning``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from agui_engine.llm import FinishReason, LLMStreamItem, ReasoningDelta, TextDelta, resolve_tool_choice
from agui_engine.protocol.capabilities import ReasoningCapabilities
from agui_engine.protocol.events import (
    AssistantMessage,
    DeveloperMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

from .openai_chat import OpenAIPlatformClient
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
    Handler,
    MalformedStream,
    StreamParser,
    TypedEventParser,
)

__all__ = [
    "OpenAIResponsesClient",
    "ResponsesStreamParser",
    "build_responses_body",
    "build_responses_input",
    "pack_reasoning",
    "unpack_reasoning",
]


def pack_reasoning(item_id: Any, encrypted_content: str) -> str:
    """The opaque value a client stores for a reasoning item: ``<rs_id>:<encrypted_content>``.

    A reasoning input item must carry its ``id`` as well as its ``encrypted_content``,
    and ``ReasoningDelta`` has no id field, so the id travels inside the opaque value
    (unambiguous: ids have no ``:``, encrypted content is URL-safe base64).
    """
    if isinstance(item_id, str) and item_id and ":" not in item_id:
        return f"{item_id}:{encrypted_content}"
    return encrypted_content


def unpack_reasoning(value: str) -> tuple[str | None, str]:
    """``(item_id, encrypted_content)`` from :func:`pack_reasoning`'s value."""
    head, sep, rest = value.partition(":")
    if sep and head.startswith("rs_"):
        return head, rest
    return None, value


class ResponsesStreamParser(TypedEventParser):
    provider = "openai"
    terminal_marker = "response.completed"

    def __init__(self, *, id_factory: Callable[[], str] | None = None) -> None:
        super().__init__(id_factory=id_factory)
        self._summary_seen: set[tuple[str, int]] = set()
        self._last_sequence = -1

    def _check(self, payload: dict[str, Any]) -> None:
        sequence = payload.get("sequence_number")
        if isinstance(sequence, int):
            if sequence <= self._last_sequence:
                raise MalformedStream(f"sequence_number {sequence} after {self._last_sequence}")
            self._last_sequence = sequence

    # -- handlers
    def _on_response(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        response = payload.get("response") or {}
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        return []

    def _on_item_added(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        item = payload.get("item") or {}
        if item.get("type") != "function_call":
            return []
        key = item.get("id") or item.get("call_id")
        if not key:
            raise MalformedStream("function_call item without id")
        items = self.tools.open(key, id=item.get("call_id") or None, name=item.get("name") or None)
        if item.get("arguments"):
            items += self.tools.args(key, item["arguments"])
        return items

    def _on_item_done(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        item = payload.get("item") or {}
        kind = item.get("type")
        if kind == "function_call":
            key = item.get("id") or item.get("call_id")
            if not self.tools.knows(key):  # done without added: take it whole
                self.tools.open(key, id=item.get("call_id") or None, name=item.get("name") or None)
            return self.tools.complete_args(key, item.get("arguments") or "") + self.tools.end(key)
        if kind == "reasoning" and item.get("encrypted_content"):
            return [ReasoningDelta(encrypted=pack_reasoning(item.get("id"), item["encrypted_content"]))]
        return []

    def _on_text(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        delta = payload.get("delta")
        return [TextDelta(text=delta)] if isinstance(delta, str) and delta else []

    def _on_summary(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        delta = payload.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        part = (str(payload.get("item_id")), int(payload.get("summary_index") or 0))
        first_of_part = part not in self._summary_seen
        self._summary_seen.add(part)
        if first_of_part and part[1] > 0:
            delta = "\n\n" + delta  # summary parts are paragraphs
        return [ReasoningDelta(text=delta)]

    def _on_reasoning_text(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        delta = payload.get("delta")
        return [ReasoningDelta(text=delta)] if isinstance(delta, str) and delta else []

    def _on_args(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        delta = payload.get("delta")
        return self.tools.args(payload.get("item_id"), delta) if isinstance(delta, str) else []

    def _on_args_done(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        return self.tools.complete_args(payload.get("item_id"), payload.get("arguments") or "")

    def _usage(self, response: dict[str, Any]) -> None:
        usage = response.get("usage")
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        if not isinstance(usage, dict):
            return
        self.set_usage(
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            total_tokens=usage.get("total_tokens"),
            reasoning_tokens=(usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
            cached_input_tokens=(usage.get("input_tokens_details") or {}).get("cached_tokens"),
        )

    def _on_completed(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        self._usage(payload.get("response") or {})
        return self.finish(self.natural_finish(), "completed")

    def _on_incomplete(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        response = payload.get("response") or {}
        self._usage(response)
        raw = (response.get("incomplete_details") or {}).get("reason") or "incomplete"
        reason: FinishReason = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(raw, "other")  # type: ignore[assignment]
        return self.finish(reason, raw)

    def _on_failed(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        response = payload.get("response") or {}
        self._usage(response)
        error = response.get("error") or {}
        return self.in_band_error(error.get("code") or "response_failed", error.get("message"))

    def _on_error(self, payload: dict[str, Any]) -> list[LLMStreamItem]:
        nested = payload.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else payload
        return self.in_band_error(error.get("code") or error.get("type") or None, error.get("message"))

    #: event type -> handler. Everything else (lifecycle, content parts, annotations,
    #: built-in tool progress) carries nothing the engine needs and is skipped.
    HANDLERS: ClassVar[Mapping[str, Handler]] = {
        "response.created": _on_response,
        "response.in_progress": _on_response,
        "response.output_item.added": _on_item_added,
        "response.output_item.done": _on_item_done,
        "response.output_text.delta": _on_text,
        "response.refusal.delta": _on_text,
        "response.reasoning_summary_text.delta": _on_summary,
        "response.reasoning_text.delta": _on_reasoning_text,
        "response.function_call_arguments.delta": _on_args,
        "response.function_call_arguments.done": _on_args_done,
        "response.completed": _on_completed,
        "response.incomplete": _on_incomplete,
        "response.failed": _on_failed,
        "error": _on_error,
    }


def _input_part(part: Part) -> dict[str, Any] | None:
    """One part as a Responses input item's content takes it; None for audio and video (not
    accepted by the Responses API input)."""
    if isinstance(part, TextChunk):
        return {"type": "input_text", "text": part.text}
    if part.kind == "image":
        if part.source == "file":
            return {"type": "input_image", "file_id": part.value, "detail": "auto"}
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    if part.kind == "document":
        if part.source == "file":
            return {"type": "input_file", "file_id": part.value}
        if part.source == "url":
            return {"type": "input_file", "file_url": part.value}
        return {"type": "input_file", "filename": "document", "file_data": data_url(part)}
    return None


def _input_parts(content: Any) -> str | list[dict[str, Any]]:
    return provider_parts(content, _input_part)


def build_responses_input(messages: Sequence[Any], *, send_reasoning: bool) -> list[dict[str, Any]]:
    """AG-UI messages as Responses ``input`` items."""
    out: list[dict[str, Any]] = []
    for turn in group_turns(messages):
        message = turn.message
        if turn.role == "assistant":
            if send_reasoning:
                for reasoning in turn.reasoning:
                    if not reasoning.encrypted_value:
                        continue
                    item_id, encrypted = unpack_reasoning(reasoning.encrypted_value)
                    item_id = item_id or (reasoning.id if reasoning.id.startswith("rs_") else None)
                    if item_id is None:
                        continue  # the API requires the item's own id; without it the item is refused
                    out.append(
                        {
                            "type": "reasoning",
                            "id": item_id,
                            "summary": [{"type": "summary_text", "text": reasoning.content}] if reasoning.content else [],
                            "encrypted_content": encrypted,
                        }
                    )
            if isinstance(message, AssistantMessage):
                if message.content:
                    out.append({"role": "assistant", "content": message.content})
                for call in message.tool_calls or ():
                    out.append(
                        {"type": "function_call", "call_id": call.id, "name": call.function.name, "arguments": call.function.arguments}
                    )
        elif isinstance(message, SystemMessage | DeveloperMessage):
            out.append({"role": turn.role, "content": message.content})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": _input_parts(message.content)})
        elif isinstance(message, ToolMessage):
            out.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": tool_result_text(message)})
    return out


def build_responses_body(
    model: str, request: CompletionRequest, *, reasoning: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body of a streaming Responses request (stateless: ``store: false``)."""
    body: dict[str, Any] = {
        "model": model,
        "input": build_responses_input(request.messages, send_reasoning=reasoning is not None),
        "stream": True,
        "store": False,
    }
    tools = request.tools
    if tools:
        mode, name = resolve_tool_choice(request.tool_choice, [t.name for t in tools])
        entries = []
        for tool in tools:
            entry: dict[str, Any] = {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": tool.strict,  # the Responses API defaults strict to true: always say
            }
            entries.append(entry)
        body["tools"] = entries
        body["tool_choice"] = mode if name is None else {"type": "function", "name": name}
        if not request.parallel_tool_calls:  # on by default; see build_chat_body
            body["parallel_tool_calls"] = False
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if reasoning is not None:
        body["reasoning"] = dict(reasoning)
        body["include"] = ["reasoning.encrypted_content"]
    return body


class OpenAIResponsesClient(OpenAIPlatformClient):
    """OpenAI Responses API (key and base URL: :class:`OpenAIPlatformClient`).
    ``reasoning`` (e.g. ``{"effort": "medium", "summary": "auto"}``) is for reasoning
    models: it asks for summaries and encrypted reasoning, which the next request
    sends back."""

    parser_class: ClassVar[type[StreamParser]] = ResponsesStreamParser

    def __init__(self, model: str, *, reasoning: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self.reasoning = dict(reasoning) if reasoning is not None else None

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        return f"{self.base_url}/responses", build_responses_body(self.model, request, reasoning=self.reasoning)

    def reasoning_capabilities(self) -> ReasoningCapabilities | None:
        """``reasoning`` given: summaries streamed when it asks for them (``summary``), and
        the encrypted reasoning items always (``include``). Not given: not declared (a
        reasoning model reasons anyway, but what reaches the client depends on the model)."""
        if self.reasoning is None:
            return None
        return ReasoningCapabilities(supported=True, streaming=bool(self.reasoning.get("summary")), encrypted=True)
