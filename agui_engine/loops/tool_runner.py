"""Running a server tool: what the core asks of the IO layer.

Theory of operation
-------------------
A server tool is a Python function the engine calls when the model (or, in a
:class:`~agui_engine.loops.thread.Thread`, the agent) asks for it. Two parts of calling
it are IO, which the core does not do:

* a *sync* function may block (a database driver, ``requests``, a CPU-bound
  helper); run on the event loop it would stall every other run, so it belongs in
  a worker thread;
* a *deadline* (``tool_timeout``) needs a clock.

So the core calls tools through a :class:`ToolRunner` it is given. The standard one
is :class:`agui_engine.transports.ThreadedToolRunner` (sync tools in worker threads,
deadlines on the event loop's clock); a test or an embedding application may pass
its own (a bounded executor, a process pool, a fake clock).

Without a runner the core can still call what needs neither threads nor a clock:
an ``async def`` tool, or a sync tool declared ``inline`` (known to return at
once), with no deadline. :func:`needs_runner` says which calls those are, so that
an agent refuses at construction -- with one line saying what to pass -- rather
than silently blocking the loop at the first call.

==========================  ==========================  ===========================
tool                        runner given                no runner
==========================  ==========================  ===========================
``async def``               the runner (deadline)       awaited on the loop; only
                                                        without a deadline
sync, ``inline``            the runner (on the loop)    called on the loop; only
                                                        without a deadline
sync                        the runner (worker thread)  refused (:class:`UsageError`
                                                        at construction)
==========================  ==========================  ===========================
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..genui.components import ServerTool
from ..protocol.errors import UpstreamError

__all__ = ["ToolDeadlineExceeded", "ToolRunner", "call_on_loop", "needs_runner", "run_tool"]


class ToolDeadlineExceeded(UpstreamError):
    """A :class:`ToolRunner` stopped waiting for a tool: its ``timeout`` passed.

    Distinct from a ``TimeoutError`` the tool raises itself (that one is the tool's
    own failure and is reported as such). An agent turns it into an error tool
    result and the run goes on; it reaches a transport only from an embedding
    program's own use of a runner.
    """

    default_code = "tool_timeout"


@runtime_checkable
class ToolRunner(Protocol):
    """Calls one server tool and returns its result (see the module docstring)."""

    async def __call__(
        self, tool: ServerTool, arguments: Mapping[str, Any], *, inline: bool, timeout: float | None
    ) -> Any:
        """Call ``tool`` with ``arguments``: on the event loop when ``inline`` or the
        tool is ``async def``, off it otherwise; stop waiting after ``timeout`` seconds
        (``None``: no deadline).

        Raises :class:`ToolDeadlineExceeded` when the deadline passes (an async tool is
        cancelled; a sync tool's thread cannot be stopped, its result is discarded), and
        whatever :meth:`ServerTool.call` and the tool raise. Cancelling the await stops
        waiting at once.
        """
        ...


def needs_runner(tool: ServerTool, *, inline: bool, timeout: float | None) -> bool:
    """Whether calling ``tool`` needs a :class:`ToolRunner`: a sync tool not ``inline``
    (a worker thread) or any deadline (a clock)."""
    return timeout is not None or not (tool.is_async or inline)


async def call_on_loop(tool: ServerTool, arguments: Mapping[str, Any]) -> Any:
    """Call ``tool`` on the event loop and await its result: a coroutine, or a sync
    callable that hands back an awaitable (a partial of an async function), is awaited.

    Raises what :meth:`ServerTool.call` and the tool raise. Used by the core for the
    calls :func:`needs_runner` allows without a runner, and by runners for the calls
    that belong on the loop, so that both await results the same way.
    """
    result = tool.call(arguments)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_tool(
    runner: ToolRunner | None,
    tool: ServerTool,
    arguments: Mapping[str, Any],
    *,
    inline: bool,
    timeout: float | None,
) -> Any:
    """Call ``tool`` through ``runner``, or on the loop when there is none -- which the
    caller allows only for calls :func:`needs_runner` clears (checked when the agent or
    thread is built). Raises what the runner and the tool raise."""
    if runner is None:
        return await call_on_loop(tool, arguments)
    return await runner(tool, arguments, inline=inline, timeout=timeout)
