"""The embedded thread store: SQLite (the standard library's ``sqlite3``), one file.

Theory of operation
-------------------
One connection, owned by one worker thread (a single-thread executor): every statement
runs there, so there is exactly one writer and the event loop never blocks on the disk.
The file is in WAL mode with ``synchronous=NORMAL``: a committed run survives ``kill -9`` of
the process (the WAL is in the OS's hands at commit), and readers in other processes
(``agui-engine threads``) never block the writer. ``busy_timeout`` lets such a reader's
brief lock wait instead of failing.

Tables (schema version :data:`SCHEMA_VERSION`, ``PRAGMA user_version``; the migrations are
:data:`MIGRATIONS`, applied at open, a database newer than the code refused)::

    threads(thread_id PK, principal, title, title_set, created_at, updated_at,
            runs, nbytes, dropped, latest_run_id)       -- times in ms
        index (principal, updated_at DESC, thread_id DESC)  the listing: one range scan
        index (updated_at)                                    retention and the total
    runs(thread_id, seq, run_id, principal, key_hash, nbytes, record)  PK (thread_id, seq)
    totals(id = 1, nbytes)                                  bytes of every record
    thread_titles  FTS5 (trigram) over threads.title, kept by triggers: the title search

Keeping a run is one transaction: upsert the thread, insert the run, evict (module
:mod:`transports.thread_store`, "Retention").
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.threads import ThreadPage, like_pattern, page_of, record_facts

from .eventlog import EventLogUnavailableError
from .history import HistoryBudget, ThreadRuns
from .thread_store import StoreBudget, ThreadSchemaError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLITE_BUSY_TIMEOUT_MS", "SqliteThreadStore"]

#: How long a statement waits for another process's lock (``agui-engine threads`` reading
#: while ``serve`` writes) before failing: a write transaction takes milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 5000

#: The migrations, in order: version i + 1 is reached by running MIGRATIONS[i].
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        title_set INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        runs INTEGER NOT NULL DEFAULT 0,
        nbytes INTEGER NOT NULL DEFAULT 0,
        dropped INTEGER NOT NULL DEFAULT 0,
        latest_run_id TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX threads_by_principal ON threads (principal, updated_at DESC, thread_id DESC);
    CREATE INDEX threads_by_age ON threads (updated_at);
    CREATE TABLE runs (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        principal TEXT NOT NULL,
        key_hash TEXT NOT NULL,
        nbytes INTEGER NOT NULL,
        record BLOB NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 1), nbytes INTEGER NOT NULL);
    INSERT INTO totals VALUES (1, 0);
    """,
    # 2: an index of the titles for ``?q=`` (FTS5's trigram tokenizer, SQLite >= 3.34), kept by
    # triggers; a title changes only on a new thread, a PATCH or the first user message.
    """
    CREATE VIRTUAL TABLE thread_titles USING fts5(title, content='threads', tokenize='trigram');
    INSERT INTO thread_titles (thread_titles) VALUES ('rebuild');
    CREATE TRIGGER thread_titles_insert AFTER INSERT ON threads BEGIN
        INSERT INTO thread_titles (rowid, title) VALUES (new.rowid, new.title);
    END;
    CREATE TRIGGER thread_titles_delete AFTER DELETE ON threads BEGIN
        INSERT INTO thread_titles (thread_titles, rowid, title) VALUES ('delete', old.rowid, old.title);
    END;
    CREATE TRIGGER thread_titles_update AFTER UPDATE OF title ON threads WHEN old.title IS NOT new.title BEGIN
        INSERT INTO thread_titles (thread_titles, rowid, title) VALUES ('delete', old.rowid, old.title);
        INSERT INTO thread_titles (rowid, title) VALUES (new.rowid, new.title);
    END;
    """,
)

#: Characters of a title search from which the trigram index serves it (FTS5's trigram
#: tokenizer indexes runs of three; a shorter search scans the principal's titles).
_TRIGRAM = 3

