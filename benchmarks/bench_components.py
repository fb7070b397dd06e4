"""Component streaming against a Tambo-style tracker, on the same argument streams.

Both sides turn a component call's argument fragments into
``tambo.component.props_delta`` CUSTOM events:

* **ComponentStream** (this engine): one pass of the incremental tokenizer,
  operations at nested paths, standard parameters filtered out, strict nulls
  held back, per-prop status.
* **Tambo-style tracker**: a faithful Python port of Tambo's
  ``ComponentStreamTracker.processJsonDelta`` (``reference/generative-ui-peers.md``
  §8.1): append the fragment, re-parse the whole prefix with a partial-JSON
  parser (``partial_json_parser``, the Python port of ``partial-json``), diff the
  top-level keys against the previous parse (deep equality), emit
  ``add``/``replace``/``remove`` of whole top-level values and the status map.
  Upstream re-parses the prefix three times per chunk (quirk Q7); the port does
  it once, so the ratio below *understates* the difference.

The documents and the token-sized chunking (1-8 characters, seeded) come from
:mod:`agui_engine.cli.bench`, with the two standard parameters first, as a strict
model writes them. The re-parse cost grows with the prefix (quadratic in the
document), so the tracker runs on documents up to 4 KB only; the engine also
runs the 16 KB and 64 KB dashboards to show its cost per chunk stays flat.

Run ``pytest benchmarks/bench_components.py --benchmark-only`` for
pytest-benchmark tables (grouped per document, both contenders side by side),
or ``python benchmarks/bench_components.py`` for the per-chunk CPU costs (medians of
interleaved rounds) and the ratios in one table. In CI (``--benchmark-disable``) each case runs once and
checks that both sides end with the same props.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from agui_engine.cli.bench_corpus import make_documents, split_chunks
from agui_engine.genui.component_stream import (
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
    ComponentStream,
)
from agui_engine.genui.components import Component, split_standard_parameters
from agui_engine.protocol.events import CustomEvent

partial_json_parser = pytest.importorskip("partial_json_parser") if "pytest" in sys.modules else None

#: Documents both contenders run on (the tracker's cost is quadratic beyond these).
SHARED_DOCUMENTS = ("weather-200B", "dashboard-1KB", "dashboard-4KB")
#: Larger documents only the engine runs (its cost per chunk does not grow).
ENGINE_ONLY_DOCUMENTS = ("dashboard-16KB", "dashboard-64KB")

#: Free-form props: every key is kept (no strict nulls to hold back), as for a
#: component registered without a detailed schema.
COMPONENT = Component("Dashboard", "A dashboard.", {"type": "object", "properties": {}})


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class TamboStyleTracker:
    """Tambo's ``ComponentStreamTracker`` semantics (re-parse + top-level diff), in Python."""

    MAX_SIZE = 10 * 1024 * 1024  # Tambo's limit, in UTF-16 units (characters here)

    def __init__(self, message_id: str, component_id: str, component_name: str) -> None:
        from partial_json_parser import loads

        self._loads = loads
        self.message_id = message_id
        self.component_id = component_id
        self.component_name = component_name
        self.accumulated = ""
        self.previous: dict[str, Any] = {}
        self.status: dict[str, str] = {}
        self.started = False
        self.seen: set[str] = set()
        self.previous_keys: list[str] = []

    def process_json_delta(self, delta: str) -> list[CustomEvent]:
        events: list[CustomEvent] = []
        if not self.started:
            self.started = True
            events.append(CustomEvent(name=COMPONENT_START, value={
                "messageId": self.message_id, "componentId": self.component_id,
                "componentName": self.component_name}))
        if len(self.accumulated) + len(delta) > self.MAX_SIZE:
            raise ValueError(f"Component {self.component_id} ({self.component_name}) JSON exceeds maximum size")
        self.accumulated += delta
        try:
            current = self._loads(self.accumulated)
        except Exception:  # noqa: BLE001 - the peer ignores every parse failure
            return events
        if not isinstance(current, dict):
            return events
        ops: list[dict[str, Any]] = []
        updates: dict[str, str] = {}
        new_keys: set[str] = set()
        previous = self.previous
        for key, value in current.items():
            path = "/" + _escape(key)
            if key not in self.seen:
                ops.append({"op": "add", "path": path, "value": value})
                updates[key] = "started"
                new_keys.add(key)
            elif key not in previous:
                ops.append({"op": "add", "path": path, "value": value})
                updates[key] = "streaming"
            elif previous[key] != value:
                ops.append({"op": "replace", "path": path, "value": value})
                if self.status.get(key) != "done":
                    updates[key] = "streaming"
        for key in previous:
            if key not in current:
                ops.append({"op": "remove", "path": "/" + _escape(key)})
                self.status.pop(key, None)
        if new_keys:
            for key in self.previous_keys:
                if self.status.get(key) != "done" and key not in new_keys:
                    self.status[key] = "done"
        self.status.update(updates)
        self.previous_keys = list(current)
        self.seen.update(current)
        if ops:
            events.append(CustomEvent(name=COMPONENT_PROPS_DELTA, value={
                "componentId": self.component_id, "operations": ops, "streamingStatus": dict(self.status)}))
        self.previous = current
        return events

    def finalize(self) -> dict[str, Any]:
        final = json.loads(self.accumulated)
        if not isinstance(final, dict):
            raise TypeError("final JSON is not an object")
        return final


