"""A loopback HTTP server that replays recorded LLM provider streams.

Theory of operation
-------------------
Fixtures live in ``adapters/fixtures/<provider>/``: ``<name>.sse`` is a response body
exactly as the provider sends it (its ``event:`` lines, CRLF block ends for Gemini,
``data: [DONE]`` for Chat); ``<name>.json`` is an HTTP error
(``{"status", "headers", "body"}``). Providers: ``openai_chat``,
``openai_compatible``, ``openai_responses``, ``anthropic``, ``gemini``.

A test registers a *script* -- the fixtures to serve to successive requests, e.g.
``["rate_limited", "text"]`` for "429, then success" -- and gets a base URL to give
to an adapter or an official SDK. The server routes on ``/s/<script>/`` and checks
that the rest of the path is the provider's endpoint (``chat/completions``,
``responses``, ``v1/messages``, ``...:streamGenerateContent?alt=sse``), so a client
that calls the wrong endpoint gets a 404 rather than a wrong stream.

SSE bodies are written with chunked encoding in slices of odd sizes
(:data:`WRITE_SIZES`, cycling), so that lines, UTF-8 sequences and CRLF pairs are split
across writes. A script may stop writing after ``hold_after`` bytes and wait for the
client to go away (cancellation tests: :attr:`ReplayServer.disconnects` counts the
disconnects the server saw), or cut the connection after ``cut_after`` bytes without
finishing the chunked body (a dropped connection).

:meth:`ReplayServer.serve_model` puts a live in-process :class:`LLMClient` (the
embedded demo model, a scripted test model) behind the same server as an OpenAI Chat
Completions endpoint: the request is read back into AG-UI messages
(:func:`~adapters.openai_chat.parse_chat_request`) and the model's items are written
as Chat SSE (:func:`~adapters.openai_chat.encode_chat_stream`). With
:func:`serve_over_openai_chat` a model is reached through the production path --
:class:`~adapters.openai_chat.OpenAIChatClient`, httpx, the engine's SSE decoder and
the Chat parser -- instead of being called directly. A client that goes away closes
the model's stream.

Every request is recorded (:attr:`ReplayServer.requests`: path, query, headers, JSON
body, and the client's address): :attr:`ReplayServer.connections` counts the distinct
TCP connections (client ports) requests came on, so a test can check that a tool loop
reuses one connection. The server never logs requests; recorded headers never appear in ``repr``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

from agui_engine.llm import LLMClient
from agui_engine.protocol.errors import RemoteInputError, UsageError

from .openai_chat import OpenAIChatClient, encode_chat_stream, parse_chat_request

__all__ = [
    "DISCONNECT_POLL_SECONDS",
    "FIXTURES_DIR",
    "Fixture",
    "PROVIDERS",
    "RecordedRequest",
    "ReplayServer",
    "fixture_names",
    "load_fixture",
    "serve_over_openai_chat",
]

FIXTURES_DIR = Path(__file__).parent / "fixtures"

#: provider -> (endpoint suffix the request path must end with, base-URL suffix the
#: clients expect: OpenAI clients take ``.../v1``, Anthropic and Gemini the host root).
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai_chat": ("/v1/chat/completions", "/v1"),
    "openai_compatible": ("/v1/chat/completions", "/v1"),
    "openai_responses": ("/v1/responses", "/v1"),
    "anthropic": ("/v1/messages", ""),
    "gemini": (":streamGenerateContent", ""),
}

#: Sizes of successive writes of an SSE body: small primes and odd sizes so that every
#: kind of boundary (inside a line, a UTF-8 sequence, a CRLF pair) gets split.
_WRITE_SIZES = (1, 2, 3, 5, 7, 11, 13, 17, 31, 64, 127, 509)
#: How often a held stream checks whether the client went away.
DISCONNECT_POLL_SECONDS = 0.01


class Fixture(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    name: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def is_stream(self) -> bool:
        return self.status == 200


def fixture_names(provider: str) -> list[str]:
    """The fixture names of one provider, sorted."""
    directory = FIXTURES_DIR / provider
    return sorted(p.stem for p in directory.iterdir() if p.suffix in (".sse", ".json"))


def load_fixture(provider: str, name: str) -> Fixture:
    """Read one fixture. Raises :class:`UsageError` for an unknown provider or name."""
    if provider not in PROVIDERS:
        raise UsageError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    directory = FIXTURES_DIR / provider
    sse = directory / f"{name}.sse"
    if sse.exists():
        return Fixture(
            provider=provider,
            name=name,
            status=200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            body=sse.read_bytes(),
        )
    error = directory / f"{name}.json"
    if error.exists():
        spec = msgspec.json.decode(error.read_bytes())
        return Fixture(
            provider=provider,
            name=name,
            status=int(spec["status"]),
            headers={str(k): str(v) for k, v in spec.get("headers", {}).items()},
            body=msgspec.json.encode(spec["body"]),
        )
    raise UsageError(f"no fixture {name!r} for {provider} in {directory}")


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    query: dict[str, str]
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    json: Any = None
    #: The client's ``(host, port)``: requests on one TCP connection share it.
    peer: tuple[str, int] | None = None

    def __repr__(self) -> str:  # headers carry API keys: never printed
        return f"RecordedRequest(path={self.path!r}, query={self.query!r})"


class _Script(msgspec.Struct, kw_only=True):
    provider: str
    fixtures: list[Fixture]
    hold_after: int | None
    cut_after: int | None
    served: int = 0


class ReplayServer:
    """The replay server (aiohttp, 127.0.0.1, an ephemeral port). Use as
    ``async with ReplayServer() as server: url = server.base_url("anthropic", "text")``."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, write_sizes: Sequence[int] = _WRITE_SIZES, record: bool = True
    ) -> None:
        if not write_sizes or any(size < 1 for size in write_sizes):
            raise UsageError("write_sizes must be positive")
        self.host = host
        self.port = port
        #: whether requests are kept in :attr:`requests` (off for a long-running model endpoint)
        self.record = record
        self.write_sizes = tuple(write_sizes)
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        self._disconnected = asyncio.Event()
        self._scripts: dict[str, _Script] = {}
        self._models: dict[str, LLMClient] = {}
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise UsageError("ReplayServer is not started")
        return f"http://{self.host}:{self._port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/s/{script}/{tail:.*}", self._handle)
        app.router.add_post("/m/{model}/v1/chat/completions", self._handle_model)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])  # the port the OS chose for port 0

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ReplayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def base_url(
        self, provider: str, *fixtures: str | Fixture, hold_after: int | None = None, cut_after: int | None = None
    ) -> str:
        """Register a script (the fixtures served to successive requests; the last one
        repeats) and return the base URL a client of ``provider`` is configured with.
        A fixture is a recorded one's name, or a :class:`Fixture` made by the caller (a
        hostile upstream: an error body or stream built for one test)."""
        if not fixtures:
            raise UsageError("a script needs at least one fixture")
        loaded = [f if isinstance(f, Fixture) else load_fixture(provider, f) for f in fixtures]
        script_id = f"{provider}-{len(self._scripts)}"
        self._scripts[script_id] = _Script(provider=provider, fixtures=loaded, hold_after=hold_after, cut_after=cut_after)
        return f"{self.url}/s/{script_id}{PROVIDERS[provider][1]}"

    def serve_model(self, llm: LLMClient) -> str:
        """Serve ``llm`` as an OpenAI Chat Completions endpoint; returns the base URL
        (``.../v1``) for an OpenAI client."""
        model_id = f"model-{len(self._models)}"
        self._models[model_id] = llm
        return f"{self.url}/m/{model_id}/v1"

    @property
    def connections(self) -> int:
        """How many distinct TCP connections (client address and port) the recorded
        requests came on."""
        return len({r.peer for r in self.requests})

    async def wait_for_disconnect(self, timeout: float) -> bool:
        """Wait until the server has seen a client go away mid-stream."""
        try:
            await asyncio.wait_for(self._disconnected.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- serving
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        script = self._scripts.get(request.match_info["script"])
        if script is None:
            return web.json_response({"error": {"message": "unknown script", "type": "not_found"}}, status=404)
        endpoint = PROVIDERS[script.provider][0]
        if not request.path.endswith(endpoint):
            return web.json_response(
                {"error": {"message": f"{script.provider} endpoint is {endpoint}, not {request.path}", "type": "not_found"}},
                status=404,
            )
        if script.provider == "gemini" and request.query.get("alt") != "sse":
            return web.json_response({"error": {"code": 400, "message": "replay serves alt=sse only", "status": "INVALID_ARGUMENT"}}, status=400)
        raw = await request.read()
        try:
            body = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            return web.json_response({"error": {"message": "request body is not JSON", "type": "invalid_request_error"}}, status=400)
        self.requests.append(
            RecordedRequest(
                path=request.path, query=dict(request.query), headers=dict(request.headers), json=body, peer=_peer(request)
            )
        )
        fixture = script.fixtures[min(script.served, len(script.fixtures) - 1)]
        script.served += 1
        if not fixture.is_stream:
            return web.Response(status=fixture.status, body=fixture.body, headers=fixture.headers)
        response = web.StreamResponse(status=200, headers=fixture.headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        data = fixture.body
        limit = len(data)
        if script.hold_after is not None:
            limit = min(limit, script.hold_after)
        if script.cut_after is not None:
            limit = min(limit, script.cut_after)
        try:
            await self._write_slices(response, data[:limit])
            if script.hold_after is not None and script.hold_after < len(data):
                await self._hold(request)
                return response
            if script.cut_after is not None and script.cut_after < len(data):
                assert request.transport is not None
                request.transport.close()  # no terminating chunk: a dropped connection
                return response
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            self._saw_disconnect()
        return response

    async def _handle_model(self, request: web.Request) -> web.StreamResponse:
        llm = self._models.get(request.match_info["model"])
        if llm is None:
            return web.json_response({"error": {"message": "unknown model route", "type": "not_found"}}, status=404)
        try:
            raw = await request.read()
        except ConnectionError:  # the client went away while sending (a run cancelled early): nothing to answer
            self._saw_disconnect()
            return web.Response(status=499)
        try:
            body = msgspec.json.decode(raw)
            model, call = parse_chat_request(body)
        except (msgspec.DecodeError, RemoteInputError, KeyError, TypeError) as exc:
            message = exc.message if isinstance(exc, RemoteInputError) else f"bad request body ({type(exc).__name__})"
            return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=400)
        if self.record:
            self.requests.append(
                RecordedRequest(
                    path=request.path, query=dict(request.query), headers=dict(request.headers), json=body, peer=_peer(request)
                )
            )
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        items = llm.complete(
            call.messages,
            call.tools,
            call.tool_choice,
            parallel_tool_calls=call.parallel_tool_calls,
            max_output_tokens=call.max_output_tokens,
        )
        try:
            async with aclosing(encode_chat_stream(items, model=model)) as frames:
                async for frame in frames:
                    await response.write(frame)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            self._saw_disconnect()
        finally:
            close = getattr(items, "aclose", None)  # an LLMClient's stream is an async generator
            if close is not None:
                await close()
        return response

    async def _write_slices(self, response: web.StreamResponse, data: bytes) -> None:
        offset = 0
        for size in itertools.cycle(self.write_sizes):
            if offset >= len(data):
                break
            await response.write(data[offset : offset + size])
            offset += size

    async def _hold(self, request: web.Request) -> None:
        while True:
            transport = request.transport
            if transport is None or transport.is_closing():
                self._saw_disconnect()
                return
            await asyncio.sleep(DISCONNECT_POLL_SECONDS)

    def _saw_disconnect(self) -> None:
        self.disconnects += 1
        self._disconnected.set()


def _peer(request: web.Request) -> tuple[str, int] | None:
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    return (str(peer[0]), int(peer[1])) if peer else None


@asynccontextmanager
async def serve_over_openai_chat(llm: LLMClient, *, model: str = "served-model") -> AsyncIterator[OpenAIChatClient]:
    """A real :class:`OpenAIChatClient` talking over loopback HTTP to ``llm``.

    ``async with serve_over_openai_chat(EmbeddedModel()) as client: LLMAgent(client)``
    runs the demo through the production adapter path.
    """
    async with ReplayServer() as server:
        client = OpenAIChatClient(model, api_key="loopback", base_url=server.serve_model(llm), max_retries=0)
        try:
            yield client
        finally:
            await client.aclose()
