"""Component status on the wire: per-path changes (ours) against the whole top-level map in every delta.

``ours`` is :class:`~agui_engine.genui.component_stream.ComponentStream` as shipped: every path of the
props at any depth has a status, and a props delta carries only the changes its own operations do
not imply (``statusChanges``; spec/components.md, "Status"). ``top-level-map`` is the same stream
with the status code it replaced (kept here as the baseline, verbatim): ``streamingStatus``, the
status of every top-level prop, repeated whole in every delta -- what Tambo sends, minus its quirks.

Both run over the corpus documents (``agui_engine.cli.bench_corpus.make_documents``, the standard
parameters first) cut into 1-8 character chunks (``split_chunks``), each event encoded as the
gateway's SSE frame (``encode_sse``):

* ``test_status_bytes`` prints, per document, the SSE bytes of the call's props deltas in both
  forms and their ratio (ours / top-level-map), and checks that ours is smaller on every
  document with at most a few levels of nesting;
* ``test_status_cpu`` times one whole call (every feed, ``close``, the SSE encoding) per form:
  the summary prints top-level-map's time as a ratio to ours.

Run ``pytest benchmarks/bench_status.py --benchmark-enable --benchmark-only -s``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from agui_engine.cli.bench_corpus import make_documents, split_chunks
from agui_engine.genui.component_stream import COMPONENT_PROPS_DELTA, ComponentStream
from agui_engine.genui.components import Component
from agui_engine.protocol.codec import encode_sse
from agui_engine.protocol.events import CustomEvent
from agui_engine.protocol.pointer import unescape_token

#: A model writes the standard parameters first (what ``bench_props`` sends as well).
_STATUS = {"_tambo_statusMessage": "Showing the report", "_tambo_completionStatusMessage": "Showed the report"}
_FREE_FORM = Component("Report", "A report.", {"type": "object"})
#: Realistic shapes (a few levels deep) and the 200-level nesting stress shape.
DOCUMENTS = ("dashboard-16KB", "dashboard-64KB", "markdown-50KB", "table-50KB", "deep-50", "deep-200")
SHALLOW = ("dashboard-16KB", "dashboard-64KB", "markdown-50KB", "table-50KB")


class TopLevelMapStream(ComponentStream):
    """The replaced status code: ``streamingStatus`` = every top-level prop's status, whole, every delta."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_status: dict[str, str] = {}
        self.current: str | None = None
        self.current_pointer = ""

    def _delta(self, raw: list[dict[str, Any]]) -> CustomEvent | None:
        ops = self._filter.filter(raw)
        status = self.last_status
        changed = False
        current, pointer = self.current, self.current_pointer
        inside = pointer + "/"
        for op in ops:
            path = op["path"]
            if current is not None and op["op"] != "remove" and (path == pointer or path.startswith(inside)):
                continue
            token = path[1:].split("/", 1)[0]
            key = unescape_token(token)
            if op["op"] == "remove" and path == "/" + token:
                changed = status.pop(key, None) is not None or changed
                if key == current:
                    current = None
                continue
            if current is not None and current != key and status.get(current) != "done":
                status[current] = "done"
                changed = True
            current, pointer = key, "/" + token
            inside = pointer + "/"
        if current is not None:
            state = self._stream.status_of(pointer) or "started"
            if status.get(current) != state:
                status[current] = state
                changed = True
        self.current, self.current_pointer = current, pointer
        if not ops and not changed:
            return None
        return CustomEvent(name=COMPONENT_PROPS_DELTA,
                           value={"componentId": self.component_id, "operations": ops, "streamingStatus": dict(status)})


IMPLS = {"ours": ComponentStream, "top-level-map": TopLevelMapStream}


def arguments(name: str) -> str:
    return json.dumps({**_STATUS, **json.loads(make_documents()[name])}, ensure_ascii=False)


def call_bytes(stream_class: type[ComponentStream], chunks: Sequence[str]) -> int:
    """SSE bytes of one call's props deltas (every feed, then close)."""
    stream = stream_class(_FREE_FORM, message_id="m", component_id="c")
    total = 0
    seq = 0
    for events in [*(stream.feed(chunk) for chunk in chunks), stream.close()]:
        for event in events:
            seq += 1
            frame = encode_sse(event, f"run:{seq}")
            if event.name == COMPONENT_PROPS_DELTA:
                total += len(frame)
    return total


def test_status_bytes() -> None:
    lines = ["", "props_delta SSE bytes per call: ours (per-path changes) / top-level-map (whole map each delta)"]
    for name in DOCUMENTS:
        chunks = split_chunks(arguments(name))
        ours = call_bytes(ComponentStream, chunks)
        theirs = call_bytes(TopLevelMapStream, chunks)
        lines.append(f"  {name:15} {len(chunks):6} chunks  ours {ours:>10,}  top-level-map {theirs:>10,}  "
                     f"ratio {ours / theirs:.3f}")
        if name in SHALLOW:
            assert ours < theirs, (name, ours, theirs)
    print("\n".join(lines))


@pytest.mark.parametrize("document", ["dashboard-64KB", "deep-200"])
@pytest.mark.parametrize("impl", list(IMPLS))
def test_status_cpu(benchmark: Any, document: str, impl: str) -> None:
    chunks = split_chunks(arguments(document))
    benchmark.group = f"component call with status {document} ({len(chunks)} chunks)"
    assert benchmark(call_bytes, IMPLS[impl], chunks) > 0
