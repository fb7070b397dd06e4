"""The import rule: agui_engine (core) does no IO and imports nothing above it.

adapters may import the core; transports may import the core and adapters; the
core imports neither, and never an IO library. Checked statically on the AST so
that a lazy import inside a function is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Modules that do IO, run timers or threads. The core may not import them anywhere.
CORE_FORBIDDEN = {
    "asyncio.subprocess",
    "aiohttp",
    "httpx",
    "websockets",
    "socket",
    "ssl",
    "selectors",
    "threading",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "urllib.request",
    "http.client",
    "langgraph",
    "langchain_core",
    "crewai",
    "agui_engine.transports",
    "agui_engine.adapters",
}
# The CLI and the demo renderer are the only core modules allowed to reach up:
# they are the program's entry point, not the library.
CORE_ENTRY_POINTS = {"cli", "__main__.py"}

ADAPTERS_FORBIDDEN = {"agui_engine.transports"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _violations(package: str, forbidden: set[str], skip: set[str] = frozenset()) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name in skip or path.parent.name in skip:
            continue
        for line, module in _imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return bad


def test_core_does_no_io_and_imports_down_only() -> None:
    assert _violations("agui_engine", CORE_FORBIDDEN, CORE_ENTRY_POINTS) == []


def test_core_tokenizer_codecs_verifier_accumulator_do_not_use_asyncio_or_clock() -> None:
    pure = ["jsonstream.py", "codec.py", "verify.py", "accumulator.py", "events.py"]
    bad = []
    for name in pure:
        path = ROOT / "agui_engine" / name
        if not path.exists():
            continue
        for line, module in _imports(path):
            if module.split(".")[0] in {"asyncio", "time", "threading", "socket"}:
                bad.append(f"{name}:{line} imports {module}")
    assert bad == []


def test_adapters_do_not_import_transports() -> None:
    assert _violations("adapters", ADAPTERS_FORBIDDEN) == []


@pytest.mark.parametrize("package", ["agui_engine", "transports", "adapters"])
def test_packages_are_typed(package: str) -> None:
    assert (ROOT / package / "py.typed").exists()
