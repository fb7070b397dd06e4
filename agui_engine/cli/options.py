"""What more than one command shares: the options ``demo`` and ``serve`` both take (their argparse
types and arguments), the ``--debug`` switch (:func:`debug_enabled`) and the line a command says
after Ctrl-C (:func:`after_interrupt`). Its own module so that a subcommand never imports the
command line's package (:mod:`agui_engine.cli`), which imports the subcommands by name."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

from ..genui.a2ui_clients import A2UISnapshots

__all__ = [
    "A2UI_SNAPSHOT_CHOICES",
    "DEBUG_ENV",
    "a2ui_choice",
    "a2ui_snapshots_choice",
    "add_a2ui_argument",
    "add_ui_spec_argument",
    "after_interrupt",
    "debug_enabled",
    "seconds",
]

#: Environment variable that turns on ``--debug``.
DEBUG_ENV = "AGUI_ENGINE_DEBUG"


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def add_ui_spec_argument(parser: argparse.ArgumentParser) -> None:
    """``--ui-spec`` (``demo`` and ``serve``): the embedded agent also offers ``render_ui``."""
    parser.add_argument("--ui-spec", action="store_true",
                        help="also offer the render_ui tool to the embedded agent (a tree of a Stack layout and the "
                             "demo components; try \"dashboard for Tokyo and Paris\"); default off")


def add_a2ui_argument(parser: argparse.ArgumentParser) -> None:
    """``--a2ui`` and ``--a2ui-version`` (``demo`` and ``serve``): the embedded agent also offers ``render_a2ui``."""
    parser.add_argument("--a2ui", action="store_true",
                        help="also offer the render_a2ui tool (A2UI, the basic catalog) to the embedded agent; "
                             "try \"book a table for two\"; default off")
    parser.add_argument("--a2ui-version", choices=("0.9", "1.0"), default="0.9",
                        help="with --a2ui: the A2UI version surfaces use unless the client declares another "
                             "(forwardedProps.a2uiClientCapabilities or its catalog: spec/a2ui.md); default 0.9")


#: ``--a2ui-snapshots`` (``serve``) and an agent table's ``a2ui_snapshots``: the loops' ``a2ui_snapshots=``.
A2UI_SNAPSHOT_CHOICES: Final[Mapping[str, A2UISnapshots]] = {"auto": "auto", "on": True, "off": False}


def a2ui_snapshots_choice(args: argparse.Namespace) -> A2UISnapshots:
    """What ``--a2ui-snapshots`` asks for: ``True`` (on), ``False`` (off) or ``"auto"`` (the default)."""
    return A2UI_SNAPSHOT_CHOICES[getattr(args, "a2ui_snapshots", "auto")]


def a2ui_choice(args: argparse.Namespace) -> str | None:
    """What ``--a2ui`` / ``--a2ui-version`` ask for: ``None`` (no A2UI) or the version (``"v1.0"``)."""
    return f"v{args.a2ui_version}" if getattr(args, "a2ui", False) else None


def after_interrupt(line: str, stream: TextIO | None = None) -> None:
    """Write ``line`` (what a command says once Ctrl-C stopped it) on its own line of ``stream``
    (stderr): on a terminal it starts on a new line, since the terminal has just echoed ``^C``
    where the cursor was, often in the middle of a half-printed line."""
    out = sys.stderr if stream is None else stream
    fresh = "\n" if out.isatty() else ""
    out.write(f"{fresh}{line}\n")
    out.flush()


def debug_enabled(argv: Sequence[str] = ()) -> bool:
    """Whether tracebacks are shown: ``--debug`` in ``argv`` or ``AGUI_ENGINE_DEBUG`` set (not 0)."""
    return "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
