"""CrewAI behind the engine, with the real crewai: scripted LLMs (CrewAI's own BaseLLM
extension point) for the shapes, and CrewAI's OpenAI-compatible LLM streaming from the
project's provider replay server. Every run passes the engine's Verifier and
ag-ui-validate."""

from __future__ import annotations

import os

# CrewAI offline: no telemetry, no tracing, no cost-map download (set before crewai imports).
# Not OTEL_SDK_DISABLED: this runs at collection, so it would turn off the OpenTelemetry SDK of every
# test of the process (under xdist, of every worker) and of their subprocesses (tests/otel_sdk.py);
# CREWAI_DISABLE_TELEMETRY alone is crewAI's telemetry opt-out.
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_TRACING_ENABLED="false",
    CREWAI_DISABLE_TRACKING="true",
    LITELLM_LOCAL_MODEL_COST_MAP="True",
)

import asyncio  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import msgspec  # noqa: E402
import pytest  # noqa: E402
from crewai import LLM, Agent, BaseLLM, Crew, Task  # noqa: E402
from crewai.flow import human_feedback  # noqa: E402
from crewai.flow.flow import Flow, listen, start  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from agui_engine.adapters.crewai import (  # noqa: E402
    FEEDBACK_INTERRUPT_REASON,
    TASK_HUMAN_INPUT_UNSUPPORTED,
    CrewAIAgent,
    client_tools,
    kickoff_inputs,
)
from agui_engine.adapters.replay import ReplayServer  # noqa: E402
from agui_engine.loops.agent_loop import AgentLoop  # noqa: E402
from agui_engine.protocol.errors import RemoteInputError, UsageError  # noqa: E402
from agui_engine.protocol.events import (  # noqa: E402
    Context,
    CustomEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from tests.adapters.agent_runs import KEY, WEATHER_CARD, check, collect, of, texts  # noqa: E402
from tests.agui_engine.run_checks import check_run  # noqa: E402
from tests.helpers import run_input


class ScriptedLLM(BaseLLM):
    """CrewAI's own extension point: replies in order (the last repeats), each streamed as
    whitespace-separated chunks through CrewAI's stream-chunk event. With ``stream_calls`` a
    reply's ``Action`` streams as a model streams a tool call (CrewAI's tool-call chunks: id
    and name, then the ``Action Input`` in :data:`CALL_PIECES` fragments) while CrewAI still
    runs it from the reply's ReAct text."""

    replies: list[str] = []
    delay: float = 0.0
    fail_with: str | None = None
    stream_calls: bool = False
    i: int = 0

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None, **kw: Any) -> str:
        if self.fail_with:
            raise RuntimeError(self.fail_with)
        reply = self.replies[min(self.i, len(self.replies) - 1)]
        self.i += 1
        text, _, action = reply.partition("\nAction: ") if self.stream_calls else (reply, "", "")
        for piece in text.split(" "):
            if self.delay:
                time.sleep(self.delay)
            self._emit_stream_chunk_event(piece + " ", from_task=from_task, from_agent=from_agent)
        if action:
            name, _, arguments = action.partition("\nAction Input: ")
            call_id = f"call_{self.i}"
            self._emit_stream_chunk_event("", from_task=from_task, from_agent=from_agent, tool_call={
                "id": call_id, "function": {"name": name, "arguments": ""}, "index": 0})
            size = -(-len(arguments) // CALL_PIECES)
            for at in range(0, len(arguments), size):
                self._emit_stream_chunk_event("", from_task=from_task, from_agent=from_agent, tool_call={
                    "id": call_id, "function": {"name": "", "arguments": arguments[at:at + size]}, "index": 0})
        return reply

    async def acall(self, *args: Any, **kw: Any) -> str:
        return self.call(*args, **kw)

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 8192


#: fragments a streamed tool call's arguments come in
CALL_PIECES = 4


class WeatherTool(BaseTool):
    name: str = "get_weather"
    description: str = "The current weather for a city."

    def _run(self, city: str) -> str:
        return f"{city}: sunny, 21 C"


class BrokenTool(BaseTool):
    name: str = "get_weather"
    description: str = "The current weather for a city."

    def _run(self, city: str) -> str:
        raise ConnectionError("the weather service is down")


def use_tool(city: str) -> str:
    return f'Thought: I need the weather\nAction: get_weather\nAction Input: {{"city": "{city}"}}'


def final(answer: str) -> str:
    return f"Thought: I now know the final answer\nFinal Answer: {answer}"


def weather_crew(llm_a: BaseLLM, llm_b: BaseLLM, tool: BaseTool | None = None) -> Crew:
    forecaster = Agent(role="forecaster", goal="find the weather", backstory="a meteorologist",
                       llm=llm_a, tools=[tool or WeatherTool()], verbose=False)
    writer = Agent(role="writer", goal="write one sentence", backstory="a copywriter", llm=llm_b, verbose=False)
    return Crew(
        agents=[forecaster, writer],
        tasks=[
            Task(description="Find the weather for: {message}", expected_output="the weather", agent=forecaster),
            Task(description="Write it as one sentence.", expected_output="one sentence", agent=writer),
        ],
        verbose=False,
    )


async def test_two_agent_crew_streams_tokens_tools_and_steps_before_it_finishes() -> None:
    crew = weather_crew(ScriptedLLM(model="a", replies=[use_tool("Paris"), final("Paris: sunny, 21 C")]),
                        ScriptedLLM(model="b", replies=[final("It is sunny in Paris.")]))
    events = await collect(CrewAIAgent(crew), run_input("Paris"))

    steps = [(type(e).__name__[:8], e.step_name) for e in events if isinstance(e, (StepStartedEvent, StepFinishedEvent))]
    assert steps[0] == ("StepStar", "crew:crew")
    assert any(kind == "StepStar" and name.startswith("task:Find the weather for") for kind, name in steps)
    assert ("StepStar", "agent:forecaster") in steps and ("StepStar", "agent:writer") in steps
    [start] = of(events, ToolCallStartEvent)
    assert start.tool_call_name == "get_weather"
    assert "".join(e.delta for e in of(events, ToolCallArgsEvent)) == '{"city": "Paris"}'
    [result] = of(events, ToolCallResultEvent)
    assert result.tool_call_id == start.tool_call_id and result.content == "Paris: sunny, 21 C"
    # tokens arrive live: the first text chunk comes before the last task completes
    first_token = next(i for i, e in enumerate(events) if isinstance(e, TextMessageContentEvent))
    last_task_done = max(i for i, e in enumerate(events)
                         if isinstance(e, StepFinishedEvent) and e.step_name.startswith("task:"))
    assert first_token < last_task_done
    # the crew's output closes the run as an assistant message
    assert events[-3].delta == "It is sunny in Paris."
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_failing_tool_is_a_tool_result_and_the_crew_goes_on() -> None:
    crew = weather_crew(ScriptedLLM(model="a", replies=[use_tool("Oslo"), final("unknown")]),
                        ScriptedLLM(model="b", replies=[final("No forecast today.")]), tool=BrokenTool())
    events = await collect(CrewAIAgent(crew), run_input("Oslo"))
    results = of(events, ToolCallResultEvent)
    assert results and all("the weather service is down" in r.content for r in results)
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_failing_task_ends_the_run_with_run_error_and_everything_before_verifies() -> None:
    crew = weather_crew(ScriptedLLM(model="a", replies=[final("fine")]),
                        ScriptedLLM(model="b", fail_with="the model is overloaded"))
    events = await collect(CrewAIAgent(crew), run_input("Paris"))
    assert isinstance(events[-1], RunErrorEvent)
    assert "the model is overloaded" in events[-1].message
    assert "Traceback" not in events[-1].message


class TripState(BaseModel):
    message: str = ""
    city: str = ""
    forecast: str = ""


class TripFlow(Flow[TripState]):
    @start()
    def pick_city(self) -> str:
        self.state.city = self.state.message.split()[-1]
        return self.state.city

    @listen(pick_city)
    def forecast(self, city: str) -> str:
        self.state.forecast = f"sunny in {city}"
        return self.state.forecast


async def test_a_flow_streams_its_methods_as_steps_and_its_state_as_snapshot_then_deltas() -> None:
    events = await collect(CrewAIAgent(TripFlow), run_input("weather in Rome"))
    steps = [e.step_name for e in of(events, StepStartedEvent)]
    assert steps == ["method:pick_city", "method:forecast"]
    [snapshot] = of(events, StateSnapshotEvent)
    assert snapshot.snapshot["city"] == "Rome"
    deltas = of(events, StateDeltaEvent)
    ops = [msgspec.to_builtins(op) for d in deltas for op in d.delta]
    assert {"op": "replace", "path": "/forecast", "value": "sunny in Rome"} in ops
    assert texts(events).endswith("sunny in Rome")
    # two runs of one Flow class share no state
    again = await collect(CrewAIAgent(TripFlow), run_input("weather in Oslo", run_id="r2"))
    assert of(again, StateSnapshotEvent)[0].snapshot["city"] == "Oslo"


class ReviewState(BaseModel):
    message: str = ""
    draft: str = ""
    verdict: str = ""


class ReviewFlow(Flow[ReviewState]):
    """A draft reviewed by a human (@human_feedback, no provider: the adapter's pauses it),
    then published with the review."""

    @start()
    @human_feedback(message="Publish this draft?")
    def write(self) -> str:
        self.state.draft = f"A post about {self.state.message.split()[-1]}."
        return self.state.draft

    @listen(write)
    def publish(self, review: Any) -> str:
        self.state.verdict = review.feedback
        return f"published {review.output!r} with {review.feedback!r}"


class RoutedReviewFlow(Flow[ReviewState]):
    """A review whose answer routes the flow: no answer (a cancelled resume) is the default."""

    @start()
    @human_feedback(message="Approve?", emit=["approved", "rejected"], default_outcome="rejected")
    def write(self) -> str:
        self.state.draft = "draft"
        return self.state.draft

    @listen("approved")
    def ship(self) -> str:
        self.state.verdict = "shipped"
        return "shipped"

    @listen("rejected")
    def shelve(self) -> str:
        self.state.verdict = "shelved"
        return "shelved"


async def test_human_feedback_pauses_the_flow_as_an_interrupt_and_the_resume_finishes_it() -> None:
    agent = CrewAIAgent(ReviewFlow)
    first = await collect(agent, run_input("cats", run_id="r1"))
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent) and isinstance(finished.outcome, RunFinishedInterruptOutcome)
    (intr,) = finished.outcome.interrupts
    assert intr.reason == FEEDBACK_INTERRUPT_REASON and intr.message == "Publish this draft?"
    assert intr.metadata == {"method": "write", "output": "A post about cats.", "emit": None}
    # the method's step closed and the state so far reached the client before the pause
    assert [e.step_name for e in of(first, StepStartedEvent)] == ["method:write"]
    assert of(first, StateSnapshotEvent)[0].snapshot["draft"] == "A post about cats."
    assert texts(first) == ""  # a pause is not an answer
    # a resume must answer a pending interrupt of this thread, before anything streams
    with pytest.raises(RemoteInputError, match="not a pending interrupt"):
        await anext(agent.run(run_input("Paris", run_id="r2", resume=[ResumeEntry(interrupt_id="nope", status="resolved")])))
    with pytest.raises(RemoteInputError, match="not a pending interrupt"):
        await anext(agent.run(RunAgentInput(thread_id="other", run_id="r2", messages=[],
                                            resume=[ResumeEntry(interrupt_id=intr.id, status="resolved")])))
    second = await collect(agent, run_input("Paris", run_id="r2", resume=[
        ResumeEntry(interrupt_id=intr.id, status="resolved", payload="ship it")]))
    assert isinstance(second[-1], RunFinishedEvent) and second[-1].outcome is None
    assert texts(second) == "published 'A post about cats.' with 'ship it'"
    snapshot = of(second, StateSnapshotEvent)[0].snapshot
    assert snapshot["draft"] == "A post about cats."  # the resumed flow has the paused one's state
    ops = [msgspec.to_builtins(op) for d in of(second, StateDeltaEvent) for op in d.delta]
    assert ops == [{"op": "replace", "path": "/verdict", "value": "ship it"}]  # the flow finished with the feedback
    # answered once: it is no longer pending
    with pytest.raises(RemoteInputError, match="pending: none"):
        await anext(agent.run(run_input("Paris", run_id="r3", resume=[ResumeEntry(interrupt_id=intr.id, status="resolved")])))


