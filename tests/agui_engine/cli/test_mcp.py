"""``--mcp SPEC`` (cli/mcp.py): the specs, the agents that take the servers, and ``agui-engine serve --mcp``
against the tests' own MCP server (stdio, a real subprocess): ``/readyz`` shows each connection, an
unreachable server is a log line and not a failed start, and the stdio process is reaped at shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from agui_engine.adapters.mcp import MCPServer
from agui_engine.cli.mcp import mcp_servers, with_mcp
from agui_engine.demo.scripted import ScriptedModel
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]
SERVER_MODULE = "tests.adapters.mcp_servers"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_specs_become_servers_and_one_id_twice_is_refused() -> None:
    servers = mcp_servers(["a=http://h/mcp", "stdio:python3 -m x.y"])
    assert [(s.source_id, s.transport) for s in servers] == [("a", "http"), ("x_y", "stdio")]
    with pytest.raises(UsageError, match="distinct server_id"):
        mcp_servers(["a=http://h/mcp", "a=http://g/mcp"])


def test_with_mcp_adds_to_an_llm_agent_or_a_loop_and_wraps_anything_else() -> None:
    server = MCPServer(url="http://h/mcp", server_id="s")
    agent = LLMAgent(ScriptedModel(["x"]))
    assert with_mcp(agent, [server]) is agent and agent.tool_sources == [server]
    loop = AgentLoop(LLMAgent(ScriptedModel(["x"])))
    assert with_mcp(loop, [server]) is loop and loop.tool_sources == [server]

    class Other:
        async def run(self, input: object) -> object:  # pragma: no cover - never run
            raise NotImplementedError

    wrapped = with_mcp(Other(), [server])  # type: ignore[arg-type]
    assert isinstance(wrapped, AgentLoop) and wrapped.tool_sources == [server]
    with pytest.raises(UsageError, match="distinct server_id"):
        with_mcp(agent, [server])


def test_serve_mcp_shows_the_servers_in_readyz_and_reaps_stdio_on_shutdown() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gone = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-inspect",
         "--mcp", f"local=stdio:{sys.executable} -m {SERVER_MODULE} stdio",
         "--mcp", f"gone=http://127.0.0.1:{gone}/mcp"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("serving on "):
                url = line.split()[-1]
                break
        else:  # pragma: no cover
            raise AssertionError("".join(lines))
        children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == proc.pid]
        with urllib.request.urlopen(url.rstrip("/") + "/readyz") as response:
            doc = json.load(response)
        assert doc["ready"] is True
        by_id = {s["serverId"]: s for s in doc["mcp"]}
        assert by_id["local"]["connected"] is True and by_id["local"]["tools"] == 12
        assert by_id["gone"]["connected"] is False and "ConnectError" in by_id["gone"]["error"]
        assert any("unavailable" in line for line in lines)
        assert children
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0
    assert not [c for c in children if Path(f"/proc/{c}").exists()]


def _ppid(proc_dir: Path) -> int:
    try:
        stat = (proc_dir / "stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_serve_rejects_a_bad_mcp_spec_in_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "agui_engine", "serve", "--mcp", "nope"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "--mcp 'nope'" in out.stderr
