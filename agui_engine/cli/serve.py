"""``agui-engine serve``: run the gateway (SSE, WebSocket or stdio) for an agent.

Stops on SIGINT with a graceful shutdown: open streams receive
``RUN_ERROR{code: "shutdown"}`` before the server closes. SIGTERM drains first:
``/readyz`` turns 503 and new runs are refused while running runs get up to
``--drain`` seconds to end by themselves, then the shutdown ends the rest.
What the agent prints to stdout (a framework's console panels) is logged at DEBUG
(``cli/logs.py``, :func:`~agui_engine.cli.logs.route_console`).
``--event-log redis://host:port/db`` shares the runs' event log with other
nodes (resume, cancel and grace on any node); the default is in memory. Logs go to stderr.
The bearer token is read from ``--auth-token-env`` (an environment variable
name, default ``AGUI_AUTH_TOKEN``) so that it never shows in ``ps``; several
principals' tokens from ``--auth-tokens-file`` (cli/tokens.py), re-read on SIGHUP.
``--mcp SPEC`` (repeatable) adds an MCP server's tools to the agent (cli/mcp.py, ``spec/mcp.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import functools
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TextIO
from urllib.parse import urlsplit

from agui_engine.adapters.mcp import MCPServer
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.wire import WIRE_CHOICES
from agui_engine.transports.connection_gate import MAX_IDLE_CONNECTIONS, MAX_IDLE_CONNECTIONS_PER_IP
from agui_engine.transports.event_loop import LOOP_CHOICES, resolve_loop
from agui_engine.transports.event_loop import run as run_loop
from agui_engine.transports.eventlog import EventLog
from agui_engine.transports.history import ThreadStore
from agui_engine.transports.registry_options import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_MAX_BUFFERED_BYTES,
    DEFAULT_MAX_RUNS,
    DEFAULT_MAX_RUNS_PER_CLIENT,
    RegistryOptions,
)
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.subscription import DEFAULT_KEEPALIVE_SECONDS
from agui_engine.transports.thread_store import default_sqlite_path

from .agent_spec import spec_help
from .logs import SecretFilter, configure_logging, route_console
from .mcp import add_mcp_argument, close_mcp, mcp_servers, open_mcp, with_mcp
from .options import (
    A2UI_SNAPSHOT_CHOICES,
    a2ui_choice,
    a2ui_snapshots_choice,
    add_a2ui_argument,
    add_ui_spec_argument,
    after_interrupt,
    seconds,
)
from .tokens import read_tokens_file

if TYPE_CHECKING:  # --config's modules import aiohttp: only when it is given
    from agui_engine.transports.agents_app import ServedAgent

    from .agents_config import AgentConfig

__all__ = ["LOG_LEVELS", "add_arguments", "cap_count", "listen_error", "port_number", "reload_tokens", "run"]

#: Pause between the embedded model's chunks when serving it, so that a human
#: watching a client sees the text arrive (a model streams ~50 tokens/s).
DEMO_PACE_SECONDS = 0.02

#: Default of ``--drain``: how long SIGTERM lets running runs finish before the
#: shutdown ends them. Kubernetes sends SIGKILL 30 s after SIGTERM; 15 s of drain
#: plus the shutdown's own bound (sse.SHUTDOWN_TIMEOUT, 10 s) fits inside.
DEFAULT_DRAIN_SECONDS = 15.0


#: The log levels ``--log-level`` takes (any case).
LOG_LEVELS = ("debug", "info", "warning", "error")

#: The advice after a ``--host`` that cannot be listened on.
_HOST_ADVICE = "use --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface)"


def cap_count(text: str) -> int:
    """``--max-idle-connections`` / ``--max-idle-per-ip`` / ``--max-runs-per-client`` /
    ``--max-buffered-bytes``: an integer >= 0 (0: no cap)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: use an integer >= 0 (0: no cap)")
    return value