async def test_a_resumed_methods_state_is_taken_when_it_finishes_even_when_the_reader_is_late() -> None:
    """On resume CrewAI's finished event carries the flow's live state object (not a copy), and
    the loop translates events after the kickoff's thread emitted them: a reader that looks
    only once the flow has run on must still see the state as the resumed method left it
    (snapshot without the verdict, then publish's delta), not the final state twice."""
    agent = CrewAIAgent(ReviewFlow)
    (intr,) = (await collect(agent, run_input("cats", run_id="r1")))[-1].outcome.interrupts  # type: ignore[union-attr]
    run = agent.run(run_input("Paris", run_id="r2", resume=[ResumeEntry(interrupt_id=intr.id, status="resolved", payload="ok")]))
    events = [await anext(run), await anext(run)]  # RUN_STARTED, then the first event: the thread is running
    time.sleep(1.0)  # hold the loop: the rest of the flow (no model call) runs meanwhile
    events += [e async for e in run]
    [snapshot] = of(events, StateSnapshotEvent)
    assert snapshot.snapshot["draft"] == "A post about cats." and snapshot.snapshot["verdict"] == ""
    ops = [msgspec.to_builtins(op) for d in of(events, StateDeltaEvent) for op in d.delta]
    assert ops == [{"op": "replace", "path": "/verdict", "value": "ok"}]


