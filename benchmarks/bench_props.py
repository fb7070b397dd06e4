"""Component props on the wire: the default (append) mode against strict RFC 6902, one gateway run each.

:func:`agui_engine.cli.bench_props.run_component_call` runs one ``LLMAgent`` run over a scripted
model that shows a component whose arguments arrive in 1-8 character chunks, and encodes
every event as the gateway's SSE frame. ``ours`` is the default (growing strings travel as
``append`` operations), ``strict-rfc6902`` re-sends each growing string with ``replace``.
The bytes of both are checked in every run (CI included): the default stays within
:data:`~agui_engine.cli.bench_props.TARGET_PROPS_RATIO` of the call's ``TOOL_CALL_ARGS`` bytes.

``long-string-<size>``: CPU of the whole run on one long string prop at 64 KiB, 512 KiB and
2 MiB of arguments; per chunk it stays flat (``agui-engine bench`` prints the per-chunk
figures; the summary here prints each group's ratios).

Run ``pytest benchmarks/bench_props.py --benchmark-enable --benchmark-only``.
"""

from __future__ import annotations

from typing import Any

import pytest

from agui_engine.cli.bench_corpus import make_documents, split_chunks
from agui_engine.cli.bench_props import (
    CPU_SIZES,
    TARGET_PROPS_RATIO,
    WIRE_DOCUMENTS,
    long_string_arguments,
    run_component_call,
    wire_bytes,
)

#: strict mode is quadratic in a long string: measured on the shapes where it finishes in well under a second
STRICT_DOCUMENTS = ("dashboard-64KB", "deep-200")


@pytest.mark.parametrize("document", ["dashboard-64KB", "deep-200"])
@pytest.mark.parametrize("impl", ["ours", "strict-rfc6902"])
def test_component_run(benchmark: Any, document: str, impl: str) -> None:
    chunks = split_chunks(make_documents()[document])
    benchmark.group = f"component run {document} ({len(chunks)} chunks)"
    frames = benchmark(run_component_call, chunks, append_strings=impl == "ours")
    assert frames > len(chunks)


@pytest.mark.parametrize("size", CPU_SIZES[:2], ids=lambda s: f"{s // 1024}KiB")
def test_long_string_run(benchmark: Any, size: int) -> None:
    chunks = split_chunks(long_string_arguments(size))
    benchmark.group = f"long-string {size // 1024} KiB ({len(chunks)} chunks)"
    benchmark.extra_info["chunks"] = len(chunks)
    assert benchmark(run_component_call, chunks) > len(chunks)


def test_props_bytes_within_target_on_every_shape() -> None:
    for name in WIRE_DOCUMENTS:
        measured = wire_bytes(name, strict=name in STRICT_DOCUMENTS)
        assert measured.ratio <= TARGET_PROPS_RATIO, measured


@pytest.mark.parametrize("impl", ["ours", "jsonpatch-append"])
def test_accumulate_long_string(benchmark: Any, impl: str) -> None:
    """The client half: a 128 KiB string prop applied by the Accumulator (in-place appends) against
    jsonpatch's AppendOperation (``old + new``: a copy of the whole string per event)."""
    import jsonpatch

    from agui_engine.genui.component_stream import COMPONENT_HANDLERS, COMPONENT_PROPS_DELTA, component_blocks
    from agui_engine.protocol.accumulator import Accumulator

    events: list[Any] = []
    run_component_call(split_chunks(long_string_arguments(128 * 1024)), on_frame=lambda e, _f: events.append(e))
    deltas = [e.value["operations"] for e in events if getattr(e, "name", "") == COMPONENT_PROPS_DELTA]
    benchmark.group = f"accumulate a 128 KiB string prop ({len(deltas)} deltas)"

    def ours() -> Any:
        acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
        acc.apply_all(events)
        return component_blocks(acc)[0]["props"]

    def theirs() -> Any:
        doc: Any = {}
        for ops in deltas:
            doc = jsonpatch.JsonPatchWithAppend(ops).apply(doc, in_place=True)
        return doc

    props = benchmark.pedantic(ours if impl == "ours" else theirs, rounds=1, iterations=1)
    assert len(props["content"]) > 100_000
