"""The ``agui-engine`` command line.

Each subcommand lives in the module that owns the feature and is imported only
when it runs, so that ``agui-engine --help`` stays fast and a missing optional
dependency only affects its own subcommand. A subcommand module exposes
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help). The module provides add_arguments() and run().
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("agui_engine.cli.serve", "Serve an agent over SSE, WebSocket or stdio (the AG-UI gateway)."),
    "run": ("agui_engine.cli.run", "Run one message against a remote AG-UI endpoint and render it live."),
    "demo": ("agui_engine.cli.demo", "Run the embedded demo model through the gateway (weather card, dashboard, chat) and render the run live."),
    "validate": ("agui_engine.cli.validate", "Verify a recorded AG-UI run (SSE or NDJSON) and print the conversation it builds."),
    "bench": ("agui_engine.cli.bench", "Measure incremental JSON-to-patch parsing against re-parsing alternatives."),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agui-engine", description="A streaming engine for the AG-UI protocol.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = getattr(args, "_module", None)
    if module is None:
        parser.print_help()
        return 2
    return int(module.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
