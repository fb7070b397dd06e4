"""``agui-engine run`` as a real subprocess against a real gateway: one message, multi-turn, client tools."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agui_engine.transports import start_sse_server
from tests.helpers import free_port

from ..thread_agents import ApprovalAgent, client_tools_agent

RUN = [sys.executable, "-m", "agui_engine", "run"]
#: a few runs of the embedded model in a fresh interpreter: seconds; the deadline stops a hang
DEADLINE = 60


async def agui_run(*args: str, stdin: str = "") -> tuple[int, list[dict[str, Any]], str]:
    proc = await asyncio.create_subprocess_exec(*RUN, *args, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), DEADLINE)
    assert proc.returncode is not None
    return proc.returncode, [json.loads(line) for line in out.decode().splitlines()], err.decode()


async def test_multi_turn_with_a_client_tool() -> None:
    server = await start_sse_server(client_tools_agent(), port=0)
    try:
        code, events, err = await agui_run("--url", server.url, "--raw", "--tool",
                                           "tests.agui_engine.thread_agents:get_weather",
                                           stdin="What's the weather in Tokyo?\n\nthanks\n/quit\nnever sent\n")
    finally:
        await server.close()
    assert code == 0, err
    starts = [e for e in events if e["type"] == "RUN_STARTED"]
    assert len(starts) == 3 and len({e["threadId"] for e in starts}) == 1  # 2 runs for the tool turn + 1
    assert [e["type"] for e in events].count("RUN_FINISHED") == 3
    ends = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "tambo.component.end"]
    # the card names its data (the weather.current resource); the local tool's numbers reached the model
    assert ends and ends[0]["finalProps"]["resourceId"] == "weather.current"
    assert ends[0]["finalProps"]["params"] == {"city": "Tokyo"}
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "It's 3.5°C and snow in Tokyo" in text


async def test_one_message_and_an_interrupt_answered_from_stdin() -> None:
    server = await start_sse_server(ApprovalAgent(), port=0)
    try:
        code, events, _ = await agui_run("--url", server.url, "--raw", "hi")
        assert code == 0 and events[-1]["outcome"]["type"] == "interrupt"  # one message: no follow-up
        code, events, _ = await agui_run("--url", server.url, "--raw", "--chat", stdin="deploy\nyes please\n")
    finally:
        await server.close()
    assert code == 0
    texts = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["approve-1: resolved yes please"]


async def test_usage_mistakes_are_one_line() -> None:
    code, _, err = await agui_run("--url", "http://127.0.0.1:9/", "--tool", "nomodule", "hi")
    assert code == 2 and err.count("\n") == 1 and "write module:function" in err
    code, _, err = await agui_run("--url", "http://127.0.0.1:9/", "--chat", "hi")
    assert code == 2 and "not both" in err and "Traceback" not in err


# --------------------------------------------------------------------------- endpoints that are not AG-UI


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]




async def _http_server_subprocess(tmp_path: Any) -> tuple[asyncio.subprocess.Process, int]:
    """``python -m http.server`` on a free loopback port, once it answers."""
    import httpx

    port = free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                                cwd=tmp_path, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL)
    async with httpx.AsyncClient() as client:
        for _ in range(200):  # bounded: it listens within a second
            try:
                await client.get(f"http://127.0.0.1:{port}/")
                return proc, port
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError("python -m http.server did not start")


async def test_against_python_http_server_names_the_answer(tmp_path: Any) -> None:
    proc, port = await _http_server_subprocess(tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/"
        code, _, err = await agui_run("--url", url, "hi")
        tls_code, _, tls_err = await agui_run("--url", f"https://127.0.0.1:{port}/", "hi")
    finally:
        proc.kill()
        await proc.wait()
    line = _one_line(err)
    assert code == 2
    # http.server answers POST with a 14-line HTML 501 page: named by status and type, not dumped
    assert "answered 501 text/html, not an AG-UI event stream" in line and "<html" not in line.lower()
    assert "agui-engine serve --port" in line
    tls_line = _one_line(tls_err)
    assert tls_code == 2
    assert "TLS handshake failed (WRONG_VERSION_NUMBER)" in tls_line and "plain HTTP" in tls_line
    assert f"--url http://127.0.0.1:{port}/" in tls_line and "cannot reach" not in tls_line


async def test_a_200_html_answer_is_posted_once_and_named() -> None:
    """A server answering every POST with 200 text/html (a web app, a captive portal):
    one POST (no retry: it never sent an event id), one line naming what came back."""
    from tests.loopback_http import QuietHandler, serving_handler

    posts: list[str] = []

    class Page(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            posts.append(self.path)
            self.read_body()
            body = b"<!doctype html><html><body><h1>Welcome</h1></body></html>\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving_handler(Page) as base:
        code, _, err = await agui_run("--url", base + "/agui", "hi")
    line = _one_line(err)
    assert code == 2
    assert posts == ["/agui"]
    assert "answered 200 text/html, not an AG-UI event stream" in line, line
    assert "StreamDropped" not in line and "connection lost" not in line


async def test_a_cards_resource_data_is_shown_as_demo_shows_it() -> None:
    """Against a real ``agui-engine serve`` (the embedded agent, whose WeatherCard is bound to
    weather.current): the rendered card carries the data the endpoint's query route answered,
    the same lines the demo prints from its in-process broker."""
    from agui_engine.demo.weather_model import DEMO_WEATHER

    from .test_first_five_minutes import serving

    with serving("--pace", "0") as url:
        proc = await asyncio.create_subprocess_exec(*RUN, "--url", url, "--plain", "What's the weather in Tokyo?",
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    assert proc.returncode == 0, err.decode()
    demo = await asyncio.create_subprocess_exec(sys.executable, "-m", "agui_engine", "demo", "--plain", "--pace", "0",
                                                "What's the weather in Tokyo?", stdout=asyncio.subprocess.PIPE)
    demo_out, _ = await asyncio.wait_for(demo.communicate(), DEADLINE)

    def data_lines(text: bytes) -> list[str]:
        return [line.strip() for line in text.decode().splitlines() if "⇣" in line]

    assert data_lines(out) == data_lines(demo_out)
    assert data_lines(out)[-len(DEMO_WEATHER["tokyo"]):] == [
        f"⇣ WeatherCard #1 {key}: {value}" for key, value in DEMO_WEATHER["tokyo"].items()]


async def test_wss_against_a_plain_websocket_server_names_the_tls_mismatch() -> None:
    """The WebSocket server resets a TLS hello instead of answering it: the line still says
    that the server speaks plain HTTP there and gives the ws:// URL."""
    from .test_first_five_minutes import serving

    with serving("--transport", "ws") as ws_url:
        wss_url = "wss://" + ws_url.removeprefix("ws://")
        code, _, err = await agui_run("--url", wss_url, "hi")
    line = _one_line(err)
    assert code == 2
    assert "not TLS" in line and f"--url {ws_url}" in line, line


