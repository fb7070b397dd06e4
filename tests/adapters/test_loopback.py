"""serve_openai_compatible: an in-process model behind a real loopback HTTP endpoint in the
OpenAI Chat Completions format, started from synchronous code, read by the official openai SDK
(text and a streamed tool call) and by the project's own OpenAI adapter; closed, it refuses
connections."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from agui_engine.adapters.loopback import serve_openai_compatible
from agui_engine.adapters.openai_chat import OpenAIChatClient
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agui_engine.llm import TextDelta, ToolCallArgsDelta, ToolCallStart
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import UserMessage

MODEL = ScriptedModel([ScriptedTurn(text="Checking.", tool_calls=[ScriptedCall("get_weather", {"city": "Tokyo"})])])


def test_the_official_sdk_streams_the_scripted_text_and_tool_call_from_sync_code() -> None:
    with serve_openai_compatible(MODEL) as endpoint:
        assert endpoint.base_url.startswith("http://127.0.0.1:") and endpoint.base_url.endswith("/v1")
        client = openai.OpenAI(base_url=endpoint.base_url, api_key="anything", max_retries=0)
        stream = client.chat.completions.create(model="scripted-1", stream=True,
                                                messages=[{"role": "user", "content": "weather?"}])
        text, name, arguments, pieces = "", "", "", 0
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or ():
                    name += (call.function.name or "") if call.function else ""
                    if call.function and call.function.arguments:
                        arguments += call.function.arguments
                        pieces += 1
        client.close()
    assert (text, name, arguments) == ("Checking.", "get_weather", '{"city":"Tokyo"}') and pieces > 1


async def test_the_projects_adapter_reads_it_from_another_event_loop() -> None:
    endpoint = serve_openai_compatible(MODEL)
    try:
        client = OpenAIChatClient("scripted-1", api_key="x", base_url=endpoint.base_url, max_retries=0)
        out = [i async for i in client.complete([UserMessage(id="u", content="weather?")], [])]
        await client.aclose()
    finally:
        endpoint.close()
    assert "".join(i.text for i in out if isinstance(i, TextDelta)) == "Checking."
    assert [i.name for i in out if isinstance(i, ToolCallStart)] == ["get_weather"]
    assert "".join(i.delta for i in out if isinstance(i, ToolCallArgsDelta)) == '{"city":"Tokyo"}'


async def test_closed_it_refuses_connections() -> None:
    endpoint = serve_openai_compatible(MODEL)
    url = endpoint.base_url
    endpoint.close()
    endpoint.close()  # idempotent
    await asyncio.sleep(0)
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/chat/completions", json={"model": "m", "stream": True, "messages": []}, timeout=5)


def test_it_needs_a_model() -> None:
    with pytest.raises(UsageError, match="needs an LLMClient"):
        serve_openai_compatible(object())  # type: ignore[arg-type]
