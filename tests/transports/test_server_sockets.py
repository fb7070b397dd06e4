"""What the servers' sockets do under a hostile or flaky network (issue: hardening,
findings 1 and 6): the listen backlog really applied, timeouts for every phase a
client controls, a cap on connections that run nothing, and fd exhaustion. Real
servers on loopback, real sockets."""

from __future__ import annotations

import shutil
import subprocess

from agui_engine.transports.common import LISTEN_BACKLOG
from agui_engine.transports.sse import start_sse_server
from agui_engine.transports.websocket import start_websocket_server

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
