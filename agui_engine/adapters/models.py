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

Reasoning options follow the model as a query string: ``anthropic:<model>?thinking=4096``
and ``gemini:<model>?thinking=1024`` (a token budget), ``openai-responses:<model>?reasoning=high``
and ``openai:<model>?reasoning=low`` (``minimal``, ``low``, ``medium``, ``high``).

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

from agui_engine.llm import LLMClient
from agui_engine.protocol.errors import UsageError

from .anthropic import AnthropicClient
from .gemini import GeminiClient
from .openai_chat import OpenAIChatClient, OpenAICompatibleClient
from .openai_responses import OpenAIResponsesClient
from .provider import StreamingLLMClient

__all__ = [
    "MODEL_SPEC_HELP",
    "ModelSpec",
    "PROVIDER_CLIENTS",
    "REASONING_EFFORTS",
    "client_from_spec",
    "parse_model_spec",
]

MODEL_SPEC_HELP = (
    "model: openai:<model> | openai-responses:<model> | anthropic:<model> | gemini:<model> | "
    "openai-compatible:<base_url>#<model> | embedded; add ?thinking=<tokens> (anthropic, gemini) or "
    "?reasoning=<effort> (openai*) (keys from OPENAI_API_KEY, ANTHROPIC_API_KEY, "
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


#: Reasoning efforts the OpenAI APIs accept for ``?reasoning=``.
REASONING_EFFORTS = ("minimal", "low", "medium", "high")


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    model: str
    base_url: str | None = None
    #: Client constructor options from the spec's ``?thinking=`` / ``?reasoning=``.
    options: dict[str, Any] = msgspec.field(default_factory=dict)


def _reasoning_options(provider: str, query: str, spec: str) -> dict[str, Any]:
    """``?thinking=<budget tokens>`` (anthropic, gemini) or ``?reasoning=<effort>``
    (openai, openai-responses, openai-compatible) as client options; raises
    :class:`UsageError` for anything else."""
    options: dict[str, Any] = {}
    for pair in query.split("&"):
        key, eq, value = pair.partition("=")
        if key == "thinking" and provider in ("anthropic", "gemini", "google"):
            if not eq or not value.isdigit() or int(value) < 1:
                raise UsageError(f"model spec {spec!r}: thinking= takes a token budget, e.g. ?thinking=4096")
            budget = int(value)
            options["thinking"] = (
                {"type": "enabled", "budget_tokens": budget}
                if provider == "anthropic"
                else {"thinkingBudget": budget, "includeThoughts": True}
            )
        elif key == "reasoning" and provider in ("openai", "openai-responses", "openai-compatible"):
            if value not in REASONING_EFFORTS:
                raise UsageError(f"model spec {spec!r}: reasoning= takes one of {', '.join(REASONING_EFFORTS)}")
            options["reasoning" if provider == "openai-responses" else "reasoning_effort"] = (
                {"effort": value, "summary": "auto"} if provider == "openai-responses" else value
            )
        else:
            raise UsageError(
                f"model spec {spec!r}: unknown option {key!r} for {provider}; "
                "use ?thinking=<tokens> (anthropic, gemini) or ?reasoning=<effort> (openai*)"
            )
    return options


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
        model, _, query = model.partition("?")
        options = _reasoning_options(provider, query, spec) if query else {}
        return ModelSpec(provider=provider, model=model, base_url=base_url, options=options)
    model, _, query = rest.partition("?")
    if not model:
        raise UsageError(f"model spec {spec!r} is not <provider>:<model>; {MODEL_SPEC_HELP}")
    options = _reasoning_options(provider, query, spec) if query else {}
    return ModelSpec(provider=provider, model=model, options=options)


def client_from_spec(spec: str, *, env: Mapping[str, str] | None = None, **options: Any) -> LLMClient:
    """An :class:`LLMClient` for ``spec``. ``options`` go to the client's constructor
    (``http_client``, ``max_retries``, ``reasoning_effort`` ...). Raises
    :class:`UsageError` for a bad spec or a missing key."""
    parsed = parse_model_spec(spec)
    if parsed.provider == "embedded":
        from agui_engine.demo.weather_model import EmbeddedModel

        return EmbeddedModel(**options)
    cls = PROVIDER_CLIENTS[parsed.provider]
    options = {**parsed.options, **options}
    if parsed.base_url is not None:
        options = {**options, "base_url": parsed.base_url}
    return cls(parsed.model, env=env, **options)
