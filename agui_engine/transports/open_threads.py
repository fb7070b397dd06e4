"""Opening a durable thread store from its URL (``agui-engine serve --store``; the stores are
:mod:`transports.sqlite_threads` and :mod:`transports.postgres_threads`, the interface
:mod:`transports.thread_store`). A module of its own, so the interface imports no store."""

from __future__ import annotations

from pathlib import Path

from agui_engine.protocol.errors import UsageError

from .thread_store import DurableThreadStore, StoreBudget, default_sqlite_path, store_label

__all__ = ["open_thread_store"]


async def open_thread_store(url: str, budget: StoreBudget | None = None) -> DurableThreadStore:
    """The durable store named by ``url``: ``sqlite:PATH`` (``sqlite:`` alone: the default
    path) or ``postgresql://...`` / ``postgres://...``; opened, its schema migrated. Raises
    UsageError (another scheme, a path that cannot be opened, the ``[postgres]`` extra
    missing), ThreadSchemaError (the database is newer than this code),
    EventLogUnavailableError (PostgreSQL unreachable)."""
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        from .sqlite_threads import SqliteThreadStore

        raw = url[len("sqlite:"):]
        path = Path(raw).expanduser() if raw else default_sqlite_path()
        return await SqliteThreadStore.open(path, budget)
    if scheme in ("postgresql", "postgres"):
        try:
            import asyncpg  # noqa: F401 - checks the optional dependency
        except ImportError:
            raise UsageError(
                "a PostgreSQL thread store needs asyncpg: pip install 'agui-engine[postgres]'"
            ) from None
        from .postgres_threads import PostgresThreadStore

        return await PostgresThreadStore.open(url, budget)
    raise UsageError(
        f"thread store {store_label(url)!r}: use 'memory', 'sqlite:PATH' or a postgresql://user@host/db URL"
    )
