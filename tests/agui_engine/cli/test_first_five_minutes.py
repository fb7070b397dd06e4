"""The first five minutes: every everyday mistake, tried through a real
``agui-engine`` subprocess, prints ONE line saying what to do (exit status 2 for
a usage error) and no traceback; ``--debug`` / ``AGUI_ENGINE_DEBUG=1`` show one;
output piped into a reader that stops early ends quietly; ``--help`` documents
every option with its default; ``--version``.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agui_engine.cli import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[3]
#: Seconds any one command may take here (they all fail or finish in about one).
COMMAND_TIMEOUT = 60


def agui_engine_command() -> str:
    """The installed console script: beside this Python (a venv) or on PATH."""
    found = shutil.which("agui-engine", path=os.path.dirname(sys.executable)) or shutil.which("agui-engine")
    assert found, "the agui-engine console script is not installed (pip install -e .)"
    return found


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "AGUI_ENGINE_DEBUG"}
    return subprocess.run(
        [agui_engine_command(), *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        cwd=cwd,
        env={**environment, **(env or {})},
    )


def one_line(done: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The single stderr line of a failed command (asserts there is exactly one and no traceback)."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)
    assert lines[0].startswith("agui-engine"), lines[0]
    return lines[0]


@contextmanager
def port_in_use() -> Iterator[int]:
    """A port another program is listening on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


# --------------------------------------------------------------------------- serve


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_port_already_in_use(transport: str) -> None:
    with port_in_use() as port:
        line = one_line(cli("serve", "--transport", transport, "--port", str(port)))
    assert f"port {port} on 127.0.0.1 is already in use" in line and "--port" in line


@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_host_that_is_not_on_this_machine(transport: str) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address.
    line = one_line(cli("serve", "--transport", transport, "--host", "192.0.2.1", "--port", "0"))
    assert "cannot listen on 192.0.2.1" in line and "--host 127.0.0.1" in line


def test_host_name_that_does_not_resolve() -> None:
    line = one_line(cli("serve", "--host", "no-such-host.invalid", "--port", "0"))
    assert "cannot listen on no-such-host.invalid" in line and "--host 127.0.0.1" in line


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_port_out_of_range(port: str) -> None:
    line = one_line(cli("serve", "--port", port))
    assert "--port" in line and "0-65535" in line


def test_unknown_log_level() -> None:
    line = one_line(cli("serve", "--log-level", "verbose"))
    assert "--log-level" in line and "'verbose'" in line and "info" in line


def test_log_level_in_any_case_is_accepted() -> None:
    # it fails later, on the port, so the level itself was taken
    with port_in_use() as port:
        line = one_line(cli("serve", "--log-level", "WARNING", "--port", str(port)))
    assert "already in use" in line


# --------------------------------------------------------------------------- py: specs


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "mine.py").write_text(
        "import json\n"
        "CONFIG = {'a': 1}\n"
        "def helper(x, y):\n"
        "    return x + y\n"
        "class NotAnAgent:\n"
        "    pass\n",
        encoding="utf-8",
    )
    (tmp_path / "broken.py").write_text("import no_such_dependency_xyz\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("py:mine:CONFIG", "mine.CONFIG is a dict, not an agent; give an object with run(input)"),
        ("py:mine:helper", "mine.helper is a function taking arguments, not an agent"),
        ("py:mine:NotAnAgent", "not an agent"),
        ("py:mine:json", "mine.json is a module, not an agent"),
        ("py:no_such_module_xyz:agent", "no module named 'no_such_module_xyz'"),
        ("py:mine:nothing", "module mine has no 'nothing' (it has: CONFIG, NotAnAgent, helper, json)"),
        ("py:broken:agent", "importing broken failed: No module named 'no_such_dependency_xyz'"),
        ("py:mine", "write py:<module>:<name>"),
    ],
)
def test_py_spec_mistakes(user_dir: Path, spec: str, expected: str) -> None:
    line = one_line(cli("serve", "--agent", spec, "--port", "0", cwd=user_dir), 2)
    assert expected in line, line


