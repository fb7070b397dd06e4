"""Durable thread stores: the interface, their budget, and opening one from a URL.

Theory of operation
-------------------
A *thread store* keeps what :mod:`transports.history` describes -- each thread's kept run
records (compacted, oldest first) -- and, per thread, what a thread list shows (title,
created, updated, runs; :class:`~agui_engine.protocol.threads.ThreadSummary`). It is one small
async interface, :class:`DurableThreadStore`: the history's ``keep_run`` / ``thread_runs``
(so the registry keeps and reads runs through it exactly as through the event log's store),
plus ``list_threads``, ``thread_access``, ``delete_thread``, ``set_title`` and ``aclose``.
Open interrupts need no table of their own: a run that ended with an ``interrupt`` outcome
keeps its ``RUN_FINISHED`` in its record, and the interrupts open on a branch are those of
its last run (:func:`~agui_engine.protocol.threads.open_interrupts`), so every store -- and
every node reading the same database -- answers a resume the same way after any restart.

Stores (:func:`~transports.open_threads.open_thread_store` ``(url)``, ``agui-engine serve --store``):

* ``sqlite:PATH`` (the default of ``serve``: :func:`default_sqlite_path`) --
  :class:`~transports.sqlite_threads.SqliteThreadStore`, the standard library's ``sqlite3``
  in WAL mode on one worker thread (one writer), durable across ``kill -9``.
* ``postgresql://...`` -- :class:`~transports.postgres_threads.PostgresThreadStore`
  (``pip install 'agui-engine[postgres]'``), a pool; several gateway nodes on one database
  see each other's threads at once.
* ``memory`` -- no durable store: the event log keeps the history, as before (in memory, or
  in Redis with a Redis event log).

**Retention** (:class:`StoreBudget`, constants in spec/limits.md), applied in the same
transaction that keeps a run: a thread's oldest runs past ``max_runs_per_thread`` or
``max_thread_bytes`` (its newest run always stays), threads idle longer than
``retention_seconds``, a principal's least recently written threads past
``max_threads_per_principal``, and the least recently written threads past
``max_total_bytes``. ``agui-engine threads prune`` applies the same from the command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.threads import ThreadPage

from .history import HistoryBudget, ThreadStore

__all__ = [
    "DurableThreadStore",
    "STORE_MAX_RUNS_PER_THREAD",
    "STORE_MAX_THREADS_PER_PRINCIPAL",
    "STORE_MAX_THREAD_BYTES",
    "STORE_MAX_TOTAL_BYTES",
    "STORE_RETENTION_SECONDS",
    "StoreBudget",
    "ThreadSchemaError",
    "default_sqlite_path",
    "store_label",
]

#: Runs a durable store keeps per thread (oldest evicted first): ten times the in-memory
#: history's, so a long working session with many tool rounds (each a run) stays whole.
STORE_MAX_RUNS_PER_THREAD = 1000

#: Bytes of records a durable store keeps per thread: a thousand long turns.
STORE_MAX_THREAD_BYTES = 16 * 1024 * 1024

#: Bytes of records a durable store keeps in all: the least recently written threads are
#: deleted past it. 4 GiB is a few hundred thousand ordinary threads, well within one disk.
STORE_MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024

#: How long a durable store keeps a thread after its last run: a quarter (90 days), what
#: chat products commonly keep an idle conversation reachable for.
STORE_RETENTION_SECONDS = 90 * 24 * 3600.0

#: Threads one principal keeps at most; past it its least recently written are deleted. A
#: person starts a few dozen a day; this bounds one token's share of a shared database.
STORE_MAX_THREADS_PER_PRINCIPAL = 10_000


class ThreadSchemaError(UsageError):
    """The database's thread schema is newer than this code knows (written by a newer
    agui-engine): refused, never downgraded."""


class StoreBudget(msgspec.Struct, frozen=True, kw_only=True):
    """What a durable store keeps (see the constants). Raises UsageError at construction
    for a bound below 1."""

    max_runs_per_thread: int = STORE_MAX_RUNS_PER_THREAD
    max_thread_bytes: int = STORE_MAX_THREAD_BYTES
    max_total_bytes: int = STORE_MAX_TOTAL_BYTES
    retention_seconds: float = STORE_RETENTION_SECONDS
    max_threads_per_principal: int = STORE_MAX_THREADS_PER_PRINCIPAL

    def __post_init__(self) -> None:
        for name in ("max_runs_per_thread", "max_thread_bytes", "max_total_bytes", "max_threads_per_principal"):
            if getattr(self, name) < 1:
                raise UsageError(f"StoreBudget.{name} must be >= 1, got {getattr(self, name)}")
        if not self.retention_seconds > 0:
            raise UsageError(f"StoreBudget.retention_seconds must be > 0, got {self.retention_seconds}")

    def history(self) -> HistoryBudget:
        """The same bounds as the history's budget (what ``build_record`` trims to)."""
        return HistoryBudget(
            max_runs_per_thread=self.max_runs_per_thread,
            max_thread_bytes=self.max_thread_bytes,
            max_total_bytes=self.max_total_bytes,
            retention_seconds=self.retention_seconds,
        )


@runtime_checkable
class DurableThreadStore(ThreadStore, Protocol):
    """A thread store (module docstring). ``now``: wall-clock Unix seconds (retention).
    Every method raises EventLogUnavailableError when the database does not answer."""

    async def thread_access(self, thread_id: str, now: float) -> list[tuple[str, str]]:
        """(principal, key hash) of each kept run of the thread (empty: unknown or expired)."""
        ...

    async def list_threads(
        self, principal: str | None, *, limit: int, after: tuple[int, str] | None = None, search: str | None = None,
        now: float,
    ) -> ThreadPage:
        """The threads whose first kept run ``principal`` ran (None: every thread, for the
        ``agui-engine threads`` command), newest first
        (``(updatedAt, threadId)`` descending), after the cursor key ``after``, those whose
        title contains ``search`` (case-insensitive) only, at most ``limit``."""
        ...

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and its runs; False when it was not there."""
        ...

    async def set_title(self, thread_id: str, title: str) -> bool:
        """Set the thread's title (kept over the automatic one); False when not there."""
        ...

    async def prune(self, now: float) -> int:
        """Apply the budget's age and total bounds now; the number of threads deleted."""
        ...

    async def all_threads(self) -> list[tuple[str, str]]:
        """(thread id, principal) of every thread, least recently written first."""
        ...

    async def aclose(self) -> None:
        """Close the connections (idempotent)."""
        ...


def default_sqlite_path() -> Path:
    """Where ``serve`` keeps threads by default: ``$XDG_DATA_HOME/agui-engine/threads.sqlite3``
    (``~/.local/share/agui-engine/`` when XDG_DATA_HOME is unset or not absolute); on macOS
    ``~/Library/Application Support/agui-engine/``, on Windows ``%LOCALAPPDATA%\\agui-engine\\``."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "agui-engine" / "threads.sqlite3"


def store_label(url: str) -> str:
    """``url`` without its password, for logs and ``--help``."""
    if "://" in url and "@" in url.partition("://")[2].partition("/")[0]:
        scheme, _, rest = url.partition("://")
        creds, _, host = rest.partition("@")
        user = creds.partition(":")[0]
        return f"{scheme}://{user}{':***' if ':' in creds else ''}@{host}"
    return url
