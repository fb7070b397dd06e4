"""transports/event_loop.py: uvloop where installed, asyncio's own otherwise, a real gateway on each."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import RunFinishedEvent
from agui_engine.transports import event_loop
from agui_engine.transports.sse_server import start_sse_server

from .scripted import ScriptedAgent, make_input


async def _one_run() -> tuple[str, list[object], list[object]]:
    import httpx
    import msgspec

    agent = ScriptedAgent(deltas=20)
    expected = [e async for e in agent.run(make_input("loop"))]
    server = await start_sse_server(agent)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(server.url, content=msgspec.json.encode(make_input("loop")),
                                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        events = [decode_event(line[6:]) for line in answer.content.split(b"\n") if line.startswith(b"data: ")]
        return type(asyncio.get_running_loop()).__module__, events, expected
    finally:
        await server.close()


@pytest.mark.parametrize("choice", ["auto", "uvloop", "asyncio"])
def test_a_gateway_serves_a_whole_run_on_the_loop_chosen(choice: str) -> None:
    if choice == "uvloop" and importlib.util.find_spec("uvloop") is None:
        pytest.skip("uvloop is not installed (the [fast] extra)")
    module, events, expected = event_loop.run(_one_run(), choice)
    assert module.split(".")[0] == event_loop.resolve_loop(choice)
    assert len(events) == len(expected) and isinstance(events[-1], RunFinishedEvent)


def test_auto_takes_uvloop_exactly_when_it_is_importable() -> None:
    installed = importlib.util.find_spec("uvloop") is not None
    assert event_loop.resolve_loop("auto") == ("uvloop" if installed else "asyncio")
    assert event_loop.resolve_loop("asyncio") == "asyncio"
    assert (event_loop.loop_factory("auto") is not None) == installed
    assert event_loop.loop_factory("asyncio") is None


def test_uvloop_asked_for_but_missing_is_one_line_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # The import system as it answers on a machine without the extra (the only way to
    # see that answer on one that has it).
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert event_loop.resolve_loop("auto") == "asyncio"
    with pytest.raises(UsageError, match=r"agui-engine\[fast\]"):
        event_loop.resolve_loop("uvloop")

    async def never() -> None:  # pragma: no cover - must not start
        raise AssertionError("ran")

    with pytest.raises(UsageError):
        event_loop.run(never(), "uvloop")


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(UsageError, match="one of auto, uvloop, asyncio"):
        event_loop.resolve_loop("tokio")
