"""Component props on the wire: bytes against the arguments, and CPU per chunk as arguments grow.

Theory of operation
-------------------
Two measurements of one whole gateway run (:class:`~agui_engine.loops.llm_agent.LLMAgent`
over a scripted model that shows one component, every event encoded as the SSE
frame the gateway writes, ``id: <runId>:<seq>`` included), shared by
``agui-engine bench`` and ``benchmarks/bench_props.py``:

* **Bytes** (:func:`wire_bytes`): per shape of the bench corpus (dashboard,
  markdown, table, deep; :data:`WIRE_DOCUMENTS`), the SSE bytes of the call's
  ``tambo.component.props_delta`` frames against the SSE bytes of its
  ``TOOL_CALL_ARGS`` frames, in the default (append) mode and in strict RFC 6902
  mode. Target: at most :data:`TARGET_PROPS_RATIO` in the default mode on every shape.
* **CPU per chunk** (:func:`cpu_per_chunk`): one long markdown prop at 64 KiB,
  512 KiB and 2 MiB of arguments (:data:`CPU_SIZES`), the same 1-8 character
  chunks; everything the gateway does per model chunk (tokenizer, standard
  parameter filter, props filter, status tracking, the decision, the agent's
  pass-through, SSE encoding) divided by the number of chunks. Flat means the
  2 MiB figure is within :data:`TARGET_CPU_GROWTH` of the 64 KiB one.

The model is scripted (no IO); the clock is ``time.process_time`` (CPU, not wall).
This is an entry point's helper (it reads the clock), not part of the IO-free core.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..genui.component_stream import COMPONENT_PROPS_DELTA, MAX_COMPONENT_ARGS_CHARS
from ..genui.components import Component
from ..llm import Finish, LLMStreamItem, LLMTool, TextDelta, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, ToolChoice
from ..loops.llm_agent import LLMAgent
from ..protocol.codec import encode_sse
from ..protocol.events import CustomEvent, Event, RunAgentInput, ToolCallArgsEvent, UserMessage
from .bench_corpus import DOCUMENT_SEED, make_documents, split_chunks

__all__ = [
    "CPU_SIZES",
    "CpuPerChunk",
    "TARGET_CPU_GROWTH",
    "TARGET_PROPS_RATIO",
    "WIRE_DOCUMENTS",
    "WireBytes",
    "check_props_targets",
    "cpu_per_chunk",
    "format_props_markdown",
    "format_props_report",
    "long_string_arguments",
    "run_component_call",
    "wire_bytes",
]

#: One document per shape of the bench corpus (the largest of each).
WIRE_DOCUMENTS: Final = ("dashboard-64KB", "markdown-50KB", "table-200KB", "deep-200")
#: The issue's bound: props_delta SSE bytes at most this many times the call's TOOL_CALL_ARGS SSE bytes.
TARGET_PROPS_RATIO: Final = 12.0
#: Argument sizes for CPU per chunk; the largest stays just under MAX_COMPONENT_ARGS_CHARS.
CPU_SIZES: Final = (64 * 1024, 512 * 1024, MAX_COMPONENT_ARGS_CHARS - 1024)
#: "Flat": CPU per chunk at the largest size at most this factor of the smallest (timing noise
#: on a shared 2-core machine is a few %, allocator and cache effects of a 2 MiB string some more).
TARGET_CPU_GROWTH: Final = 1.5

#: A component with free-form props: every shape of the corpus fits it.
_FREE_FORM: Final = Component("Doc", "Shows a document.", {"type": "object", "additionalProperties": True})
_STATUS: Final = {"_tambo_statusMessage": "Showing the document", "_tambo_completionStatusMessage": "Shown"}
_RUN_ID: Final = "run-bench"


class _ScriptedModel:
    """A model that writes a short text, then one component call with the given argument chunks."""

    def __init__(self, chunks: Sequence[str]) -> None:
        self.chunks = chunks
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]:
        self.calls += 1
        first = self.calls == 1

        async def stream() -> AsyncIterator[LLMStreamItem]:
            if not first:  # after the component's result: a closing sentence ends the run
                yield TextDelta(text="Done.")
                yield Finish(reason="stop")
                return
            yield ToolCallStart(index=0, id="call_1", name=_FREE_FORM.tool_name)
            for chunk in self.chunks:
                yield ToolCallArgsDelta(index=0, delta=chunk)
            yield ToolCallEnd(index=0)
            yield Finish(reason="tool_calls")

        return stream()


def run_component_call(
    chunks: Sequence[str], *, append_strings: bool = True, on_frame: Callable[[Event, bytes], None] | None = None
) -> int:
    """Run one LLMAgent run that shows the component with these argument chunks; encode every
    event as the gateway's SSE frame. Returns the number of frames; ``on_frame(event, frame)``
    sees each one."""
    agent = LLMAgent(_ScriptedModel(chunks), components=[_FREE_FORM], append_strings=append_strings,
                     id_factory=_counter())
    run_input = RunAgentInput(thread_id="t", run_id=_RUN_ID, messages=[UserMessage(id="u", content="show it")])

    async def drive() -> int:
        seq = 0
        async for event in agent.run(run_input):
            seq += 1
            frame = encode_sse(event, f"{_RUN_ID}:{seq}")
            if on_frame is not None:
                on_frame(event, frame)
        return seq

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(drive())
    finally:
        loop.close()


def _counter() -> Callable[[], str]:
    count = iter(range(1, 1 << 62))
    return lambda: f"id{next(count)}"


def _arguments(document: str) -> str:
    """The document as a model writes it: the standard parameters first."""
    return json.dumps({**_STATUS, **json.loads(document)}, ensure_ascii=False)


@dataclass(frozen=True)
class WireBytes:
    """SSE bytes of one component call: its TOOL_CALL_ARGS frames and its props_delta frames."""

    document: str
    argument_chars: int
    chunks: int
    args_sse_bytes: int
    props_sse_bytes: int
    strict_props_sse_bytes: int | None

    @property
    def ratio(self) -> float:
        return self.props_sse_bytes / self.args_sse_bytes

    @property
    def strict_ratio(self) -> float | None:
        if self.strict_props_sse_bytes is None:
            return None
        return self.strict_props_sse_bytes / self.args_sse_bytes


def _sse_bytes(chunks: Sequence[str], append_strings: bool) -> tuple[int, int]:
    totals = [0, 0]

    def count(event: Event, frame: bytes) -> None:
        if isinstance(event, ToolCallArgsEvent):
            totals[0] += len(frame)
        elif isinstance(event, CustomEvent) and event.name == COMPONENT_PROPS_DELTA:
            totals[1] += len(frame)

    run_component_call(chunks, append_strings=append_strings, on_frame=count)
    return totals[0], totals[1]


def wire_bytes(name: str, *, strict: bool = True) -> WireBytes:
    """Measure one corpus document (a name of :func:`~agui_engine.cli.bench_corpus.make_documents`);
    ``strict`` also runs the strict RFC 6902 mode (quadratic: seconds on the long string)."""
    text = _arguments(make_documents()[name])
    chunks = split_chunks(text)
    args_bytes, props_bytes = _sse_bytes(chunks, True)
    strict_bytes = _sse_bytes(chunks, False)[1] if strict else None
    return WireBytes(name, len(text), len(chunks), args_bytes, props_bytes, strict_bytes)


def long_string_arguments(size: int, seed: int = DOCUMENT_SEED) -> str:
    """Component arguments of exactly ``size`` characters: the standard parameters, a title and
    one long markdown ``content`` string (escapes, non-ASCII, emoji)."""
    rng = random.Random(seed)
    words = ["revenue", "growth", "quarter", "café", "東京", "naïve", "📈", "**bold**", '"quoted"', "a\\b", "tab\t"]
    pieces: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        piece = ("## " + line if rng.random() < 0.1 else "- " + line if rng.random() < 0.3 else line) + "\n"
        pieces.append(piece)
        total += len(piece)
    content = "".join(pieces)
    text = _arguments(json.dumps({"title": "Report", "content": content}, ensure_ascii=False))
    while len(text) > size:  # cut the content by the overshoot; escapes make one pass not enough
        content = content[: len(content) - (len(text) - size)]
        text = _arguments(json.dumps({"title": "Report", "content": content}, ensure_ascii=False))
    # a cut escape may leave it short: plain characters (one JSON character each) fill it up
    content += "." * (size - len(text))
    return _arguments(json.dumps({"title": "Report", "content": content}, ensure_ascii=False))


@dataclass(frozen=True)
class CpuPerChunk:
    """CPU time of one whole run, per argument chunk."""

    size: int
    chunks: int
    seconds: float

    @property
    def us_per_chunk(self) -> float:
        return self.seconds / self.chunks * 1e6


def cpu_per_chunk(size: int, *, repeat: int = 1) -> CpuPerChunk:
    """The best of ``repeat`` runs of a ``size``-character long-string call, per chunk."""
    chunks = split_chunks(long_string_arguments(size))
    best = float("inf")
    for _ in range(max(1, repeat)):
        start = time.process_time()
        run_component_call(chunks)
        best = min(best, time.process_time() - start)
    return CpuPerChunk(size, len(chunks), best)


def _size_label(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size // 1024} KiB"


def check_props_targets(wire: Sequence[WireBytes], cpu: Sequence[CpuPerChunk]) -> list[str]:
    """Each target as an ``ok`` / ``MISS`` line."""
    lines = []
    for w in wire:
        ok = w.ratio <= TARGET_PROPS_RATIO
        lines.append(f"  {'ok  ' if ok else 'MISS'} props_delta / TOOL_CALL_ARGS SSE bytes on {w.document}: "
                     f"{w.ratio:.2f}x (<= {TARGET_PROPS_RATIO:g}x)")
    if len(cpu) >= 2:
        growth = cpu[-1].us_per_chunk / cpu[0].us_per_chunk
        ok = growth <= TARGET_CPU_GROWTH
        lines.append(f"  {'ok  ' if ok else 'MISS'} CPU per chunk {_size_label(cpu[-1].size)} vs "
                     f"{_size_label(cpu[0].size)}: {growth:.2f}x (<= {TARGET_CPU_GROWTH:g}x, flat)")
    return lines


def format_props_markdown(wire: Sequence[WireBytes]) -> str:
    """The bytes table as Markdown, exactly as the README shows it (``agui-engine bench
    --props-table`` prints it; ``tests/test_readme.py`` compares the two byte for byte)."""
    out = ["| corpus shape | TOOL_CALL_ARGS SSE bytes | props_delta SSE bytes | ratio | strict RFC 6902 |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for w in wire:
        strict = "-" if w.strict_ratio is None else f"{w.strict_ratio:.1f}x"
        out.append(f"| {w.document} | {w.args_sse_bytes:,} | {w.props_sse_bytes:,} | {w.ratio:.2f}x | {strict} |")
    return "\n".join(out)


def format_props_report(wire: Sequence[WireBytes], cpu: Sequence[CpuPerChunk]) -> str:
    """The two tables and the targets, as printed by ``agui-engine bench``."""
    out = ["component props on the wire (one LLMAgent run, SSE frames as the gateway writes them):",
           f"  {'document':<16}{'args chars':>11}{'chunks':>8}{'ARGS SSE B':>12}{'props SSE B':>13}"
           f"{'ratio':>8}{'strict RFC 6902':>17}"]
    for w in wire:
        strict = "-" if w.strict_ratio is None else f"{w.strict_ratio:.1f}x"
        out.append(f"  {w.document:<16}{w.argument_chars:>11}{w.chunks:>8}{w.args_sse_bytes:>12}"
                   f"{w.props_sse_bytes:>13}{w.ratio:>7.2f}x{strict:>17}")
    if cpu:
        out.append("")
        out.append("CPU per argument chunk, one long string prop (the whole run: parse, filter, events, SSE):")
        for c in cpu:
            out.append(f"  {_size_label(c.size):>9}  {c.chunks:>8} chunks  {c.us_per_chunk:7.2f} us/chunk")
    targets = check_props_targets(wire, cpu)
    if targets:
        out.append("")
        out.append("targets (spec/components.md, operations on the wire):")
        out.extend(targets)
    return "\n".join(out)
