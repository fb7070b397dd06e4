"""``agui-engine demo --mcp`` as a subprocess: the embedded model calls the demo MCP server's
``roll_dice`` (a stdio subprocess of the demo), the terminal shows the result and the app, the
NDJSON carries the ``mcp-apps`` activity, the server's process is reaped when the demo ends; with
``--inspect`` the inspector (a real headless Chromium) draws the dice app, whose button rolls
again through the gateway's proxy."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_engine.adapters import mcp_connections
from agui_engine.adapters.mcp import MCP_CONNECT_TIMEOUT_SECONDS
from agui_engine.cli import demo, main
from agui_engine.cli.demo import DEMO_MCP_START_SECONDS, MCP_SCENARIO, demo_mcp_server
from agui_engine.cli.demo_mcp_server import DICE_APP_URI, roll
from agui_engine.genui.mcp_apps import MCP_APP_MIME_TYPE
from tests.transports.test_inspector import DEADLINE_MS, browser  # noqa: F401 - the Chromium fixture

from .test_demo_inspect import _start_demo, _stop
from .test_first_five_minutes import agui_engine_command

DEADLINE = 120


def _run_demo(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the demo in a session of its own (its id is the demo's pid, inherited by the server it starts):
    other tests and other users run demos on this machine at the same time, and their servers are not ours."""
    proc = subprocess.Popen([agui_engine_command(), "demo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, err = proc.communicate(timeout=DEADLINE)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def _server_pids(session: int) -> set[int]:
    """Processes now running the demo MCP server module in the demo's session ``session``."""
    out = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ...
            if b"agui_engine.cli.demo_mcp_server" in cmdline and int(fields[3]) == session:
                out.add(int(proc.name))
    return out


def test_roll_stays_in_range() -> None:
    assert {roll(6)["roll"] for _ in range(200)} <= set(range(1, 7))
    assert roll(1)["sides"] == 6 and roll(5000)["sides"] == 6 and roll(20)["sides"] == 20


def test_the_demo_server_serves_its_tool_and_app_over_stdio() -> None:
    async def go() -> tuple[Any, Any, Any]:
        server = demo_mcp_server()
        try:
            tools = await server.list_tools()
            result = await server.call_tool("roll_dice", {"sides": 20})
            resource = await server.request("resources/read", {"uri": DICE_APP_URI})
            return tools, result, resource
        finally:
            await mcp_connections().aclose()

    tools, result, resource = asyncio.run(go())
    assert [t.name for t in tools] == ["roll_dice"] and tools[0].meta == {"ui": {"resourceUri": DICE_APP_URI}}
    assert 1 <= result.raw["structuredContent"]["roll"] <= 20
    assert re.fullmatch(r"rolled \d+ on a 20-sided die", result.text)
    content = resource["contents"][0]
    assert content["mimeType"] == MCP_APP_MIME_TYPE and "ui/initialize" in content["text"]


def test_demo_mcp_shows_the_result_and_the_app_and_reaps_the_server() -> None:
    done, tag = _run_demo("--mcp", "--no-inspect", "--plain", "--pace", "0")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"you › {MCP_SCENARIO}" in lines
    assert any(re.fullmatch(r"\s+⚙ roll_dice\(sides=20\).*", line) for line in lines), done.stdout
    assert any(re.fullmatch(r"\s+↳ roll_dice → rolled \d+ on a 20-sided die", line) for line in lines), done.stdout
    assert f"    ▣ app {DICE_APP_URI} (mcp-apps: the inspector shows it)" in lines
    # the app is announced when the call starts, and its input shown as the model types it
    opened = lines.index(f"    ▣ app {DICE_APP_URI} opens: its input streams to it as the model types")
    partial = [line for line in lines[opened:] if line.startswith("    ▣ app input so far: ")]
    assert partial and partial[-1] == '    ▣ app input so far: {"sides": 20}', done.stdout
    assert opened < lines.index(f"    ▣ app {DICE_APP_URI} (mcp-apps: the inspector shows it)")
    assert _server_pids(tag) == set()  # the stdio server went with the demo

    ndjson, tag = _run_demo("--mcp", "--format", "ndjson", "--pace", "0")
    assert ndjson.returncode == 0, ndjson.stderr
    events = [json.loads(line) for line in ndjson.stdout.splitlines()]
    activity = next(e for e in events if e["type"] == "ACTIVITY_SNAPSHOT")
    assert activity["activityType"] == "mcp-apps" and activity["replace"] is True
    content = activity["content"]
    assert content["resourceUri"] == DICE_APP_URI and content["serverId"] == "demo"
    assert content["toolInput"] == {"sides": 20} and content["serverHash"] == demo_mcp_server().server_hash
    assert _server_pids(tag) == set()


def test_demo_mcp_without_the_sdk_says_what_to_install() -> None:
    # the SDK hidden from this interpreter (a module of that name that cannot be found)
    code = ("import sys, importlib.util as u; real = u.find_spec; "
            "u.find_spec = lambda n, *a: None if n == 'mcp' else real(n, *a); "
            "from agui_engine.cli import main; sys.exit(main(['demo', '--mcp', '--no-inspect']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--mcp needs the MCP SDK: pip install 'agui-engine[mcp]'")


async def test_demo_mcp_inspect_draws_the_dice_app(browser: Any) -> None:  # noqa: F811
    proc, url, _ = await _start_demo("--mcp", "--plain")
    try:
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(url)
        await page.wait_for_selector(".mcp-app iframe", timeout=DEADLINE_MS)
        frame = page.frame_locator(".mcp-app iframe").frame_locator("iframe")  # the app inside the sandbox proxy
        detail = frame.locator("#detail")
        await detail.filter(has_text="sided die").wait_for(timeout=DEADLINE_MS)
        assert re.fullmatch(r"rolled \d+ on a 20-sided die", await detail.text_content() or "")
        await frame.locator("#again").click()
        await page.wait_for_selector(".mcp-app .app-requests li[data-method='tools/call'][data-status='ok']",
                                     timeout=DEADLINE_MS)
        assert re.fullmatch(r"rolled \d+ on a 20-sided die", await detail.text_content() or "")
        assert errors == []
    finally:
        status, _ = await _stop(proc)
    assert status == 0


def test_demo_mcp_piped_into_head_ends_quietly_and_reaps_the_server() -> None:
    # `agui-engine demo --mcp --format ndjson | head -1`: the reader goes away after one line
    proc = subprocess.Popen([agui_engine_command(), "demo", "--mcp", "--format", "ndjson", "--pace", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    tag = proc.pid
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(DEADLINE)
    assert json.loads(first)["type"] == "RUN_STARTED"
    assert proc.returncode == 141 and "Traceback" not in err and "Error" not in err, err
    assert _server_pids(tag) == set()


def _demo_server_started_by(code: str) -> Any:
    """The demo's MCP server, started by ``python -c code`` (which runs the real server module)."""
    from agui_engine.adapters.mcp import MCPServer

    return MCPServer(transport="stdio", command=sys.executable, args=("-c", code), server_id="demo",
                     connect_timeout=DEMO_MCP_START_SECONDS)


_RUN_THE_SERVER = "import runpy; runpy.run_module('agui_engine.cli.demo_mcp_server', run_name='__main__')"


def test_demo_mcp_waits_for_its_server_however_slow_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a server that takes longer to start than the adapter's usual connect budget (a busy machine
    # took 6 s to import the SDK): the demo waits for its answer, and the model gets its tool
    assert MCP_CONNECT_TIMEOUT_SECONDS < 11
    monkeypatch.setattr(demo, "demo_mcp_server",
                        lambda: _demo_server_started_by("import time; time.sleep(11); " + _RUN_THE_SERVER))
    status = main(["demo", "--mcp", "--no-inspect", "--plain", "--pace", "0"])
    out = capsys.readouterr().out
    assert status == 0
    assert any(re.fullmatch(r"\s+↳ roll_dice → rolled \d+ on a 20-sided die", line) for line in out.splitlines()), out


def test_demo_mcp_exits_2_with_one_line_when_its_server_cannot_start(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # the server's process cannot use the SDK (as with an SDK line it does not support): it says so
    # in one line and exits; the demo stops at once with one line, exit 2, and runs nothing
    broken = "import sys; sys.modules['mcp.types'] = None; " + _RUN_THE_SERVER
    monkeypatch.setattr(demo, "demo_mcp_server", lambda: _demo_server_started_by(broken))
    status = main(["demo", "--mcp", "--no-inspect", "--plain", "--pace", "0"])
    out, err = capfd.readouterr()
    assert status == 2
    assert "Traceback" not in err and "you ›" not in out
    assert err.splitlines()[-1] == ("agui-engine demo: --mcp: the demo's MCP server did not start: MCP server demo "
                                    "is unavailable: its process exited with status 2 before answering initialize")
    assert "the MCP SDK cannot be used" in err