async def test_a_cancelled_resume_takes_the_reviews_default_outcome() -> None:
    agent = CrewAIAgent(RoutedReviewFlow)
    first = await collect(agent, run_input("Paris", run_id="r1"))
    (intr,) = first[-1].outcome.interrupts  # type: ignore[union-attr]
    assert intr.response_schema == {"type": "string", "enum": ["approved", "rejected"]}
    second = await collect(agent, run_input("Paris", run_id="r2", resume=[ResumeEntry(interrupt_id=intr.id, status="cancelled")]))
    assert [e.step_name for e in of(second, StepStartedEvent)] == ["method:write", "method:shelve"]
    assert texts(second).endswith("shelved")


async def test_two_agents_with_different_flows_pause_and_resume_side_by_side() -> None:
    """CrewAI has one process-wide default feedback provider and no per-run one: the adapter
    installs its own once (not per agent), and each agent keeps its own paused flows, so two
    agents interleave their pauses and resumes without seeing each other's."""
    from crewai.flow.flow_config import flow_config

    review = CrewAIAgent(ReviewFlow)
    installed = flow_config.hitl_provider
    routed = CrewAIAgent(RoutedReviewFlow)
    assert installed is not None and flow_config.hitl_provider is installed  # the second agent changed nothing
    (review_intr,) = (await collect(review, run_input("dogs", run_id="a1"))).pop().outcome.interrupts  # type: ignore[union-attr]
    (routed_intr,) = (await collect(routed, run_input("Paris", run_id="b1"))).pop().outcome.interrupts  # type: ignore[union-attr]
    # neither agent knows the other's pause
    with pytest.raises(RemoteInputError, match="not a pending interrupt"):
        await anext(routed.run(run_input("Paris", run_id="b2", resume=[ResumeEntry(interrupt_id=review_intr.id, status="resolved")])))
    # cancelled: the review's default outcome (an answer would need CrewAI's LLM classifier)
    routed_done = await collect(routed, run_input("Paris", run_id="b2", resume=[
        ResumeEntry(interrupt_id=routed_intr.id, status="cancelled")]))
    review_done = await collect(review, run_input("Paris", run_id="a2", resume=[
        ResumeEntry(interrupt_id=review_intr.id, status="resolved", payload="fine")]))
    assert texts(routed_done).endswith("shelved")
    assert texts(review_done) == "published 'A post about dogs.' with 'fine'"
    assert flow_config.hitl_provider is installed


