"""The AG-UI servers the published gateway benchmark measures, each in its own process:

    python benchmarks/gateways/servers.py NAME [UPSTREAM_URL]      (prints "PORT <n>")

Every contender serves the same scripted token stream: ``RUN_STARTED``, one assistant message of
``AGUI_BENCH_TOKENS`` text deltas (default 200), ``RUN_FINISHED`` -- each delta produced after an
``await``, as a model's tokens arrive one network read at a time. A run whose last user message is
``idle`` stops after its first delta and stays open (the memory-per-open-stream measurement).
Each builds its own native events the way its users do:

* ``engine`` -- this project's aiohttp gateway (``start_sse_server``), the whole gateway path on
  (verification, event ids, the resume log, keep-alive);
* ``engine-asgi`` -- the same gateway as an ASGI app (``create_asgi_app``) under uvicorn;
* ``fastapi-encoder`` -- FastAPI + uvicorn + the official SDK's ``EventEncoder`` (ag-ui-protocol),
  one ``StreamingResponse`` chunk per event: the pattern the AG-UI docs teach;
* ``pydantic-ai`` -- pydantic-ai's ``AGUIAdapter`` over a ``FunctionModel`` streaming the deltas;
* ``ag-ui-langgraph`` -- the official ``ag-ui-langgraph`` FastAPI endpoint over a one-node graph
  whose chat model streams the deltas;
* ``engine-proxy UPSTREAM`` -- ``agui-engine serve --agent UPSTREAM``: the gateway as a proxy hop in
  front of another AG-UI server (its CPU alone is measured; the upstream's separately);
* ``copilotkit-runtime UPSTREAM`` -- CopilotKit's Node runtime (``@copilotkit/runtime`` 1.75,
  ``benchmarks/gateways/node``) proxying the same upstream through its ``HttpAgent``.

The ASGI contenders run under uvicorn with its defaults, which take uvloop and httptools when
they are installed (they are, in the ``[bench]`` extra): the reference stack at its fastest.
``engine`` runs on the loop ``agui-engine serve`` picks (``transports/event_loop.py``: uvloop
when installed, the ``[fast]`` extra).

Production-to-write latency (``engine``, ``engine-asgi``, ``fastapi-encoder``): after SIGUSR1
each delta carries the monotonic nanosecond it was produced at (``"<ns> "`` instead of
``"token "``) and every write of the server's stream (aiohttp's ``StreamResponse.write``, an
ASGI ``send`` of a body) notes, for each delta in it, the time since; SIGUSR2 stops and writes
p50/p99/max and the count as JSON to ``$AGUI_BENCH_LATENCY_FILE``. Off (no stamp, no hook
work) while the CPU is measured.
"""

# No `from __future__ import annotations`: FastAPI reads route signatures at run time.

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

#: text deltas per run
TOKENS = int(os.environ.get("AGUI_BENCH_TOKENS", "200"))
DELTA = "token "
IDLE_MESSAGE = "idle"
NODE_DIR = Path(__file__).resolve().parent / "node"
#: Whether deltas carry their production time, and the latencies (ns) noted while they do.
_STAMPING: list[bool] = [False]
_LATENCIES: list[int] = []
_STAMP = re.compile(rb'"delta":"(\d+) "')
#: (class, attribute, original, hooked): set to the hook while stamping, back after.
_HOOKS: list[tuple[Any, str, Any, Any]] = []


def _note_writes(data: bytes) -> None:
    if _STAMPING[0]:
        now = time.monotonic_ns()
        _LATENCIES.extend(now - int(m) for m in _STAMP.findall(data))


def _latency_signals() -> None:
    def start(*_: Any) -> None:
        _LATENCIES.clear()
        for owner, attr, _, hooked in _HOOKS:
            setattr(owner, attr, hooked)
        _STAMPING[0] = True

    def stop(*_: Any) -> None:
        _STAMPING[0] = False
        for owner, attr, original, _ in _HOOKS:
            setattr(owner, attr, original)
        values = sorted(_LATENCIES)

        def at(q: float) -> float | None:
            return round(values[min(len(values) - 1, int(q * len(values)))] / 1e6, 3) if values else None

        doc = {"count": len(values), "p50_ms": at(0.5), "p99_ms": at(0.99),
               "max_ms": round(values[-1] / 1e6, 3) if values else None}
        Path(os.environ["AGUI_BENCH_LATENCY_FILE"]).write_text(json.dumps(doc))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


def _delta() -> str:
    return f"{time.monotonic_ns()} " if _STAMPING[0] else DELTA


def _is_idle(messages: Any) -> bool:
    for message in reversed(messages or []):
        role = getattr(message, "role", None) or (message.get("role") if isinstance(message, dict) else None)
        if role == "user":
            content = getattr(message, "content", None) if not isinstance(message, dict) else message.get("content")
            return content == IDLE_MESSAGE
    return False


async def token_script(events: Any, thread_id: str, run_id: str, idle: bool) -> AsyncIterator[Any]:
    """The benchmark run, built from ``events`` (``agui_engine.protocol.events`` or ``ag_ui.core``:
    both name their classes alike)."""
    yield events.RunStartedEvent(thread_id=thread_id, run_id=run_id)
    message_id = f"m-{run_id}"
    yield events.TextMessageStartEvent(message_id=message_id, role="assistant")
    for _ in range(1 if idle else TOKENS):
        await asyncio.sleep(0)
        yield events.TextMessageContentEvent(message_id=message_id, delta=_delta())
    if idle:
        await asyncio.sleep(3600)
    yield events.TextMessageEndEvent(message_id=message_id)
    yield events.RunFinishedEvent(thread_id=thread_id, run_id=run_id)


