"""The standard :class:`~agui_engine.loops.tool_runner.ToolRunner`: sync tools in worker threads,
deadlines on the event loop's clock.

Theory of operation
-------------------
A gateway serves many runs on one event loop. An ``async def`` tool (and a tool
declared ``inline``) runs on the loop; any other sync tool runs in a worker thread,
so that a blocking function never stalls other streams. The thread hop costs tens
of microseconds. The threads come from ``executor`` (default: the loop's default
executor, as ``asyncio.to_thread`` uses), whose size bounds how many sync tools run
at once; the context variables of the caller are visible in the thread.

A deadline (``timeout`` seconds) is an ``asyncio.timeout`` around the call. When it
passes, an async tool is cancelled; a sync tool's thread cannot be killed (Python
cannot stop a thread), so the runner stops waiting, the thread runs the function to
its end and its result is discarded (it still holds one executor thread until
then). An inline tool blocks the loop, so no deadline can interrupt it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any

from agui_engine.genui.components import ServerTool
from agui_engine.loops.tool_runner import ToolDeadlineExceeded, call_on_loop

__all__ = ["ThreadedToolRunner"]


class ThreadedToolRunner:
    """A :class:`~agui_engine.loops.tool_runner.ToolRunner` (see the module docstring).

    ``executor``: where sync tools run (default ``None``: the loop's default executor).
    """

    def __init__(self, executor: Executor | None = None) -> None:
        self.executor = executor

    async def __call__(
        self, tool: ServerTool, arguments: Mapping[str, Any], *, inline: bool, timeout: float | None
    ) -> Any:
        """Call ``tool``; raises :class:`~agui_engine.loops.tool_runner.ToolDeadlineExceeded`
        when ``timeout`` passes, and whatever the tool raises (its own ``TimeoutError``
        included, told apart from the deadline)."""
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                if tool.is_async or inline:
                    return await call_on_loop(tool, arguments)
                result = await self._in_thread(tool, arguments)
                # a sync callable may still hand back an awaitable (a partial of an async function)
                if inspect.isawaitable(result):
                    result = await result
                return result
        except TimeoutError:
            if deadline.expired():
                raise ToolDeadlineExceeded(
                    f"the tool {tool.name} did not return within {timeout} s"
                ) from None
            raise

    async def _in_thread(self, tool: ServerTool, arguments: Mapping[str, Any]) -> Any:
        if self.executor is None:
            return await asyncio.to_thread(tool.call, arguments)
        context = contextvars.copy_context()
        call = functools.partial(context.run, tool.call, arguments)
        return await asyncio.get_running_loop().run_in_executor(self.executor, call)
