"""Fidelity of the recorded fixtures: the official SDKs (openai, anthropic, google-genai;
test-only dependencies) read every fixture from the replay server, and what each SDK
makes of it agrees with what our adapters make of it.

Each SDK's reading is reduced to the digest of ``conftest.digest``: text, reasoning,
signatures / encrypted reasoning, tool calls (id, name, parsed arguments), usage and
how the stream ended. A fixture that an SDK would reject, or that our parser reads
differently, fails here.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agui_engine.adapters.replay import PROVIDERS, ReplayServer, fixture_names, load_fixture

from .conftest import REQUEST_HISTORY, REQUEST_TOOLS, digest_fixture

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
genai = pytest.importorskip("google.genai")
genai_types = pytest.importorskip("google.genai.types")
genai_errors = pytest.importorskip("google.genai.errors")

ALL = [(p, n) for p in PROVIDERS for n in fixture_names(p)]
USER = [{"role": "user", "content": "hi"}]


def _blank() -> dict[str, Any]:
    return {"text": "", "reasoning": "", "signatures": [], "encrypted": [], "calls": [], "usage": None, "end": None}


def _args(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return ("partial", text)


async def _openai_chat(base_url: str) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0)
    out = _blank()
    calls: dict[int, list[Any]] = {}
    finish = None
    try:
        stream = await client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                extra = delta.model_extra or {}
                out["reasoning"] += extra.get("reasoning_content") or extra.get("reasoning") or ""
                out["text"] += (delta.content or "") + (delta.refusal or "")
                for call in delta.tool_calls or ():
                    index = call.index if call.index is not None else len(calls)
                    entry = calls.setdefault(index, [None, None, ""])
                    entry[0] = entry[0] or call.id
                    if call.function:
                        # Name pieces are joined, as the SDK's ChatCompletionStreamState does.
                        entry[1] = (entry[1] or "") + (call.function.name or "") or None
                        entry[2] += call.function.arguments or ""
                finish = choice.finish_reason or finish
            if chunk.usage:
                u = chunk.usage
                out["usage"] = (
                    u.prompt_tokens,
                    u.completion_tokens,
                    u.total_tokens,
                    u.completion_tokens_details.reasoning_tokens if u.completion_tokens_details else None,
                    u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else None,
                )
        out["end"] = ("finish", finish)
    except openai.APIStatusError as exc:
        out["end"] = ("http_error", exc.status_code)
    except openai.APIError as exc:
        out["end"] = ("error", exc.message)
    out["calls"] = [(c[0], c[1], _args(c[2])) for _, c in sorted(calls.items())]
    await client.close()
    return out


async def _openai_responses(base_url: str) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0)
    out = _blank()
    calls: dict[str, list[Any]] = {}
    try:
        stream = await client.responses.create(model="m", input="hi", stream=True)
        async for event in stream:
            kind = event.type
            if kind == "response.output_text.delta":
                out["text"] += event.delta
            elif kind == "response.reasoning_summary_text.delta":
                if event.summary_index > 0 and (event.item_id, event.summary_index) not in calls:
                    out["reasoning"] += "\n\n"
                    calls[(event.item_id, event.summary_index)] = []  # type: ignore[index]
                out["reasoning"] += event.delta
            elif kind == "response.output_item.added" and event.item.type == "function_call":
                calls[event.item.id] = [event.item.call_id, event.item.name, ""]
            elif kind == "response.function_call_arguments.delta":
                calls[event.item_id][2] += event.delta
            elif kind == "response.output_item.done" and event.item.type == "reasoning" and event.item.encrypted_content:
                out["encrypted"].append(f"{event.item.id}:{event.item.encrypted_content}")  # as pack_reasoning
            elif kind in ("response.completed", "response.incomplete"):
                u = event.response.usage
                out["usage"] = (
                    u.input_tokens,
                    u.output_tokens,
                    u.total_tokens,
                    u.output_tokens_details.reasoning_tokens,
                    u.input_tokens_details.cached_tokens,
                )
                out["end"] = ("finish", event.response.status)
            elif kind in ("error", "response.failed") and out["end"] is None:
                out["end"] = ("error", kind)
    except openai.APIStatusError as exc:
        out["end"] = ("http_error", exc.status_code)
    out["calls"] = [(c[0], c[1], _args(c[2])) for k, c in calls.items() if isinstance(k, str)]
    await client.close()
    return out


async def _anthropic(base_url: str) -> dict[str, Any]:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="test", max_retries=0)
    out = _blank()
    blocks: dict[int, list[Any]] = {}
    usage: dict[str, int] = {}
    stop = None
    try:
        stream = await client.messages.create(model="m", max_tokens=100, messages=USER, stream=True)
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                usage = event.message.usage.model_dump()
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = [block.id, block.name, ""]
                elif block.type == "redacted_thinking":
                    out["encrypted"].append(f"redacted_thinking:{block.data}")  # as pack_redacted
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    out["text"] += delta.text
                elif delta.type == "thinking_delta":
                    out["reasoning"] += delta.thinking
                elif delta.type == "signature_delta":
                    out["signatures"].append(delta.signature)
                elif delta.type == "input_json_delta":
                    blocks[event.index][2] += delta.partial_json
            elif kind == "message_delta":
                stop = event.delta.stop_reason
                usage["output_tokens"] = event.usage.output_tokens
            elif kind == "message_stop":
                out["end"] = ("finish", stop)
    except anthropic.APIStatusError as exc:
        out["end"] = ("http_error" if exc.status_code != 200 else "error", exc.status_code)
    if usage:
        total_in = usage["input_tokens"] + (usage.get("cache_read_input_tokens") or 0) + (usage.get("cache_creation_input_tokens") or 0)
        out["usage"] = (total_in, usage["output_tokens"], total_in + usage["output_tokens"], None, usage.get("cache_read_input_tokens") or 0)
    out["calls"] = [(c[0], c[1], _args(c[2])) for _, c in sorted(blocks.items())]
    await client.close()
    return out


async def _gemini(base_url: str) -> dict[str, Any]:
    client = genai.Client(api_key="test", http_options=genai_types.HttpOptions(base_url=base_url))
    out = _blank()
    finish = None
    try:
        async for response in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
            u = response.usage_metadata
            if u is not None:
                output = None if u.candidates_token_count is None and u.thoughts_token_count is None else (
                    (u.candidates_token_count or 0) + (u.thoughts_token_count or 0)
                )
                out["usage"] = (u.prompt_token_count, output, u.total_token_count, u.thoughts_token_count, u.cached_content_token_count)
            if not response.candidates:
                if response.prompt_feedback and response.prompt_feedback.block_reason:
                    out["end"] = ("blocked", str(response.prompt_feedback.block_reason.value))
                continue
            candidate = response.candidates[0]
            for part in (candidate.content.parts if candidate.content else None) or ():
                if part.thought_signature:
                    out["signatures"].append(base64.b64encode(part.thought_signature).decode())
                if part.function_call:
                    call = part.function_call
                    out["calls"].append((call.id, call.name, call.args or {}))
                elif part.text:
                    out["reasoning" if part.thought else "text"] += part.text
            if candidate.finish_reason:
                finish = candidate.finish_reason.value
        if out["end"] is None:
            out["end"] = ("finish", finish)
    except genai_errors.APIError as exc:
        out["end"] = ("error", exc.code)
    except genai_errors.UnknownApiResponseError:  # an error as bare JSON lines: the SDK fails to parse it
        out["end"] = ("error", None)
    return out


SDK = {
    "openai_chat": _openai_chat,
    "openai_compatible": _openai_chat,
    "openai_responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


def _signature_b64(sig: str) -> str:
    return base64.b64encode(base64.b64decode(sig)).decode()


@pytest.mark.parametrize(("provider", "name"), ALL)
async def test_official_sdk_reads_the_fixture_as_we_do(provider: str, name: str) -> None:
    fixture = load_fixture(provider, name)
    async with ReplayServer() as server:
        sdk = await SDK[provider](server.base_url(provider, name))
    assert server.requests, "the SDK reached the replay server"
    if not fixture.is_stream:
        # HTTP errors: the SDK raises its typed error with the status (no retries: max_retries=0).
        assert sdk["end"] in (("http_error", fixture.status), ("error", fixture.status)), sdk["end"]
        return
    ours = digest_fixture(provider, name)
    assert sdk["text"] == ours["text"]
    assert sdk["reasoning"] == ours["reasoning"]
    if provider == "gemini":  # the SDK decodes the base64 signature; compare encoded
        assert sdk["signatures"] == [_signature_b64(s) for s in ours["signatures"]]
        # Gemini sends no ids: ours are minted, the SDK's are None.
        assert [(n, a) for _, n, a in sdk["calls"]] == [(n, a) for _, n, a in ours["calls"]]
    else:
        assert sdk["signatures"] == ours["signatures"]
        assert sdk["calls"] == ours["calls"]
    assert sdk["encrypted"] == ours["encrypted"]
    if ours["end"][0] == "finish":
        assert sdk["end"] is not None and sdk["end"][0] == "finish", (sdk["end"], ours["end"])
        assert sdk["usage"] == ours["usage"]
    else:
        # An in-band error, a blocked prompt or a truncated stream: the SDK either raises /
        # reports it, or (truncation: no terminal marker) simply never sees a finish.
        assert sdk["end"] is None or sdk["end"][0] != "finish" or ours["end"][1] == "truncated", sdk["end"]
        if ours["end"][1] == "truncated" and sdk["end"] is not None and sdk["end"][0] == "finish":
            assert provider in ("gemini", "openai_chat", "openai_compatible")


# --------------------------------------------------------------------------- requests
#
# The other direction: the request bodies our adapters build must be valid for the
# SDKs' own request types (openai / anthropic TypedDicts, google-genai pydantic models),
# with unknown keys refused, so a misspelled or misplaced field fails here.


def _forbid_extra_keys(package: str) -> None:
    """Make pydantic refuse unknown keys in every TypedDict of an SDK's ``types``."""
    import importlib
    import pkgutil

    from typing_extensions import is_typeddict

    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - optional extras of the SDK
            continue
        for value in vars(module).values():
            if isinstance(value, type) and is_typeddict(value):
                value.__pydantic_config__ = {"extra": "forbid", "arbitrary_types_allowed": True}  # type: ignore[attr-defined]


