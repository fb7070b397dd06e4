"""``agui-engine serve --otel`` (issue 33): a real server process configured by the standard
``OTEL_*`` variables exports its run's trace and its counters over OTLP/HTTP to a receiver on
loopback (an aiohttp server here, decoding the protobuf requests with opentelemetry-proto)."""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ...waiting import eventually

ROOT = Path(__file__).resolve().parents[3]


class Receiver:
    """An OTLP/HTTP receiver: POST /v1/traces and /v1/metrics, protobuf bodies (gzip or not)."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self.on_traces)
        app.router.add_post("/v1/metrics", self.on_metrics)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    @staticmethod
    async def _body(request: web.Request) -> bytes:
        assert request.content_type == "application/x-protobuf"
        body = await request.read()
        return gzip.decompress(body) if request.headers.get("Content-Encoding") == "gzip" else body

    async def on_traces(self, request: web.Request) -> web.Response:
        self.traces.append(ExportTraceServiceRequest.FromString(await self._body(request)))
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def on_metrics(self, request: web.Request) -> web.Response:
        self.metrics.append(ExportMetricsServiceRequest.FromString(await self._body(request)))
        return web.Response(body=b"", content_type="application/x-protobuf")

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of every span received."""
        out = []
        for req in self.traces:
            for rs in req.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                out.extend((resource, span) for ss in rs.scope_spans for span in ss.spans)
        return out

    def metric_names(self) -> set[str]:
        return {m.name for req in self.metrics for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = v.string_value if v.HasField("string_value") else v.int_value if v.HasField("int_value") else v
    return out


@pytest.mark.timeout(120)  # a server process (its imports: the SDK and the exporter) and an export on exit
async def test_serve_otel_exports_the_runs_trace_and_counters_over_otlp_http(tmp_path: Path) -> None:
    receiver = Receiver()
    await receiver.start()
    log = tmp_path / "serve.log"
    # The server's SDK is configured by this test's OTEL_* alone: an inherited OTEL_SDK_DISABLED (the
    # standard opt-out, which the SDK honours) would make it record nothing.
    inherited = {k: v for k, v in os.environ.items() if k != "OTEL_SDK_DISABLED"}
    env = {**inherited, "AGUI_AUTH_TOKEN": "", "PYTHONPATH": str(ROOT),
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "agui-gateway-test",
           "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--pace", "0", "--otel", "--no-inspect",
            stdout=asyncio.subprocess.DEVNULL, stderr=err, cwd=ROOT, env=env)
    try:
        await eventually(lambda: "serving on " in log.read_text() or proc.returncode is not None, timeout=60,
                         what="the server's address")
        url = next(line.split()[-1] for line in log.read_text().splitlines() if line.startswith("serving on "))
        trace_id = uuid.uuid4().int
        body = {"threadId": "thread-otlp", "runId": "run-otlp", "state": None, "tools": [], "context": [],
                "forwardedProps": None, "messages": [{"id": "u", "role": "user", "content": "What's the weather in Tokyo?"}]}
        async with httpx.AsyncClient(timeout=60) as client:
            resp = await client.post(url, json=body, headers={
                "Accept": "text/event-stream", "traceparent": f"00-{trace_id:032x}-{0x1122334455667788:016x}-01"})
        assert resp.status_code == 200 and "RUN_FINISHED" in resp.text
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0, log.read_text()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await receiver.close()
    spans = [(res, s) for res, s in receiver.spans() if int.from_bytes(s.trace_id, "big") == trace_id]
    names = [s.name for _, s in spans]
    assert "invoke_agent LLMAgent" in names, names
    assert "chat" in names and "execute_tool get_weather" in names, names  # the paced embedded model has no name
    resource, run = next((res, s) for res, s in spans if s.name.startswith("invoke_agent"))
    assert resource["service.name"] == "agui-gateway-test" and resource["deployment.environment"] == "test"
    assert run.parent_span_id == (0x1122334455667788).to_bytes(8, "big")
    assert _attrs(run)["gen_ai.conversation.id"] == "thread-otlp"
    chat = next(s for _, s in spans if s.name == "chat")
    assert _attrs(chat)["gen_ai.usage.output_tokens"] > 0
    assert {"agui.events.sent", "agui.runs.ended"} <= receiver.metric_names()