def port_number(text: str) -> int:
    """``--port``: an integer 0-65535 (0: the system picks a free port)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number: use 0-65535 (0 picks a free port)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("sse", "ws", "stdio"), default="sse",
                        help="sse: HTTP POST answered with Server-Sent Events; ws: WebSocket; "
                             "stdio: NDJSON on stdin/stdout")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (0: a free one)")
    parser.add_argument("--path", default="/", help="HTTP path of the SSE endpoint")
    parser.add_argument("--loop", choices=LOOP_CHOICES, default="auto",
                        help="the event loop: auto = uvloop when it is installed (pip install 'agui-engine[fast]': "
                             "about a third of asyncio's CPU per loop pass, spec/benchmarks.md), else asyncio's own")
    parser.add_argument("--agent", default="embedded", metavar="SPEC",
                        help="the agent to serve: " + spec_help())
    parser.add_argument("--pace", type=seconds, default=None, metavar="SECONDS",
                        help=f"pause between the embedded model's chunks (default: {DEMO_PACE_SECONDS}, 0 for stdio)")
    parser.add_argument("--auth-token-env", default="AGUI_AUTH_TOKEN", metavar="NAME",
                        help="environment variable holding the bearer token clients must send (unset: no auth)")
    parser.add_argument("--auth-tokens-file", default=None, metavar="FILE",
                        help="bearer tokens of several principals: one 'TOKEN NAME' per line (or a JSON object "
                             "{token: name}); each run is bound to the principal that started it; re-read on SIGHUP "
                             "(default: none, the one token of the --auth-token-env variable if it is set)")
    parser.add_argument("--cors", action="append", default=[], metavar="ORIGIN",
                        help="allowed CORS origin, repeatable, * = any (default: none, same-origin only)")
    parser.add_argument("--keepalive-seconds", type=seconds, default=DEFAULT_KEEPALIVE_SECONDS, metavar="SECONDS",
                        help="SSE keep-alive comment interval")
    parser.add_argument("--grace-seconds", type=seconds, default=DEFAULT_GRACE_SECONDS, metavar="SECONDS",
                        help="how long a run outlives its last client (for resuming)")
    parser.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, metavar="N",
                        help="concurrent runs before new ones are refused with 503")
    parser.add_argument("--max-idle-connections", type=cap_count, default=MAX_IDLE_CONNECTIONS, metavar="N",
                        help="connections that run nothing (reading a request, idle keep-alive, a WebSocket "
                             "with no run) before new ones get 503 (0: no cap)")
    parser.add_argument("--max-idle-per-ip", type=cap_count, default=MAX_IDLE_CONNECTIONS_PER_IP, metavar="N",
                        help="the same, per client address (0: no cap; behind a reverse proxy every client "
                             "has the proxy's address)")
    parser.add_argument("--max-runs-per-client", type=cap_count, default=DEFAULT_MAX_RUNS_PER_CLIENT, metavar="N",
                        help="runs one client (its token's principal, else its address) may hold, running or "
                             "still being read, before its new ones get 503 (0: no cap)")
    parser.add_argument("--max-buffered-bytes", type=cap_count, default=DEFAULT_MAX_BUFFERED_BYTES, metavar="BYTES",
                        help="event bytes all runs' logs may hold before new runs get 503 and growing ones are "
                             "trimmed (0: no budget)")
    parser.add_argument("--no-verify", action="store_true", help="do not verify the agent's events")
    parser.add_argument("--no-history", action="store_true",
                        help="keep no thread history (GET <path>/threads/<threadId> answers 404)")
    parser.add_argument("--event-log", default="memory", metavar="URL",
                        help="where runs' events are kept for resume: memory (this process) or "
                             "redis://host:port/db (shared by several gateway nodes; needs agui-engine[redis])")
    parser.add_argument("--store", default="sqlite:", metavar="URL",
                        help="where threads are kept durably (listed at GET <path>/threads, resumable after a "
                             f"restart): sqlite:PATH (default: {default_sqlite_path()}), postgresql://user@host/db "
                             "(several nodes; needs agui-engine[postgres]), or memory (only the event log keeps "
                             "them, until a restart)")
    parser.add_argument("--drain", type=seconds, default=DEFAULT_DRAIN_SECONDS, metavar="SECONDS",
                        help="on SIGTERM, how long running runs may take to finish before they are ended")
    parser.add_argument("--no-metrics", action="store_true", help="do not serve GET <path>/metrics (Prometheus)")
    parser.add_argument("--otel", action="store_true",
                        help="trace every run with OpenTelemetry (GenAI spans, the client's traceparent continued) "
                             "and export traces and metrics over OTLP, configured by the standard OTEL_* variables "
                             "(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME ...; needs agui-engine[otel])")
    parser.add_argument("--no-inspect", action="store_true",
                        help="do not serve the inspector page at <path>/inspect (SSE; on by default)")
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="info",
                        help="log detail on stderr")
    parser.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True,
                        help="one log line per HTTP request: method, path, status, run id, duration (SSE)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="several agents in one gateway, from a TOML file with one [agents.<id>] table each "
                             "(agent, path, description, a2ui, a2ui_snapshots, ui_spec, mcp, mcp_header_env, "
                             "principals), served "
                             "at <path>/<id> instead of --agent (SSE; default: none, one agent)")
    parser.add_argument("--wire", choices=WIRE_CHOICES, default="auto",
                        help="AG-UI wire of the HTTP streams: 1 (AG-UI 1.0), 0 (what @ag-ui/client 0.0.5x accepts: "
                             "CopilotKit, assistant-ui) or auto: 1.0 for a client declaring protocolVersion 1.x, "
                             "else 0 (default: auto; spec/wire-versions.md)")
    add_ui_spec_argument(parser)
    add_a2ui_argument(parser)
    parser.add_argument("--a2ui-snapshots", nargs="?", choices=tuple(A2UI_SNAPSHOT_CHOICES), const="on",
                        default="auto",
                        help="with --a2ui: A2UI surfaces' progress as whole ACTIVITY_SNAPSHOT events, still component "
                             "by component, for clients that do not apply ACTIVITY_DELTA: on (alone: on), off "
                             "(deltas), or auto: for the runs of assistant-ui's AG-UI runtime (more bytes; "
                             "spec/a2ui.md); default: auto"),
    add_mcp_argument(parser)


def listen_error(exc: OSError, host: str, port: int) -> UsageError:
    """The one-line UsageError for a server that cannot listen on ``host:port``."""
    if isinstance(exc, socket.gaierror):
        return UsageError(f"cannot listen on {host}: the name does not resolve; {_HOST_ADVICE}")
    if exc.errno == errno.EADDRINUSE:
        return UsageError(
            f"port {port} on {host} is already in use (another server?): stop it, or choose a free port "
            "with --port (0 picks one)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return UsageError(f"cannot listen on {host}: that address is not on this machine; {_HOST_ADVICE}")
    if exc.errno == errno.EACCES:
        return UsageError(f"cannot listen on port {port}: ports below 1024 need root; choose another with --port")
    return UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def reload_tokens(path: str, tokens: dict[str, str], secrets: SecretFilter | None = None) -> None:
    """SIGHUP: read the tokens file again and swap ``tokens`` (the mapping the servers
    check every request against) in place: added tokens work and removed ones get 401
    from the next request on, while running runs and open streams go on. A file that
    does not parse changes nothing; its error is logged as one line."""
    log = logging.getLogger("agui_engine.transports")
    try:
        fresh = read_tokens_file(path)
    except UsageError as exc:
        log.error("SIGHUP: %s; still using the %d tokens loaded before", exc, len(tokens))
        return
    added = sum(1 for t in fresh if t not in tokens)
    removed = sum(1 for t in tokens if t not in fresh)
    tokens.clear()
    tokens.update(fresh)
    if secrets is not None:  # a removed token stays a secret: it may still show in a client's retry
        secrets.secrets.extend(t for t in fresh if t not in secrets.secrets)
    log.info("SIGHUP: reloaded %d tokens from %s (%d added, %d removed)", len(fresh), path, added, removed)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT / SIGTERM (exit status 0). Raises UsageError for a bad
    agent spec or an address that cannot be listened on (the CLI prints one line)."""
    # Secrets never reach a log line, not even the libraries' DEBUG traces (cli/logs.py).
    secrets = configure_logging(args.log_level, secret_env_names=[args.auth_token_env])
    from .agent_spec import agent_from_spec, embedded_agent

    pace = args.pace if args.pace is not None else (0.0 if args.transport == "stdio" else DEMO_PACE_SECONDS)
    if args.auth_tokens_file is not None and args.transport == "stdio":
        raise UsageError("--auth-tokens-file is for --transport sse or ws: stdio has no bearer auth")
    for flag, tool, on in (("--ui-spec", "render_ui", args.ui_spec), ("--a2ui", "render_a2ui", args.a2ui)):
        if on and args.agent.strip() not in ("", "embedded"):
            raise UsageError(f"{flag} offers {tool} to the embedded agent: drop --agent or write --agent embedded")
    if args.a2ui_snapshots != "auto" and not args.a2ui:
        raise UsageError("--a2ui-snapshots changes how --a2ui's surfaces stream: add --a2ui")
    configs = _configs(args)
    token = _auth_tokens(args, secrets)
    reload = functools.partial(reload_tokens, args.auth_tokens_file, token, secrets) if isinstance(token, dict) else None
    # What the agent or its framework prints (CrewAI's panels) is logged at DEBUG, from its
    # import on: stdout is not the server's log, and with stdio it carries the protocol.
    with route_console() as stdout:
        agent: object
        if configs is not None:
            agent, servers = _config_agents(configs, pace, secrets)
        else:
            one = (embedded_agent(pace, ui_spec=args.ui_spec, a2ui=a2ui_choice(args),
                                  a2ui_snapshots=a2ui_snapshots_choice(args))
                   if args.ui_spec or args.a2ui
                   else agent_from_spec(args.agent, pace_seconds=pace))
            servers = mcp_servers(args.mcp, args.mcp_header_env)
            _mcp_secrets(servers, secrets)
            agent = with_mcp(one, servers)
        flush = None
        if args.otel:
            from .otel import configure_otel

            flush = configure_otel()
        try:
            return run_loop(_serve_mcp(agent, args, token, reload, stdout, servers), args.loop)
        except KeyboardInterrupt:
            return 0
        finally:
            if flush is not None:
                flush()  # what the batch still holds is exported before the process exits


