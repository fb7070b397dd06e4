"""``agui-engine run`` as a real subprocess against a real gateway: one message, multi-turn, client tools."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agui_engine.transports import start_sse_server

from ..thread_agents import ApprovalAgent, client_tools_agent

RUN = [sys.executable, "-m", "agui_engine", "run"]
#: a few runs of the embedded model in a fresh interpreter: seconds; the deadline stops a hang
DEADLINE = 60


async def agui_run(*args: str, stdin: str = "") -> tuple[int, list[dict[str, Any]], str]:
    proc = await asyncio.create_subprocess_exec(*RUN, *args, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), DEADLINE)
    assert proc.returncode is not None
    return proc.returncode, [json.loads(line) for line in out.decode().splitlines()], err.decode()


async def test_multi_turn_with_a_client_tool() -> None:
    server = await start_sse_server(client_tools_agent(), port=0)
    try:
        code, events, err = await agui_run("--url", server.url, "--raw", "--tool",
                                           "tests.agui_engine.thread_agents:get_weather",
                                           stdin="What's the weather in Tokyo?\n\nthanks\n/quit\nnever sent\n")
    finally:
        await server.close()
    assert code == 0, err
    starts = [e for e in events if e["type"] == "RUN_STARTED"]
    assert len(starts) == 3 and len({e["threadId"] for e in starts}) == 1  # 2 runs for the tool turn + 1
    assert [e["type"] for e in events].count("RUN_FINISHED") == 3
    ends = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "tambo.component.end"]
    # the card names its data (the weather.current resource); the local tool's numbers reached the model
    assert ends and ends[0]["finalProps"]["resourceId"] == "weather.current"
    assert ends[0]["finalProps"]["params"] == {"city": "Tokyo"}
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "It's 3.5°C and snow in Tokyo" in text


async def test_one_message_and_an_interrupt_answered_from_stdin() -> None:
    server = await start_sse_server(ApprovalAgent(), port=0)
    try:
        code, events, _ = await agui_run("--url", server.url, "--raw", "hi")
        assert code == 0 and events[-1]["outcome"]["type"] == "interrupt"  # one message: no follow-up
        code, events, _ = await agui_run("--url", server.url, "--raw", "--chat", stdin="deploy\nyes please\n")
    finally:
        await server.close()
    assert code == 0
    texts = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["approve-1: resolved yes please"]


async def test_usage_mistakes_are_one_line() -> None:
    code, _, err = await agui_run("--url", "http://127.0.0.1:9/", "--tool", "nomodule", "hi")
    assert code == 2 and err.count("\n") == 1 and "write module:function" in err
    code, _, err = await agui_run("--url", "http://127.0.0.1:9/", "--chat", "hi")
    assert code == 2 and "not both" in err and "Traceback" not in err
