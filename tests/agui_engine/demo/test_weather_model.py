"""The embedded deterministic model: scenarios, chunking, tool choice, pacing, the LLMClient contract."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from agui_engine.demo import weather_model as embedded
from agui_engine.demo.weather_model import (
    DASHBOARD_SCHEMA,
    GET_WEATHER_TOOL,
    MAX_CHUNK_CHARS,
    WEATHER_CARD_SCHEMA,
    EmbeddedModel,
    chunk_text,
    demo_weather,
    plan_reply,
)
from agui_engine.llm import (
    Finish,
    LLMClient,
    LLMTool,
    ReasoningDelta,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from agui_engine.protocol.events import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)

STATUS = {
    "_tambo_statusMessage": {"type": "string"},
    "_tambo_completionStatusMessage": {"type": "string"},
}


def ui_tool(name: str, schema: dict[str, Any], *, strict: bool = False, status: bool = True) -> LLMTool:
    props = {**(STATUS if status else {}), **schema["properties"]}
    return LLMTool(
        name=f"show_component_{name}",
        description=f"Show {name}",
        parameters={"type": "object", "properties": props, "required": list(props)},
        strict=strict,
    )


CARD = ui_tool("WeatherCard", WEATHER_CARD_SCHEMA)
DASH = ui_tool("Dashboard", DASHBOARD_SCHEMA)
TOOLS = [GET_WEATHER_TOOL, CARD, DASH]


def user(text: str) -> UserMessage:
    return UserMessage(id="u1", content=text)


async def collect(model: EmbeddedModel, messages: list[Any], tools: list[LLMTool] = TOOLS, **kw: Any) -> list[Any]:
    return [item async for item in model.complete(messages, tools, **kw)]


def calls_of(items: list[Any]) -> dict[int, tuple[str, str, str]]:
    """index -> (id, name, concatenated args)"""
    out: dict[int, list[str]] = {}
    for item in items:
        if isinstance(item, ToolCallStart):
            out[item.index] = [item.id, item.name, ""]
        elif isinstance(item, ToolCallArgsDelta):
            out[item.index][2] += item.delta
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def answer(messages: list[Any], items: list[Any], results: dict[str, Any]) -> list[Any]:
    """Append the assistant message for ``items`` and tool results (by tool name) to the history."""
    calls = calls_of(items)
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    tool_calls = [ToolCall(id=i, function=FunctionCall(name=n, arguments=a)) for i, n, a in calls.values()]
    history = [*messages, AssistantMessage(id=f"a{len(messages)}", content=text or None, tool_calls=tool_calls or None)]
    for call_id, name, args in calls.values():
        content = results[name](json.loads(args))
        history.append(ToolMessage(id=f"t{call_id}", tool_call_id=call_id, content=content))
    return history


def test_is_an_llm_client() -> None:
    assert isinstance(EmbeddedModel(), LLMClient)


@pytest.mark.parametrize("text", ["", "a", "Hello, world! " * 20, '{"a":"\\"q\\"\\n","n":-12.5e3}', "日本語🙂"])
def test_chunks_are_1_to_8_chars_and_rejoin(text: str) -> None:
    chunks = chunk_text(text)
    assert "".join(chunks) == text
    assert all(1 <= len(c) <= MAX_CHUNK_CHARS for c in chunks)
    assert chunk_text(text) == chunks  # deterministic
    assert chunk_text(text, seed="other") == chunk_text(text, seed="other")


def test_dashboard_chunks_split_escapes_and_numbers() -> None:
    args = plan_reply([user("Show me a dashboard")], TOOLS).calls[0].arguments
    chunks = chunk_text(args, seed="show_component_Dashboard")
    # some chunk ends inside an escape sequence, some inside a number
    assert any(c.endswith("\\") for c in chunks)
    assert any(c[-1].isdigit() and n[0] in "0123456789.e" for c, n in itertools.pairwise(chunks))


async def test_weather_scenario_calls_tool_then_card_then_summarises() -> None:
    model = EmbeddedModel()
    history: list[Any] = [user("What's the weather in Tokyo?")]
    step1 = await collect(model, history)
    assert isinstance(step1[0], ReasoningDelta)
    assert any(isinstance(i, ReasoningDelta) and i.signature for i in step1)
    assert "".join(i.text for i in step1 if isinstance(i, TextDelta)) == "Let me check the weather in Tokyo."
    (call,) = calls_of(step1).values()
    assert call[1] == "get_weather" and json.loads(call[2]) == {"city": "Tokyo"}
    assert step1[-1] == Finish(reason="tool_calls", raw_reason="tool_calls")
    assert isinstance(step1[-2], Usage) and step1[-2].model == embedded.EMBEDDED_MODEL_NAME

    history = answer(history, step1, {"get_weather": lambda a: json.dumps(demo_weather(a["city"]))})
    step2 = await collect(model, history)
    (card,) = calls_of(step2).values()
    assert card[1] == "show_component_WeatherCard"
    props = json.loads(card[2])
    # standard parameters first, then props in schema order, values from the tool result
    assert list(props)[:2] == ["_tambo_statusMessage", "_tambo_completionStatusMessage"]
    assert props["city"] == "Tokyo" and props["temperature"] == demo_weather("Tokyo")["temperature"]
    assert card[0] != call[0]

    history = answer(history, step2, {"show_component_WeatherCard": lambda a: "Component was rendered"})
    step3 = await collect(model, history)
    assert calls_of(step3) == {}
    summary = "".join(i.text for i in step3 if isinstance(i, TextDelta))
    assert "18.5°C" in summary and "Tokyo" in summary
    assert step3[-1].reason == "stop"


async def test_parallel_calls_interleave_and_can_be_turned_off() -> None:
    model = EmbeddedModel()
    history: list[Any] = [user("Compare the weather in Tokyo and Paris")]
    items = await collect(model, history)
    calls = calls_of(items)
    assert [json.loads(a)["city"] for _, _, a in calls.values()] == ["Tokyo", "Paris"]
    indices = [i.index for i in items if isinstance(i, ToolCallArgsDelta)]
    assert indices[:4] == [0, 1, 0, 1]  # deltas of the two calls interleave
    ends = [i.index for i in items if isinstance(i, ToolCallEnd)]
    assert ends == [0, 1]

    sequential = await collect(model, history, parallel_tool_calls=False)
    assert len(calls_of(sequential)) == 1

    history = answer(history, items, {"get_weather": lambda a: json.dumps(demo_weather(a["city"]))})
    cards = calls_of(await collect(model, history))
    assert [json.loads(a)["city"] for _, n, a in cards.values()] == ["Tokyo", "Paris"]
    assert {n for _, n, _ in cards.values()} == {"show_component_WeatherCard"}


async def test_tool_error_is_reported_in_the_summary() -> None:
    model = EmbeddedModel()
    history: list[Any] = [user("weather in Atlantis?")]
    items = await collect(model, history)
    (call,) = calls_of(items).values()
    history = [
        *history,
        AssistantMessage(id="a", tool_calls=[ToolCall(id=call[0], function=FunctionCall(name=call[1], arguments=call[2]))]),
        ToolMessage(id="t", tool_call_id=call[0], content="Error: no data", error="no data"),
    ]
    text = "".join(i.text for i in await collect(model, history) if isinstance(i, TextDelta))
    assert "couldn't get the weather for Atlantis" in text


@pytest.mark.parametrize(
    ("result", "sentence"),
    [
        ({"city": "Tokyo", "temperature": 21.0, "condition": "Sunny"}, "It's 21.0°C and sunny in Tokyo."),
        ({"city": "Tokyo", "temperature": 21.0}, "It's 21.0°C in Tokyo."),
        ({"condition": "Fog", "humidity": 90}, "It's fog in Tokyo, with 90% humidity."),
        ({}, "Here is the weather in Tokyo."),
    ],
)
async def test_a_client_tool_result_is_summarised_with_what_it_has(result: dict[str, Any], sentence: str) -> None:
    """The README's Thread example: a client's get_weather may answer without humidity (or
    more): the model's summary says what the result holds and never "None%"."""
    from agui_engine import LLMAgent, Thread

    async def get_weather(city: str) -> dict[str, Any]:
        """Look up the current weather for a city."""
        return result

    thread = Thread(LLMAgent(EmbeddedModel()), tools=[get_weather])
    turn = await thread.send("What's the weather in Tokyo?")
    assert len(turn.runs) == 2  # the tool ran here, then the follow-up run
    text = thread.messages[-1]["content"]
    assert text.startswith(sentence) and "None" not in text, text


