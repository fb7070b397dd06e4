"""agui_engine.llm: the one tool-choice resolver (the decision loop, LLMAgent and every
provider adapter call it)."""

from __future__ import annotations

import pytest

from agui_engine.llm import (
    TOOL_CHOICE_KEYWORDS,
    LLMTool,
    ResolvedToolChoice,
    UnknownToolChoiceError,
    resolve_tool_choice,
)
from agui_engine.protocol.errors import UsageError


def test_none_is_auto_and_keywords_pass() -> None:
    assert resolve_tool_choice(None, ["a"]) == ResolvedToolChoice("auto", None)
    for keyword in sorted(TOOL_CHOICE_KEYWORDS):
        resolved = resolve_tool_choice(keyword, [])
        assert resolved == (keyword, None) and resolved.choice == keyword


def test_a_name_must_be_offered() -> None:
    mode, name = resolve_tool_choice("lookup", iter(["lookup", "other"]))  # any iterable of names
    assert (mode, name) == ("tool", "lookup")
    assert resolve_tool_choice("lookup", {"lookup": object()}).choice == "lookup"  # a mapping's keys
    with pytest.raises(UnknownToolChoiceError, match=r"'nope' is not one of the tools offered.*\(offered: a, b\)") as info:
        resolve_tool_choice("nope", ["b", "a"])
    assert isinstance(info.value, UsageError) and info.value.code == "unknown_tool_choice"
    with pytest.raises(UnknownToolChoiceError, match=r"\(offered: none\)"):
        resolve_tool_choice("x", [])


def test_every_provider_adapter_uses_the_resolver() -> None:
    """A forced tool the request does not offer is the same error in every adapter, and the
    forced name reaches each provider's own field."""
    from agui_engine.adapters.anthropic import build_anthropic_body
    from agui_engine.adapters.gemini import build_gemini_body
    from agui_engine.adapters.openai_chat import build_chat_body
    from agui_engine.adapters.openai_responses import build_responses_body
    from agui_engine.adapters.provider import CompletionRequest

    tools = [LLMTool(name="f", description="F", parameters={"type": "object"})]
    builders = {
        "anthropic": lambda r: build_anthropic_body("m", r)["tool_choice"],
        "gemini": lambda r: build_gemini_body(r)["toolConfig"]["functionCallingConfig"],
        "openai-chat": lambda r: build_chat_body("m", r)["tool_choice"],
        "openai-responses": lambda r: build_responses_body("m", r)["tool_choice"],
    }
    forced = {name: build(CompletionRequest(messages=[], tools=tools, tool_choice="f")) for name, build in builders.items()}
    assert forced["anthropic"]["name"] == "f"
    assert forced["gemini"]["allowedFunctionNames"] == ["f"]
    assert forced["openai-chat"]["function"]["name"] == "f"
    assert forced["openai-responses"]["name"] == "f"
    for _name, build in builders.items():
        with pytest.raises(UnknownToolChoiceError, match="'g' is not one of the tools offered"):
            build(CompletionRequest(messages=[], tools=tools, tool_choice="g"))
