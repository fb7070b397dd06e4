"""The servers the transport benchmark measures, each run in its own process:

    python benchmarks/transport_servers.py <stack>     (prints "PORT <n>" and "STATS <n>")

Stacks:

* ``engine-sse`` -- this project's gateway (``transports.sse_server.create_app``) with the
  whole gateway path on: verification, event ids, the resume log, keep-alive.
* ``ref-sse`` -- the reference stack: FastAPI + uvicorn + the official SDK's
  ``EventEncoder``, one ``StreamingResponse`` chunk per event.
* ``engine-ws`` -- this project's WebSocket gateway (``transports.websocket_server``).
* ``ref-ws`` -- FastAPI + uvicorn WebSocket, one text message per event
  (``model_dump_json(by_alias=True, exclude_none=True)``, what EventEncoder writes).
* ``engine-sse-otel`` -- ``engine-sse`` with every run traced and the OpenTelemetry counters on
  (``benchmarks/bench_frontends.py``).
* ``engine-asgi`` -- the same gateway as an ASGI app (``create_asgi_app``) under uvicorn.
* ``engine-sse-redis`` -- ``engine-sse`` with the shared Redis event log
  (``AGUI_BENCH_REDIS`` = its URL; ``benchmarks/bench_scaleout.py``).

Both stacks stream *the same events*, produced the same way: the run input's
``forwardedProps`` says how many events (``events``), how many are ready at
once (``burst``: the agent yields to the event loop after each burst, as a real
model stream delivers several tokens per network read) and whether the run
stays silent after ``RUN_STARTED`` (``idle``: for the memory-per-open-stream
measurement). Each stack builds its own native event objects (msgspec Structs
here, pydantic models in the SDK).

``AGUI_BENCH_VERIFY=0`` runs this engine's stacks without the protocol verifier
(to see what verification costs); the default is the whole gateway path.

``GET /__stats`` answers ``{"cpu": <process CPU seconds>, "rss": <bytes>}``
measured inside the server process.
"""

# No `from __future__ import annotations` here: FastAPI reads the route
# signatures at run time.


import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DELTA = "token "  # ~ one LLM token per delta
VERIFY = os.environ.get("AGUI_BENCH_VERIFY", "1") != "0"


def stats() -> dict[str, float]:
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu": time.process_time(),
        "user": usage.ru_utime,
        "sys": usage.ru_stime,
        "rss": rss_pages * resource.getpagesize(),
    }


def plan(props: Any) -> tuple[int, int, bool]:
    props = props or {}
    return int(props.get("events", 100)), max(1, int(props.get("burst", 20))), bool(props.get("idle", False))


# ---------------------------------------------------------------------------------------
# this engine
# ---------------------------------------------------------------------------------------


async def script(events: Any, input: Any) -> Any:
    """The benchmark run, built from ``events`` (``agui_engine.protocol.events`` or
    ``ag_ui.core``: both name their classes alike) so both stacks stream the same."""
    n, burst, idle = plan(input.forwarded_props)
    yield events.RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    if idle:
        await asyncio.sleep(3600)
    mid = "m-" + input.run_id
    yield events.TextMessageStartEvent(message_id=mid, role="assistant")
    content = events.TextMessageContentEvent
    for i in range(n - 4):
        if i % burst == 0:
            await asyncio.sleep(0)
        yield content(message_id=mid, delta=DELTA)
    yield events.TextMessageEndEvent(message_id=mid)
    yield events.RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


class BenchAgent:
    """The benchmark run as an engine Agent."""

    def run(self, input: Any) -> Any:
        import agui_engine.protocol.events

        return script(agui_engine.protocol.events, input)


async def engine_sse(shared_log: bool = False, tracing: bool = False) -> None:
    from aiohttp import web

    from agui_engine.transports.open_log import open_event_log
    from agui_engine.transports.registry_options import RegistryOptions
    from agui_engine.transports.server_options import ConnectionOptions
    from agui_engine.transports.sse_server import create_app, start_sse_server

    log = await open_event_log(os.environ["AGUI_BENCH_REDIS"] if shared_log else None)
    metrics = None
    if tracing:
        from agui_engine.transports.metrics import GatewayMetrics

        metrics = GatewayMetrics(otel=True)
    # The load generator is one address opening up to 1,000 streams at once: the
    # per-address cap on connections that run nothing would refuse that burst by
    # design (it is not what this benchmark measures; the global cap stays on).
    app = create_app(BenchAgent(), log=log, metrics=metrics, connection=ConnectionOptions(max_idle_per_ip=0),
                     options=RegistryOptions(max_runs=100_000, verify=VERIFY, tracing=tracing))

    async def stats_handler(request: web.Request) -> web.Response:
        return web.json_response(stats())

    app.router.add_get("/__stats", stats_handler)
    server = await start_sse_server(app=app)
    port = server.url.rstrip("/").rpartition(":")[2]
    print("PORT", port, flush=True)
    print("STATS", port, flush=True)
    await asyncio.Event().wait()


