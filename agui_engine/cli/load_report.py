"""What ``agui-engine loadtest`` measured: per-run records in, one report out (no IO).

Theory of operation
-------------------
The load generator (:mod:`agui_engine.cli.loadtest`) times each run with one clock and
hands this module plain numbers: when the request went out, when each read of the
response arrived and how many events and bytes it carried, and how the run ended.
:class:`LoadStats` folds those into counters and two latency distributions -- time to
first event, and the gap between consecutive events of a run -- and :meth:`LoadStats.report`
turns them into a :class:`LoadReport` (a msgspec Struct: the ``--json`` output) that
:func:`format_report` prints as a table.

A gap is measured between *reads*: events that arrive in one read of the socket arrive
together, and the later ones of that read count a gap of 0 (that is what the client saw:
a producer or a gateway that coalesces writes shows as bursts, one that stalls as long
gaps). Memory is bounded whatever the load: each distribution keeps at most
:data:`MAX_LATENCY_SAMPLES` samples (a uniform reservoir sample, exact below the bound)
and its exact count and maximum.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from typing import Final

import msgspec

__all__ = [
    "Distribution",
    "LatencySamples",
    "LoadReport",
    "LoadStats",
    "MAX_LATENCY_SAMPLES",
    "MAX_REPORTED_ERRORS",
    "OUTCOMES",
    "RunRecord",
    "format_report",
]

#: Samples kept per latency distribution. Below it the percentiles are exact; above it they
#: come from a uniform reservoir of this many (a p99 of a million-sample run is then within
#: about 0.1 of a percentile rank). 8 bytes each: 8 MB per distribution at most.
MAX_LATENCY_SAMPLES: Final = 1_000_000

#: Protocol errors quoted in the report (all of them are counted).
MAX_REPORTED_ERRORS: Final = 20

#: How a run can end, in report order: ``finished`` (RUN_FINISHED, success), ``interrupted``
#: (RUN_FINISHED with an interrupt outcome), ``cancelled`` (RUN_FINISHED with a cancelled
#: outcome), ``run_error`` (RUN_ERROR), ``incomplete`` (the
#: stream ended before a terminal event), ``protocol_error`` (the stream broke the AG-UI rules
#: or could not be decoded), ``http_error`` (refused: a status other than 200, or a WebSocket
#: error line), ``connect_error`` (no connection), ``timeout`` (the run took longer than the
#: per-run limit).
OUTCOMES: Final = (
    "finished", "interrupted", "cancelled", "run_error", "incomplete", "protocol_error", "http_error", "connect_error", "timeout",
)  # fmt: skip


class LatencySamples:
    """A bounded sample of latencies in seconds: exact count and maximum, a uniform reservoir
    of at most ``capacity`` values (Vitter's algorithm R) for the percentiles."""

    __slots__ = ("_rng", "capacity", "count", "maximum", "samples")

    def __init__(self, capacity: int = MAX_LATENCY_SAMPLES, *, seed: int = 0) -> None:
        self.capacity = capacity
        self.count = 0
        self.maximum = 0.0
        self.samples: list[float] = []
        self._rng = random.Random(seed)

    def add(self, value: float) -> None:
        self.count += 1
        if value > self.maximum:
            self.maximum = value
        if len(self.samples) < self.capacity:
            self.samples.append(value)
            return
        slot = self._rng.randrange(self.count)
        if slot < self.capacity:
            self.samples[slot] = value

    def add_repeated(self, value: float, times: int) -> None:
        """``times`` samples of ``value`` (the zero gaps of events that arrived in one read)."""
        for _ in range(times):
            self.add(value)

    def distribution(self) -> Distribution:
        if not self.samples:
            return Distribution(count=0)
        ordered = sorted(self.samples)
        return Distribution(
            count=self.count,
            p50_ms=_ms(_percentile(ordered, 50)),
            p95_ms=_ms(_percentile(ordered, 95)),
            p99_ms=_ms(_percentile(ordered, 99)),
            max_ms=_ms(self.maximum),
        )


def _percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class Distribution(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Percentiles of one latency, in milliseconds (absent when nothing was measured)."""

    count: int
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


class RunRecord(msgspec.Struct, kw_only=True):
    """One run as the load generator saw it. Times are seconds on the generator's clock."""

    started: float
    #: ``(arrival time, events in that read)`` for every read that completed events.
    reads: list[tuple[float, int]] = msgspec.field(default_factory=list)
    events: int = 0
    bytes: int = 0
    outcome: str = "incomplete"
    #: What went wrong (protocol error, HTTP status and body, connection error), if anything.
    error: str | None = None
    ended: float = 0.0


class LoadReport(msgspec.Struct, frozen=True, kw_only=True):
    """The result of a load test (what ``--json`` prints)."""

    url: str
    transport: str
    encoding: str
    concurrency: int
    runs: int
    duration_s: float
    outcomes: dict[str, int]
    events: int
    bytes: int
    events_per_s: float
    bytes_per_s: float
    time_to_first_event: Distribution
    inter_event: Distribution
    run_duration: Distribution
    protocol_errors: int
    errors: list[str]


class LoadStats:
    """Folds :class:`RunRecord`s into a :class:`LoadReport` (see the module docstring)."""

    def __init__(self, *, capacity: int = MAX_LATENCY_SAMPLES) -> None:
        self.first_event = LatencySamples(capacity, seed=1)
        self.gaps = LatencySamples(capacity, seed=2)
        self.durations = LatencySamples(capacity, seed=3)
        self.outcomes: Counter[str] = Counter()
        self.runs = 0
        self.events = 0
        self.bytes = 0
        self.protocol_errors = 0
        self.errors: list[str] = []

    def add(self, run: RunRecord, index: int) -> None:
        """Count run number ``index`` (its errors are quoted with it)."""
        self.runs += 1
        self.events += run.events
        self.bytes += run.bytes
        self.outcomes[run.outcome] += 1
        if run.outcome == "protocol_error":
            self.protocol_errors += 1
        if run.error is not None and len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(f"run {index}: {run.outcome}: {run.error}")
        if run.reads:
            self.first_event.add(run.reads[0][0] - run.started)
            previous = run.reads[0][0]
            self.gaps.add_repeated(0.0, run.reads[0][1] - 1)
            for arrived, count in run.reads[1:]:
                self.gaps.add(arrived - previous)
                self.gaps.add_repeated(0.0, count - 1)
                previous = arrived
        if run.ended:
            self.durations.add(run.ended - run.started)

    def report(self, *, url: str, transport: str, encoding: str, concurrency: int, duration: float) -> LoadReport:
        rate = 1 / duration if duration > 0 else 0.0
        return LoadReport(
            url=url,
            transport=transport,
            encoding=encoding,
            concurrency=concurrency,
            runs=self.runs,
            duration_s=round(duration, 3),
            outcomes={name: self.outcomes[name] for name in OUTCOMES if self.outcomes[name]},
            events=self.events,
            bytes=self.bytes,
            events_per_s=round(self.events * rate, 1),
            bytes_per_s=round(self.bytes * rate, 1),
            time_to_first_event=self.first_event.distribution(),
            inter_event=self.gaps.distribution(),
            run_duration=self.durations.distribution(),
            protocol_errors=self.protocol_errors,
            errors=list(self.errors),
        )


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3f}"


def _rows(report: LoadReport) -> Iterable[str]:
    yield f"{report.url}  ({report.transport}, {report.encoding})"
    yield (f"{report.runs:,} runs at concurrency {report.concurrency:,} in {report.duration_s:,.2f} s: "
           + ", ".join(f"{count:,} {name}" for name, count in report.outcomes.items()))
    yield (f"{report.events:,} events, {report.bytes:,} bytes: "
           f"{report.events_per_s:,.0f} events/s, {report.bytes_per_s / 1e6:,.2f} MB/s")
    yield f"protocol errors: {report.protocol_errors:,}"
    yield ""
    yield f"{'latency (ms)':<22}{'count':>12}{'p50':>12}{'p95':>12}{'p99':>12}{'max':>12}"
    for name, dist in (("time to first event", report.time_to_first_event),
                       ("between events", report.inter_event),
                       ("run duration", report.run_duration)):
        yield (f"{name:<22}{dist.count:>12,}{_cell(dist.p50_ms):>12}{_cell(dist.p95_ms):>12}"
               f"{_cell(dist.p99_ms):>12}{_cell(dist.max_ms):>12}")
    if report.errors:
        yield ""
        yield "first errors:"
        yield from (f"  {line}" for line in report.errors)


def format_report(report: LoadReport) -> str:
    """The report as the table the command prints (ends with a newline)."""
    return "\n".join(_rows(report)) + "\n"