def test_demo_weather_table_and_unknown_city() -> None:
    assert demo_weather(" tokyo ")["city"] == "Tokyo"
    with pytest.raises(LookupError, match="Atlantis"):
        demo_weather("Atlantis")


def test_dashboard_is_nested_and_strict_tools_get_null_for_omitted_props() -> None:
    plan = plan_reply([user("Build me a dashboard")], TOOLS)
    props = json.loads(plan.calls[0].arguments)
    assert "subtitle" not in props
    assert props["sections"][0]["blocks"][2]["series"][3] == {"label": "W4", "value": 1502.5}
    assert '"preliminary"' in props["sections"][1]["blocks"][2]["text"]
    strict = plan_reply([user("Build me a dashboard")], [ui_tool("Dashboard", DASHBOARD_SCHEMA, strict=True)])
    assert json.loads(strict.calls[0].arguments)["subtitle"] is None


def test_arguments_follow_the_offered_schema() -> None:
    bare = ui_tool("WeatherCard", WEATHER_CARD_SCHEMA, status=False)
    history = [
        user("weather in Paris"),
        AssistantMessage(id="a", tool_calls=[ToolCall(id="c", function=FunctionCall(name="get_weather", arguments='{"city":"Paris"}'))]),
        ToolMessage(id="t", tool_call_id="c", content=json.dumps(demo_weather("Paris"))),
    ]
    props = json.loads(plan_reply(history, [GET_WEATHER_TOOL, bare]).calls[0].arguments)
    assert not any(k.startswith("_tambo_") for k in props)
    assert list(props) == [k for k in WEATHER_CARD_SCHEMA["properties"] if k in props]


