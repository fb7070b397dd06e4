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

The standard runner: whoever runs agents supplies one ``ThreadedToolRunner``
(:func:`~agui_engine.loops.tool_runner.supply_tool_runner`, a context variable: it reaches
what runs in that context and nothing else): every server (SSE, WebSocket, stdio: the run
registry, for each run's task) and :func:`run_agent`; the client agents (``SSEAgent``,
``WebSocketAgent``, ``StdioAgent``) carry it as ``tool_runner`` for a ``Thread`` over them. So
an ``LLMAgent`` or a ``Thread`` with sync tools and no ``tool_runner`` runs them in worker
threads. :func:`run_agent` is the in-process way to run an agent: what ``serve`` accepts (an
Agent, an async generator function), the standard runner supplied, the agent's iterator
closed on every way out (a caller that stops early cancels the run).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Executor
from contextlib import aclosing
from typing import Any, Final

from agui_engine.genui.components import ServerTool
from agui_engine.loops.tool_runner import ToolDeadlineExceeded, call_on_loop, supplying_tool_runner
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.events import Event, RunAgentInput

__all__ = ["STANDARD_TOOL_RUNNER", "ThreadedToolRunner", "run_agent"]


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


#: The runner the servers, :func:`run_agent` and the client agents supply: sync tools in the
#: loop's default executor (it holds no state, so one serves every run).
STANDARD_TOOL_RUNNER: Final = ThreadedToolRunner()


async def run_agent(agent: Agent | AgentFunction, input: RunAgentInput) -> AsyncIterator[Event]:
    """Run ``agent`` on ``input`` in process and yield its events, with the standard runner
    supplied: ``LLMAgent(model, tools=[a_sync_function])`` needs no ``tool_runner``. Raises
    :class:`~agui_engine.protocol.errors.UsageError` for something that is not an agent, and
    what the agent raises before its first event."""
    runnable = as_agent(agent, where="run_agent(agent)")
    async with aclosing(runnable.run(input)) as events:  # type: ignore[type-var]
        while True:
            # supplied around each step only: between events the caller's context is its own
            with supplying_tool_runner(STANDARD_TOOL_RUNNER):
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
            yield event
