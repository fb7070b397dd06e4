"""agui-engine serve's options that are not exercised end to end elsewhere."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest

from agui_engine.cli.serve import add_arguments
from tests.agui_engine.genui.test_a2ui import fold
from tests.transports.served import served


def test_the_flags_that_set_a_servers_setting_are_named_as_its_field() -> None:
    """One name a setting: ``--grace-seconds`` sets RegistryOptions.grace_seconds,
    ``--keepalive-seconds`` ConnectionOptions.keepalive_seconds, and so on."""
    from agui_engine.transports.registry_options import RegistryOptions
    from agui_engine.transports.server_options import ConnectionOptions

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    fields = {"grace_seconds", "max_runs", "max_runs_per_client", "max_buffered_bytes", "keepalive_seconds",
              "max_idle_connections", "max_idle_per_ip", "wire"}
    assert fields <= set(RegistryOptions.__struct_fields__) | set(ConnectionOptions.__struct_fields__)
    args = vars(parser.parse_args([]))
    for field in fields:
        flag = "--" + field.replace("_", "-")
        assert flag in parser.format_help() and field in args, field
        assert vars(parser.parse_args([flag, "7" if field != "wire" else "1"]))[field] in (7, 7.0, "1")


def test_access_log_is_on_by_default_and_can_be_turned_off() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).access_log is True
    assert parser.parse_args(["--no-access-log"]).access_log is False
    assert parser.parse_args(["--access-log"]).access_log is True
    assert "--no-access-log" in parser.format_help()


def test_history_is_kept_unless_no_history() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).no_history is False
    assert parser.parse_args(["--no-history"]).no_history is True
    assert "--no-history" in parser.format_help()


def test_ui_spec_is_for_the_embedded_agent_only(capsys: pytest.CaptureFixture[str]) -> None:
    from agui_engine.cli import main

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).ui_spec is False and "--ui-spec" in parser.format_help()
    assert main(["serve", "--ui-spec", "--agent", "http://127.0.0.1:9/"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ui-spec offers render_ui to the embedded agent" in err[0]


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serve_lines(*args: str, runs: int) -> str:
    """``agui-engine serve ARGS --port 0`` as a subprocess (no --debug): ``runs`` runs posted to it,
    then stopped; everything it wrote to stderr."""
    import asyncio
    import os
    import sys

    import httpx

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--no-history", *args,
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "AGUI_ENGINE_DEBUG"})
    assert proc.stderr is not None
    lines: list[bytes] = []
    url = None
    try:
        while url is None:
            line = await asyncio.wait_for(proc.stderr.readline(), 45)
            assert line, b"".join(lines).decode()
            lines.append(line)
            if line.startswith(b"serving on "):
                url = line.split()[-1].decode()
        async with httpx.AsyncClient(timeout=30) as http:
            for n in range(runs):
                body = {"threadId": "t", "runId": f"down-{n}", "messages": [], "tools": [], "context": [],
                        "state": None, "forwardedProps": None}
                answer = await http.post(url, json=body)
                assert b"RUN_ERROR" in answer.content and b"cannot reach" in answer.content
    finally:
        proc.terminate()
        lines.append(await asyncio.wait_for(proc.stderr.read(), 30))
        await asyncio.wait_for(proc.wait(), 30)
    return b"".join(lines).decode()


async def test_an_unreachable_agent_is_one_warning_at_start_and_one_line_per_failed_run() -> None:
    # issue 30: each run logged a ~60-line traceback in three chained parts (httpcore, httpx, ours)
    port = _closed_port()
    log = await _serve_lines("--agent", f"http://127.0.0.1:{port}/", runs=2)
    assert "Traceback" not in log, log
    assert f"warning: the agent at http://127.0.0.1:{port}/ cannot be reached now (Connection refused)" in log
    for n in range(2):
        failed = [line for line in log.splitlines() if f"the inner agent of run down-{n} failed" in line]
        assert len(failed) == 1 and f"cannot reach http://127.0.0.1:{port}/" in failed[0], log


async def test_a_dead_mcp_server_is_said_clearly_at_start() -> None:
    port = _closed_port()
    log = await _serve_lines("--agent", f"http://127.0.0.1:{port}/", "--mcp", f"http://127.0.0.1:{port}/mcp", runs=0)
    assert "Traceback" not in log, log
    [line] = [line for line in log.splitlines() if line.startswith("warning: MCP server")]
    assert "cannot be reached" in line and "serving without its tools" in line and "/readyz" in line


@pytest.mark.timeout(120)  # a gateway subprocess with the embedded model
def test_serve_a2ui_snapshots_sends_no_deltas(tmp_path: Path) -> None:
    body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "book a table for two"}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {}}
    streams = {}
    for flags in ((), ("--a2ui-snapshots",)):
        with served(tmp_path, "--a2ui", "--pace", "0", *flags) as url:
            text = httpx.post(url, json=body, headers={"Accept": "text/event-stream"}, timeout=60).text
        streams[flags] = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    snaps, deltas = streams[("--a2ui-snapshots",)], streams[()]
    assert "ACTIVITY_DELTA" not in [e["type"] for e in snaps] and "ACTIVITY_DELTA" in [e["type"] for e in deltas]
    assert fold(snaps)[1] == fold(deltas)[1]  # the same surfaces in the end
    first = next(e for e in snaps if e["type"] == "ACTIVITY_SNAPSHOT" and "a2ui_operations" in e["content"])
    assert len(first["content"]["a2ui_operations"][1]["updateComponents"]["components"]) == 1  # from the first one
