"""LLMAgent: whole runs -- server tools, client tools, components from both sides, limits, errors, cancel."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.cli.demo import SCENARIOS, demo_components, get_weather
from agui_engine.demo.weather_model import EmbeddedModel, demo_weather
from agui_engine.genui.component_stream import (
    COMPONENT_END,
    COMPONENT_HANDLERS,
    COMPONENT_PROPS_DELTA,
    MAX_COMPONENT_ARGS_CHARS,
    find_component,
    seed_interactables,
)
from agui_engine.genui.components import Component
from agui_engine.genui.interactables import interactables_from_context
from agui_engine.llm import (
    Finish,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from agui_engine.loops.llm_agent import DEFAULT_MAX_STEPS, LLMAgent
from agui_engine.loops.tool_runner import MAX_TOOL_RESULT_CHARS, format_tool_result
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.errors import RemoteInputError, UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    Context,
    CustomEvent,
    FunctionCall,
    ReasoningMessage,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageEndEvent,
    TokenUsage,
    Tool,
    ToolCall,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from agui_engine.transports import ThreadedToolRunner
from tests.helpers import collect, run_input
from tests.hypothesis_profiles import at_most

from ...waiting import eventually
from ..run_checks import check_run
from ..scripted_llm import ScriptedLLM, call, counter_ids, text


def demo_agent(**kw: Any) -> LLMAgent:
    return LLMAgent(EmbeddedModel(), components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids(), **kw)


def test_is_an_agent() -> None:
    assert isinstance(demo_agent(), Agent)


async def test_weather_run_calls_the_server_tool_then_shows_the_card_then_answers() -> None:
    events = await collect(demo_agent(), run_input("What's the weather in Tokyo?"))
    acc = check_run(events)
    assert isinstance(events[0], RunStartedEvent) and isinstance(events[-1], RunFinishedEvent)
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert json.loads(results[0].content) == demo_weather("Tokyo")
    assert results[1].content.startswith("Component WeatherCard is shown")
    (end,) = [e.value for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    # the card is bound to weather.current: the model names the data, the app fetches it
    assert end["finalProps"]["resourceId"] == "weather.current" and end["finalProps"]["params"] == {"city": "Tokyo"}
    block = find_component(acc, end["componentId"])
    assert block is not None and block["props"] == end["finalProps"] and block["streamingState"] == "done"
    assert "18.5°C" in acc.messages[-1]["content"]
    usage = events[-1].usage
    assert usage and usage[0].model == "embedded-demo-1" and usage[0].input_tokens > 0
    assert events[-1].outcome is None


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_every_demo_scenario_verifies(scenario: str) -> None:
    events = await collect(demo_agent(), run_input(scenario))
    check_run(events)
    # every component's final props match its schema (the embedded model writes valid props)
    assert not [e.content for e in events if isinstance(e, ToolCallResultEvent) and "Error" in e.content]


class CardProps(msgspec.Struct):
    city: str
    temperature: float


@pytest.mark.parametrize("schema", ["json", "struct"])
async def test_props_that_do_not_match_the_schema_are_shown_and_the_model_is_told(schema: str) -> None:
    props_schema: Any = CardProps if schema == "struct" else {
        "type": "object", "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
        "required": ["city", "temperature"]}
    card = Component("Card", "", props_schema)
    llm = ScriptedLLM([*call(0, "c1", "show_component_Card", '{"city": "Tokyo", "temperature": "warm"}'),
                       Finish(reason="tool_calls")], text("Sorry."))
    events = await collect(LLMAgent(llm, components=[card], id_factory=counter_ids()), run_input("card"))
    acc = check_run(events)
    (end,) = [e.value for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    assert end["finalProps"] == {"city": "Tokyo", "temperature": "warm"}  # shown as streamed
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content.startswith("Component Card is shown") and "$.temperature" in result.content
    assert "show_component_Card again" in result.content
    tool_message = llm.calls[1].messages[-1]
    assert isinstance(tool_message, ToolMessage) and "$.temperature" in (tool_message.error or "")
    assert isinstance(events[-1], RunFinishedEvent) and acc.messages[-1]["content"] == "Sorry."


async def test_sequential_cities_without_parallel_calls() -> None:
    events = await collect(demo_agent(parallel_tool_calls=False), run_input("weather in Tokyo and Paris"))
    check_run(events)
    cards = [e for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    assert [c.value["finalProps"]["params"]["city"] for c in cards] == ["Tokyo", "Paris"]


async def test_client_tool_ends_the_run_with_pending_ids() -> None:
    llm = ScriptedLLM([TextDelta(text="Booking."), *call(0, "c1", "book", '{"when":"noon"}'),
                       *call(1, "c2", "get_weather", '{"city":"Paris"}'), Finish(reason="tool_calls")])
    agent = LLMAgent(llm, tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids())
    book = Tool(name="book", description="Book a table", parameters={"type": "object",
                                                                     "properties": {"when": {"type": "string"}}})
    events = await collect(agent, run_input("book", tools=[book]))
    check_run(events)
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert [r.tool_call_id for r in results] == ["c2"]  # the server tool ran, the client one is pending
    final = events[-1]
    assert isinstance(final, RunFinishedEvent)
    assert final.outcome is not None and final.outcome.pending_tool_call_ids == ["c1"]
    assert len(llm.calls) == 1
    # the client tool was offered with standard parameters and strict form
    offered = {t.name: t for t in llm.calls[0].tools}
    assert offered["book"].strict and "_tambo_statusMessage" in offered["book"].parameters["properties"]


async def test_a_client_tool_never_receives_nested_strict_nulls() -> None:
    schema = {
        "type": "object",
        "properties": {
            "guests": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "diet": {"type": "string"}},
                          "required": ["name"]},
            },
            "venue": {"type": "object", "properties": {"city": {"type": "string"}, "room": {"type": "string"}}},
        },
        "required": ["guests"],
    }
    args = '{"_tambo_statusMessage":"Booking","guests":[{"name":"A","diet":null},{"name":"B","diet":"veg"}],' \
           '"venue":{"city":"Oslo","room":null}}'
    llm = ScriptedLLM([*call(0, "c1", "book", *[args[i : i + 5] for i in range(0, len(args), 5)]),
                       Finish(reason="tool_calls")])
    book = Tool(name="book", description="Book", parameters=schema)
    events = await collect(LLMAgent(llm, id_factory=counter_ids()), run_input("book", tools=[book]))
    acc = check_run(events)
    assert events[-1].outcome.pending_tool_call_ids == ["c1"]
    (tool_call,) = [c for m in acc.messages for c in m.get("toolCalls") or ()]
    assert json.loads(tool_call["function"]["arguments"]) == {
        "guests": [{"name": "A"}, {"name": "B", "diet": "veg"}],
        "venue": {"city": "Oslo"},
    }


async def test_next_run_with_the_client_result_continues() -> None:
    llm = ScriptedLLM(text("Booked for noon."))
    history = [
        UserMessage(id="u1", content="book"),
        AssistantMessage(id="a1", tool_calls=[ToolCall(id="c1", function=FunctionCall(name="book",
                                                                                    arguments='{"when":"noon"}'))]),
        ToolMessage(id="t1", tool_call_id="c1", content="ok"),
    ]
    events = await collect(LLMAgent(llm), RunAgentInput(thread_id="t", run_id="r2", messages=history))
    check_run(events)
    assert llm.calls[0].messages[1:] == history


async def test_components_from_the_client_merge_and_win() -> None:
    server_card = Component("Card", "server", {"type": "object", "properties": {"a": {"type": "string"}}})
    llm = ScriptedLLM(text("ok"))
    agent = LLMAgent(llm, components=[server_card, Component("Other", "", {"type": "object", "properties": {}})])
    client_tool = Tool(name="show_component_Card", description="client card",
                       parameters={"type": "object", "properties": {"b": {"type": "number"}}})
    available = [{"name": "Chart", "description": "A chart", "propsSchema": {"type": "object",
                                                                               "properties": {"s": {"type": "array"}}}},
                 {"name": "Card", "description": "loses to the tools entry",
                  "propsSchema": {"type": "object", "properties": {"c": {"type": "string"}}}}]
    events = await collect(agent, run_input("x", tools=[client_tool], forwarded_props={"availableComponents": available}))
    check_run(events)
    offered = {t.name: t for t in llm.calls[0].tools}
    assert set(offered) == {"show_component_Card", "show_component_Other", "show_component_Chart"}
    assert "b" in offered["show_component_Card"].parameters["properties"]
    assert "client card" in offered["show_component_Card"].description


async def test_client_component_call_streams_and_the_run_goes_on() -> None:
    llm = ScriptedLLM([*call(0, "c1", "show_component_Card", '{"b":2}'), Finish(reason="tool_calls")],
                      text("Shown."))
    client_tool = Tool(name="show_component_Card", description="card",
                       parameters={"type": "object", "properties": {"b": {"type": "number"}}})
    events = await collect(LLMAgent(llm, id_factory=counter_ids()), run_input("x", tools=[client_tool]))
    check_run(events)
    assert events[-1].outcome is None and len(llm.calls) == 2
    assert [e.value["finalProps"] for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END] == [{"b": 2}]


async def test_a_raising_tool_becomes_an_error_result() -> None:
    def explode(x: int) -> str:
        """Always fails."""
        raise ValueError(f"bad x {x}")

    llm = ScriptedLLM([*call(0, "c1", "explode", '{"x":3}'), Finish(reason="tool_calls")], text("Sorry."))
    events = await collect(LLMAgent(llm, tools=[explode], tool_runner=ThreadedToolRunner()), run_input())
    check_run(events)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content == "Error: ValueError: bad x 3"
    tool_message = llm.calls[1].messages[-1]
    assert isinstance(tool_message, ToolMessage) and tool_message.error == "ValueError: bad x 3"
    assert isinstance(events[-1], RunFinishedEvent)


async def test_bad_arguments_for_a_server_tool_are_an_error_result() -> None:
    def need_int(x: int) -> int:
        """Doubles."""
        return 2 * x

    llm = ScriptedLLM([*call(0, "c1", "need_int", '{"x":"nope"}'), Finish(reason="tool_calls")], text("ok"))
    events = await collect(LLMAgent(llm, tools=[need_int], tool_runner=ThreadedToolRunner()), run_input())
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content.startswith("Error: ToolArgumentsError") and "x" in result.content


async def test_async_tools_of_one_step_run_concurrently() -> None:
    ready = asyncio.Event()

    async def waiter() -> str:
        """Waits for the other tool."""
        await ready.wait()
        return "waited"

    async def setter() -> str:
        """Releases the other tool."""
        ready.set()
        return "set"

    llm = ScriptedLLM([*call(0, "a", "waiter"), *call(1, "b", "setter"), Finish(reason="tool_calls")], text("done"))
    events = await asyncio.wait_for(collect(LLMAgent(llm, tools=[waiter, setter], tool_runner=ThreadedToolRunner()), run_input()), timeout=10)
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["waited", "set"]


async def test_a_blocking_sync_tool_does_not_block_a_concurrent_coroutine() -> None:
    release = threading.Event()
    tool_threads: list[int] = []

    def blocking() -> str:
        """Blocks until a coroutine on the event loop releases it."""
        tool_threads.append(threading.get_ident())
        # run on the loop, this would wait out the timeout: the releaser could not run
        return "released" if release.wait(timeout=10) else "it blocked the event loop"

    async def releaser() -> None:
        await eventually(lambda: tool_threads, what="the tool's thread to start")
        release.set()

    llm = ScriptedLLM([*call(0, "c1", "blocking"), Finish(reason="tool_calls")], text("done"))
    events, _ = await asyncio.wait_for(
        asyncio.gather(collect(LLMAgent(llm, tools=[blocking], tool_runner=ThreadedToolRunner()), run_input()), releaser()), timeout=30
    )
    check_run(events)
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["released"]
    assert tool_threads != [threading.get_ident()]


async def test_inline_tools_and_async_tools_run_on_the_event_loop() -> None:
    threads: dict[str, int] = {}

    def quick() -> str:
        """Returns at once."""
        threads["quick"] = threading.get_ident()
        return "q"

    async def coro() -> str:
        """Async."""
        threads["coro"] = threading.get_ident()
        return "c"

    def slow() -> str:
        """Sync, not inline."""
        threads["slow"] = threading.get_ident()
        return "s"

    llm = ScriptedLLM([*call(0, "a", "quick"), *call(1, "b", "coro"), *call(2, "c", "slow"),
                       Finish(reason="tool_calls")], text("done"))
    events = await collect(LLMAgent(llm, tools=[quick, coro, slow], tool_runner=ThreadedToolRunner(), inline_tools=["quick"]), run_input())
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["q", "c", "s"]
    loop_thread = threading.get_ident()
    assert threads["quick"] == threads["coro"] == loop_thread != threads["slow"]


def test_inline_tools_must_name_server_tools() -> None:
    with pytest.raises(UsageError, match="'nope'"):
        LLMAgent(EmbeddedModel(), tools=[get_weather], tool_runner=ThreadedToolRunner(), inline_tools=["nope"])
    with pytest.raises(UsageError, match="collection"):
        LLMAgent(EmbeddedModel(), tools=[get_weather], tool_runner=ThreadedToolRunner(), inline_tools="get_weather")


async def test_cancelling_during_a_sync_tool_returns_at_once_and_discards_its_result() -> None:
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    def stuck() -> str:
        """Blocks until the test releases it."""
        started.set()
        release.wait(timeout=10)
        finished.append("late")
        return "late"

    llm = ScriptedLLM([*call(0, "c1", "stuck"), Finish(reason="tool_calls")], text("never"))
    seen: list[Any] = []

    async def consume() -> None:
        async for event in LLMAgent(llm, tools=[stuck], tool_runner=ThreadedToolRunner()).run(run_input()):
            seen.append(event)

    task = asyncio.ensure_future(consume())
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # returns while the thread is still blocked: the run does not wait for it
    assert finished == []
    release.set()
    # the thread runs to its end; nothing of it reaches the run
    await eventually(lambda: finished, what="the abandoned tool thread to finish")
    assert not any(isinstance(e, (ToolCallResultEvent, RunFinishedEvent)) for e in seen)
    assert len(llm.calls) == 1 and llm.closed == 1


async def test_step_limit_ends_with_run_error() -> None:
    llm = ScriptedLLM(lambda messages: [*call(0, f"c{len(messages)}", "lookup_again"), Finish(reason="tool_calls")])

    def lookup_again() -> str:
        """Loops."""
        return "again"

    events = await collect(LLMAgent(llm, tools=[lookup_again], tool_runner=ThreadedToolRunner(), max_steps=3), run_input())
    check_run(events)
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "step_limit_exceeded"
    assert len(llm.calls) == 3 and DEFAULT_MAX_STEPS >= 7


async def test_unknown_tool_gets_an_error_result_and_the_model_continues() -> None:
    llm = ScriptedLLM([*call(0, "c1", "nope", "{}"), Finish(reason="tool_calls")], text("ok"))
    events = await collect(LLMAgent(llm), run_input())
    check_run(events)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert "unknown tool 'nope'" in result.content and len(llm.calls) == 2


async def test_stream_error_becomes_run_error_after_closing_the_text() -> None:
    llm = ScriptedLLM([TextDelta(text="Hal"), Usage(input_tokens=5, output_tokens=1),
                       StreamError(message="upstream overloaded", code="overloaded")])
    events = await collect(LLMAgent(llm, id_factory=counter_ids()), run_input())
    check_run(events)
    assert isinstance(events[-2], TextMessageEndEvent)
    assert events[-1] == RunErrorEvent(message="upstream overloaded", code="overloaded",
                                       usage=[TokenUsage(input_tokens=5, output_tokens=1)])


FAIL_FAST_CASES = {
    # the model runs past the component's size limit in the middle of a string prop
    "size limit": (['{"city": "Tokyo", "note": "', "x" * (MAX_COMPONENT_ARGS_CHARS // 2),
                    "x" * (MAX_COMPONENT_ARGS_CHARS // 2)], "component_too_large"),
    "malformed arguments": (['{"city": "Tokyo", ', '"temperature": 18.5}}'], "invalid_json"),
    "root not an object": (['["Tokyo"]'], "invalid_json"),
}


@pytest.mark.parametrize("case", FAIL_FAST_CASES)
async def test_bad_component_arguments_end_the_run_with_run_error_and_what_streamed_stays_valid(case: str) -> None:
    fragments, code = FAIL_FAST_CASES[case]
    llm = ScriptedLLM([TextDelta(text="Here it is."), *call(0, "c1", "show_component_WeatherCard", *fragments),
                       Finish(reason="tool_calls")], text("never reached"))
    agent = LLMAgent(llm, components=demo_components(), id_factory=counter_ids())
    events = await collect(agent, run_input("card"))
    acc = check_run(events)  # the verifier, ag-ui-validate and the accumulator accept every event
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == code, last
    assert "c1" in last.message and "show_component_WeatherCard" in last.message
    assert len(llm.calls) == 1  # fail fast: the model is not called again
    # the props streamed before the error are a valid prefix: the accumulated block holds them
    deltas = [e for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_PROPS_DELTA]
    blocks = [b for m in acc.messages for b in m.get("contentBlocks") or ()]
    if case == "root not an object":
        assert deltas == [] and [b["props"] for b in blocks] in ([], [{}])
    else:
        (block,) = blocks
        assert block["props"]["city"] == "Tokyo" and block["streamingState"] == "streaming"
    assert acc.messages[0]["content"] == "Here it is."


async def test_unexpected_exception_is_an_internal_error_without_details() -> None:
    llm = ScriptedLLM([TextDelta(text="x"), RuntimeError("secret sk-123 leaked")])
    events = await collect(LLMAgent(llm), run_input())
    check_run(events)
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "internal_error" and "sk-123" not in last.message


async def test_invalid_client_input_raises_before_run_started() -> None:
    agent = LLMAgent(ScriptedLLM(text("x")))
    bad_name = Tool(name="bad name!", description="", parameters={"type": "object"})
    with pytest.raises(RemoteInputError, match=r"tools\[0\]\.name"):
        await collect(agent, run_input(tools=[bad_name]))
    not_object = Tool(name="t", description="", parameters={"type": "array"})
    with pytest.raises(RemoteInputError, match="object"):
        await collect(agent, run_input(tools=[not_object]))
    with pytest.raises(RemoteInputError, match="availableComponents"):
        await collect(agent, run_input(forwarded_props={"availableComponents": "nope"}))
    with pytest.raises(RemoteInputError, match="context"):
        await collect(agent, run_input(context=[Context(description="interactables", value="{not json")]))


def test_server_side_misconfiguration_is_a_usage_error() -> None:
    def f() -> None:
        """x"""

    with pytest.raises(UsageError):
        LLMAgent(ScriptedLLM(), tools=[f, f], tool_runner=ThreadedToolRunner())
    with pytest.raises(UsageError):
        LLMAgent(ScriptedLLM(), max_steps=0)


async def test_cancelling_the_consumer_closes_the_model_stream() -> None:
    llm = ScriptedLLM(text(*["word "] * 100))
    stream = LLMAgent(llm).run(run_input())
    seen = [await stream.__anext__() for _ in range(4)]
    assert isinstance(seen[0], RunStartedEvent)
    await stream.aclose()  # type: ignore[attr-defined]
    assert llm.closed == 1 and llm.finished == 0


async def test_force_tool_choice_applies_to_the_first_step_only() -> None:
    llm = ScriptedLLM([*call(0, "c1", "get_weather", '{"city":"Oslo"}'), Finish(reason="tool_calls")], text("ok"))
    events = await collect(LLMAgent(llm, tools=[get_weather], tool_runner=ThreadedToolRunner(), force_tool_choice="get_weather"), run_input("weather"))
    assert [c.tool_choice for c in llm.calls] == ["get_weather", "auto"]
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert result.content.startswith("Error: LookupError")  # Oslo is not in the demo table


async def test_history_of_the_next_step_keeps_reasoning_signature_and_tool_calls() -> None:
    llm = ScriptedLLM([ReasoningDelta(text="think"), ReasoningDelta(signature="SIG"), TextDelta(text="Let me see."),
                       *call(0, "c1", "get_weather", '{"city":"Tokyo"}'), Finish(reason="tool_calls")],
                      text("Done."))
    await collect(LLMAgent(llm, tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids()), run_input("w"))
    second = llm.calls[1].messages
    reasoning, assistant, tool = second[-3:]
    assert isinstance(reasoning, ReasoningMessage) and reasoning.content == "think" and reasoning.encrypted_value == "SIG"
    assert isinstance(assistant, AssistantMessage) and assistant.content == "Let me see."
    assert assistant.tool_calls and assistant.tool_calls[0].function.arguments == '{"city":"Tokyo"}'
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "c1"


async def test_history_keeps_every_reasoning_block_and_each_calls_signature() -> None:
    llm = ScriptedLLM([ReasoningDelta(text="think"), ReasoningDelta(signature="SIG"), ReasoningDelta(encrypted="RED"),
                       ToolCallStart(index=0, id="c1", name="get_weather", signature="CALLSIG"),
                       ToolCallArgsDelta(index=0, delta='{"city":"Tokyo"}'), ToolCallEnd(index=0),
                       *call(1, "c2", "get_weather", '{"city":"Paris"}'), Finish(reason="tool_calls")],
                      text("Done."))
    events = await collect(LLMAgent(llm, tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids()), run_input("w"))
    acc = check_run(events)
    second = llm.calls[1].messages
    first, redacted, assistant = second[-5:-2]
    assert isinstance(first, ReasoningMessage) and (first.content, first.encrypted_value) == ("think", "SIG")
    assert isinstance(redacted, ReasoningMessage) and (redacted.content, redacted.encrypted_value) == ("", "RED")
    assert isinstance(assistant, AssistantMessage) and assistant.tool_calls
    assert [c.encrypted_value for c in assistant.tool_calls] == ["CALLSIG", None]
    # the client's view carries the same values on the same entities
    calls = [c for m in acc.messages for c in m.get("toolCalls") or ()]
    assert [c.get("encryptedValue") for c in calls] == ["CALLSIG", None]
    assert [m.get("encryptedValue") for m in acc.messages if m.get("role") == "reasoning"] == ["SIG", "RED"]


@pytest.mark.parametrize("text_after", [True, False])
async def test_history_keeps_reasoning_that_came_after_text_after_it(text_after: bool) -> None:
    """Interleaved thinking (text, thinking, tool call): the replay keeps the model's order."""
    tail = [TextDelta(text="Checking now.")] if text_after else []
    llm = ScriptedLLM([ReasoningDelta(text="plan"), ReasoningDelta(signature="S1"), TextDelta(text="Let me look."),
                       ReasoningDelta(text="which city?"), ReasoningDelta(signature="S2"), *tail,
                       *call(0, "c1", "get_weather", '{"city":"Tokyo"}'), Finish(reason="tool_calls")],
                      text("Done."))
    events = await collect(LLMAgent(llm, tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids()), run_input("w"))
    check_run(events)
    history = llm.calls[1].messages[2:-1]  # after the system prompt and the user message, before the result
    shape = [(type(m).__name__, m.content, bool(getattr(m, "tool_calls", None))) for m in history]
    last = ("AssistantMessage", "Checking now." if text_after else None, True)
    assert shape == [("ReasoningMessage", "plan", False), ("AssistantMessage", "Let me look.", False),
                     ("ReasoningMessage", "which city?", False), last]
    assert len({m.id for m in history}) == len(history)
    assert [m.encrypted_value for m in history if isinstance(m, ReasoningMessage)] == ["S1", "S2"]


