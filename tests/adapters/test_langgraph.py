"""The LangGraph adapter with the real langgraph: real ChatOpenAI / ChatAnthropic against the
replay server's recorded provider streams, and a scripted chat model for the shapes no
fixture has. Every run passes the engine's Verifier and ag-ui-validate."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, TypedDict

import msgspec
import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent

from agui_engine.adapters.langgraph import (
    CANCELLED_RESUME_KEY,
    LangGraphAgent,
    to_agui_messages,
    to_langchain_messages,
)
from agui_engine.adapters.replay import ReplayServer
from agui_engine.genui.component_stream import COMPONENT_HANDLERS
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.errors import RemoteInputError
from agui_engine.protocol.events import (
    AssistantMessage,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    Tool,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)

from .agent_runs import KEY, WEATHER_CARD, check, collect, of, texts
from .conftest import REQUEST_HISTORY
from .langgraph_graphs import (
    CARD_TOOL,
    ScriptedChatModel,
    agent_graph,
    call,
    finish,
    keyword_script,
    text,
)

CLIENT_TOOL = Tool(name="confirm", description="Ask the user to confirm.",
                   parameters={"type": "object", "properties": {"what": {"type": "string"}}})


def run_input(*messages: Any, run: str = "r1", thread: str = "t1", **kw: Any) -> RunAgentInput:
    return RunAgentInput(thread_id=thread, run_id=run, messages=list(messages), **kw)


def args_by_call(events: Sequence[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if isinstance(e, ToolCallStartEvent):
            out[e.tool_call_id] = ""
        elif isinstance(e, ToolCallArgsEvent):
            out[e.tool_call_id] += e.delta
    return out


def messages_of(events: Sequence[Any]) -> list[Any]:
    """The conversation a client builds from the events (the engine's Accumulator)."""
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    acc.apply_all(events)
    return list(acc.messages_as_structs())


# ----------------------------------------------------------------------------- real chat models over the replay server


def openai_model(server: ReplayServer, *fixtures: str, provider: str = "openai_chat", **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", api_key=KEY, base_url=server.base_url(provider, *fixtures), max_retries=0,
                      stream_usage=True, streaming=True, **kw)


def anthropic_model(server: ReplayServer, *fixtures: str) -> ChatAnthropic:
    return ChatAnthropic(model="claude-sonnet-4-5", api_key=KEY, base_url=server.base_url("anthropic", *fixtures),
                         max_retries=0, streaming=True)


async def test_react_agent_with_a_server_tool_over_chat_openai() -> None:
    async with ReplayServer() as server:
        graph = create_react_agent(openai_model(server, "tool_calls", "text"), [CARD_TOOL])
        events = await collect(LangGraphAgent(graph), run_input(UserMessage(id="u1", content="Weather in Paris and Oslo?")))
    assert len(server.requests) == 2
    args = args_by_call(events)
    assert {k: msgspec.json.decode(v)["city"] for k, v in args.items()} == {"call_Q1aXv7": "Paris", "call_R2bYw8": "Oslo"}
    assert len(of(events, ToolCallArgsEvent)) > 2  # streamed, not whole
    assert [r.tool_call_id for r in of(events, ToolCallResultEvent)] == ["call_Q1aXv7", "call_R2bYw8"]
    assert texts(events)  # the second model call's answer
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is None
    assert finished.usage and finished.usage[0].input_tokens and finished.usage[0].output_tokens
    assert [s.step_name for s in of(events, StepStartedEvent)] == ["agent", "tools", "agent"]


async def test_langchain_create_agent_runs_parallel_tools_as_one_step() -> None:
    """LangChain 1.x's prebuilt agent (model node "model"; each tool call its own "tools" task
    through Send): the two parallel tasks are one step, both results arrive."""
    async with ReplayServer() as server:
        graph = create_agent(openai_model(server, "tool_calls", "text"), [CARD_TOOL])
        events = await collect(LangGraphAgent(graph), run_input(UserMessage(id="u1", content="Weather?")))
    assert [s.step_name for s in of(events, StepStartedEvent)] == ["model", "tools", "model"]
    assert [r.tool_call_id for r in of(events, ToolCallResultEvent)] == ["call_Q1aXv7", "call_R2bYw8"]
    assert texts(events)


async def test_anthropic_thinking_signature_and_redacted_thinking_reach_the_client() -> None:
    async with ReplayServer() as server:
        graph = create_react_agent(anthropic_model(server, "reasoning", "text"), [CARD_TOOL])
        events = await collect(LangGraphAgent(graph), run_input(UserMessage(id="u1", content="Weather?")))
    sealed = of(events, ReasoningEncryptedValueEvent)
    assert [e.encrypted_value[:12] for e in sealed] == ["EqQBCgIYAhIM", "EmwKAhgBEgy3"]
    assert "".join(e.delta for e in of(events, ReasoningMessageContentEvent)).startswith("The user wants weather")
    # the client's conversation carries the signature back: a stateless next turn sends it to Anthropic
    snapshot = of(events, MessagesSnapshotEvent)
    history = snapshot[-1].messages if snapshot else messages_of(events)
    lc = to_langchain_messages(history)
    blocks = [b for m in lc for b in (m.content if isinstance(m.content, list) else []) if isinstance(b, dict)]
    assert any(b.get("signature", "").startswith("EqQBCgIYAhIM") for b in blocks)
    assert any(b.get("type") == "redacted_thinking" for b in blocks)


async def test_a_whole_tool_call_in_the_finish_chunk_streams_its_arguments_and_the_text() -> None:
    async with ReplayServer() as server:
        graph = create_react_agent(openai_model(server, "atomic_tool_call", "text", provider="openai_compatible"),
                                   [CARD_TOOL])
        events = await collect(LangGraphAgent(graph), run_input(UserMessage(id="u1", content="Rome?")))
    assert msgspec.json.decode(args_by_call(events)["call_x9"]) == {"city": "Rome", "tempC": 24}
    assert texts(events).startswith("Here you go. One card:")


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses", "anthropic"])
async def test_a_provider_error_mid_stream_is_a_run_error_after_closing_the_text(provider: str) -> None:
    async with ReplayServer() as server:
        if provider == "anthropic":
            model: Any = anthropic_model(server, "error_midstream")
        else:
            model = openai_model(server, "error_midstream", provider=provider,
                                 use_responses_api=provider == "openai_responses")
        events = await collect(LangGraphAgent(create_react_agent(model, [CARD_TOOL])), run_input(
            UserMessage(id="u1", content="Hi")))
    assert isinstance(events[-1], RunErrorEvent) and events[-1].code == "graph_error"
    assert "'agent'" in events[-1].message and KEY not in events[-1].message


async def test_closing_the_iterator_cancels_the_model_stream_promptly() -> None:
    async with ReplayServer() as server:
        # the text fixture, held after its second chunk: the model stream is open and waiting
        graph = create_react_agent(ChatOpenAI(model="gpt-4o", api_key=KEY, max_retries=0, streaming=True,
                                              base_url=server.base_url("openai_chat", "text", hold_after=700)),
                                   [CARD_TOOL])
        stream = LangGraphAgent(graph).run(run_input(UserMessage(id="u1", content="Hi")))
        seen: list[Any] = []
        async for event in stream:
            seen.append(event)
            if isinstance(event, TextMessageContentEvent):
                break
        await asyncio.wait_for(stream.aclose(), 5)
        assert await server.wait_for_disconnect(5), "the model's HTTP stream was not closed"
    assert of(seen, TextMessageStartEvent)


# ----------------------------------------------------------------------------- scripted edge cases


async def test_a_client_tool_ends_the_run_pending_and_the_next_run_continues() -> None:
    model = ScriptedChatModel(scripts=[
        [*text("Let me ask.", finish=False), *call("confirm", "call_c1", '{"what": "pl', 'an"}'), *finish()],
        text("Thanks, ", "confirmed."),
    ])
    for checkpointer in (None, InMemorySaver()):
        agent = LangGraphAgent(agent_graph(model, checkpointer=checkpointer))
        first = await collect(agent, run_input(UserMessage(id="u1", content="Go"), tools=[CLIENT_TOOL]))
        finished = first[-1]
        assert isinstance(finished, RunFinishedEvent)
        assert finished.outcome == RunFinishedSuccessOutcome(pending_tool_call_ids=["call_c1"])
        assert args_by_call(first) == {"call_c1": '{"what": "plan"}'}
        history = [UserMessage(id="u1", content="Go"), *messages_of(first)]
        assert isinstance(history[-1], AssistantMessage) and history[-1].tool_calls
        second = await collect(agent, run_input(
            *history, ToolMessage(id="tr1", tool_call_id="call_c1", content="yes"), run="r2", tools=[CLIENT_TOOL]))
        assert texts(second) == "Thanks, confirmed."
        assert isinstance(second[-1], RunFinishedEvent) and second[-1].outcome is None


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_a_component_call_through_the_agent_loop_and_the_next_turn(checkpointed: bool) -> None:
    """The graph calls show_component_WeatherCard (offered by AgentLoop as a client tool): the
    client gets the component events, the call is answered, and the next turn continues."""
    graph = agent_graph(ScriptedChatModel(choose=keyword_script), checkpointer=InMemorySaver() if checkpointed else None)
    agent = AgentLoop(LangGraphAgent(graph), components=[WEATHER_CARD])
    user = UserMessage(id="u1", content="show me a card")
    first = [e async for e in agent.run(run_input(user))]
    check(first)
    custom = [e for e in of(first, CustomEvent) if e.name.startswith("tambo.component.")]
    assert [e.name for e in custom][0] == "tambo.component.start" and custom[-1].name == "tambo.component.end"
    assert custom[-1].value["finalProps"] == {"city": "Oslo", "tempC": -3.5}
    assert any(e.name == "tambo.component.props_delta" for e in custom)
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is None  # answered, nothing pending
    (result,) = of(first, ToolCallResultEvent)
    assert "WeatherCard is shown" in str(result.content)
    history = [user, *messages_of(first), UserMessage(id="u2", content="and now?")]
    second = [e async for e in agent.run(run_input(*history, run="r2"))]
    check(second)
    assert texts(second).startswith("Earlier: Component WeatherCard is shown")


async def test_two_parallel_tool_calls_interleaved_keep_their_own_arguments() -> None:
    interleaved = [
        *call("get_weather", "call_A", index=0), *call("get_weather", "call_B", index=1),
        {"content": "", "tool_call_chunks": [{"name": None, "args": '{"city": "Pa', "id": None, "index": 0}]},
        {"content": "", "tool_call_chunks": [{"name": None, "args": '{"city": "Os', "id": None, "index": 1}]},
        {"content": "", "tool_call_chunks": [{"name": None, "args": 'ris"}', "id": None, "index": 0},
                                             {"name": None, "args": 'lo"}', "id": None, "index": 1}]},
        *finish(),
    ]
    model = ScriptedChatModel(scripts=[interleaved, text("Both sunny.")])
    events = await collect(LangGraphAgent(agent_graph(model)), run_input(UserMessage(id="u1", content="Paris, Oslo")))
    assert args_by_call(events) == {"call_A": '{"city": "Paris"}', "call_B": '{"city": "Oslo"}'}
    assert sorted(r.content for r in of(events, ToolCallResultEvent)) == ["Sunny, 21 C in Oslo", "Sunny, 21 C in Paris"]


async def test_name_and_arguments_in_one_chunk_and_a_whole_message() -> None:
    atomic = [{"content": "", "tool_call_chunks": [
        {"name": "get_weather", "args": '{"city": "Rome"}', "id": "call_R", "index": 0}],
        "response_metadata": {"finish_reason": "tool_calls"}}]
    model = ScriptedChatModel(scripts=[atomic, text("Sunny.")])
    events = await collect(LangGraphAgent(agent_graph(model)), run_input(UserMessage(id="u1", content="Rome")))
    assert args_by_call(events) == {"call_R": '{"city": "Rome"}'}


async def test_state_in_snapshot_then_deltas_and_custom_events_in_place() -> None:
    model = ScriptedChatModel(scripts=[[*call("get_weather", "call_A", '{"city": "Paris"}'), *finish()], text("Ok.")])
    events = await collect(LangGraphAgent(agent_graph(model)), run_input(
        UserMessage(id="u1", content="Paris"), state={"turns": 5, "note": "kept"}))
    snapshots, deltas = of(events, StateSnapshotEvent), of(events, StateDeltaEvent)
    assert [s.snapshot for s in snapshots] == [{"turns": 5}]  # a key the state does not declare is dropped
    assert [[msgspec.to_builtins(op) for op in d.delta] for d in deltas] == [
        [{"op": "replace", "path": "/turns", "value": 6}], [{"op": "replace", "path": "/turns", "value": 7}]]
    assert events.index(snapshots[0]) < events.index(deltas[0])
    progress = [e for e in of(events, CustomEvent) if e.name == "progress"]
    assert [p.value for p in progress] == [{"turn": 6}, {"turn": 7}]
    # dispatched inside the agent node, before its model streamed
    assert events.index(progress[0]) < events.index(of(events, ToolCallStartEvent)[0])


async def test_an_interrupt_ends_the_run_with_its_outcome_and_the_resume_continues() -> None:
    model = ScriptedChatModel(scripts=[text("Approved, going ahead.")])
    agent = LangGraphAgent(agent_graph(model, checkpointer=InMemorySaver(), approval=True))
    user = UserMessage(id="u1", content="please approve")
    first = await collect(agent, run_input(user))
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent) and isinstance(finished.outcome, RunFinishedInterruptOutcome)
    (intr,) = finished.outcome.interrupts
    assert intr.reason == "approval" and intr.message == "Approve the plan?"
    assert [e.value for e in of(first, CustomEvent) if e.name == "approval"] == ["asked"]
    with pytest.raises(RemoteInputError, match="not a pending interrupt"):
        await anext(agent.run(run_input(user, run="r2", resume=[ResumeEntry(interrupt_id="nope", status="resolved")])))
    second = await collect(agent, run_input(user, run="r2", resume=[
        ResumeEntry(interrupt_id=intr.id, status="resolved", payload={"ok": True})]))
    assert texts(second) == "Approved, going ahead."
    assert isinstance(second[-1], RunFinishedEvent) and second[-1].outcome is None
    state = await agent.graph.aget_state({"configurable": {"thread_id": "t1"}})
    assert state.values["approved"] == {"ok": True}


