from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(autouse=True, scope="session")
def _own_data_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every ``agui-engine serve`` a test starts (in process or as a subprocess, which inherits
    the environment) keeps its threads under a temp XDG_DATA_HOME, never in the user's own."""
    import os

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
