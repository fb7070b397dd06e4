"""The event loop a server runs on: uvloop where it is installed (the ``[fast]`` extra),
else asyncio's own.

Theory of operation
-------------------
A gateway's streams are mostly event-loop work: each token an agent awaits is one pass of
the loop, each write one callback. uvloop (libuv, in C) runs a pass in about a third of
the time of asyncio's pure-Python loop (``spec/benchmarks.md``), so ``agui-engine serve``
runs on it when it can be imported (``--loop auto``, the default) and says which loop it
runs on at startup. Nothing requires it: without uvloop (or with ``--loop asyncio``) every
server runs on asyncio's default loop, unchanged. A program that embeds the gateway picks
its own loop; :func:`run` is what ``serve`` uses, for a program that wants the same choice.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal, TypeVar, get_args

from agui_engine.protocol.errors import UsageError

__all__ = ["LOOP_CHOICES", "LoopChoice", "loop_factory", "resolve_loop", "run"]

_T = TypeVar("_T")

#: What a server is told to run on: ``auto`` (uvloop when importable, else asyncio), or one by name.
LoopChoice = Literal["auto", "uvloop", "asyncio"]
#: The accepted values of a :data:`LoopChoice` (``serve --loop``).
LOOP_CHOICES: Final[tuple[str, ...]] = get_args(LoopChoice)


def resolve_loop(choice: str = "auto") -> Literal["uvloop", "asyncio"]:
    """The loop ``choice`` means here (nothing is imported to answer). Raises UsageError for
    ``uvloop`` when it is not installed, or an unknown choice."""
    if choice not in LOOP_CHOICES:
        raise UsageError(f"the event loop must be one of {', '.join(LOOP_CHOICES)}, got {choice!r}")
    if choice == "asyncio":
        return "asyncio"
    installed = importlib.util.find_spec("uvloop") is not None
    if choice == "uvloop" and not installed:
        raise UsageError("uvloop is not installed: pip install 'agui-engine[fast]' (or use --loop asyncio)")
    return "uvloop" if installed else "asyncio"


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A new-loop factory for :class:`asyncio.Runner` (uvloop's), or None for asyncio's default."""
    if resolve_loop(choice) != "uvloop":
        return None
    import uvloop

    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, _T], choice: str = "auto") -> _T:
    """``asyncio.run(main)`` on the loop ``choice`` names (:func:`resolve_loop`). Raises
    UsageError (before ``main`` starts; it is closed unawaited) for a loop it cannot run on."""
    try:
        factory = loop_factory(choice)
    except UsageError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