async def test_text_after_the_first_call_of_a_step_joins_the_message_the_call_created() -> None:
    props = '{"city":"Tokyo","temperature":18.5,"condition":"x","humidity":1,"wind_kph":1}'
    llm = ScriptedLLM([*call(0, "c1", "show_component_WeatherCard", props), TextDelta(text="There it is."),
                       Finish(reason="stop")], text("never"))
    events = await collect(LLMAgent(llm, components=demo_components(), id_factory=counter_ids()), run_input("x"))
    acc = check_run(events)  # AGUI208 (info) only: the call named the message before its text started
    (start,) = [e for e in events if isinstance(e, ToolCallStartEvent)]
    (message,) = [m for m in acc.messages if m["id"] == start.parent_message_id]
    assert message["content"] == "There it is." and len(message["toolCalls"]) == 1
    assert len(message["contentBlocks"]) == 1


async def test_tool_call_parent_is_the_step_message() -> None:
    events = await collect(demo_agent(), run_input("What's the weather in Tokyo?"))
    text_ids = {e.message_id for e in events if isinstance(e, TextMessageEndEvent)}
    parents = [e.parent_message_id for e in events if isinstance(e, ToolCallStartEvent)]
    assert parents[0] in text_ids


async def test_interactables_from_context_get_update_tools() -> None:
    value = json.dumps({"components": [{"id": "Note-1", "componentName": "Note", "props": {"text": "a"}}]})
    args = '{"componentId":"Note-1","newProps":{"text":"b"}}'
    llm = ScriptedLLM([*call(0, "c1", "update_component_props_Note-1", args), Finish(reason="tool_calls")],
                      text("Updated."))
    events = await collect(LLMAgent(llm, id_factory=counter_ids()),
                           run_input(context=[Context(description="interactables", value=value),
                                              Context(description="page", value="/notes")]))
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert result.content == "Updated successfully"
    assert "/notes" in llm.calls[0].messages[0].content
    # the client's accumulator knows the component on its screen: the update lands on that instance
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    seed_interactables(acc, interactables_from_context([Context(description="interactables", value=value)]))
    check_run(events, acc)
    block = find_component(acc, "Note-1")
    assert block is not None and block["props"] == {"text": "b"} and block["streamingState"] == "done"