async def test_a_cancelled_resume_entry_resumes_with_the_cancel_marker() -> None:
    agent = LangGraphAgent(agent_graph(ScriptedChatModel(scripts=[text("Ok.")]), checkpointer=InMemorySaver(),
                                       approval=True))
    first = await collect(agent, run_input(UserMessage(id="u1", content="approve")))
    intr = first[-1].outcome.interrupts[0]  # type: ignore[union-attr]
    await collect(agent, run_input(run="r2", resume=[ResumeEntry(interrupt_id=intr.id, status="cancelled")]))
    state = await agent.graph.aget_state({"configurable": {"thread_id": "t1"}})
    assert state.values["approved"][CANCELLED_RESUME_KEY] is True


async def test_a_subgraph_streams_its_nodes_and_messages() -> None:
    inner = agent_graph(ScriptedChatModel(scripts=[text("From ", "inside.")]))

    class Outer(TypedDict):
        messages: list[Any]

    outer = StateGraph(inner.builder.state_schema)
    outer.add_node("research", inner)
    outer.add_edge(START, "research")
    outer.add_edge("research", END)
    events = await collect(LangGraphAgent(outer.compile()), run_input(UserMessage(id="u1", content="Hi")))
    assert texts(events) == "From inside."
    assert [s.step_name for s in of(events, StepStartedEvent)] == ["research", "research/agent"]