#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)

_T = TypeVar("_T")



def _wal(db: sqlite3.Connection) -> None:
    """WAL mode. Switching a new file to it takes an exclusive lock, and SQLite answers a
    busy one at once (no busy handler): another node opening the same new file retries
    it, for as long as a statement waits for a lock (SQLITE_BUSY_TIMEOUT_MS)."""
    end = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= end:
                raise
            time.sleep(0.01)  # the worker thread, not the event loop


def _statements(script: str) -> list[str]:
    """The SQL statements of ``script`` one by one (a trigger's body holds ";" of its own)."""
    out: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \t\n;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \t\n;"):
        out.append(buf.strip())
    return out

class SqliteThreadStore:
    """The embedded :class:`~transports.thread_store.DurableThreadStore` (module docstring).
    Open it with :meth:`open`."""

    def __init__(self, path: Path, budget: StoreBudget | None = None) -> None:
        self.path = path
        self.budget = budget if budget is not None else StoreBudget()
        self._history = self.budget.history()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agui-sqlite")
        self._db: sqlite3.Connection | None = None

    @classmethod
    async def open(cls, path: Path, budget: StoreBudget | None = None) -> SqliteThreadStore:
        """Open (create) the file and migrate its schema. Raises UsageError (cannot be
        opened), ThreadSchemaError (written by a newer version)."""
        store = cls(path, budget)
        try:
            await store._call(store._connect)
        except BaseException:
            await store.aclose()
            raise
        return store

    # -- the worker thread -------------------------------------------------------------

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the worker thread. A database error (locked past the busy timeout,
        disk full, a file gone bad) is an EventLogUnavailableError (503), as for a shared log
        that does not answer: never a 500 with a traceback."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except sqlite3.Error as exc:
            raise EventLogUnavailableError(f"thread store sqlite:{self.path}: {type(exc).__name__}: {exc}") from None

    def _connect(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"thread store sqlite:{self.path}: cannot open it ({exc})") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            _wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ThreadSchemaError(
                    f"thread store sqlite:{self.path} has schema version {version}, newer than this agui-engine's "
                    f"{SCHEMA_VERSION}: upgrade agui-engine, or use another file"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                # one transaction per version (a script: triggers hold ";" of their own). The
                # version is read again under the write lock: two nodes starting together on
                # one new file both saw the old version, and the second ran the migration again.
                try:
                    db.execute("BEGIN IMMEDIATE")
                    if db.execute("PRAGMA user_version").fetchone()[0] < target:
                        for statement in _statements(MIGRATIONS[target - 1]):  # executescript would commit first
                            db.execute(statement)
                        db.execute(f"PRAGMA user_version = {target}")
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        except sqlite3.DatabaseError as exc:
            db.close()
            raise UsageError(f"thread store sqlite:{self.path}: not a usable SQLite database ({exc})") from None
        except BaseException:
            db.close()
            raise
        self._db = db

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise UsageError("the SQLite thread store is closed")
        return self._db

    # -- ThreadStore -------------------------------------------------------------------

    @property
    def history_budget(self) -> HistoryBudget:
        return self._history

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        facts = record_facts(record)
        await self._call(self._keep, thread_id, record, facts, int(now * 1000))

    def _keep(self, thread_id: str, record: bytes, facts: Any, now_ms: int) -> None:
        db, b = self._conn(), self.budget
        db.execute("BEGIN IMMEDIATE")
        try:
            self._expire(db, now_ms)
            row = db.execute("SELECT runs FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO threads (thread_id, principal, title, created_at, updated_at, latest_run_id) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (thread_id, facts.principal, facts.title, now_ms, now_ms, facts.run_id),
                )
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE thread_id = ?", (thread_id,)).fetchone()[0]
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (thread_id, seq, facts.run_id, facts.principal, facts.key_hash, facts.nbytes, record),
            )
            db.execute(
                "UPDATE threads SET updated_at = MAX(updated_at + 1, ?), runs = runs + 1, nbytes = nbytes + ?, "
                "latest_run_id = ?, title = CASE WHEN title_set = 0 AND title = '' THEN ? ELSE title END "
                "WHERE thread_id = ?",
                (now_ms, facts.nbytes, facts.run_id, facts.title, thread_id),
            )
            db.execute("UPDATE totals SET nbytes = nbytes + ? WHERE id = 1", (facts.nbytes,))
            runs, nbytes = db.execute("SELECT runs, nbytes FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
            if runs > b.max_runs_per_thread or nbytes > b.max_thread_bytes:
                self._evict_runs(db, thread_id, runs, nbytes)
            if row is None:  # only a new thread can take a principal past its quota
                self._quota(db, facts.principal, thread_id)
            self._total(db, thread_id)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _evict_runs(self, db: sqlite3.Connection, thread_id: str, runs: int, nbytes: int) -> None:
        b = self.budget
        freed = dropped = 0
        last = 0
        for seq, size in db.execute(
            "SELECT seq, nbytes FROM runs WHERE thread_id = ? ORDER BY seq", (thread_id,)
        ).fetchall():
            if runs - dropped <= 1 or (runs - dropped <= b.max_runs_per_thread and nbytes - freed <= b.max_thread_bytes):
                break
            dropped += 1
            freed += size
            last = seq
        if dropped:
            db.execute("DELETE FROM runs WHERE thread_id = ? AND seq <= ?", (thread_id, last))
            db.execute(
                "UPDATE threads SET runs = runs - ?, nbytes = nbytes - ?, dropped = dropped + ? WHERE thread_id = ?",
                (dropped, freed, dropped, thread_id),
            )
            db.execute("UPDATE totals SET nbytes = nbytes - ? WHERE id = 1", (freed,))

    def _drop_threads(self, db: sqlite3.Connection, ids: list[str]) -> None:
        for tid in ids:
            row = db.execute("SELECT nbytes FROM threads WHERE thread_id = ?", (tid,)).fetchone()
            if row is None:
                continue
            db.execute("DELETE FROM runs WHERE thread_id = ?", (tid,))
            db.execute("DELETE FROM threads WHERE thread_id = ?", (tid,))
            db.execute("UPDATE totals SET nbytes = nbytes - ? WHERE id = 1", (row[0],))

    def _expire(self, db: sqlite3.Connection, now_ms: int) -> int:
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        ids = [r[0] for r in db.execute("SELECT thread_id FROM threads WHERE updated_at <= ?", (horizon,))]
        self._drop_threads(db, ids)
        return len(ids)

    def _quota(self, db: sqlite3.Connection, principal: str, keep: str) -> None:
        cap = self.budget.max_threads_per_principal
        count = db.execute("SELECT COUNT(*) FROM threads WHERE principal = ?", (principal,)).fetchone()[0]
        if count > cap:
            ids = [r[0] for r in db.execute(
                "SELECT thread_id FROM threads WHERE principal = ? AND thread_id != ? "
                "ORDER BY updated_at, thread_id LIMIT ?", (principal, keep, count - cap),
            )]
            self._drop_threads(db, ids)

    def _total(self, db: sqlite3.Connection, keep: str | None) -> int:
        deleted = 0
        total = db.execute("SELECT nbytes FROM totals WHERE id = 1").fetchone()[0]
        while total > self.budget.max_total_bytes:
            rows = db.execute(
                "SELECT thread_id, nbytes FROM threads WHERE thread_id != ? ORDER BY updated_at, thread_id LIMIT 64",
                (keep or "",),
            ).fetchall()
            if not rows:
                break
            victims = []
            for tid, size in rows:
                if total <= self.budget.max_total_bytes:
                    break
                victims.append(tid)
                total -= size
            self._drop_threads(db, victims)
            deleted += len(victims)
        return deleted

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        return await self._call(self._runs, thread_id, int(now * 1000))

    def _runs(self, thread_id: str, now_ms: int) -> ThreadRuns:
        db = self._conn()
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        row = db.execute("SELECT dropped, updated_at FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
        if row is None or row[1] <= horizon:
            return ThreadRuns([], 0)
        records = [r[0] for r in db.execute("SELECT record FROM runs WHERE thread_id = ? ORDER BY seq", (thread_id,))]
        return ThreadRuns(records, row[0])

    # -- the thread API ------------------------------------------------------------------

    async def thread_access(self, thread_id: str, now: float) -> list[tuple[str, str]]:
        return await self._call(self._access, thread_id, int(now * 1000))

    def _access(self, thread_id: str, now_ms: int) -> list[tuple[str, str]]:
        db = self._conn()
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        row = db.execute("SELECT updated_at FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
        if row is None or row[0] <= horizon:
            return []
        return [(r[0], r[1]) for r in db.execute(
            "SELECT principal, key_hash FROM runs WHERE thread_id = ? ORDER BY seq", (thread_id,)
        )]

    async def list_threads(
        self, principal: str | None, *, limit: int, after: tuple[int, str] | None = None, search: str | None = None,
        now: float,
    ) -> ThreadPage:
        return await self._call(self._list, principal, limit, after, search, int(now * 1000))

    def _list(
        self, principal: str | None, limit: int, after: tuple[int, str] | None, search: str | None, now_ms: int
    ) -> ThreadPage:
        db = self._conn()
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        sql = (
            "SELECT thread_id, title, created_at, updated_at, runs, latest_run_id FROM threads "
            "WHERE updated_at > ?"
        )
        args: list[Any] = [horizon]
        if principal is not None:
            sql += " AND principal = ?"
            args.append(principal)
        if after is not None:
            # a row value: SQLite walks the index from the cursor (an OR of the two would scan)
            sql += " AND (updated_at, thread_id) < (?, ?)"
            args += [after[0], after[1]]
        if search is not None:
            if len(search) >= _TRIGRAM and not any(c in search for c in "%_\\"):
                # the trigram index finds the candidates (it takes no ESCAPE: plain text only);
                # the LIKE below keeps exactly what a scan would
                sql += " AND rowid IN (SELECT rowid FROM thread_titles WHERE title LIKE ?)"
                args.append(f"%{search}%")
            sql += " AND title LIKE ? ESCAPE '\\'"
            args.append(like_pattern(search))
        sql += " ORDER BY updated_at DESC, thread_id DESC LIMIT ?"
        args.append(limit + 1)
        rows = db.execute(sql, args).fetchall()
        return page_of(rows, limit)

    async def delete_thread(self, thread_id: str) -> bool:
        return await self._call(self._delete, thread_id)

    def _delete(self, thread_id: str) -> bool:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            found = db.execute("SELECT 1 FROM threads WHERE thread_id = ?", (thread_id,)).fetchone() is not None
            self._drop_threads(db, [thread_id])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return found

    async def set_title(self, thread_id: str, title: str) -> bool:
        return await self._call(self._set_title, thread_id, title)

    def _set_title(self, thread_id: str, title: str) -> bool:
        cur = self._conn().execute("UPDATE threads SET title = ?, title_set = 1 WHERE thread_id = ?", (title, thread_id))
        return cur.rowcount > 0

    async def prune(self, now: float) -> int:
        return await self._call(self._prune, int(now * 1000))

    def _prune(self, now_ms: int) -> int:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            deleted = self._expire(db, now_ms) + self._total(db, None)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return deleted

    async def all_threads(self) -> list[tuple[str, str]]:
        """(thread id, principal) of every thread, oldest write first (``agui-engine threads``)."""
        return await self._call(
            lambda: [(r[0], r[1]) for r in self._conn().execute(
                "SELECT thread_id, principal FROM threads ORDER BY updated_at, thread_id")]
        )

    async def aclose(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.get_running_loop().run_in_executor(self._pool, db.close)
        self._pool.shutdown(wait=False)
