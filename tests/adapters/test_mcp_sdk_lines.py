"""The MCP tests on BOTH lines of the official ``mcp`` SDK.

This environment has the 1.x line (crewai, a test extra, pins ``mcp<2``), while ``pip install
'agui-engine[mcp]'`` alone gets the 2.x line, whose API differs (``FastMCP`` renamed, snake_case
types, ``httpx2`` transports: ``agui_engine.adapters.mcp_sdk``). So this test builds a second
environment with uv -- this checkout (editable), ``mcp>=2`` and the test runner; kept in a cache
directory keyed by its requirements, so it is built once -- and runs the MCP test files in it, as
a subprocess, on the same checkout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The second environment's packages besides this checkout (the test files' own imports included).
SECOND_LINE_REQUIREMENTS = (
    "mcp>=2,<3",
    "pytest>=8",
    "pytest-asyncio>=0.23",
    "pytest-timeout>=2.3",
    "pytest-benchmark>=4",
    "hypothesis>=6.100",
    "ag-ui-protocol==1.0.0",
    "ag-ui-validate==0.4.0",
    "playwright>=1.40",
)

#: The test files that use the SDK: the client adapter, the CLI's --mcp, the demo's own server, the
#: gateway's MCP Apps proxy (its npm middleware side and the inspector's Chromium side included).
MCP_TEST_FILES = (
    "tests/adapters/test_mcp.py",
    "tests/agui_engine/cli/test_mcp.py",
    "tests/agui_engine/cli/test_demo_mcp_server.py",
    "tests/transports/test_runs_mcp_apps.py",
    "tests/transports/test_inspector_mcp_apps.py",
)


def _environment() -> Path:
    """The 2.x environment (built with uv on first use, under a file lock so that parallel test
    workers build it once); its key changes with the requirements, the project's own
    dependencies and the checkout it is editable from."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    key = hashlib.sha256(b"\0".join([str(ROOT).encode(), pyproject, sys.version.encode(),
                                     *(r.encode() for r in SECOND_LINE_REQUIREMENTS)])).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agui-engine-tests"
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"mcp2-{key}"
    python = venv / "bin" / "python"
    with open(cache / f"mcp2-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "complete").exists():
            uv = [sys.executable, "-m", "uv"]
            subprocess.run([*uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)],
                           check=True, capture_output=True, text=True)
            done = subprocess.run([*uv, "pip", "install", "--quiet", "--python", str(python), "-e", str(ROOT),
                                   *SECOND_LINE_REQUIREMENTS], capture_output=True, text=True)
            assert done.returncode == 0, f"building the mcp 2.x environment failed:\n{done.stderr[-3000:]}"
            (venv / "complete").write_text("ok\n")
    return python


# Why 2400 s: five test files (real stdio and HTTP servers, node and Chromium) run in a subprocess,
# serially; alone on an idle machine they take about 3 minutes, on 2 shared cores at load 10 about 10,
# and building the environment the first time adds a minute of downloads.
@pytest.mark.timeout(2400)
def test_the_mcp_tests_pass_on_the_sdk_2_line() -> None:
    try:
        import uv  # noqa: F401 - the installer the suite uses (the test extra)
    except ImportError:
        pytest.fail("uv is not installed: pip install -e '.[test]'")
    python = _environment()
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version.split(".")[0] == "2", version
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *MCP_TEST_FILES],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    failed = "\n".join(line for line in lines if line.startswith(("FAILED ", "ERROR ")))
    assert done.returncode == 0, f"on mcp {version}: {summary}\n{failed}\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert " passed" in summary, summary
