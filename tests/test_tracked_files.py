"""What the repository tracks: installed dependencies never (they are put in place by tests/install-deps.sh).

A helper checkout links ``tests/js/node_modules`` to a shared npm install; committing that link
made a fast-forward of main replace main's real install with a link to itself, and every node
test (the real ``@ag-ui/client``) failed for everyone. This test fails on the branch that adds it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A git command answers in milliseconds; the bound only stops a hang.
GIT_TIMEOUT = 30


def test_no_installed_dependency_is_tracked() -> None:
    git = shutil.which("git")
    assert git is not None, "git is required"
    done = subprocess.run([git, "ls-files", "--", "node_modules", "*/node_modules", "*/node_modules/*"],
                          cwd=ROOT, capture_output=True, text=True, timeout=GIT_TIMEOUT, check=True)
    assert done.stdout.split() == [], "untrack it: git rm --cached " + " ".join(done.stdout.split())
