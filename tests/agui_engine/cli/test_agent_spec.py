from __future__ import annotations

import pytest

from agui_engine.agent import Agent
from agui_engine.errors import UsageError
from agui_engine.cli.agent_spec import agent_from_spec
from agui_engine.transports.sse import SSEAgent
from agui_engine.transports.stdio import StdioAgent
from agui_engine.transports.websocket import WebSocketAgent

from tests.transports.scripted import ScriptedAgent, make_input


def test_specs() -> None:
    assert isinstance(agent_from_spec("http://h:1/agui", headers={"A": "b"}), SSEAgent)
    assert isinstance(agent_from_spec("wss://h/agui"), WebSocketAgent)
    assert isinstance(agent_from_spec("stdio:agui-engine serve --transport stdio"), StdioAgent)
    assert isinstance(agent_from_spec("py:tests.transports.scripted:agent"), ScriptedAgent)
    for bad in ("py:nope", "py:no.such.module:x", "py:tests.transports.scripted:make_input", "what"):
        with pytest.raises(UsageError):
            agent_from_spec(bad)


async def test_embedded_is_the_demo_agent_and_runs() -> None:
    agent = agent_from_spec("embedded")
    assert isinstance(agent, Agent)
    events = [e async for e in agent.run(make_input("e", "What's the weather in Tokyo?"))]
    assert events[0].type.value == "RUN_STARTED" and events[-1].type.value == "RUN_FINISHED"


def test_package_exports_load_lazily() -> None:
    import agui_engine.transports as transports

    for name in transports.__all__:
        assert getattr(transports, name) is not None
    with pytest.raises(AttributeError):
        transports.nope  # noqa: B018
