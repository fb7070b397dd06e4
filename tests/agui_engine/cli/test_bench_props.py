"""agui_engine.cli.bench_props: the props-on-the-wire measurement runs the real agent and counts real frames."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest

from agui_engine.cli import main
from agui_engine.cli.bench_corpus import split_chunks
from agui_engine.cli.bench_props import (
    CpuPerChunk,
    WireBytes,
    check_props_targets,
    long_string_arguments,
    run_component_call,
    wire_bytes,
)
from agui_engine.genui.component_stream import COMPONENT_END, COMPONENT_PROPS_DELTA
from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.events import CustomEvent, Event


def test_long_string_arguments_have_the_exact_size() -> None:
    for size in (4096, 20_000):
        text = long_string_arguments(size)
        assert len(text) == size
        doc = json.loads(text)
        assert list(doc)[:2] == ["_tambo_statusMessage", "_tambo_completionStatusMessage"]
        assert len(doc["content"]) > size * 0.8


@pytest.mark.parametrize("append", [True, False])
def test_frames_are_real_sse_and_the_props_apply(append: bool) -> None:
    frames: list[bytes] = []
    events: list[Event] = []
    text = long_string_arguments(3000)
    n = run_component_call(split_chunks(text), append_strings=append,
                           on_frame=lambda ev, frame: (frames.append(frame), events.append(ev)))
    assert n == len(frames) and frames[0].startswith(b"id: run-bench:1\ndata: ")
    decoded = EventStreamDecoder().feed(b"".join(frames))
    assert [type(e) for e in decoded] == [type(e) for e in events]
    ops = [o for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_PROPS_DELTA
           for o in e.value["operations"]]
    kinds = {o["op"] for o in ops}
    assert ("append" in kinds) == append and ("replace" in kinds) != append
    props = jsonpatch.JsonPatchWithAppend(ops).apply({})
    final = next(e.value["finalProps"] for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END)
    expected = {k: v for k, v in json.loads(text).items() if not k.startswith("_tambo_")}
    assert props == final == expected


def test_deep_shape_bytes_append_within_target_and_strict_larger() -> None:
    measured = wire_bytes("deep-200")
    assert measured.args_sse_bytes > measured.argument_chars
    assert measured.ratio <= 12
    assert measured.strict_ratio is not None and measured.strict_props_sse_bytes is not None
    assert measured.strict_props_sse_bytes > measured.props_sse_bytes


def test_targets_lines() -> None:
    wire = [WireBytes("a", 10, 2, 100, 300, None), WireBytes("b", 10, 2, 100, 1300, 5000)]
    cpu = [CpuPerChunk(64 * 1024, 100, 1e-3), CpuPerChunk(2 * 1024 * 1024, 1000, 1.1e-2)]
    lines = check_props_targets(wire, cpu)
    assert lines[0].startswith("  ok   props_delta / TOOL_CALL_ARGS SSE bytes on a: 3.00x")
    assert lines[1].startswith("  MISS props_delta / TOOL_CALL_ARGS SSE bytes on b: 13.00x")
    assert lines[2].startswith("  ok   CPU per chunk 2.0 MiB vs 64 KiB: 1.10x")


def test_cli_bench_prints_the_props_tables(capsys: Any) -> None:
    assert main(["bench", "--documents", "deep-200", "--contenders", "ours", "--repeat", "1",
                 "--props-sizes", "8", "32"]) == 0
    out = capsys.readouterr().out
    assert "component props on the wire" in out and "deep-200" in out
    assert "CPU per argument chunk" in out and "8 KiB" in out and "32 KiB" in out
    assert "props_delta / TOOL_CALL_ARGS SSE bytes on deep-200" in out