def test_a_feedback_provider_the_application_set_is_left_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from crewai.flow.flow_config import flow_config

    class Mine:
        def request_feedback(self, context: Any, flow: Any) -> str:
            return "mine"

    mine = Mine()
    monkeypatch.setattr(flow_config, "hitl_provider", mine)
    CrewAIAgent(ReviewFlow)
    assert flow_config.hitl_provider is mine


async def test_an_answer_routes_the_review_through_crewais_own_classifier(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``emit``, CrewAI classifies the answer with the decorator's LLM (its own call, here
    CrewAI's OpenAI LLM against the replay server answering ``approved``) and routes by it."""
    import json

    from agui_engine.adapters.replay import Fixture

    completion = {"id": "chatcmpl-r", "object": "chat.completion", "created": 0, "model": "gpt-4o",
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "approved"}}],
                  "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # CrewAI rebuilds the LLM from its config (no key in it) on resume
    async with ReplayServer() as server:
        url = server.base_url("openai_chat", Fixture(provider="openai_chat", name="approved", status=200,
                                                     headers={"content-type": "application/json"},
                                                     body=json.dumps(completion).encode()))

        class Classified(Flow[ReviewState]):
            @start()
            @human_feedback(message="Approve?", emit=["approved", "rejected"], default_outcome="rejected",
                            llm=LLM(model="openai/gpt-4o", base_url=url))
            def write(self) -> str:
                self.state.draft = "draft"
                return self.state.draft

            @listen("approved")
            def ship(self) -> str:
                return "shipped"

            @listen("rejected")
            def shelve(self) -> str:
                return "shelved"

        agent = CrewAIAgent(Classified)
        first = await collect(agent, run_input("Paris", run_id="r1"))
        (intr,) = first[-1].outcome.interrupts  # type: ignore[union-attr]
        second = await collect(agent, run_input("Paris", run_id="r2", resume=[
            ResumeEntry(interrupt_id=intr.id, status="resolved", payload="Looks great, go ahead")]))
        assert server.requests, "the answer was classified by the model"
    assert [e.step_name for e in of(second, StepStartedEvent)] == ["method:write", "method:ship"]
    assert texts(second).endswith("shipped")


