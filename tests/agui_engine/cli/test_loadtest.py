"""``agui-engine loadtest``: against the real gateway (SSE, NDJSON, protobuf, WebSocket), against a server
written with the official Python SDK's ``EventEncoder``, against broken and refusing servers, and as a
real subprocess (one-line mistakes, ``--json``). Counts are asserted, never timings."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from agui_engine.cli.load_report import LatencySamples, LoadStats, RunRecord, format_report
from agui_engine.cli.loadtest import LoadPlan, check_target, load_inputs, request_body, run_load
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.transports import start_sse_server
from agui_engine.transports.websocket_server import start_websocket_server

#: text deltas per run of the test agent: a run is this + 4 events (start, message start/end, finish)
TOKENS = 25
LOADTEST = [sys.executable, "-m", "agui_engine", "loadtest"]
#: a subprocess load test of a few dozen runs: seconds; the bound stops a hang
DEADLINE = 60


async def token_agent(input: RunAgentInput) -> AsyncIterator[Event]:
    """A token stream that awaits once per token, as a model's does."""
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    yield TextMessageStartEvent(message_id=f"m-{input.run_id}")
    for n in range(TOKENS):
        await asyncio.sleep(0)
        yield TextMessageContentEvent(message_id=f"m-{input.run_id}", delta=f"t{n} ")
    yield TextMessageEndEvent(message_id=f"m-{input.run_id}")
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def plan(url: str, **options: object) -> LoadPlan:
    return LoadPlan(url=url, inputs=load_inputs(None, "hello"), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["sse", "ndjson", "proto"])
async def test_every_event_of_every_run_is_counted_and_verified(encoding: str) -> None:
    server = await start_sse_server(token_agent)
    try:
        report = await run_load(plan(server.url, concurrency=5, runs=20, encoding=encoding))
    finally:
        await server.close()
    assert report.outcomes == {"finished": 20} and report.runs == 20
    assert report.events == 20 * (TOKENS + 4) and report.protocol_errors == 0 and report.errors == []
    assert report.time_to_first_event.count == 20 and report.run_duration.count == 20
    assert report.inter_event.count == 20 * (TOKENS + 3)  # one gap per event after a run's first
    assert report.bytes > report.events and report.events_per_s > 0


async def test_a_websocket_endpoint() -> None:
    server = await start_websocket_server(token_agent)
    try:
        report = await run_load(plan(server.url, concurrency=3, runs=9))
    finally:
        await server.close()
    assert report.transport == "websocket" and report.outcomes == {"finished": 9}
    assert report.events == 9 * (TOKENS + 4) and report.protocol_errors == 0


async def test_a_duration_keeps_starting_runs_and_lets_the_last_ones_finish() -> None:
    server = await start_sse_server(token_agent)
    try:
        report = await run_load(plan(server.url, concurrency=2, duration=0.5))
    finally:
        await server.close()
    assert report.runs >= 2 and report.outcomes == {"finished": report.runs}
    assert report.events == report.runs * (TOKENS + 4)


async def _raw_server(handler: web.RequestHandler | object) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/", handler)  # type: ignore[arg-type]
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/"


async def test_a_server_written_with_the_official_sdk_is_measured() -> None:
    """Any AG-UI server: one that encodes with ``ag_ui.encoder.EventEncoder`` (ag-ui-protocol 1.0)."""
    from ag_ui.core import events as official
    from ag_ui.encoder import EventEncoder

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        encoder = EventEncoder(accept=request.headers.get("Accept"))
        response = web.StreamResponse(headers={"Content-Type": encoder.get_content_type()})
        await response.prepare(request)
        thread, run = body["threadId"], body["runId"]
        for event in [official.RunStartedEvent(thread_id=thread, run_id=run),
                      official.TextMessageStartEvent(message_id="m", role="assistant"),
                      *[official.TextMessageContentEvent(message_id="m", delta=f"{n}") for n in range(10)],
                      official.TextMessageEndEvent(message_id="m"),
                      official.RunFinishedEvent(thread_id=thread, run_id=run)]:
            await response.write(encoder.encode(event).encode())
        await response.write_eof()
        return response

    runner, url = await _raw_server(handler)
    try:
        report = await run_load(plan(url, concurrency=4, runs=8))
    finally:
        await runner.cleanup()
    assert report.outcomes == {"finished": 8} and report.events == 8 * 14 and report.protocol_errors == 0


