"""The agent loop: tools in, every repair row, components and interactables from any producer, RUN_ERROR paths."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine import Agent, AgentLoop
from agui_engine.genui.component_stream import (
    COMPONENT_END,
    COMPONENT_HANDLERS,
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
    COMPONENT_STATE_DELTA,
    find_component,
    seed_interactables,
)
from agui_engine.genui.components import STATUS_MESSAGE_PARAMETER, Component
from agui_engine.genui.interactables import INTERACTABLES_CONTEXT, UPDATE_RESULT, interactables_from_context
from agui_engine.loops.agent_loop import AGENT_ERROR_CODE, REPAIRS, run_agent_loop
from agui_engine.loops.tool_calls import TOOL_CALL_STATUS_EVENT
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.errors import RemoteInputError, UpstreamError, UsageError
from agui_engine.protocol.events import (
    AssistantMessage,
    Context,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    Tool,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UnknownEvent,
    UserMessage,
)
from tests.helpers import run_input

from ..run_checks import check_run
from ..scripted_llm import counter_ids

CARD = Component("WeatherCard", "Shows the weather of one city.", {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}, "note": {"type": "string"}},
    "required": ["city", "temperature"],
})


class Scripted:
    """An inner agent that yields a fixed list of events (and records the inputs it got)."""

    def __init__(self, *events: Any, raises: BaseException | None = None) -> None:
        self.events = list(events)
        self.raises = raises
        self.inputs: list[RunAgentInput] = []
        self.closed = False

    async def run(self, input: RunAgentInput) -> AsyncIterator[Any]:
        self.inputs.append(input)
        try:
            for event in self.events:
                yield event
            if self.raises is not None:
                raise self.raises
        finally:
            self.closed = True


async def collect(inner: Any, input_: RunAgentInput | None = None, **kw: Any) -> tuple[list[Any], list[str]]:
    """The loop's events for ``inner`` and the repair ids it reported, in order."""
    repairs: list[str] = []
    loop = AgentLoop(inner, id_factory=counter_ids(), on_repair=lambda r, d: repairs.append(r), **kw)
    events = [e async for e in loop.run(input_ or run_input("hi"))]
    return events, repairs


def types(events: list[Any]) -> list[str]:
    return [e.name if isinstance(e, CustomEvent) else e.type.value for e in events]


def customs(events: list[Any], name: str) -> list[Any]:
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == name]


START = RunStartedEvent(thread_id="t1", run_id="r1")
FINISH = RunFinishedEvent(thread_id="t1", run_id="r1")


def component_call(call_id: str, *fragments: str, name: str = "show_component_WeatherCard",
                   parent: str | None = "m1") -> list[Any]:
    return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent),
            *(ToolCallArgsEvent(tool_call_id=call_id, delta=f) for f in fragments),
            ToolCallEndEvent(tool_call_id=call_id)]


# --------------------------------------------------------------------------- basics


async def assert_run_error(script: list[Any], code: str, **kw: Any) -> list[Any]:
    events, _ = await collect(Scripted(*script), **kw)
    check_run(events)
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == code, events[-1]
    return events



def test_is_an_agent_and_exported() -> None:
    assert isinstance(AgentLoop(Scripted()), Agent)
    with pytest.raises(UsageError, match="run"):
        AgentLoop(object())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="two tools"):
        AgentLoop(Scripted(), components=[CARD, CARD])


async def test_a_clean_stream_passes_unchanged() -> None:
    script = [START, TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="Hello"), TextMessageEndEvent(message_id="m1"),
              StateSnapshotEvent(snapshot={"a": 1}), CustomEvent(name="app.progress", value=1), FINISH]
    events, repairs = await collect(Scripted(*script))
    assert events == script and repairs == []
    check_run(events)


