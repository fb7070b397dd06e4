"""Lazy package exports: a package lists ``name -> submodule`` and each name is
imported on first access, so importing the package stays cheap (``import
agui_engine.transports`` does not pull in aiohttp, httpx or websockets;
``import agui_engine.adapters`` does not pull in httpx). One helper serves every
package that does this; the package keeps a ``def __getattr__`` (and imports the
names under ``TYPE_CHECKING``) so type checkers and IDEs see real names."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["export_names", "load_export"]


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
