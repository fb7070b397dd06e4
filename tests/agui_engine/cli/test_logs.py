"""No secret reaches a log line, even at ``--log-level debug`` (issue: hardening):
the HTTP and WebSocket libraries' DEBUG traces print headers and URLs, and the
CLI's log setup (agui_engine/cli/logs.py) rewrites those records. The end-to-end
tests run the real ``serve`` command at DEBUG in front of a hostile upstream
that echoes the API key back in its headers, and behind a WebSocket client that
authenticates with a header and a ``?access_token=``. And what a served agent prints (a
framework's console panels) is a DEBUG record, never a stdout line (``route_console``)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import msgspec
from aiohttp import web
from websockets.asyncio.client import connect

from agui_engine.cli.logs import MAX_LOGGED_MESSAGE_CHARS, REDACTED, SecretFilter, scrub_log_text

KEY = "sk-test-4f1c9a0b7e2d46c8a1b3e5f7a9c0d2e4"
TOKEN = "gateway-token-6b1e0f2a9c7d4e3b8a5f"
ROOT = Path(__file__).resolve().parents[3]


def test_the_shapes_the_libraries_print_are_scrubbed() -> None:
    cases = [
        # httpcore's response headers, hpack's header tuples
        f"receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', [(b'x-api-key', b'{KEY}'), (b'Content-Type', b'x')])",
        f"Adding (b'authorization', b'Bearer {KEY}') to the header table",
        f"('Authorization', 'Bearer {KEY}')",
        # websockets' handshake trace, raw HTTP
        f"> Authorization: Bearer {KEY}",
        f"< x-goog-api-key: {KEY}\r\n< Host: x",
        # httpx's request line, the WebSocket browser token
        f'HTTP Request: POST https://generativelanguage.googleapis.com/v1/m:stream?alt=sse&key={KEY} "HTTP/1.1 200 OK"',
        f"< GET /?access_token={KEY}&batch=0 HTTP/1.1",
        # a run key: header, EventSource query, the WebSocket's first line (websockets' frame trace)
        f"< X-AGUI-Run-Key: {KEY}",
        f"GET /runs/run-1?runKey={KEY}",
        f"""> TEXT '{{"id":"r:1","event":{{"type":"RUN_STARTED"}},"runKey":"{KEY}"}}' [90 bytes]""",
        f'{{\\"runKey\\": \\"{KEY}\\"}}',
    ]
    for text in cases:
        clean = scrub_log_text(text, [])
        assert KEY not in clean and REDACTED in clean, clean
    # a known secret anywhere, and ordinary text left alone
    assert scrub_log_text(f"upstream said {KEY[3:]}!", [KEY[3:]]) == f"upstream said {REDACTED}!"
    plain = "POST / 200 run=run-1 2.0ms (Content-Type: application/json)"
    assert scrub_log_text(plain, [KEY]) == plain
    assert scrub_log_text("< Host: 127.0.0.1:8000", []) == "< Host: 127.0.0.1:8000"


def test_the_filter_rewrites_arguments_and_tracebacks() -> None:
    record = logging.LogRecord("httpcore.http11", logging.DEBUG, __file__, 1, "headers %s", ([(b"x-api-key", KEY.encode())],), None)
    try:
        raise RuntimeError(f"failed with {KEY}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    assert SecretFilter([KEY]).filter(record)
    text = logging.Formatter().format(record)
    assert KEY not in text and REDACTED in text and "RuntimeError" in text


def test_a_huge_message_is_cut_at_the_named_size_after_the_scrubbing() -> None:
    # what the MCP SDK logs at DEBUG for a 500 KB proxied notification: one record, the whole message
    payload = '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + "x" * 500_000 + '"}}'
    # a secret straddling the cut: scrubbed first, so no prefix of it survives the cut
    message = "Sending client message: " + payload[:MAX_LOGGED_MESSAGE_CHARS - 40] + KEY + payload
    record = logging.LogRecord("mcp.client.streamable_http", logging.DEBUG, __file__, 1, "%s", (message,), None)
    assert SecretFilter([KEY]).filter(record)
    text = logging.Formatter().format(record)
    assert len(text) < MAX_LOGGED_MESSAGE_CHARS + 200 and text.startswith("Sending client message: {")
    assert KEY[:8] not in text
    assert text.endswith(f"more characters cut: MAX_LOGGED_MESSAGE_CHARS={MAX_LOGGED_MESSAGE_CHARS}]")
    # an ordinary record is left whole
    short = logging.LogRecord("x", logging.INFO, __file__, 1, "POST / 200 %s", ("run=r1",), None)
    assert SecretFilter([KEY]).filter(short) and short.getMessage() == "POST / 200 run=r1"


# --------------------------------------------------------------------------- the real serve command


@asynccontextmanager
async def hostile_upstream() -> AsyncIterator[tuple[str, list[str]]]:
    """An OpenAI-compatible server on loopback that answers a streamed chat
    completion and echoes the request's credentials back in response headers."""
    seen: list[str] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        seen.append(auth)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Echo-Authorization": auth, "x-api-key": KEY})
        await resp.prepare(request)
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hello"}, "finish_reason": None}]}
        done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        for doc in (chunk, done):
            await resp.write(b"data: " + msgspec.json.encode(doc) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serve(*args: str, env: dict[str, str]) -> AsyncIterator[tuple[str, list[bytes]]]:
    """``agui-engine --debug serve --log-level debug --loop asyncio ...``: its URL and, after
    the block, every stderr line it wrote. On asyncio's loop, not uvloop (serve's default where
    installed): asyncio traces its selector at DEBUG, the canary that DEBUG records reach the log;
    uvloop writes none, and a served run writes none of its own."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "--debug", "serve", "--log-level", "debug", "--loop", "asyncio",
        "--port", "0", *args,
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env={**os.environ, **env},
    )
    assert proc.stderr is not None
    lines: list[bytes] = []
    url = None
    while url is None:
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert line, b"".join(lines).decode()
        lines.append(line)
        if line.startswith(b"serving on "):
            url = line.split()[-1].decode()
    try:
        yield url, lines
    finally:
        proc.terminate()
        rest = await asyncio.wait_for(proc.stderr.read(), 15)
        lines.append(rest)
        await asyncio.wait_for(proc.wait(), 15)


async def test_serve_at_debug_never_logs_the_upstream_key_or_the_gateway_token() -> None:
    async with hostile_upstream() as (base, seen):
        env = {"OPENAI_COMPATIBLE_API_KEY": KEY, "AGUI_AUTH_TOKEN": TOKEN}
        async with serve("--agent", f"openai-compatible:{base}#m", env=env) as (url, lines):
            body = {"threadId": "t", "runId": "logs-1", "messages": [{"id": "u", "role": "user", "content": "hi"}],
                    "tools": [], "context": [], "state": None, "forwardedProps": None}
            async with httpx.AsyncClient(timeout=30) as http:
                r = await http.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"})
            assert r.status_code == 200 and b"RUN_FINISHED" in r.content, r.text
    assert seen == [f"Bearer {KEY}"]  # the key really went upstream in a header, and came back in two
    log = b"".join(lines).decode()
    # DEBUG was on, and the upstream call (the provider client: httpx on aiohttp's transport, which
    # traces no headers, unlike httpcore's receive_response_headers) was logged
    assert " DEBUG " in log and f"HTTP Request: POST {base}/chat/completions" in log, "DEBUG traces were not on"
    assert KEY not in log and TOKEN not in log


async def test_serve_ws_at_debug_never_logs_the_handshake_credentials() -> None:
    async with serve("--transport", "ws", "--agent", "py:tests.transports.scripted:agent", env={"AGUI_AUTH_TOKEN": TOKEN}) as (url, lines):
        async with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            await ws.ping()
        async with connect(f"{url}?access_token={TOKEN}") as ws:
            await ws.ping()
    log = b"".join(lines).decode()
    assert "Upgrade: websocket" in log, "the handshake trace was not on"
    assert TOKEN not in log
    assert REDACTED in log


# --------------------------------------------------------------------------- console noise


def test_console_lines_become_debug_records_without_colour_and_stdout_comes_back() -> None:
    from agui_engine.cli.logs import CONSOLE_LOGGER, ConsoleToLog, route_console

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger(CONSOLE_LOGGER)
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    real = sys.stdout
    try:
        with route_console() as stdout:
            assert stdout is real and isinstance(sys.stdout, ConsoleToLog) and not sys.stdout.isatty()
            print("\x1b[32m╭─ Crew ─╮\x1b[0m\n\n│ done", end="")
            print(" │")
            sys.stdout.write("no newline yet")
        assert sys.stdout is real
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.DEBUG, "console: ╭─ Crew ─╮"), (logging.DEBUG, "console: │ done │"),
        (logging.DEBUG, "console: no newline yet")]


def _stdio(level: str) -> subprocess.CompletedProcess[bytes]:
    line = msgspec.json.encode({"threadId": "t", "runId": "r1", "messages": [], "tools": [], "context": [],
                                "state": None, "forwardedProps": None}) + b"\n"
    return subprocess.run([sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio", "--log-level", level,
                           "--agent", "py:tests.agui_engine.cli.printing_agent:agent"],
                          input=line, capture_output=True, timeout=60, cwd=ROOT)


def test_what_a_served_agent_prints_is_logged_at_debug_and_never_reaches_stdio_protocol_lines() -> None:
    quiet = _stdio("info")
    assert quiet.returncode == 0, quiet.stderr.decode()
    types = [msgspec.json.decode(x)["type"] for x in quiet.stdout.splitlines()]
    assert types == ["RUN_STARTED", "RUN_FINISHED"]  # stdout: protocol lines only
    assert "╭" not in quiet.stderr.decode() and "imported" not in quiet.stderr.decode()
    loud = _stdio("debug")
    assert [msgspec.json.decode(x)["type"] for x in loud.stdout.splitlines()] == ["RUN_STARTED", "RUN_FINISHED"]
    log = loud.stderr.decode()
    assert "console: agent module imported" in log and "console: ╭── running ──╮" in log and "\x1b[1m" not in log
