"""``agui-engine demo --inspect`` through the real subprocess and a real headless Chromium: the
demo's gateway stays up after the run, the printed URL makes the inspector show exactly that run
(every event, the card with its data, no finding), and Ctrl-C ends the demo with one line."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import subprocess
from typing import Any

import httpx
import pytest

from agui_engine.demo.weather_model import DEMO_WEATHER
from tests.transports.test_inspector import DEADLINE_MS, browser  # noqa: F401 - the Chromium fixture

from .test_first_five_minutes import agui_engine_command

#: Seconds the demo may take to print its URL, and to stop after SIGINT (a run takes 1-3 s here).
DEADLINE = 60


async def _start_demo(*args: str) -> tuple[asyncio.subprocess.Process, str, int]:
    """``agui-engine demo --inspect ARGS``; returns the process, the inspector URL, the event count."""
    proc = await asyncio.create_subprocess_exec(agui_engine_command(), "demo", "--inspect", "--pace", "0", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    counts: list[int] = []
    async with asyncio.timeout(DEADLINE):
        while True:
            line = (await proc.stdout.readline()).decode()
            assert line, "the demo ended without printing the inspector URL"
            if found := re.search(r"\((\d+) AG-UI events, verified\)", line):
                counts.append(int(found.group(1)))
            if line.startswith("inspector: "):
                return proc, line.split()[-1], sum(counts)


async def _stop(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.stderr is not None
    async with asyncio.timeout(DEADLINE):
        err = (await proc.stderr.read()).decode()
        return await proc.wait(), err


async def test_demo_inspect_opens_the_run_in_the_inspector(browser: Any) -> None:  # noqa: F811
    proc, url, count = await _start_demo("What's the weather in Tokyo?")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/inspect#run=demo-run-0&token=[\w-]+", url), url
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(url)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        assert await page.inner_text("#status") == "attached demo-run-0"
        # every event the demo printed, in order, ids 1..n of that run, none flagged
        await page.wait_for_function(
            f"document.querySelectorAll('#timeline tbody tr').length === {count}", timeout=DEADLINE_MS)
        rows = await page.evaluate("window.__inspector.rows.map(r => [r.seq, r.runId, r.type])")
        assert [seq for seq, _, _ in rows] == list(range(1, count + 1))
        assert {run for _, run, _ in rows} == {"demo-run-0"} and rows[-1][2] == "RUN_FINISHED"
        assert await page.inner_text("#finding-count") == "0"
        # the card, drawn with the data its query fetched from the demo's gateway
        await page.wait_for_selector(".card[data-component-name='WeatherCard'] .data[data-status='ok']",
                                     timeout=DEADLINE_MS)
        temperature = await page.inner_text(".card[data-component-name='WeatherCard'] [data-field='temperature']")
        assert temperature == f"{DEMO_WEATHER['tokyo']['temperature']} °C"
        assert await page.input_value("#token") == url.rpartition("token=")[2]
        assert errors == []
        # the token is what opens the run: without it the gateway refuses
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.get(url.partition("/inspect")[0] + "/runs/demo-run-0")).status_code == 401
    finally:
        status, err = await _stop(proc)
    assert status == 0
    assert err.splitlines() == ["agui-engine demo: stopped; the gateway and the inspector are closed"], err


def test_on_a_terminal_the_demo_stays_up_for_the_inspector() -> None:
    """Without --inspect, stdin and stdout a terminal (a real pty): the default is to stay up."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([agui_engine_command(), "demo", "--pace", "0", "--plain", "Hello"],
                            stdin=terminal, stdout=terminal, stderr=subprocess.PIPE)
    os.close(terminal)
    seen = b""
    try:
        while b"Ctrl-C stops it" not in seen:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the demo ended and its terminal closed
                break
            if not chunk:
                break
            seen += chunk
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        status = proc.wait(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert status == 0, err
    assert b"inspector: http://127.0.0.1:" in seen and b"#run=demo-run-0&token=" in seen
    assert "stopped" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--via", "direct", "--transport", "ws"), "--transport ws needs the gateway, which --via direct leaves out"),
        (("--inspect", "--transport", "ws"), "--inspect needs the SSE gateway"),
        (("--inspect", "--no-inspect"), "contradict"),
    ],
)
def test_contradicting_flags_are_one_line(args: tuple[str, ...], expected: str) -> None:
    done = subprocess.run([agui_engine_command(), "demo", *args, "Hello"], capture_output=True, text=True,
                          timeout=DEADLINE, check=False)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_demo_without_a_terminal_still_ends() -> None:
    """Not a terminal, no --inspect: the demo runs and exits (the README's command in CI)."""
    done = subprocess.run([agui_engine_command(), "demo", "--pace", "0", "Hello"], capture_output=True, text=True,
                          timeout=DEADLINE, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "inspector:" not in done.stdout, done.stderr


def test_ctrl_c_s_line_starts_on_a_new_line_of_the_terminal() -> None:
    """Issue 30: on a terminal Ctrl-C echoes ``^C`` where the cursor is, often mid-line; the demo's
    line then came glued to it. Stdout and stderr both on a real pty: the line has its own line."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([agui_engine_command(), "demo", "--pace", "0", "--plain", "Hello"],
                            stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    seen = b""
    try:
        while b"Ctrl-C stops it" not in seen:
            chunk = os.read(controller, 4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
        while not seen.endswith(b"\n"):  # the whole line
            seen += os.read(controller, 4096)
        proc.send_signal(signal.SIGINT)  # what the terminal sends on Ctrl-C (after echoing ^C)
        status = proc.wait(timeout=DEADLINE)
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the demo ended and its terminal closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    assert status == 0
    # a line break of its own before the line, whatever the terminal echoed at the cursor
    assert b"Ctrl-C stops it\r\n\r\nagui-engine demo: stopped; the gateway and the inspector are closed\r\n" in seen, seen