async def test_a_node_that_raises_is_a_run_error_after_everything_open_is_closed() -> None:
    class Boom(RuntimeError):
        pass

    def exploding(messages: Any) -> Any:
        raise Boom("database is down")

    model = ScriptedChatModel(scripts=[text("Half an ans", finish=False)])

    async def agent_node(state: dict[str, Any]) -> dict[str, Any]:
        async for _ in model.astream(state["messages"]):
            pass
        exploding(state)
        return {}

    graph = StateGraph(inner_state())
    graph.add_node("agent", agent_node)
    graph.add_edge(START, "agent")
    events = await collect(LangGraphAgent(graph.compile()), run_input(UserMessage(id="u1", content="Hi")))
    error = events[-1]
    assert isinstance(error, RunErrorEvent) and error.code == "graph_error"
    assert error.message == "node 'agent' raised Boom: database is down"
    assert of(events, TextMessageEndEvent), "the open text was closed before RUN_ERROR"


def inner_state() -> Any:
    from .langgraph_graphs import State

    return State


async def test_concurrent_runs_of_one_agent_stay_apart() -> None:
    model = ScriptedChatModel(choose=lambda messages: text("Echo: ", str(messages[-1].content)))
    agent = LangGraphAgent(agent_graph(model, checkpointer=InMemorySaver()))
    runs = await asyncio.gather(*(collect(agent, run_input(UserMessage(id=f"u{i}", content=f"n{i}"), thread=f"t{i}",
                                                           run=f"r{i}")) for i in range(5)))
    assert [texts(events) for events in runs] == [f"Echo: n{i}" for i in range(5)]