async def engine_sse_otel() -> None:
    """``engine-sse`` with every run traced (RegistryOptions(tracing=True)) and the OpenTelemetry
    counters on: the SDK's TracerProvider and MeterProvider, spans batched to an exporter that
    drops them (what leaves the process is the collector's cost, not the gateway's)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider())
    await engine_sse(tracing=True)


async def engine_asgi() -> None:
    """This project's gateway as an ASGI app (``transports.asgi_server.create_asgi_app``) under
    uvicorn, the whole gateway path on, as ``engine-sse``."""
    import socket

    import uvicorn
    from starlette.responses import JSONResponse

    from agui_engine.transports.asgi_server import create_asgi_app
    from agui_engine.transports.registry_options import RegistryOptions

    gateway = create_asgi_app(BenchAgent(), options=RegistryOptions(max_runs=100_000, verify=VERIFY), access_log=False)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__stats":
            await JSONResponse(stats())(scope, receive, send)
            return
        await gateway(scope, receive, send)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", ws_ping_interval=None)
    server = uvicorn.Server(config)
    print("PORT", sock.getsockname()[1], flush=True)
    print("STATS", sock.getsockname()[1], flush=True)
    await server.serve(sockets=[sock])


async def engine_sse_redis() -> None:
    await engine_sse(shared_log=True)


async def engine_ws() -> None:
    from aiohttp import web

    from agui_engine.transports.registry_options import RegistryOptions
    from agui_engine.transports.server_options import ConnectionOptions
    from agui_engine.transports.sse_server import start_sse_server
    from agui_engine.transports.websocket_server import start_websocket_server

    server = await start_websocket_server(
        BenchAgent(), options=RegistryOptions(max_runs=100_000, verify=VERIFY),
        connection=ConnectionOptions(max_idle_per_ip=0),  # see engine_sse
    )
    # The stats endpoint lives on a second, plain HTTP port of the same process.
    stats_app = web.Application()

    async def stats_handler(request: web.Request) -> web.Response:
        return web.json_response(stats())

    stats_app.router.add_get("/__stats", stats_handler)
    stats_server = await start_sse_server(app=stats_app)
    print("PORT", server.url.rstrip("/").rpartition(":")[2], flush=True)
    print("STATS", stats_server.url.rstrip("/").rpartition(":")[2], flush=True)
    await asyncio.Event().wait()


# ---------------------------------------------------------------------------------------
# the reference stack
# ---------------------------------------------------------------------------------------


def ref_events(input: Any) -> Any:
    import ag_ui.core

    return script(ag_ui.core, input)


def ref_app() -> Any:
    from ag_ui.core import RunAgentInput
    from ag_ui.encoder import EventEncoder
    from fastapi import FastAPI, Request, WebSocket
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()

    @app.post("/")
    async def run(input: RunAgentInput, request: Request) -> StreamingResponse:
        encoder = EventEncoder(accept=request.headers.get("accept"))

        async def body() -> Any:
            async for event in ref_events(input):
                yield encoder.encode(event)

        return StreamingResponse(body(), media_type=encoder.get_content_type())

    @app.get("/__stats")
    async def stats_route() -> JSONResponse:
        return JSONResponse(stats())

    @app.websocket("/")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        message = json.loads(await websocket.receive_text())
        input = RunAgentInput.model_validate(message["input"])
        async for event in ref_events(input):
            await websocket.send_text(event.model_dump_json(by_alias=True, exclude_none=True))
        await websocket.close()

    return app


async def ref_server() -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    config = uvicorn.Config(ref_app(), log_level="warning", access_log=False, lifespan="off", ws_ping_interval=None)
    server = uvicorn.Server(config)
    print("PORT", sock.getsockname()[1], flush=True)
    print("STATS", sock.getsockname()[1], flush=True)
    await server.serve(sockets=[sock])


def main() -> None:
    stack = sys.argv[1]
    # One core for the server, as the figures assume (AGUI_BENCH_PIN=0: not
    # pinned, for several gateway processes at once).
    pin = os.environ.get("AGUI_BENCH_PIN", "1") != "0"
    if pin and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runner = {
        "engine-sse": engine_sse,
        "engine-sse-redis": engine_sse_redis,
        "engine-sse-otel": engine_sse_otel,
        "engine-asgi": engine_asgi,
        "engine-ws": engine_ws,
        "ref-sse": ref_server,
        "ref-ws": ref_server,
    }[stack]
    asyncio.run(runner())


if __name__ == "__main__":
    main()
