"""Differential test: our LangGraph adapter against ag-ui-langgraph 0.0.47 (the official
integration) on the same graphs and the same recorded provider streams.

Everything the official adapter emits that carries content (text, reasoning, encrypted
values, tool calls with their arguments, tool results, custom events, steps, usage,
interrupts) we emit too; in its three reproduced data-loss cases
(``shared/reference/provider-streams.md`` §9.6-9.7) we do not lose the data:

* a tool call whose name and arguments come in one chunk: it sends no TOOL_CALL_ARGS;
* the chunk that carries ``finish_reason``: it drops the chunk whole (here its text and
  its tool call);
* the Anthropic thinking signature (its own chunk, with no thinking text): never sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from agui_engine.adapters.langgraph import LangGraphAgent
from agui_engine.adapters.replay import ReplayServer
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import ResumeEntry, RunAgentInput, UserMessage

from .agent_runs import check, digest
from .langgraph_graphs import CARD_TOOL, ScriptedChatModel, agent_graph, call, finish, official_events, text
from .test_langgraph import anthropic_model, openai_model

GraphFactory = Callable[[ReplayServer], Any]


def assert_covers(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Everything the official adapter's events carry, ours carry too."""
    for key in ("text", "reasoning", "encrypted"):
        assert not theirs[key] - ours[key], f"{key} they sent and we did not: {theirs[key] - ours[key]}"
    for call_id, (name, args) in theirs["calls"].items():
        assert call_id in ours["calls"] and ours["calls"][call_id][0] == name
        if args:
            assert msgspec.json.decode(ours["calls"][call_id][1]) == msgspec.json.decode(args)
    assert theirs["results"].items() <= ours["results"].items()
    assert not Counter(map(repr, theirs["custom"])) - Counter(map(repr, ours["custom"]))
    assert theirs["steps"] - {"__start__"} <= ours["steps"]  # LangGraph's entry, not a node of the graph
    assert ours["usage"] == theirs["usage"]
    assert ours["interrupts"] == theirs["interrupts"]


