"""An ``LLMAgent`` with an ordinary Python function as its server tool, served offline.

Run it from the repository root::

    agui-engine serve --agent py:examples.llm_agent:agent

then, in another terminal::

    agui-engine run --url http://127.0.0.1:8000/ "What's the weather in Oslo?"

``get_weather`` is a plain (sync) function: the server runs it in a worker thread, no
``tool_runner`` argument needed (in a program of your own, ``agui_engine.transports.run_agent``
or ``Thread`` does the same). The model is a :class:`~agui_engine.demo.scripted.ScriptedModel`: it calls
``get_weather`` for the city the user names (its arguments stream in fragments), then answers
with the tool's result. Swap in a real model with
``agui_engine.adapters.client_from_spec("openai:gpt-4o-mini")``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agui_engine import LLMAgent
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results, user_text

#: example data: not a forecast
WEATHER = {"oslo": (3.0, "Snow"), "tokyo": (18.5, "Sunny"), "paris": (12.0, "Cloudy")}


def get_weather(city: str) -> dict[str, Any]:
    """The current weather for a city (example data)."""
    temperature, condition = WEATHER.get(city.lower(), (20.0, "Clear"))
    return {"city": city, "temperature": temperature, "condition": condition}


def look_up(messages: Sequence[Any]) -> ScriptedTurn:
    """Turn 0: call get_weather for the first known city the user names (else Tokyo)."""
    words = [w.strip("?!.,").lower() for w in user_text(messages).split()]
    city = next((w.title() for w in words if w in WEATHER), "Tokyo")
    return ScriptedTurn(text=f"Checking {city}. ", tool_calls=[ScriptedCall("get_weather", {"city": city})])


def answer(messages: Sequence[Any]) -> str:
    """Turn 1: answer with what the tool returned."""
    weather = json.loads(tool_results(messages)[-1])
    return f"{weather['city']}: {weather['temperature']:g} °C, {weather['condition']}."


agent = LLMAgent(ScriptedModel([look_up, answer]), tools=[get_weather])
