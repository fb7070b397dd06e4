"""The package's public API. The front door (``agui_engine/__init__.py``) is its import block and
its literal ``__all__``: the test holds the two equal and the list small, so a name joins or
leaves the front door by an edit of that one file (no third copy here). Every public module has a
literal, sorted ``__all__``; every subpackage's ``__all__`` lists its public modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agui_engine
from tests.public_api import (
    check_every_public_name_is_in_all,
    check_module,
    check_package,
    check_subpackage,
    public_modules,
)

# The schema writer is a program over the library (it writes spec/schema), not part of
# it; the command line is the subpackage agui_engine.cli (not a module of this folder).
NOT_PUBLIC = {"schema"}
#: the core's layer folders (tests/test_layers.py); the CLI is not a library module
LAYER_FOLDERS = ("protocol", "genui", "loops", "demo")
MODULES = public_modules("agui_engine", NOT_PUBLIC, LAYER_FOLDERS)
#: the command line's modules: a literal, sorted ``__all__`` each (they are programs, not API)
CLI_MODULES = public_modules("agui_engine.cli", set())
FRONT_DOOR = Path(agui_engine.__file__)
#: the front door's size: the names a user needs to start (issue 29: about 40-60), in under 100 lines
MAX_FRONT_DOOR_NAMES = 60
MAX_FRONT_DOOR_LINES = 100


def _front_door_imports() -> list[str]:
    """The names ``agui_engine/__init__.py`` imports from its modules, plus ``__version__``."""
    tree = ast.parse(FRONT_DOOR.read_text(encoding="utf-8"))
    names = [alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level
             for alias in node.names]
    return sorted([*names, "__version__"])


def test_the_front_door_is_its_imports_and_small() -> None:
    imported = _front_door_imports()
    check_package(agui_engine, imported, FRONT_DOOR, [name for name, _ in MODULES])
    assert len(imported) <= MAX_FRONT_DOOR_NAMES, f"the front door holds {len(imported)} names"
    assert len(FRONT_DOOR.read_text(encoding="utf-8").splitlines()) < MAX_FRONT_DOOR_LINES


@pytest.mark.parametrize("package", LAYER_FOLDERS)
def test_a_subpackages_all_lists_its_public_modules(package: str) -> None:
    check_subpackage(f"agui_engine.{package}")


@pytest.mark.parametrize(("module", "path"), MODULES + CLI_MODULES, ids=[name for name, _ in MODULES + CLI_MODULES])
def test_public_module_has_a_literal_sorted_all(module: str, path: Path) -> None:
    check_module(module, path)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_public_module_keeps_no_public_name_outside_its_all(module: str, path: Path) -> None:
    check_every_public_name_is_in_all(module, path)


def test_demo_data_and_internals_are_not_exported() -> None:
    from agui_engine.demo import weather_model as embedded
    from agui_engine.protocol import ids, verify

    for name in ["DEMO_WEATHER", "plan_reply", "chunk_text", "ANY", "TEXT", "Row", "KEEP", "DROP", "new_id"]:
        assert name not in agui_engine.__all__
    # the public API of their modules (for the demo and the tests), not of the package
    assert embedded.DEMO_WEATHER and embedded.plan_reply and verify.Row and ids.new_id
    for module, names in [(embedded, ["DEMO_WEATHER", "plan_reply", "chunk_text"]), (verify, ["ANY", "TEXT", "Row"]),
                          (ids, ["new_id"])]:
        assert set(names) <= set(module.__all__)


def test_importing_the_core_pulls_in_no_io_library() -> None:
    code = (
        "import sys, agui_engine; "
        "bad = [m for m in ('aiohttp', 'httpx', 'websockets', 'agui_engine.transports', 'agui_engine.adapters') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