async def test_component_and_interactable_tools_are_added_to_the_inner_input() -> None:
    inner = Scripted(START, FINISH)
    interactables_value = json.dumps({"components": [
        {"id": "note-1", "componentName": "Note", "description": "a note", "props": {"text": "a"},
         "propsSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    ]})
    client_tool = Tool(name="get_location", description="where the user is",
                       parameters={"type": "object", "properties": {}})
    client_card = Tool(name="show_component_Map", description="a map",
                       parameters={"type": "object", "properties": {"lat": {"type": "number"}}})
    input_ = run_input("hi", tools=[client_tool, client_card],
                       context=[Context(description=INTERACTABLES_CONTEXT, value=interactables_value)])
    await collect(inner, input_, components=[CARD])
    (seen,) = inner.inputs
    by_name = {t.name: t for t in seen.tools}
    assert list(by_name) == ["get_location", "show_component_WeatherCard", "show_component_Map",
                             "update_component_props_note-1", "update_component_state_note-1"]
    assert by_name["get_location"] == client_tool  # client tools pass unchanged
    card = by_name["show_component_WeatherCard"].parameters
    # the same strict schema LLMAgent sends: standard parameters first, every property required
    assert list(card["properties"])[:2] == [STATUS_MESSAGE_PARAMETER, "_tambo_completionStatusMessage"]
    assert card["additionalProperties"] is False and set(card["required"]) == set(card["properties"])
    assert card["properties"]["note"] == {"anyOf": [{"type": "null"}, {"type": "string"}]}
    assert by_name["show_component_Map"].parameters["properties"]["lat"] == {"anyOf": [{"type": "null"}, {"type": "number"}]}
    assert seen.messages == input_.messages and seen.context == input_.context


async def test_an_invalid_client_component_is_refused_before_any_event() -> None:
    bad = Tool(name="show_component_Bad", description="x", parameters={"type": "array"})
    inner = Scripted(START, FINISH)
    with pytest.raises(RemoteInputError):
        await collect(inner, run_input("hi", tools=[bad]))
    assert inner.inputs == []


# --------------------------------------------------------------------------- components


async def test_a_component_call_gets_the_component_events_and_an_answer() -> None:
    script = [START, TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="Here:"), TextMessageEndEvent(message_id="m1"),
              *component_call("c1", '{"_tambo_statusMessage":"Showing",', '"city":"Tok', 'yo","temperature":18',
                              '.5,"note":null}'),
              RunFinishedEvent(thread_id="t1", run_id="r1",
                               outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1"]))]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    assert repairs == []
    acc = check_run(events)
    (start,) = customs(events, COMPONENT_START)
    assert start["messageId"] == "m1" and start["componentName"] == "WeatherCard"
    (end,) = customs(events, COMPONENT_END)
    assert end["finalProps"] == {"city": "Tokyo", "temperature": 18.5}  # the strict null is gone
    wire = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert json.loads(wire) == {"city": "Tokyo", "temperature": 18.5}
    assert customs(events, TOOL_CALL_STATUS_EVENT) == [{"toolCallId": "c1", "statusMessage": "Showing"}]
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == "c1" and result.content == "Component WeatherCard is shown on the user's screen."
    # the loop answered the call, so it is no longer pending
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None
    block = find_component(acc, start["componentId"])
    assert block is not None and block["props"] == end["finalProps"]


@pytest.mark.parametrize("append", [True, False], ids=["default-append", "strict-rfc6902"])
async def test_growing_strings_travel_as_append_by_default(append: bool) -> None:
    script = [START, *component_call("c1", '{"city":"To', "k", "y", 'o","temperature":1}'), FINISH]
    options = {} if append else {"append_strings": False}
    events, _ = await collect(Scripted(*script), components=[CARD], **options)
    ops = [(o["op"], o["path"], o.get("value")) for value in customs(events, COMPONENT_PROPS_DELTA)
           for o in value["operations"]]
    grow = [("append", "/city", "k"), ("append", "/city", "y"), ("append", "/city", "o")] if append else \
        [("replace", "/city", "Tok"), ("replace", "/city", "Toky"), ("replace", "/city", "Tokyo")]
    assert ops == [("add", "/city", "To"), *grow, ("add", "/temperature", 1)]
    check_run(events)


async def test_props_that_do_not_fit_the_schema_are_told_in_the_answer() -> None:
    script = [START, *component_call("c1", '{"city":"Oslo","temperature":null,"note":null}'), FINISH]
    events, _ = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert "Error: the props of WeatherCard do not match its schema" in result.content


async def test_a_call_the_inner_agent_answered_itself_is_not_answered_again() -> None:
    script = [START, *component_call("c1", '{"city":"Oslo","temperature":3}'),
              ToolCallResultEvent(message_id="r-1", tool_call_id="c1", content="shown"), FINISH]
    events, _ = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["shown"]


async def test_other_pending_calls_and_interrupts_stay() -> None:
    script = [START, *component_call("c1", '{"city":"Oslo","temperature":3}'),
              ToolCallStartEvent(tool_call_id="c2", tool_call_name="get_location", parent_message_id="m1"),
              ToolCallEndEvent(tool_call_id="c2"),
              RunFinishedEvent(thread_id="t1", run_id="r1",
                               outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1", "c2"]))]
    events, _ = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert events[-1].outcome == RunFinishedSuccessOutcome(pending_tool_call_ids=["c2"])
    interrupt = RunFinishedInterruptOutcome(interrupts=[])
    script[-1] = RunFinishedEvent(thread_id="t1", run_id="r1", outcome=interrupt)
    events, _ = await collect(Scripted(*script), components=[CARD])
    assert events[-1].outcome == interrupt


async def test_calls_of_tools_that_are_not_ours_pass_unchanged() -> None:
    fragments = ['{"q": ', 'null, "n": [1', ", 2]}"]
    script = [START, ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", parent_message_id="m1"),
              *(ToolCallArgsEvent(tool_call_id="c1", delta=f) for f in fragments),
              ToolCallEndEvent(tool_call_id="c1"), FINISH]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert events == script and repairs == []  # byte for byte, not ours to answer


async def test_a_foreign_call_with_arguments_that_are_not_json_ends_the_run() -> None:
    script = [START, ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", parent_message_id="m1"),
              ToolCallArgsEvent(tool_call_id="c1", delta='{"q": '), ToolCallEndEvent(tool_call_id="c1"), FINISH]
    events = await assert_run_error(script, "protocol_violation")
    assert "c1" in events[-1].message and types(events)[-2:] == ["TOOL_CALL_ARGS", "RUN_ERROR"]
    # left open at the end of the run: the same
    events = await assert_run_error(script[:3] + [FINISH], "protocol_violation")


async def test_an_interactable_update_streams_onto_the_component() -> None:
    value = json.dumps({"components": [{
        "id": "note-1", "componentName": "Note", "description": "a note", "props": {"text": "a", "pinned": False},
        "state": {"open": True},
        "propsSchema": {"type": "object", "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}}},
        "stateSchema": {"type": "object", "properties": {"open": {"type": "boolean"}}},
    }]})
    input_ = run_input("hi", context=[Context(description=INTERACTABLES_CONTEXT, value=value)])
    script = [START,
              *component_call("c1", '{"componentId":"note-1","newProps":{"text":"b', 'c","pinned":null}}',
                              name="update_component_props_note-1"),
              *component_call("c2", '{"componentId":"note-1","newState":{"open":false}}',
                              name="update_component_state_note-1"),
              FINISH]
    events, _ = await collect(Scripted(*script), input_)
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    seed_interactables(acc, interactables_from_context(input_.context))
    check_run(events, acc)
    assert customs(events, COMPONENT_PROPS_DELTA) and customs(events, COMPONENT_STATE_DELTA)
    ends = customs(events, COMPONENT_END)
    assert ends == [{"componentId": "note-1", "finalProps": {"text": "bc", "pinned": False}},
                    {"componentId": "note-1", "finalState": {"open": False}}]
    assert find_component(acc, "note-1")["props"] == {"text": "bc", "pinned": False}
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == [UPDATE_RESULT, UPDATE_RESULT]


# --------------------------------------------------------------------------- repairs, one test per row


async def test_repair_missing_run_started_and_finished() -> None:
    events, repairs = await collect(Scripted(TextMessageContentEvent(message_id="m", delta="x")))
    check_run(events)
    assert repairs == ["missing_run_started", "missing_text_start", "missing_run_finished", "open_at_finish"]
    assert types(events) == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                             "RUN_FINISHED"]
    assert (events[0].thread_id, events[0].run_id, events[-1].run_id) == ("t1", "r1", "r1")


async def test_repair_an_empty_stream() -> None:
    events, repairs = await collect(Scripted())
    check_run(events)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    assert repairs == ["missing_run_started", "missing_run_finished"]


async def test_repair_duplicate_run_started_and_events_after_the_end() -> None:
    inner = Scripted(START, START, FINISH, TextMessageContentEvent(message_id="m", delta="late"), FINISH)
    events, repairs = await collect(inner)
    check_run(events)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    assert repairs == ["duplicate_run_started"]  # the loop stops reading at the end: nothing after is read
    assert inner.closed


async def test_repair_run_ids() -> None:
    events, repairs = await collect(Scripted(START, RunFinishedEvent(thread_id="t1", run_id="other")))
    check_run(events)
    assert repairs == ["run_ids"] and events[-1].run_id == "r1"


async def test_repair_legacy_thinking() -> None:
    script = [START, UnknownEvent("THINKING_START", {"type": "THINKING_START", "title": "t"}),
              UnknownEvent("THINKING_TEXT_MESSAGE_START", {"type": "THINKING_TEXT_MESSAGE_START"}),
              UnknownEvent("THINKING_TEXT_MESSAGE_CONTENT", {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hm"}),
              UnknownEvent("THINKING_TEXT_MESSAGE_END", {"type": "THINKING_TEXT_MESSAGE_END"}),
              UnknownEvent("THINKING_END", {"type": "THINKING_END"}), FINISH]
    events, repairs = await collect(Scripted(*script))
    check_run(events)
    assert types(events)[1:-1] == ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
                                   "REASONING_MESSAGE_END", "REASONING_END"]
    assert events[3].delta == "hm" and events[2].message_id == events[3].message_id == events[4].message_id
    assert set(repairs) == {"legacy_thinking"}


async def test_an_unknown_newer_event_is_relayed_whole() -> None:
    future = UnknownEvent("SOMETHING_NEW", {"type": "SOMETHING_NEW", "x": 1})
    events, repairs = await collect(Scripted(START, future, FINISH))
    assert events == [START, future, FINISH] and repairs == []


async def test_repair_missing_reasoning_start_and_empty_deltas() -> None:
    script = [START, ReasoningMessageContentEvent(message_id="r", delta="think"),
              ReasoningMessageContentEvent(message_id="r", delta=""),
              TextMessageStartEvent(message_id="m", role="assistant"), TextMessageContentEvent(message_id="m", delta=""),
              TextMessageEndEvent(message_id="m"), FINISH]
    events, repairs = await collect(Scripted(*script))
    check_run(events)
    assert repairs == ["missing_reasoning_start", "empty_delta", "empty_delta", "open_at_finish"]
    assert types(events) == ["RUN_STARTED", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
                             "TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "REASONING_MESSAGE_END", "RUN_FINISHED"]


async def test_repaired_starts_are_the_writers_and_keep_the_subagent() -> None:
    """missing_text_start / missing_reasoning_start open with the event writer's START
    (start_event) for the CONTENT's message and sub-agent; the repaired text message is the
    current assistant message, so a tool call without a parent belongs to it."""
    from agui_engine.protocol.events import SubagentFinishedEvent, SubagentStartedEvent
    from agui_engine.protocol.verify import REASONING_MESSAGE, TEXT
    from agui_engine.protocol.writer import start_event

    script = [START, SubagentStartedEvent(subagent_run_id="s", name="helper"),
              ReasoningMessageContentEvent(message_id="r", delta="hm", subagent_run_id="s"),
              ReasoningMessageEndEvent(message_id="r", subagent_run_id="s"),
              TextMessageContentEvent(message_id="m", delta="x", subagent_run_id="s"),
              TextMessageEndEvent(message_id="m", subagent_run_id="s"),
              SubagentFinishedEvent(subagent_run_id="s"),
              *component_call("c1", '{"city":"A","temperature":1}', parent=None), FINISH]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert repairs == ["missing_reasoning_start", "missing_text_start", "tool_call_parent"]
    assert start_event(REASONING_MESSAGE, "r", subagent_run_id="s") in events
    assert start_event(TEXT, "m", subagent_run_id="s") in events
    assert next(e for e in events if isinstance(e, ToolCallStartEvent)).parent_message_id == "m"


async def test_repair_end_not_open() -> None:
    script = [START, TextMessageEndEvent(message_id="nope"), ToolCallEndEvent(tool_call_id="nope"),
              ReasoningEndEvent(message_id="nope"), ReasoningMessageEndEvent(message_id="nope"),
              StepStartedEvent(step_name="a"), StepFinishedEvent(step_name="a"), StepFinishedEvent(step_name="a"),
              FINISH]
    events, repairs = await collect(Scripted(*script))
    check_run(events)
    assert repairs == ["end_not_open"] * 5
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]


async def test_repair_tool_call_parent_groups_the_calls_under_the_current_message() -> None:
    script = [START, TextMessageStartEvent(message_id="m9", role="assistant"),
              TextMessageContentEvent(message_id="m9", delta="x"), TextMessageEndEvent(message_id="m9"),
              *component_call("c1", '{"city":"A","temperature":1}', parent=None), FINISH]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert repairs == ["tool_call_parent"]
    start = next(e for e in events if isinstance(e, ToolCallStartEvent))
    assert start.parent_message_id == "m9" and customs(events, COMPONENT_START)[0]["messageId"] == "m9"
    # no text at all: one fresh id for the calls
    events, _ = await collect(Scripted(START, *component_call("c1", "{}", name="x", parent=None),
                                       *component_call("c2", "{}", name="y", parent=None), FINISH))
    check_run(events)
    parents = {e.parent_message_id for e in events if isinstance(e, ToolCallStartEvent)}
    assert len(parents) == 1 and None not in parents


async def test_repair_tool_call_chunk_delivers_the_arguments_and_the_component() -> None:
    chunk = ToolCallChunkEvent(tool_call_id="c1", tool_call_name="show_component_WeatherCard",
                               parent_message_id="m1", delta='{"city":"Oslo","temperature":3}')
    events, repairs = await collect(Scripted(START, chunk, FINISH), components=[CARD])
    check_run(events)
    assert "tool_call_chunk" in repairs
    assert types(events)[1:5] == ["TOOL_CALL_START", COMPONENT_START, "TOOL_CALL_ARGS", COMPONENT_PROPS_DELTA]
    assert customs(events, COMPONENT_END) [0]["finalProps"] == {"city": "Oslo", "temperature": 3}


async def test_text_chunks_are_expanded() -> None:
    script = [START, TextMessageChunkEvent(message_id="m1", delta="a"), TextMessageChunkEvent(delta="b"), FINISH]
    events, _ = await collect(Scripted(*script))
    check_run(events)
    assert types(events) == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT",
                             "TEXT_MESSAGE_END", "RUN_FINISHED"]


async def test_repair_args_in_snapshot_fills_the_component() -> None:
    # ag-ui-langgraph's whole-call bug: START and END, no ARGS; the arguments only in the snapshot
    args = '{"_tambo_statusMessage":"s","city":"Rome","temperature":20,"note":null}'
    snapshot = MessagesSnapshotEvent(messages=[
        UserMessage(id="u1", content="hi"),
        AssistantMessage(id="m1", tool_calls=[ToolCall(id="c1", function=FunctionCall(
            name="show_component_WeatherCard", arguments=args))]),
    ])
    script = [START, *component_call("c1", parent="m1"), snapshot, FINISH]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert repairs == ["args_in_snapshot"]
    assert customs(events, COMPONENT_END) == [{"componentId": customs(events, COMPONENT_START)[0]["componentId"],
                                               "finalProps": {"city": "Rome", "temperature": 20}}]
    assert types(events).index(COMPONENT_END) > types(events).index("MESSAGES_SNAPSHOT")
    # no snapshot ever comes: {} at the end of the run
    events, repairs = await collect(Scripted(START, *component_call("c1", parent="m1"), FINISH), components=[CARD])
    check_run(events)
    assert repairs == ["args_in_snapshot"] and customs(events, COMPONENT_END)[0]["finalProps"] == {}


def _lost_first_fragment(call_id: str, name: str, args: str, cut: int) -> tuple[list[Any], MessagesSnapshotEvent]:
    """ag-ui-langgraph 0.0.47 with a model that sends the tool name and the first argument
    fragment in one chunk: START, the ARGS from the second fragment on, END; the closing
    MESSAGES_SNAPSHOT has the whole arguments."""
    events = [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id="m1"),
              *(ToolCallArgsEvent(tool_call_id=call_id, delta=args[i:i + 5]) for i in range(cut, len(args), 5)),
              ToolCallEndEvent(tool_call_id=call_id)]
    snapshot = MessagesSnapshotEvent(messages=[
        UserMessage(id="u1", content="hi"),
        AssistantMessage(id="m1", tool_calls=[ToolCall(id=call_id, function=FunctionCall(name=name, arguments=args))]),
    ])
    return events, snapshot


async def test_repair_args_from_snapshot_gives_a_foreign_call_its_arguments_before_the_snapshot() -> None:
    args = '{"city": "Paris", "unit": "C"}'
    call, snapshot = _lost_first_fragment("c1", "get_weather", args, cut=9)
    result = ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="18 C", role="tool")
    answer = [TextMessageStartEvent(message_id="m2", role="assistant"),
              TextMessageContentEvent(message_id="m2", delta="It is 18 C in Paris."), TextMessageEndEvent(message_id="m2")]
    snapshot = msgspec.structs.replace(snapshot, messages=[
        *snapshot.messages, ToolMessage(id="r1", tool_call_id="c1", content="18 C"),
        AssistantMessage(id="m2", content="It is 18 C in Paris.")])
    events, repairs = await collect(Scripted(START, *call, result, *answer, snapshot, FINISH))
    acc = check_run(events)
    assert repairs == ["args_from_snapshot"]
    assert types(events) == ["RUN_STARTED", "TOOL_CALL_START", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
                             "TEXT_MESSAGE_END", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
                             "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert [e.delta for e in events if isinstance(e, ToolCallArgsEvent)] == [args]  # whole, once
    assert events[-3] is result  # the result after its call's END
    # what a client holds at the end is the snapshot: the call's arguments are not doubled
    (m1,) = [m for m in acc.messages_as_structs() if m.id == "m1"]
    assert isinstance(m1, AssistantMessage) and m1.tool_calls and m1.tool_calls[0].function.arguments == args


async def test_repair_args_from_snapshot_without_a_snapshot_ends_the_run_as_before() -> None:
    call, _ = _lost_first_fragment("c1", "get_weather", '{"city": "Paris"}', cut=9)
    events = await assert_run_error([START, *call, FINISH], "protocol_violation")
    assert "args_not_json" in events[-1].message and "c1" in events[-1].message
    # left open at the end of the stream: the same
    events = await assert_run_error([START, *call[:-1]], "protocol_violation")


async def test_held_arguments_are_bounded() -> None:
    from agui_engine.jsonstream import MAX_BYTES

    chunk = "x" * (MAX_BYTES // 4)
    script = [START, ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", parent_message_id="m1"),
              *(ToolCallArgsEvent(tool_call_id="c1", delta=chunk) for _ in range(5)), FINISH]
    events = await assert_run_error(script, "json_limit_exceeded")
    assert "held for a MESSAGES_SNAPSHOT" in events[-1].message
    assert not any(isinstance(e, ToolCallArgsEvent) for e in events)


async def test_foreign_arguments_that_do_not_begin_as_an_object_but_are_json_go_out_whole_at_end() -> None:
    script = [START, ToolCallStartEvent(tool_call_id="c1", tool_call_name="count", parent_message_id="m1"),
              ToolCallArgsEvent(tool_call_id="c1", delta="  "), ToolCallArgsEvent(tool_call_id="c1", delta="4"),
              ToolCallArgsEvent(tool_call_id="c1", delta="2"), ToolCallEndEvent(tool_call_id="c1"), FINISH]
    events, repairs = await collect(Scripted(*script))
    check_run(events)
    assert repairs == [] and "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent)) == "  42"


async def test_repair_args_from_snapshot_fills_a_component_whose_first_fragment_was_lost() -> None:
    args = '{"_tambo_statusMessage":"s","city":"Rome","temperature":20}'
    call, snapshot = _lost_first_fragment("c1", "show_component_WeatherCard", args, cut=7)
    events, repairs = await collect(Scripted(START, *call, snapshot, FINISH), components=[CARD])
    check_run(events)
    assert repairs == ["args_from_snapshot", "args_in_snapshot"]
    assert not any(isinstance(e, ToolCallArgsEvent) for e in events)  # no broken fragment went out
    assert customs(events, COMPONENT_END)[0]["finalProps"] == {"city": "Rome", "temperature": 20}


async def test_repair_result_before_end() -> None:
    script = [START, ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="m1"),
              ToolCallArgsEvent(tool_call_id="c1", delta="{}"),
              ToolCallResultEvent(message_id="r", tool_call_id="c1", content="ok"), FINISH]
    events, repairs = await collect(Scripted(*script))
    check_run(events)
    assert repairs == ["result_before_end"]
    assert types(events) == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                             "TOOL_CALL_RESULT", "RUN_FINISHED"]


async def test_repair_open_at_finish_closes_everything_in_order() -> None:
    script = [START, StepStartedEvent(step_name="agent"), ReasoningStartEvent(message_id="r"),
              ReasoningMessageStartEvent(message_id="r"), ReasoningMessageContentEvent(message_id="r", delta="hm"),
              TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="x"),
              *component_call("c1", '{"city":"A","temperature":1}')[:-1], FINISH]
    events, repairs = await collect(Scripted(*script), components=[CARD])
    check_run(events)
    assert repairs == ["open_at_finish"]
    tail = types(events)[-8:]
    assert tail == ["TOOL_CALL_END", COMPONENT_END, "TEXT_MESSAGE_END", "REASONING_MESSAGE_END", "REASONING_END",
                    "STEP_FINISHED", "TOOL_CALL_RESULT", "RUN_FINISHED"]


# --------------------------------------------------------------------------- what cannot be repaired




async def test_args_for_a_call_never_started_end_the_run_after_closing_text() -> None:
    script = [START, TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="x"), ToolCallArgsEvent(tool_call_id="zz", delta="{}"),
              TextMessageContentEvent(message_id="m1", delta="never sent"), FINISH]
    events = await assert_run_error(script, "protocol_violation")
    assert types(events) == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                             "RUN_ERROR"]
    assert "zz" in events[-1].message


async def test_a_call_id_started_twice_ends_the_run() -> None:
    script = [START, *component_call("c1", "{}", name="f")[:1], *component_call("c1", "{}", name="f")[:1], FINISH]
    events = await assert_run_error(script, "protocol_violation")
    assert types(events) == ["RUN_STARTED", "TOOL_CALL_START", "RUN_ERROR"]


async def test_malformed_component_arguments_end_the_run_without_the_bad_fragment() -> None:
    script = [START, *component_call("c1", '{"city":', "}oops"), FINISH]
    events = await assert_run_error(script, "invalid_json", components=[CARD])
    assert "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent)) == "{"


async def test_truncated_arguments_at_the_end_end_the_run() -> None:
    script = [START, *component_call("c1", '{"city":"Os')[:-1], FINISH]
    events = await assert_run_error(script, "invalid_json", components=[CARD])
    assert not any(isinstance(e, ToolCallEndEvent) for e in events)  # never presented as complete


async def test_a_subagent_left_running_ends_the_run() -> None:
    from agui_engine.protocol.events import SubagentStartedEvent

    await assert_run_error([START, SubagentStartedEvent(subagent_run_id="s", name="helper"), FINISH],
                           "protocol_violation")


async def test_an_inner_run_error_passes_after_closing_text() -> None:
    script = [START, TextMessageStartEvent(message_id="m1", role="assistant"),
              TextMessageContentEvent(message_id="m1", delta="x"), RunErrorEvent(message="boom", code="x"),
              FINISH]
    events = await assert_run_error(script, "x")
    assert types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]


async def test_an_inner_agent_that_raises_ends_with_run_error_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    inner = Scripted(START, TextMessageContentEvent(message_id="m", delta="x"), raises=KeyError("lost"))
    with caplog.at_level(logging.ERROR, logger="agui_engine.loops.agent_loop"):
        events, _ = await collect(inner)
    check_run(events)
    assert types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[-1].code == AGENT_ERROR_CODE and "KeyError" in events[-1].message and "lost" in events[-1].message
    assert caplog.records and caplog.records[0].exc_info is not None  # with the traceback
    # an engine error keeps its own code
    events, _ = await collect(Scripted(START, raises=UpstreamError("provider down", code="upstream_x")))
    check_run(events)
    assert (events[-1].code, events[-1].message) == ("upstream_x", "provider down")
    # raising before any event: RUN_ERROR alone is a valid run
    events, _ = await collect(Scripted(raises=RuntimeError("early")))
    check_run(events)
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]


async def test_an_inner_agent_refusing_its_input_is_let_through() -> None:
    with pytest.raises(RemoteInputError, match="bad input"):
        await collect(Scripted(raises=RemoteInputError("bad input")))


async def test_closing_the_loop_closes_the_inner_agent() -> None:
    started = asyncio.Event()

    class Slow:
        closed = False

        async def run(self, input: RunAgentInput) -> AsyncIterator[Any]:
            try:
                yield START
                started.set()
                await asyncio.sleep(30)
                yield FINISH
            finally:
                Slow.closed = True

    stream = AgentLoop(Slow()).run(run_input("hi"))
    assert isinstance(await stream.__anext__(), RunStartedEvent)
    task = asyncio.ensure_future(stream.__anext__())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await stream.aclose()
    assert Slow.closed


async def test_run_agent_loop_is_the_loop() -> None:
    events = [e async for e in run_agent_loop(Scripted(START, *component_call("c1", '{"city":"A","temperature":1}'),
                                                       FINISH), run_input("hi"), components=[CARD])]
    check_run(events)
    assert customs(events, COMPONENT_END)


def test_every_repair_is_documented() -> None:
    import agui_engine.loops.agent_loop as module

    for repair in REPAIRS:
        assert repair in (module.__doc__ or "")


# --------------------------------------------------------------------------- one transformer for every producer

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
CARD_DOCS = st.fixed_dictionaries(
    {"city": st.none() | _TEXT, "temperature": st.none() | st.floats(-50, 50) | st.integers(-50, 50)},
    optional={"_tambo_statusMessage": _TEXT, "_tambo_completionStatusMessage": _TEXT, "note": st.none() | _TEXT,
              "extra": st.lists(st.integers(), max_size=3)},
)


def _split(text_: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text_) + 1) for c in cuts} | {0, len(text_)})
    return [text_[a:b] for a, b in zip(points, points[1:]) if b > a]


