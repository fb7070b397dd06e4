"""``agui-engine run --url <endpoint> "message"``: run one message against a
remote AG-UI endpoint (SSE over HTTP, or WebSocket for ``ws://`` URLs) and
render the stream live with the demo renderer (``--raw``: the events as NDJSON).

Both modes are a :class:`~agui_engine.loops.thread.Thread`: ``--tool module:function``
registers a Python function as a client tool (it runs here when a run ends with
it pending, and its result goes back in a follow-up run). Without a message (or
with ``--chat``) the command is multi-turn: each line of stdin is the next user
message on the same thread (history and state carried across runs) until EOF or
``/quit``; an interrupt is answered by the next line (empty: cancelled).

Exit status: 0 when the (last) run finished, 1 when it ended with ``RUN_ERROR``, 2
when the URL is not one, or the endpoint refused or could not be reached. A
failure before the first event is one line saying what to do; when the
endpoint speaks the other transport (an ``http://`` URL of a WebSocket server,
a ``ws://`` URL of an HTTP server) the line says so and gives the URL to use; an
endpoint that is not AG-UI (a web page, ``python -m http.server``) is named by what
came back (status and content type; it is POSTed once: no retry before an event id),
and a TLS mismatch (``https://`` of a plain server) as such, with the ``http://`` URL.
A resource-bound card is shown with its data, fetched through the endpoint's query
route, as ``demo`` shows it.

``--capabilities``: print the endpoint's capabilities (``GET <url>/capabilities``, or the
WebSocket ``capabilities`` message) as indented JSON and exit 0; no run is started (exit 2
when the endpoint refused or could not be reached, one line).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Final

from agui_engine.loops.thread import Thread
from agui_engine.protocol.agent import Agent, agent_capabilities
from agui_engine.protocol.capabilities import AgentCapabilities, encode_capabilities
from agui_engine.protocol.codec import encode_ndjson
from agui_engine.protocol.errors import AguiEngineError, UsageError
from agui_engine.protocol.events import (
    Event,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    UserMessage,
)
from agui_engine.transports.tool_runner import ThreadedToolRunner

from .options import debug_enabled

if TYPE_CHECKING:
    from .render import Query, Renderer

__all__ = ["PROBE_TIMEOUT_SECONDS", "add_arguments", "make_input", "run"]

#: How long the check "does this endpoint speak the other transport?" may take after a
#: failure: a loopback or LAN server answers in milliseconds; a user waits at most this.
PROBE_TIMEOUT_SECONDS: Final = 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True,
                        help="the AG-UI endpoint: http(s)://... for SSE, ws(s)://... for WebSocket (required)")
    parser.add_argument("message", nargs="?", default=None,
                        help="the user message (default: none, multi-turn: one message per line of stdin)")
    parser.add_argument("--chat", action="store_true", help="multi-turn: read one message per line of stdin")
    parser.add_argument("--tool", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="a Python function to offer as a client tool and run locally, repeatable "
                             "(default: none)")
    parser.add_argument("--header", action="append", default=[], metavar="NAME: VALUE",
                        help="extra request header, repeatable (default: none)")
    parser.add_argument("--thread-id", default=None, help="thread id to send (default: a fresh one)")
    parser.add_argument("--raw", action="store_true", help="print the events as NDJSON instead of rendering them")
    parser.add_argument("--plain", action="store_true", help="plain line output even on a terminal")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours (also when NO_COLOR is set)")
    parser.add_argument("--capabilities", action="store_true",
                        help="print the endpoint's capabilities as JSON and exit (no run)")


def make_input(message: str, thread_id: str | None = None) -> RunAgentInput:
    """A RunAgentInput with one user message and fresh ids."""
    return RunAgentInput(
        thread_id=thread_id or f"thread-{uuid.uuid4().hex[:12]}",
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        messages=[UserMessage(id=f"msg-{uuid.uuid4().hex[:12]}", content=message)],
    )


def _sink(args: argparse.Namespace) -> tuple[Callable[[Event], None], Renderer | None]:
    """Where each event goes: the demo's renderer (one for demo and run; returned too) or NDJSON lines."""
    out = sys.stdout
    if args.raw:
        def raw(event: Event) -> None:
            out.buffer.write(encode_ndjson(event))
            out.buffer.flush()

        return raw, None
    from .render import console_modes, make_renderer

    live, color = console_modes(out, plain=args.plain, no_color=args.no_color)
    renderer = make_renderer(out, live=live, color=color)

    def render(event: Event) -> None:
        renderer.handle(event)
        if isinstance(event, (RunFinishedEvent, RunErrorEvent)):
            out.flush()

    return render, renderer


