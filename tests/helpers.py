"""Helpers the test modules share (one copy each): a free loopback port, a run's input, an
agent's whole run, a browser page's screenshot when a check fails, and what a test needs installed.

A test that needs a program or a package outside Python (node and the npm packages in
``tests/js``, Chromium, Redis, PostgreSQL) asks :func:`require` (or :func:`node_with`,
:func:`chromium`): when it is missing, the test FAILS in CI (``CI=true``: the test command
installs everything, so a missing piece is a broken setup) and is SKIPPED locally with the one
line that installs it, ``bash tests/install-deps.sh``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agui_engine.protocol.agent import Agent
from agui_engine.protocol.events import Event, RunAgentInput, UserMessage

__all__ = [
    "INSTALL", "JS", "chromium", "collect", "free_port", "in_ci", "node_with", "require", "run_input",
    "screenshot_on_failure",
]

#: The one line that installs what the tests start for real.
INSTALL = "bash tests/install-deps.sh"
#: The npm packages the tests run under node (``tests/js/package.json``, installed by INSTALL).
JS = Path(__file__).resolve().parent / "js"


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``)."""
    return os.environ.get("CI", "").lower() == "true"


def require(present: object, what: str) -> None:
    """Go on when ``present`` is true; else fail in CI, skip locally, saying what is missing
    and the line that installs it."""
    if present:
        return
    message = f"{what} is missing: run {INSTALL}"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def node_with(*packages: str) -> str:
    """The node binary, once it and the npm ``packages`` (``@ag-ui/client``, ...) in ``tests/js``
    are installed (:func:`require`)."""
    node = shutil.which("node")
    require(node, "node")
    for package in packages:
        require((JS / "node_modules" / package).is_dir(), f"the npm package {package} (tests/js)")
    assert node is not None
    return node


def chromium() -> str:
    """Debian's Chromium (playwright drives it), once installed (:func:`require`)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    require(found, "chromium (Debian's package)")
    assert found is not None
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a test starts as a subprocess)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_input(text: str = "hello", *, run_id: str = "r1", thread_id: str = "t1", message_id: str = "u1",
              **fields: Any) -> RunAgentInput:
    """A run's input: one user message saying ``text``; ``fields`` are the other RunAgentInput fields."""
    return RunAgentInput(thread_id=thread_id, run_id=run_id, messages=[UserMessage(id=message_id, content=text)],
                         **fields)


async def collect(agent: Agent, input: RunAgentInput) -> list[Event]:
    """Every event of ``agent``'s run on ``input``."""
    return [event async for event in agent.run(input)]


@contextlib.asynccontextmanager
async def screenshot_on_failure(page: Any, shot: Path, *, full_page: bool = True) -> AsyncIterator[None]:
    """Run the block; when it fails, save a screenshot of the browser ``page`` (playwright's) at
    ``shot``, say where, and raise the failure on."""
    try:
        yield
    except BaseException:
        await page.screenshot(path=str(shot), full_page=full_page)
        print(f"screenshot of the page when the check failed: {shot}")
        raise
