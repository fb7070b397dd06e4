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

Whoever runs an agent supplies the runner, so a user never has to: a runner is
*supplied* to everything run in a context (a context variable, so it is scoped to the
run's task and changes nothing else in the process) by :func:`supply_tool_runner` or
:func:`supplying_tool_runner`. The IO layer supplies its standard one, a
``ThreadedToolRunner``: every server (SSE, WebSocket, stdio) for each run it serves, and
``agui_engine.transports.run_agent`` for the run it drives. A
:class:`~agui_engine.loops.thread.Thread` supplies its own to an in-process agent; its
default is the ``tool_runner`` its agent carries (the transport clients carry the standard
one). :func:`resolve_tool_runner` is the rule: the runner an agent was given, else the
supplied one. ``LLMAgent(model, tools=[a_sync_function])`` needs no argument.

Without any runner -- none given, none supplied -- the core can still call what needs
neither threads nor a clock: an ``async def`` tool, or a sync tool declared ``inline``
(known to return at once), with no deadline. :func:`needs_runner` says which calls those
are, and :func:`require_tool_runner` refuses the others when the agent *runs* (before its
first event), with one line saying what to do, rather than silently blocking the loop at
the first call.

==========================  ==========================  ===========================
tool                        a runner (given/supplied)   no runner at all
==========================  ==========================  ===========================
``async def``               the runner (deadline)       awaited on the loop; only
                                                        without a deadline
sync, ``inline``            the runner (on the loop)    called on the loop; only
                                                        without a deadline
sync                        the runner (worker thread)  refused (:class:`UsageError`
                                                        when the run starts)
==========================  ==========================  ===========================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from ..genui.components import ServerTool
from ..genui.mcp_apps import AppToolResult
from ..protocol.errors import UpstreamError, UsageError
from .observe import tool_span

__all__ = [
    "MAX_TOOL_RESULT_CHARS",
    "ToolDeadlineExceeded",
    "ToolRunner",
    "call_on_loop",
    "format_tool_result",
    "needs_runner",
    "require_tool_runner",
    "resolve_tool_runner",
    "run_tool",
    "supplied_tool_runner",
    "supply_tool_runner",
    "supplying_tool_runner",
    "tool_outcome",
]

#: Longest tool result (characters) sent to the client and back to the model.
#: 1 MiB is about 250 K tokens -- more than any model context holds -- and the
#: same bound Tambo puts on client tool arguments; a larger result becomes an
#: error result instead of an oversized event and a failing model call.
MAX_TOOL_RESULT_CHARS: Final = 1024 * 1024




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


#: The runner supplied to what runs in the current context (None: none supplied).
_supplied: ContextVar[ToolRunner | None] = ContextVar("agui_engine_tool_runner", default=None)


def supply_tool_runner(runner: ToolRunner | None) -> None:
    """Supply ``runner`` to every agent run from now on in the current context: for a task
    that runs one agent (a server's run task), the rest of that task (``None``: none)."""
    _supplied.set(runner)


@contextmanager
def supplying_tool_runner(runner: ToolRunner | None) -> Iterator[None]:
    """Supply ``runner`` inside the ``with`` block only (the previous one comes back after)."""
    previous = _supplied.get()
    _supplied.set(runner)
    try:
        yield
    finally:
        _supplied.set(previous)


def supplied_tool_runner() -> ToolRunner | None:
    """The runner supplied to the current context, None when none is."""
    return _supplied.get()


def resolve_tool_runner(given: ToolRunner | None) -> ToolRunner | None:
    """The runner a run uses: ``given`` (the agent's own), else the supplied one."""
    return given if given is not None else _supplied.get()


def require_tool_runner(
    runner: ToolRunner | None, tools: Iterable[ServerTool], *, what: str, inline: Iterable[str] = (),
    timeout: float | None = None,
) -> None:
    """Raise :class:`UsageError` when ``runner`` is None and a tool of ``tools`` needs one
    (:func:`needs_runner`): one line naming the tools (``what``: "server tools", "sync client
    tools") and saying what to do."""
    if runner is not None:
        return
    inline_names = set(inline)
    needy = [t.name for t in tools if needs_runner(t, inline=t.name in inline_names, timeout=timeout)]
    if needy:
        raise UsageError(
            f"the {what} {', '.join(map(repr, needy))} need a tool runner (a worker thread for a sync tool, a clock "
            "for a timeout) and none was supplied: run the agent with agui_engine.transports.run_agent or a "
            "server (they supply the standard one), or pass tool_runner=agui_engine.transports.ThreadedToolRunner()"
        )


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
    caller allows only for calls :func:`needs_runner` clears (checked by
    :func:`require_tool_runner` when the run starts). Raises what the runner and the tool raise."""
    if runner is None:
        return await call_on_loop(tool, arguments)
    return await runner(tool, arguments, inline=inline, timeout=timeout)


def format_tool_result(value: Any) -> str:
    """The string content of a tool result: a ``str`` as is, anything else as compact JSON.

    AG-UI 1.0 also allows content parts, but strings are what every client and
    validator accepts. Values msgspec cannot encode fall back to ``str()``.
    """
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value, enc_hook=str).decode()


async def tool_outcome(
    runner: ToolRunner | None, tool: ServerTool, arguments: Mapping[str, Any], *, inline: bool, timeout: float | None,
    on_app: Callable[[AppToolResult], None] | None = None, call_id: str | None = None,
) -> tuple[str, str | None]:
    """Run one server tool call -> ``(content, error)`` of its tool result: the result as text
    (:func:`format_tool_result`), or ``"Error: <what>"`` with ``error`` set when it raised, passed
    ``timeout`` or returned more than :data:`MAX_TOOL_RESULT_CHARS`. Never raises (but a
    cancellation): a failing tool is a result for the model.

    A tool with an MCP app returns an :class:`~agui_engine.genui.mcp_apps.AppToolResult`: its
    text is the content (an error when the server flagged ``isError``) and ``on_app(result)``
    is called, so the caller shows the app after the tool result (isError or not, as
    ``@ag-ui/mcp-apps-middleware`` does). A traced run (:mod:`~agui_engine.loops.observe`) gets an
    ``execute_tool`` span per call (``call_id``: its ``gen_ai.tool.call.id``)."""
    span = tool_span(tool.name, call_id, description=tool.description)  # None unless traced
    try:
        result = await run_tool(runner, tool, arguments, inline=inline, timeout=timeout)
        app = result if isinstance(result, AppToolResult) else None
        content = app.text if app is not None else format_tool_result(result)
    except ToolDeadlineExceeded:
        if span is not None:
            span.end("timeout")
        error = f"the tool {tool.name} did not return within tool_timeout={timeout} s"
        return f"Error: {error}", error
    except Exception as exc:  # noqa: BLE001 - a failing tool is a result for the model
        if span is not None:
            span.end(type(exc).__name__)
        error = f"{type(exc).__name__}: {exc}"
        return f"Error: {error}", error
    except BaseException:
        if span is not None:
            span.end("cancelled")
        raise
    if span is not None:
        span.end("tool_error" if app is not None and app.is_error else None)
    if len(content) > MAX_TOOL_RESULT_CHARS:
        error = (
            f"the result of {tool.name} is {len(content)} characters, more than "
            f"MAX_TOOL_RESULT_CHARS={MAX_TOOL_RESULT_CHARS}"
        )
        return f"Error: {error}", error
    if app is not None:
        if on_app is not None:
            on_app(app)
        return content, (content if app.is_error else None)
    return content, None
