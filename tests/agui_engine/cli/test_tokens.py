"""``agui-engine serve --auth-tokens-file``: several principals from the command line,
through the real ``serve`` subprocess (runs bound to their principal, SIGHUP adding and
removing tokens live without dropping a run), and the file's mistakes as one line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import msgspec
import pytest

from agui_engine.cli import main
from agui_engine.cli.tokens import MAX_AUTH_TOKENS, parse_tokens

from ...transports.scripted import make_input

ROOT = Path(__file__).resolve().parents[3]
ALICE, BOB, CAROL = "tok-alice-0123456789", "tok-bob-0123456789", "tok-carol-0123456789"


def test_both_forms_parse_to_token_and_principal() -> None:
    lines = f"# who may connect\n\n{ALICE} alice\n{BOB}\tBob Smith  \n tok-2 alice\n"
    assert parse_tokens(lines) == {ALICE: "alice", BOB: "Bob Smith", "tok-2": "alice"}
    assert parse_tokens(json.dumps({ALICE: "alice", BOB: "bob"})) == {ALICE: "alice", BOB: "bob"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"{ALICE} alice\n{BOB}\n", "line 2: no principal name after the token"),
        (f"{ALICE} alice\n\n{ALICE} eve\n", "line 3: this token is listed twice (first on line 1)"),
        ("# nobody\n\n", "no tokens"),
        ("tok-\x7f x\n", "line 1: a token is printable ASCII"),
        ('{"a": "alice",\n "b": }', "line 2: not JSON"),
        ('{"a": ""}', "no principal name"),
        ('{"a": 5}', "no principal name"),
        ("".join(f"t{i} p\n" for i in range(MAX_AUTH_TOKENS + 1)), f"line {MAX_AUTH_TOKENS + 1}: more than"),
    ],
)
def test_a_bad_tokens_file_is_one_line_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    assert main(["serve", "--port", "0", "--auth-tokens-file", str(path), "--agent", "py:tests.transports.scripted:agent"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and str(path) in err[0], err


def test_an_unreadable_file_and_a_second_token_source_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["serve", "--port", "0", "--auth-tokens-file", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read the tokens file" in err[0] and "No such file" in err[0], err
    (tmp_path / "bin").write_bytes(f"{ALICE} alice\n\xff\xfe\n".encode("latin-1"))
    assert main(["serve", "--port", "0", "--auth-tokens-file", str(tmp_path / "bin")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2: not UTF-8" in err[0], err
    (tmp_path / "ok").write_text(f"{ALICE} alice\n")
    monkeypatch.setenv("AGUI_AUTH_TOKEN", "shared")
    assert main(["serve", "--port", "0", "--auth-tokens-file", str(tmp_path / "ok")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use one" in err[0], err
    assert main(["serve", "--transport", "stdio", "--auth-tokens-file", str(tmp_path / "ok")]) == 2
    assert "stdio has no bearer auth" in capsys.readouterr().err


@asynccontextmanager
async def serve(tokens: Path, *extra: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, list[str]]]:
    """The real ``agui-engine serve`` with a tokens file: the process, its URL, its stderr lines."""
    env = {k: v for k, v in os.environ.items() if k != "AGUI_AUTH_TOKEN"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--auth-tokens-file", str(tokens),
        "--agent", "py:tests.transports.scripted:by_message", "--log-level", "info", "--no-access-log", *extra,
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, env=env, cwd=ROOT,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    url = None
    while url is None:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "".join(lines)
        lines.append(line)
        if line.startswith("serving on "):
            url = line.split()[-1]

    async def pump() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            lines.append(line.decode())

    task = asyncio.create_task(pump())
    try:
        yield proc, url, lines
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 15)
        await asyncio.wait_for(task, 15)


async def _logged(lines: list[str], text: str) -> str:
    for _ in range(1000):
        found = [line for line in lines if text in line]
        if found:
            return found[-1]
        await asyncio.sleep(0.01)
    raise AssertionError(f"{text!r} never logged: {lines}")


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


async def test_serve_binds_runs_to_principals_and_sighup_swaps_tokens_live(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALICE} alice\n{BOB} bob\n")
    async with serve(tokens) as (proc, url, lines), httpx.AsyncClient(timeout=30) as c:
        body = msgspec.json.encode(make_input("alices", "hang"))  # 3 deltas, then runs until cancelled
        async with c.stream("POST", url, content=body, headers={**_auth(ALICE), "X-AGUI-Resumable": "1"}) as live:
            assert live.status_code == 200
            chunks = live.aiter_raw()
            got = b""
            while got.count(b"TEXT_MESSAGE_CONTENT") < 1:
                got += await chunks.__anext__()
            # bob is another principal: alice's run does not exist for him (no run key)
            r = await c.get(url + "runs/alices", headers={**_auth(BOB), "Last-Event-ID": "alices:1"})
            assert r.status_code == 404, r.text
            assert (await c.delete(url + "runs/alices", headers=_auth(BOB))).status_code == 404
            assert (await c.post(url, content=msgspec.json.encode(make_input("c0")), headers=_auth(CAROL))).status_code == 401

            tokens.write_text(f"# bob left, carol joined\n{ALICE} alice\n{CAROL} carol\n")
            proc.send_signal(signal.SIGHUP)
            line = await _logged(lines, "SIGHUP: reloaded")
            assert "2 tokens" in line and "1 added, 1 removed" in line
            r = await c.post(url, content=msgspec.json.encode(make_input("c1")), headers=_auth(CAROL))
            assert r.status_code == 200 and b"RUN_FINISHED" in r.content
            r = await c.post(url, content=msgspec.json.encode(make_input("b1")), headers=_auth(BOB))
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"

            # a file that does not parse: one line, the tokens in use stay
            tokens.write_text(f"{ALICE} alice\n{CAROL}\n")
            proc.send_signal(signal.SIGHUP)
            line = await _logged(lines, "SIGHUP: tokens file")
            assert "line 2: no principal name" in line and "still using the 2 tokens" in line
            r = await c.post(url, content=msgspec.json.encode(make_input("c2")), headers=_auth(CAROL))
            assert r.status_code == 200

            # alice's run went on through both reloads: her stream is open, and she -- the
            # principal who started it, without its run key -- can cancel it
            r = await c.delete(url + "runs/alices", headers=_auth(ALICE))
            assert r.status_code == 204, r.text
            while b"RUN_ERROR" not in got:
                got += await chunks.__anext__()
            assert b'"cancelled"' in got
    log = "".join(lines)
    assert "Traceback" not in log and "SIGHUP: reloaded" in log
    assert all(t not in log for t in (ALICE, BOB, CAROL))  # tokens never reach the log