class EngineTokenAgent:
    def run(self, input: Any) -> AsyncIterator[Any]:
        import agui_engine.protocol.events as events

        return token_script(events, input.thread_id, input.run_id, _is_idle(input.messages))


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    return sock


def _timed_asgi(app: Any) -> Any:
    """``app`` with every response body it sends noted (_note_writes)."""
    async def timed(scope: Any, receive: Any, send: Any) -> None:
        if not _STAMPING[0]:  # no hook while the CPU is measured
            await app(scope, receive, send)
            return

        async def timed_send(message: Any) -> None:
            if message.get("type") == "http.response.body":
                _note_writes(message.get("body", b""))
            await send(message)

        await app(scope, receive, timed_send)

    return timed


async def serve_asgi(app: Any) -> None:
    import uvicorn

    app = _timed_asgi(app)
    sock = listening_socket()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="auto", ws_ping_interval=None)
    print("PORT", sock.getsockname()[1], flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


# ----------------------------------------------------------------------------------- contenders


async def engine() -> None:
    from aiohttp import web

    from agui_engine.transports.registry_options import RegistryOptions
    from agui_engine.transports.server_options import ConnectionOptions
    from agui_engine.transports.sse_server import create_app, start_sse_server

    write = web.StreamResponse.write

    async def timed_write(self: web.StreamResponse, data: Any) -> None:
        _note_writes(bytes(data))
        await write(self, data)

    _HOOKS.append((web.StreamResponse, "write", write, timed_write))  # set only while stamping
    # one load generator address opens up to 1,000 streams at once: the per-address caps (idle
    # connections, runs per client) would refuse that burst by design (not what this measures;
    # the global caps stay on)
    app = create_app(EngineTokenAgent(), options=RegistryOptions(max_runs=100_000, max_runs_per_client=0),
                     connection=ConnectionOptions(max_idle_per_ip=0))
    server = await start_sse_server(app=app)
    print("PORT", server.url.rstrip("/").rpartition(":")[2], flush=True)
    await asyncio.Event().wait()


async def engine_asgi() -> None:
    from agui_engine import transports

    create_asgi_app = getattr(transports, "create_asgi_app", None)
    if create_asgi_app is None:
        raise SystemExit("engine-asgi: this checkout has no agui_engine.transports.create_asgi_app")
    await serve_asgi(create_asgi_app(EngineTokenAgent()))


def fastapi_encoder_app() -> Any:
    import ag_ui.core as events
    from ag_ui.core import RunAgentInput
    from ag_ui.encoder import EventEncoder
    from fastapi import FastAPI, Request
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.post("/")
    async def run(input: RunAgentInput, request: Request) -> StreamingResponse:
        encoder = EventEncoder(accept=request.headers.get("accept"))

        async def body() -> Any:
            async for event in token_script(events, input.thread_id, input.run_id, _is_idle(input.messages)):
                yield encoder.encode(event)

        return StreamingResponse(body(), media_type=encoder.get_content_type())

    return app


async def fastapi_encoder() -> None:
    await serve_asgi(fastapi_encoder_app())


def pydantic_ai_app() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        prompts = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, UserPromptPart)]
        idle = bool(prompts) and prompts[-1].content == IDLE_MESSAGE
        for _ in range(1 if idle else TOKENS):
            await asyncio.sleep(0)
            yield DELTA
        if idle:
            await asyncio.sleep(3600)

    agent = Agent(FunctionModel(stream_function=stream))

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", run, methods=["POST"])])


async def pydantic_ai() -> None:
    await serve_asgi(pydantic_ai_app())


def langgraph_app() -> Any:
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    class TokenModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "tokens"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=DELTA * TOKENS))])

        async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None,
                           **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
            humans = [m for m in messages if isinstance(m, HumanMessage)]
            idle = bool(humans) and humans[-1].content == IDLE_MESSAGE
            for _ in range(1 if idle else TOKENS):
                await asyncio.sleep(0)
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=DELTA))
                if run_manager is not None:
                    await run_manager.on_llm_new_token(DELTA, chunk=chunk)
                yield chunk
            if idle:
                await asyncio.sleep(3600)

    model = TokenModel()

    async def agent_node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent_node)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=InMemorySaver())  # ag-ui-langgraph needs one
    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="tokens", graph=graph), "/")
    return app


async def ag_ui_langgraph() -> None:
    await serve_asgi(langgraph_app())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine_proxy(upstream: str) -> None:
    port = _free_port()
    print("PORT", port, flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "agui_engine", "serve", "--agent", upstream,
                              "--port", str(port), "--max-idle-per-ip", "0", "--log-level", "warning"])


def copilotkit_runtime(upstream: str) -> None:
    if not (NODE_DIR / "node_modules" / "@copilotkit" / "runtime").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True,
                       stdout=sys.stderr)
    port = _free_port()
    print("PORT", port, flush=True)
    os.execvp("node", ["node", str(NODE_DIR / "runtime.mjs"), str(port), upstream])


ASYNC = {"engine": engine, "engine-asgi": engine_asgi, "fastapi-encoder": fastapi_encoder,
         "pydantic-ai": pydantic_ai, "ag-ui-langgraph": ag_ui_langgraph}
PROXIES = {"engine-proxy": engine_proxy, "copilotkit-runtime": copilotkit_runtime}


def main() -> None:
    name = sys.argv[1]
    if name in PROXIES:
        PROXIES[name](sys.argv[2])
        return
    if name not in ASYNC:
        raise SystemExit(f"unknown contender {name!r}: one of {', '.join([*ASYNC, *PROXIES])}")
    _latency_signals()
    if name == "engine":  # the loop `agui-engine serve` runs on
        from agui_engine.transports.event_loop import run

        run(ASYNC[name]())
        return
    asyncio.run(ASYNC[name]())


if __name__ == "__main__":
    main()
