from __future__ import annotations

import os

import pytest

from agui_engine.cli.agent_spec import agent_from_spec
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.errors import UsageError
from agui_engine.transports.sse_client import SSEAgent
from agui_engine.transports.stdio_client import StdioAgent
from agui_engine.transports.websocket_client import WebSocketAgent
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


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("http://", "has no host"),
        ("wss://h:99999/", "is not a URL"),
        ("127.0.0.1:8000", "write http://127.0.0.1:8000 (SSE) or ws://127.0.0.1:8000"),
        ("stdio:", "write stdio:<command>"),
        ("embedded:x", "takes no options"),
    ],
)
def test_mistakes_say_what_to_write(spec: str, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        agent_from_spec(spec)
    assert expected in info.value.message


def test_every_scheme_row_names_a_loader_that_exists() -> None:
    """The table's strings are imports: each must resolve (a typo would only show when used)."""
    import importlib

    from agui_engine.cli.agent_spec import MODEL_SCHEME, SCHEMES

    for row in [*SCHEMES.values(), MODEL_SCHEME]:
        module, _, function = row.loader.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), row


def test_a_crewai_spec_sets_the_offline_switches_the_environment_does_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from agui_engine.cli.agent_spec import CREWAI_OFFLINE_ENV

    for name in CREWAI_OFFLINE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "true")  # the user's own choice stays
    with pytest.raises(UsageError, match="no module named 'no_such_crew_module'"):
        agent_from_spec("crewai:no_such_crew_module:crew")
    assert os.environ["CREWAI_TRACING_ENABLED"] == "true"
    assert {n: os.environ[n] for n in CREWAI_OFFLINE_ENV if n != "CREWAI_TRACING_ENABLED"} == {
        "CREWAI_DISABLE_TELEMETRY": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    assert "OTEL_SDK_DISABLED" not in CREWAI_OFFLINE_ENV  # process-wide: it would silence serve --otel
