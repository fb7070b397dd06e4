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
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[3]
SERVER_MODULE = "tests.adapters.mcp_servers"
#: ``--mcp-connect-timeout`` for every ``serve --mcp`` here: ``serve`` prints ``serving on`` only
#: after each server answered ``initialize`` (or failed), so the tests read ``/readyz`` and the
#: children at that line. The adapter's default (10 s) is less than a Python MCP server takes to
#: start on a machine at load 11+ (importing the SDK alone took 6 s), and a server not started in
#: time is served without; this bounds only a server that hangs while alive (one that exits, or a
#: refused port, fails at once).
MCP_START = ("--mcp-connect-timeout", "300")
#: Seconds a test that starts ``serve`` and Python MCP servers (each process importing the SDK,
#: several seconds apiece on a busy machine) may take, instead of the suite's 60.
SLOW_START_TIMEOUT = 240


def test_specs_become_servers_and_one_id_twice_is_refused() -> None:
    servers = mcp_servers(["a=http://h/mcp", "stdio:python3 -m x.y"])
    assert [(s.source_id, s.transport) for s in servers] == [("a", "http"), ("x_y", "stdio")]
    with pytest.raises(UsageError, match="distinct server_id"):
        mcp_servers(["a=http://h/mcp", "a=http://g/mcp"])


def test_the_connect_timeout_flag_reaches_every_server_and_must_be_positive() -> None:
    servers = mcp_servers(["a=http://h/mcp", "stdio:python3 -m x.y"], connect_timeout=120.0)
    assert [s.connect_timeout for s in servers] == [120.0, 120.0]
    assert [s.connect_timeout for s in mcp_servers(["a=http://h/mcp"])] == [10.0]  # MCP_CONNECT_TIMEOUT_SECONDS
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--mcp-connect-timeout .*positive number of seconds"):
            mcp_servers(["a=http://h/mcp"], connect_timeout=bad)


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


@pytest.mark.timeout(SLOW_START_TIMEOUT)
def test_serve_mcp_shows_the_servers_in_readyz_and_reaps_stdio_on_shutdown() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gone = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-inspect", *MCP_START,
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
        assert by_id["local"]["connected"] is True and by_id["local"]["tools"] == 13
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


@pytest.mark.timeout(SLOW_START_TIMEOUT)
def test_serve_sends_a_header_from_the_environment_and_never_logs_it() -> None:
    token = "Bearer e2e-sekret-5f1d"
    port = free_port()
    mcp = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "http", str(port)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serve: subprocess.Popen[str] | None = None
    logged: list[str] = []
    rest = ""
    try:
        _wait_listening(port, mcp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_E2E_TOKEN": token}
        serve = subprocess.Popen(
            [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-inspect", *MCP_START, "--log-level", "debug",
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

    deadline = time.monotonic() + 120  # generous: the server imports the SDK first (seconds on a busy machine)
    while time.monotonic() < deadline:
        assert proc.poll() is None
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("the MCP server did not start")


def _serving(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``agui-engine serve --port 0 --no-inspect ARGS`` started, with its URL and the log lines up to it."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-inspect", *args],
                            cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("serving on "):
            return proc, line.split()[-1], lines
    proc.wait(10)
    raise AssertionError("".join(lines))


def _post_run(url: str, text: str = "hi") -> list[dict[str, object]]:
    """The events of one run posted to ``url`` (SSE)."""
    body = json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": text}],
                       "tools": [], "context": [], "state": None, "forwardedProps": None}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                              "Accept": "text/event-stream"})
    with urllib.request.urlopen(request, timeout=60) as response:
        stream = response.read().decode()
    return [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]


def _children(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid]


