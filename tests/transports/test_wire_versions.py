"""The gateway writes the AG-UI wire each client understands (spec/wire-versions.md): the real
``@ag-ui/client`` 0.0.59 (what CopilotKit 1.74 and assistant-ui's react-ag-ui pin) and 1.0, each a
node subprocess against a real SSE gateway on loopback serving ``LLMAgent`` over a scripted model.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.codec import SSEDecoder
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.wire import to_wire0
from agui_engine.transports.server_options import ConnectionOptions
from agui_engine.transports.sse_server import start_sse_server

from ..agui_engine.event_samples import ALL_EVENT_SAMPLES

JS = Path(__file__).resolve().parents[1] / "js"
V0 = JS / "v0"
#: a node subprocess (start, an import of the client, two runs) on a shared 2-core machine
NODE_TIMEOUT = 120

_TOOL = {"name": "confirm_booking", "description": "Ask the user to confirm a booking",
         "parameters": {"type": "object", "properties": {"guests": {"type": "number"}}, "required": ["guests"]}}


def _node(folder: Path) -> str:
    node = shutil.which("node")
    if node and (folder / "node_modules" / "@ag-ui" / "client").is_dir():
        return node
    if os.environ.get("CI"):
        pytest.fail(f"node or {folder}/node_modules missing: run tests/install-deps.sh")
    pytest.skip(f"needs node and the npm packages of {folder}: run tests/install-deps.sh")


def _agent() -> LLMAgent:
    return LLMAgent(ScriptedModel([
        ScriptedTurn(text="Let me check with you.", tool_calls=(ScriptedCall("confirm_booking", {"guests": 4}),)),
        lambda messages: f"Booked: {tool_results(messages)[-1]}.",
    ]))


async def _run_node(*args: str, stdin: bytes | None = None, folder: Path = JS) -> Any:
    proc = await asyncio.create_subprocess_exec(
        _node(folder), *args, cwd=folder, stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), NODE_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def _round_trip(url: str, thread_id: str, client: Path) -> dict[str, Any]:
    _node(client)
    result: dict[str, Any] = await _run_node(str(JS / "frontend_tool.mjs"), url, thread_id, str(client))
    return result


def _finished(run: dict[str, Any]) -> dict[str, Any]:
    last: dict[str, Any] = run["events"][-1]
    assert last["type"] == "RUN_FINISHED", run
    return last


# -- the schemas of the real 0.0.59 package ----------------------------------------------------

#: What @ag-ui/core 0.0.59's EventSchemas reject among the 1.0 samples (event_samples.py), by
#: (type, the first issue's path): the rows of spec/wire-versions.md's table that samples reach.
_REJECTED_BY_0059 = {
    ("TOOL_CALL_RESULT", "content"),
    ("MESSAGES_SNAPSHOT", "messages.6.content"),  # a user part with a `file` source
    ("RUN_STARTED", "input.messages.6.content"),
    ("RUN_STARTED", "input.tools"),  # input without tools / context
    ("REASONING_MESSAGE_START", "role"),
    ("RUN_FINISHED", "outcome"),  # success + pendingToolCallIds (.strict())
    ("RUN_FINISHED", "outcome.type"),  # cancelled
}


async def test_the_0059_schemas_reject_the_1_0_shapes_the_table_lists_and_accept_every_event_on_the_0x_wire() -> None:
    raw = [msgspec.json.encode(s) for s in ALL_EVENT_SAMPLES]
    rejected = await _run_node(str(V0 / "schema_check.mjs"), stdin=b"[" + b",".join(raw) + b"]", folder=V0)
    assert {(r["type"], r["issues"][0].split(":")[0]) for r in rejected} == _REJECTED_BY_0059
    wire0 = [to_wire0(p) for p in raw]
    assert await _run_node(str(V0 / "schema_check.mjs"), stdin=b"[" + b",".join(wire0) + b"]", folder=V0) == []
    # every other event is written byte for byte as 1.0 writes it
    changed = {ALL_EVENT_SAMPLES[r["index"]]["type"] for r in rejected}
    assert all(w is p for w, p in zip(wire0, raw) if json.loads(p)["type"] not in changed)


# -- the real clients against a real gateway ---------------------------------------------------

@pytest.mark.timeout(180)  # two node subprocesses on a shared machine
async def test_the_0059_http_agent_runs_a_frontend_tool_round_trip_and_the_1_0_client_still_gets_1_0() -> None:
    # Both clients are checked before either starts: a skip raised inside gather() left the other
    # client's run streaming, and the server's close waited for it.
    _node(V0), _node(JS)
    async with await start_sse_server(_agent()) as srv:
        v0, v1 = await asyncio.gather(_round_trip(srv.url, "t-v0", V0), _round_trip(srv.url, "t-v1", JS))
    assert v0["version"] == "0.0.59" and v1["version"].startswith("1.")
    for got in (v0, v1):
        assert [r["error"] for r in got["runs"]] == [None, None], got["runs"]
        assert got["handled"] == ["confirmed for 4 guests"]  # the page's handler ran once
        assert got["messages"][-1]["role"] == "assistant"
        assert got["messages"][-1]["content"] == "Booked: confirmed for 4 guests."  # the run went on with it
    # 0.x: the outcome 0.0.59 accepts, the pending call kept in metadata["ag-ui"]
    first = _finished(v0["runs"][0])
    call_id = first["metadata"]["ag-ui"]["outcome"]["pendingToolCallIds"][0]
    assert first["outcome"] == {"type": "success"}
    assert v0["handled"] and any(m.get("toolCallId") == call_id for m in v0["messages"])
    # 1.0: the 1.0 outcome, untouched
    first = _finished(v1["runs"][0])
    assert first["outcome"]["type"] == "success" and len(first["outcome"]["pendingToolCallIds"]) == 1
    assert "metadata" not in first
    assert v1["runs"][0]["events"][0]["protocolVersion"] == "1.0"


@pytest.mark.timeout(120)
async def test_forced_1_0_wire_is_what_breaks_the_0059_client() -> None:
    """The failure the negotiation removes (issue 31): with the 1.0 wire forced, 0.0.59's strict
    outcome schema throws and the frontend tool's handler never runs."""
    async with await start_sse_server(_agent(), connection=ConnectionOptions(wire="1")) as srv:
        got = await _round_trip(srv.url, "t-forced", V0)
    assert got["handled"] == []
    assert "pendingToolCallIds" in got["runs"][0]["error"]


