"""A real PostgreSQL server started by the tests on a free loopback port, in a temp directory.

Used by the thread-store tests and ``benchmarks/bench_threads.py``. The binaries are Debian's
``postgresql`` package (``/usr/lib/postgresql/<major>/bin``; tests/install-deps.sh installs it).
Missing, it is a failure in CI (``CI=true``) and, locally, a skip that says what to install.
As root, ``initdb`` and ``postgres`` refuse to run: they run as the ``postgres`` user, which
owns the data and socket directories. Trust authentication on 127.0.0.1 only; nothing survives
``stop()`` (the directory is removed).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.helpers import free_port

#: How long the tests wait for the server to accept connections (it starts in ~2 s here; a
#: loaded CI machine may be several times slower).
START_TIMEOUT_SECONDS = 60.0

USER = "agui"


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


MISSING = "PostgreSQL is not installed: run tests/install-deps.sh (Debian package postgresql)"


class PostgresServer:
    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError(MISSING)
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="agui-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.started = False

    def _as_postgres(self, *argv: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return list(argv)

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self.sock.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
        subprocess.run(
            self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", USER,
                              "--no-sync", "-E", "UTF8"),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        subprocess.run(
            self._as_postgres(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", str(int(START_TIMEOUT_SECONDS)),
                "-l", str(self.data / "server.log"),
                "-o", f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.started = True
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not start on port {self.port}") from None
                time.sleep(0.05)

    def createdb(self, name: str) -> str:
        """Create database ``name``; its URL."""
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        return self.url_of(name)

    def stop(self) -> None:
        if self.started:
            subprocess.run(
                self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"),
                check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)
