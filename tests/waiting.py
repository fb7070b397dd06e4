"""The one way a test waits for something to happen: with a deadline.

A test that polls state (a registry's runs, a flag set by a thread, a scripted
agent's ``cancelled`` set) does it through :func:`eventually`, so a bug that
means "it never happens" fails the test with a message instead of hanging CI.
pytest-timeout (pyproject) is the backstop for waits that are not polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["POLL_INTERVAL", "WAIT_TIMEOUT", "eventually"]

#: Default deadline of one wait. Every condition tests wait for here happens in
#: milliseconds on an idle machine; 10 s leaves room for a CI machine shared by
#: several jobs while staying far below the per-test timeout (pyproject).
WAIT_TIMEOUT = 10.0

#: Seconds between two checks: short against the milliseconds the awaited
#: events take, long enough not to spin the (shared, 2-core) CPU.
POLL_INTERVAL = 0.005


async def eventually(
    predicate: Callable[[], object],
    *,
    timeout: float = WAIT_TIMEOUT,
    interval: float = POLL_INTERVAL,
    what: str | None = None,
) -> float:
    """Wait until ``predicate()`` is truthy, checking every ``interval`` seconds.

    Returns the seconds it took. Raises AssertionError naming ``what`` (or the
    predicate) when ``timeout`` seconds pass first.
    """
    start = time.monotonic()
    deadline = start + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what or _describe(predicate)}")
        await asyncio.sleep(interval)
    return time.monotonic() - start


def _describe(predicate: Callable[[], object]) -> str:
    code = getattr(predicate, "__code__", None)
    if code is None:
        return repr(predicate)
    return f"{getattr(predicate, '__qualname__', 'a condition')} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"
