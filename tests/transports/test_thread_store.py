"""Durable thread stores (spec/transports.md §4.4, "Durable threads"): SQLite and a real
PostgreSQL server (Debian's package, started on a free port), one suite, ``store`` parametrized:
keeping and reading runs, the listing (newest first, cursor pages, title search), titles,
delete, retention, schema versions, and the same answers as the in-memory history."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import msgspec
import pytest

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import (
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)
from agui_engine.protocol.threads import decode_cursor, open_interrupts
from agui_engine.transports.history import HistoryBudget, MemoryThreadStore, build_record, decode_records
from agui_engine.transports.open_threads import open_thread_store
from agui_engine.transports.thread_store import (
    DurableThreadStore,
    StoreBudget,
    ThreadSchemaError,
    default_sqlite_path,
)

DAY = 86400.0
T0 = 1_800_000_000.0


def record(
    thread: str, run: str, text: str = "hello", *, principal: str = "alice", parent: str | None = None,
    interrupts: list[Interrupt] | None = None, pad: int = 0,
) -> bytes:
    """A kept run record, built by the history's own build_record from a real event stream."""
    input = RunAgentInput(thread_id=thread, run_id=run, messages=[UserMessage(id=f"u-{run}", content=text)])
    answer = "ok " + "x" * pad
    outcome = RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else None
    events = [
        RunStartedEvent(thread_id=thread, run_id=run),
        TextMessageStartEvent(message_id=f"a-{run}"),
        TextMessageContentEvent(message_id=f"a-{run}", delta=answer),
        TextMessageEndEvent(message_id=f"a-{run}"),
        RunFinishedEvent(thread_id=thread, run_id=run, outcome=outcome),
    ]
    return build_record(
        input, parent, [encode_event(e) for e in events], complete=True, principal=principal,
        key_hash="h-" + run, max_bytes=1 << 30,
    )


Opener = Callable[..., Awaitable[DurableThreadStore]]