def _configs(args: argparse.Namespace) -> list[AgentConfig] | None:
    """The agents of ``--config`` (None without it); UsageError when it is combined with a flag
    that names the one agent, another transport or a shared event log."""
    if args.config is None:
        return None
    if args.transport != "sse":
        raise UsageError("--config serves several agents over HTTP: drop --transport (or write --transport sse)")
    one_agent = (("--agent", args.agent.strip() not in ("", "embedded")), ("--a2ui", args.a2ui),
                 ("--ui-spec", args.ui_spec), ("--mcp", bool(args.mcp)), ("--mcp-header-env", bool(args.mcp_header_env)))
    for flag, given in one_agent:
        if given:
            raise UsageError(f"{flag} and --config both describe agents: put it in the agent's [agents.<id>] table")
    if args.event_log != "memory":
        raise UsageError("--event-log is for one agent: with --config each agent keeps its runs in memory")
    if args.store.strip().lower() not in ("memory", "sqlite:"):  # the default: not a choice the user made
        raise UsageError("--store is for one agent: with --config each agent keeps its threads in memory")
    from .agents_config import read_agents_config

    return read_agents_config(args.config)


def _mcp_secrets(servers: Sequence[MCPServer], secrets: SecretFilter) -> None:
    for server in servers:  # an MCP server's credentials never reach a log line either
        secrets.secrets.extend(v for v in (*server.headers.values(), *server.env.values()) if v)


