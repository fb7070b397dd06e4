"""A real ``redis-server`` started by the tests on a free loopback port.

Used by the shared-event-log tests and the transports benchmark. Missing
``redis-server`` is a failure in CI and, locally, a skip saying to run
``bash tests/install-deps.sh`` (``tests.helpers.require``). ``stop()`` / ``start()`` restart it on the same port (the Redis-restart
tests); nothing is persisted (``--save '' --appendonly no``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from tests.helpers import free_port, require

#: How long the tests wait for redis-server to accept connections (it starts in
#: ~10 ms; a loaded CI machine may be 100x slower).
START_TIMEOUT_SECONDS = 10.0


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        exe = shutil.which("redis-server")
        require(exe, "redis-server (Debian package redis-server)")
        assert exe is not None
        self.exe = exe
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def cpu_seconds(self) -> float:
        """User + system CPU time the server used so far (from /proc)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        import os

        return ticks / os.sysconf("SC_CLK_TCK")
