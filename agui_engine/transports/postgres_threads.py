"""The production thread store: PostgreSQL, through an ``asyncpg`` connection pool.

Theory of operation
-------------------
The same tables as the SQLite store (:mod:`transports.sqlite_threads`; times in ms, records
``bytea``) and the same retention (:mod:`transports.thread_store`), in one transaction per kept
run: the function ``agui_keep_run`` (migration 2), called in one round trip, so a kept run costs
the gateway one statement's client CPU whatever the eviction does. Several gateway nodes share one database: nothing is cached on a node, so a thread kept
by one is listed and read by every other at once. Two nodes keeping runs of one thread at the
same moment are ordered by the thread's row lock (``SELECT ... FOR UPDATE`` after an upsert),
so run sequence numbers never collide.

**Driver.** ``asyncpg`` was chosen over ``psycopg`` 3 (async, with ``psycopg_pool``) on measured
figures (spec/transports.md §4.4, "Durable threads"): on the write path both spend the same client
CPU per kept run; on the list path asyncpg spends 1.3-1.8x less client CPU per page. Imported only
when a ``postgresql://`` store is opened (``pip install 'agui-engine[postgres]'``).

**Migrations** (:data:`MIGRATIONS`, versioned in the package): at open, under a transaction-level
advisory lock (two nodes starting together migrate once), the table ``agui_thread_schema`` says
which version the database has; the missing migrations run in that transaction. A database
whose version is newer than :data:`SCHEMA_VERSION` is refused (ThreadSchemaError): an older node
never writes a schema it does not know.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.threads import RecordFacts, ThreadPage, like_pattern, page_of, record_facts

from .eventlog import EventLogUnavailableError
from .history import HistoryBudget, ThreadRuns
from .thread_store import StoreBudget, ThreadSchemaError, store_label

__all__ = [
    "MIGRATIONS",
    "PG_ADVISORY_LOCK_KEY",
    "PG_COMMAND_TIMEOUT_SECONDS",
    "PG_CONNECT_TIMEOUT_SECONDS",
    "PG_KEEP_ATTEMPTS",
    "PG_POOL_MAX_SIZE",
    "PG_POOL_MIN_SIZE",
    "PostgresThreadStore",
    "SCHEMA_VERSION",
]

#: Connections a node keeps open at least / at most: a kept run is one short transaction at
#: a run's end and a page one query, so a few connections serve hundreds of runs a second.
PG_POOL_MIN_SIZE = 1
PG_POOL_MAX_SIZE = 8

#: How long connecting may take before the store counts as unreachable.
PG_CONNECT_TIMEOUT_SECONDS = 10.0

#: How long one statement may take (a page or a kept run takes milliseconds).
PG_COMMAND_TIMEOUT_SECONDS = 10.0

#: Times a kept run's transaction is tried when it lost a deadlock to another node's (both
#: evicting each other's threads at once): the second try finds the eviction done.
PG_KEEP_ATTEMPTS = 3

#: The advisory lock every node takes while migrating (an arbitrary constant: "agui" in hex).
PG_ADVISORY_LOCK_KEY = 0x61677569

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE agui_threads (
        thread_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        title_set BOOLEAN NOT NULL DEFAULT FALSE,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        runs INTEGER NOT NULL DEFAULT 0,
        nbytes BIGINT NOT NULL DEFAULT 0,
        dropped INTEGER NOT NULL DEFAULT 0,
        latest_run_id TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX agui_threads_by_principal ON agui_threads (principal, updated_at DESC, thread_id DESC);
    CREATE INDEX agui_threads_by_age ON agui_threads (updated_at);
    CREATE TABLE agui_runs (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        principal TEXT NOT NULL,
        key_hash TEXT NOT NULL,
        nbytes INTEGER NOT NULL,
        record BYTEA NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE TABLE agui_totals (id INTEGER PRIMARY KEY CHECK (id = 1), nbytes BIGINT NOT NULL);
    INSERT INTO agui_totals VALUES (1, 0);
    """,
    # 2: keeping a run is one round trip: the transaction of version 1, as two functions
    """
    CREATE FUNCTION agui_drop_threads(p_ids TEXT[]) RETURNS INTEGER AS $$
    DECLARE
        v_freed BIGINT;
        v_count INTEGER;
    BEGIN
        IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
            RETURN 0;
        END IF;
        WITH gone AS (DELETE FROM agui_threads WHERE thread_id = ANY(p_ids) RETURNING nbytes)
            SELECT COALESCE(SUM(nbytes), 0), COUNT(*) INTO v_freed, v_count FROM gone;
        DELETE FROM agui_runs WHERE thread_id = ANY(p_ids);
        UPDATE agui_totals SET nbytes = nbytes - v_freed WHERE id = 1;
        RETURN v_count;
    END $$ LANGUAGE plpgsql;

    CREATE FUNCTION agui_keep_run(
        p_thread TEXT, p_run TEXT, p_principal TEXT, p_key TEXT, p_nbytes INTEGER, p_record BYTEA, p_title TEXT,
        p_now BIGINT, p_horizon BIGINT, p_max_runs INTEGER, p_max_thread_bytes BIGINT, p_max_total BIGINT,
        p_quota INTEGER
    ) RETURNS VOID AS $$
    DECLARE
        v_new INTEGER;
        v_seq INTEGER;
        v_runs INTEGER;
        v_bytes BIGINT;
        v_total BIGINT;
        v_drop INTEGER := 0;
        v_freed BIGINT := 0;
        v_last INTEGER := 0;
        v_count INTEGER;
        v_ids TEXT[] := ARRAY[]::TEXT[];
        r RECORD;
    BEGIN
        PERFORM agui_drop_threads(ARRAY(SELECT thread_id FROM agui_threads WHERE updated_at <= p_horizon));
        INSERT INTO agui_threads (thread_id, principal, title, created_at, updated_at, latest_run_id)
            VALUES (p_thread, p_principal, p_title, p_now, p_now, p_run) ON CONFLICT (thread_id) DO NOTHING;
        GET DIAGNOSTICS v_new = ROW_COUNT;
        PERFORM 1 FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        SELECT COALESCE(MAX(seq), 0) + 1 INTO v_seq FROM agui_runs WHERE thread_id = p_thread;
        INSERT INTO agui_runs VALUES (p_thread, v_seq, p_run, p_principal, p_key, p_nbytes, p_record);
        UPDATE agui_threads SET updated_at = GREATEST(updated_at + 1, p_now), runs = runs + 1,
            nbytes = nbytes + p_nbytes, latest_run_id = p_run,
            title = CASE WHEN NOT title_set AND title = '' THEN p_title ELSE title END
            WHERE thread_id = p_thread RETURNING runs, nbytes INTO v_runs, v_bytes;
        UPDATE agui_totals SET nbytes = nbytes + p_nbytes WHERE id = 1 RETURNING nbytes INTO v_total;
        IF v_runs > p_max_runs OR v_bytes > p_max_thread_bytes THEN
            FOR r IN SELECT seq, nbytes FROM agui_runs WHERE thread_id = p_thread ORDER BY seq LOOP
                EXIT WHEN v_runs - v_drop <= 1
                    OR (v_runs - v_drop <= p_max_runs AND v_bytes - v_freed <= p_max_thread_bytes);
                v_drop := v_drop + 1;
                v_freed := v_freed + r.nbytes;
                v_last := r.seq;
            END LOOP;
            IF v_drop > 0 THEN
                DELETE FROM agui_runs WHERE thread_id = p_thread AND seq <= v_last;
                UPDATE agui_threads SET runs = runs - v_drop, nbytes = nbytes - v_freed, dropped = dropped + v_drop
                    WHERE thread_id = p_thread;
                UPDATE agui_totals SET nbytes = nbytes - v_freed WHERE id = 1 RETURNING nbytes INTO v_total;
            END IF;
        END IF;
        IF v_new > 0 THEN  -- only a new thread can take a principal past its quota
            SELECT COUNT(*) INTO v_count FROM agui_threads WHERE principal = p_principal;
            IF v_count > p_quota THEN
                PERFORM agui_drop_threads(ARRAY(
                    SELECT thread_id FROM agui_threads WHERE principal = p_principal AND thread_id <> p_thread
                    ORDER BY updated_at, thread_id LIMIT v_count - p_quota));
                SELECT nbytes INTO v_total FROM agui_totals WHERE id = 1;
            END IF;
        END IF;
        IF v_total > p_max_total THEN
            FOR r IN SELECT thread_id, nbytes FROM agui_threads WHERE thread_id <> p_thread
                    ORDER BY updated_at, thread_id LOOP
                EXIT WHEN v_total <= p_max_total;
                v_ids := v_ids || r.thread_id;
                v_total := v_total - r.nbytes;
            END LOOP;
            PERFORM agui_drop_threads(v_ids);
        END IF;
    END $$ LANGUAGE plpgsql;
    """,
    # 3: a trigram index of the titles for ``?q=`` (ILIKE '%...%' is served by it), when the
    # server has the pg_trgm extension (Debian's postgresql package does) and this role may
    # create it (a trusted extension since PostgreSQL 13: the database owner may); else the
    # search stays a scan of the principal's titles, as in version 2.
    """
    DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
            BEGIN
                CREATE EXTENSION IF NOT EXISTS pg_trgm;
                CREATE INDEX IF NOT EXISTS agui_threads_title_trgm ON agui_threads USING gin (title gin_trgm_ops);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'agui-engine: no pg_trgm (%): title search scans', SQLERRM;
            END;
        END IF;
    END $$;
    """,
)

