"""A hostile upstream puts the API key anywhere in its errors: it never reaches an
event, a log line, an HTTP response or an exception's repr (issue: hardening,
finding 2). Every provider, every error path -- HTTP error bodies, JSON error bodies
sent with a 200, mid-stream SSE error events, malformed frames -- through the real
adapters, httpx and the replay server on loopback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.adapters.provider import ProviderError
from agui_engine.adapters.replay import PROVIDERS, Fixture, ReplayServer
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunAgentInput, UserMessage
from tests.hypothesis_profiles import at_most

from .test_provider import CLIENTS

SSE_HEADERS = {"Content-Type": "text/event-stream"}
JSON_HEADERS = {"Content-Type": "application/json"}
_KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

#: One normal text frame per provider, so a mid-stream error comes after output.
_TEXT_FRAME = {
    "openai_chat": b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Paris is "},"finish_reason":null}]}\n\n',
    "openai_responses": b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Paris is "}\n\n',
    "anthropic": b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is "}}\n\n',
    "gemini": b'data: {"candidates": [{"content": {"parts": [{"text": "Paris is "}], "role": "model"}, "index": 0}]}\r\n\r\n',
}
_TEXT_FRAME["openai_compatible"] = _TEXT_FRAME["openai_chat"]


def error_object(provider: str, etype: str, message: str, code: str) -> dict[str, Any]:
    """The provider's error JSON with hostile strings in every field."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": etype, "message": message}}
    if provider == "gemini":
        return {"error": {"code": 503, "message": message, "status": etype}}
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


def midstream_frame(provider: str, etype: str, message: str, code: str) -> bytes:
    doc = error_object(provider, etype, message, code)
    if provider == "anthropic":
        return b"event: error\ndata: " + msgspec.json.encode(doc) + b"\n\n"
    if provider == "openai_responses":
        error = {"type": "error", "code": code, "message": message}
        failed = {"type": "response.failed", "response": {"status": "failed", "error": {"code": etype, "message": message}}}
        first = error if etype < code else failed
        name = first["type"]
        return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(first) + b"\n\n"  # type: ignore[operator]
    sep = b"\r\n\r\n" if provider == "gemini" else b"\n\n"
    return b"data: " + msgspec.json.encode(doc) + sep


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str, Fixture]:
    provider = draw(st.sampled_from(sorted(PROVIDERS)))
    key = "sk-" + draw(st.text(alphabet=_KEY_ALPHABET, min_size=8, max_size=40))

    def carrier() -> str:
        # a string that may hold the key (once, twice, at any place) or not
        base = draw(st.text(max_size=30))
        for _ in range(draw(st.integers(0, 2))):
            at = draw(st.integers(0, len(base)))
            base = base[:at] + key + base[at:]
        return base

    etype, message, code = carrier(), carrier(), carrier()
    path = draw(st.sampled_from(["http_error", "json_200", "midstream", "raw_body", "malformed_frame", "content_type"]))
    if path == "http_error":
        status = draw(st.sampled_from([400, 401, 403, 404, 422, 429, 500, 503, 529]))
        fixture = Fixture(provider=provider, name="h", status=status, headers=JSON_HEADERS,
                          body=msgspec.json.encode(error_object(provider, etype, message, code)))
    elif path == "json_200":
        fixture = Fixture(provider=provider, name="h", status=200, headers=JSON_HEADERS,
                          body=msgspec.json.encode(error_object(provider, etype, message, code)))
    elif path == "midstream":
        fixture = Fixture(provider=provider, name="h", status=200, headers=SSE_HEADERS,
                          body=_TEXT_FRAME[provider] + midstream_frame(provider, etype, message, code))
    elif path == "raw_body":  # not JSON: the body's text is the message
        status = draw(st.sampled_from([400, 500, 502]))
        fixture = Fixture(provider=provider, name="h", status=status, headers={"Content-Type": "text/plain"},
                          body=(message + key + etype).encode())
    elif path == "malformed_frame":  # valid JSON of the wrong shape, the key as a member name and value
        frame = msgspec.json.encode({key: {"choices": message}, "candidates": key, "type": key, "delta": etype})
        fixture = Fixture(provider=provider, name="h", status=200, headers=SSE_HEADERS,
                          body=_TEXT_FRAME[provider] + b"event: " + key.encode() + b"\ndata: " + frame + b"\n\n")
    else:  # a 200 whose Content-Type names the key (the "expected an event stream" message quotes it)
        fixture = Fixture(provider=provider, name="h", status=200, headers={"Content-Type": "text/html; " + key},
                          body=b"<html>" + message.encode() + b"</html>")
    return provider, key, fixture


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