@pytest.mark.parametrize("tool_choice", ["auto", "required", "none", "lookup"])
@pytest.mark.parametrize("parallel", [True, False])
def test_request_bodies_are_valid_for_the_sdks_request_types(tool_choice: str, parallel: bool) -> None:
    from pydantic import TypeAdapter

    from agui_engine.adapters.anthropic import build_anthropic_body
    from agui_engine.adapters.gemini import build_gemini_body
    from agui_engine.adapters.openai_chat import build_chat_body
    from agui_engine.adapters.openai_responses import build_responses_body
    from agui_engine.adapters.provider import CompletionRequest

    _forbid_extra_keys("openai.types")
    _forbid_extra_keys("anthropic.types")
    from anthropic.types import message_create_params
    from openai.types.chat import completion_create_params
    from openai.types.responses import response_create_params

    request = CompletionRequest(
        messages=REQUEST_HISTORY, tools=REQUEST_TOOLS, tool_choice=tool_choice, parallel_tool_calls=parallel, max_output_tokens=256
    )
    TypeAdapter(completion_create_params.CompletionCreateParamsStreaming).validate_python(build_chat_body("gpt-4o", request))
    TypeAdapter(completion_create_params.CompletionCreateParamsStreaming).validate_python(
        build_chat_body("llama", request, compatible=True, strict_tools=False)
    )
    TypeAdapter(response_create_params.ResponseCreateParamsStreaming).validate_python(
        build_responses_body("o4-mini", request, reasoning={"effort": "low", "summary": "auto"})
    )
    TypeAdapter(message_create_params.MessageCreateParamsStreaming).validate_python(
        build_anthropic_body("claude-sonnet-4-5", request, thinking={"type": "enabled", "budget_tokens": 1024})
    )
    TypeAdapter(message_create_params.MessageCreateParamsStreaming).validate_python(
        build_anthropic_body("claude-sonnet-4-5", request, strict_tools=True)
    )
    body = build_gemini_body(request, thinking={"includeThoughts": True})
    # The REST body's parts, validated by the SDK's own (extra-forbidding) models.
    for content in body["contents"]:
        genai_types.Content.model_validate(content)
    genai_types.Content.model_validate(body["systemInstruction"])
    for tool in body["tools"]:
        genai_types.Tool.model_validate(tool)
    genai_types.ToolConfig.model_validate(body["toolConfig"])
    genai_types.GenerationConfig.model_validate(body["generationConfig"])