#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)

_T = TypeVar("_T")


class PostgresThreadStore:
    """The PostgreSQL :class:`~transports.thread_store.DurableThreadStore` (module
    docstring). Open it with :meth:`open`."""

    def __init__(self, url: str, budget: StoreBudget | None = None) -> None:
        self.url = url
        self.label = store_label(url)
        self.budget = budget if budget is not None else StoreBudget()
        self._history = self.budget.history()
        self._pool: Any = None

    @classmethod
    async def open(cls, url: str, budget: StoreBudget | None = None) -> PostgresThreadStore:
        """Connect, and migrate the schema. Raises EventLogUnavailableError (unreachable),
        UsageError (a bad URL, refused credentials), ThreadSchemaError (a newer database)."""
        import asyncpg

        store = cls(url, budget)
        try:
            store._pool = await asyncpg.create_pool(
                url, min_size=PG_POOL_MIN_SIZE, max_size=PG_POOL_MAX_SIZE,
                timeout=PG_CONNECT_TIMEOUT_SECONDS, command_timeout=PG_COMMAND_TIMEOUT_SECONDS,
            )
        except (TimeoutError, OSError) as exc:
            raise EventLogUnavailableError(f"thread store {store.label}: cannot connect ({type(exc).__name__})") from None
        except (asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
            raise UsageError(f"thread store {store.label}: {exc}") from None
        try:
            await store._run(store._migrate)
        except BaseException:
            await store.aclose()
            raise
        return store

    async def _run(self, fn: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        """``fn(connection, *args)`` on a pooled connection; a database that does not
        answer is an EventLogUnavailableError (503), as for a shared event log."""
        import asyncpg

        if self._pool is None:
            raise UsageError("the PostgreSQL thread store is closed")
        try:
            async with self._pool.acquire() as conn:
                return await fn(conn, *args)
        except (TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError) as exc:
            raise EventLogUnavailableError(f"thread store {self.label}: {type(exc).__name__}") from None

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", PG_ADVISORY_LOCK_KEY)
            await conn.execute("CREATE TABLE IF NOT EXISTS agui_thread_schema (version INTEGER NOT NULL)")
            version = await conn.fetchval("SELECT MAX(version) FROM agui_thread_schema") or 0
            if version > SCHEMA_VERSION:
                raise ThreadSchemaError(
                    f"thread store {self.label} has schema version {version}, newer than this agui-engine's "
                    f"{SCHEMA_VERSION}: upgrade agui-engine on this node"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[target - 1])
                await conn.execute("INSERT INTO agui_thread_schema VALUES ($1)", target)

    # -- ThreadStore -------------------------------------------------------------------

    @property
    def history_budget(self) -> HistoryBudget:
        return self._history

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        import asyncpg

        facts = record_facts(record)
        for attempt in range(PG_KEEP_ATTEMPTS):
            try:
                await self._run(self._keep, thread_id, record, facts, int(now * 1000))
                return
            except (asyncpg.DeadlockDetectedError, asyncpg.UniqueViolationError):
                # two nodes evicting each other's threads at once, or creating one thread's
                # first run together: the loser's transaction rolled back whole; do it again
                if attempt == PG_KEEP_ATTEMPTS - 1:
                    raise

    async def _keep(self, conn: Any, thread_id: str, record: bytes, facts: RecordFacts, now_ms: int) -> None:
        b = self.budget
        await conn.execute(
            "SELECT agui_keep_run($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            thread_id, facts.run_id, facts.principal, facts.key_hash, facts.nbytes, record, facts.title, now_ms,
            now_ms - int(b.retention_seconds * 1000), b.max_runs_per_thread, b.max_thread_bytes, b.max_total_bytes,
            b.max_threads_per_principal,
        )

    async def _drop_threads(self, conn: Any, ids: list[str]) -> None:
        if ids:
            await conn.execute("SELECT agui_drop_threads($1::text[])", ids)

    async def _expire(self, conn: Any, now_ms: int) -> int:
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        ids = [r[0] for r in await conn.fetch("SELECT thread_id FROM agui_threads WHERE updated_at <= $1", horizon)]
        await self._drop_threads(conn, ids)
        return len(ids)

    async def _total(self, conn: Any, keep: str | None) -> int:
        deleted = 0
        total = await conn.fetchval("SELECT nbytes FROM agui_totals WHERE id = 1")
        while total > self.budget.max_total_bytes:
            rows = await conn.fetch(
                "SELECT thread_id, nbytes FROM agui_threads WHERE thread_id != $1 ORDER BY updated_at, thread_id "
                "LIMIT 64", keep or "",
            )
            if not rows:
                break
            victims = []
            for row in rows:
                if total <= self.budget.max_total_bytes:
                    break
                victims.append(row["thread_id"])
                total -= row["nbytes"]
            await self._drop_threads(conn, victims)
            deleted += len(victims)
        return deleted

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        return await self._run(self._runs, thread_id, int(now * 1000))

    async def _runs(self, conn: Any, thread_id: str, now_ms: int) -> ThreadRuns:
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        row = await conn.fetchrow("SELECT dropped, updated_at FROM agui_threads WHERE thread_id = $1", thread_id)
        if row is None or row["updated_at"] <= horizon:
            return ThreadRuns([], 0)
        rows = await conn.fetch("SELECT record FROM agui_runs WHERE thread_id = $1 ORDER BY seq", thread_id)
        return ThreadRuns([bytes(r[0]) for r in rows], row["dropped"])

    # -- the thread API ------------------------------------------------------------------

    async def thread_access(self, thread_id: str, now: float) -> list[tuple[str, str]]:
        return await self._run(self._access, thread_id, int(now * 1000))

    async def _access(self, conn: Any, thread_id: str, now_ms: int) -> list[tuple[str, str]]:
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        rows = await conn.fetch(
            "SELECT r.principal, r.key_hash FROM agui_runs r JOIN agui_threads t USING (thread_id) "
            "WHERE r.thread_id = $1 AND t.updated_at > $2 ORDER BY r.seq", thread_id, horizon,
        )
        return [(r[0], r[1]) for r in rows]

    async def list_threads(
        self, principal: str | None, *, limit: int, after: tuple[int, str] | None = None, search: str | None = None,
        now: float,
    ) -> ThreadPage:
        return await self._run(self._list, principal, limit, after, search, int(now * 1000))

    async def _list(
        self, conn: Any, principal: str | None, limit: int, after: tuple[int, str] | None, search: str | None,
        now_ms: int,
    ) -> ThreadPage:
        horizon = now_ms - int(self.budget.retention_seconds * 1000)
        sql = "SELECT thread_id, title, created_at, updated_at, runs, latest_run_id FROM agui_threads WHERE updated_at > $1"
        args: list[Any] = [horizon]
        if principal is not None:
            args.append(principal)
            sql += f" AND principal = ${len(args)}"
        if after is not None:
            args += [after[0], after[1]]
            sql += f" AND (updated_at, thread_id) < (${len(args) - 1}, ${len(args)})"
        if search is not None:
            args.append(like_pattern(search))
            sql += f" AND title ILIKE ${len(args)}"
        args.append(limit + 1)
        sql += f" ORDER BY updated_at DESC, thread_id DESC LIMIT ${len(args)}"
        rows = await conn.fetch(sql, *args)
        return page_of(rows, limit)

    async def delete_thread(self, thread_id: str) -> bool:
        return await self._run(self._delete, thread_id)

    async def _delete(self, conn: Any, thread_id: str) -> bool:
        async with conn.transaction():
            found = await conn.fetchval("SELECT 1 FROM agui_threads WHERE thread_id = $1 FOR UPDATE", thread_id)
            await self._drop_threads(conn, [thread_id])
        return found is not None

    async def set_title(self, thread_id: str, title: str) -> bool:
        return await self._run(self._set_title, thread_id, title)

    async def _set_title(self, conn: Any, thread_id: str, title: str) -> bool:
        status = await conn.execute(
            "UPDATE agui_threads SET title = $1, title_set = TRUE WHERE thread_id = $2", title, thread_id
        )
        return bool(status != "UPDATE 0")

    async def prune(self, now: float) -> int:
        return await self._run(self._prune, int(now * 1000))

    async def _prune(self, conn: Any, now_ms: int) -> int:
        async with conn.transaction():
            return await self._expire(conn, now_ms) + await self._total(conn, None)

    async def all_threads(self) -> list[tuple[str, str]]:
        async def fetch(conn: Any) -> list[tuple[str, str]]:
            rows = await conn.fetch("SELECT thread_id, principal FROM agui_threads ORDER BY updated_at, thread_id")
            return [(r[0], r[1]) for r in rows]

        return await self._run(fetch)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