async def test_a_checkpointed_thread_gets_only_new_messages_and_a_snapshot_when_lists_differ() -> None:
    model = ScriptedChatModel(choose=lambda messages: text(f"{len(messages)} messages"))
    agent = LangGraphAgent(agent_graph(model, checkpointer=InMemorySaver()))
    user = UserMessage(id="u1", content="one")
    first = await collect(agent, run_input(user))
    history = [user, *messages_of(first)]
    second = await collect(agent, run_input(*history, UserMessage(id="u2", content="two"), run="r2"))
    assert texts(second) == "3 messages"  # u1, the answer, u2: nothing doubled
    assert not of(second, MessagesSnapshotEvent)  # the client's list is the graph's
    # a client that sends only its new message gets the whole thread back
    third = await collect(agent, run_input(UserMessage(id="u3", content="three"), run="r3"))
    (snapshot,) = of(third, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages][:3] == ["u1", history[1].id, "u2"]


async def test_bad_messages_and_state_are_refused_before_the_run_starts() -> None:
    agent = LangGraphAgent(agent_graph(ScriptedChatModel(scripts=[text("x")])))
    with pytest.raises(RemoteInputError, match="state"):
        await anext(agent.run(run_input(UserMessage(id="u1", content="x"), state=[1, 2])))
    with pytest.raises(RemoteInputError, match="checkpointer"):
        await anext(agent.run(run_input(UserMessage(id="u1", content="x"), resume=[
            ResumeEntry(interrupt_id="i", status="resolved")])))