def _config_agents(
    configs: Sequence[AgentConfig], pace: float, secrets: SecretFilter
) -> tuple[dict[str, ServedAgent], list[MCPServer]]:
    """Each configured agent built as its flags would build it, and every MCP server they use."""
    from agui_engine.transports.agents_app import ServedAgent

    from .agent_spec import agent_from_spec, embedded_agent

    agents: dict[str, ServedAgent] = {}
    every: list[MCPServer] = []
    for config in configs:
        where = f"[agents.{config.id}]"
        try:
            agent = (embedded_agent(pace, ui_spec=config.ui_spec, a2ui=config.a2ui,
                                    a2ui_snapshots=config.a2ui_snapshots) if config.ui_spec or config.a2ui
                     else agent_from_spec(config.agent, pace_seconds=pace))
            servers = mcp_servers(config.mcp, config.mcp_header_env)
        except UsageError as exc:
            raise UsageError(f"--config {where}: {exc}") from None
        _mcp_secrets(servers, secrets)
        every.extend(servers)
        principals = frozenset(config.principals) if config.principals is not None else None
        agents[config.id] = ServedAgent(agent=with_mcp(agent, servers), path=config.path, principals=principals,
                                        description=config.description)
    return agents, every


def _auth_tokens(args: argparse.Namespace, secrets: SecretFilter) -> str | dict[str, str] | None:
    """The servers' ``auth_token``: the environment's shared token, or the tokens file's
    mapping (its tokens join the log's secrets). Raises UsageError (one line)."""
    token = os.environ.get(args.auth_token_env) or None
    if args.auth_tokens_file is None:
        return token
    if token is not None:
        raise UsageError(
            f"both {args.auth_token_env} and --auth-tokens-file are set: use one (put the shared token in the file)"
        )
    tokens = read_tokens_file(args.auth_tokens_file)
    secrets.secrets.extend(tokens)
    return tokens


