"""What the servers' sockets do under a hostile or flaky network (issue: hardening,
findings 1 and 6): the listen backlog really applied, timeouts for every phase a
client controls, a cap on connections that run nothing, and fd exhaustion. Real
servers on loopback, real sockets."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import websockets

from agui_engine.transports.listening_socket import LISTEN_BACKLOG
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent


def listen_backlog(port: int) -> int:
    """The accept-queue size the kernel holds for the listener on ``port``: ``ss``
    shows it as Send-Q of a LISTEN socket (inet_diag's idiag_wqueue = sk_max_ack_backlog)."""
    ss = shutil.which("ss")
    assert ss is not None, "ss (iproute2) is needed: tests/install-deps.sh installs it"
    out = subprocess.run([ss, "-ltnH", f"sport = :{port}"], capture_output=True, text=True, timeout=10, check=True).stdout
    (line,) = out.strip().splitlines()
    return int(line.split()[2])


def expected_backlog() -> int:
    with open("/proc/sys/net/core/somaxconn") as f:
        return min(LISTEN_BACKLOG, int(f.read()))


def port_of(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


async def test_the_sse_server_listens_with_the_documented_backlog() -> None:
    async with await start_sse_server(ScriptedAgent()) as srv:
        assert listen_backlog(port_of(srv.url)) == expected_backlog() > 128


async def test_the_websocket_server_listens_with_the_documented_backlog() -> None:
    async with await start_websocket_server(ScriptedAgent()) as srv:
        assert listen_backlog(port_of(srv.url)) == expected_backlog() > 100


# --------------------------------------------------------------------------- timeouts

import asyncio  # noqa: E402
import time  # noqa: E402

import msgspec  # noqa: E402

from .scripted import make_input  # noqa: E402


async def _closed_within(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, trickle: bytes, limit: float) -> float:
    """Send ``trickle`` one byte every 50 ms (forever, if it must) until the server
    closes the connection; return how long that took (fails after ``limit``)."""
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < limit:
        if i < len(trickle):
            try:
                writer.write(trickle[i : i + 1])
                await writer.drain()
            except ConnectionError:
                return time.monotonic() - start
            i += 1
        try:
            data = await asyncio.wait_for(reader.read(65536), 0.05)
        except TimeoutError:
            continue
        except ConnectionError:
            return time.monotonic() - start
        if not data or data.startswith(b"HTTP/1.1 408"):
            return time.monotonic() - start
    raise AssertionError(f"still open after {limit} s")


async def test_http_connections_that_send_nothing_or_trickle_headers_are_cut_within_the_idle_timeout() -> None:
    async with await start_sse_server(ScriptedAgent(), connection=ConnectionOptions(idle_timeout=0.5)) as srv:
        port = port_of(srv.url)
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        silent, trickler = conns
        trickle = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + b"X-Pad: " + b"a" * 200
        took = await asyncio.gather(
            _closed_within(*silent, b"", 5),
            _closed_within(*trickler, trickle, 5),
        )
        assert all(t < 0.5 * 2 + 0.5 for t in took), took
        # idle keep-alive: a finished request, then nothing
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conns.append((reader, writer))
        payload = msgspec.json.encode(make_input("ka"))
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/x-ndjson\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
        )
        await writer.drain()
        body = b""
        while b"RUN_FINISHED" not in body:
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            assert chunk, body  # closed before the run ended
            body += chunk
        assert await _closed_within(reader, writer, b"", 5) < 2.0
        for _, w in conns:
            w.close()


async def test_a_trickled_request_body_is_answered_408_within_the_body_timeout_and_starts_nothing() -> None:
    agent = ScriptedAgent()
    async with await start_sse_server(agent, connection=ConnectionOptions(body_timeout=0.5)) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(srv.url))
        payload = msgspec.json.encode(make_input("slow-body"))
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
        )
        await writer.drain()
        start = time.monotonic()
        answer = b""
        for i in range(len(payload) - 1):  # all but the last byte, slowly
            writer.write(payload[i : i + 1])
            await writer.drain()
            try:
                answer += await asyncio.wait_for(reader.read(65536), 0.05)
            except TimeoutError:
                pass
            if answer:
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"request_timeout"' in answer
        assert time.monotonic() - start < 2.0
        writer.close()
    assert agent.started == set()


async def test_a_websocket_handshake_that_never_completes_is_cut_within_the_open_timeout() -> None:
    async with await start_websocket_server(ScriptedAgent(), open_timeout=0.5) as srv:
        port = port_of(srv.url)
        silent = await asyncio.open_connection("127.0.0.1", port)
        trickler = await asyncio.open_connection("127.0.0.1", port)
        trickle = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + b"X-Pad: " + b"a" * 200
        took = await asyncio.gather(_closed_within(*silent, b"", 5), _closed_within(*trickler, trickle, 5))
        assert all(t < 1.5 for t in took), took
        for _, w in (silent, trickler):
            w.close()


# --------------------------------------------------------------------------- descriptor exhaustion