async def test_task_human_input_ends_the_run_saying_why_instead_of_reading_stdin() -> None:
    crew = weather_crew(ScriptedLLM(model="a", replies=[final("fine")]), ScriptedLLM(model="b", replies=[final("ok")]))
    crew.tasks[0].human_input = True
    events = await collect(CrewAIAgent(crew), run_input("Paris"))
    assert isinstance(events[-1], RunErrorEvent)
    assert TASK_HUMAN_INPUT_UNSUPPORTED[:60] in events[-1].message


async def test_two_concurrent_runs_never_see_each_others_events() -> None:
    def crew_for(answer: str) -> Crew:
        return weather_crew(ScriptedLLM(model="a", replies=[use_tool(answer), final(answer)], delay=0.002),
                            ScriptedLLM(model="b", replies=[final(f"sentence about {answer}")], delay=0.002))

    agent_a, agent_b = CrewAIAgent(crew_for("Lima")), CrewAIAgent(crew_for("Cairo"))
    a, b = await asyncio.gather(collect(agent_a, run_input("Lima", run_id="ra")), collect(agent_b, run_input("Cairo", run_id="rb")))
    assert "Cairo" not in texts(a) and "Lima" in texts(a)
    assert "Lima" not in texts(b) and "Cairo" in texts(b)
    assert all("Cairo" not in e.delta for e in of(a, ToolCallArgsEvent))


async def test_closing_the_iterator_stops_the_kickoff_at_its_next_event() -> None:
    slow = ScriptedLLM(model="a", replies=[final(" ".join(["word"] * 2000))], delay=0.005)
    crew = weather_crew(slow, ScriptedLLM(model="b", replies=[final("never")]))
    before = {t.name for t in threading.enumerate()}
    started = time.monotonic()
    stream = CrewAIAgent(crew).run(run_input("Paris", run_id="rc"))
    got = []
    async for event in stream:
        got.append(event)
        if isinstance(event, TextMessageContentEvent):
            break
    await stream.aclose()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(t.name == "crewai-rc" for t in threading.enumerate()):
        await asyncio.sleep(0.02)
    assert not any(t.name == "crewai-rc" for t in threading.enumerate()), "the kickoff thread is still running"
    assert "crewai-rc" not in before
    # the reply alone takes 2,000 x 5 ms = 10 s to stream: the kickoff stopped at its next chunk
    assert time.monotonic() - started < 8


