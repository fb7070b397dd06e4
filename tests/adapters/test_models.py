"""Model specs: one string picks the provider, the model and where keys come from."""

from __future__ import annotations

from typing import Any

import pytest

from agui_engine.adapters.anthropic import AnthropicClient
from agui_engine.adapters.gemini import GeminiClient
from agui_engine.adapters.models import ModelSpec, client_from_spec, parse_model_spec
from agui_engine.adapters.openai_chat import OpenAIChatClient, OpenAICompatibleClient
from agui_engine.adapters.openai_responses import OpenAIResponsesClient
from agui_engine.llm import LLMClient
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import UserMessage

ENV = {
    "OPENAI_API_KEY": "sk-o",
    "ANTHROPIC_API_KEY": "sk-a",
    "GEMINI_API_KEY": "g-key",
    "ANTHROPIC_BASE_URL": "http://proxy.local",
}


def test_parse() -> None:
    assert parse_model_spec("openai:gpt-4o") == ModelSpec(provider="openai", model="gpt-4o")
    assert parse_model_spec("openai-compatible:http://localhost:11434/v1#qwen2.5:7b") == ModelSpec(
        provider="openai-compatible", model="qwen2.5:7b", base_url="http://localhost:11434/v1"
    )
    assert parse_model_spec(" embedded ").provider == "embedded"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "not <provider>:<model>"),
        ("openai:", "not <provider>:<model>"),
        ("cohere:command", "unknown provider 'cohere'"),
        ("openai-compatible:http://x/v1", "<base_url>#<model>"),
        ("openai-compatible:localhost/v1#m", "http:// or https://"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_model_spec(spec)


def test_clients_from_specs_and_environment() -> None:
    chat = client_from_spec("openai:gpt-4o", env=ENV)
    assert isinstance(chat, OpenAIChatClient) and chat.model == "gpt-4o"
    assert isinstance(client_from_spec("openai-responses:o4-mini", env=ENV), OpenAIResponsesClient)
    claude = client_from_spec("anthropic:claude-sonnet-4-5", env=ENV)
    assert isinstance(claude, AnthropicClient) and claude.base_url == "http://proxy.local"
    gemini = client_from_spec("gemini:gemini-2.5-flash", env=ENV)
    assert isinstance(gemini, GeminiClient) and gemini.auth_headers() == {"x-goog-api-key": "g-key"}
    # GOOGLE_API_KEY wins over GEMINI_API_KEY, as in google-genai.
    both = client_from_spec("google:gemini-2.5-pro", env={**ENV, "GOOGLE_API_KEY": "google"})
    assert both.auth_headers() == {"x-goog-api-key": "google"}  # type: ignore[attr-defined]
    local = client_from_spec("openai-compatible:http://localhost:8000/v1#llama", env=ENV)
    assert isinstance(local, OpenAICompatibleClient) and local.base_url == "http://localhost:8000/v1"
    assert local.auth_headers() == {}
    for client in (chat, claude, gemini, local):
        assert isinstance(client, LLMClient)


def test_missing_keys_fail_at_construction_naming_the_variable() -> None:
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        client_from_spec("openai:gpt-4o", env={})
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        client_from_spec("anthropic:claude", env={})
    with pytest.raises(UsageError, match="GOOGLE_API_KEY or GEMINI_API_KEY"):
        client_from_spec("gemini:flash", env={})


def test_embedded_and_options() -> None:
    embedded = client_from_spec("embedded")
    assert isinstance(embedded, LLMClient)
    tuned = client_from_spec("openai:o4-mini", env=ENV, reasoning_effort="low", max_retries=0)
    assert tuned.reasoning_effort == "low" and tuned.max_retries == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "fixtures", "key_env", "base_env", "auth_header"),
    [
        ("openai:gpt-4o", "openai_chat", "OPENAI_API_KEY", "OPENAI_BASE_URL", "authorization"),
        ("openai-responses:o4-mini", "openai_responses", "OPENAI_API_KEY", "OPENAI_BASE_URL", "authorization"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "x-api-key"),
        ("gemini:gemini-2.5-flash", "gemini", "GEMINI_API_KEY", "GEMINI_BASE_URL", "x-goog-api-key"),
        ("openai-compatible:{base}#qwen2.5:7b", "openai_compatible", "OPENAI_COMPATIBLE_API_KEY", None, "authorization"),
    ],
)
async def test_a_spec_and_the_environment_alone_reach_the_provider(
    spec: str, fixtures: str, key_env: str, base_env: str | None, auth_header: str
) -> None:
    from agui_engine.adapters.replay import ReplayServer
    from agui_engine.llm import Finish

    async with ReplayServer() as server:
        base = server.base_url(fixtures, "text")
        env = {key_env: "sk-from-env"}
        if base_env is not None:
            env[base_env] = base
        client = client_from_spec(spec.format(base=base), env=env)
        items = [item async for item in client.complete([UserMessage(id="u", content="hi")], [])]
        await client.aclose()  # type: ignore[attr-defined]
    assert isinstance(items[-1], Finish)
    (request,) = server.requests
    assert "sk-from-env" in {k.lower(): v for k, v in request.headers.items()}[auth_header]
    if fixtures == "openai_compatible":
        assert request.json["model"] == "qwen2.5:7b"  # type: ignore[index]