def test_format_tool_result() -> None:
    assert format_tool_result("x") == "x"
    assert format_tool_result({"a": [1, None]}) == '{"a":[1,null]}'
    assert format_tool_result(object()).startswith('"<object')


async def test_oversized_tool_result_is_an_error() -> None:
    def big() -> str:
        """Too much."""
        return "x" * (MAX_TOOL_RESULT_CHARS + 1)

    llm = ScriptedLLM([*call(0, "c1", "big"), Finish(reason="tool_calls")], text("ok"))
    events = await collect(LLMAgent(llm, tools=[big], tool_runner=ThreadedToolRunner()), run_input())
    result = next(e for e in events if isinstance(e, ToolCallResultEvent))
    assert "MAX_TOOL_RESULT_CHARS" in result.content


async def test_forced_tool_the_run_does_not_offer_is_refused_before_run_started() -> None:
    from agui_engine.llm import UnknownToolChoiceError

    llm = ScriptedLLM(text("x"))
    with pytest.raises(UnknownToolChoiceError):
        await collect(LLMAgent(llm, force_tool_choice="missing"), run_input())
    assert llm.calls == []
    # a client tool of the run satisfies it
    offered = Tool(name="missing", description="", parameters={"type": "object", "properties": {}})
    events = await collect(LLMAgent(ScriptedLLM(text("x")), force_tool_choice="missing"), run_input(tools=[offered]))
    assert isinstance(events[-1], RunFinishedEvent)