def _normalised(events: list[Any]) -> list[tuple[str, Any]]:
    """The tool call and component events, with ids made comparable across producers."""
    out: list[tuple[str, Any]] = []
    for e in events:
        if isinstance(e, CustomEvent):
            value = {k: v for k, v in e.value.items() if k not in ("componentId", "messageId")}
            out.append((e.name, value))
        elif isinstance(e, ToolCallArgsEvent):
            out.append(("TOOL_CALL_ARGS", e.delta))
        elif isinstance(e, (ToolCallStartEvent, ToolCallEndEvent)):
            out.append((e.type.value, e.tool_call_id))
    return out


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=CARD_DOCS, cuts=st.lists(st.integers(0, 300), max_size=12), spaced=st.booleans())
def test_any_split_gives_the_component_events_the_decision_loop_gives(doc: dict[str, Any], cuts: list[int],
                                                                        spaced: bool) -> None:
    from agui_engine.genui.components import strip_reserved_keys
    from agui_engine.loops.decision import run_decision_loop

    from ..scripted_llm import ScriptedLLM, call

    source = json.dumps(doc, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=False)
    fragments = _split(source, cuts)

    async def both() -> tuple[list[Any], list[Any]]:
        loop_events, _ = await collect(Scripted(START, *component_call("c1", *fragments), FINISH), components=[CARD])
        step: list[Any] = []
        async for item in run_decision_loop(ScriptedLLM(call(0, "c1", "show_component_WeatherCard", *fragments)),
                                            [UserMessage(id="u", content="x")], components=[CARD], message_id="m1"):
            step.extend(item.events)
        return loop_events, step

    loop_events, step_events = asyncio.run(both())
    check_run(loop_events)
    assert _normalised(loop_events) == _normalised(step_events)  # one transformer, the same events
    (end,) = customs(loop_events, COMPONENT_END)
    assert end["finalProps"] == CARD.unstrict_props(strip_reserved_keys(json.loads(source)))
    # and the same final props whatever the split
    whole, _ = asyncio.run(collect(Scripted(START, *component_call("c1", source), FINISH), components=[CARD]))
    assert customs(whole, COMPONENT_END)[0]["finalProps"] == end["finalProps"]


