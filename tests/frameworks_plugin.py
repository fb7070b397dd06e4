"""The ``frameworks`` marker, for tests and benchmarks alike (a plugin, loaded by ``addopts`` in
pyproject.toml, so that it governs both folders)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

#: Test and benchmark modules that run a real agent framework (LangGraph, CrewAI) or its official
#: AG-UI bridge, or third-party AG-UI servers built on them (``test_remote_peers``: pydantic-ai,
#: ag-ui-langgraph). They are marked ``frameworks``: the slowest part of the suite to import (crewai alone
#: takes 10-15 s per test process) and to run. ``pytest -m "not frameworks"`` is the fast path for
#: work on the core, the transports and the provider adapters: those modules are then not even
#: imported. CI runs everything.
FRAMEWORK_MODULE = re.compile(r"^(test|bench)_(langgraph|crewai|remote_peers)\w*\.py$")
FRAMEWORKS_MARKER = "frameworks"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{FRAMEWORKS_MARKER}: runs a real agent framework (LangGraph, CrewAI); deselect with -m 'not {FRAMEWORKS_MARKER}'"
    )


def _frameworks_deselected(config: pytest.Config) -> bool:
    return re.fullmatch(rf"\s*not\s+{FRAMEWORKS_MARKER}\s*", config.getoption("markexpr") or "") is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not frameworks"`` the framework modules are skipped before import (selecting by
    marker alone would still import crewai and langgraph to read the marks)."""
    if _frameworks_deselected(config) and FRAMEWORK_MODULE.match(collection_path.name):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if FRAMEWORK_MODULE.match(item.path.name):
            item.add_marker(FRAMEWORKS_MARKER)
