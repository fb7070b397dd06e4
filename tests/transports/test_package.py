"""``agui_engine.transports``: its ``__all__`` is a literal list equal to the table its
lazy exports are made from (the TYPE_CHECKING imports), loaded lazily so
that importing the package pulls in no IO library; every transport module has a
literal, sorted ``__all__``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agui_engine.transports as transports
from agui_engine._lazy import exports_in
from tests.public_api import check_every_public_name_is_in_all, check_module, check_package, public_modules

MODULES = public_modules("agui_engine.transports", set())

#: The package's table: its TYPE_CHECKING imports, which the lazy exports are made from
#: (agui_engine/_lazy.py). The literal __all__ must equal it, name for name.
EXPECTED_ALL = sorted(exports_in(Path(transports.__file__).read_text(encoding="utf-8"), "transports"))


def test_all_is_the_literal_expected_list() -> None:
    check_package(transports, EXPECTED_ALL, Path(transports.__file__), [name for name, _ in MODULES])


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_transport_module_has_a_literal_sorted_all(module: str, path: Path) -> None:
    check_module(module, path)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_transport_module_keeps_no_public_name_outside_its_all(module: str, path: Path) -> None:
    check_every_public_name_is_in_all(module, path)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        transports.nope  # noqa: B018


def test_importing_the_package_pulls_in_no_io_library() -> None:
    code = (
        "import sys, agui_engine.transports; "
        "print(','.join(m for m in ('aiohttp', 'httpx', 'websockets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""