async def test_crewai_llm_streams_from_a_real_openai_compatible_server() -> None:
    server = ReplayServer()
    await server.start()
    try:
        llm = LLM(model="openai/gpt-4o", base_url=server.base_url("openai_chat", "text"), api_key=KEY, stream=True)
        agent = Agent(role="assistant", goal="answer", backstory="helpful", llm=llm, verbose=False)
        crew = Crew(agents=[agent], tasks=[Task(description="{message}", expected_output="an answer", agent=agent)],
                    verbose=False)
        events = await collect(CrewAIAgent(crew), run_input("hello"))
    finally:
        await server.close()
    contents = of(events, TextMessageContentEvent)
    assert len(contents) >= 3  # the fixture's chunks arrive as they come, then the final answer
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_native_provider_tool_call_streams_each_fragment_once() -> None:
    """CrewAI's native OpenAI provider puts the arguments *so far* in each tool-call chunk
    (and the new fragment in ``chunk``): the call's TOOL_CALL_ARGS must still concatenate
    to its arguments, each fragment sent once."""
    from agui_engine.adapters.loopback import serve_openai_compatible
    from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn

    arguments = {"city": "Paris", "note": "a longer value, so that it streams in many fragments"}
    with serve_openai_compatible(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("get_weather", arguments)]),
                                                "Final: sunny"])) as endpoint:
        llm = LLM(model="openai/scripted-1", base_url=endpoint.base_url, api_key=KEY, stream=True)
        agent = Agent(role="forecaster", goal="find the weather", backstory="a meteorologist", llm=llm,
                      tools=[WeatherTool()], verbose=False)
        crew = Crew(agents=[agent], tasks=[Task(description="Weather for {message}", expected_output="the weather",
                                                agent=agent)], verbose=False)
        events = await collect(CrewAIAgent(crew), run_input("Paris"))  # verified: the arguments are one JSON value
    [start] = of(events, ToolCallStartEvent)
    pieces = [e.delta for e in of(events, ToolCallArgsEvent) if e.tool_call_id == start.tool_call_id]
    assert len(pieces) > 2 and msgspec.json.decode("".join(pieces)) == arguments
    assert [e.content for e in of(events, ToolCallResultEvent)] == ["Paris: sunny, 21 C"]


def card_crew(input: RunAgentInput) -> Crew:
    """A one-agent crew whose model calls the component tool the agent loop offers (CrewAI
    gets it through client_tools), its arguments streaming, then finishes."""
    card = 'Thought: show it\nAction: show_component_WeatherCard\nAction Input: {"city": "Oslo", "tempC": -3.5}'
    designer = Agent(role="designer", goal="show the weather", backstory="a UI designer", verbose=False,
                     llm=ScriptedLLM(model="c", stream_calls=True, replies=[card, final("The card is on screen.")]),
                     tools=client_tools(input))
    return Crew(agents=[designer], verbose=False,
                tasks=[Task(description="Show the weather for: {message}", expected_output="a card", agent=designer)])


async def test_a_crew_drives_a_component_through_the_agent_loop() -> None:
    input = run_input("Oslo")
    events = [e async for e in AgentLoop(CrewAIAgent(card_crew), components=[WEATHER_CARD]).run(input)]
    check(events)
    check_run(events, input_=input)
    components = [e for e in of(events, CustomEvent) if e.name.startswith("tambo.component.")]
    assert components[0].name == "tambo.component.start" and components[-1].name == "tambo.component.end"
    assert len([e for e in components if e.name == "tambo.component.props_delta"]) >= 2  # the props stream
    assert components[-1].value["finalProps"] == {"city": "Oslo", "tempC": -3.5}
    [start] = of(events, ToolCallStartEvent)
    assert start.tool_call_name == "show_component_WeatherCard"
    assert len(of(events, ToolCallArgsEvent)) >= 2
    [result] = of(events, ToolCallResultEvent)  # CrewAI ran the client tool: one answer, the agent loop adds none
    assert result.tool_call_id == start.tool_call_id and "user's screen" in result.content
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None
    assert texts(events).endswith("The card is on screen.")


