"""Agents for the thread client's tests, importable by a subprocess
(``agui-engine serve --transport stdio --agent py:tests.agui_engine.thread_agents:client_tools_agent``).

``client_tools_agent``: the real decision loop over the embedded model with the demo's components
and *no* server tools, so the weather scenario's ``get_weather`` call is a client tool: the run
ends with it pending and the client must run it. ``ApprovalAgent``: a real async generator of
AG-UI events that interrupts for an approval and, resumed, says what it was told.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agui_engine.cli.demo import demo_components
from agui_engine.demo.weather_model import EmbeddedModel
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.events import (
    Event,
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)


def client_tools_agent() -> LLMAgent:
    return LLMAgent(EmbeddedModel(), components=demo_components())


class ApprovalAgent:
    """First run: an interrupt asking for approval; a run resumed with an answer: the answer as text."""

    def __init__(self) -> None:
        self.inputs: list[RunAgentInput] = []

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        self.inputs.append(input)
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        if not input.resume:
            yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id, outcome=RunFinishedInterruptOutcome(
                interrupts=[Interrupt(id="approve-1", reason="approval", message="Deploy to production?")]))
            return
        entry = input.resume[0]
        mid = f"m-{input.run_id}"
        yield TextMessageStartEvent(message_id=mid, role="assistant")
        yield TextMessageContentEvent(message_id=mid, delta=f"{entry.interrupt_id}: {entry.status} {entry.payload}")
        yield TextMessageEndEvent(message_id=mid)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def get_weather(city: str) -> dict[str, object]:
    """Look up the current weather for a city (a client tool for ``agui-engine run --tool``)."""
    return {"city": city, "temperature": 3.5, "condition": "Snow", "humidity": 80, "wind_kph": 20}
