"""Installed names cannot collide: ``adapters`` and ``transports`` live under ``agui_engine``.

Other distributions install top-level packages named ``adapters`` and ``transports``
(``adapters`` is a popular machine-learning library), and a user's project may have its
own ``transports.py``; neither may shadow or be shadowed by the engine's layers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import adapters, transports
from agui_engine.adapters import client_from_spec
from agui_engine.adapters.replay import ReplayServer
from agui_engine.transports import SSEAgent, start_sse_server
import agui_engine.adapters as engine_adapters
assert adapters.OWNER == "someone else", adapters.__file__
assert transports.OWNER == "someone else", transports.__file__
assert engine_adapters.__name__ == "agui_engine.adapters"
print("ok", engine_adapters.__file__)
"""


def _foreign_packages(into: Path) -> None:
    """Top-level ``adapters`` (a package) and ``transports`` (a module), not ours."""
    (into / "adapters").mkdir()
    (into / "adapters" / "__init__.py").write_text('OWNER = "someone else"\n')
    (into / "transports.py").write_text('OWNER = "someone else"\n')


def test_a_users_own_transports_and_adapters_shadow_nothing(tmp_path: Path) -> None:
    _foreign_packages(tmp_path)  # the user's project directory, first on sys.path
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


@pytest.mark.timeout(600)  # a venv and a wheel build: tens of seconds on a loaded machine
def test_pip_install_into_a_venv_that_holds_packages_named_adapters_and_transports(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    _foreign_packages(Path(purelib))
    # a copy of the tracked sources, so the build leaves nothing in the repository
    source = tmp_path / "src"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for name in files:
        if name.startswith("tests/") or name.startswith("benchmarks/"):
            continue
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(source)],
        check=True, capture_output=True, text=True, timeout=480, env=env,
    )
    result = subprocess.run([str(python), "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    installed = Path(result.stdout.split()[1]).parent
    assert installed.is_relative_to(Path(purelib)), installed  # the venv's copy, not the checkout
    assert (installed / "py.typed").exists()
    assert (installed / "fixtures" / "openai_chat" / "text.sse").exists()  # package data came along
