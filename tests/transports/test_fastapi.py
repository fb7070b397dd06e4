"""A FastAPI app of its own (routes, middleware, an auth dependency) with the gateway's routes added
by ``add_agui_routes`` (issue 33), served by a real uvicorn on loopback: the Python ``SSEAgent``
runs, resumes after a cut connection, cancels and reads the thread's history through it, and the
official ``@ag-ui/client`` HttpAgent (node) runs and stops a run through it; the app's dependency
decides who may, and owns the runs."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException, Request

from agui_engine.protocol.events import RunErrorEvent, RunFinishedEvent
from agui_engine.transports import AsgiGateway, RegistryOptions, add_agui_routes
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.sse_client import SSEAgent

from ..waiting import eventually
from .scripted import ScriptedAgent, make_input
from .stop_measure import node

JS = Path(__file__).resolve().parents[1] / "js"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}


def current_user(authorization: str | None = Header(default=None)) -> str:
    """The app's own auth: its bearer tokens, its 401."""
    token = (authorization or "").removeprefix("Bearer ")
    if token not in TOKENS:
        raise HTTPException(status_code=401, detail="who are you?")
    return TOKENS[token]


class App:
    """The FastAPI app under uvicorn on a free loopback port."""

    def __init__(self, agent: Any, **options: Any) -> None:
        self.app = FastAPI()
        self.seen_paths: list[str] = []

        @self.app.middleware("http")
        async def tag(request: Request, call_next: Any) -> Any:
            self.seen_paths.append(request.url.path)
            response = await call_next(request)
            response.headers["X-App"] = "yes"
            return response

        @self.app.get("/hello")
        async def hello(user: str = Depends(current_user)) -> dict[str, str]:
            return {"hello": user}

        self.gateway: AsgiGateway = add_agui_routes(self.app, agent, prefix="/agui", auth=current_user, **options)
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task[None] | None = None
        self.url = ""

    async def __aenter__(self) -> App:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on"))
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[sock]))
        await eventually(lambda: self.server is not None and self.server.started, what="uvicorn to start")
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None and self.task is not None
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 30)


def _input(run_id: str, thread: str = "t-fastapi") -> Any:
    return msgspec.structs.replace(make_input(run_id), thread_id=thread)


async def _collect(agent: SSEAgent, run_id: str, thread: str = "t-fastapi") -> list[Any]:
    return [e async for e in agent.run(_input(run_id, thread))]


async def test_the_apps_routes_middleware_and_auth_stand_beside_the_gateway() -> None:
    async with App(ScriptedAgent(deltas=3), metrics=None) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=10) as c:
            assert (await c.get("/hello", headers=ALICE)).json() == {"hello": "alice"}
            refused = await c.post("/agui", json={}, headers={"Accept": "text/event-stream"})
            assert refused.status_code == 401 and refused.json() == {"detail": "who are you?"}  # the app's own 401
            health = await c.get("/agui/healthz", headers=ALICE)
            assert health.status_code == 200 and health.json() == {"status": "ok"} and health.headers["X-App"] == "yes"
            caps = await c.get("/agui/capabilities", headers=ALICE)
            assert caps.status_code == 200 and caps.headers["X-App"] == "yes"
            assert (await c.post("/agui/capabilities", headers=ALICE)).status_code == 405
            assert (await c.get("/agui/static/agui-engine.js", headers=ALICE)).status_code == 200
        events = await _collect(SSEAgent(served.url + "/agui", headers=ALICE), "run-a")
        assert isinstance(events[-1], RunFinishedEvent)
        assert "/agui" in served.seen_paths and "/hello" in served.seen_paths  # the app's middleware saw both
    assert served.gateway.registry.draining  # the app's shutdown ended the gateway's runs (its event handler)