async def _serve_mcp(
    agent: object,
    args: argparse.Namespace,
    token: str | dict[str, str] | None,
    reload: Callable[[], None] | None,
    stdout: TextIO,
    servers: Sequence[MCPServer],
) -> int:
    """Serve with the MCP servers connected first and closed last (stdio processes reaped)."""
    try:
        await open_mcp(servers)
        await warn_if_unreachable(args.agent)
        return await _serve(agent, args, token, reload, stdout)
    finally:
        await close_mcp()


#: Seconds ``serve`` gives a remote agent's address (``--agent http://...``) to accept a TCP
#: connection at start-up, for its warning that the agent is not reachable yet. A check, not a
#: bound on anything: the server starts either way (the agent may come up later).
STARTUP_PROBE_SECONDS: Final = 3.0


async def warn_if_unreachable(spec: str) -> None:
    """For a remote agent (``http(s)://`` / ``ws(s)://``): one line on stderr when its address does
    not accept a connection now -- every run would end with ``RUN_ERROR`` until it does."""
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    try:
        async with asyncio.timeout(STARTUP_PROBE_SECONDS):
            _, writer = await asyncio.open_connection(parts.hostname, port)
        writer.close()
    except (OSError, TimeoutError) as exc:
        why = (f"no answer within {STARTUP_PROBE_SECONDS:g} s" if isinstance(exc, TimeoutError)
               else os.strerror(exc.errno) if exc.errno else type(exc).__name__)
        where = f"{parts.scheme}://{parts.hostname}:{port}{parts.path}"  # no user info, no query: no secret
        print(f"warning: the agent at {where} cannot be reached now ({why}): serving anyway; "
              "its runs end with RUN_ERROR until it is up", file=sys.stderr, flush=True)


async def _serve(
    agent: object,
    args: argparse.Namespace,
    token: str | dict[str, str] | None,
    reload: Callable[[], None] | None,
    stdout: TextIO,
) -> int:
    from agui_engine.transports.open_log import open_event_log

    options = RegistryOptions(
        max_runs=args.max_runs,
        grace_seconds=args.grace_seconds,
        verify=not args.no_verify,
        max_runs_per_client=args.max_runs_per_client,
        max_buffered_bytes=args.max_buffered_bytes,
        keep_history=not args.no_history,
        tracing=args.otel,
    )
    store = await _open_store(args)
    try:
        log = await open_event_log(args.event_log)  # UsageError (bad URL), EventLogUnavailableError (exit 1)
        try:
            return await _serve_with(agent, args, options, log, token, reload, stdout, store)
        finally:
            aclose = getattr(log, "aclose", None)
            if aclose is not None:
                await aclose()
    finally:
        if store is not None:
            await store.aclose()


async def _open_store(args: argparse.Namespace) -> Any:
    """The durable thread store ``--store`` names (None: memory, or --no-history).
    Raises UsageError (bad URL, unusable file, missing extra, a newer schema)."""
    if args.no_history or args.store.strip().lower() == "memory" or args.config is not None:
        return None  # --config: each agent's threads in memory (_configs refuses a --store)
    from agui_engine.transports.open_threads import open_thread_store

    return await open_thread_store(args.store)


