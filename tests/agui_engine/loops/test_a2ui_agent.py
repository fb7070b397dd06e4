"""A2UI in the loops: LLMAgent(a2ui=), AgentLoop(a2ui=) and A2UIAgent offer render_a2ui with the guide and
the catalog, draw the model's (or an inner agent's) calls as a2ui-surface activities, answer the call, refuse
a bad surface with a tool result the model reads, and turn a user action into a log_a2ui_event turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonpatch
import msgspec
import pytest

from agui_engine import AgentLoop, LLMAgent, RunAgentInput, UsageError, verify_events
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from agui_engine.genui.a2ui import A2UI_SCHEMA_CONTEXT_DESCRIPTION, A2UIActionError, A2UICatalog
from agui_engine.loops.a2ui_agent import A2UIAgent
from agui_engine.protocol.codec import encode_event

from ..genui.a2ui_cases import FORM, INVALID

INPUT = RunAgentInput(thread_id="t", run_id="r", messages=[])


def collect(agent: Any, run_input: RunAgentInput = INPUT) -> list[dict[str, Any]]:
    async def go() -> list[Any]:
        return [e async for e in agent.run(run_input)]
    events = asyncio.run(go())
    verify_events(events)
    return [json.loads(encode_event(e)) for e in events]


def surfaces(events: list[dict[str, Any]]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for e in events:
        if e["type"] == "ACTIVITY_SNAPSHOT":
            state[e["messageId"]] = e["content"]
        elif e["type"] == "ACTIVITY_DELTA":
            state[e["messageId"]] = jsonpatch.apply_patch(state[e["messageId"]], e["patch"])
    return state


def test_llm_agent_draws_the_models_surface_and_answers_the_call() -> None:
    seen: list[Any] = []

    def reply(messages: Any) -> str:
        seen.append(messages)
        return "done"

    model = ScriptedModel([ScriptedTurn(text="Here is the form.", tool_calls=(ScriptedCall("render_a2ui", FORM),)),
                           reply])
    events = collect(LLMAgent(model, a2ui=True))
    [(mid, content)] = surfaces(events).items()
    assert mid.startswith("a2ui-surface-")
    ops = content["a2ui_operations"]
    assert ops[1]["updateComponents"]["components"] == FORM["components"]
    assert ops[2]["updateDataModel"]["value"] == FORM["data"]
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["content"] for r in results] == ['{"status":"rendered"}']
    assert events[-1]["type"] == "RUN_FINISHED"


def test_the_model_is_offered_the_tool_the_guide_and_the_catalog() -> None:
    got: list[RunAgentInput] = []

    async def agent(run_input: RunAgentInput) -> Any:
        got.append(run_input)
        from agui_engine import RunFinishedEvent, RunStartedEvent
        yield RunStartedEvent(thread_id="t", run_id="r")
        yield RunFinishedEvent(thread_id="t", run_id="r")

    collect(A2UIAgent(agent), INPUT)
    [seen] = got
    assert [t.name for t in seen.tools] == ["render_a2ui"]
    descriptions = [c.description for c in seen.context]
    assert descriptions[0] == A2UI_SCHEMA_CONTEXT_DESCRIPTION
    assert json.loads(seen.context[0].value)["catalogId"] == A2UICatalog.basic().catalog_id
    assert descriptions[1].startswith("A2UI render tool usage guide")


def test_agent_loop_refuses_an_inner_agents_bad_surface_to_the_model() -> None:
    from agui_engine import (
        RunFinishedEvent,
        RunStartedEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallStartEvent,
    )

    async def agent(run_input: RunAgentInput) -> Any:
        yield RunStartedEvent(thread_id="t", run_id="r")
        yield ToolCallStartEvent(tool_call_id="c1", tool_call_name="render_a2ui")
        text = json.dumps(INVALID["dangling_child"])
        for i in range(0, len(text), 7):
            yield ToolCallArgsEvent(tool_call_id="c1", delta=text[i:i + 7])
        yield ToolCallEndEvent(tool_call_id="c1")
        yield RunFinishedEvent(thread_id="t", run_id="r")

    events = collect(AgentLoop(agent, a2ui=True))
    assert surfaces(events)["a2ui-surface-c1"]["status"] == "retrying"
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "[unresolved_child] components[0].children[1]" in result["content"]
    assert '"root"' in result["content"] and "/components/0/children/1" in result["content"]


def test_a_user_action_reaches_the_model_as_a_log_event_turn() -> None:
    seen: list[Any] = []

    def reply(messages: Any) -> str:
        seen.extend(messages)
        return "Booked."

    run_input = msgspec.structs.replace(INPUT, forwarded_props={"a2uiAction": {"userAction": {
        "name": "book", "surfaceId": "booking-form", "context": {"name": "Ada"}}}})
    # the scripted model counts assistant messages for its step: the injected call is one
    collect(LLMAgent(ScriptedModel(["(not reached)", reply]), a2ui=True), run_input)
    text = json.dumps(msgspec.to_builtins(seen))
    assert "log_a2ui_event" in text and 'User performed action \\"book\\" on surface \\"booking-form\\"' in text


def test_bad_options_and_bad_actions_are_typed_errors() -> None:
    with pytest.raises(UsageError, match="a2ui must be"):
        LLMAgent(ScriptedModel(["x"]), a2ui="basic")  # type: ignore[arg-type]
    bad = msgspec.structs.replace(INPUT, forwarded_props={"a2uiAction": {"userAction": "click"}})
    with pytest.raises(A2UIActionError):
        collect(LLMAgent(ScriptedModel(["x"]), a2ui=True), bad)


def test_a_thread_shows_its_surfaces_and_sends_an_action_back() -> None:
    from agui_engine import Thread

    seen: list[str] = []

    def reply(messages: Any) -> str:
        seen.append(json.dumps(msgspec.to_builtins(messages)))
        return "Booked for Ada."

    # the model's steps count its assistant messages: the render call, then (after the action) the call the
    # action becomes, so the reply is the third step
    model = ScriptedModel([ScriptedTurn(tool_calls=(ScriptedCall("render_a2ui", FORM),)), "(not reached)", reply])
    thread = Thread(LLMAgent(model, a2ui=True), thread_id="t")

    async def go() -> None:
        await thread.send("book a table")
        surfaces = thread.a2ui_surfaces
        assert list(surfaces) == ["booking-form"]
        assert surfaces["booking-form"]["operations"][1]["updateComponents"]["components"] == FORM["components"]
        with pytest.raises(A2UIActionError, match="does not show"):
            await thread.a2ui_action("book", "no-such-surface")
        await thread.a2ui_action("book", "booking-form", source_component_id="submit", context={"name": "Ada"})

    asyncio.run(go())
    assert seen and 'User performed action \\"book\\" on surface \\"booking-form\\" (component: submit)' in seen[-1]
    assert thread.messages[-1]["content"] == "Booked for Ada."


def test_capabilities_list_render_a2ui() -> None:
    async def agent(run_input: RunAgentInput) -> Any:
        yield None  # pragma: no cover - never run

    async def go() -> tuple[Any, Any]:
        return (await LLMAgent(ScriptedModel(["x"]), a2ui=True).capabilities(),
                await AgentLoop(agent, a2ui=True).capabilities())

    llm_caps, loop_caps = asyncio.run(go())
    assert [t.name for t in llm_caps.tools.items] == ["render_a2ui"]
    assert [t.name for t in loop_caps.tools.items] == ["render_a2ui"]


@pytest.mark.parametrize("sign", ["tool", "flag"])
def test_a_run_that_a_client_middleware_applies_a2ui_to_passes_through(sign: str, caplog: Any) -> None:
    """Issue 31: the client's own render_a2ui in the tools (or the middleware's injectA2UITool flag): the agent
    gets the input as it came (no second render_a2ui, no guide), its events come out untouched, and the log
    says so once however many runs show it."""
    from agui_engine.genui.a2ui import a2ui_client_applies
    from agui_engine.protocol.events import RunFinishedEvent, RunStartedEvent, Tool

    seen: list[RunAgentInput] = []

    async def inner(run_input: RunAgentInput) -> Any:
        seen.append(run_input)
        yield RunStartedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)
        yield RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)

    name = f"render_a2ui_{sign}"  # a tool name of this test's own: nothing logged for it before in this process
    client_tool = Tool(name=name, description="the middleware's", parameters={"type": "object"})
    run_input = msgspec.structs.replace(INPUT, tools=[client_tool]) if sign == "tool" else msgspec.structs.replace(
        INPUT, forwarded_props={"injectA2UITool": True})
    assert a2ui_client_applies(run_input, name) and not a2ui_client_applies(INPUT, name)
    with caplog.at_level("INFO", logger="agui_engine.loops.a2ui_agent"):
        for _ in range(2):
            events = collect(A2UIAgent(inner, tool_name=name), run_input)
            assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_FINISHED"]
    assert [s is run_input for s in seen] == [True, True]  # as it came: nothing added, nothing replaced
    said = [r for r in caplog.records if "client-side A2UI middleware is active" in r.getMessage()]
    assert len(said) == 1
