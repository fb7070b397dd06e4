"""The published AG-UI gateway benchmark: one command, every contender, interleaved.

    python benchmarks/gateways/run.py                       # C = 1, 100, 1000; 3 repetitions
    python benchmarks/gateways/run.py --concurrency 1,100 --reps 2 --only engine,fastapi-encoder

What it measures (spec/benchmarks.md has the table and how to read it): each contender of
``servers.py`` serves the same scripted token stream; ``agui-engine loadtest`` (in this process,
pinned to one core; each server pinned to the other) drives it at each concurrency, every stream
verified. Per contender and concurrency:

* **server CPU per event** -- the server process's CPU time (all its threads, from
  ``/proc/<pid>/task/*/schedstat``, nanoseconds) over the measured runs, divided by the events the
  client received; for a proxy, its own process only (the upstream is measured separately);
* **p99 gap between events** and **time to first event** as the client saw them (loadtest);
* **RSS per open stream** -- at the largest concurrency, that many ``idle`` runs held open: the
  server's resident memory growth divided by the streams;
* **production-to-write latency** (the contenders that serve ``token_script`` in-process:
  ``engine``, ``engine-asgi``, ``fastapi-encoder``) -- after the CPU phase, one more run per
  stream with each delta stamped with its production time and every write of the server noting
  the time since (``servers.py``; off while the CPU is measured): p50 / p99 / max.

A repetition measures every contender at every concurrency, in a rotated order (so no contender
always runs first or last); a fresh server process per measurement. Reported: the median of the
repetitions with their spread (min-max), and each contender's CPU per event as a ratio to
``engine``'s in the same repetition. ``--json FILE`` writes every measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agui_engine.cli.loadtest import LoadPlan, run_load  # noqa: E402
from agui_engine.protocol.events import RunAgentInput, UserMessage  # noqa: E402

SERVERS = Path(__file__).resolve().parent / "servers.py"
#: contender -> the upstream contender it proxies (None: it produces the events itself)
CONTENDERS: dict[str, str | None] = {
    "engine": None,
    "engine-asgi": None,
    "fastapi-encoder": None,
    "pydantic-ai": None,
    "ag-ui-langgraph": None,
    "engine-proxy": "fastapi-encoder",
    "copilotkit-runtime": "fastapi-encoder",
}
#: contender -> the path its runs are POSTed to (default: the root)
RUN_PATHS = {"copilotkit-runtime": "agent/default/run"}
#: contenders whose production-to-write latency is measured (servers.py's stamps and hooks)
TIMED = frozenset({"engine", "engine-asgi", "fastapi-encoder"})
#: seconds a contender may take to print its port
START_TIMEOUT = 60.0
#: streams at which the idle (RSS) phase is measured at most
MAX_IDLE_STREAMS = 1000


@dataclass
class Measurement:
    contender: str
    concurrency: int
    rep: int
    events: int = 0
    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    cpu_us_per_event: float = 0.0
    upstream_cpu_us_per_event: float | None = None
    p99_gap_ms: float | None = None
    p50_first_event_ms: float | None = None
    events_per_s: float = 0.0
    rss_kib_per_stream: float | None = None
    write_p50_ms: float | None = None
    write_p99_ms: float | None = None
    write_max_ms: float | None = None
    error: str | None = None


class Server:
    """A contender in its own process, pinned to ``core``."""

    def __init__(self, name: str, core: int | None, upstream: str | None = None) -> None:
        args = [sys.executable, str(SERVERS), name] + ([upstream] if upstream else [])
        self.latency_file = Path(tempfile.mkstemp(prefix="agui-bench-latency-", suffix=".json")[1])
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COPILOTKIT_TELEMETRY_DISABLED": "true",
               "AGUI_BENCH_LATENCY_FILE": str(self.latency_file)}
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        if core is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.process.pid, {core})
        self.port = self._read_port(name)
        self.url = f"http://127.0.0.1:{self.port}/{RUN_PATHS.get(name, '')}"

    def _read_port(self, name: str) -> int:
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if line.startswith("PORT "):
                return int(line.split()[1])
            if not line and self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"{name} exited: {err.strip().splitlines()[-1:] or ''}")
        raise RuntimeError(f"{name} printed no port within {START_TIMEOUT:g} s")

    def pids(self) -> list[int]:
        """The process and its children (``npm``/``exec`` replace themselves; node spawns none)."""
        return [self.process.pid]

    def cpu_seconds(self) -> float:
        total = 0
        for pid in self.pids():
            for task in Path(f"/proc/{pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0])
                except (OSError, ValueError):
                    pass  # a thread that just ended
        return total / 1e9

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    async def ready(self) -> None:
        """Wait until it answers a run (a proxy also needs its upstream)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            report = await run_load(plan(self.url, 1, 1))
            if report.outcomes.get("finished"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no finished run within {START_TIMEOUT:g} s: {report.errors[:1]}")
            await asyncio.sleep(0.5)

    async def write_latency(self, concurrency: int) -> dict[str, Any]:
        """One run per stream with stamped deltas: the server's production-to-write latency."""
        self.latency_file.write_text("")
        os.kill(self.process.pid, signal.SIGUSR1)
        await asyncio.sleep(0.2)  # the handler runs at the server's next bytecode
        await run_load(plan(self.url, concurrency, concurrency))
        os.kill(self.process.pid, signal.SIGUSR2)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.latency_file.read_text() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        doc: dict[str, Any] = json.loads(self.latency_file.read_text() or "{}")
        return doc

    def close(self) -> None:
        self.latency_file.unlink(missing_ok=True)
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def plan(url: str, concurrency: int, runs: int, message: str = "go") -> LoadPlan:
    input = RunAgentInput(thread_id="bench", run_id="bench", messages=[UserMessage(id="u1", content=message)])
    return LoadPlan(url=url, inputs=[input], concurrency=concurrency, runs=runs, run_timeout=600.0)


async def hold_idle_streams(url: str, count: int) -> list[Any]:
    """``count`` idle runs, each read up to its first event and then held open."""
    import aiohttp

    from agui_engine.cli.loadtest import request_body

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    responses = []
    body = request_body(plan(url, 1, 1, "idle").inputs[0])

    async def open_one() -> Any:
        response = await session.post(url, data=body, headers={"Accept": "text/event-stream",
                                                               "Content-Type": "application/json"})
        await response.content.readany()
        return response

    for start in range(0, count, 100):
        responses += await asyncio.gather(*(open_one() for _ in range(min(100, count - start))))
    return [session, *responses]


async def measure(name: str, concurrency: int, rep: int, runs_per_stream: int, core: int | None,
                  idle: bool) -> Measurement:
    result = Measurement(name, concurrency, rep)
    upstream_name = CONTENDERS[name]
    upstream = Server(upstream_name, core, None) if upstream_name else None
    server: Server | None = None
    try:
        server = Server(name, core, upstream.url if upstream else None)
        await server.ready()
        await run_load(plan(server.url, min(concurrency, 50), min(concurrency, 50)))  # warm-up
        runs = max(concurrency * runs_per_stream, 20)
        cpu, up_cpu = server.cpu_seconds(), upstream.cpu_seconds() if upstream else 0.0
        report = await run_load(plan(server.url, concurrency, runs))
        cpu, up_cpu = server.cpu_seconds() - cpu, (upstream.cpu_seconds() - up_cpu if upstream else 0.0)
        result.events, result.runs, result.outcomes = report.events, report.runs, report.outcomes
        if report.events:
            result.cpu_us_per_event = round(cpu / report.events * 1e6, 2)
            if upstream:
                result.upstream_cpu_us_per_event = round(up_cpu / report.events * 1e6, 2)
        result.p99_gap_ms = report.inter_event.p99_ms
        result.p50_first_event_ms = report.time_to_first_event.p50_ms
        result.events_per_s = report.events_per_s
        if name in TIMED:
            latency = await server.write_latency(concurrency)
            result.write_p50_ms, result.write_p99_ms = latency.get("p50_ms"), latency.get("p99_ms")
            result.write_max_ms = latency.get("max_ms")
        if idle:
            before = server.rss_bytes()
            held = await hold_idle_streams(server.url, min(concurrency, MAX_IDLE_STREAMS))
            await asyncio.sleep(1.0)  # let the server finish allocating for the last ones
            result.rss_kib_per_stream = round((server.rss_bytes() - before) / (len(held) - 1) / 1024, 1)
            for response in held[1:]:
                response.close()
            await held[0].close()
    except (RuntimeError, OSError) as exc:
        result.error = str(exc)
    finally:
        if server is not None:
            server.close()
        if upstream is not None:
            upstream.close()
    return result


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    median = statistics.median(values)
    return f"{median:,.2f} ({min(values):,.2f}-{max(values):,.2f})" if len(values) > 1 else f"{median:,.2f}"


def table(results: list[Measurement], concurrencies: list[int], names: list[str]) -> str:
    lines = ["| contender | C | server CPU µs/event | x engine | production-to-write ms p50 / p99 / max | "
             "p99 gap ms | first event p50 ms | events/s | RSS KiB/stream | outcomes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in concurrencies:
        engine_by_rep = {m.rep: m.cpu_us_per_event for m in results
                         if m.contender == "engine" and m.concurrency == c and m.events}
        for name in names:
            ms = [m for m in results if m.contender == name and m.concurrency == c]
            ok = [m for m in ms if m.events and not m.error]
            if not ok:
                errors = "; ".join(sorted({m.error or "no events" for m in ms}))
                lines.append(f"| {name} | {c:,} | - | - | - | - | - | - | - | {errors} |")
                continue
            ratios = [m.cpu_us_per_event / engine_by_rep[m.rep] for m in ok if engine_by_rep.get(m.rep)]
            cpu = _spread([m.cpu_us_per_event for m in ok])
            if any(m.upstream_cpu_us_per_event is not None for m in ok):
                cpu += f" (upstream {_spread([m.upstream_cpu_us_per_event or 0.0 for m in ok])})"
            outcomes: dict[str, int] = {}
            for m in ok:
                for k, v in m.outcomes.items():
                    outcomes[k] = outcomes.get(k, 0) + v
            timed = [m for m in ok if m.write_p99_ms is not None]
            latency = " / ".join(_spread([getattr(m, f) for m in timed]) for f in
                                 ("write_p50_ms", "write_p99_ms", "write_max_ms")) if timed else "-"
            lines.append(
                f"| {name} | {c:,} | {cpu} | {_spread(ratios)} | {latency} | {_spread([m.p99_gap_ms or 0.0 for m in ok])} | "
                f"{_spread([m.p50_first_event_ms or 0.0 for m in ok])} | {_spread([m.events_per_s for m in ok])} | "
                f"{_spread([m.rss_kib_per_stream for m in ok if m.rss_kib_per_stream is not None])} | "
                f"{', '.join(f'{v:,} {k}' for k, v in outcomes.items())} |"
            )
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> list[Measurement]:
    names = [n for n in CONTENDERS if not args.only or n in args.only]
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_core = cores[0] if len(cores) > 1 else None
    if server_core is not None:
        os.sched_setaffinity(0, set(cores[1:]))  # the load generator on the other core(s)
    results = []
    for rep in range(args.reps):
        for c in args.concurrency:
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                m = await measure(name, c, rep, args.runs_per_stream, server_core, idle=c == max(args.concurrency))
                print(f"rep {rep} C={c:<5} {name:<20} {m.cpu_us_per_event:8.2f} µs/event  "
                      f"{m.events:>9,} events  {m.error or ''}", file=sys.stderr, flush=True)
                results.append(m)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 100, 1000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--runs-per-stream", type=int, default=3, help="runs per concurrent stream")
    parser.add_argument("--only", "--contenders", type=lambda s: s.split(","), default=None,
                        help=f"comma-separated contenders (default: all of {', '.join(CONTENDERS)})")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    names = [n for n in CONTENDERS if not args.only or n in args.only]
    print(table(results, args.concurrency, names))
    if args.json:
        args.json.write_text(json.dumps([asdict(m) for m in results], indent=1))


if __name__ == "__main__":
    main()