async def _serve_with(
    agent: object,
    args: argparse.Namespace,
    options: RegistryOptions,
    log: EventLog,
    token: str | dict[str, str] | None,
    reload: Callable[[], None] | None,
    stdout: TextIO,
    store: ThreadStore | None = None,
) -> int:
    from agui_engine.transports.metrics import GatewayMetrics
    from agui_engine.transports.runs import RunRegistry

    metrics = None if args.no_metrics or args.transport != "sse" else GatewayMetrics(otel=args.otel)
    several: dict[str, Any] = {}
    registry: RunRegistry | None = None
    if args.config is not None:  # each agent its own registry, in memory (transports/agents_app.py)
        several = {"agent": agent, "options": options, "metrics": metrics}
    else:
        registry = RunRegistry(agent, options=options, log=log, metrics=metrics, threads=store)  # type: ignore[arg-type]
    if args.transport == "stdio":
        from agui_engine.transports.stdio_server import serve_stdio

        assert registry is not None  # --config is refused with --transport stdio
        return await serve_stdio(registry=registry, stdout=stdout.buffer)
    stop = asyncio.Event()
    signals: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        signals.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    if reload is not None:  # SIGHUP re-reads the tokens file
        loop.add_signal_handler(signal.SIGHUP, reload)
    connection = ConnectionOptions(
        keepalive_seconds=args.keepalive_seconds,
        max_idle_connections=args.max_idle_connections,
        max_idle_per_ip=args.max_idle_per_ip,
        wire=args.wire,
    )
    if args.transport == "sse":
        from agui_engine.transports.sse_server import start_sse_server

        try:
            server: object = await start_sse_server(
                host=args.host,
                port=args.port,
                path=args.path,
                registry=registry,
                auth_token=token,
                cors_origins=args.cors,
                **several,
                inspector=not args.no_inspect,
                access_log=args.access_log,
                connection=connection,
            )
        except OSError as exc:
            raise listen_error(exc, args.host, args.port) from exc
        url = server.url.rstrip("/") + (args.path if args.path != "/" else "/")  # type: ignore[attr-defined]
        if not args.no_inspect:
            print(f"inspector on {url.rstrip('/')}/inspect", file=sys.stderr, flush=True)
    else:
        from agui_engine.transports.websocket_server import start_websocket_server

        assert registry is not None  # --config is refused with --transport ws
        try:
            server = await start_websocket_server(
                host=args.host, port=args.port, registry=registry, auth_token=token, connection=connection
            )
        except OSError as exc:
            raise listen_error(exc, args.host, args.port) from exc
        url = server.url
    served = args.agent if args.config is None else "agents " + ", ".join(agent)  # type: ignore[arg-type]
    kept = "none" if args.no_history else (
        "the event log" if store is None else f"sqlite:{store.path}" if hasattr(store, "path")
        else getattr(store, "label", "a durable store"))
    logging.getLogger("agui_engine.transports").info(
        "agui-engine serving %s on %s%s (threads kept in %s; %s event loop)", served, url,
        " (bearer auth)" if token else "", kept, resolve_loop(args.loop),
    )
    print(f"serving on {url}", file=sys.stderr, flush=True)
    await stop.wait()
    if signals and signals[0] == signal.SIGTERM:
        from agui_engine.transports.agents_app import AGENT_REGISTRIES_KEY

        registry = server.registry  # type: ignore[attr-defined]
        registries = ([registry] if registry is not None
                      else list(server.runner.app[AGENT_REGISTRIES_KEY].values()))  # type: ignore[attr-defined]
        active = sum(r.active for r in registries)
        print(f"draining ({active} runs, up to {args.drain:g} s)", file=sys.stderr, flush=True)
        await asyncio.gather(*(r.drain(args.drain) for r in registries))
        print("shutting down", file=sys.stderr, flush=True)
    else:  # Ctrl-C: after the terminal's ^C
        after_interrupt("shutting down")
    await server.close()  # type: ignore[attr-defined]
    return 0