# --------------------------------------------------------------------------- --capabilities


async def test_capabilities_prints_the_endpoints_document_and_starts_no_run() -> None:
    from agui_engine.cli.agent_spec import embedded_agent
    from agui_engine.protocol.capabilities import decode_capabilities
    from agui_engine.transports import start_websocket_server
    from agui_engine.transports.sse_client import SSEAgent

    sse = await start_sse_server(embedded_agent(), port=0, auth_token="tok")
    ws = await start_websocket_server(embedded_agent(), port=0)
    try:
        proc = await asyncio.create_subprocess_exec(*RUN, "--url", sse.url, "--capabilities", "--header",
                                                    "Authorization: Bearer tok", stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
        assert proc.returncode == 0, err
        assert out.startswith(b"{\n  ")  # indented
        assert decode_capabilities(out) == await SSEAgent(sse.url, headers={"Authorization": "Bearer tok"}).capabilities()
        assert sse.registry is not None and sse.registry.active == 0
        code, _, err = await agui_run("--url", sse.url, "--capabilities")
        assert code == 2 and _one_line(err).startswith("agui-engine run: GET ") and "401" in err
        code, out, err = await agui_run("--url", sse.url + "no/such/path", "--capabilities")
        assert code == 0 and out == [{}] and "declares no capabilities" in _one_line(err), (out, err)
        # the wrong transport's scheme: the line a run gets, naming the URL to use
        code, _, err = await agui_run("--url", sse.url.replace("http://", "ws://"), "--capabilities")
        assert code == 2 and _one_line(err).endswith(f"run again with --url {sse.url}"), err
        proc = await asyncio.create_subprocess_exec(*RUN, "--url", ws.url, "--capabilities",
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
        assert proc.returncode == 0, err
        caps = decode_capabilities(out)
        assert caps.transport is not None and caps.transport.websocket is True
        code, _, err = await agui_run("--url", ws.url, "--capabilities", "hi")
        assert code == 2 and "starts no run" in _one_line(err)
    finally:
        await ws.close()
        await sse.close()


def test_debug_shows_the_traceback_of_a_connection_error_and_without_it_one_line() -> None:
    # issue 30: --debug promised tracebacks, and run's connection errors showed only the line
    import os
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    env = {k: v for k, v in os.environ.items() if k != "AGUI_ENGINE_DEBUG"}
    line = (f"agui-engine run: cannot reach http://127.0.0.1:{port}/ (ConnectError): is an AG-UI server running "
            f"there? (agui-engine serve --port {port} starts one)")
    for argv in (["--debug", "run"], ["run", "--debug"]):
        done = subprocess.run([sys.executable, "-m", "agui_engine", *argv, "--url", f"http://127.0.0.1:{port}/", "hi"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 2
        assert "Traceback (most recent call last)" in done.stderr and "httpx.ConnectError" in done.stderr
        assert done.stderr.splitlines()[-1] == line
    plain = subprocess.run([sys.executable, "-m", "agui_engine", "run", "--url", f"http://127.0.0.1:{port}/", "hi"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert plain.returncode == 2 and plain.stderr.splitlines() == [line]
