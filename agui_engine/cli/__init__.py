"""The ``agui-engine`` command line: the layer above the transports.

Theory of operation
-------------------
Each subcommand is a module of this package (:data:`SUBCOMMANDS`) exposing
``add_arguments(parser)`` and ``run(args) -> int``. :func:`main` finds the
subcommand in ``argv`` and imports only that module, so ``agui-engine --help``
imports no HTTP or WebSocket library and a missing optional dependency only
affects its own subcommand.

Mistakes never show a Python traceback: :func:`main` turns them into ONE line on
stderr saying what to do, with exit status 2 for a usage error (bad option,
bad spec, port in use) and 1 for a failure at run time. ``--debug`` (or
``AGUI_ENGINE_DEBUG=1``) shows the traceback instead. Output piped into a
reader that stops early (``| head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

from .options import DEBUG_ENV, debug_enabled

__all__ = [
    "CommandParser",
    "DefaultsHelpFormatter",
    "SUBCOMMANDS",
    "main",
    "quiet_broken_pipe",
    "usage_line",
]

#: name -> (module, one-line help). The module provides add_arguments() and run().
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "agui_engine.cli.demo",
        "Run the embedded demo model through the gateway (weather card, dashboard, chat) and render the run live.",
    ),
    "serve": ("agui_engine.cli.serve", "Serve an agent over SSE, WebSocket or stdio (the AG-UI gateway)."),
    "run": ("agui_engine.cli.run", "Run one message against a remote AG-UI endpoint and render it live."),
    "validate": (
        "agui_engine.cli.validate",
        "Verify a recorded AG-UI run (SSE, NDJSON or protobuf) and print the conversation it builds.",
    ),
    "threads": (
        "agui_engine.cli.threads",
        "List, export (JSON lines) or prune the threads serve keeps in its durable store (SQLite, PostgreSQL).",
    ),
    "bench": ("agui_engine.cli.bench", "Measure incremental JSON-to-patch parsing against re-parsing alternatives."),
    "loadtest": (
        "agui_engine.cli.loadtest",
        "Load-test any AG-UI endpoint: concurrent runs, latency percentiles, throughput, every stream verified.",
    ),
}

#: Exit status of a usage error (argparse's convention).
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130
#: Exit status when the reader of our output went away (128 + SIGPIPE, as if killed by it).
EXIT_BROKEN_PIPE = 141



def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agui-engine")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
        from agui_engine import __version__

        return __version__


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to every option's help that has a default worth
    showing; an option whose default is "absent" (None, False, empty) says in its
    own help what happens without it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        default = action.default
        if (
            "%(default)" in help_text
            or "default" in help_text
            or default in (None, False, [], argparse.SUPPRESS)
            or not action.option_strings
        ):
            return help_text
        return help_text + " (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are one line: what is wrong, where to look (the
    command's own help, and for a mistyped option the closest one it has)."""

    #: The subcommand parser whose options an unrecognized argument is compared with and whose
    #: help is named (argparse reports those at the top level); set by build_parser.
    command_parser: argparse.ArgumentParser | None = None

    def error(self, message: str) -> NoReturn:
        where = self.command_parser or self
        hint = f"see {where.prog} --help"
        if message.startswith("unrecognized arguments: "):
            first = message.partition(": ")[2].split(" ")[0].partition("=")[0]
            options = [o for action in where._actions for o in action.option_strings if o.startswith("--")]
            close = difflib.get_close_matches(first, options, n=1, cutoff=0.6) if first.startswith("-") else []
            if close:
                hint = f"did you mean {close[0]}? {hint}"
        self.exit(EXIT_USAGE, f"{self.prog}: {message} ({hint})\n")


def usage_line(command: str | None, message: str) -> str:
    """The one line a mistake prints: ``agui-engine <command>: <message>``."""
    return f"agui-engine{' ' + command if command else ''}: {message}"


def quiet_broken_pipe() -> None:
    """After our reader went away: point stdout at /dev/null so that the final
    flush at exit does not raise (and print) a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: the first argument not an option (the
    top-level options take no value)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(command: str | None = None) -> CommandParser:
    """The parser; only ``command``'s module is imported and its options added."""
    parser = CommandParser(
        prog="agui-engine",
        description="A streaming engine for the AG-UI protocol. Run 'agui-engine COMMAND --help' for a command's options.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agui-engine {_version()}")
    parser.add_argument(
        "--debug", action="store_true", help=f"show Python tracebacks for errors (also when {DEBUG_ENV}=1 is set)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text, formatter_class=DefaultsHelpFormatter)
        sub_parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS,
            help=f"show Python tracebacks for errors (also when {DEBUG_ENV}=1 is set)",
        )
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser)
            sub_parser.set_defaults(_run=module.run)
            parser.command_parser = sub_parser
    return parser


def _fail(command: str | None, message: str, status: int, stream: IO[str] | None = None) -> int:
    try:
        print(usage_line(command, message), file=stream or sys.stderr, flush=True)
    except (BrokenPipeError, OSError):  # pragma: no cover - stderr gone too
        pass
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(args_list)
    if command not in SUBCOMMANDS:
        command = None
    parser = build_parser(command)
    debug = debug_enabled(args_list)
    try:
        args = parser.parse_args(args_list)
        run: Callable[[argparse.Namespace], Any] | None = getattr(args, "_run", None)
        if run is None:
            parser.print_help()
            return EXIT_USAGE
        status = int(run(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader gone from the pipe is caught below
        return status
    except BrokenPipeError:
        quiet_broken_pipe()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except SystemExit:
        raise
    except Exception as exc:
        if debug:
            raise
        from agui_engine.protocol.errors import AguiEngineError, UsageError

        if isinstance(exc, UsageError):
            return _fail(command, exc.message, EXIT_USAGE)
        if isinstance(exc, AguiEngineError):
            return _fail(command, exc.message, 1)
        return _fail(
            command,
            f"unexpected error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            1,
        )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
