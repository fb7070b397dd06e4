"""The README is a contract: exactly two set-up commands (main job, tests),
.ci/run runs the test one, and its library examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    """The fenced blocks whose info string is ``language`` ("" for a bare fence)."""
    blocks: list[str] = []
    current: list[str] | None = None
    current_language = ""
    for line in README.splitlines():
        if line.startswith("```"):
            if current is None:
                current, current_language = [], line[3:].strip()
            else:
                if current_language == language:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_exactly_two_setup_commands() -> None:
    commands = _blocks("")
    assert len(commands) == 2
    assert "agui-engine demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "test-command" in ci  # .ci/run extracts the block between the test-command markers
    marked = re.search(r"<!-- test-command -->\n```\n(.*?)\n```\n<!-- /test-command -->", README, flags=re.S)
    assert marked is not None and marked.group(1) == _blocks("")[1].strip()


def test_library_examples_run(tmp_path: Path) -> None:
    for index, code in enumerate(_blocks("python")):
        script = tmp_path / f"example_{index}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout
