"""How long "stop" takes, from the client's stop to the upstream model request
being closed: the measurement shared by tests/transports/test_stop.py (which
bounds it) and benchmarks/bench_stop.py (which reports it).

The chain is the production one: a model server on loopback (the replay server,
streaming a recorded OpenAI Chat response and then holding the stream open like
a slow model), the OpenAI adapter, LLMAgent, the SSE gateway, and a client that
stops after the first text delta:

* ``"abort"`` -- the official @ag-ui/client run by ``node`` (tests/js/abort_run.mjs)
  calls ``abortRun()``: its fetch is aborted, the connection closes, no DELETE;
* ``"delete"`` -- a Python client sends ``DELETE <url>/runs/<runId>`` (what
  SSEAgent does when its generator is closed early) and then leaves.

The time is wall clock in both processes (the client's stop, the model server
seeing its request closed); the replay server checks for a disconnect every
``DISCONNECT_POLL_SECONDS`` (10 ms), which bounds the resolution.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

from agui_engine.adapters.openai_chat import OpenAIChatClient
from agui_engine.adapters.replay import ReplayServer, load_fixture
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.transports.registry_options import DEFAULT_GRACE_SECONDS, RegistryOptions
from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import node_with

from .scripted import make_input

JS = Path(__file__).resolve().parent.parent / "js"
ABORT_SCRIPT = JS / "abort_run.mjs"

#: How long a measurement waits for the upstream request to close: a tenth of the
#: grace period (so a stop that only happened because the grace timer fired is
#: reported as "not stopped"), ample for a loaded 2-core CI machine.
STOP_DEADLINE_SECONDS = DEFAULT_GRACE_SECONDS / 10

#: Seconds the client side of one measurement may take (node start-up included).
CLIENT_TIMEOUT_SECONDS = 30.0


def node() -> str:
    """The node binary; the official client must be installed (tests/install-deps.sh)."""
    return node_with("@ag-ui/client")


async def _abort_with_official_client(url: str, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        node(), str(ABORT_SCRIPT), url, run_id, "1", json.dumps(headers),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT_SECONDS)
    assert proc.returncode == 0, (out + err).decode()
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    assert report["abortedAt"] is not None, report
    report["stoppedAt"] = report["abortedAt"] / 1000
    return report


async def _delete_from_python(url: str, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    h = {"Content-Type": "application/json", "Accept": "text/event-stream", **headers}
    seen = b""
    async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT_SECONDS) as client:
        async with client.stream("POST", url, content=msgspec.json.encode(make_input(run_id)), headers=h) as r:
            async for chunk in r.aiter_raw():
                seen += chunk
                if b"TEXT_MESSAGE_CONTENT" in seen:
                    break
            stopped_at = time.time()
            deleted = await client.delete(url.rstrip("/") + "/runs/" + run_id)
    return {"stoppedAt": stopped_at, "status": deleted.status_code, "seen": seen.count(b"\ndata: ")}


async def measure_stop(
    how: str, run_id: str, *, headers: dict[str, str] | None = None, grace_seconds: float = DEFAULT_GRACE_SECONDS
) -> dict[str, Any]:
    """Stop one run ``how`` (``"abort"`` or ``"delete"``) after its first text delta.

    Returns ``stop_ms`` (client stop to upstream close; None when the upstream
    request was still open STOP_DEADLINE_SECONDS later), the run's
    ``terminal_code``, the ``client``'s report and ``upstream_disconnects``.
    """
    client = {"abort": _abort_with_official_client, "delete": _delete_from_python}[how]
    data = load_fixture("openai_chat", "text").body
    async with ReplayServer() as model_server:
        llm = OpenAIChatClient(
            "m", api_key="k", base_url=model_server.base_url("openai_chat", "text", hold_after=len(data) * 2 // 3)
        )
        try:
            async with await start_sse_server(LLMAgent(llm), options=RegistryOptions(grace_seconds=grace_seconds)) as srv:

                async def upstream_closed() -> float | None:
                    # The wall-clock moment the model server saw its request closed.
                    return time.time() if await model_server.wait_for_disconnect(timeout=CLIENT_TIMEOUT_SECONDS) else None

                closed = asyncio.ensure_future(upstream_closed())
                report = await client(srv.url, run_id, headers or {})
                stopped_at = report["stoppedAt"]
                done, _ = await asyncio.wait({closed}, timeout=max(stopped_at + STOP_DEADLINE_SECONDS - time.time(), 0))
                closed_at = closed.result() if done else None
                closed.cancel()
                if closed_at is not None and closed_at - stopped_at > STOP_DEADLINE_SECONDS:
                    closed_at = None
                assert srv.registry is not None
                run = srv.registry.get(run_id)
                return {
                    "stop_ms": (closed_at - stopped_at) * 1000 if closed_at is not None else None,
                    "terminal_code": run.terminal_code if run.finished else None,
                    "client": report,
                    "upstream_disconnects": model_server.disconnects,
                }
        finally:
            await llm.aclose()
