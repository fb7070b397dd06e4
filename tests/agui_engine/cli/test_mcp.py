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


def test_header_env_entries_add_headers_to_the_http_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "Bearer t0k")
    a, b, c = mcp_servers(["a=http://h/mcp", "b=sse:http://g/sse", "stdio:python3 -m x.y"],
                          ["a:Authorization=MCP_TEST_TOKEN", "X-Team=MCP_TEST_TOKEN"])
    assert a.headers == {"Authorization": "Bearer t0k", "X-Team": "Bearer t0k"}
    assert b.headers == {"X-Team": "Bearer t0k"} and c.headers == {}
    assert "t0k" not in repr(a)
    for bad, why in (("Authorization", "write"), ("zz:A=MCP_TEST_TOKEN", "no HTTP --mcp server with id zz"),
                     ("A=MCP_TEST_UNSET_VARIABLE", "not set")):
        with pytest.raises(UsageError, match=why):
            mcp_servers(["a=http://h/mcp"], [bad])


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


def test_serve_sends_a_header_from_the_environment_and_never_logs_it() -> None:
    token = "Bearer e2e-sekret-5f1d"
    port = _free_port()
    mcp = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "http", str(port)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serve: subprocess.Popen[str] | None = None
    logged: list[str] = []
    rest = ""
    try:
        _wait_listening(port, mcp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_E2E_TOKEN": token}
        serve = subprocess.Popen(
            [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-inspect", "--log-level", "debug",
             "--agent", "py:tests.agui_engine.cli.mcp_agent:agent", "--mcp", f"remote=http://127.0.0.1:{port}/mcp",
             "--mcp-header-env", "remote:Authorization=MCP_E2E_TOKEN"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert serve.stderr is not None
        for line in serve.stderr:
            logged.append(line)
            if line.startswith("serving on "):
                url = line.split()[-1]
                break
        body = json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}],
                           "tools": [], "context": [], "state": None, "forwardedProps": None}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                                  "Accept": "text/event-stream"})
        with urllib.request.urlopen(request, timeout=60) as response:
            stream = response.read().decode()
        results = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
        assert [e["content"] for e in results if e["type"] == "TOOL_CALL_RESULT"] == [str(len(token))]
        assert "e2e-sekret" not in stream
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGINT)
            _, rest = serve.communicate(timeout=30)
        mcp.send_signal(signal.SIGINT)
        mcp.wait(15)
    everything = "".join(logged) + rest
    assert "header_seen" in everything and "tools/call" in everything  # the debug log saw the traffic ...
    assert "e2e-sekret" not in everything  # ... and never the token


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("the MCP server did not start")