@pytest.mark.parametrize(("spec", "variable"), [("openai:gpt-4o", "OPENAI_API_KEY"),
                                               ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")])
def test_model_without_an_api_key_says_what_to_set(spec: str, variable: str) -> None:
    keys = {name: "" for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    line = one_line(cli("serve", "--agent", spec, "--port", "0", env=keys))
    assert f"set {variable} in the environment" in line and "api_key=" not in line, line


def test_debug_shows_the_traceback(user_dir: Path) -> None:
    for done in (
        cli("serve", "--debug", "--agent", "py:no_such_module_xyz:agent", cwd=user_dir),
        cli("serve", "--agent", "py:no_such_module_xyz:agent", env={"AGUI_ENGINE_DEBUG": "1"}, cwd=user_dir),
    ):
        assert done.returncode != 0 and "Traceback (most recent call last)" in done.stderr


# --------------------------------------------------------------------------- run


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "localhost:8000/agui", "example.com"])
def test_run_url_without_a_scheme(url: str) -> None:
    line = one_line(cli("run", "--url", url, "hi"))
    assert "http://" in line and "ws://" in line and url in line


@pytest.mark.parametrize(
    ("url", "expected"),
    [("ws://", "has no host"), ("http:///agui", "has no host"), ("http://127.0.0.1:99999/", "is not a URL")],
)
def test_run_url_that_is_not_one(url: str, expected: str) -> None:
    line = one_line(cli("run", "--url", url, "hi"))
    assert expected in line and "://127.0.0.1:8000/" in line


@contextmanager
def serving(*args: str) -> Iterator[str]:
    """``agui-engine serve ARGS --port 0`` as a subprocess; yields its URL."""
    server = subprocess.Popen(
        [agui_engine_command(), "serve", "--port", "0", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        deadline = time.monotonic() + COMMAND_TIMEOUT
        url = None
        while url is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            if line.startswith("serving on "):
                url = line.split()[-1]
        assert url, "the server did not start"
        yield url
    finally:
        server.terminate()
        server.wait(timeout=COMMAND_TIMEOUT)
        if server.stderr is not None:
            server.stderr.close()


def test_run_http_url_against_a_websocket_server_says_so() -> None:
    with serving("--transport", "ws") as ws_url:
        http_url = "http://" + ws_url.removeprefix("ws://")
        line = one_line(cli("run", "--url", http_url, "hi"))
    assert "WebSocket" in line and ws_url.rstrip("/") in line


def test_run_ws_url_against_an_sse_server_says_so() -> None:
    with serving("--transport", "sse") as http_url:
        ws_url = "ws://" + http_url.removeprefix("http://")
        line = one_line(cli("run", "--url", ws_url, "hi"))
    assert "SSE" in line and http_url.rstrip("/") in line


def test_run_against_nothing_listening() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = one_line(cli("run", "--url", f"http://127.0.0.1:{port}/", "hi"))
    assert f"127.0.0.1:{port}" in line and "agui-engine serve" in line


# --------------------------------------------------------------------------- piped into head


def _small_pipe() -> tuple[int, int]:
    """A pipe holding one page, so the writer meets the closed end early."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    return read_end, write_end


def head(*args: str) -> subprocess.CompletedProcess[str]:
    """``agui-engine ARGS | head -c 100``: the reader takes 100 bytes and goes away."""
    read_end, write_end = _small_pipe()
    proc = subprocess.Popen([agui_engine_command(), *args], stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    os.close(write_end)
    try:
        first = os.read(read_end, 100)
        assert first, "no output at all"
    finally:
        os.close(read_end)
    _, err = proc.communicate(timeout=COMMAND_TIMEOUT)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


@pytest.mark.parametrize(
    "args",
    [
        ("demo",),
        ("demo", "--format", "ndjson"),
        ("demo", "--via", "direct", "--model-path", "direct"),
        ("validate", "--example", "weather"),
        ("--help",),
        ("serve", "--help"),
    ],
)
def test_piped_into_head_ends_quietly(args: tuple[str, ...]) -> None:
    done = head(*args)
    assert done.stderr == "", done.stderr
    assert done.returncode in (0, 141)


@pytest.mark.parametrize("raw", [True, False])
def test_run_piped_into_head_ends_quietly(raw: bool) -> None:
    with serving("--pace", "0.002") as url:
        done = head("run", "--url", url, *(["--raw"] if raw else []), "Show me the Q3 dashboard")
    assert done.stderr == "", done.stderr
    assert done.returncode in (0, 141)


def test_stdio_server_whose_reader_goes_away_cancels_and_ends_quietly() -> None:
    """``serve --transport stdio | head``: stdin stays open, stdout's reader leaves
    mid-run; the server cancels the run and exits at once, with no traceback."""
    read_end, write_end = _small_pipe()
    proc = subprocess.Popen(
        [agui_engine_command(), "serve", "--transport", "stdio", "--pace", "0.005"],
        stdin=subprocess.PIPE, stdout=write_end, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    os.close(write_end)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b'{"threadId": "t", "runId": "r1", "messages": '
                     b'[{"id": "m", "role": "user", "content": "Show me the Q3 dashboard"}]}\n')
    proc.stdin.flush()
    try:
        assert os.read(read_end, 100)
    finally:
        os.close(read_end)
    try:
        status = proc.wait(timeout=COMMAND_TIMEOUT)  # stdin is still open: the closed stdout ends it
        err = proc.stderr.read().decode()
    finally:
        proc.stdin.close()
        proc.stderr.close()
    assert status == 0 and "Traceback" not in err and "Fatal" not in err, err
    assert "stdout was closed: cancelling 1 run(s)" in err


# --------------------------------------------------------------------------- help and version


def test_version() -> None:
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == "agui-engine 0.1.0"


def test_top_level_help_lists_every_command() -> None:
    done = cli("--help")
    assert done.returncode == 0
    for name in SUBCOMMANDS:
        assert f"    {name} " in done.stdout


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_of_every_command_has_help_with_its_default(command: str) -> None:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    formatter = sub._get_formatter()
    missing = []
    for action in sub._actions:
        if isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction)) or action.required:
            documented = bool(action.help)  # a flag is off unless given; a required value has no default
        else:
            # what --help prints for it: the help text, with the formatter's "(default: ...)"
            documented = bool(action.help) and "default" in formatter._expand_help(action)
        if not documented:
            missing.append("/".join(action.option_strings) or action.dest)
    assert missing == [], f"agui-engine {command}: options without help or default: {missing}"
    done = cli(command, "--help")
    assert done.returncode == 0 and "Traceback" not in done.stderr
