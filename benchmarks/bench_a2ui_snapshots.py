"""A2UI progress as deltas (the default) or as whole snapshots (``a2ui_snapshots``, for clients that do not
apply ``ACTIVITY_DELTA``, assistant-ui): what each costs on the wire and in CPU, on the same chunks (issue 31).

The surfaces and chunking are ``bench_a2ui``'s (1 KB, 10 KB, 80 KB ``render_a2ui`` arguments, 16-character
chunks): an ``A2UITransformer`` over the tool call's events, once with ``snapshots=False`` and once with
``snapshots=True``. Figures: activity bytes on the wire (the JSON of the activity events) as a multiple of
the argument bytes, the number of activity events, and CPU per chunk (median of interleaved rounds). The two
end with the same surface (checked).

``python benchmarks/bench_a2ui_snapshots.py`` prints the table (``spec/a2ui.md`` has the figures);
``pytest benchmarks/bench_a2ui_snapshots.py`` checks the two end alike.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench_a2ui import SIZES, final_content, inner_events, surface  # noqa: E402  (rootdir-relative, as bench_proto imports)

from agui_engine.genui.a2ui import A2UITransformer
from agui_engine.protocol.codec import encode_event

ROUNDS = 7


def run(events: list[Any], snapshots: bool) -> tuple[float, list[Any]]:
    t = A2UITransformer(snapshots=snapshots)
    start = time.perf_counter()
    out: list[Any] = []
    for e in events:
        out += t.feed(e)
    out += t.close()
    return time.perf_counter() - start, out


def measure() -> list[dict[str, Any]]:
    rows = []
    for label, target in SIZES.items():
        text = surface(target)
        events = inner_events(text)
        chunks = sum(1 for e in events if type(e).__name__ == "ToolCallArgsEvent")
        times: dict[bool, list[float]] = {False: [], True: []}
        outs: dict[bool, list[Any]] = {}
        for _ in range(ROUNDS):
            for mode in (False, True):
                seconds, outs[mode] = run(events, mode)
                times[mode].append(seconds)
        activity = {m: [e for e in outs[m] if type(e).__name__.startswith("Activity")] for m in (False, True)}
        assert final_content(activity[False]) == final_content(activity[True])
        size = len(text.encode())
        row: dict[str, Any] = {"surface": label, "chunks": chunks, "args": size}
        for m, key in ((False, "deltas"), (True, "snapshots")):
            row[key] = {"bytes": sum(len(encode_event(e)) for e in activity[m]), "events": len(activity[m]),
                        "us_per_chunk": statistics.median(times[m]) / chunks * 1e6}
        rows.append(row)
    return rows


def test_snapshots_and_deltas_end_alike() -> None:
    for label, target in SIZES.items():
        events = inner_events(surface(target))
        a = [e for e in run(events, False)[1] if type(e).__name__.startswith("Activity")]
        b = [e for e in run(events, True)[1] if type(e).__name__.startswith("Activity")]
        assert final_content(a) == final_content(b), label


def main() -> None:
    print("| surface | chunks | deltas: bytes (x args) | events | µs/chunk | snapshots: bytes (x args) | events | "
          "µs/chunk | snapshots / deltas bytes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in measure():
        d, s = r["deltas"], r["snapshots"]
        print(f"| {r['surface']} | {r['chunks']:,} | {d['bytes']:,} ({d['bytes'] / r['args']:.1f}x) | {d['events']} | "
              f"{d['us_per_chunk']:.1f} | {s['bytes']:,} ({s['bytes'] / r['args']:.1f}x) | {s['events']} | "
              f"{s['us_per_chunk']:.1f} | {s['bytes'] / d['bytes']:.0f}x |")


if __name__ == "__main__":
    main()
