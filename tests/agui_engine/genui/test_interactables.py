"""Interactable updates compose: each merges into the instance's current props, across updates and runs.

"Add eggs, then make it pink": the second update's ``finalProps`` keeps the
eggs, equals what its deltas build on the client, and the model's next system
prompt shows the current props.
"""

from __future__ import annotations

import json
from typing import Any

from agui_engine.genui.component_stream import COMPONENT_END, COMPONENT_HANDLERS, find_component, seed_interactables
from agui_engine.genui.interactables import interactables_from_context
from agui_engine.llm import Finish
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.events import Context, CustomEvent, RunAgentInput, UserMessage
from tests.helpers import collect

from ..run_checks import check_run
from ..scripted_llm import ScriptedLLM, call, counter_ids, text

LIST = {"id": "List-1", "componentName": "ShoppingList", "props": {"items": ["milk"], "color": "white"}}
EGGS = '{"componentId":"List-1","newProps":{"items":["milk","eggs"]}}'
PINK = '{"componentId":"List-1","newProps":{"color":"pink"}}'
COMPOSED = {"items": ["milk", "eggs"], "color": "pink"}


def run_input(props: dict[str, Any], run_id: str = "r1") -> RunAgentInput:
    value = json.dumps({"components": [{**LIST, "props": props}]})
    return RunAgentInput(thread_id="t", run_id=run_id, messages=[UserMessage(id=f"u-{run_id}", content="go")],
                         context=[Context(description="interactables", value=value)])


def final_props(events: list[Any]) -> list[dict[str, Any]]:
    return [e.value["finalProps"] for e in events if isinstance(e, CustomEvent) and e.name == COMPONENT_END]


def client_for(props: dict[str, Any]) -> Accumulator:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    seed_interactables(acc, interactables_from_context(run_input(props).context))
    return acc


def client_props(acc: Accumulator) -> dict[str, Any]:
    block = find_component(acc, "List-1")
    assert block is not None
    props: dict[str, Any] = block["props"]
    return props


async def test_updates_in_successive_steps_merge_and_the_prompt_shows_current_props() -> None:
    llm = ScriptedLLM([*call(0, "c1", "update_component_props_List-1", EGGS), Finish(reason="tool_calls")],
                      [*call(0, "c2", "update_component_props_List-1", PINK), Finish(reason="tool_calls")],
                      text("Done."))
    events = await collect(LLMAgent(llm, id_factory=counter_ids()), run_input(LIST["props"]))
    assert final_props(events) == [{"items": ["milk", "eggs"], "color": "white"}, COMPOSED]
    # the second and third model calls see what the updates built
    assert '"eggs"' in llm.calls[1].messages[0].content and '"white"' in llm.calls[1].messages[0].content
    assert '"eggs"' in llm.calls[2].messages[0].content and '"pink"' in llm.calls[2].messages[0].content
    # finalProps equals the props the deltas build on the client
    acc = client_for(LIST["props"])
    check_run(events, acc)
    assert client_props(acc) == COMPOSED


async def test_two_updates_in_one_step_merge() -> None:
    llm = ScriptedLLM([*call(0, "c1", "update_component_props_List-1", EGGS),
                       *call(1, "c2", "update_component_props_List-1", PINK), Finish(reason="tool_calls")],
                      text("Done."))
    events = await collect(LLMAgent(llm, id_factory=counter_ids()), run_input(LIST["props"]))
    assert final_props(events)[-1] == COMPOSED
    assert '"eggs"' in llm.calls[1].messages[0].content and '"pink"' in llm.calls[1].messages[0].content
    acc = client_for(LIST["props"])
    check_run(events, acc)
    assert client_props(acc) == COMPOSED


async def test_updates_in_successive_runs_merge_through_the_clients_current_props() -> None:
    acc = client_for(LIST["props"])
    first = ScriptedLLM([*call(0, "c1", "update_component_props_List-1", EGGS), Finish(reason="tool_calls")],
                        text("Added."))
    events = await collect(LLMAgent(first, id_factory=counter_ids()), run_input(LIST["props"]))
    check_run(events, acc)
    # the next run's context carries the instance as the client now has it
    second = ScriptedLLM([*call(0, "c2", "update_component_props_List-1", PINK), Finish(reason="tool_calls")],
                         text("Pink."))
    events = await collect(LLMAgent(second, id_factory=counter_ids()), run_input(client_props(acc), "r2"))
    assert '"eggs"' in second.calls[0].messages[0].content
    assert final_props(events) == [COMPOSED]
    check_run(events, acc)
    assert client_props(acc) == COMPOSED
