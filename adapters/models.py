"""Choosing a model from one string: ``--model openai:gpt-4o``.

Spec syntax (documented in ``spec/providers.md``; :data:`MODEL_SPEC_HELP` is the
one-line version for ``--help``):

=====================================================  =========================================
``openai:<model>``                                     OpenAI Chat Completions
``openai-responses:<model>``                           OpenAI Responses API
``anthropic:<model>``                                  Anthropic Messages
``gemini:<model>`` (or ``google:<model>``)             Gemini ``streamGenerateContent``
``openai-compatible:<base_url>#<model>``               any Chat Completions server
``embedded``                                           the deterministic demo model (no network)
=====================================================  =========================================

Keys and base URLs come from the environment: ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``,
``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``, ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` /
``GEMINI_BASE_URL``, ``OPENAI_COMPATIBLE_API_KEY`` (optional; the OpenAI key is never
sent to a third-party server). Everything is checked when the client is made, so a
misconfigured gateway fails at start-up, not on its first request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from agui_engine.errors import UsageError
from agui_engine.llm import LLMClient

from .anthropic import AnthropicClient
from .gemini import GeminiClient
from .openai_chat import OpenAIChatClient, OpenAICompatibleClient
from .openai_responses import OpenAIResponsesClient
from .provider import StreamingLLMClient

__all__ = ["ModelSpec", "PROVIDER_CLIENTS", "client_from_spec", "parse_model_spec"]

MODEL_SPEC_HELP = (
    "model: openai:<model> | openai-responses:<model> | anthropic:<model> | gemini:<model> | "
    "openai-compatible:<base_url>#<model> | embedded (keys from OPENAI_API_KEY, ANTHROPIC_API_KEY, "
    "GEMINI_API_KEY/GOOGLE_API_KEY, OPENAI_COMPATIBLE_API_KEY)"
)

#: spec prefix -> client class.
PROVIDER_CLIENTS: dict[str, type[StreamingLLMClient]] = {
    "openai": OpenAIChatClient,
    "openai-responses": OpenAIResponsesClient,
    "anthropic": AnthropicClient,
    "gemini": GeminiClient,
    "google": GeminiClient,
    "openai-compatible": OpenAICompatibleClient,
}


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str
    base_url: str | None = None


def parse_model_spec(spec: str) -> ModelSpec:
    """Split a model spec; raises :class:`UsageError` saying what is wrong."""
    spec = spec.strip()
    if spec == "embedded":
        return ModelSpec(provider="embedded", model="embedded")
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise UsageError(f"model spec {spec!r} is not <provider>:<model>; {MODEL_SPEC_HELP}")
    if provider not in PROVIDER_CLIENTS:
        raise UsageError(f"unknown provider {provider!r} in model spec {spec!r}; {MODEL_SPEC_HELP}")
    if provider == "openai-compatible":
        base_url, hash_sign, model = rest.rpartition("#")
        if not hash_sign or not base_url or not model:
            raise UsageError(f"model spec {spec!r}: write openai-compatible:<base_url>#<model>")
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"model spec {spec!r}: the base URL must start with http:// or https://")
        return ModelSpec(provider=provider, model=model, base_url=base_url)
    return ModelSpec(provider=provider, model=rest)


def client_from_spec(spec: str, *, env: Mapping[str, str] | None = None, **options: Any) -> LLMClient:
    """An :class:`LLMClient` for ``spec``. ``options`` go to the client's constructor
    (``http_client``, ``max_retries``, ``reasoning_effort`` ...). Raises
    :class:`UsageError` for a bad spec or a missing key."""
    parsed = parse_model_spec(spec)
    if parsed.provider == "embedded":
        from agui_engine.embedded import EmbeddedModel

        return EmbeddedModel(**options)
    cls = PROVIDER_CLIENTS[parsed.provider]
    if parsed.base_url is not None:
        options = {**options, "base_url": parsed.base_url}
    return cls(parsed.model, env=env, **options)
