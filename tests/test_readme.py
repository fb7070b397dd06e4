"""The README is a contract: exactly two set-up commands (main job, tests),
.ci/run runs the test one, and its library examples run as written."""

from __future__ import annotations

import re
import shlex
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


def _agent_module() -> str:
    """The "Write your own agent" module: the python block that starts with ``# my_agent.py``."""
    (code,) = [block for block in _blocks("python") if block.startswith("# my_agent.py\n")]
    return code


def test_write_your_own_agent_is_served_by_the_commands_shown(tmp_path: Path) -> None:
    """Both forms of the README's agent, served by exactly the ``serve`` commands the
    README shows (on port 0) and called with its ``run`` command: each is a complete,
    valid run carrying the agent's text."""
    import os
    import time

    from agui_engine.protocol.codec import decode_event

    (tmp_path / "my_agent.py").write_text(_agent_module(), encoding="utf-8")
    commands = [shlex.split(line) for block in _blocks("bash") for line in block.splitlines() if line.strip()]
    serves = [c for c in commands if c[:2] == ["agui-engine", "serve"] and any(a.startswith("py:my_agent:") for a in c)]
    (run,) = [c for c in commands if c[:2] == ["agui-engine", "run"]]
    assert len(serves) == 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    texts = []
    for serve in serves:
        server = subprocess.Popen([sys.executable, "-m", "agui_engine", *serve[1:], "--port", "0"], cwd=tmp_path,
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
        try:
            assert server.stderr is not None
            url, deadline = None, time.monotonic() + 30
            while url is None and time.monotonic() < deadline:  # bounded: the server prints its URL once
                line = server.stderr.readline().decode()
                if line.startswith("serving on "):
                    url = line.split()[-1]
                elif not line and server.poll() is not None:
                    break
            assert url, f"{' '.join(serve)} did not start"
            args = [a if not a.startswith("http://") else url for a in run[1:]]
            done = subprocess.run([sys.executable, "-m", "agui_engine", *args, "--raw"], capture_output=True,
                                  timeout=60, cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr.decode()
            events = [decode_event(line) for line in done.stdout.splitlines() if line.strip()]
            assert events[0].type.value == "RUN_STARTED" and events[-1].type.value == "RUN_FINISHED"
            texts.append("".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT"))
        finally:
            server.terminate()
            server.wait(timeout=15)
        # serve writes its access log by default: the run's request, with its run id
        assert server.stderr is not None
        log = server.stderr.read().decode()
        assert " POST / 200 run=" in log, log
    assert texts == ["You said: hello ", "YOU SAID: HELLO "]


# --------------------------------------------------------------------------- figures

def _prose() -> str:
    """The README without its code blocks and without the command-generated table."""
    text = re.sub(r"```.*?```", "", README, flags=re.S)
    return re.sub(r"<!-- bench-props-table -->.*?<!-- /bench-props-table -->", "", text, flags=re.S)


def test_the_props_table_is_the_commands_output() -> None:
    """Byte counts are exact (seeded corpus and chunks): the README's table is what
    ``agui-engine bench --props-table`` prints, character for character."""
    marked = re.search(r"<!-- bench-props-table -->\n(.*?)\n<!-- /bench-props-table -->", README, flags=re.S)
    assert marked is not None
    done = subprocess.run([sys.executable, "-m", "agui_engine", "bench", "--props-table"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert marked.group(1) == done.stdout.strip()


def test_no_timing_or_ratio_is_copied_into_the_prose() -> None:
    """A timing or a speed ratio goes stale with every change: the README points to the
    benchmark or spec page that measures it instead of copying the number."""
    copied = re.findall(r"[^\n]*\b\d[\d,.]*\s?(?:µs|ms|x)\b[^\n]*", _prose())
    assert copied == []


def test_the_numbers_in_the_prose_are_the_codes() -> None:
    """The limits the README names are the code's: defaults as ``serve --help`` prints them, constants."""
    from agui_engine.loops.thread import MAX_TOOL_ROUNDS
    from agui_engine.transports.data import QUERY_QUEUE_TIMEOUT_SECONDS
    from agui_engine.transports.redislog import OWNER_LOST_BOUND_SECONDS

    prose = " ".join(_prose().split())
    done = subprocess.run([sys.executable, "-m", "agui_engine", "serve", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=False)
    help_text = " ".join(done.stdout.split())
    for option in ("--max-idle-per-ip", "--max-idle-connections"):
        (readme,) = re.findall(rf"`{option} (\d+)`", prose)
        assert re.search(rf"{option} N (?:(?! --).)*?\(default: {readme}\)", help_text), (option, readme)
    assert f"`MAX_TOOL_ROUNDS` = {MAX_TOOL_ROUNDS} per turn" in prose
    assert f'`RUN_ERROR{{code: "owner_lost"}}` within {OWNER_LOST_BOUND_SECONDS:g} s' in prose
    assert f"concurrency limit full for {QUERY_QUEUE_TIMEOUT_SECONDS:g} s 503" in prose


def test_the_command_table_names_the_extra_each_command_needs() -> None:
    # issue 30: a first day's `demo --mcp` / `bench` without their extras failed or silently ran less
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(agui-engine [^`]+)` \| (.*) \|$", README, re.M)}
    needs = {"agui-engine demo --mcp": "`[mcp]`", "agui-engine bench": "`[bench]`"}
    for command, extra in needs.items():
        assert command in rows, f"no row for {command}"
        assert f"needs the {extra} extra" in rows[command], rows[command]