def test_chat_and_missing_city() -> None:
    assert "Hello" in plan_reply([user("hi!")], TOOLS).text
    assert plan_reply([user("What's the weather like?")], TOOLS).text.startswith("Which city")
    assert "You said" in plan_reply([user("Tell me a story about {braces}")], TOOLS).text
    assert plan_reply([], TOOLS).text


def test_tool_choice() -> None:
    weather = [user("weather in Tokyo")]
    assert plan_reply(weather, TOOLS, "none").calls == ()
    assert plan_reply(weather, TOOLS, "none").text
    chat = [user("hello")]
    assert plan_reply(chat, TOOLS, "required").calls[0].name == "get_weather"
    forced = plan_reply(chat, TOOLS, "show_component_Dashboard").calls
    assert [c.name for c in forced] == ["show_component_Dashboard"]
    # made up from the schema: every required prop present
    assert set(DASHBOARD_SCHEMA["required"]) <= set(json.loads(forced[0].arguments))
    assert plan_reply(weather, TOOLS, "get_weather").calls[0].name == "get_weather"


async def test_contract_every_started_call_ends_and_usage_then_finish_close() -> None:
    for prompt in ["weather in Tokyo and Paris and London", "a dashboard please", "hello"]:
        items = await collect(EmbeddedModel(), [user(prompt)])
        started = [i.index for i in items if isinstance(i, ToolCallStart)]
        ended = [i.index for i in items if isinstance(i, ToolCallEnd)]
        assert started == ended
        for (_, _, args) in calls_of(items).values():
            json.loads(args)
        assert isinstance(items[-2], Usage) and isinstance(items[-1], Finish)
        for item in items:
            if isinstance(item, (TextDelta, ToolCallArgsDelta)):
                piece = item.text if isinstance(item, TextDelta) else item.delta
                assert 1 <= len(piece) <= MAX_CHUNK_CHARS


async def test_max_output_tokens_truncates_with_length() -> None:
    items = await collect(EmbeddedModel(reasoning=False), [user("a dashboard please")], max_output_tokens=20)
    assert items[-1] == Finish(reason="length", raw_reason="max_output_tokens")
    assert sum(len(i.text) for i in items if isinstance(i, TextDelta)) <= 80
    started = [i.index for i in items if isinstance(i, ToolCallStart)]
    assert started == [i.index for i in items if isinstance(i, ToolCallEnd)]


def test_dict_messages_work_too() -> None:
    plan = plan_reply([{"id": "u", "role": "user", "content": [{"type": "text", "text": "weather in Berlin"}]}], TOOLS)
    assert json.loads(plan.calls[0].arguments) == {"city": "Berlin"}



def test_lower_case_known_cities_are_found() -> None:
    plan = plan_reply([user("how's the weather in paris and tokyo")], TOOLS)
    assert [json.loads(c.arguments)["city"] for c in plan.calls] == ["Paris", "Tokyo"]


# --------------------------------------------------------------------------- render_ui (the UI spec as a tool)


def _render_ui_tool(*names: str) -> LLMTool:
    from agui_engine.genui.uispec import UISpecTool

    return UISpecTool(list(names)).to_llm_tool()


