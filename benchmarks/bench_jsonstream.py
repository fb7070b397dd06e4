"""Incremental JSON -> JSON Patch: PatchStream against re-parsing the prefix, side by side in one run.

Workloads (``agui_engine.cli.bench_corpus.make_documents``, seeded): a 200 B weather card, the dashboard
shape at 1, 4, 5, 16 and 64 KB, a 12.5 and a 50 KB markdown string, a 50 and a 200 KB table,
nesting 50 and 200 deep; each split into 1-8 character chunks by a seeded generator
(``agui_engine.cli.bench_corpus.split_chunks``), so escapes, numbers and literals are cut anywhere.

Members of each group (one group per document):

* ``ours``: ``PatchStream()`` (default mode: RFC 6902 only, strings re-sent with ``replace``);
* ``append``: ``PatchStream(append_strings=True)``;
* ``jiter``: ``jiter.from_json(prefix, partial_mode="trailing-strings")`` after every chunk;
* ``jiter-make-patch``: the same plus ``jsonpatch.make_patch`` between successive values
  (what a Tambo-style tracker does);
* ``partial-json``: ``partial_json_parser.loads(prefix)`` after every chunk;
* ``ijson``: ijson's push parser (``basic_parse_coro``, yajl2_c): events only, no partial strings;
* ``msgspec``: ``msgspec.json.decode`` of the whole document once: the floor.

The re-parsing contenders are quadratic: they are measured up to ``QUADRATIC_LIMITS`` bytes
(jiter alone up to 64 KB, where the issue sets the 100x target), with one round.

Run: ``pytest benchmarks/bench_jsonstream.py --benchmark-enable --benchmark-only``; the summary
prints every contender's ratio to ``ours`` per document (benchmarks/conftest.py). For the
µs/chunk, MB/s, patch-bytes and growth table run ``agui-engine bench`` (same documents, same
contenders, same code). In CI (``--benchmark-disable``) each runs once, on small documents
only for the quadratic contenders, as a smoke test.

Growth per 4x, side by side (issue 35: "the tokenizer's default mode flat from 16 to 64 KB"):
``python benchmarks/bench_jsonstream.py [reps]`` streams the dashboard at 16, 64 and 256 KB through
each mode back to back, ``reps`` times, and prints the CPU time (``time.process_time``: the machine is
shared) per input byte and, per repetition, the ratio of each size to the one 4x smaller, as the
median and the spread [min-max] over the repetitions. Wall-clock timings (pytest-benchmark's) on a
loaded machine swing by more than the growth being measured. ``test_growth_rows_run`` runs it once,
tiny, as a smoke test.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Any

import pytest

from agui_engine.cli.bench import CONTENDERS, QUADRATIC_LIMITS, Contender, available_contenders, quadratic_limit
from agui_engine.cli.bench_corpus import _dashboard, make_documents, split_chunks
from agui_engine.jsonstream import PatchStream

DOCUMENTS = make_documents()
CHUNKS = {name: split_chunks(text) for name, text in DOCUMENTS.items()}

BY_ID: dict[str, Contender] = {c.id: c for c in CONTENDERS}
INSTALLED = {c.id for c in available_contenders()}
# In CI (benchmarks disabled) the quadratic contenders only smoke-test the small documents.
SMOKE_LIMIT = 1_500


def stream_through(contender: Contender, chunks: list[str]) -> int:
    feed, close = contender.make()
    out = 0
    for chunk in chunks:
        out += feed(chunk)
    return out + close()


@pytest.mark.parametrize("workload", list(DOCUMENTS))
@pytest.mark.parametrize("impl", list(BY_ID))
def test_jsonstream(benchmark: Any, impl: str, workload: str) -> None:
    contender = BY_ID[impl]
    if impl not in INSTALLED:
        pytest.skip(f"{contender.requires} is not installed")
    size = len(DOCUMENTS[workload].encode())
    quadratic = contender.name in QUADRATIC_LIMITS
    if size > quadratic_limit(contender.name) or (quadratic and benchmark.disabled and size > SMOKE_LIMIT):
        pytest.skip(f"{impl} re-parses the prefix after every chunk (quadratic); not run on {size} bytes")
    benchmark.group = f"jsonstream-{workload}"
    benchmark.extra_info.update(impl=impl, bytes=size, chunks=len(CHUNKS[workload]))
    rounds = 1 if quadratic and size > 4_000 else 5
    benchmark.pedantic(stream_through, args=(contender, CHUNKS[workload]), rounds=rounds, iterations=1)


# --------------------------------------------------------------------------------------------
# growth per 4x, both modes, side by side in one run
# --------------------------------------------------------------------------------------------

GROWTH_SIZES_KB = (16, 64, 256)


def _cpu_per_byte(chunks: list[str], size: int, append: bool) -> float:
    """CPU ns per input byte of one fresh PatchStream over ``chunks`` (best of 3)."""
    best = float("inf")
    for _ in range(3):
        stream = PatchStream(append_strings=append)
        feed = stream.feed
        start = time.process_time()
        for chunk in chunks:
            feed(chunk)
        stream.close()
        best = min(best, time.process_time() - start)
    return best / size * 1e9


def growth_rows(reps: int = 7, sizes_kb: tuple[int, ...] = GROWTH_SIZES_KB) -> list[dict[str, Any]]:
    """Per mode: ``{mode, ns_per_byte: {kb: [per rep]}, growth: {(small, big): [per rep]}}``, every
    size measured back to back in each repetition (the seeded dashboard shape of the corpus)."""
    docs = {kb: _dashboard(random.Random(7), kb * 1024) for kb in sizes_kb}
    chunked = {kb: (split_chunks(text), len(text.encode())) for kb, text in docs.items()}
    rows = []
    for append in (False, True):
        per_byte: dict[int, list[float]] = {kb: [] for kb in sizes_kb}
        for _ in range(reps):
            for kb in sizes_kb:
                per_byte[kb].append(_cpu_per_byte(*chunked[kb], append))
        pairs = list(zip(sizes_kb, sizes_kb[1:]))
        rows.append({"mode": "append" if append else "default", "ns_per_byte": per_byte,
                     "growth": {(a, b): [y / x for x, y in zip(per_byte[a], per_byte[b])] for a, b in pairs}})
    return rows


def print_growth(rows: list[dict[str, Any]]) -> None:
    print("| mode | " + " | ".join(f"{kb} KB ns/byte" for kb in rows[0]["ns_per_byte"]) + " | "
          + " | ".join(f"growth {a}->{b} KB: median [min-max]" for a, b in rows[0]["growth"]) + " |")
    print("| --- " * (1 + len(rows[0]["ns_per_byte"]) + len(rows[0]["growth"])) + "|")
    for r in rows:
        cells = [f"{statistics.median(v):.0f}" for v in r["ns_per_byte"].values()]
        cells += [f"{statistics.median(g):.2f} [{min(g):.2f}-{max(g):.2f}]" for g in r["growth"].values()]
        print(f"| {r['mode']} | " + " | ".join(cells) + " |")


def test_growth_rows_run() -> None:
    """The growth table's code runs (one repetition, small sizes); no timing is asserted."""
    rows = growth_rows(reps=1, sizes_kb=(1, 4))
    assert [r["mode"] for r in rows] == ["default", "append"]
    assert all(g[0] > 0 for r in rows for g in r["growth"].values())


if __name__ == "__main__":
    print_growth(growth_rows(reps=int(sys.argv[1]) if len(sys.argv) > 1 else 7))
