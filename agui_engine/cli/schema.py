"""Write the JSON Schemas of the AG-UI types (:mod:`agui_engine.protocol.schema`) into a directory::

    python -m agui_engine.cli.schema spec/schema

A maintainer's command, not an ``agui-engine`` subcommand: the checked-in copies in
``spec/schema/`` must equal what :func:`agui_engine.protocol.schema.schemas` generates
(``tests/agui_engine/test_schema.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from agui_engine.protocol.schema import render, schemas

__all__ = ["main", "write"]


def write(directory: Path) -> list[Path]:
    """Write every schema document into ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in schemas().items():
        path = directory / name
        path.write_text(render(document), encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0, or 2 (with one line of usage) without exactly one directory."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m agui_engine.cli.schema <directory>", file=sys.stderr)
        return 2
    for path in write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