def test_messages_convert_both_ways() -> None:
    lc = to_langchain_messages(REQUEST_HISTORY)
    kinds = [type(m).__name__ for m in lc]
    assert kinds == ["SystemMessage", "SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage",
                     "HumanMessage"]
    assert lc[1].additional_kwargs == {"__openai_role__": "developer"}
    assert lc[2].content[1] == {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    # an OpenAI Responses reasoning item (its id says so) goes back in its own shape
    assert lc[3].content[0] == {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}],
                                "encrypted_content": "c2lnbmF0dXJl"}
    assert lc[3].tool_calls[0]["args"] == {"q": "cat"}
    signed = ReasoningMessage(id="r9", content="hm", encrypted_value="sig")
    assert to_langchain_messages([signed, AssistantMessage(id="a9", content="x")])[0].content == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"}, {"type": "text", "text": "x"}]
    assert lc[5].status == "error"
    back = to_agui_messages(lc)
    assert [type(m).__name__ for m in back] == ["SystemMessage", "DeveloperMessage", "UserMessage", "ReasoningMessage",
                                                "AssistantMessage", "ToolMessage", "ToolMessage", "UserMessage"]
    assert back[3].encrypted_value == "c2lnbmF0dXJl"  # type: ignore[union-attr]
    assert back[4].tool_calls[0].function.arguments == '{"q":"cat"}'  # type: ignore[union-attr]
    # a truncated argument text (a run stopped mid-stream) does not break the thread
    broken = AssistantMessage(id="a", tool_calls=[ToolCall(id="c", function=FunctionCall(name="f", arguments='{"q": "ca'))])
    (message,) = to_langchain_messages([broken])
    assert message.tool_calls == [] and message.invalid_tool_calls[0]["args"] == '{"q": "ca'
    assert isinstance(to_langchain_messages([UserMessage(id="u", content="x")])[0], HumanMessage)