def _events(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    d = SSEDecoder()
    return [json.loads(m.data) for m in d.feed(r.content) + d.close()]


def _input(run_id: str, **extra: Any) -> dict[str, Any]:
    return {"threadId": "t-raw", "runId": run_id, "messages": [{"id": "u", "role": "user", "content": "book"}],
            "tools": [_TOOL], **extra}


@pytest.mark.parametrize(("choice", "declared", "want_pending"), [
    ("auto", None, False), ("auto", "1.0", True), ("auto", "0.9", False), ("auto", "1.1", True),
    ("0", "1.0", False), ("1", None, True),
])
async def test_the_wire_follows_the_declared_protocol_version_unless_fixed(
        choice: str, declared: str | None, want_pending: bool) -> None:
    extra = {} if declared is None else {"protocolVersion": declared}
    async with await start_sse_server(_agent(), connection=ConnectionOptions(wire=choice)) as srv:  # type: ignore[arg-type]
        async with httpx.AsyncClient(timeout=30) as c:
            # resumable: the finished run stays for the GET below
            r = await c.post(srv.url, json=_input("r1", **extra),
                             headers={"Accept": "text/event-stream", "X-AGUI-Resumable": "1"})
            # a resume through GET /runs/<id> is written in the wire of the run's input
            again = await c.get(srv.url.rstrip("/") + "/runs/r1",
                                headers={"Last-Event-ID": "r1:0", "X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]})
    for stream in (_events(r), _events(again)):
        outcome = stream[-1]["outcome"]
        assert ("pendingToolCallIds" in outcome) is want_pending
        assert ("metadata" in stream[-1]) is not want_pending


def test_a_wire_choice_outside_0_1_auto_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"ConnectionOptions.wire: wire must be one of 0, 1, auto, got '2'"):
        ConnectionOptions(wire="2")  # type: ignore[arg-type]
