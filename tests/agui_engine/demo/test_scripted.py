"""ScriptedModel: the turn is read from the conversation (so runs and threads stay in step),
text and tool-call arguments stream in fragments that rebuild the scripted values, callable
turns see the tool results, a conversation past the script gets a typed stream error, and an
LLMAgent over it makes a verified run."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from agui_engine import LLMAgent
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results, user_text
from agui_engine.llm import (
    Finish,
    LLMStreamItem,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    FunctionCall,
    RunAgentInput,
    TextMessageContentEvent,
    ToolCall,
    ToolCallResultEvent,
    ToolMessage,
    UserMessage,
)
from agui_engine.protocol.verify import verify_events
from agui_engine.transports import run_agent


async def items(model: ScriptedModel, messages: list[Any]) -> list[LLMStreamItem]:
    return [item async for item in model.complete(messages, [])]


def user(text: str, n: int = 0) -> UserMessage:
    return UserMessage(id=f"u{n}", content=text)


def called(n: int) -> AssistantMessage:
    return AssistantMessage(id=f"a{n}", tool_calls=[ToolCall(id=f"c{n}", function=FunctionCall(name="f", arguments="{}"))])


TWO_TURNS = [ScriptedTurn(text="Looking. ", tool_calls=[ScriptedCall("get_weather", {"city": "Tokyo", "days": [1, 2]}),
                                                       ScriptedCall("get_time", {})]),
             "Done."]


async def test_text_and_arguments_stream_in_fragments_that_rebuild_the_script() -> None:
    out = await items(ScriptedModel(TWO_TURNS), [user("weather?")])
    assert "".join(i.text for i in out if isinstance(i, TextDelta)) == "Looking. "
    starts = [i for i in out if isinstance(i, ToolCallStart)]
    assert [s.name for s in starts] == ["get_weather", "get_time"] and len({s.id for s in starts}) == 2
    fragments = [i.delta for i in out if isinstance(i, ToolCallArgsDelta) and i.index == 0]
    assert len(fragments) > 1  # streamed in pieces, as a provider does
    assert msgspec.json.decode("".join(fragments)) == {"city": "Tokyo", "days": [1, 2]}
    assert [i.index for i in out if isinstance(i, ToolCallEnd)] == [0, 1]
    assert isinstance(out[-2], Usage) and out[-2].model == "scripted-1"
    assert out[-1] == Finish(reason="tool_calls")


async def test_the_turn_is_the_number_of_assistant_messages_since_the_last_user_message() -> None:
    model = ScriptedModel(TWO_TURNS)
    after_tools = [user("weather?"), called(1), ToolMessage(id="t1", tool_call_id="c1", content="sunny")]
    assert "".join(i.text for i in await items(model, after_tools) if isinstance(i, TextDelta)) == "Done."
    # a new user message starts the script again; another conversation is not disturbed by this one
    again = [*after_tools, AssistantMessage(id="a2", content="Done."), user("and now?", 2)]
    assert any(isinstance(i, ToolCallStart) for i in await items(model, again))
    assert any(isinstance(i, ToolCallStart) for i in await items(model, [user("weather?")]))


async def test_a_callable_turn_reads_the_tool_results_and_the_user_text() -> None:
    seen: list[tuple[str, list[str]]] = []

    def answer(messages: Any) -> str:
        seen.append((user_text(messages), tool_results(messages)))
        return f"It is {tool_results(messages)[-1]}."

    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("f")]), answer])
    messages = [user("old", 0), AssistantMessage(id="a0", content="x"), ToolMessage(id="t0", tool_call_id="c0", content="stale"),
                user("Oslo?", 1), called(1), ToolMessage(id="t1", tool_call_id="c1", content="snowing")]
    out = await items(model, messages)
    assert "".join(i.text for i in out if isinstance(i, TextDelta)) == "It is snowing."
    assert seen == [("Oslo?", ["snowing"])]  # only what follows the last user message


async def test_past_the_end_of_the_script_the_stream_is_a_typed_error() -> None:
    out = await items(ScriptedModel(["only"]), [user("hi"), AssistantMessage(id="a", content="only"),
                                                ToolMessage(id="t", tool_call_id="c", content="?")])
    assert out == [StreamError(message="the conversation asks for turn 2 of a script of 1 turns", code="script_exhausted")]


def test_a_bad_script_is_refused_with_what_to_give() -> None:
    with pytest.raises(UsageError, match="list of turns"):
        ScriptedModel([])
    with pytest.raises(UsageError, match="list of turns"):
        ScriptedModel("hello")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="turn 1 of the script is a int"):
        ScriptedModel(["a", 3])  # type: ignore[list-item]


async def test_a_callable_turn_that_returns_no_turn_is_refused() -> None:
    with pytest.raises(UsageError, match="turn 0 of the script returned a int"):
        await items(ScriptedModel([lambda messages: 3]), [user("hi")])  # type: ignore[list-item, return-value]


async def test_an_llm_agent_over_it_runs_the_scripted_tool_and_answers() -> None:
    def get_weather(city: str) -> str:
        """Weather."""
        return f"{city}: 21 C"

    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("get_weather", {"city": "Paris"})]),
                           lambda messages: f"Paris is {tool_results(messages)[-1]}"])
    run = RunAgentInput(thread_id="t", run_id="r", messages=[user("weather in Paris?")])
    events = [e async for e in run_agent(LLMAgent(model, tools=[get_weather]), run)]
    assert verify_events(events) == []
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["Paris: 21 C"]
    assert "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent)) == "Paris is Paris: 21 C"