async def test_sse_agent_runs_resumes_cancels_and_reads_history_through_the_app(drop_proxy: Any) -> None:
    agent = ScriptedAgent(deltas=40, pause=0.005)
    async with App(agent, options=RegistryOptions(grace_seconds=10)) as served:
        port = int(served.url.rsplit(":", 1)[1])
        # resume: the connection is cut mid-stream; SSEAgent resumes with Last-Event-ID and its run key
        proxy = drop_proxy("127.0.0.1", port, cut_after=900, drops=1)
        await proxy.start()
        alice = SSEAgent(f"http://127.0.0.1:{proxy.port}/agui", headers=ALICE, backoff_initial=0.01)
        events = await _collect(alice, "run-resumed")
        assert proxy.connections >= 2, "the stream was cut and resumed"
        assert isinstance(events[-1], RunFinishedEvent)
        deltas = [e.delta for e in events if type(e).__name__ == "TextMessageContentEvent"]
        assert len(deltas) == 40 and len(set(deltas)) == 40  # nothing lost, nothing repeated
        # history: alice's thread, as the app's principal alice; bob is not its owner
        history = await SSEAgent(served.url + "/agui", headers=ALICE).history("t-fastapi")
        assert [type(e).__name__ for e in history][0] == "RunStartedEvent" and history[-1].type.value == "RUN_FINISHED"
        with pytest.raises(RemoteAgentError) as refused:
            await SSEAgent(served.url + "/agui", headers=BOB).history("t-fastapi")
        assert refused.value.status == 404
        # cancel: closing the generator early sends DELETE, which stops the agent at once
        gen = SSEAgent(served.url + "/agui", headers=ALICE).run(_input("run-cancelled", "t-2"))
        async for event in gen:
            if type(event).__name__ == "TextMessageContentEvent":
                break
        await gen.aclose()
        await eventually(lambda: "run-cancelled" in agent.cancelled, what="the DELETE to cancel the run")


async def _node(script: str, *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(node(), script, *args, cwd=JS, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    # the client library logs a failed run on stdout too: the script's JSON is the document that opens a line
    for line in reversed(out.decode().split("\n")):  # not splitlines(): the text holds U+2028
        if line.startswith("{"):
            try:
                result, _ = json.JSONDecoder().raw_decode(line)
            except ValueError:
                continue  # a line of the library's own log
            return dict(result)
    raise AssertionError(f"no JSON from {script}: {out.decode()[:500]}")


@pytest.mark.timeout(120)  # node starts twice
async def test_the_official_http_agent_runs_and_stops_through_the_app() -> None:
    assert shutil.which("node"), "node is required (tests/install-deps.sh)"
    agent = ScriptedAgent(deltas=400, pause=0.01)
    async with App(ScriptedAgent(deltas=5)) as served, App(agent) as slow:
        result = await _node("http_agent_headers.mjs", served.url + "/agui", "t-js", "js-run", json.dumps(ALICE), "hi")
        assert result["error"] is None, result
        types = [e["type"] for e in result["events"]]
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
        assert any(m["role"] == "assistant" for m in result["messages"])
        denied = await _node("http_agent_headers.mjs", served.url + "/agui", "t-js", "js-run-2", "{}", "hi")
        assert denied["error"] and "401" in denied["error"]
        stopped = await _node("abort_run.mjs", slow.url + "/agui", "js-stop", "2", json.dumps(ALICE))
        assert stopped["abortedAt"] is not None, stopped
        await eventually(lambda: "js-stop" in agent.cancelled, what="the official client's abort to stop the run")


async def test_a_run_ended_by_the_apps_shutdown_gets_run_error_shutdown() -> None:
    agent = ScriptedAgent(deltas=2, hang=True)
    async with App(agent) as served:
        got: list[Any] = []

        async def read() -> None:
            async for event in SSEAgent(served.url + "/agui", headers=ALICE, max_retries=0).run(_input("run-hang")):
                got.append(event)

        reader = asyncio.create_task(read())
        await eventually(lambda: len(got) >= 3, what="the run to stream")
        await served.gateway.close()  # what the app's shutdown (lifespan) does
        await asyncio.wait_for(reader, 10)
    assert isinstance(got[-1], RunErrorEvent) and got[-1].code == "shutdown"
    assert "run-hang" in agent.cancelled
