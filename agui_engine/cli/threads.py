"""``agui-engine threads``: list, export and prune the threads a durable store keeps.

``agui-engine threads list [--store URL] [--principal NAME] [--search TEXT] [--limit N]`` prints one
line per thread, newest first (id, runs, when last written, title; tab-separated);
``export [--principal NAME]`` writes every thread as JSON lines to stdout (one object per thread:
``threadId``, ``title``, ``createdAt``, ``updatedAt``, ``dropped``, ``runs``: the kept run records
as the store holds them, oldest first, each naming its principal); ``prune`` applies the store's retention now (age, total bytes) and says how many
threads it deleted. ``--store`` is ``serve``'s (default: the SQLite file in the user's data
directory); a running ``serve`` may keep writing meanwhile (SQLite: WAL readers never block it).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time
from typing import Any

import msgspec

from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.threads import MAX_THREAD_PAGE, decode_cursor
from agui_engine.transports.thread_store import default_sqlite_path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("list", "export", "prune"),
                        help="list: one line per thread, newest first; export: JSON lines of every thread and its "
                             "runs; prune: apply the store's retention now")
    parser.add_argument("--store", default="sqlite:", metavar="URL",
                        help=f"the store serve keeps threads in: sqlite:PATH (default: {default_sqlite_path()}) or "
                             "postgresql://user@host/db")
    parser.add_argument("--principal", default=None, metavar="NAME",
                        help="only this principal's threads (a name of the tokens file; '' for runs without one; default: every principal's)")
    parser.add_argument("--search", default=None, metavar="TEXT", help="list: only titles containing TEXT (default: every title)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="list: at most N threads (default: all)")


def run(args: argparse.Namespace) -> int:
    if args.store.strip().lower() == "memory":
        raise UsageError("--store memory keeps nothing after serve ends: name a sqlite:PATH or postgresql:// store")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: give a count >= 1")
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from agui_engine.transports.open_threads import open_thread_store

    store = await open_thread_store(args.store)
    try:
        now = time.time()
        if args.action == "prune":
            deleted = await store.prune(now)
            print(f"pruned {deleted} thread{'s' if deleted != 1 else ''}", flush=True)
            return 0
        left = args.limit
        after = None
        out = sys.stdout
        while left is None or left > 0:
            size = MAX_THREAD_PAGE if left is None else min(left, MAX_THREAD_PAGE)
            page = await store.list_threads(args.principal, limit=size, after=after,
                                            search=args.search if args.action == "list" else None, now=now)
            for t in page.threads:
                if args.action == "list":
                    when = datetime.datetime.fromtimestamp(t.updated_at / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M")
                    out.write(f"{t.thread_id}\t{t.runs} run{'s' if t.runs != 1 else ''}\t{when}Z\t{t.title}\n")
                else:
                    held = await store.thread_runs(t.thread_id, now)
                    doc: dict[str, Any] = {
                        "threadId": t.thread_id, "title": t.title, "createdAt": t.created_at,
                        "updatedAt": t.updated_at, "dropped": held.dropped,
                        "runs": [msgspec.Raw(r) for r in held.records],
                    }
                    out.write(msgspec.json.encode(doc).decode() + "\n")
            if left is not None:
                left -= len(page.threads)
            if page.next_cursor is None:
                break
            after = decode_cursor(page.next_cursor)
        return 0
    finally:
        await store.aclose()