# --------------------------------------------------------------------------- capabilities


async def test_capabilities_are_the_inner_agents_plus_the_loops_own_tools() -> None:
    from agui_engine.genui.components import Component
    from agui_engine.genui.uispec import UISpecTool
    from agui_engine.protocol.agent import agent_capabilities
    from agui_engine.protocol.capabilities import (
        AgentCapabilities,
        StateCapabilities,
        ToolsCapabilities,
    )
    from agui_engine.protocol.events import Tool as AguiTool

    card = Component("Card", "A card.", {"type": "object", "properties": {"title": {"type": "string"}}})

    class Inner:
        async def capabilities(self) -> AgentCapabilities:
            return AgentCapabilities(
                state=StateCapabilities(snapshots=True),
                tools=ToolsCapabilities(supported=True, items=[AguiTool(name="search", description="s")]),
            )

        async def run(self, input: Any) -> Any:  # pragma: no cover - never run here
            yield None

    caps = await agent_capabilities(AgentLoop(Inner(), components=[card], ui_spec=UISpecTool()))
    assert caps.state == StateCapabilities(snapshots=True)
    assert caps.tools is not None and [t.name for t in caps.tools.items or ()] == ["search", "show_component_Card",
                                                                                   "render_ui"]
    # an inner agent that declares nothing: only the loop's tools
    async def bare(input: Any) -> Any:  # pragma: no cover - never run here
        yield None

    only = await agent_capabilities(AgentLoop(bare, components=[card]))
    assert only == AgentCapabilities(tools=ToolsCapabilities(supported=True, items=only.tools.items))  # type: ignore[union-attr]
    assert await agent_capabilities(AgentLoop(bare)) == AgentCapabilities()