async def test_cancelling_during_a_tool_cancels_the_tool() -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def slow() -> str:
        """Never finishes on its own."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    llm = ScriptedLLM([*call(0, "c1", "slow"), Finish(reason="tool_calls")], text("x"))
    task = asyncio.ensure_future(collect(LLMAgent(llm, tools=[slow], tool_runner=ThreadedToolRunner()), run_input()))
    await asyncio.wait_for(started.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [True] and llm.closed == 1


async def test_a_model_that_fails_before_streaming_is_a_run_error() -> None:
    from agui_engine.protocol.errors import UpstreamError

    class Down:
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            raise UpstreamError("provider unavailable (HTTP 503)", code="provider_unavailable", retryable=True)

    events = await collect(LLMAgent(Down()), run_input())
    check_run(events)
    assert events[-1] == RunErrorEvent(message="provider unavailable (HTTP 503)", code="provider_unavailable")


async def test_client_update_tools_win_over_the_engines_interactable_tools() -> None:
    value = json.dumps({"components": [{"id": "Note-1", "componentName": "Note", "props": {"text": "a"}}]})
    client_update = Tool(name="update_component_props_Note-1", description="client side",
                         parameters={"type": "object", "properties": {"componentId": {"type": "string"},
                                                                      "newProps": {"type": "object"}}})
    args = '{"componentId":"Note-1","newProps":{"text":"b"}}'
    llm = ScriptedLLM([*call(0, "c1", "update_component_props_Note-1", args), Finish(reason="tool_calls")])
    events = await collect(LLMAgent(llm, id_factory=counter_ids()),
                           run_input(tools=[client_update], context=[Context(description="interactables", value=value)]))
    check_run(events)
    offered = {t.name: t for t in llm.calls[0].tools}
    assert offered["update_component_props_Note-1"].description == "client side"
    assert "update_component_state_Note-1" in offered
    assert events[-1].outcome is not None and events[-1].outcome.pending_tool_call_ids == ["c1"]


@st.composite
def scripted_steps(draw: st.DrawFn) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """A few model steps with reasoning, text and interleaved parallel calls, split anywhere."""
    steps: list[list[Any]] = []
    shown: list[dict[str, Any]] = []
    for step in range(draw(st.integers(0, 2))):
        items: list[Any] = []
        if draw(st.booleans()):
            items += [ReasoningDelta(text=t) for t in draw(st.lists(st.text(min_size=1, max_size=6), max_size=3))]
            items.append(ReasoningDelta(signature="sig"))
        items += [TextDelta(text=t) for t in draw(st.lists(st.text(max_size=6), max_size=3))]
        calls = []
        for index in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["card", "weather", "client"]))
            if kind == "card":
                props = {"city": draw(st.text(max_size=8)), "temperature": draw(st.integers(-40, 50))}
                shown.append(props)
                name, args = "show_component_WeatherCard", {"_tambo_statusMessage": "Showing", **props, "note": None}
            elif kind == "weather":
                name, args = "get_weather", {"_tambo_statusMessage": "Checking", "city": "Tokyo"}
            else:
                name, args = "pick", {"choice": draw(st.text(max_size=5)), "_tambo_completionStatusMessage": "Picked"}
            text_ = json.dumps(args, ensure_ascii=draw(st.booleans()))
            cuts = sorted(set(draw(st.lists(st.integers(1, max(len(text_) - 1, 1)), max_size=6))))
            pieces = [text_[a:b] for a, b in zip([0, *cuts], [*cuts, len(text_)]) if b > a]
            calls.append((index, f"s{step}c{index}", name, pieces))
        items += [ToolCallStart(index=i, id=cid, name=n) for i, cid, n, _ in calls]
        queues = {i: list(p) for i, _, _, p in calls}
        while any(queues.values()):
            i = draw(st.sampled_from([k for k, q in queues.items() if q]))
            items.append(ToolCallArgsDelta(index=i, delta=queues[i].pop(0)))
        items += [ToolCallEnd(index=i) for i, _, _, _ in calls]
        items += [Usage(input_tokens=10, output_tokens=2), Finish(reason="tool_calls")]
        steps.append(items)
        if any(n == "pick" for _, _, n, _ in calls):
            return steps, shown
    steps.append([TextDelta(text="done"), Finish(reason="stop")])
    return steps, shown


@settings(max_examples=at_most(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripted_steps())
async def test_any_scripted_run_verifies_and_components_match(script: tuple[list[list[Any]], list[dict[str, Any]]]) -> None:
    steps, shown = script
    pick = Tool(name="pick", description="client pick", parameters={"type": "object",
                                                                    "properties": {"choice": {"type": "string"}}})
    agent = LLMAgent(ScriptedLLM(*steps), components=demo_components(), tools=[get_weather], tool_runner=ThreadedToolRunner(), id_factory=counter_ids())
    events = await collect(agent, run_input("x", tools=[pick]))
    acc = check_run(events)
    finals = [e.value["finalProps"] for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]
    assert sorted(map(json.dumps, finals)) == sorted(map(json.dumps, shown))
    for value in finals:
        assert not any(k.startswith("_tambo_") or v is None for k, v in value.items())
    assert isinstance(events[-1], RunFinishedEvent)
    assert acc.problems == []


_SCHEMA_KEYS = st.sampled_from(["type", "properties", "required", "items", "anyOf", "oneOf", "allOf", "enum", "const",
                                "$ref", "additionalProperties", "default", "prefixItems", "$defs", "pattern", "minimum"])
_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3),
                       st.sampled_from(["object", "array", "string", "null", "number", "#/$defs/A", "#"]),
                       st.sampled_from([{}, [], ["object", "null"], {"type": "string"}]))
_JSON = st.recursive(_JSON_LEAF, lambda c: st.one_of(st.lists(c, max_size=3),
                                                     st.dictionaries(st.one_of(_SCHEMA_KEYS, st.text(max_size=2)), c,
                                                                     max_size=4)), max_leaves=20)


@settings(max_examples=at_most(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=st.dictionaries(_SCHEMA_KEYS, _JSON, max_size=5), value=_JSON)
async def test_any_client_schema_is_refused_before_the_run_or_the_run_ends_cleanly(schema: dict[str, Any],
                                                                                    value: Any) -> None:
    """A front end's schema of any shape (a component's prop, an interactable's props schema),
    with the model sending any value under it: a RemoteInputError before RUN_STARTED, or a run
    that ends with RUN_FINISHED or a RUN_ERROR that names the problem -- never an internal error."""
    llm = ScriptedLLM([*call(0, "c1", "show_component_X", json.dumps({"x": value})),
                       *call(1, "c2", "update_component_props_N", json.dumps({"componentId": "N", "newProps": {"x": value}})),
                       Finish(reason="tool_calls")], text("ok"))
    interactables = json.dumps({"components": [{"id": "N", "componentName": "X", "props": {}, "propsSchema": schema}]})
    nested = {"type": "object", "properties": {"x": schema}, "$defs": {"A": schema}}
    input_ = run_input("x", context=[Context(description="interactables", value=interactables)],
                       forwarded_props={"availableComponents": [{"name": "X", "propsSchema": nested}]})
    try:
        events = await collect(LLMAgent(llm), input_)
    except RemoteInputError:
        return
    last = events[-1]
    assert isinstance(last, RunFinishedEvent) or (isinstance(last, RunErrorEvent) and last.code != "internal_error")


async def test_an_async_tool_past_tool_timeout_is_cancelled_and_becomes_an_error_result() -> None:
    cancelled = asyncio.Event()

    async def hang() -> str:
        """Never returns."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    llm = ScriptedLLM([*call(0, "c1", "hang", "{}"), Finish(reason="tool_calls")], text("It timed out."))
    events = await collect(LLMAgent(llm, tools=[hang], tool_runner=ThreadedToolRunner(), tool_timeout=0.05), run_input())
    check_run(events)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content == "Error: the tool hang did not return within tool_timeout=0.05 s"
    tool_message = llm.calls[1].messages[-1]
    assert isinstance(tool_message, ToolMessage) and "tool_timeout=0.05" in (tool_message.error or "")
    assert cancelled.is_set()
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_sync_tool_past_tool_timeout_is_abandoned_and_its_late_result_discarded() -> None:
    release = threading.Event()
    finished = threading.Event()

    def block() -> str:
        """Blocks until released."""
        release.wait(5)
        finished.set()
        return "late"

    llm = ScriptedLLM([*call(0, "c1", "block", "{}"), Finish(reason="tool_calls")], text("ok"))
    try:
        events = await collect(LLMAgent(llm, tools=[block], tool_runner=ThreadedToolRunner(), tool_timeout=0.05), run_input())
    finally:
        release.set()
    check_run(events)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content.startswith("Error: the tool block did not return within")
    assert isinstance(events[-1], RunFinishedEvent)
    await asyncio.to_thread(finished.wait, 5)  # the thread ran to its end; nothing used "late"
    assert all("late" not in getattr(e, "content", "") for e in events)


