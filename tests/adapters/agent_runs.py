"""What every run of an agent-framework adapter (LangGraph, CrewAI) must pass, and the small
readers the adapter tests share: one piece of code for both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from ag_ui_validate.pytest_plugin import assert_valid_agui

from agui_engine.agent import Agent
from agui_engine.codec import encode_event
from agui_engine.events import Event, RunAgentInput, TextMessageContentEvent
from agui_engine.verify import verify_events

#: The API key the adapter tests hand their models: it must never reach an event.
KEY = "sk-test-S3CRET"


def check(events: Sequence[Any]) -> None:
    """Every run is valid for our Verifier and for ag-ui-validate, and contains no key."""
    assert verify_events(events) == [], verify_events(events)
    assert_valid_agui([msgspec.json.decode(encode_event(e)) for e in events], max_warnings=0)
    assert KEY not in repr(events)


async def collect(agent: Agent, input: RunAgentInput) -> list[Event]:
    """The whole run of ``agent`` on ``input``, checked."""
    events = [e async for e in agent.run(input)]
    check(events)
    return events


def of(events: Sequence[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def texts(events: Sequence[Any]) -> str:
    return "".join(e.delta for e in of(events, TextMessageContentEvent))
