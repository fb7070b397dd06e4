"""A CrewAI flow served as an AG-UI agent, offline: structured state, two methods, a crew inside.

Run it from the repository root::

    agui-engine serve --agent crewai:examples.crewai_flow:WeatherFlow

then, in another terminal::

    agui-engine run --url http://127.0.0.1:8000/ "Paris"

``serve`` runs one ``WeatherFlow()`` per run. The flow's state starts from the run's input
(``message`` is the user's text); ``choose_city`` and ``forecast`` are flow-method steps,
each change of the state reaches the client as a state delta, and ``forecast`` kicks off the
crew of :mod:`examples.crewai_crew` (its agents' tokens and tool call stream live). Offline
as that crew is: scripted models over loopback HTTP, no API key.
"""

from __future__ import annotations

from crewai import CrewOutput
from crewai.flow.flow import Flow, listen, start
from pydantic import BaseModel

from examples.crewai_crew import crew


class WeatherState(BaseModel):
    message: str = ""
    city: str = ""
    report: str = ""


class WeatherFlow(Flow[WeatherState]):
    @start()
    def choose_city(self) -> str:
        city = self.state.message.strip() or "Tokyo"
        self.state.city = city
        return city

    @listen(choose_city)
    def forecast(self, city: str) -> str:
        out = crew.kickoff(inputs={"message": city})
        report = out.raw if isinstance(out, CrewOutput) else str(out)
        self.state.report = report
        return report