async def test_a_timeout_error_raised_by_the_tool_itself_is_reported_as_such() -> None:
    async def own_timeout() -> str:
        """Its own client timed out."""
        raise TimeoutError("upstream read timed out")

    llm = ScriptedLLM([*call(0, "c1", "own_timeout", "{}"), Finish(reason="tool_calls")], text("ok"))
    events = await collect(LLMAgent(llm, tools=[own_timeout], tool_runner=ThreadedToolRunner(), tool_timeout=5), run_input())
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.content == "Error: TimeoutError: upstream read timed out"


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_tool_timeout_must_be_a_positive_number_or_none(bad: Any) -> None:
    with pytest.raises(UsageError, match="tool_timeout"):
        LLMAgent(ScriptedLLM(), tool_timeout=bad)


def test_tool_timeout_none_disables_it() -> None:
    assert LLMAgent(ScriptedLLM(), tool_timeout=None).tool_timeout is None


# --------------------------------------------------------------------------- capabilities


async def test_capabilities_list_what_the_model_is_offered_and_what_the_model_declares() -> None:
    from ag_ui.core.capabilities import AgentCapabilities as SdkCapabilities

    from agui_engine.genui.uispec import UISpecTool
    from agui_engine.loops.tool_calls import build_tools
    from agui_engine.protocol.agent import agent_capabilities
    from agui_engine.protocol.capabilities import ReasoningCapabilities, encode_capabilities

    components = demo_components()
    agent = LLMAgent(EmbeddedModel(), components=components, tools=[get_weather], ui_spec=UISpecTool(),
                     max_steps=4, parallel_tool_calls=False, memories=["likes rain"])
    caps = await agent_capabilities(agent)
    assert caps.tools is not None and caps.tools.items is not None
    names = [t.name for t in caps.tools.items]
    assert names == [*(c.tool_name for c in components), "get_weather", "render_ui"]
    # exactly the tools (standard parameters, strict form) the model gets on a step
    specs = build_tools(components, agent.tools, strict=True, ui_spec=agent.ui_spec)
    assert [t.parameters for t in caps.tools.items] == [s.llm_tool.parameters for s in specs.values()]
    assert caps.tools.parallel_calls is False and caps.tools.client_provided is True and caps.tools.supported
    assert caps.reasoning == ReasoningCapabilities(supported=True, streaming=True, encrypted=True)
    assert caps.execution is not None and caps.execution.max_iterations == 4
    assert caps.state is not None and caps.state.snapshots is False and caps.state.memory is True
    assert caps.human_in_the_loop is not None and caps.human_in_the_loop.interrupts is False
    assert caps.identity is not None and caps.identity.type == "agui-engine"
    assert caps.transport is None  # the server's to say
    SdkCapabilities.model_validate_json(encode_capabilities(caps))

    quiet = await agent_capabilities(LLMAgent(EmbeddedModel(reasoning=False)))
    assert quiet.reasoning == ReasoningCapabilities(supported=False)
    assert quiet.tools is not None and quiet.tools.items == []
    assert (await agent_capabilities(LLMAgent(ScriptedLLM([text("hi")])))).reasoning is None  # the model says nothing


async def test_a_model_whose_reasoning_declaration_is_malformed_is_a_usage_error() -> None:
    from agui_engine.protocol.agent import agent_capabilities

    class Odd(ScriptedLLM):
        def reasoning_capabilities(self) -> object:
            return {"supported": True}

    with pytest.raises(UsageError, match="not a ReasoningCapabilities"):
        await agent_capabilities(LLMAgent(Odd([text("hi")])))