def test_kickoff_inputs_mapping() -> None:
    input = run_input("What now?", state={"city": "Rome"}, context=[Context(description="user", value="Ada")],
                      forwarded_props={"inputs": {"tone": "brief"}})
    inputs = kickoff_inputs(input)
    assert inputs["message"] == "What now?"
    assert inputs["history"] == "user: What now?"
    assert inputs["context"] == "user: Ada"
    assert inputs["tools"] == "[]"
    assert inputs["city"] == "Rome" and inputs["tone"] == "brief"


def test_targets_that_are_not_crews_or_flows_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="Flow class"):
        CrewAIAgent(TripFlow())
    with pytest.raises(UsageError, match="needs a Crew"):
        CrewAIAgent(42)


#: The crew `agui-engine serve --agent crewai:...` serves in the test below.
SERVED_CREW = weather_crew(ScriptedLLM(model="a", replies=[use_tool("Paris"), final("Paris: sunny")]),
                           ScriptedLLM(model="b", replies=[final("Sunny in Paris.")]))


#: The crew tests/adapters/test_crewai_served.py serves to the real @ag-ui/client: each chunk
#: 10 ms apart, as a model streams, so the crew runs for over a second after its first token.
LIVE_CREW = weather_crew(
    ScriptedLLM(model="a", delay=0.01, replies=[use_tool("Paris"), final("Paris: sunny, 21 C")]),
    ScriptedLLM(model="b", delay=0.01, replies=[final("It is sunny in Paris, " + " ".join(["warm"] * 50) + ".")]))


def live_target(input: RunAgentInput) -> Any:
    """What test_crewai_served.py serves: the review flow when the user asks for a review, else
    the live crew (a factory: CrewAIAgent copies the crew, instantiates the flow)."""
    return ReviewFlow() if kickoff_inputs(input)["message"].startswith("review") else LIVE_CREW.copy()


@pytest.mark.timeout(300)  # two processes import crewai (5-20 s each on a loaded machine)
async def test_served_by_agui_engine_serve_with_a_crewai_spec() -> None:
    import sys
    from pathlib import Path

    from agui_engine.transports import StdioAgent

    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio",
               "--agent", "crewai:tests.adapters.test_crewai:SERVED_CREW"]
    events = [e async for e in StdioAgent(command, cwd=str(root), env={**os.environ}).run(run_input("Paris"))]
    check(events)
    assert [e.tool_call_name for e in of(events, ToolCallStartEvent)] == ["get_weather"]
    assert "Sunny in Paris." in texts(events)
    assert isinstance(events[-1], RunFinishedEvent)


# --------------------------------------------------------------------------- capabilities


async def test_capabilities_of_a_crew_a_flow_and_a_factory() -> None:
    from ag_ui.core.capabilities import AgentCapabilities as SdkCapabilities

    from agui_engine.protocol.agent import agent_capabilities
    from agui_engine.protocol.capabilities import (
        AgentCapabilities,
        HumanInTheLoopCapabilities,
        IdentityCapabilities,
        SubagentInfo,
        encode_capabilities,
    )

    llm = LLM(model="openai/gpt-4o-mini", api_key=KEY)
    crew = await agent_capabilities(CrewAIAgent(weather_crew(llm, llm)))
    assert crew.multi_agent is not None
    assert crew.multi_agent.subagents == [SubagentInfo(name="forecaster", description="find the weather"),
                                          SubagentInfo(name="writer", description="write one sentence")]
    assert crew.multi_agent.supported is True
    assert crew.human_in_the_loop == HumanInTheLoopCapabilities(interrupts=False)
    assert crew.state is not None and crew.state.snapshots is False
    SdkCapabilities.model_validate_json(encode_capabilities(crew))

    flow = await agent_capabilities(CrewAIAgent(ReviewFlow))
    assert flow.identity == IdentityCapabilities(name="ReviewFlow", type="crewai")
    assert flow.human_in_the_loop == HumanInTheLoopCapabilities(supported=True, feedback=True, interrupts=True)
    assert flow.state is not None and flow.state.snapshots is True and flow.state.deltas is True

    factory = await agent_capabilities(CrewAIAgent(lambda input: ReviewFlow()))
    assert factory == AgentCapabilities(identity=IdentityCapabilities(type="crewai"))
