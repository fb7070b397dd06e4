"""compact_events against @ag-ui/client 1.0.0's compactEvents (under node), and what compaction saves.

Threads (each a list of our event Structs; node gets the same events as JSON objects):

* ``long-text`` -- three runs, each one answer of 2,000 text deltas;
* ``tool-heavy`` -- one run: a state snapshot, then 20 tool calls, each START + 30 ARGS fragments +
  END + TOOL_CALL_RESULT and a STATE_DELTA appending to the state;
* ``state-heavy`` -- one run: a 20-key snapshot, then 2,000 STATE_DELTAs of one ``replace`` each;
* ``genui`` -- bench_codec's realistic run (305 events: text, component tool call, component
  ``CUSTOM`` patches, state snapshot and delta, a messages snapshot).

``test_compact_speed`` times both sides the same way: each side compacts its own in-memory events
(Structs / JS objects: decoding is not measured) ``ROUNDS`` times a repeat, ``REPEATS`` repeats after
a warm-up, in one process each. The clock is CPU time, user + system, of the whole process (node's
``process.cpuUsage``, so its GC threads count; ours ``time.process_time``): on a shared machine wall
time mostly measures the neighbours. It prints input events per CPU second of the fastest repeat and
the ratio. ``test_compaction_ratio`` prints events and JSON bytes before and
after. ``test_compact`` is the pytest-benchmark table for ours. Run:
``pytest benchmarks/bench_compact.py --benchmark-enable -s -p no:randomly``. In CI
(``--benchmark-disable``) each thread runs once and must equal compactEvents. Timing is never asserted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from bench_codec import realistic_run  # noqa: E402  (rootdir-relative, as bench_proto imports)

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.compact import compact_events
from agui_engine.protocol.events import (
    AddOperation,
    ReplaceOperation,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

JS_DIR = Path(__file__).resolve().parents[1] / "tests" / "js"
#: Compactions of each thread per timed repeat in a full run, and repeats; the fastest repeat is
#: reported (on a shared machine the others measure the neighbours); one of each in CI.
ROUNDS = 40
REPEATS = 15


def long_text() -> list[Any]:
    words = "Here is the forecast for Zürich — mostly sunny ☀️, highs of 21 °C and light wind".split()
    events: list[Any] = []
    for run in range(3):
        mid = f"msg_{run}"
        events += [RunStartedEvent(thread_id="t", run_id=f"r{run}"), TextMessageStartEvent(message_id=mid, role="assistant")]
        events += [TextMessageContentEvent(message_id=mid, delta=" " + words[i % len(words)]) for i in range(2000)]
        events += [TextMessageEndEvent(message_id=mid), RunFinishedEvent(thread_id="t", run_id=f"r{run}")]
    return events


def tool_heavy() -> list[Any]:
    events: list[Any] = [RunStartedEvent(thread_id="t", run_id="r"), StateSnapshotEvent(snapshot={"calls": []})]
    for n in range(20):
        cid = f"call_{n}"
        args = json.dumps({"query": f"weather in city number {n}", "days": list(range(7)), "units": "metric"})
        step = -(-len(args) // 30)
        events.append(ToolCallStartEvent(tool_call_id=cid, tool_call_name="lookup", parent_message_id="msg_0"))
        events += [ToolCallArgsEvent(tool_call_id=cid, delta=args[i : i + step]) for i in range(0, len(args), step)]
        events += [ToolCallEndEvent(tool_call_id=cid),
                   ToolCallResultEvent(message_id=f"res_{n}", tool_call_id=cid, content=f"sunny, {n} °C"),
                   StateDeltaEvent(delta=[AddOperation(path="/calls/-", value={"id": cid, "ok": True})])]
    events.append(RunFinishedEvent(thread_id="t", run_id="r"))
    return events


def state_heavy() -> list[Any]:
    events: list[Any] = [RunStartedEvent(thread_id="t", run_id="r"),
                         StateSnapshotEvent(snapshot={f"k{i}": {"value": i, "label": f"item {i}"} for i in range(20)})]
    events += [StateDeltaEvent(delta=[ReplaceOperation(path=f"/k{i % 20}/value", value=i)]) for i in range(2000)]
    events.append(RunFinishedEvent(thread_id="t", run_id="r"))
    return events


THREADS = {"long-text": long_text(), "tool-heavy": tool_heavy(), "state-heavy": state_heavy(), "genui": realistic_run()}


def _wire(events: list[Any]) -> list[Any]:
    return [json.loads(encode_event(e)) for e in events]


def _node_compact(events: list[Any], rounds: int, repeats: int) -> tuple[float, list[Any]]:
    """compactEvents on ``events``, ``rounds`` times a repeat, in one node process: (seconds of the
    fastest repeat, its output)."""
    node = shutil.which("node")
    assert node is not None, "node is required (tests/install-deps.sh)"
    done = subprocess.run([node, "compact.mjs", "--bench", str(rounds), str(repeats)], cwd=JS_DIR, input=json.dumps(_wire(events)),
                          capture_output=True, text=True, timeout=600, check=True)
    reply = json.loads(done.stdout)
    return min(reply["seconds"]), reply["events"]


def _ours(events: list[Any], rounds: int, repeats: int) -> tuple[float, list[Any]]:
    """The same for compact_events, in this process."""
    out = compact_events(events)  # warm-up, as node's
    seconds = []
    for _ in range(repeats):
        begin = time.process_time()
        for _ in range(rounds):
            out = compact_events(events)
        seconds.append(time.process_time() - begin)
    return min(seconds), out


def _full(request: pytest.FixtureRequest) -> bool:
    return not request.config.getoption("benchmark_disable", True)


@pytest.mark.parametrize("thread", sorted(THREADS))
def test_compact(benchmark: Any, thread: str) -> None:
    benchmark.group = f"compact-{thread}"
    events = THREADS[thread]
    benchmark.extra_info.update(events=len(events))
    out = benchmark(compact_events, events)
    assert len(out) < len(events)


def test_compact_speed(request: pytest.FixtureRequest) -> None:
    rounds, repeats = (ROUNDS, REPEATS) if _full(request) else (1, 1)
    lines = []
    for name, events in THREADS.items():
        node_s, theirs = _node_compact(events, rounds, repeats)
        ours_s, ours = _ours(events, rounds, repeats)
        assert _wire(ours) == theirs
        n = len(events) * rounds
        lines.append(f"{name:12s} {len(events):6d} events  ours {n / ours_s:12,.0f} ev/s  "
                     f"compactEvents {n / node_s:12,.0f} ev/s  compactEvents/ours time {node_s / ours_s:5.2f}x")
    print("\ncompact_events vs compactEvents (input events per CPU second, same events, in-memory)")
    print("\n".join(lines))


def test_compaction_ratio() -> None:
    lines = []
    for name, events in THREADS.items():
        out = compact_events(events)
        before = sum(len(encode_event(e)) for e in events)
        after = sum(len(encode_event(e)) for e in out)
        lines.append(f"{name:12s} events {len(events):6d} -> {len(out):4d} ({len(events) / len(out):6.1f}x)  "
                     f"JSON bytes {before:9,d} -> {after:7,d} ({before / after:5.1f}x)")
    print("\ncompaction ratio (events and JSON bytes of the events, before -> after)")
    print("\n".join(lines))
