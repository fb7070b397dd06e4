"""ThreadedToolRunner: sync tools in worker threads (the default executor or the given one,
with the caller's context variables), async and inline tools on the loop, and its
deadline told apart from a tool's own TimeoutError."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agui_engine.genui.components import tool_from_callable
from agui_engine.loops.tool_runner import ToolDeadlineExceeded, ToolRunner
from agui_engine.transports import ThreadedToolRunner

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


def where() -> dict[str, object]:
    """Which thread runs me, and what context I see."""
    return {"thread": threading.current_thread().name, "request": REQUEST_ID.get()}


async def where_async() -> dict[str, object]:
    """Async: on the loop."""
    return {"thread": threading.current_thread().name, "request": REQUEST_ID.get()}


def test_it_is_a_tool_runner() -> None:
    assert isinstance(ThreadedToolRunner(), ToolRunner)


async def test_sync_tools_run_in_a_worker_thread_async_and_inline_ones_on_the_loop() -> None:
    runner = ThreadedToolRunner()
    loop_thread = threading.current_thread().name
    REQUEST_ID.set("r-1")
    sync = await runner(tool_from_callable(where), {}, inline=False, timeout=None)
    inline = await runner(tool_from_callable(where), {}, inline=True, timeout=None)
    awaited = await runner(tool_from_callable(where_async), {}, inline=False, timeout=None)
    assert sync["thread"] != loop_thread and inline["thread"] == awaited["thread"] == loop_thread
    assert sync["request"] == inline["request"] == awaited["request"] == "r-1"


async def test_a_given_executor_runs_the_sync_tools_with_the_callers_context() -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tools") as pool:
        REQUEST_ID.set("r-2")
        result = await ThreadedToolRunner(pool)(tool_from_callable(where), {}, inline=False, timeout=None)
    assert str(result["thread"]).startswith("tools") and result["request"] == "r-2"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_deadline_raises_tool_deadline_exceeded(kind: str) -> None:
    release = threading.Event()

    def stuck_sync() -> str:
        """Blocks until released."""
        release.wait(10)
        return "late"

    async def stuck_async() -> str:
        """Sleeps past the deadline."""
        await asyncio.sleep(10)
        return "late"

    tool = tool_from_callable(stuck_sync if kind == "sync" else stuck_async)
    try:
        with pytest.raises(ToolDeadlineExceeded, match="did not return within 0.05 s"):
            await ThreadedToolRunner()(tool, {}, inline=False, timeout=0.05)
    finally:
        release.set()


async def test_a_tools_own_timeout_error_is_not_the_deadline() -> None:
    def own() -> str:
        """Its own client timed out."""
        raise TimeoutError("upstream")

    with pytest.raises(TimeoutError, match="upstream") as info:
        await ThreadedToolRunner()(tool_from_callable(own), {}, inline=False, timeout=5)
    assert not isinstance(info.value, ToolDeadlineExceeded)