def test_the_package_does_not_import_langgraph_and_the_adapter_names_the_extra() -> None:
    code = (
        "import sys\n"
        "import agui_engine, agui_engine.adapters, agui_engine.transports, agui_engine.adapters.langgraph as lg\n"
        "assert not any(m.split('.')[0] in ('langgraph', 'langchain_core') for m in sys.modules), 'imported'\n"
        "sys.modules['langgraph'] = None\n"
        "try:\n"
        "    lg.LangGraphAgent(object())\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("UsageError ") and "pip install 'agui-engine[langgraph]'" in out.stdout
    assert out.stdout.count("\n") == 1


async def test_a_render_ui_call_through_the_agent_loop() -> None:
    """A real LangGraph graph whose model calls render_ui (offered by AgentLoop as a client tool, its
    component an enum of the allowlist): the client gets the tree node by node, the call is answered."""
    from agui_engine.genui.component_stream import component_blocks
    from agui_engine.genui.tree import tree_document, validate_spec
    from agui_engine.genui.uispec import UI_SPEC_COMPONENT, UI_SPEC_TOOL, UISpecTool

    spec = {"root": [{"component": "Card", "props": {"title": "Oslo"}, "children": [
        "Cold today.", {"component": "Stat", "props": {"label": "tempC", "value": "-3.5"}, "key": "t"}], "key": "c"}]}
    text_ = json.dumps(spec)
    model = ScriptedChatModel(scripts=[[*call(UI_SPEC_TOOL, "call_U", *[text_[i:i + 6] for i in range(0, len(text_), 6)]),
                                        *finish()], text("Shown.")])
    agent = AgentLoop(LangGraphAgent(agent_graph(model)), ui_spec=UISpecTool(["Card", "Stat"]))
    events = await collect(agent, run_input(UserMessage(id="u1", content="a card for Oslo")))
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    for event in events:
        acc.apply(event)
    assert acc.problems == []
    (block,) = component_blocks(acc)
    assert block["name"] == UI_SPEC_COMPONENT and block["props"] == tree_document(validate_spec(spec, ["Card", "Stat"]))
    deltas = [e for e in of(events, CustomEvent) if e.name == "tambo.component.props_delta"]
    assert len(deltas) > 5  # node by node, not one tree at the end
    (result,) = of(events, ToolCallResultEvent)
    assert result.tool_call_id == "call_U" and result.content == "The UI is shown on the user's screen."
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None


# --------------------------------------------------------------------------- capabilities


async def test_capabilities_say_state_events_and_interrupts_only_with_a_checkpointer() -> None:
    from ag_ui.core.capabilities import AgentCapabilities as SdkCapabilities
    from langgraph.store.memory import InMemoryStore

    from agui_engine.protocol.agent import agent_capabilities
    from agui_engine.protocol.capabilities import HumanInTheLoopCapabilities, StateCapabilities, encode_capabilities

    model = ScriptedChatModel(choose=keyword_script)
    plain = await agent_capabilities(LangGraphAgent(agent_graph(model)))
    assert plain.state == StateCapabilities(snapshots=True, deltas=True, memory=False, persistent_state=False)
    assert plain.human_in_the_loop == HumanInTheLoopCapabilities(supported=False, interrupts=False)
    assert plain.identity is not None and plain.identity.type == "langgraph" and plain.identity.name == "LangGraph"
    assert plain.tools is not None and plain.tools.client_provided is True  # the state declares `tools`
    SdkCapabilities.model_validate_json(encode_capabilities(plain))

    saved = await agent_capabilities(LangGraphAgent(agent_graph(model, checkpointer=InMemorySaver(), approval=True)))
    assert saved.state is not None and saved.state.persistent_state is True
    assert saved.human_in_the_loop == HumanInTheLoopCapabilities(supported=True, interrupts=True)

    graph = StateGraph(TypedDict("Bare", {"n": int}))  # type: ignore[operator]
    graph.add_node("a", lambda s: {"n": 1})
    graph.add_edge(START, "a")
    bare = await agent_capabilities(LangGraphAgent(graph.compile(store=InMemoryStore(), name="counter")))
    assert bare.tools is None and bare.identity is not None and bare.identity.name == "counter"
    assert bare.state is not None and bare.state.memory is True