async def test_broken_refusing_and_truncated_streams_are_named() -> None:
    """A stream that breaks the rules is a protocol error quoted with its event index; a refusal and a
    stream that stops before its terminal event are counted as such."""
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        kind = calls % 3
        if kind == 0:
            return web.Response(status=429, text="slow down")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n')
        if kind == 1:  # content of a message never started
            await response.write(b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n\n')
            await response.write(b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n')
        await response.write_eof()
        return response

    runner, url = await _raw_server(handler)
    try:
        report = await run_load(plan(url, concurrency=1, runs=6))
    finally:
        await runner.cleanup()
    assert report.outcomes == {"protocol_error": 2, "incomplete": 2, "http_error": 2}
    assert report.protocol_errors == 2
    quoted = "\n".join(report.errors)
    assert "event 1 (TEXT_MESSAGE_CONTENT)" in quoted and "HTTP 429: slow down" in quoted
    assert "protocol errors: 2" in format_report(report)


def test_the_request_body_has_every_member_the_official_schemas_require() -> None:
    """A 0.0.x server (CopilotKit's runtime) refuses a body without ``tools``: send them all, and
    the official SDK's RunAgentInput (every member required) accepts it."""
    from ag_ui.core import RunAgentInput as OfficialInput

    body = json.loads(request_body(load_inputs(None, "hi")[0]))
    assert {"threadId", "runId", "state", "messages", "tools", "context", "forwardedProps"} <= set(body)
    assert OfficialInput.model_validate(body).messages[0].content == "hi"


def test_only_this_machine_is_a_target_unless_allowed() -> None:
    assert check_target("http://127.0.0.1:8000/") == "http"
    assert check_target("ws://localhost:8000/") == "websocket"
    assert check_target("http://[::1]:8000/") == "http"
    with pytest.raises(UsageError, match="not this machine"):
        check_target("http://192.0.2.1:8000/")  # TEST-NET-1: refused before anything is sent
    assert check_target("http://192.0.2.1:8000/", allow_remote=True) == "http"
    with pytest.raises(UsageError, match="not an http"):
        check_target("ftp://127.0.0.1/")


def test_inputs_from_a_file_of_json_lines_name_a_bad_line(tmp_path: Path) -> None:
    good = '{"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": "hi"}]}'
    path = tmp_path / "inputs.jsonl"
    path.write_text(f"{good}\n{good}\n")
    assert len(load_inputs(str(path), "unused")) == 2
    path.write_text(f"{good}\n{{\"threadId\": 3}}\n")
    with pytest.raises(UsageError, match="line 2"):
        load_inputs(str(path), "unused")


@given(st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=300),
       st.integers(min_value=1, max_value=50))
def test_a_bounded_sample_keeps_the_exact_count_and_maximum(values: list[float], capacity: int) -> None:
    samples = LatencySamples(capacity)
    for value in values:
        samples.add(value)
    assert samples.count == len(values) and samples.maximum == max(values)
    assert len(samples.samples) == min(capacity, len(values)) and set(samples.samples) <= set(values)
    if capacity >= len(values):  # exact below the bound
        ordered = sorted(values)
        assert samples.distribution().p50_ms == round(ordered[(len(values) + 1) // 2 - 1] * 1000, 3)


def test_gaps_count_events_that_arrived_in_one_read_as_zero() -> None:
    stats = LoadStats()
    stats.add(RunRecord(started=0.0, reads=[(0.010, 3), (0.030, 1)], events=4, outcome="finished", ended=0.04), 0)
    assert sorted(stats.gaps.samples) == pytest.approx([0.0, 0.0, 0.02])
    assert stats.first_event.samples == pytest.approx([0.010])


async def _loadtest(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*LOADTEST, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_command_prints_json_and_exits_0_when_every_run_finished() -> None:
    server = await start_sse_server(token_agent)
    try:
        code, out, err = await _loadtest(server.url, "-c", "4", "-n", "12", "--json", "--progress")
    finally:
        await server.close()
    assert code == 0, err
    report = json.loads(out)
    assert report["outcomes"] == {"finished": 12} and report["events"] == 12 * (TOKENS + 4)
    assert report["inter_event"]["count"] == 12 * (TOKENS + 3) and report["protocol_errors"] == 0


@pytest.mark.parametrize("args, said", [
    (["http://192.0.2.1:9/"], "not this machine"),
    (["http://127.0.0.1:9/", "-c", "0"], "--concurrency must be"),
    (["http://127.0.0.1:9/", "--input", "/nonexistent/inputs.jsonl"], "cannot read --input"),
    (["http://127.0.0.1:9/", "--header", "nocolon"], "is not NAME: VALUE"),
])
async def test_mistakes_are_one_line(args: list[str], said: str) -> None:
    code, out, err = await _loadtest(*args)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err and "Traceback" not in err


async def test_an_endpoint_that_is_down_is_counted_not_a_traceback() -> None:
    code, out, err = await _loadtest("http://127.0.0.1:9/", "-n", "3", "-c", "1")
    assert code == 1 and "Traceback" not in err
    assert "3 connect_error" in out
