"""The replay server: exact provider framing, odd write boundaries, scripts, errors."""

from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.adapters.replay import (
    PROVIDERS,
    ReplayServer,
    fixture_names,
    load_fixture,
    serve_over_openai_chat,
)
from agui_engine.cli.pacing import PacedModel
from agui_engine.protocol.errors import UsageError
from agui_engine.transports import ThreadedToolRunner


async def _post(url: str, json: object = None) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=json if json is not None else {"model": "m"})


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_bodies_arrive_byte_exact_in_many_odd_writes(provider: str) -> None:
    name = "text"
    expected = load_fixture(provider, name).body
    async with ReplayServer() as server, httpx.AsyncClient() as client:
        base = server.base_url(provider, name)
        url = base + PROVIDERS[provider][0] + ("?alt=sse" if provider == "gemini" else "")
        url = url.replace(":streamGenerateContent", "/models/m:streamGenerateContent") if provider == "gemini" else url
        async with client.stream("POST", url, json={"x": 1}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers.get("transfer-encoding") == "chunked"
            received = b"".join([chunk async for chunk in response.aiter_raw()])
    assert received == expected
    assert server.requests[0].json == {"x": 1}


def test_fixture_framing_is_each_providers_own() -> None:
    assert b"\r\n\r\n" in load_fixture("gemini", "text").body
    assert b"\n\n" not in load_fixture("gemini", "text").body.replace(b"\r\n\r\n", b"")
    assert load_fixture("openai_chat", "text").body.endswith(b"data: [DONE]\n\n")
    assert b"[DONE]" not in load_fixture("openai_chat", "error_midstream").body
    for provider in ("anthropic", "openai_responses"):
        for name in fixture_names(provider):
            fixture = load_fixture(provider, name)
            if fixture.is_stream:
                blocks = [b for b in fixture.body.split(b"\n\n") if b]
                assert all(b.startswith(b"event: ") for b in blocks), (provider, name)


def test_every_provider_has_the_required_fixtures() -> None:
    required = {"text", "tool_calls", "reasoning", "usage", "error_midstream", "rate_limited", "truncated"}
    for provider in PROVIDERS:
        assert required <= set(fixture_names(provider)), provider
        assert load_fixture(provider, "rate_limited").status == 429


async def test_scripts_serve_in_order_and_repeat_the_last() -> None:
    async with ReplayServer() as server:
        base = server.base_url("openai_chat", "rate_limited", "text")
        statuses = [(await _post(base + "/chat/completions")).status_code for _ in range(3)]
        first = await _post(base + "/chat/completions")
    assert statuses == [429, 200, 200]
    assert first.status_code == 200
    assert len(server.requests) == 4


async def test_wrong_endpoint_and_missing_alt_sse_are_refused() -> None:
    async with ReplayServer() as server:
        base = server.base_url("openai_chat", "text")
        assert (await _post(base + "/responses")).status_code == 404
        gemini = server.base_url("gemini", "text")
        assert (await _post(gemini + "/v1beta/models/m:streamGenerateContent")).status_code == 400
        assert (await _post(server.url + "/s/nope/v1/chat/completions")).status_code == 404
        async with httpx.AsyncClient() as client:
            bad = await client.post(base + "/chat/completions", content=b"{not json")
        assert bad.status_code == 400


async def test_http_error_fixture_carries_its_headers() -> None:
    async with ReplayServer() as server:
        response = await _post(server.base_url("anthropic", "rate_limited") + "/v1/messages")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["type"] == "rate_limit_error"


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown provider"):
        load_fixture("cohere", "text")
    with pytest.raises(UsageError, match="no fixture"):
        load_fixture("gemini", "nope")
    with pytest.raises(UsageError):
        ReplayServer(write_sizes=[0])
    with pytest.raises(UsageError, match="not started"):
        _ = ReplayServer().url


# --------------------------------------------------------------------------- live models

DEMO_MESSAGES = ["Compare the weather in Tokyo and Paris", "Show me a dashboard", "hello there"]


def _ids() -> Any:
    counter = itertools.count()
    return lambda: f"id{next(counter)}"


def _comparable(events: list[Any]) -> list[Any]:
    # Usage is re-counted by the Chat encoding (provider label, totals), and Chat has no
    # field for a reasoning signature (the embedded model makes one up); all else must match.
    from agui_engine.protocol.codec import encode_event
    from agui_engine.protocol.events import ReasoningEncryptedValueEvent

    kept = [
        msgspec.structs.replace(e, usage=None) if hasattr(e, "usage") else e
        for e in events
        if not isinstance(e, ReasoningEncryptedValueEvent)
    ]
    # The embedded model derives tool call ids from the conversation, whose message ids
    # do not travel over Chat: rename them in order of first appearance.
    text = "\n".join(encode_event(e).decode() for e in kept)
    names: dict[str, str] = {}
    return re.sub(r"call_[0-9a-f_]+", lambda m: names.setdefault(m.group(0), f"call#{len(names)}"), text).splitlines()


@pytest.mark.parametrize("message", DEMO_MESSAGES)
async def test_embedded_model_through_the_real_openai_adapter_gives_the_same_run(message: str) -> None:
    from agui_engine.cli.demo import demo_components, get_weather
    from agui_engine.demo.weather_model import EmbeddedModel
    from agui_engine.loops.llm_agent import LLMAgent
    from agui_engine.protocol.events import RunAgentInput, RunFinishedEvent, UserMessage
    from agui_engine.protocol.verify import verify_events

    run_input = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content=message)])
    direct = LLMAgent(EmbeddedModel(), components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=_ids())
    expected = [e async for e in direct.run(run_input)]
    async with serve_over_openai_chat(EmbeddedModel()) as client:
        served = LLMAgent(client, components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=_ids())
        events = [e async for e in served.run(run_input)]
    assert isinstance(events[-1], RunFinishedEvent) and verify_events(events) == []
    assert _comparable(events) == _comparable(expected)


async def test_served_model_stream_is_closed_when_the_client_goes_away() -> None:
    from agui_engine.demo.weather_model import EmbeddedModel
    from agui_engine.llm import TextDelta
    from agui_engine.protocol.events import UserMessage

    closed = asyncio.Event()

    class Watched:
        def __init__(self) -> None:
            self.inner = PacedModel(EmbeddedModel(), 0.05)

        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            try:
                async for item in self.inner.complete(*args, **kwargs):
                    yield item
            finally:
                closed.set()

    async with ReplayServer() as server:
        from agui_engine.adapters.openai_chat import OpenAIChatClient

        client = OpenAIChatClient("m", api_key="x", base_url=server.serve_model(Watched()))
        stream = client.complete([UserMessage(id="u", content="hello there")], [])
        assert isinstance(await stream.__anext__(), TextDelta)
        await stream.aclose()
        await asyncio.wait_for(closed.wait(), 5)
        await client.aclose()


async def test_served_model_refuses_a_bad_request() -> None:
    from agui_engine.demo.weather_model import EmbeddedModel

    async with ReplayServer() as server:
        base = server.serve_model(EmbeddedModel())
        bad = await _post(base + "/chat/completions", {"model": "m", "messages": [{"role": "wizard"}]})
        assert bad.status_code == 400 and "$.messages[0].role" in bad.json()["error"]["message"]
