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
"""

from __future__ import annotations

from typing import Any

import pytest

from agui_engine.cli.bench import CONTENDERS, QUADRATIC_LIMITS, Contender, available_contenders, quadratic_limit
from agui_engine.cli.bench_corpus import make_documents, split_chunks

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