@pytest.fixture(params=["sqlite", "postgres"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens stores on one database (a file, or a fresh PostgreSQL database); closes them."""
    if request.param == "sqlite":
        url = f"sqlite:{tmp_path / 'threads.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
    opened: list[DurableThreadStore] = []

    async def opener(budget: StoreBudget | None = None) -> DurableThreadStore:
        store = await open_thread_store(url, budget)
        opened.append(store)
        return store

    opener.url = url  # type: ignore[attr-defined]
    yield opener
    for s in opened:
        await s.aclose()


async def test_kept_runs_come_back_in_order_and_survive_reopening(open_store: Opener) -> None:
    store = await open_store()
    recs = [record("t1", f"r{i}", f"turn {i}", parent=f"r{i - 1}" if i else None) for i in range(3)]
    for i, r in enumerate(recs):
        await store.keep_run("t1", r, T0 + i)
    held = await store.thread_runs("t1", T0 + 10)
    assert held.records == recs and held.dropped == 0
    assert await store.thread_access("t1", T0 + 10) == [("alice", f"h-r{i}") for i in range(3)]
    await store.aclose()
    again = await open_store()
    assert (await again.thread_runs("t1", T0 + 10)).records == recs
    assert (await again.thread_runs("nope", T0)).records == []
    assert await again.thread_access("nope", T0) == []


async def test_the_listing_is_the_principals_threads_newest_first_in_cursor_pages(open_store: Opener) -> None:
    store = await open_store()
    for i in range(23):
        await store.keep_run(f"t{i:02}", record(f"t{i:02}", f"r{i}", f"question number {i}"), T0 + i)
    await store.keep_run("bob-1", record("bob-1", "rb", "bob's", principal="bob"), T0 + 5)
    await store.keep_run("t03", record("t03", "r03b", "again"), T0 + 100)  # t03 moves to the front
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        page = await store.list_threads("alice", limit=5, after=after, now=T0 + 200)
        seen += [t.thread_id for t in page.threads]
        pages += 1
        if page.next_cursor is None:
            break
        after = decode_cursor(page.next_cursor)
    assert pages == 5
    assert seen == ["t03"] + [f"t{i:02}" for i in range(22, -1, -1) if i != 3]
    first = (await store.list_threads("alice", limit=1, now=T0 + 200)).threads[0]
    assert first.title == "question number 3" and first.runs == 2 and first.latest_run_id == "r03b"
    assert [t.thread_id for t in (await store.list_threads("bob", limit=10, now=T0 + 200)).threads] == ["bob-1"]
    found = await store.list_threads("alice", limit=20, search="NUMBER 1", now=T0 + 200)
    assert sorted(t.thread_id for t in found.threads) == ["t01"] + [f"t{i}" for i in range(10, 20)]
    assert (await store.list_threads("alice", limit=10, search="100%_", now=T0 + 200)).threads == []
    assert len((await store.list_threads(None, limit=100, now=T0 + 200)).threads) == 24


async def test_titles_come_from_the_first_user_message_until_one_is_set(open_store: Opener) -> None:
    store = await open_store()
    await store.keep_run("t", record("t", "r1", "  What   is\nthe weather " + "in Paris " * 20), T0)
    title = (await store.list_threads("alice", limit=1, now=T0)).threads[0].title
    assert title.startswith("What is the weather in Paris") and title.endswith("…") and len(title) == 80
    assert await store.set_title("t", "Paris weather")
    await store.keep_run("t", record("t", "r2", "and tomorrow?"), T0 + 1)
    assert (await store.list_threads("alice", limit=1, now=T0 + 1)).threads[0].title == "Paris weather"
    assert not await store.set_title("missing", "x")


async def test_a_deleted_thread_is_gone_everywhere(open_store: Opener) -> None:
    store = await open_store()
    await store.keep_run("t", record("t", "r1"), T0)
    await store.keep_run("u", record("u", "r2"), T0)
    assert await store.delete_thread("t")
    assert not await store.delete_thread("t")
    assert (await store.thread_runs("t", T0)).records == []
    assert await store.thread_access("t", T0) == []
    assert [t.thread_id for t in (await store.list_threads("alice", limit=10, now=T0)).threads] == ["u"]


async def test_retention_runs_bytes_age_quota_and_total(open_store: Opener) -> None:
    one = len(record("a", "r0"))
    store = await open_store(StoreBudget(
        max_runs_per_thread=2, max_thread_bytes=10 * one, max_total_bytes=6 * one + 50,
        retention_seconds=DAY, max_threads_per_principal=3,
    ))
    for i in range(4):
        await store.keep_run("a", record("a", f"r{i}"), T0 + i)
    held = await store.thread_runs("a", T0 + 5)
    assert [r.run_id for r in decode_records(held.records)] == ["r2", "r3"] and held.dropped == 2
    # a principal's quota: its least recently written thread goes
    for name in ("b", "c", "d"):
        await store.keep_run(name, record(name, "r-" + name), T0 + 10)
    assert sorted(t.thread_id for t in (await store.list_threads("alice", limit=10, now=T0 + 10)).threads) == [
        "b", "c", "d"]
    # the total: the least recently written threads go (bob's first)
    await store.keep_run("e", record("e", "r-e", principal="bob"), T0 + 11)
    await store.keep_run("f", record("f", "r-f", principal="bob", pad=3 * one), T0 + 12)
    left = {t.thread_id for t in (await store.list_threads(None, limit=10, now=T0 + 12)).threads}
    assert "f" in left and len(left) < 5
    # age: idle past the retention is forgotten, on reading and on keeping
    assert (await store.thread_runs("f", T0 + 12 + DAY + 1)).records == []
    assert await store.prune(T0 + 12 + DAY + 1) == len(left)
    assert (await store.list_threads(None, limit=10, now=T0)).threads == []


async def test_the_same_keeps_give_the_same_answers_as_the_in_memory_history(open_store: Opener) -> None:
    budget = StoreBudget(max_runs_per_thread=3, max_thread_bytes=4000, max_total_bytes=9000, retention_seconds=50,
                         max_threads_per_principal=1000)
    store = await open_store(budget)
    memory = MemoryThreadStore(HistoryBudget(max_runs_per_thread=3, max_thread_bytes=4000, max_total_bytes=9000,
                                             retention_seconds=50))
    rng = random.Random(32)
    now = T0
    for i in range(120):
        now += rng.choice([0.5, 1, 2, 30])
        tid = f"t{rng.randrange(6)}"
        rec = record(tid, f"r{i}", "x", pad=rng.choice([0, 100, 1500]))
        await store.keep_run(tid, rec, now)
        await memory.keep_run(tid, rec, now)
        for t in range(6):
            ours, theirs = await store.thread_runs(f"t{t}", now), await memory.thread_runs(f"t{t}", now)
            assert ours.records == theirs.records, (i, t)
            if ours.records:
                assert ours.dropped == theirs.dropped


async def test_open_interrupts_are_kept_with_the_run(open_store: Opener) -> None:
    store = await open_store()
    asked = [Interrupt(id="i1", reason="approval", response_schema={"type": "object"}, expires_at="2030-01-01T00:00:00Z")]
    await store.keep_run("t", record("t", "r1", interrupts=asked), T0)
    await store.aclose()
    again = await open_store()
    (run,) = decode_records((await again.thread_runs("t", T0)).records)
    assert open_interrupts(run.events) == asked


async def test_a_database_newer_than_the_code_is_refused(open_store: Opener) -> None:
    store = await open_store()
    await store.aclose()
    url: str = open_store.url  # type: ignore[attr-defined]
    if url.startswith("sqlite:"):
        db = sqlite3.connect(url[len("sqlite:"):])
        db.execute("PRAGMA user_version = 99")
        db.close()
    else:
        import asyncpg

        conn = await asyncpg.connect(url)
        await conn.execute("INSERT INTO agui_thread_schema VALUES (99)")
        await conn.close()
    with pytest.raises(ThreadSchemaError, match=r"schema version 99, newer than this agui-engine's [23]:"):
        await open_store()


async def test_two_stores_on_one_database_see_each_others_threads(open_store: Opener) -> None:
    a, b = await open_store(), await open_store()
    await a.keep_run("t", record("t", "r1"), T0)
    await b.keep_run("t", record("t", "r2", parent="r1"), T0 + 1)
    assert [r.run_id for r in decode_records((await a.thread_runs("t", T0 + 1)).records)] == ["r1", "r2"]
    assert (await b.list_threads("alice", limit=5, now=T0 + 1)).threads[0].runs == 2


def test_the_default_file_is_in_the_users_data_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_sqlite_path() == tmp_path / "agui-engine" / "threads.sqlite3"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_sqlite_path() == Path.home() / ".local" / "share" / "agui-engine" / "threads.sqlite3"


async def test_a_bad_store_url_is_one_clear_usage_error(tmp_path: Path) -> None:
    from agui_engine.protocol.errors import UsageError

    with pytest.raises(UsageError, match="use 'memory', 'sqlite:PATH' or a postgresql://"):
        await open_thread_store("mysql://x")
    (tmp_path / "junk").write_bytes(b"not a database" * 100)
    with pytest.raises(UsageError, match="not a usable SQLite database"):
        await open_thread_store(f"sqlite:{tmp_path / 'junk'}")


def test_record_json_stays_what_build_record_wrote() -> None:
    rec = record("t", "r")
    assert msgspec.json.decode(rec)["runId"] == "r"


async def test_a_version_1_postgresql_database_is_migrated_to_version_2(postgres_url: str) -> None:
    """A database a version-1 node wrote (its tables and a thread) is migrated at open, under the
    advisory lock, and its threads stay: keeping a run then goes through migration 2's function,
    and migration 3 indexes the titles with pg_trgm (Debian's package has it), the old one too."""
    import asyncpg

    from agui_engine.transports.postgres_threads import MIGRATIONS, SCHEMA_VERSION

    conn = await asyncpg.connect(postgres_url)
    await conn.execute("CREATE TABLE agui_thread_schema (version INTEGER NOT NULL)")
    await conn.execute(MIGRATIONS[0])
    await conn.execute("INSERT INTO agui_thread_schema VALUES (1)")
    await conn.execute(
        "INSERT INTO agui_threads (thread_id, principal, title, created_at, updated_at, runs, nbytes, latest_run_id) "
        "VALUES ('old', 'alice', 'from version 1', $1, $1, 1, $2, 'r0')", int(T0 * 1000), len(record("old", "r0")))
    await conn.execute("INSERT INTO agui_runs VALUES ('old', 1, 'r0', 'alice', 'h-r0', $1, $2)",
                       len(record("old", "r0")), record("old", "r0"))
    store = await open_thread_store(postgres_url)
    try:
        assert await conn.fetchval("SELECT MAX(version) FROM agui_thread_schema") == SCHEMA_VERSION == 3
        await store.keep_run("old", record("old", "r1", parent="r0"), T0 + 1)
        assert [r.run_id for r in decode_records((await store.thread_runs("old", T0 + 1)).records)] == ["r0", "r1"]
        assert (await store.list_threads("alice", limit=5, now=T0 + 1)).threads[0].title == "from version 1"
        assert await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'agui_threads_title_trgm'") \
            == "CREATE INDEX agui_threads_title_trgm ON public.agui_threads USING gin (title gin_trgm_ops)"
        found = await store.list_threads("alice", limit=5, search="VERSION 1", now=T0 + 1)
        assert [t.thread_id for t in found.threads] == ["old"]
    finally:
        await store.aclose()
        await conn.close()


async def test_a_version_1_sqlite_file_gets_its_titles_indexed(tmp_path: Path) -> None:
    """Migration 2 of the SQLite store: the titles of a version-1 file (written by its own
    migration) are indexed (FTS5 trigram), and the index follows new threads, renames and
    deletes; a search too short for trigrams, or holding LIKE's wildcards, is still exact."""
    from agui_engine.transports.sqlite_threads import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "v1.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(f"BEGIN; {MIGRATIONS[0]}; PRAGMA user_version = 1; COMMIT;")
    db.execute("INSERT INTO threads (thread_id, principal, title, created_at, updated_at, runs, latest_run_id) "
               "VALUES ('old', 'alice', 'Trip to Kyoto 100%', ?, ?, 1, 'r0')", (int(T0 * 1000), int(T0 * 1000)))
    db.close()
    store = await open_thread_store(f"sqlite:{path}")
    try:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        await store.keep_run("new", record("new", "r1", text="kyoto_in winter"), T0 + 1)

        async def search(text: str) -> list[str]:
            return [t.thread_id for t in (await store.list_threads("alice", limit=9, search=text, now=T0 + 2)).threads]

        assert await search("KYOTO") == ["new", "old"]
        assert await search("yo") == ["new", "old"]  # two characters: a scan
        assert await search("100%") == ["old"] and await search("o_i") == ["new"]  # wildcards, taken literally
        assert await store.set_title("old", "Osaka")
        assert await search("kyoto") == ["new"] and await search("osaka") == ["old"]
        await store.delete_thread("new")
        assert await search("kyoto") == []
    finally:
        await store.aclose()


def test_serve_refuses_a_newer_store_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agui_engine.cli import main

    path = tmp_path / "threads.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 7")
    db.close()
    assert main(["serve", "--port", "0", "--store", f"sqlite:{path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "schema version 7, newer than this agui-engine's 2: upgrade agui-engine" in err[0], err


async def test_a_locked_sqlite_file_is_a_503_never_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holding the file's write lock past the busy timeout: keeping and reading
    are EventLogUnavailableError (503, saying why), and work again once it lets go."""
    from agui_engine.transports import sqlite_threads
    from agui_engine.transports.eventlog import EventLogUnavailableError

    monkeypatch.setattr(sqlite_threads, "SQLITE_BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "threads.sqlite3"
    store = await open_thread_store(f"sqlite:{path}")
    try:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(EventLogUnavailableError, match="locked") as info:
            await store.keep_run("t", record("t", "r1"), T0)
        assert info.value.http_status == 503
        other.execute("ROLLBACK")
        other.close()
        await store.keep_run("t", record("t", "r1"), T0)
        assert len((await store.thread_runs("t", T0)).records) == 1
    finally:
        await store.aclose()


def test_two_processes_opening_one_new_file_together_both_migrate_it(tmp_path: Path) -> None:
    """Two nodes started together on one new file: each reads the schema version again under
    the write lock, so the second does not run a migration the first already ran."""
    from agui_engine.transports.sqlite_threads import SCHEMA_VERSION

    path = tmp_path / "together.sqlite3"
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from agui_engine.transports.sqlite_threads import SqliteThreadStore\n"
        "async def main():\n"
        "    sys.stdin.readline()\n"
        "    store = await SqliteThreadStore.open(Path(sys.argv[1]))\n"
        "    await store.aclose()\n"
        "asyncio.run(main())\n"
    )
    for _ in range(5):
        path.unlink(missing_ok=True)
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        for proc in procs:  # both imported and waiting: released at once
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        errors = [proc.communicate(timeout=60)[1].decode() for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], errors
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
