"""``agui-engine serve --config FILE``: several agents in one gateway from a TOML file (cli/agents_config.py);
every mistake one line naming the file, the table and the key; a real ``serve`` subprocess answering each agent."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agui_engine.cli.agents_config import AGENT_KEYS, AgentConfig, parse_agents_config, read_agents_config
from agui_engine.cli.serve import add_arguments
from agui_engine.protocol.errors import UsageError

#: starting ``serve`` (imports, the embedded agents) on a shared 2-core machine
SERVE_START_SECONDS = 60

CONFIG = """
[agents.weather]
agent = "embedded"
description = "The weather demo"

[agents.booking]
a2ui = true
path = "/book"
principals = ["alice"]
"""


def test_a_config_gives_one_agent_per_table() -> None:
    assert parse_agents_config(CONFIG, "agents.toml") == [
        AgentConfig(id="weather", description="The weather demo"),
        AgentConfig(id="booking", a2ui=True, path="/book", principals=("alice",)),  # a2ui_snapshots "auto"
    ]


def test_each_key_that_a_serve_flag_also_sets_is_spelled_as_that_flag() -> None:
    """One name a setting: ``agent = ...`` is ``--agent``, ``mcp_header_env`` is ``--mcp-header-env``;
    only ``description`` (listed by /info) and ``principals`` (from the tokens file) have no flag."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", parser.format_help()))
    assert {key for key in AGENT_KEYS if "--" + key.replace("_", "-") not in flags} == {"description", "principals"}


def test_an_agent_table_fixes_or_leaves_the_a2ui_snapshot_mode() -> None:
    text = "[agents.a]\na2ui = true\na2ui_snapshots = true\n[agents.b]\na2ui = true\na2ui_snapshots = false\n"
    assert [c.a2ui_snapshots for c in parse_agents_config(text, "agents.toml")] == [True, False]


@pytest.mark.parametrize(("text", "message"), [
    ("[agents.weather\n", r"^agents.toml: not valid TOML: .*line 1"),
    ("", r"^agents.toml: no agents; add a table per agent"),
    ("port = 1\n[agents.a]\n", r"^agents.toml: unknown top-level key 'port'; put each agent in an \[agents.<id>\] table$"),
    ("[agents.a]\nspce = 'embedded'\n",
     r"^agents.toml: \[agents.a\] key 'spce': unknown; the keys are a2ui, a2ui_snapshots, agent, description, mcp, mcp_header_env, "
     r"path, principals, ui_spec$"),
    ("[agents.a]\na2ui = 'yes'\n", r"^agents.toml: \[agents.a\] key 'a2ui': must be true or false$"),
    ("[agents.a]\na2ui = true\na2ui_snapshots = 'on'\n",
     r"^agents.toml: \[agents.a\] key 'a2ui_snapshots': must be true, false or \"auto\"$"),
    ("[agents.a]\na2ui_snapshots = false\n",
     r"^agents.toml: \[agents.a\] key 'a2ui_snapshots': changes how a2ui's surfaces stream: add a2ui = true$"),
    ("[agents.a]\nmcp = 'http://x/mcp'\n", r"^agents.toml: \[agents.a\] key 'mcp': must be a list of strings$"),
    ("[agents.a]\nprincipals = [1]\n", r"^agents.toml: \[agents.a\] key 'principals': must be a list of strings$"),
    ("[agents.a]\npath = 'a'\n", r"^agents.toml: \[agents.a\] key 'path': must start with '/', got 'a'$"),
    ("[agents.a]\nagent = 'gpt-4o'\na2ui = true\n", r"^agents.toml: \[agents.a\] key 'a2ui': offered to the embedded agent"),
    ("[agents.'a b']\n", r"^agents.toml: \[agents.a b\]: the id must be letters"),
    ("[agents]\na = 1\n", r"^agents.toml: \[agents.a\]: must be a table"),
    ("[agents.a]\n[agents.b]\npath = '/a'\n", r"^agents.toml: \[agents.a\] and \[agents.b\] are both at /a"),
])
def test_a_bad_config_is_one_line_naming_file_table_and_key(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_agents_config(text, "agents.toml")


def test_an_unreadable_config_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot read the config file '.*missing.toml': No such file or directory$"):
        read_agents_config(str(tmp_path / "missing.toml"))
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match=r"^config file '.*bin.toml' line 1: not UTF-8 text$"):
        read_agents_config(str(tmp_path / "bin.toml"))


def _serve(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agui_engine", "serve", "--port", "0", *argv],
                          capture_output=True, text=True, timeout=SERVE_START_SECONDS)


@pytest.mark.parametrize(("argv", "message"), [
    (["--agent", "gpt-4o"], "--agent and --config both describe agents: put it in the agent's [agents.<id>] table"),
    (["--transport", "ws"], "--config serves several agents over HTTP: drop --transport (or write --transport sse)"),
    (["--event-log", "redis://127.0.0.1:1/0"], "--event-log is for one agent: with --config each agent keeps its runs in memory"),
])
def test_config_with_a_one_agent_flag_is_one_line(tmp_path: Path, argv: list[str], message: str) -> None:
    config = tmp_path / "agents.toml"
    config.write_text(CONFIG)
    done = _serve("--config", str(config), *argv)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"agui-engine serve: {message}", done.stderr


def test_a_bad_config_stops_serve_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "agents.toml"
    config.write_text("[agents.a]\nspce = 'embedded'\n")
    done = _serve("--config", str(config))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and f"{config}: [agents.a] key 'spce'" in done.stderr


@pytest.mark.timeout(120)  # a serve subprocess and three runs on a shared machine
def test_serve_config_answers_each_agent_at_its_path_with_its_principals(tmp_path: Path) -> None:
    config = tmp_path / "agents.toml"
    config.write_text(CONFIG)
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-alice alice\ntok-bob bob\n")
    proc = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--pace", "0", "--no-inspect",
                             "--config", str(config), "--auth-tokens-file", str(tokens)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + SERVE_START_SECONDS
        url = ""
        while time.monotonic() < deadline and not url:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "serve exited"
            if line.startswith("serving on "):
                url = line.split()[-1].rstrip("/")
        body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "book a table for two"}]}

        def post(where: str, token: str) -> httpx.Response:
            return httpx.post(url + where, json=body, timeout=60,
                              headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})

        weather = post("/weather", "tok-bob")
        assert weather.status_code == 200 and '"RUN_FINISHED"' in weather.text
        booking = post("/book", "tok-alice")
        assert booking.status_code == 200 and '"a2ui-surface"' in booking.text  # this agent applies A2UI
        assert post("/book", "tok-bob").status_code == 401  # bob may not use it
        ready = json.loads(httpx.get(url + "/readyz", timeout=30).text)
        assert set(ready["agents"]) == {"weather", "booking"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
