"""``python -m agui_engine serve`` in a real subprocess, for the browser tests of the inspector."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the server has to print its address.
START_SECONDS = 30


@contextmanager
def served(tmp_path: Path, *args: str) -> Iterator[str]:
    """``python -m agui_engine serve --port 0 ARGS`` run from the checkout's root, with no token; yields its
    URL (from its ``serving on`` line), then stops it and checks it exited cleanly."""
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        server = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", *args],
                                  stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
                                  env={**os.environ, "AGUI_AUTH_TOKEN": ""})
    try:
        deadline = time.monotonic() + START_SECONDS
        url = None
        while url is None and time.monotonic() < deadline and server.poll() is None:
            url = next((line.split()[-1] for line in log.read_text().splitlines() if line.startswith("serving on ")),
                       None)
            time.sleep(0.05)
        assert url, f"the server did not start: {log.read_text()}"
        yield url
    finally:
        server.terminate()
        assert server.wait(timeout=15) == 0, log.read_text()
