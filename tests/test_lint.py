"""The code passes ruff with the project's configuration ([tool.ruff] in pyproject.toml).

``python -m ruff check`` runs over every source folder of the project; any finding fails the
test, and ruff's own output (file, line, rule, message) is the failure message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The project's Python folders; one that does not exist (yet) is skipped.
FOLDERS = ("agui_engine", "tests", "benchmarks", "examples", "scripts")
#: ruff checks the whole tree in about a second; the bound only stops a hang.
RUFF_TIMEOUT = 120


def test_ruff_finds_nothing() -> None:
    folders = [name for name in FOLDERS if (ROOT / name).is_dir()]
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *folders],
        cwd=ROOT, capture_output=True, text=True, timeout=RUFF_TIMEOUT,
    )
    assert done.returncode in (0, 1), f"ruff did not run: {done.stderr}"
    assert done.returncode == 0, f"ruff findings:\n{done.stdout}"