def test_reasoning_options_in_the_spec_reach_the_request_body() -> None:
    from agui_engine.adapters.provider import CompletionRequest
    from agui_engine.protocol.errors import UsageError as _UsageError

    env = {"ANTHROPIC_API_KEY": "k" * 20, "OPENAI_API_KEY": "k" * 20, "GEMINI_API_KEY": "k" * 20}
    request = CompletionRequest(messages=[], tools=[])
    bodies = {
        spec: client_from_spec(spec, env=env).build_request(request)[1]  # type: ignore[attr-defined]
        for spec in (
            "anthropic:claude-sonnet-4-5?thinking=4096",
            "openai-responses:o4-mini?reasoning=high",
            "openai:o4-mini?reasoning=low",
            "gemini:gemini-2.5-flash?thinking=1024",
        )
    }
    assert bodies["anthropic:claude-sonnet-4-5?thinking=4096"]["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert bodies["anthropic:claude-sonnet-4-5?thinking=4096"]["model"] == "claude-sonnet-4-5"
    assert bodies["openai-responses:o4-mini?reasoning=high"]["reasoning"]["effort"] == "high"
    assert bodies["openai:o4-mini?reasoning=low"]["reasoning_effort"] == "low"
    gemini = bodies["gemini:gemini-2.5-flash?thinking=1024"]
    assert gemini["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}
    for bad in ("anthropic:m?thinking=lots", "openai-responses:m?reasoning=max", "anthropic:m?reasoning=high", "gemini:m?x=1"):
        with pytest.raises(_UsageError) as info:
            parse_model_spec(bad)
        assert "\n" not in info.value.message


@pytest.mark.parametrize(
    "spec,declared",
    [
        ("anthropic:claude-sonnet-4-5?thinking=4096", (True, True, True)),
        ("anthropic:claude-sonnet-4-5", (False, None, None)),
        ("gemini:gemini-2.5-flash?thinking=1024", (True, True, True)),
        ("gemini:gemini-2.5-flash", (False, None, None)),
        ("openai-responses:o4-mini?reasoning=high", (True, True, True)),
        ("openai-responses:gpt-4.1", None),
        ("openai:o4-mini?reasoning=low", (False, None, None)),
        ("openai-compatible:http://127.0.0.1:9/v1#qwen3", None),
    ],
)
def test_each_model_says_whether_its_reasoning_reaches_the_client(spec: str, declared: tuple[Any, ...] | None) -> None:
    from agui_engine.llm import model_reasoning

    env = {"ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k", "OPENAI_API_KEY": "k"}
    reasoning = model_reasoning(client_from_spec(spec, env=env))
    if declared is None:
        assert reasoning is None
    else:
        assert reasoning is not None
        assert (reasoning.supported, reasoning.streaming, reasoning.encrypted) == declared
