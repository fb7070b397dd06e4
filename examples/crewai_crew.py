"""A CrewAI crew served as an AG-UI agent, offline: a forecaster with a tool, then a writer.

Run it from the repository root::

    agui-engine serve --agent crewai:examples.crewai_crew:crew

then, in another terminal::

    agui-engine run --url http://127.0.0.1:8000/ "Tokyo"

The user's message reaches the tasks as ``{message}``. Each agent's ``LLM`` is an ordinary
CrewAI ``LLM`` pointed at a :class:`~agui_engine.demo.scripted.ScriptedModel` served over loopback HTTP in
the OpenAI Chat Completions format (:func:`agui_engine.adapters.loopback.serve_openai_compatible`):
no API key, no network. The forecaster's model calls ``get_weather`` with the city of the
message (its arguments stream in fragments), then reports what the tool returned; the
writer's model turns the report into one sentence. ``serve`` sets CrewAI's offline switches
(telemetry, tracing, the model cost map) unless they are set, and routes CrewAI's console
panels to its log at DEBUG (``--log-level debug`` shows them). For a real model, give
``LLM(model="openai/gpt-4o-mini", stream=True)`` and set ``OPENAI_API_KEY``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

from agui_engine.adapters.loopback import ModelEndpoint, serve_openai_compatible
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results, user_text


@tool("get_weather")
def get_weather(city: str) -> str:
    """The current weather for a city (example data)."""
    return f"{city}: sunny, 21 C"


def city_of(messages: Sequence[Any]) -> str:
    """The city the task names (its description says ``for: <city>``)."""
    return user_text(messages).partition("for: ")[2].split("\n")[0].strip() or "Tokyo"


def look_up(messages: Sequence[Any]) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedCall("get_weather", {"city": city_of(messages)})])


def report(messages: Sequence[Any]) -> str:
    return f"Report: {tool_results(messages)[-1]}"


def sentence(messages: Sequence[Any]) -> str:
    """The forecaster's report (the task's context) as one sentence."""
    text = user_text(messages)
    found = text.split("Report: ")[-1].split("\n")[0].strip() if "Report: " in text else "no report"
    return f"In short: {found}."


def llm(endpoint: ModelEndpoint) -> LLM:
    return LLM(model="openai/scripted-1", base_url=endpoint.base_url, api_key="offline", stream=True)


#: one scripted model per agent: each task is its own conversation
FORECASTER_MODEL = serve_openai_compatible(ScriptedModel([look_up, report]))
WRITER_MODEL = serve_openai_compatible(ScriptedModel([sentence]))

forecaster = Agent(role="forecaster", goal="find the weather", backstory="a meteorologist",
                   llm=llm(FORECASTER_MODEL), tools=[get_weather])
writer = Agent(role="writer", goal="write one sentence", backstory="a copywriter", llm=llm(WRITER_MODEL))

crew = Crew(
    agents=[forecaster, writer],
    tasks=[
        Task(description="Find the weather for: {message}", expected_output="the weather report", agent=forecaster),
        Task(description="Write the weather report as one sentence.", expected_output="one sentence", agent=writer),
    ],
)
