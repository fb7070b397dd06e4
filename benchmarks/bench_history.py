"""What keeping a thread's history costs, and how much smaller it is than the run's log.

Runs: bench_proto's ``genui`` (305 events), ``long-text`` (2,000 deltas) and ``tool-heavy``
(20 tool calls of 30 fragments), each run's events as its log holds them (encoded once).

Groups, per run:

* ``history-keep-<run>``: what the registry does when a run ends. ``ours`` =
  ``build_record`` (decode the log, ``compact_events``, encode the record); ``encode`` =
  ``encode_event`` of every event, the work the gateway already does once per event while the
  run streams -- so the ratio is the run-end cost of history as a multiple of the run's own
  encoding.
* ``history-serve-<run>``: ``GET <path>/threads/<threadId>`` for a 10-run branch of such runs
  (``branch_payloads``: decode, reduce the inputs, fold, re-encode) against ``encode`` of the
  same events.

``test_history_sizes`` prints, per run, the log's bytes against the kept record's bytes (the
compaction ratio). Run: ``pytest benchmarks/bench_history.py --benchmark-enable --benchmark-only -s``.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from bench_proto import RUNS  # noqa: E402  (rootdir-relative, as bench_proto imports bench_codec)

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunAgentInput, RunStartedEvent, UserMessage
from agui_engine.transports.history import branch, branch_payloads, build_record, decode_records

_INPUT = RunAgentInput(thread_id="thread_8f2c", run_id="run_41d0", messages=[UserMessage(id="u1", content="Weather?")])
_LOGS = {name: [encode_event(e) for e in events] for name, events in RUNS.items()}


def _chain(name: str, runs: int = 10) -> list[Any]:
    records = []
    parent = None
    for n in range(runs):
        rid = f"run_{n}"
        events = [msgspec.structs.replace(e, run_id=rid) if isinstance(e, RunStartedEvent) else e for e in RUNS[name]]
        inp = msgspec.structs.replace(_INPUT, run_id=rid, messages=[UserMessage(id=f"u{k}", content="q") for k in range(n + 1)])
        records.append(build_record(inp, parent, [encode_event(e) for e in events], complete=True))
        parent = rid
    return branch(decode_records(records)).runs


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("impl", ["ours", "encode"])
def test_keep(benchmark: Any, run: str, impl: str) -> None:
    benchmark.group = f"history-keep-{run}"
    if impl == "ours":
        record = benchmark(build_record, _INPUT, None, _LOGS[run], complete=True)
        assert decode_records([record])
    else:
        benchmark(lambda: [encode_event(e) for e in RUNS[run]])


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("impl", ["ours", "encode"])
def test_serve(benchmark: Any, run: str, impl: str) -> None:
    benchmark.group = f"history-serve-{run}"
    chain = _chain(run)
    if impl == "ours":
        assert benchmark(branch_payloads, chain)
    else:
        events = RUNS[run] * len(chain)
        benchmark(lambda: [encode_event(e) for e in events])


def test_history_sizes() -> None:
    for name, payloads in _LOGS.items():
        record = build_record(_INPUT, None, payloads, complete=True)
        logged = sum(map(len, payloads))
        print(f"{name}: {len(payloads)} events, log {logged} B, kept {len(record)} B ({logged / len(record):.1f}x smaller)")
        assert len(record) < logged