class _FetchingData:
    """The remote agent, each of whose resource-bound cards gets its data before the
    renderer shows it, fetched through the endpoint's own query route (``query``: the
    client's ``POST <url>/data/query`` / WebSocket ``query``) -- as ``demo`` does in-process."""

    def __init__(self, agent: Agent, renderer: Renderer, query: Query) -> None:
        self.agent = agent
        self.renderer = renderer
        self.query = query

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        from .render import fetch_component_data

        async with aclosing(self.agent.run(input)) as events:  # type: ignore[type-var]
            async for event in events:
                await fetch_component_data(self.renderer, event, self.query)
                yield event


def _load_tool(spec: str) -> Callable[..., Any]:
    """``module:function`` -> the function. Raises UsageError saying what to write."""
    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise UsageError(f"--tool {spec!r}: write module:function, e.g. mytools:get_weather")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--tool {spec!r}: {exc}") from None
    if not callable(fn):
        raise UsageError(f"--tool {spec!r}: {name} is not callable")
    return fn  # type: ignore[no-any-return]


async def _read_line(prompt: str) -> str | None:
    """The next line of stdin (None at EOF); the prompt goes to stderr on a terminal."""
    if sys.stdin.isatty():
        sys.stderr.write(prompt)
        sys.stderr.flush()
    line = await asyncio.to_thread(sys.stdin.readline)
    return line.rstrip("\r\n") if line else None


async def _answer(interrupt: Interrupt) -> ResumeEntry:
    """An interrupt answered by the next line of stdin (empty: cancelled)."""
    text = f"interrupt ({interrupt.reason}): {interrupt.message or interrupt.id} -- answer (empty: cancel): "
    line = await _read_line(text)
    if not line:
        return ResumeEntry(interrupt_id=interrupt.id, status="cancelled")
    return ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=line)


async def _answers_plain_http(url: str) -> bool:
    """Whether a plain (no TLS) HTTP request to ``url`` (``ws://`` asked as ``http://``) gets
    any answer within PROBE_TIMEOUT_SECONDS."""
    import httpx

    http_url = "http://" + url.partition("://")[2]
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_SECONDS) as client:
            await client.get(http_url)
    except (httpx.HTTPError, OSError):
        return False
    return True


async def _other_transport(url: str) -> str | None:
    from .agent_spec import URL_SCHEMES

    """After ``url`` failed before its first event: the hint when the endpoint
    speaks the other transport, else None (bounded by PROBE_TIMEOUT_SECONDS)."""
    scheme, _, rest = url.partition("://")
    if URL_SCHEMES[scheme.lower()] == "SSE":
        ws_url = ("wss://" if scheme.lower() == "https" else "ws://") + rest
        from websockets.asyncio.client import connect

        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                async with connect(ws_url, open_timeout=PROBE_TIMEOUT_SECONDS):
                    pass
        except Exception:  # noqa: BLE001 - no WebSocket there either: no hint
            return None
        return f"{url} is a WebSocket endpoint, not SSE: run again with --url {ws_url}"
    http_url = ("https://" if scheme.lower() == "wss" else "http://") + rest
    import httpx

    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_SECONDS) as client:
            answer = await client.options(http_url)
    except (httpx.HTTPError, OSError):
        return None
    return (
        f"{url} answered plain HTTP ({answer.status_code}), not a WebSocket handshake: if it is an AG-UI SSE "
        f"endpoint, run again with --url {http_url}"
    )


