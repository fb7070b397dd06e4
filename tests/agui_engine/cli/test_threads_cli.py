"""``agui-engine threads`` (list, export, prune) over a real SQLite store written by the store's
own API (spec/transports.md §4.4, "Durable threads")."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from agui_engine.cli import main
from agui_engine.transports.open_threads import open_thread_store

from ...transports.test_thread_store import record


def _write(url: str) -> None:
    async def go() -> None:
        store = await open_thread_store(url)
        now = time.time()
        await store.keep_run("t1", record("t1", "r1", "first chat"), now - 10)
        await store.keep_run("t1", record("t1", "r2", "more", parent="r1"), now - 5)
        await store.keep_run("t2", record("t2", "r3", "bob asks", principal="bob"), now)
        # kept last, with a clock 100 days behind: past the retention, neither listed nor exported
        await store.keep_run("old", record("old", "r0", "a forgotten chat"), now - 100 * 86400)
        await store.aclose()

    asyncio.run(go())


def test_list_export_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    _write(url)
    assert main(["threads", "list", "--store", url]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(cols[0], cols[1], cols[3]) for cols in lines] == [("t2", "1 run", "bob asks"), ("t1", "2 runs", "first chat")]
    assert main(["threads", "list", "--store", url, "--principal", "alice", "--limit", "1"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["t1"]
    assert main(["threads", "export", "--store", url, "--principal", "alice"]) == 0
    (doc,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert doc["threadId"] == "t1" and [r["runId"] for r in doc["runs"]] == ["r1", "r2"]
    assert doc["runs"][0]["events"][0]["input"]["messages"][0]["content"] == "first chat"
    assert main(["threads", "prune", "--store", url]) == 0
    assert capsys.readouterr().out.strip() == "pruned 1 thread"
    assert main(["threads", "prune", "--store", url]) == 0
    assert capsys.readouterr().out.strip() == "pruned 0 threads"


def test_a_mistake_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["threads", "list", "--store", "memory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "keeps nothing after serve ends" in err[0]
    assert main(["threads", "list", "--store", "redis://x"]) == 2
    assert "use 'memory', 'sqlite:PATH' or a postgresql://" in capsys.readouterr().err