async def both(make: GraphFactory, input: RunAgentInput) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the same graph (built twice, each with its own replay script and checkpointer)
    through ours and through ag-ui-langgraph."""
    async with ReplayServer() as server:
        ours = [e async for e in LangGraphAgent(make(server)).run(input)]
        check(ours)
        theirs = await official_events(make(server), input)
    return digest([msgspec.json.decode(encode_event(e)) for e in ours]), digest(theirs)


QUESTION = RunAgentInput(thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="Weather in Paris and Oslo?")])


def react(model: Callable[[ReplayServer], Any]) -> GraphFactory:
    return lambda server: create_react_agent(model(server), [CARD_TOOL], checkpointer=InMemorySaver())


PROVIDER_GRAPHS: dict[str, GraphFactory] = {
    "openai_chat tool calls": react(lambda s: openai_model(s, "tool_calls", "text")),
    "openai_chat reasoning": react(lambda s: openai_model(s, "reasoning", "text")),
    "openai_responses tool calls": react(lambda s: openai_model(s, "tool_calls", "text", provider="openai_responses",
                                                                use_responses_api=True)),
    "openai_responses reasoning": react(lambda s: openai_model(s, "reasoning", "text", provider="openai_responses",
                                                               use_responses_api=True)),
    "anthropic tool calls": react(lambda s: anthropic_model(s, "tool_calls", "text")),
    "anthropic reasoning": react(lambda s: anthropic_model(s, "reasoning", "text")),
    "openai_compatible atomic tool call": react(lambda s: openai_model(s, "atomic_tool_call", "text",
                                                                       provider="openai_compatible")),
}


@pytest.mark.parametrize("name", list(PROVIDER_GRAPHS))
async def test_we_carry_everything_the_official_adapter_carries(name: str) -> None:
    ours, theirs = await both(PROVIDER_GRAPHS[name], QUESTION)
    assert_covers(ours, theirs)
    assert ours["calls"] or ours["text"]
    for _call_id, (_, args) in ours["calls"].items():  # every call of ours has its arguments
        assert isinstance(msgspec.json.decode(args), dict)


async def test_loss_name_and_arguments_in_one_chunk() -> None:
    atomic = [{"content": "", "tool_call_chunks": [
        {"name": "show_component_WeatherCard", "args": '{"city": "Rome", "tempC": 24}', "id": "call_R", "index": 0}]},
        *finish()]
    make: GraphFactory = lambda _: agent_graph(ScriptedChatModel(scripts=[atomic, text("Done.")]), [CARD_TOOL],  # noqa: E731
                                               checkpointer=InMemorySaver())
    ours, theirs = await both(make, QUESTION)
    assert_covers(ours, theirs)
    assert theirs["calls"]["call_R"] == ["show_component_WeatherCard", ""] and not theirs["args_events"]
    assert msgspec.json.decode(ours["calls"]["call_R"][1]) == {"city": "Rome", "tempC": 24}


async def test_loss_the_chunk_with_finish_reason() -> None:
    """A real integration's shape (the recorded OpenAI-compatible stream; langchain-google-genai
    does the same): the last chunk carries text, a whole tool call and finish_reason."""
    ours, theirs = await both(PROVIDER_GRAPHS["openai_compatible atomic tool call"], QUESTION)
    assert_covers(ours, theirs)
    assert " One card:" in ours["text"] and " One card:" not in theirs["text"]
    # their call only appears after the tool ran (the on_tool_end fallback); ours streams it
    assert msgspec.json.decode(ours["calls"]["call_x9"][1]) == {"city": "Rome", "tempC": 24}


async def test_loss_the_anthropic_thinking_signature() -> None:
    ours, theirs = await both(PROVIDER_GRAPHS["anthropic reasoning"], QUESTION)
    assert_covers(ours, theirs)
    signature = next(v for v in ours["encrypted"] if v.startswith("EqQBCgIYAhIM"))
    assert signature not in theirs["encrypted"]


async def test_scripted_graph_with_parallel_calls_custom_events_and_state() -> None:
    turn = [*text("Let me check.", finish=False), *call("get_weather", "call_A", '{"ci', 'ty": "Paris"}', index=0),
            *call("get_weather", "call_B", '{"city": "Oslo"}', index=1), *finish()]
    make: GraphFactory = lambda _: agent_graph(ScriptedChatModel(scripts=[turn, text("Both ", "sunny.")]),  # noqa: E731
                                               checkpointer=InMemorySaver())
    ours, theirs = await both(make, QUESTION)
    assert_covers(ours, theirs)
    assert [name for name, _ in ours["custom"]] == ["progress", "progress"]


async def test_interrupt_and_resume() -> None:
    saver_ours, saver_theirs = InMemorySaver(), InMemorySaver()
    model = ScriptedChatModel(scripts=[text("Approved.")])
    graphs = {"ours": agent_graph(model, checkpointer=saver_ours, approval=True),
              "theirs": agent_graph(model, checkpointer=saver_theirs, approval=True)}
    ask = RunAgentInput(thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="approve it")])
    ours_events = [msgspec.json.decode(encode_event(e)) async for e in LangGraphAgent(graphs["ours"]).run(ask)]
    theirs_events = await official_events(graphs["theirs"], ask)
    assert_covers(digest(ours_events), digest(theirs_events))
    ours_id = ours_events[-1]["outcome"]["interrupts"][0]["id"]
    theirs_id = theirs_events[-1]["outcome"]["interrupts"][0]["id"]

    def resume(interrupt_id: str) -> RunAgentInput:
        return RunAgentInput(thread_id="t1", run_id="r2", messages=ask.messages,
                             resume=[ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload={"ok": True})])

    ours_after = [msgspec.json.decode(encode_event(e)) async for e in LangGraphAgent(graphs["ours"]).run(resume(ours_id))]
    theirs_after = await official_events(graphs["theirs"], resume(theirs_id))
    assert_covers(digest(ours_after), digest(theirs_after))
    assert "Approved." in digest(ours_after)["text"]