async def test_overview_streams_a_render_ui_tree_only_when_offered() -> None:
    from agui_engine.genui.tree import validate_spec

    render_ui = _render_ui_tool("Stack", "WeatherCard")
    model = EmbeddedModel()
    messages: list[Any] = [user("Weather dashboard for Tokyo and Paris")]
    items = await collect(model, messages, [*TOOLS, render_ui])
    (call_id, name, args), = calls_of(items).values()
    assert name == "render_ui"
    assert sum(isinstance(i, ToolCallArgsDelta) for i in items) > 20  # chunked like any reply
    spec = json.loads(args)
    assert spec["_tambo_statusMessage"] == "Laying out the weather overview"
    stack = spec["root"]
    assert stack["component"] == "Stack" and stack["key"] == "weather-overview"
    cards = [c for c in stack["children"] if isinstance(c, dict)]
    assert [c["props"] for c in cards] == [{"resourceId": "weather.current", "params": {"city": city}}
                                         for city in ("Tokyo", "Paris")]
    assert all(list(c) == ["component", "props", "key"] for c in cards)  # key after props
    tree = validate_spec({"root": stack}, ["Stack", "WeatherCard"])
    assert [n.key for n in tree[0].children if not isinstance(n, str)] == ["tokyo", "paris"]
    # after the tool result: a short text answer, no more calls
    history = answer(messages, items, {"render_ui": lambda _: "The UI is shown on the user's screen."})
    final = await collect(model, history, [*TOOLS, render_ui])
    assert not calls_of(final) and "Tokyo and Paris" in "".join(i.text for i in final if isinstance(i, TextDelta))
    # not offered: the same words take the usual paths (weather tool; the business dashboard)
    assert plan_reply(messages, TOOLS).calls[0].name == "get_weather"
    assert plan_reply([user("dashboard for Tokyo and Paris")], TOOLS).calls[0].name == "show_component_Dashboard"
    # offered, but no known city, or no overview word: no tree either
    assert plan_reply([user("Show me the Q3 dashboard")], [*TOOLS, render_ui]).calls[0].name == (
        "show_component_Dashboard")
    assert plan_reply([user("weather in Tokyo")], [*TOOLS, render_ui]).calls[0].name == "get_weather"


def test_overview_without_a_stack_puts_the_cards_at_the_root() -> None:
    plan = plan_reply([user("an overview for Berlin and Cairo")], [_render_ui_tool("WeatherCard")])
    root = json.loads(plan.calls[0].arguments)["root"]
    assert isinstance(root, list) and [n["key"] for n in root if isinstance(n, dict)] == ["berlin", "cairo"]
    # a render_ui that does not allow WeatherCard is not used for weather
    assert not plan_reply([user("an overview for Berlin")], [_render_ui_tool("Stack")]).calls


async def test_overview_run_through_llm_agent_passes_check_run() -> None:
    from agui_engine.cli.demo import demo_agent
    from agui_engine.genui.component_stream import component_blocks
    from agui_engine.protocol.events import RunAgentInput

    from ..run_checks import check_run

    agent = demo_agent(ui_spec=True)
    run = RunAgentInput(thread_id="t", run_id="r", messages=[user("dashboard for Tokyo and Paris")])
    events = [e async for e in agent.run(run)]
    acc = check_run(events, input_=run)
    (tree,) = [b for b in component_blocks(acc) if b["name"] == "generative-ui"]
    (stack,) = tree["props"]["root"]
    assert stack["component"] == "Stack" and stack["done"] is True and stack["id"] == "0"
    assert [(c["id"], c["key"], c["props"]["params"]["city"]) for c in stack["children"] if isinstance(c, dict)] == [
        ("0/1", "tokyo", "Tokyo"), ("0/2", "paris", "Paris")]
    assert "error" not in tree["props"]
    assert events[-1].type.value == "RUN_FINISHED"


def _dice_tool(strict: bool) -> LLMTool:
    from agui_engine.genui.components import tool_from_schema

    schema = {"type": "object", "properties": {"sides": {"type": "integer", "default": 6},
                                               "label": {"type": "string"}}, "required": ["label"]}
    return tool_from_schema("roll_dice", "Roll a die.", schema, lambda args: args).to_llm_tool(strict)


@pytest.mark.parametrize("strict", [False, True])
def test_a_tool_the_user_names_is_called_with_the_numbers_of_the_message(strict: bool) -> None:
    tool = _dice_tool(strict)
    for text in ("Roll dice with 20 sides", "please ROLL_DICE 20", "roll dice, 20 sides, then 3 more"):
        plan = plan_reply([{"role": "user", "content": text}], [tool])
        assert [c.name for c in plan.calls] == ["roll_dice"], text
        args = json.loads(plan.calls[0].arguments)
        assert args["sides"] == 20 and args["label"] == "example"
    # after its result, the model says what it returned (and calls nothing again)
    messages = [
        {"role": "user", "content": "roll dice 20"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "roll_dice", "arguments": '{"sides":20}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rolled 7 on a 20-sided die"},
    ]
    answer = plan_reply(messages, [tool])
    assert answer.calls == () and answer.text == "roll_dice says: rolled 7 on a 20-sided die"


def test_a_named_tool_does_not_take_over_the_other_scenarios() -> None:
    dice = _dice_tool(True)
    weather = LLMTool(name="get_weather", description="", parameters={"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]})
    # "roll" alone, or a word that merely contains the name, is no call of it
    assert plan_reply([{"role": "user", "content": "roll the dice_rollers"}], [dice]).calls == ()
    # get_weather stays the weather scenario's (it names no city here: it asks for one)
    plan = plan_reply([{"role": "user", "content": "get weather"}], [dice, weather])
    assert plan.calls == () and "Which city" in plan.text