@pytest.mark.timeout(SLOW_START_TIMEOUT)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_gives_a_remote_agent_the_mcp_tools_and_reaps_stdio_on_sigterm(transport: str) -> None:
    # the command line of the issue: a remote AG-UI agent (another agui-engine serve, knowing no MCP
    # server) behind `serve --agent http://... --mcp SPEC`; its client tool `add` is run by the
    # gateway's loop on the MCP server, the follow-up run reads the result
    mcp: subprocess.Popen[bytes] | None = None
    if transport == "http":
        port = free_port()
        mcp = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "http", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_listening(port, mcp)
        spec = f"remote=http://127.0.0.1:{port}/mcp"
    else:
        spec = f"local=stdio:{sys.executable} -m {SERVER_MODULE} stdio"
    remote, remote_url, _ = _serving("--agent", "py:tests.agui_engine.cli.mcp_agent:remote")
    gateway: subprocess.Popen[str] | None = None
    try:
        gateway, url, _ = _serving("--agent", remote_url, *MCP_START, "--mcp", spec)
        children = _children(gateway.pid)
        assert bool(children) is (transport == "stdio")  # the stdio MCP server
        events = _post_run(url)
        assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["42.0"]
        text = "".join(str(e["delta"]) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text.endswith("got: 42.0")
        assert events[-1]["type"] == "RUN_FINISHED" and not any(e["type"] == "RUN_ERROR" for e in events)
        gateway.send_signal(signal.SIGTERM)
        gateway.communicate(timeout=30)
        assert gateway.returncode == 0
        assert not [c for c in children if Path(f"/proc/{c}").exists()]  # reaped: not even a zombie
    finally:
        for proc in (gateway, remote, mcp):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=30)


def test_serve_mcp_without_the_sdk_is_one_line_and_exit_2() -> None:
    # the SDK made uninstallable in this interpreter: a finder that refuses `mcp` before any other
    code = ("import sys, importlib.util as u\n"
            "class No:\n"
            "    @staticmethod\n"
            "    def find_spec(name, path=None, target=None):\n"
            "        if name == 'mcp' or name.startswith('mcp.'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, No)\n"
            "real = u.find_spec\n"
            "u.find_spec = lambda n, *a: None if n == 'mcp' else real(n, *a)\n"
            "from agui_engine.cli import main\n"
            "sys.exit(main(['serve', '--port', '0', '--no-inspect', '--mcp', 'http://127.0.0.1:9/mcp']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "agui-engine serve: --mcp needs the MCP SDK: pip install 'agui-engine[mcp]'\n"


_RECORD_MCP_IMPORTS = """
import atexit, sys
class Seen:
    names = []
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == 'mcp' or name.startswith('mcp.'):
            Seen.names.append(name)
        return None
sys.meta_path.insert(0, Seen)
atexit.register(lambda: sys.stderr.write(f"mcp imports: {Seen.names}\\n"))
import agui_engine, agui_engine.adapters, agui_engine.transports
sys.stderr.write(f"after import: {[m for m in sys.modules if m.split('.')[0] == 'mcp']}\\n")
from agui_engine.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_package_and_serve_without_mcp_never_import_the_sdk() -> None:
    # the SDK is an optional extra: importing agui_engine and serving a run without --mcp touch it not at all
    proc = subprocess.Popen([sys.executable, "-c", _RECORD_MCP_IMPORTS, "serve", "--port", "0", "--no-inspect",
                             "--pace", "0"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("serving on "):
            url = line.split()[-1]
            break
    else:  # pragma: no cover
        raise AssertionError("".join(lines))
    events = _post_run(url, "weather in Paris")
    assert events[-1]["type"] == "RUN_FINISHED"
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0
    log = "".join(lines) + rest
    assert "after import: []" in log and "mcp imports: []" in log, log


@pytest.mark.timeout(SLOW_START_TIMEOUT)
def test_serve_stops_with_a_call_in_flight_and_reaps_the_stdio_server() -> None:
    # SIGTERM while the MCP tool `slow` hangs: the run ends (its client's stream is closed, not left
    # hanging), serve exits 0 and the stdio server's process is gone
    gateway, url, _ = _serving("--agent", "py:tests.agui_engine.cli.mcp_agent:hanging", "--drain", "1",
                               *MCP_START, "--mcp", f"local=stdio:{sys.executable} -m {SERVER_MODULE} stdio")
    try:
        children = _children(gateway.pid)
        assert children
        body = json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "x"}],
                           "tools": [], "context": [], "state": None, "forwardedProps": None}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                                  "Accept": "text/event-stream"})
        with urllib.request.urlopen(request, timeout=90) as response:
            seen = []
            for raw in response:
                seen.append(raw.decode())
                if '"TOOL_CALL_END"' in seen[-1]:
                    break
            gateway.send_signal(signal.SIGTERM)
            rest = response.read().decode()  # ends when the gateway closes the stream
        _, log = gateway.communicate(timeout=60)
        assert gateway.returncode == 0, log
        assert "Traceback" not in log
        assert not [c for c in children if Path(f"/proc/{c}").exists()]
        assert rest.rstrip().endswith('"code":"shutdown"}')  # the run's terminal event: RUN_ERROR
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.communicate(timeout=30)
