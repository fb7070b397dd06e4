"""``agui-engine run --url <endpoint> "message"``: run one message against a
remote AG-UI endpoint (SSE over HTTP, or WebSocket for ``ws://`` URLs) and
render the stream live with the demo renderer (``--raw``: the events as NDJSON).

Exit status: 0 when the run finished, 1 when it ended with ``RUN_ERROR``, 2
when the endpoint refused or could not be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agui_engine.codec import encode_ndjson
from agui_engine.errors import AguiEngineError
from agui_engine.events import Event, RunAgentInput, RunErrorEvent, UserMessage

__all__ = ["add_arguments", "make_input", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="the AG-UI endpoint (http(s):// for SSE, ws(s):// for WebSocket)")
    parser.add_argument("message", help="the user message")
    parser.add_argument("--header", action="append", default=[], metavar="NAME: VALUE", help="extra request header")
    parser.add_argument("--thread-id", default=None)
    parser.add_argument("--raw", action="store_true", help="print the events as NDJSON instead of rendering them")
    parser.add_argument("--plain", action="store_true", help="plain line output even on a terminal")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours (also when NO_COLOR is set)")


def make_input(message: str, thread_id: str | None = None) -> RunAgentInput:
    """A RunAgentInput with one user message and fresh ids."""
    return RunAgentInput(
        thread_id=thread_id or f"thread-{uuid.uuid4().hex[:12]}",
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        messages=[UserMessage(id=f"msg-{uuid.uuid4().hex[:12]}", content=message)],
    )


async def _render(events: AsyncIterator[Event], *, plain: bool, no_color: bool) -> None:
    """Render the stream with the demo's renderer (one renderer for demo and run)."""
    from .render import console_modes, make_renderer

    out = sys.stdout
    live, color = console_modes(out, plain=plain, no_color=no_color)
    renderer = make_renderer(out, live=live, color=color)
    async for event in events:
        renderer.handle(event)
    out.flush()


async def _raw(events: AsyncIterator[Event]) -> None:
    async for event in events:
        sys.stdout.buffer.write(encode_ndjson(event))
        sys.stdout.buffer.flush()


def run(args: argparse.Namespace) -> int:
    headers = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep:
            print(f"agui-engine run: --header {h!r} is not 'Name: value'", file=sys.stderr)
            return 2
        headers[name.strip()] = value.strip()
    from .agent_spec import agent_from_spec

    try:
        agent = agent_from_spec(args.url, headers=headers)
    except AguiEngineError as exc:
        print(f"agui-engine run: {exc.message}", file=sys.stderr)
        return 2
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async def tap() -> AsyncIterator[Event]:
            async for event in agent.run(make_input(args.message, args.thread_id)):
                if isinstance(event, RunErrorEvent):
                    outcome["error"] = event
                yield event

        if args.raw:
            await _raw(tap())
        else:
            await _render(tap(), plain=args.plain, no_color=args.no_color)

    try:
        asyncio.run(main())
    except AguiEngineError as exc:
        print(f"agui-engine run: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 1 if "error" in outcome else 0