async def _no_sleep(delay: float) -> None:
    pass


def _exception_texts(exc: BaseException) -> list[str]:
    texts = [repr(exc), str(exc)]
    texts += [repr(getattr(exc, name, None)) for name in ("message", "code", "error_type", "provider_message", "args")]
    if exc.__cause__ is not None:
        texts.append(repr(exc.__cause__))
    return texts


async def _through_client_and_agent(provider: str, key: str, fixture: Fixture) -> list[str]:
    """Everything the hostile error produced, as text: items, exception, events, logs."""
    seen: list[str] = []
    capture = _Capture()
    # the engine's loggers (httpcore's own DEBUG trace prints raw response headers:
    # a third party's opt-in wire dump, not a line of ours)
    root = logging.getLogger("agui_engine")
    old_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    try:
        async with ReplayServer() as server:
            url = server.base_url(provider, fixture)
            client = CLIENTS[provider]("m", api_key=key, base_url=url, sleep=_no_sleep, max_retries=1)
            try:
                async for item in client.complete([UserMessage(id="u", content="hi")], []):
                    seen.append(repr(item))
            except ProviderError as exc:
                seen += _exception_texts(exc)
            agent = LLMAgent(client)
            run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")])
            async for event in agent.run(run):
                seen.append(encode_event(event).decode())
            await client.aclose()
    finally:
        root.removeHandler(capture)
        root.setLevel(old_level)
    return seen + capture.lines


@settings(max_examples=at_most(75), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=hostile())
def test_the_key_never_leaves_the_adapter(case: tuple[str, str, Fixture]) -> None:
    provider, key, fixture = case
    seen = asyncio.run(_through_client_and_agent(provider, key, fixture))
    assert seen, "the hostile upstream produced nothing to look at"
    leaks = [text for text in seen if key in text]
    assert not leaks, leaks


def test_a_cut_message_never_keeps_the_head_of_a_key() -> None:
    # the key straddles MAX_ERROR_MESSAGE_CHARS: redaction comes before the cut
    from agui_engine.adapters.provider import MAX_ERROR_MESSAGE_CHARS, StreamParser, scrub

    key = "sk-" + "k" * 40
    text = "x" * (MAX_ERROR_MESSAGE_CHARS - 10) + key
    assert "sk-kkk" not in scrub(text, [key])
    parser: StreamParser = CLIENTS["anthropic"]("m", api_key=key, base_url="http://127.0.0.1:9").new_parser()
    parser.secrets = [key]
    (item,) = parser.in_band_error(key, text)
    assert "sk-kkk" not in item.message and key not in (item.code or "")  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("path", ["http_error", "json_200", "midstream"])
async def test_the_key_never_reaches_the_gateways_http_response(provider: str, path: str) -> None:
    """End to end: hostile upstream -> adapter -> LLMAgent -> SSE gateway -> HTTP client."""
    from agui_engine.transports.sse_server import start_sse_server

    key = "sk-test-" + "Q" * 24
    hostile_text = f"openai error ({key}): internal {key}"
    doc = error_object(provider, f"type-{key}", hostile_text, f"code-{key}")
    if path == "midstream":
        fixture = Fixture(provider=provider, name="h", status=200, headers=SSE_HEADERS,
                          body=_TEXT_FRAME[provider] + midstream_frame(provider, f"type-{key}", hostile_text, f"code-{key}"))
    else:
        fixture = Fixture(provider=provider, name="h", status=400 if path == "http_error" else 200,
                          headers=JSON_HEADERS, body=msgspec.json.encode(doc))
    async with ReplayServer() as replay:
        client = CLIENTS[provider]("m", api_key=key, base_url=replay.base_url(provider, fixture), sleep=_no_sleep)
        async with await start_sse_server(LLMAgent(client)) as srv:
            run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")])
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.post(srv.url, content=msgspec.json.encode(run),
                                    headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        await client.aclose()
    assert b"RUN_ERROR" in r.content
    assert key.encode() not in r.content and b"sk-test-QQQ" not in r.content
    assert b"[redacted]" in r.content