def run(args: argparse.Namespace) -> int:
    """See the module docstring. Raises UsageError for a bad URL, header or tool (the CLI prints one line)."""
    headers = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {h!r} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    if args.chat and args.message is not None:
        raise UsageError("give a message or --chat, not both")
    chat = args.chat or args.message is None
    from .agent_spec import agent_from_spec, check_url

    url = check_url(args.url, what="--url")

    agent = agent_from_spec(url, headers=headers)
    if args.capabilities:
        if args.message is not None or args.chat:
            raise UsageError("--capabilities starts no run: give it no message and no --chat")
        return asyncio.run(_print_capabilities(agent, url))
    tools = [_load_tool(spec) for spec in args.tool]
    sink, renderer = _sink(args)
    query = getattr(agent, "query", None)
    if renderer is not None and query is not None:
        agent = _FetchingData(agent, renderer, query)
    started = False

    def on_event(event: Event) -> None:
        nonlocal started
        started = True
        sink(event)

    thread = Thread(agent, thread_id=args.thread_id or f"thread-{uuid.uuid4().hex[:12]}", tools=tools,
                    on_interrupt=_answer if chat else None, on_event=on_event, tool_runner=ThreadedToolRunner())

    async def turns() -> str:
        if not chat:
            return (await thread.send(args.message)).status
        status = "finished"
        while True:
            line = await _read_line("you> ")
            if line is None or line.strip() == "/quit":
                return status
            if line.strip():
                status = (await thread.send(line)).status

    async def main() -> int:
        try:
            status = await turns()
        except AguiEngineError as exc:
            message = exc.message if started else await _before_the_first_event(url, exc)
            if getattr(args, "debug", False) or debug_enabled():
                # --debug: the chain behind the line (the HTTP library's own errors), then the line
                traceback.print_exception(exc, file=sys.stderr)
            print(f"agui-engine run: {message}", file=sys.stderr)
            return 2
        return 1 if status == "error" else 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130


async def _print_capabilities(agent: Agent, url: str) -> int:
    """The endpoint's capabilities on stdout as indented JSON: 0 (an endpoint that declares
    nothing -- ``{}``, also an older server or a mistyped path -- adds one line on stderr
    saying so); refused or unreachable: one line on stderr, 2."""
    try:
        capabilities = await agent_capabilities(agent)
    except AguiEngineError as exc:
        # the same line a run gets: the other transport's URL, how to start a server ...
        print(f"agui-engine run: {await _before_the_first_event(url, exc)}", file=sys.stderr)
        return 2
    print(json.dumps(json.loads(encode_capabilities(capabilities)), indent=2, ensure_ascii=False))
    if capabilities == AgentCapabilities():
        # {} alone reads like success; a user who mistyped the path should learn why it is empty
        print("agui-engine run: the endpoint declares no capabilities (it has no capabilities route: "
              "an older server, or is --url not the agent's path?)", file=sys.stderr)
    return 0


def _serve_hint(url: str) -> str:
    """``agui-engine serve --port N``: the command that starts a server where ``url`` points."""
    port = url.partition("://")[2].partition("/")[0].rpartition(":")[2]
    return f"agui-engine serve --port {port}" if port.isdigit() else "agui-engine serve"


async def _before_the_first_event(url: str, exc: AguiEngineError) -> str:
    """The line for a run that failed before its first event: the other
    transport's URL when the endpoint speaks it, what came back when it is not an
    AG-UI endpoint (status, content type), a TLS mismatch named as such, how to
    start a server when nothing answered, else the error itself."""
    from agui_engine.transports.retrying_client import ConnectionLostError, RemoteAgentError

    # Our servers always send an error code; a refusal without one, or no answer
    # at all, may be the other transport's server.
    foreign = isinstance(exc, ConnectionLostError) or (
        isinstance(exc, RemoteAgentError) and exc.code == RemoteAgentError.default_code
    )
    tls = exc.tls_failure if isinstance(exc, ConnectionLostError) else None
    hint = await _other_transport(url) if foreign and tls is None else None
    if hint is not None:
        return hint
    scheme, _, rest = url.partition("://")
    secure = scheme.lower() in ("https", "wss")
    plain = ("http://" if scheme.lower() == "https" else "ws://") + rest
    if tls is not None:
        if tls == "WRONG_VERSION_NUMBER" and secure:
            return (f"{url}: TLS handshake failed ({tls}): the server there speaks plain HTTP, not TLS; "
                    f"run again with --url {plain}")
        return f"{url}: TLS handshake failed ({tls}): check the server's certificate and that it serves TLS there"
    if secure and isinstance(exc, ConnectionLostError) and await _answers_plain_http(plain):
        # a plain server resets a TLS hello (the WebSocket servers do) rather than answer it
        return (f"{url}: the TLS handshake failed: the server there answers plain HTTP, not TLS; "
                f"run again with --url {plain}")
    if isinstance(exc, RemoteAgentError) and exc.content_type is not None:
        return (f"{exc.message}, not an AG-UI event stream: is {url} an AG-UI endpoint? "
                f"(check the URL and its path; {_serve_hint(url)} starts one)")
    if isinstance(exc, ConnectionLostError):
        return f"{exc.message}: is an AG-UI server running there? ({_serve_hint(url)} starts one)"
    return exc.message