def component_documents() -> dict[str, tuple[str, list[str]]]:
    """name -> (arguments text with the standard parameters first, its token-sized chunks)."""
    out = {}
    for name, text in make_documents().items():
        if name not in SHARED_DOCUMENTS + ENGINE_ONLY_DOCUMENTS:
            continue
        args = {"_tambo_statusMessage": "Building the dashboard",
                "_tambo_completionStatusMessage": "Built the dashboard", **json.loads(text)}
        data = json.dumps(args, ensure_ascii=False)
        out[name] = (data, split_chunks(data))
    return out


def run_engine(chunks: list[str], append_strings: bool = False) -> dict[str, Any]:
    stream = ComponentStream(COMPONENT, message_id="m", component_id="c", append_strings=append_strings)
    stream.start()
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    return stream.final_props  # type: ignore[return-value]


def run_tracker(chunks: list[str]) -> dict[str, Any]:
    tracker = TamboStyleTracker("m", "c", "Dashboard")
    for chunk in chunks:
        tracker.process_json_delta(chunk)
    final, _ = split_standard_parameters(tracker.finalize())
    return final


def run_engine_append(chunks: list[str]) -> dict[str, Any]:
    return run_engine(chunks, append_strings=True)


CONTENDERS: dict[str, Callable[[list[str]], dict[str, Any]]] = {
    "ComponentStream": run_engine,
    "ComponentStream append": run_engine_append,
    "Tambo-style tracker": run_tracker,
}

_DOCS = component_documents()
_CASES = [(doc, name) for doc in SHARED_DOCUMENTS for name in CONTENDERS] + [
    (doc, name) for doc in ENGINE_ONLY_DOCUMENTS for name in CONTENDERS if not name.startswith("Tambo")]


@pytest.mark.parametrize("document,contender", _CASES, ids=[f"{d}-{c}" for d, c in _CASES])
def test_component_streaming(benchmark: Any, document: str, contender: str) -> None:
    text, chunks = _DOCS[document]
    benchmark.group = f"component streaming: {document} ({len(chunks)} chunks)"
    benchmark.extra_info.update(chunks=len(chunks), bytes=len(text.encode()))
    final = benchmark(CONTENDERS[contender], chunks)
    expected, _ = split_standard_parameters(json.loads(text))
    assert final == expected


def wire_bytes(chunks: list[str], *, tracker: bool, append_strings: bool = False) -> int:
    """Bytes of compact JSON of every props_delta value one contender emits (untimed)."""
    encode = msgspec.json.encode
    total = 0
    if tracker:
        peer = TamboStyleTracker("m", "c", "Dashboard")
        events = [e for chunk in chunks for e in peer.process_json_delta(chunk)]
    else:
        stream = ComponentStream(COMPONENT, message_id="m", component_id="c", append_strings=append_strings)
        events = [e for chunk in chunks for e in stream.feed(chunk)] + stream.close()
    for event in events:
        if event.name == COMPONENT_PROPS_DELTA:
            total += len(encode(event.value))
    return total


def measure(chunks: list[str], contenders: dict[str, Callable[[list[str]], Any]], rounds: int) -> dict[str, list[float]]:
    """Process CPU seconds of one whole stream per contender, ``rounds`` times, interleaved.

    CPU time of this process (not wall time) and the contenders taking turns in each
    round keep a shared, noisy machine from favouring one side.
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.process_time()
            fn(chunks)
            times[name].append(time.process_time() - start)
    return times


def main(rounds: int = 7) -> int:
    """Per-chunk CPU cost and props_delta bytes of each contender, with the tracker/engine ratios.

    Costs are medians over interleaved rounds; the ratio column is the median of the
    per-round tracker/engine ratios, with their range.
    """
    print(f"{'document':<16}{'chunks':>7}  {'us/chunk: engine':>16}{'append':>8}{'tracker':>9}"
          f"{'ratio (range)':>22}  {'delta KB: engine':>16}{'append':>8}{'tracker':>9}{'ratio':>8}")
    for document, (_, chunks) in _DOCS.items():
        n = len(chunks)
        shared = document in SHARED_DOCUMENTS
        contenders = {k: v for k, v in CONTENDERS.items() if shared or not k.startswith("Tambo")}
        times = measure(chunks, contenders, rounds if n < 5000 else 3)
        engine = statistics.median(times["ComponentStream"]) * 1e6 / n
        append = statistics.median(times["ComponentStream append"]) * 1e6 / n
        engine_kb = wire_bytes(chunks, tracker=False) / 1024
        append_kb = wire_bytes(chunks, tracker=False, append_strings=True) / 1024
        line = f"{document:<16}{n:>7}  {engine:>16.2f}{append:>8.2f}"
        if shared:
            tracker = statistics.median(times["Tambo-style tracker"]) * 1e6 / n
            ratios = sorted(t / e for t, e in zip(times["Tambo-style tracker"], times["ComponentStream"]) if e > 0)
            tracker_kb = wire_bytes(chunks, tracker=True) / 1024
            ratio = f"{statistics.median(ratios):.0f}x ({ratios[0]:.0f}-{ratios[-1]:.0f})"
            line += f"{tracker:>9.1f}{ratio:>22}"
            line += f"  {engine_kb:>16.1f}{append_kb:>8.1f}{tracker_kb:>9.1f}{tracker_kb / engine_kb:>7.1f}x"
        else:
            line += f"{'-':>9}{'-':>22}  {engine_kb:>16.1f}{append_kb:>8.1f}{'-':>9}{'-':>8}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
