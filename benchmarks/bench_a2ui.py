"""A2UI surfaces against the official @ag-ui/a2ui-middleware 0.0.10 (under node), on the same chunks.

Both sides turn a ``render_a2ui`` call's argument fragments into ``a2ui-surface`` activity events:

* **A2UISurfaceStream / A2UITransformer** (this engine): one pass of the incremental tokenizer;
  a component goes out (``ACTIVITY_DELTA`` ``add``) when its object closes, a data member (an
  array member element by element) when it closes; nothing is sent twice.
* **@ag-ui/a2ui-middleware**: per chunk that holds ``}``, ``]`` or ``"``, re-scans the whole
  argument text (several clarinet passes), paints once the component array closes, then
  re-sends the whole surface for every new item of the template's data array and once more
  when the data object closes. Timed in its ``processStream`` alone (no client state machine,
  no per-event macrotask), best of 5 runs in one node process.

Surfaces of 1 KB, 10 KB and 80 KB (a dashboard of cards and a templated list with its data
items), 16-character chunks. Figures: CPU per chunk (median of interleaved rounds for ours),
activity bytes on the wire as a multiple of the argument bytes, and the ratios.

``python benchmarks/bench_a2ui.py`` prints the table (``spec/a2ui.md`` has the figures);
``pytest benchmarks/bench_a2ui.py`` checks both sides end with the same surface (and with
``--benchmark-only`` times ours with pytest-benchmark).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agui_engine.genui.a2ui import A2UITransformer
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import ToolCallArgsEvent, ToolCallEndEvent, ToolCallStartEvent

JS_DIR = Path(__file__).resolve().parent.parent / "tests" / "js"
SIZES = {"1KB": 1_000, "10KB": 10_000, "80KB": 80_000}
CHUNK = 16
ROUNDS = 7


def surface(target: int) -> str:
    """``render_a2ui`` arguments of about ``target`` bytes: a heading, a row of metric cards, a
    templated product list and its data items (two thirds components, one third data)."""
    components: list[dict[str, Any]] = [
        {"id": "root", "component": "Column", "children": ["heading", "metrics", "list"]},
        {"id": "heading", "component": "Text", "text": "Store overview", "variant": "h1"},
        {"id": "list", "component": "List", "children": {"componentId": "card", "path": "/items"}},
        {"id": "card", "component": "Card", "child": "card-col"},
        {"id": "card-col", "component": "Column", "children": ["card-name", "card-price"]},
        {"id": "card-name", "component": "Text", "text": {"path": "name"}, "variant": "h3"},
        {"id": "card-price", "component": "Text", "text": {"path": "price"}, "variant": "caption"},
    ]
    metrics: list[str] = []
    items: list[dict[str, Any]] = []
    args = {"surfaceId": "store", "components": components, "data": {"items": items}}
    n = 0
    while len(json.dumps(args)) < target:
        if len(json.dumps(components)) < 2 * len(json.dumps(items)) + 200:
            metrics.append(f"m{n}")
            components.append({"id": f"m{n}", "component": "Card", "child": f"m{n}-text"})
            components.append({"id": f"m{n}-text", "component": "Text", "text": f"Metric {n}: {n * 37 % 1000}"})
        else:
            items.append({"name": f"Product {n}", "price": f"${n * 13 % 500}.99"})
        n += 1
    components.insert(2, {"id": "metrics", "component": "Row", "children": metrics})
    return json.dumps(args)


def chunks(text: str) -> list[str]:
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]


def inner_events(text: str) -> list[Any]:
    return [ToolCallStartEvent(tool_call_id="c", tool_call_name="render_a2ui"),
            *(ToolCallArgsEvent(tool_call_id="c", delta=p) for p in chunks(text)),
            ToolCallEndEvent(tool_call_id="c")]


def ours(events: list[Any]) -> tuple[float, list[Any]]:
    """Seconds for the whole stream, and the activity events."""
    t = A2UITransformer()
    out: list[Any] = []
    start = time.perf_counter()
    for e in events:
        out += t.feed(e)
    elapsed = time.perf_counter() - start
    return elapsed, [e for e in out if e.type in ("ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA")]


def final_content(activity: list[Any]) -> Any:
    import jsonpatch

    content: Any = None
    for e in activity:
        d = json.loads(encode_event(e))
        content = d["content"] if d["type"] == "ACTIVITY_SNAPSHOT" else jsonpatch.apply_patch(content, d["patch"])
    return content


def middleware(texts: list[str]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "node is required"
    cases = [{"input": {"threadId": "t", "runId": "r", "messages": []}, "direct": True, "summary": True, "repeat": 5,
              "events": [{"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "render_a2ui"},
                         *({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": p} for p in chunks(text)),
                         {"type": "TOOL_CALL_END", "toolCallId": "c"}]} for text in texts]
    done = subprocess.run([node, "a2ui_middleware.mjs"], cwd=JS_DIR, input=json.dumps({"cases": cases}),
                          capture_output=True, text=True, timeout=600, check=True)
    results: list[dict[str, Any]] = json.loads(done.stdout)["results"]
    return results


def measure() -> list[dict[str, Any]]:
    texts = {name: surface(size) for name, size in SIZES.items()}
    theirs = dict(zip(texts, middleware(list(texts.values())), strict=True))
    rows = []
    for name, text in texts.items():
        events = inner_events(text)
        n = len(events) - 2
        times = []
        activity: list[Any] = []
        for _ in range(ROUNDS):
            elapsed, activity = ours(events)
            times.append(elapsed)
        arg_bytes = len(text.encode())
        our_bytes = sum(len(encode_event(e)) for e in activity)
        t = theirs[name]
        assert final_content(activity) == t["last"], name
        our_us = statistics.median(times) / n * 1e6
        their_us = t["ms"] / n * 1e3
        rows.append({"surface": name, "args": arg_bytes, "chunks": n, "ours_us": our_us, "theirs_us": their_us,
                     "ours_x": our_bytes / arg_bytes, "theirs_x": t["activityBytes"] / arg_bytes,
                     "ours_events": len(activity), "theirs_events": t["activityEvents"]})
    return rows


@pytest.mark.parametrize("name", list(SIZES))
def test_ours(benchmark: Any, name: str) -> None:
    events = inner_events(surface(SIZES[name]))
    benchmark.group = f"a2ui-{name}"
    benchmark(ours, events)


@pytest.mark.timeout(600)  # node runs the 80 KB surface's 5,000 chunks five times
def test_same_surface_and_the_targets() -> None:
    for row in measure():
        assert row["ours_x"] <= 12, row


def main() -> None:
    rows = measure()
    print(f"{'surface':8} {'args B':>8} {'chunks':>7} {'ours us/chunk':>14} {'mw us/chunk':>12} {'CPU ratio':>10} "
          f"{'ours x args':>12} {'mw x args':>10} {'bytes ratio':>12} {'events ours/mw':>15}")
    for r in rows:
        print(f"{r['surface']:8} {r['args']:>8} {r['chunks']:>7} {r['ours_us']:>14.1f} {r['theirs_us']:>12.1f} "
              f"{r['theirs_us'] / r['ours_us']:>9.1f}x {r['ours_x']:>11.2f}x {r['theirs_x']:>9.1f}x "
              f"{r['theirs_x'] / r['ours_x']:>11.1f}x {r['ours_events']:>7}/{r['theirs_events']}")


if __name__ == "__main__":
    main()
