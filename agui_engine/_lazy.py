"""Lazy package exports: a package's public names are imported on first use, so that
importing the package stays cheap (``import agui_engine.transports`` does not pull in
aiohttp, httpx or websockets; ``import agui_engine.adapters`` does not pull in httpx).

The table is written once, as the package's ``if TYPE_CHECKING:`` block of relative
imports (``from .sse_server import SSEServer, create_app``): type checkers and editors read
those imports as they are, and :func:`exports_of` reads the same block from the package's
source at import time (from the import system's loader; one ``ast.parse`` of a small file), giving ``name -> submodule`` for
the package's ``__getattr__`` (PEP 562). Nothing is generated from strings: the block is
plain Python that mypy checks. The literal ``__all__`` beside it is the checked copy (the
package tests hold it equal to the table)."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["export_names", "exports_in", "exports_of", "load_export"]


def exports_of(package: str) -> dict[str, str]:
    """``name -> submodule`` of the package ``package`` (its ``__name__``, while it is being
    imported): :func:`exports_in` of its source, which the import system's loader gives (as
    ``inspect.getsource`` has it). Raises ValueError as :func:`exports_in` does."""
    spec = sys.modules[package].__spec__
    source = spec.loader.get_source(package) if spec is not None and spec.loader is not None else None  # type: ignore[attr-defined]
    if source is None:
        raise ValueError(f"{package}: its source cannot be read, and its exports table is in it")
    return exports_in(source, package)


def exports_in(source: str, where: str) -> dict[str, str]:
    """``name -> submodule`` of the relative imports in the module-level ``if TYPE_CHECKING:``
    block of a package's ``source`` (``where`` names it in errors). Raises ValueError when the
    block is missing or imports anything but ``from .module import name, ...``."""
    tree = ast.parse(source, filename=where)
    blocks = [
        node for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    if len(blocks) != 1:
        raise ValueError(f"{where}: want one module-level 'if TYPE_CHECKING:' block of exports, found {len(blocks)}")
    exports: dict[str, str] = {}
    for node in blocks[0].body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and "." not in node.module):
            raise ValueError(f"{where}:{node.lineno}: the exports block holds only 'from .module import name' lines")
        for alias in node.names:
            if alias.asname is not None or alias.name == "*":
                raise ValueError(f"{where}:{node.lineno}: export {alias.name!r} under its own name")
            exports[alias.name] = node.module
    return exports


def load_export(package: str, exports: Mapping[str, str], name: str) -> Any:
    """The value of ``package.name``, importing the submodule ``exports[name]`` on first
    access and caching the value in the package's namespace (later lookups are plain
    attribute reads). Raises :class:`AttributeError` for a name not in ``exports``,
    as a missing module attribute does."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    setattr(sys.modules[package], name, value)
    return value


def export_names(package: str, exports: Mapping[str, str]) -> list[str]:
    """``dir(package)``: what is loaded already plus every lazy export."""
    return sorted(set(vars(sys.modules[package])) | set(exports))