import sys  # noqa: E402

_EXHAUSTED_SERVER = """
import asyncio, logging, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from tests.transports.scripted import ScriptedAgent
from agui_engine.transports.sse_server import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server
from agui_engine.transports.server_options import ConnectionOptions

async def main():
    if sys.argv[1] == "sse":
        srv = await start_sse_server(ScriptedAgent(deltas=1), connection=ConnectionOptions(idle_timeout=1.0))
    else:
        srv = await start_websocket_server(ScriptedAgent(deltas=1), open_timeout=1.0)
    print(srv.url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await srv.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_descriptor_exhaustion_sheds_connections_logs_once_and_keeps_serving(transport: str) -> None:
    """A server limited to 64 descriptors, 200 idle connections: it logs one line
    (not one per accept), and a real client still gets its run through meanwhile."""
    import socket

    from websockets.asyncio.client import connect

    root = str(Path(__file__).resolve().parents[2])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _EXHAUSTED_SERVER, transport, cwd=root,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
    hogs = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port_of(url)))
            except BlockingIOError:
                pass
            hogs.append(s)
        await asyncio.sleep(1.5)
        served = False
        for attempt in range(20):  # a real client retries a refused connection, as SSEAgent does
            try:
                if transport == "sse":
                    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
                    payload = msgspec.json.encode(make_input(f"real-{attempt}"))
                    writer.write(
                        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
                    )
                    body = await asyncio.wait_for(reader.read(-1), 5)
                    writer.close()
                    served = b"RUN_FINISHED" in body
                else:
                    async with connect(url, open_timeout=5) as ws:
                        await ws.send(msgspec.json.encode({"type": "run", "input": make_input(f"real-{attempt}")}).decode())
                        got = ""
                        while "RUN_FINISHED" not in got:
                            got = str(await asyncio.wait_for(ws.recv(), 5))
                        served = True
            except (OSError, TimeoutError, websockets.ConnectionClosed, websockets.InvalidHandshake):
                await asyncio.sleep(0.25)
                continue
            if served:
                break
        assert served
    finally:
        for s in hogs:
            s.close()
        proc.stdin.close()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    lines = err.decode().splitlines()
    assert sum("file descriptors exhausted" in line for line in lines) <= 2, lines[:20]
    assert not any("out of system resource" in line for line in lines), lines[:20]
    assert len(lines) < 20, lines[:20]


# --------------------------------------------------------------------------- the cap on connections that run nothing

import logging  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from contextlib import asynccontextmanager  # noqa: E402

from websockets.asyncio.client import connect as ws_connect  # noqa: E402

from ..waiting import eventually  # noqa: E402


async def _open_from(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to 127.0.0.1:port whose source address is ``address`` (any
    127.0.0.0/8 address is the loopback interface on Linux: distinct client IPs)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))


async def _refused(reader: asyncio.StreamReader) -> bytes:
    """What a refused connection got before its close: the whole 503 answer."""
    data = await asyncio.wait_for(reader.read(), 5)
    return data


def _is_refusal(data: bytes) -> bool:
    head = data.split(b"\r\n\r\n", 1)[0]
    return head.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1" in head


async def _still_open(reader: asyncio.StreamReader) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), 0.2)
    except TimeoutError:
        return True
    return bool(data)


@asynccontextmanager
async def _connections() -> AsyncIterator[list[asyncio.StreamWriter]]:
    writers: list[asyncio.StreamWriter] = []
    try:
        yield writers
    finally:
        for w in writers:
            w.close()


def _start_run_request(run_id: str) -> bytes:
    payload = msgspec.json.encode(make_input(run_id))
    return (
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/x-ndjson\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
    )


async def _read_until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        assert chunk, got
        got += chunk
    return got


async def test_http_idle_connections_of_one_address_hit_the_per_ip_cap_while_runs_in_flight_do_not_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = ScriptedAgent(deltas=1, hang=True)
    caplog.set_level(logging.WARNING, logger="agui_engine.transports")
    async with await start_sse_server(agent, connection=ConnectionOptions(max_idle_per_ip=3, max_idle_connections=100)) as srv, _connections() as ws:
        port = port_of(srv.url)
        # two connections from 127.0.0.2 stream runs: they are not counted
        for i in range(2):
            r, w = await _open_from("127.0.0.2", port)
            ws.append(w)
            w.write(_start_run_request(f"cap-run-{i}"))
            await _read_until(r, b"TEXT_MESSAGE_CONTENT")
        # three idle ones fill the address's cap
        idle = []
        for _ in range(3):
            r, w = await _open_from("127.0.0.2", port)
            ws.append(w)
            idle.append((r, w))
        await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 3)
        # the fourth, fifth ... idle connection of that address: 503 + Retry-After, closed
        for _ in range(5):
            r, w = await _open_from("127.0.0.2", port)
            ws.append(w)
            assert _is_refusal(await _refused(r))
        # another address is still served, and an idle connection that starts a run is served
        r, w = await _open_from("127.0.0.3", port)
        ws.append(w)
        w.write(_start_run_request("other-address"))
        await _read_until(r, b"TEXT_MESSAGE_CONTENT")
        r0, w0 = idle[0]
        w0.write(_start_run_request("from-an-idle-one"))
        await _read_until(r0, b"TEXT_MESSAGE_CONTENT")
        # ... which frees a place under the cap for a new connection of that address
        await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 2)
        r, w = await _open_from("127.0.0.2", port)
        ws.append(w)
        assert await _still_open(r)
        assert all([await _still_open(r) for r, _ in idle[1:]])
        assert srv.gate is not None and srv.gate.refused == 5
    # five refusals, one warning line (once per interval, never per connection)
    caps = [rec for rec in caplog.records if "at their cap" in rec.getMessage()]
    assert len(caps) == 1, [rec.getMessage() for rec in caps]


async def test_http_global_cap_on_connections_that_run_nothing() -> None:
    async with await start_sse_server(ScriptedAgent(), connection=ConnectionOptions(max_idle_per_ip=100, max_idle_connections=4)) as srv, _connections() as ws:
        port = port_of(srv.url)
        for i in range(4):
            _, w = await _open_from(f"127.0.0.{10 + i}", port)
            ws.append(w)
        await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 4)
        r, w = await _open_from("127.0.0.20", port)
        ws.append(w)
        assert _is_refusal(await _refused(r))
        # a closed idle connection gives its place back
        ws[0].close()
        await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 3)
        r, w = await _open_from("127.0.0.21", port)
        ws.append(w)
        w.write(_start_run_request("after-a-place-freed"))
        assert b"RUN_FINISHED" in await _read_until(r, b"RUN_FINISHED")


async def test_websocket_connections_without_a_run_are_capped_at_the_handshake() -> None:
    agent = ScriptedAgent(deltas=1, hang=True)
    async with await start_websocket_server(agent, connection=ConnectionOptions(max_idle_per_ip=2, max_idle_connections=3)) as srv, _connections() as raw:
        port = port_of(srv.url)
        # a connection with a run in flight is not counted
        async with ws_connect(srv.url) as running:
            await running.send(msgspec.json.encode({"type": "run", "input": make_input("ws-cap")}).decode())
            got = ""
            while "TEXT_MESSAGE_CONTENT" not in got:
                got = str(await asyncio.wait_for(running.recv(), 5))
            await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 0)
            # two handshaken connections with no run, from 127.0.0.1: the address's cap
            async with ws_connect(srv.url) as a, ws_connect(srv.url) as b:
                assert srv.gate is not None and srv.gate.idle_count == 2
                with pytest.raises(websockets.InvalidStatus) as refused:
                    await ws_connect(srv.url, open_timeout=5)
                assert refused.value.response.status_code == 503
                assert refused.value.response.headers["Retry-After"] == "1"
                # a silent TCP connection (no handshake) from another address counts too ...
                _, w = await _open_from("127.0.0.5", port)
                raw.append(w)
                await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 3)
                # ... and fills the global cap: a third address is refused before its handshake
                r, w = await _open_from("127.0.0.6", port)
                raw.append(w)
                assert _is_refusal(await _refused(r))
                # a connection that starts a run leaves the count; the others still work
                await a.send(msgspec.json.encode({"type": "run", "input": make_input("ws-cap-2")}).decode())
                got = ""
                while "TEXT_MESSAGE_CONTENT" not in got:
                    got = str(await asyncio.wait_for(a.recv(), 5))
                await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 2)
                await b.ping()
            # the run ends, the connection counts again
            await running.send(msgspec.json.encode({"type": "cancel", "runId": "ws-cap"}).decode())
            while "RUN_ERROR" not in got:
                got = str(await asyncio.wait_for(running.recv(), 5))
            await eventually(lambda: srv.gate is not None and srv.gate.idle_count == 2)


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_serve_flags_set_the_caps(transport: str) -> None:
    import os
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--transport", transport, "--port", "0",
        "--agent", "py:tests.transports.scripted:agent", "--max-idle-per-ip", "1", "--max-idle-connections", "0",
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env={**os.environ, "AGUI_AUTH_TOKEN": ""},
    )
    try:
        assert proc.stderr is not None
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
            assert line, "the server did not start"
            if line.startswith("serving on "):
                url = line.split()[-1]
        port = port_of(url)
        async with _connections() as ws:
            _, w = await _open_from("127.0.0.7", port)
            ws.append(w)
            # the first may still be on its way into the server: refusal is what the second gets
            r, w = await _open_from("127.0.0.7", port)
            ws.append(w)
            assert _is_refusal(await _refused(r))
            r, w = await _open_from("127.0.0.8", port)
            ws.append(w)
            assert await _still_open(r)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)


def test_serve_refuses_a_negative_cap_in_one_line() -> None:
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "agui_engine", "serve", "--max-idle-per-ip", "-1"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "integer >= 0" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
