from __future__ import annotations

from pathlib import Path

import pytest

from tests.hypothesis_profiles import load_profile

DATA = Path(__file__).parent / "data"
#: the Hypothesis profile of this run (``ci`` when CI=true, else ``dev``: tests/hypothesis_profiles.py)
HYPOTHESIS_PROFILE = load_profile()


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(autouse=True, scope="session")
def _own_data_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every ``agui-engine serve`` a session-scoped fixture starts keeps its threads under a temp
    XDG_DATA_HOME, never in the user's own."""
    import os

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))


@pytest.fixture(autouse=True)
def _own_thread_store(_own_data_directory: None, tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's ``agui-engine serve`` (in process or a subprocess, which inherits the
    environment) starts on an empty thread store of its own: the store persists, so a serve of
    an earlier test on the same worker would otherwise own its fixed thread ids (``thread-1``),
    and a later serve rightly neither keeps nor shows a run on another client's thread."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {HYPOTHESIS_PROFILE} (tests/hypothesis_profiles.py)"
