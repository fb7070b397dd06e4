"""The shared provider machinery: item contract on every fixture, split invariance,
the tool-call tracker, error extraction, retries, cancellation, secrets."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.adapters.anthropic import AnthropicClient
from agui_engine.adapters.gemini import GeminiClient
from agui_engine.adapters.openai_chat import OpenAIChatClient, OpenAICompatibleClient
from agui_engine.adapters.openai_responses import OpenAIResponsesClient
from agui_engine.adapters.provider import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_MAX_SECONDS,
    MAX_RETRY_AFTER_SECONDS,
    RETRY_JITTER_FRACTION,
    MalformedStream,
    ProviderError,
    ProviderStream,
    ToolCallTracker,
    extract_error,
    parse_retry_after,
)
from agui_engine.adapters.provider import MAX_ERROR_MESSAGE_CHARS as provider_MAX_ERROR_MESSAGE_CHARS
from agui_engine.adapters.redaction import MIN_REDACTED_SECRET_CHARS, redact
from agui_engine.adapters.replay import PROVIDERS, ReplayServer, load_fixture
from agui_engine.llm import (
    Finish,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from agui_engine.protocol.events import RunErrorEvent, UserMessage

from .conftest import (
    PARSERS,
    STREAM_FIXTURES,
    check_contract,
    parse_chunks,
    random_splits,
    split_at,
)

KEY = "sk-test-S3CRET"
CLIENTS: dict[str, Any] = {
    "openai_chat": OpenAIChatClient,
    "openai_compatible": OpenAICompatibleClient,
    "openai_responses": OpenAIResponsesClient,
    "anthropic": AnthropicClient,
    "gemini": GeminiClient,
}
HELLO = [UserMessage(id="u1", content="hi")]


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(("provider", "name"), STREAM_FIXTURES)
def test_every_fixture_keeps_the_item_contract_whole_and_byte_by_byte(provider: str, name: str) -> None:
    data = load_fixture(provider, name).body
    whole = parse_chunks(provider, [data])
    check_contract(whole)
    assert parse_chunks(provider, [data[i : i + 1] for i in range(len(data))]) == whole
    for seed in range(5):
        assert parse_chunks(provider, random_splits(data, seed)) == whole


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixture=st.sampled_from(STREAM_FIXTURES), cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=30))
def test_any_split_gives_the_same_items(fixture: tuple[str, str], cuts: list[int]) -> None:
    provider, name = fixture
    data = load_fixture(provider, name).body
    cuts = [c % (len(data) + 1) for c in cuts]
    assert parse_chunks(provider, split_at(data, cuts)) == parse_chunks(provider, [data])


@settings(deadline=None)
@given(provider=st.sampled_from(sorted(PARSERS)), garbage=st.binary(max_size=300))
def test_garbage_never_raises_and_ends_with_one_terminal_item(provider: str, garbage: bytes) -> None:
    check_contract(parse_chunks(provider, [garbage]))


_KEYS = [
    "type", "choices", "delta", "content", "tool_calls", "index", "function", "arguments", "name", "id", "error",
    "candidates", "parts", "functionCall", "args", "item", "item_id", "response", "usage", "message",
    "content_block", "partial_json", "finish_reason", "finishReason", "text", "thought", "thoughtSignature",
    "output_tokens", "input_tokens", "usageMetadata", "promptFeedback", "blockReason", "summary_index",
]
_EVENT_TYPES = [
    "response.output_item.added", "response.output_item.done", "response.output_text.delta",
    "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.completed",
    "response.incomplete", "response.failed", "response.reasoning_summary_text.delta", "error", "message_start",
    "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=15,
)


@settings(deadline=None)
@given(
    provider=st.sampled_from(sorted(PARSERS)),
    frames=st.lists(st.tuples(st.sampled_from(_EVENT_TYPES), _JSON), max_size=6),
)
def test_valid_json_of_any_shape_never_raises(provider: str, frames: list[tuple[str, Any]]) -> None:
    import msgspec

    data = b""
    for kind, value in frames:
        if isinstance(value, dict) and provider in ("openai_responses", "anthropic"):
            value = {**value, "type": kind}
        data += b"data: " + msgspec.json.encode(value) + b"\n\n"
    check_contract(parse_chunks(provider, [data]))


@pytest.mark.parametrize("provider", sorted(PARSERS))
def test_truncating_any_fixture_anywhere_is_an_error_never_a_finish(provider: str) -> None:
    from agui_engine.adapters.replay import fixture_names

    for name in fixture_names(provider):
        fixture = load_fixture(provider, name)
        if not fixture.is_stream:
            continue
        data = fixture.body
        full = parse_chunks(provider, [data])
        if not isinstance(full[-1], Finish):
            continue
        # Cut inside the last frame that matters: before its terminal marker arrives.
        for cut in range(0, len(data) - 1, max(1, len(data) // 23)):
            items = parse_chunks(provider, [data[:cut]])
            check_contract(items)
            if provider == "openai_compatible" and isinstance(items[-1], Finish):
                continue  # lenient: EOF after finish_reason is a normal end there
            assert isinstance(items[-1], StreamError), (name, cut)


def test_bad_json_names_the_frame() -> None:
    items = parse_chunks("openai_chat", [b"data: {\"choices\": []}\n\ndata: {nope\n\n"])
    assert isinstance(items[-1], StreamError)
    assert items[-1].code == "malformed_stream"
    assert "frame 2" in items[-1].message


def test_oversized_frame_is_a_stream_error() -> None:
    from agui_engine.adapters.openai_chat import ChatStreamParser

    stream = ProviderStream(ChatStreamParser(), max_frame_bytes=64)
    items = stream.feed(b"data: " + b"x" * 200 + b"\n\n")
    assert isinstance(items[-1], StreamError)
    assert stream.done and stream.feed(b"data: [DONE]\n\n") == []


# --------------------------------------------------------------------------- tracker


def test_tracker_holds_arguments_until_the_name_arrives_and_mints_ids() -> None:
    tracker = ToolCallTracker(lambda: "minted")
    assert tracker.args(7, '{"a"') == []
    items = tracker.open(7, name="f") + tracker.args(7, ": 1}") + tracker.end_all()
    assert items == [
        ToolCallStart(index=0, id="minted", name="f"),
        ToolCallArgsDelta(index=0, delta='{"a"'),
        ToolCallArgsDelta(index=0, delta=": 1}"),
        ToolCallEnd(index=0),
    ]


def test_tracker_new_id_under_a_used_key_is_a_new_call_never_merged() -> None:
    tracker = ToolCallTracker(lambda: "x")
    items = tracker.open(0, id="a", name="f") + tracker.args(0, "{}")
    items += tracker.open(0, id="b", name="g", new=True) + tracker.end_all()
    assert [type(i).__name__ for i in items] == [
        "ToolCallStart", "ToolCallArgsDelta", "ToolCallEnd", "ToolCallStart", "ToolCallArgsDelta", "ToolCallEnd"
    ]
    assert items[3] == ToolCallStart(index=1, id="b", name="g")
    assert items[4] == ToolCallArgsDelta(index=1, delta="{}")  # no arguments -> "{}"


def test_tracker_complete_args_sends_only_the_rest_and_rejects_a_contradiction() -> None:
    tracker = ToolCallTracker(lambda: "x")
    tracker.open("k", id="c", name="f")
    tracker.args("k", '{"a":')
    assert tracker.complete_args("k", '{"a":1}') == [ToolCallArgsDelta(index=0, delta="1}")]
    assert tracker.complete_args("k", '{"a":1}') == []
    with pytest.raises(MalformedStream):
        tracker.complete_args("k", '{"b":2}')


def test_tracker_call_without_a_name_cannot_end() -> None:
    tracker = ToolCallTracker(lambda: "x")
    tracker.args(0, "{}")
    with pytest.raises(MalformedStream, match="without a name"):
        tracker.end_all()


# --------------------------------------------------------------------------- errors


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-1"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    ("provider", "name", "expected"),
    [
        ("openai_chat", "rate_limited", ("rate_limit_exceeded", 1.0)),
        ("anthropic", "rate_limited", ("rate_limit_error", 1.0)),
        ("anthropic", "overloaded", ("overloaded_error", None)),
        ("gemini", "rate_limited", ("RESOURCE_EXHAUSTED", 1.0)),
    ],
)
def test_error_bodies_of_every_provider(provider: str, name: str, expected: tuple[str, float | None]) -> None:
    import msgspec

    error_type, message, delay = extract_error(msgspec.json.decode(load_fixture(provider, name).body))
    assert message
    assert error_type == expected[0]
    if provider == "gemini":
        assert delay == expected[1]


def test_redact() -> None:
    assert redact(f"bad key {KEY}!", [KEY]) == "bad key [redacted]!"
    assert redact("x", [""]) == "x"
    # a placeholder shorter than MIN_REDACTED_SECRET_CHARS would mangle the message, not protect it
    short = "k" * (MIN_REDACTED_SECRET_CHARS - 1)
    assert redact(f"bad {short} kkkk", [short]) == f"bad {short} kkkk"
    assert redact("bad kkkk", ["k" * MIN_REDACTED_SECRET_CHARS]) == "bad [redacted]"


@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999999])
def test_retry_backoff_is_shortened_by_at_most_the_jitter_fraction(
    monkeypatch: pytest.MonkeyPatch, draw: float
) -> None:
    import agui_engine.adapters.provider as provider

    monkeypatch.setattr(provider.random, "random", lambda: draw)
    client = AnthropicClient("claude", api_key="k")
    for attempt in range(6):
        full = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
        delay = client._backoff(attempt)
        assert delay == pytest.approx(full * (1 - RETRY_JITTER_FRACTION * draw))
        assert full * (1 - RETRY_JITTER_FRACTION) < delay <= full


def test_error_message_limit_is_the_engine_wide_one() -> None:
    from agui_engine.protocol import errors

    assert provider_MAX_ERROR_MESSAGE_CHARS is errors.MAX_ERROR_MESSAGE_CHARS


# --------------------------------------------------------------------------- HTTP


async def _collect(client: Any, **kw: Any) -> list[Any]:
    return [item async for item in client.complete(HELLO, [], **kw)]


def _client(provider: str, base_url: str, **kw: Any) -> Any:
    return CLIENTS[provider]("m", api_key=KEY, base_url=base_url, **kw)


#: Every 429 fixture and the delay it asks for: each provider has one with a
#: ``Retry-After`` header; Gemini's own API says it in ``RetryInfo`` instead, and when
#: a response carries both (a gateway in front of Gemini) the header wins.
RATE_LIMITS = [
    ("openai_chat", "rate_limited", 1.0),
    ("openai_compatible", "rate_limited", 1.0),
    ("openai_responses", "rate_limited", 1.0),  # retry-after-ms: 1000 as well
    ("anthropic", "rate_limited", 1.0),
    ("gemini", "rate_limited", 1.0),  # RetryInfo.retryDelay only
    ("gemini", "rate_limited_retry_after", 2.0),  # Retry-After: 2 beside RetryInfo 1s
]


@pytest.mark.parametrize(("provider", "name", "delay"), RATE_LIMITS)
async def test_429_is_retried_after_the_delay_the_provider_asked_for(provider: str, name: str, delay: float) -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    async with ReplayServer() as server:
        client = _client(provider, server.base_url(provider, name, "text"), sleep=sleep)
        items = await _collect(client)
        await client.aclose()
    assert isinstance(items[-1], Finish)
    assert slept == [delay]
    assert len(server.requests) == 2


def test_every_provider_has_a_429_with_retry_after() -> None:
    for provider in PROVIDERS:
        with_header = [
            name
            for p, name, _ in RATE_LIMITS
            if p == provider and "retry-after" in {k.lower() for k in load_fixture(p, name).headers}
        ]
        assert with_header, provider


@pytest.mark.parametrize("provider", sorted(CLIENTS))
async def test_retries_are_bounded_then_a_typed_error(provider: str) -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    async with ReplayServer() as server:
        client = _client(provider, server.base_url(provider, "rate_limited"), sleep=sleep, max_retries=2)
        with pytest.raises(ProviderError) as info:
            await _collect(client)
        await client.aclose()
    error = info.value
    assert error.status == 429 and error.retryable and error.retry_after == 1.0
    assert error.http_status == 502 and RunErrorEvent.from_error(error).code == error.code
    assert len(server.requests) == 3 and slept == [1.0, 1.0]


async def test_real_sleep_with_retry_after_zero_and_529_overloaded() -> None:
    async with ReplayServer() as server:
        client = _client("openai_chat", server.base_url("openai_chat", "server_error", "text"))
        assert isinstance((await _collect(client))[-1], Finish)
        await client.aclose()
        anthropic = _client("anthropic", server.base_url("anthropic", "overloaded"), max_retries=0)
        with pytest.raises(ProviderError) as info:
            await _collect(anthropic)
        await anthropic.aclose()
    assert info.value.status == 529 and info.value.retryable and info.value.code == "overloaded_error"


async def test_a_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    error = ProviderError("x", provider="p", retryable=True, retry_after=MAX_RETRY_AFTER_SECONDS + 1)
    client = _client("openai_chat", "http://127.0.0.1:9")
    assert client._retry_delay(error, 0) is None
    assert client._retry_delay(ProviderError("x", provider="p", retryable=False), 0) is None


async def test_unauthorized_is_not_retried_and_never_shows_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with ReplayServer() as server:
        client = _client("openai_chat", server.base_url("openai_chat", "unauthorized"))
        with pytest.raises(ProviderError) as info:
            await _collect(client)
        await client.aclose()
    error = info.value
    assert error.status == 401 and not error.retryable and error.code == "invalid_api_key"
    assert len(server.requests) == 1
    # The fixture's message echoes the key (as some servers do): it must be redacted.
    assert "[redacted]" in str(error)
    for text in (str(error), repr(error), error.message, repr(client), error.to_json().__repr__(), caplog.text):
        assert KEY not in text
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(server.requests[0])


@pytest.mark.parametrize("provider", sorted(CLIENTS))
async def test_key_never_in_logs_or_stream_errors(provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log requests at DEBUG/INFO

    async def sleep(delay: float) -> None:
        pass

    async with ReplayServer() as server:
        client = _client(provider, server.base_url(provider, "rate_limited", "error_midstream"), sleep=sleep)
        items = await _collect(client)
        await client.aclose()
    assert isinstance(items[-1], StreamError)
    assert caplog.text  # something was logged (the retry at least)
    assert KEY not in caplog.text and KEY not in repr(items)


async def test_unreachable_provider_is_a_retryable_typed_error() -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    client = _client("openai_chat", "http://127.0.0.1:9/v1", sleep=sleep, max_retries=1)
    with pytest.raises(ProviderError) as info:
        await _collect(client)
    await client.aclose()
    assert info.value.code == "provider_unreachable" and info.value.retryable and info.value.status is None
    assert len(slept) == 1


async def test_in_band_retryable_error_before_anything_streamed_is_retried() -> None:
    async def sleep(delay: float) -> None:
        pass

    async with ReplayServer() as server:
        # Overloaded right after message_start: nothing but usage was produced, so the
        # consumer never sees the failed attempt (nor its usage).
        client = _client("anthropic", server.base_url("anthropic", "error_at_start", "text"), sleep=sleep)
        items = await _collect(client)
        await client.aclose()
    assert len(server.requests) == 2
    assert isinstance(items[-1], Finish) and items[-2] == parse_chunks("anthropic", [load_fixture("anthropic", "text").body])[-2]
    assert sum(isinstance(i, Usage) for i in items) == 1


async def test_dropped_before_the_first_item_is_retried_then_reported() -> None:
    async def sleep(delay: float) -> None:
        pass

    async with ReplayServer() as server:
        cut = _client("openai_chat", server.base_url("openai_chat", "text", cut_after=0), sleep=sleep, max_retries=1)
        items = await _collect(cut)
        await cut.aclose()
    assert len(server.requests) == 2
    assert len(items) == 1 and isinstance(items[0], StreamError)
    assert items[0].code in ("connection_lost", "truncated") and items[0].retryable


async def test_error_after_content_is_not_retried_and_carries_partial_usage() -> None:
    async with ReplayServer() as server:
        client = _client("anthropic", server.base_url("anthropic", "error_midstream", "text"))
        items = await _collect(client)
        await client.aclose()
    assert len(server.requests) == 1
    assert items[0] == TextDelta(text="Paris is ")
    assert isinstance(items[-2], Usage) and items[-2].input_tokens == 20
    assert items[-1] == StreamError(
        message="anthropic error (overloaded_error): Overloaded", code="overloaded_error", retryable=True
    )


async def test_connection_dropped_mid_stream_is_a_stream_error() -> None:
    async with ReplayServer() as server:
        data = load_fixture("openai_chat", "text").body
        client = _client("openai_chat", server.base_url("openai_chat", "text", cut_after=len(data) // 2))
        items = await _collect(client)
        await client.aclose()
    assert any(isinstance(i, TextDelta) for i in items)
    assert isinstance(items[-1], StreamError) and items[-1].code in ("connection_lost", "truncated")
    assert items[-1].retryable


@pytest.mark.parametrize("provider", sorted(CLIENTS))
async def test_closing_the_consumer_closes_the_http_response_at_once(provider: str) -> None:
    data = load_fixture(provider, "text").body
    async with ReplayServer() as server:
        client = _client(provider, server.base_url(provider, "text", hold_after=len(data) * 2 // 3))
        stream = client.complete(HELLO, [])
        first = await asyncio.wait_for(stream.__anext__(), 5)
        assert isinstance(first, TextDelta)
        await stream.aclose()
        assert await server.wait_for_disconnect(timeout=5.0)
        await client.aclose()
    assert server.disconnects == 1


async def test_cancelling_the_consuming_task_closes_the_response() -> None:
    data = load_fixture("gemini", "text").body
    async with ReplayServer() as server:
        client = _client("gemini", server.base_url("gemini", "text", hold_after=len(data) // 2))
        got_one = asyncio.Event()

        async def consume() -> None:
            async for _ in client.complete(HELLO, []):
                got_one.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_one.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await server.wait_for_disconnect(timeout=5.0)
        await client.aclose()


async def test_a_json_200_is_not_taken_for_a_stream() -> None:
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "stream not supported", "type": "invalid_request_error"}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        client = _client("openai_chat", f"http://127.0.0.1:{port}/v1")
        with pytest.raises(ProviderError, match="expected an event stream"):
            await _collect(client)
        await client.aclose()
    finally:
        await runner.cleanup()


async def test_a_given_http_client_is_used_and_not_closed() -> None:
    async with ReplayServer() as server, httpx.AsyncClient() as http:
        client = _client("openai_chat", server.base_url("openai_chat", "text"), http_client=http)
        assert isinstance((await _collect(client))[-1], Finish)
        await client.aclose()
        assert not http.is_closed


def test_the_provider_bases_are_abstract_until_their_hooks_are_defined() -> None:
    from agui_engine.adapters.provider import StreamingLLMClient, StreamParser

    with pytest.raises(TypeError, match="_handle"):
        StreamParser()

    class NoAuth(StreamingLLMClient):
        def build_request(self, request: Any) -> tuple[str, dict[str, Any]]:
            return "", {}

    with pytest.raises(TypeError, match="auth_headers"):
        NoAuth()
