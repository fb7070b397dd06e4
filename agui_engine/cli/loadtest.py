"""``agui-engine loadtest URL``: a load generator for any AG-UI endpoint.

Theory of operation
-------------------
``--concurrency`` workers each start runs one after another until ``--runs`` runs were
started or ``--duration`` seconds have passed (then the runs in flight finish); with
``--ramp-up`` the workers start evenly spread over that many seconds. A run POSTs a
``RunAgentInput`` (``--message``, or the objects of ``--input FILE`` in turn, each with a fresh
run id and, unless ``--same-thread``, a fresh thread id) to an ``http(s)://`` endpoint, asking
for ``--encoding`` (SSE, NDJSON or protobuf by ``Accept``; the answer is decoded by the content
type the server chose), or sends it over a ``ws(s)://`` connection of agui-engine's WebSocket
protocol (one connection per worker). Every event of every run goes through the
:class:`~agui_engine.protocol.verify.Verifier`: a stream that breaks the AG-UI rules or cannot
be decoded is a ``protocol_error`` run, quoted in the report with its run and event index.

Each read of the response is timed on one monotonic clock as it arrives; the pure
:mod:`agui_engine.cli.load_report` folds the reads into time to first event, the gaps between
events, run durations, events and bytes per second and the outcomes, printed as a table or
(``--json``) as one JSON object. While it runs, a progress line on stderr (a terminal only,
unless ``--progress``).

Safe by default: it sends only to this machine (a host that is not a loopback address, or a
name that resolves to another address, is refused before anything is sent, unless
``--allow-remote``), and every dimension is bounded (:data:`MAX_CONCURRENCY`, :data:`MAX_RUNS`,
:data:`MAX_DURATION_SECONDS`, the per-run ``--run-timeout``).

Exit status: 0 when every run finished (success, interrupt or cancelled outcome) with no
protocol error, 1 otherwise; 2 for a usage mistake (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import itertools
import json
import resource
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import urlsplit

import msgspec

from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.errors import AguiEngineError, UsageError
from agui_engine.protocol.events import (
    AnyEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    UserMessage,
)
from agui_engine.protocol.proto import PROTO_CONTENT_TYPE, ProtoEventDecoder
from agui_engine.protocol.verify import ProtocolViolation, Verifier

from .load_report import LoadReport, LoadStats, RunRecord, format_report
from .options import seconds

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_RUNS",
    "DEFAULT_RUN_TIMEOUT_SECONDS",
    "ENCODINGS",
    "LoadPlan",
    "MAX_CONCURRENCY",
    "MAX_DURATION_SECONDS",
    "MAX_ERROR_BODY_CHARS",
    "MAX_RUNS",
    "PROGRESS_INTERVAL_SECONDS",
    "add_arguments",
    "check_target",
    "load_inputs",
    "request_body",
    "run",
    "run_load",
]

#: Concurrent runs when ``--concurrency`` is not given.
DEFAULT_CONCURRENCY: Final = 10
#: Runs when neither ``--runs`` nor ``--duration`` is given.
DEFAULT_RUNS: Final = 100
#: Most concurrent runs: each holds a socket (a descriptor) and its buffers.
MAX_CONCURRENCY: Final = 10_000
#: Most runs of one load test.
MAX_RUNS: Final = 10_000_000
#: Longest ``--duration``.
MAX_DURATION_SECONDS: Final = 3600.0
#: A run still streaming after this long is ended and counted as ``timeout`` (``--run-timeout``).
DEFAULT_RUN_TIMEOUT_SECONDS: Final = 120.0
#: Seconds between two progress lines.
PROGRESS_INTERVAL_SECONDS: Final = 1.0
#: Characters of a refusal's body quoted in the report.
MAX_ERROR_BODY_CHARS: Final = 200

#: ``--encoding`` -> the ``Accept`` header asking for it.
ENCODINGS: Final = {
    "sse": "text/event-stream",
    "ndjson": "application/x-ndjson",
    "proto": PROTO_CONTENT_TYPE,
}

_NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"})


class LoadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What to send, where and how much (``run_load``'s argument)."""

    url: str
    inputs: list[RunAgentInput]
    concurrency: int = DEFAULT_CONCURRENCY
    #: Runs to start (ignored when ``duration`` is set).
    runs: int = DEFAULT_RUNS
    #: Keep starting runs for this many seconds instead of a count.
    duration: float | None = None
    ramp_up: float = 0.0
    encoding: str = "sse"
    headers: dict[str, str] = {}
    run_timeout: float = DEFAULT_RUN_TIMEOUT_SECONDS
    same_thread: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the AG-UI endpoint: http(s)://... (SSE, NDJSON, protobuf) or ws(s)://... "
                                    "(agui-engine's WebSocket protocol)")
    parser.add_argument("--message", default="Hello", help="the user message of every run")
    parser.add_argument("--input", metavar="FILE", default=None,
                        help="a RunAgentInput as JSON, or JSON lines of several used in turn, instead of --message "
                             "(default: none)")
    parser.add_argument("-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help=f"runs in flight at once (at most {MAX_CONCURRENCY:,})")
    parser.add_argument("-n", "--runs", type=int, default=DEFAULT_RUNS, help=f"runs to start (at most {MAX_RUNS:,})")
    parser.add_argument("--duration", type=seconds, default=None,
                        help=f"keep starting runs for this many seconds instead of --runs (at most "
                             f"{MAX_DURATION_SECONDS:,.0f}; default: none)")
    parser.add_argument("--ramp-up", type=seconds, default=0.0, help="seconds over which the workers start (default: 0, all at once)")
    parser.add_argument("--encoding", choices=sorted(ENCODINGS), default="sse",
                        help="what to ask an http(s) endpoint for (Accept)")
    parser.add_argument("--header", action="append", default=[], metavar="NAME: VALUE",
                        help="extra request header, repeatable (default: none)")
    parser.add_argument("--run-timeout", type=seconds, default=DEFAULT_RUN_TIMEOUT_SECONDS,
                        help="end a run still streaming after this many seconds (counted as timeout)")
    parser.add_argument("--same-thread", action="store_true",
                        help="send every run on the input's thread id (default: a fresh thread per run)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress line on stderr (default: when stderr is a terminal)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a target that is not this machine (default: loopback addresses only)")


def check_target(url: str, *, allow_remote: bool = False) -> str:
    """The transport of ``url`` (``"http"`` or ``"websocket"``). Raises UsageError for a URL that is
    not http(s)/ws(s), and, unless ``allow_remote``, for a host that is not a loopback address
    (a name is resolved: every address it has must be loopback). Nothing is sent."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise UsageError(f"{url!r} is not an http(s):// or ws(s):// URL")
    transport = "websocket" if parts.scheme in ("ws", "wss") else "http"
    if allow_remote:
        return transport
    host = parts.hostname
    try:
        addresses = {ipaddress.ip_address(host)}
    except ValueError:
        try:
            found = socket.getaddrinfo(host, None)
        except OSError as exc:
            raise UsageError(f"cannot resolve {host!r}: {exc}") from None
        addresses = {ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in found}
    outside = sorted(str(a) for a in addresses if not a.is_loopback)
    if outside:
        raise UsageError(f"{host} is not this machine ({', '.join(outside)}): loadtest sends only to loopback "
                         "addresses unless --allow-remote is given")
    return transport


def load_inputs(path: str | None, message: str) -> list[RunAgentInput]:
    """The inputs to send: those of ``path`` (one JSON object, or JSON lines), else one with ``message``.
    Raises UsageError naming the file and line of a bad input."""
    if path is None:
        return [RunAgentInput(thread_id="loadtest", run_id="loadtest",
                              messages=[UserMessage(id="loadtest-message", content=message)])]
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read --input {path}: {exc.strerror or exc}") from None
    decoder = msgspec.json.Decoder(RunAgentInput)
    try:
        return [decoder.decode(text)]
    except msgspec.DecodeError:
        pass  # not one object: JSON lines
    inputs = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                inputs.append(decoder.decode(line))
            except msgspec.DecodeError as exc:
                raise UsageError(f"--input {path} line {number}: not a RunAgentInput: {exc}") from None
    if not inputs:
        raise UsageError(f"--input {path} holds no RunAgentInput")
    return inputs


def _check_plan(plan: LoadPlan) -> None:
    if not 1 <= plan.concurrency <= MAX_CONCURRENCY:
        raise UsageError(f"--concurrency must be 1 to {MAX_CONCURRENCY:,}, not {plan.concurrency}")
    if plan.duration is None and not 1 <= plan.runs <= MAX_RUNS:
        raise UsageError(f"--runs must be 1 to {MAX_RUNS:,}, not {plan.runs}")
    if plan.duration is not None and not 0 < plan.duration <= MAX_DURATION_SECONDS:
        raise UsageError(f"--duration must be more than 0 and at most {MAX_DURATION_SECONDS:,.0f} s")
    if plan.encoding not in ENCODINGS:
        raise UsageError(f"--encoding must be one of {', '.join(sorted(ENCODINGS))}")
    if plan.run_timeout <= 0:
        raise UsageError("--run-timeout must be more than 0 s")


def _raise_descriptor_limit(concurrency: int) -> None:
    """Each run in flight holds a socket: lift the soft descriptor limit as far as needed (the
    hard limit allows); UsageError when even the hard limit is too low."""
    needed = 2 * concurrency + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise UsageError(f"--concurrency {concurrency} needs {needed} open files; this process may open "
                             f"{hard} (raise it with ulimit -n)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


class _Stream:
    """One run's events as they arrive: decoded, verified, counted into its :class:`RunRecord`."""

    __slots__ = ("record", "terminal", "verifier")

    def __init__(self, record: RunRecord, input: RunAgentInput) -> None:
        self.record = record
        self.verifier = Verifier(collect=True, input=input)
        self.terminal: AnyEvent | None = None

    def events(self, arrived: float, events: list[AnyEvent]) -> None:
        if not events:
            return
        self.record.reads.append((arrived, len(events)))
        self.record.events += len(events)
        feed = self.verifier.feed
        for event in events:
            feed(event)
            if isinstance(event, (RunFinishedEvent, RunErrorEvent)) and self.terminal is None:
                self.terminal = event

    def end(self) -> None:
        """The stream ended: set the outcome from the terminal event and the verifier."""
        record = self.record
        record.ended = time.perf_counter()
        if self.terminal is not None:
            try:
                self.verifier.close()
            except ProtocolViolation:  # pragma: no cover - collect=True keeps it in violations
                pass
        violations = self.verifier.violations
        if violations:
            record.outcome, record.error = "protocol_error", str(violations[0])
        elif isinstance(self.terminal, RunErrorEvent):
            record.outcome, record.error = "run_error", f"RUN_ERROR {self.terminal.code}: {self.terminal.message}"
        elif isinstance(self.terminal, RunFinishedEvent):
            outcome = self.terminal.outcome
            record.outcome = ("interrupted" if isinstance(outcome, RunFinishedInterruptOutcome)
                              else "cancelled" if isinstance(outcome, RunFinishedCancelledOutcome) else "finished")
        else:
            record.outcome, record.error = "incomplete", f"the stream ended after {record.events} events"


def _decoder_for(content_type: str) -> Any:
    """The decoder of a response's media type (None: not an AG-UI stream)."""
    media = content_type.partition(";")[0].strip().lower()
    if media == "text/event-stream":
        return EventStreamDecoder("sse")
    if media in _NDJSON_TYPES:
        return EventStreamDecoder("ndjson")
    if media == PROTO_CONTENT_TYPE:
        return ProtoEventDecoder()
    return None


def _inputs_for(plan: LoadPlan) -> Iterator[tuple[int, RunAgentInput]]:
    """``(run index, input)`` with fresh ids, the plan's inputs in turn."""
    for index, base in zip(itertools.count(), itertools.cycle(plan.inputs)):
        tag = uuid.uuid4().hex[:12]
        thread_id = base.thread_id if plan.same_thread else f"loadtest-{tag}"
        yield index, msgspec.structs.replace(base, run_id=f"loadtest-run-{tag}", thread_id=thread_id)


#: The members every AG-UI server's input schema requires (the official SDKs' ``RunAgentInput``
#: declares them all; a 0.0.x server such as CopilotKit's runtime refuses a body without ``tools``),
#: with the value sent when the input leaves them empty.
_REQUIRED_MEMBERS: Final[tuple[tuple[str, Any], ...]] = (("state", {}), ("messages", []), ("tools", []), ("context", []), ("forwardedProps", {}))


def request_body(input: RunAgentInput) -> bytes:
    """``input`` as the JSON body of a run request, with every member the official schemas require."""
    body = msgspec.to_builtins(input)
    for name, empty in _REQUIRED_MEMBERS:
        if body.get(name) is None:
            body[name] = empty
    return msgspec.json.encode(body)


async def _http_run(session: Any, plan: LoadPlan, input: RunAgentInput, record: RunRecord) -> None:
    import aiohttp

    stream = _Stream(record, input)
    headers = {**plan.headers, "Accept": ENCODINGS[plan.encoding], "Content-Type": "application/json"}
    body = request_body(input)
    try:
        async with session.post(plan.url, data=body, headers=headers) as response:
            if response.status != 200:
                text = (await response.text(errors="replace"))[:MAX_ERROR_BODY_CHARS]
                record.outcome, record.error = "http_error", f"HTTP {response.status}: {text}"
                record.ended = time.perf_counter()
                return
            decoder = _decoder_for(response.headers.get("Content-Type", ""))
            if decoder is None:
                record.outcome = "http_error"
                record.error = f"not an AG-UI stream (Content-Type {response.headers.get('Content-Type')!r})"
                record.ended = time.perf_counter()
                return
            async for chunk in response.content.iter_any():
                arrived = time.perf_counter()
                record.bytes += len(chunk)
                stream.events(arrived, decoder.feed(chunk))
            stream.events(time.perf_counter(), decoder.close())
    except AguiEngineError as exc:  # the stream could not be decoded
        record.outcome, record.error = "protocol_error", exc.message
        record.ended = time.perf_counter()
        return
    except (aiohttp.ClientError, OSError) as exc:
        if not record.reads:
            record.outcome, record.error = "connect_error", f"{type(exc).__name__}: {exc}"
            record.ended = time.perf_counter()
            return
    stream.end()


class _WebSocketWorker:
    """One worker's WebSocket connection (opened on first use), its runs one after another."""

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self.connection: Any = None

    async def run(self, input: RunAgentInput, record: RunRecord) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException

        from agui_engine.transports.envelope import decode_protocol_line, encode_client_message, run_message

        stream = _Stream(record, input)
        try:
            if self.connection is None:
                self.connection = await connect(self.plan.url, additional_headers=self.plan.headers,
                                                compression=None, max_size=None)
            await self.connection.send(encode_client_message(run_message(input)), text=True)
            while stream.terminal is None:
                message = await self.connection.recv(decode=False)
                arrived = time.perf_counter()
                record.bytes += len(message)
                events = []
                for line in message.split(b"\n"):
                    if not line:
                        continue
                    decoded = decode_protocol_line(line, where=f"run {input.run_id}")
                    if decoded.error is not None:
                        record.outcome = "http_error"
                        record.error = f"error line {decoded.error.code}: {decoded.error.message}"
                        record.ended = time.perf_counter()
                        return
                    if decoded.event is not None:
                        events.append(decoded.event)
                stream.events(arrived, events)
        except AguiEngineError as exc:
            record.outcome, record.error = "protocol_error", exc.message
            record.ended = time.perf_counter()
            return
        except (WebSocketException, OSError) as exc:
            self.connection = None
            if not record.reads:
                record.outcome, record.error = "connect_error", f"{type(exc).__name__}: {exc}"
                record.ended = time.perf_counter()
                return
        stream.end()

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()


async def run_load(plan: LoadPlan, *, progress: Callable[[str], None] | None = None,
                   transport: str | None = None) -> LoadReport:
    """Run the load test ``plan`` describes and return its report (see the module docstring).
    ``progress`` receives a progress line every :data:`PROGRESS_INTERVAL_SECONDS`. The target is
    NOT checked here (:func:`check_target` is the caller's job); UsageError for a bad plan."""
    import aiohttp

    _check_plan(plan)
    transport = transport or ("websocket" if plan.url.startswith(("ws:", "wss:")) else "http")
    _raise_descriptor_limit(plan.concurrency)
    stats = LoadStats()
    inputs = _inputs_for(plan)
    started = time.perf_counter()
    deadline = None if plan.duration is None else started + plan.duration
    total = None if plan.duration is not None else plan.runs
    active = 0
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=plan.run_timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker(number: int) -> None:
            nonlocal active
            if plan.ramp_up:
                await asyncio.sleep(plan.ramp_up * number / plan.concurrency)
            websocket = _WebSocketWorker(plan) if transport == "websocket" else None
            try:
                while True:
                    now = time.perf_counter()
                    if deadline is not None and now >= deadline:
                        return
                    index, input = next(inputs)
                    if total is not None and index >= total:
                        return
                    record = RunRecord(started=now)
                    active += 1
                    try:
                        async with asyncio.timeout(plan.run_timeout):
                            if websocket is not None:
                                await websocket.run(input, record)
                            else:
                                await _http_run(session, plan, input, record)
                    except TimeoutError:
                        record.outcome, record.error = "timeout", f"still streaming after {plan.run_timeout:g} s"
                        record.ended = time.perf_counter()
                        if websocket is not None:  # the run may still be streaming on it
                            await websocket.close()
                            websocket.connection = None
                    finally:
                        active -= 1
                    stats.add(record, index)
            finally:
                if websocket is not None:
                    await websocket.close()

        async def report_progress() -> None:
            assert progress is not None
            while True:
                await asyncio.sleep(PROGRESS_INTERVAL_SECONDS)
                elapsed = time.perf_counter() - started
                of = f"/{total:,}" if total is not None else ""
                progress(f"{elapsed:7.1f} s  {stats.runs:,}{of} runs done, {active:,} in flight, "
                         f"{stats.events / elapsed:,.0f} events/s, {stats.protocol_errors:,} protocol errors")

        reporter = asyncio.create_task(report_progress()) if progress is not None else None
        try:
            await asyncio.gather(*(worker(n) for n in range(plan.concurrency)))
        finally:
            if reporter is not None:
                reporter.cancel()
    duration = time.perf_counter() - started
    return stats.report(url=plan.url, transport=transport, encoding=plan.encoding if transport == "http" else "json",
                        concurrency=plan.concurrency, duration=duration)


def _headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {value!r} is not NAME: VALUE")
        headers[name.strip()] = content.strip()
    return headers


def _progress_line(stream: IO[str]) -> Callable[[str], None]:
    def show(line: str) -> None:
        stream.write(f"\r{line}\x1b[K" if stream.isatty() else f"{line}\n")
        stream.flush()

    return show


def run(args: argparse.Namespace) -> int:
    transport = check_target(args.url, allow_remote=args.allow_remote)
    plan = LoadPlan(
        url=args.url,
        inputs=load_inputs(args.input, args.message),
        concurrency=args.concurrency,
        runs=args.runs,
        duration=args.duration,
        ramp_up=args.ramp_up,
        encoding=args.encoding,
        headers=_headers(args.header),
        run_timeout=args.run_timeout,
        same_thread=args.same_thread,
    )
    _check_plan(plan)
    show_progress = sys.stderr.isatty() if args.progress is None else args.progress
    progress = _progress_line(sys.stderr) if show_progress else None
    report = asyncio.run(run_load(plan, progress=progress, transport=transport))
    if progress is not None and sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
    if args.json:
        sys.stdout.write(json.dumps(msgspec.to_builtins(report), indent=2) + "\n")
    else:
        sys.stdout.write(format_report(report))
    ok = {"finished", "interrupted", "cancelled"}
    return 0 if report.runs and set(report.outcomes) <= ok else 1
