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
import urllib.request
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


def _tracked_sources(into: Path) -> Path:
    """A copy of the tracked sources (tests and benchmarks left out), so a build leaves nothing behind."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for name in files:
        if name.startswith(("tests/", "benchmarks/")):
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return into


def _uv(*args: str, env: dict[str, str]) -> None:
    """uv, the installer the README's commands bring (``python3 -m uv``); its cache makes the installs local."""
    done = subprocess.run([sys.executable, "-m", "uv", *args], capture_output=True, text=True, timeout=480, env=env)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wheel built from the tracked sources, installed with its dependencies into a fresh virtual
    environment that sees nothing of this one (no system site-packages, so no editable install of the
    checkout can answer an import the wheel lacks). Yields (the venv's bin folder, its purelib)."""
    base = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _uv("build", "--wheel", "-q", "-o", str(base / "dist"), str(_tracked_sources(base / "src")), env=env)
    (wheel,) = (base / "dist").glob("agui_engine-*.whl")
    venv = base / "venv"
    _uv("venv", "-q", "--python", sys.executable, str(venv), env=env)
    _uv("pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel), env=env)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    return venv / "bin", Path(purelib)


def _clean_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AGUI_ENGINE_DEBUG")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"}


@pytest.mark.timeout(600)  # a wheel build and an install: tens of seconds on a loaded machine
def test_the_wheel_holds_every_package_and_its_data(wheel_venv: tuple[Path, Path]) -> None:
    _bin, purelib = wheel_venv
    installed = purelib / "agui_engine"
    for init in (ROOT / "agui_engine").rglob("__init__.py"):  # every package, the folder its import path
        relative = init.parent.relative_to(ROOT / "agui_engine")
        assert (installed / relative / "__init__.py").exists(), f"agui_engine/{relative} is not in the wheel"
    assert (installed / "py.typed").exists()
    # examples/ (a top-level package of the checkout, run from the repository root) is not installed
    assert not (purelib / "examples").exists() and not (installed / "examples").exists()
    for name in ("agui-engine.js", "inspect.html", "inspector.js", "inspector-a2ui.js", "inspector.css", "a2ui-lit.js",
                 "a2ui-lit.LICENSES.txt", "mcp-apps.js", "mcp-app-sandbox.html", "mcp-app-sandbox.js"):
        assert (installed / "static" / name).exists(), name
    assert (installed / "data" / "example-run.sse").exists()
    assert (installed / "adapters" / "fixtures" / "openai_chat" / "text.sse").exists()


@pytest.mark.timeout(600)
def test_the_installed_command_starts_demos_and_serves(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    bin_dir, purelib = wheel_venv
    env = _clean_env(bin_dir)
    command = str(bin_dir / "agui-engine")
    version = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("agui-engine "), version.stdout
    demo = subprocess.run(
        [command, "demo", "What's the weather in Tokyo?"], capture_output=True, text=True, timeout=120, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert "Tokyo" in demo.stdout
    server = subprocess.Popen(
        [command, "serve", "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        url = ""
        for line in server.stderr:
            if line.startswith("serving on "):
                url = line.split()[-1]
                break
        assert url, "serve did not start"
        for path in ("healthz", "inspect", "static/agui-engine.js"):  # the package data is served
            with urllib.request.urlopen(url + path, timeout=30) as response:
                assert response.status == 200, path
        run = subprocess.run(
            [command, "run", "--url", url, "--raw", "What's the weather in Tokyo?"],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert '"RUN_FINISHED"' in run.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)
        if server.stderr is not None:
            server.stderr.close()


def test_an_installed_engine_is_not_shadowed_by_packages_named_adapters_and_transports(
    wheel_venv: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, purelib = wheel_venv
    site = tmp_path / "site"
    site.mkdir()
    _foreign_packages(site)  # another distribution's top-level packages, importable beside the engine
    env = {**_clean_env(bin_dir), "PYTHONPATH": str(site)}
    result = subprocess.run([str(bin_dir / "python"), "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    installed = Path(result.stdout.split()[1]).parent
    assert installed.is_relative_to(purelib), installed  # the venv's copy, not the checkout
