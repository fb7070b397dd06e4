"""``agui-engine serve``: run the gateway (SSE, WebSocket or stdio) for an agent.

Stops on SIGINT / SIGTERM with a graceful shutdown: open streams receive
``RUN_ERROR{code: "shutdown"}`` before the server closes. Logs go to stderr.
The bearer token is read from ``--auth-token-env`` (an environment variable
name, default ``AGUI_AUTH_TOKEN``) so that it never shows in ``ps``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from agui_engine.errors import AguiEngineError
from agui_engine.transports.runs import DEFAULT_GRACE_SECONDS, DEFAULT_KEEPALIVE_SECONDS, DEFAULT_MAX_RUNS, RegistryOptions

__all__ = ["add_arguments", "run"]

#: Pause between the embedded model's chunks when serving it, so that a human
#: watching a client sees the text arrive (a model streams ~50 tokens/s).
DEMO_PACE_SECONDS = 0.02


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("sse", "ws", "stdio"), default="sse")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--path", default="/", help="HTTP path of the SSE endpoint (default /)")
    parser.add_argument(
        "--agent",
        default="embedded",
        help="embedded (default), <provider>:<model>, http(s)://... or ws(s)://... (a remote AG-UI agent), "
        "stdio:<command>, py:<module>:<name>, langgraph:<module>:<name> (a compiled LangGraph graph)",
    )
    parser.add_argument("--pace", type=float, default=None, help="seconds between the embedded model's chunks")
    parser.add_argument("--auth-token-env", default="AGUI_AUTH_TOKEN", help="env var holding the bearer token")
    parser.add_argument("--cors", action="append", default=[], metavar="ORIGIN", help="allowed CORS origin (repeat; * = any)")
    parser.add_argument("--keepalive", type=float, default=DEFAULT_KEEPALIVE_SECONDS, help="SSE keep-alive interval (s)")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_SECONDS, help="seconds a run outlives its last client")
    parser.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, help="concurrent runs before 503")
    parser.add_argument("--no-verify", action="store_true", help="do not verify the agent's events")
    parser.add_argument("--log-level", default="INFO")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    from .agent_spec import agent_from_spec

    pace = args.pace if args.pace is not None else (0.0 if args.transport == "stdio" else DEMO_PACE_SECONDS)
    try:
        agent = agent_from_spec(args.agent, pace_seconds=pace)
        return asyncio.run(_serve(agent, args))
    except AguiEngineError as exc:
        print(f"agui-engine serve: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


async def _serve(agent: object, args: argparse.Namespace) -> int:
    options = RegistryOptions(max_runs=args.max_runs, grace_seconds=args.grace, verify=not args.no_verify)
    if args.transport == "stdio":
        from agui_engine.transports.stdio import serve_stdio

        return await serve_stdio(agent, options=options)  # type: ignore[arg-type]
    token = os.environ.get(args.auth_token_env) or None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    if args.transport == "sse":
        from agui_engine.transports.sse import start_sse_server

        server: object = await start_sse_server(
            agent,  # type: ignore[arg-type]
            host=args.host,
            port=args.port,
            path=args.path,
            auth_token=token,
            cors_origins=args.cors,
            keepalive_seconds=args.keepalive,
            options=options,
        )
        url = server.url.rstrip("/") + (args.path if args.path != "/" else "/")  # type: ignore[attr-defined]
    else:
        from agui_engine.transports.websocket import start_websocket_server

        server = await start_websocket_server(agent, host=args.host, port=args.port, auth_token=token, options=options)  # type: ignore[arg-type]
        url = server.url
    logging.getLogger("agui_engine.transports").info(
        "agui-engine serving %s on %s%s", args.agent, url, " (bearer auth)" if token else ""
    )
    print(f"serving on {url}", file=sys.stderr, flush=True)
    await stop.wait()
    print("shutting down", file=sys.stderr, flush=True)
    await server.close()  # type: ignore[attr-defined]
    return 0
