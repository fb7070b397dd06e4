"""Graphs and chat models the LangGraph adapter tests, its benchmark and the served-graph
test share: real langgraph graphs, real LangChain chat models (``ChatOpenAI`` /
``ChatAnthropic`` pointed at the replay server) and a scripted chat model for the shapes no
recorded fixture has.

``served_graph`` (module level) is what ``agui-engine serve --agent
langgraph:tests.adapters.langgraph_graphs:served_graph`` serves: a keyword model (the last
user message decides what it does) behind a graph with a server tool, the client's tools
bound, and an approval node that calls ``interrupt()``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Annotated, Any

from langchain_core.callbacks import adispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from typing_extensions import TypedDict

from agui_engine.adapters.langgraph import client_tools

Script = list[dict[str, Any]]


class ScriptedChatModel(BaseChatModel):
    """Streams scripted ``AIMessageChunk`` keyword dicts: ``choose(messages)`` picks the script
    of each call (default: ``scripts`` in turn). ``bind_tools`` keeps the model as it is."""

    scripts: list[Script] = []
    choose: Callable[[Sequence[BaseMessage]], Script] | None = None
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _script(self, messages: Sequence[BaseMessage]) -> Script:
        self.calls += 1
        if self.choose is not None:
            return self.choose(messages)
        return self.scripts[(self.calls - 1) % len(self.scripts)]

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message_id = "run-" + uuid.uuid4().hex[:8]
        for fields in self._script(messages):
            chunk = ChatGenerationChunk(message=AIMessageChunk(id=message_id, **fields))
            if run_manager is not None:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        # native async, as real integrations are (the default runs _stream in a thread per chunk)
        message_id = "run-" + uuid.uuid4().hex[:8]
        for fields in self._script(messages):
            chunk = ChatGenerationChunk(message=AIMessageChunk(id=message_id, **fields))
            if run_manager is not None:
                await run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return _result([chunk.message for chunk in self._stream(messages, stop, None, **kwargs)])

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return _result([chunk.message async for chunk in self._astream(messages, stop, None, **kwargs)])


def _result(chunks: list[Any]) -> ChatResult:
    acc: Any = None
    for chunk in chunks:
        acc = chunk if acc is None else acc + chunk
    message = AIMessage(content=acc.content, tool_calls=acc.tool_calls, id=acc.id, usage_metadata=acc.usage_metadata)
    return ChatResult(generations=[ChatGeneration(message=message)])


def text(*pieces: str, finish: bool = True) -> Script:
    script: Script = [{"content": p} for p in pieces]
    if finish:
        script.append({"content": "", "response_metadata": {"finish_reason": "stop"},
                       "usage_metadata": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}})
    return script


def call(name: str, call_id: str, *fragments: str, index: int = 0) -> Script:
    """A tool call streamed as an opener with the name, then argument fragments."""
    script: Script = [{"content": "", "tool_call_chunks": [
        {"name": name, "args": "", "id": call_id, "index": index, "type": "tool_call_chunk"}]}]
    for fragment in fragments:
        script.append({"content": "", "tool_call_chunks": [
            {"name": None, "args": fragment, "id": None, "index": index, "type": "tool_call_chunk"}]})
    return script


def finish(reason: str = "tool_calls") -> Script:
    return [{"content": "", "response_metadata": {"finish_reason": reason},
             "usage_metadata": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}}]


def weather(city: str) -> str:
    """The weather of one city."""
    return f"Sunny, 21 C in {city}"


WEATHER_TOOL = StructuredTool.from_function(weather, name="get_weather")


def _shown(**props: Any) -> str:
    return "shown"


#: A server tool named like the recorded fixtures' calls (they call show_component_WeatherCard).
CARD_TOOL = StructuredTool.from_function(
    _shown,
    name="show_component_WeatherCard",
    description="Shows the weather of one city.",
    args_schema={"type": "object", "properties": {"city": {"type": "string"}, "tempC": {"type": "number"}},
                 "additionalProperties": True},
)


class State(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    turns: int
    approved: Any
    tools: list[dict[str, Any]]


def agent_graph(model: Any, tools: Sequence[Any] = (WEATHER_TOOL,), *, checkpointer: Any = None,
                approval: bool = False) -> Any:
    """START -> agent -> (server tool calls) tools -> agent ... -> END.

    ``agent`` counts its turns in the state (``turns``: STATE_DELTA), dispatches a custom
    ``progress`` event, binds the client's tools (the adapter's config convention) with the
    server's and calls the model. Client tool calls end the run (the client runs them).
    With ``approval``, a user message containing "approve" first goes through ``approve``,
    which calls ``interrupt()`` and stores the answer in ``approved``."""
    server = {t.name for t in tools}

    async def agent(state: State, config: RunnableConfig) -> dict[str, Any]:
        await adispatch_custom_event("progress", {"turn": state.get("turns", 0) + 1})
        bound = model.bind_tools([*tools, *client_tools(config)]) if tools or client_tools(config) else model
        reply = await bound.ainvoke(state["messages"], config)
        return {"messages": [reply], "turns": state.get("turns", 0) + 1}

    def route(state: State) -> str:
        last = state["messages"][-1]
        calls = getattr(last, "tool_calls", None) or []
        return "tools" if calls and all(c["name"] in server for c in calls) else END

    def approve(state: State) -> dict[str, Any]:
        get_stream_writer()({"name": "approval", "value": "asked"})
        answer = interrupt({"reason": "approval", "message": "Approve the plan?"})
        return {"approved": answer}

    def entry(state: State) -> str:
        last = state["messages"][-1] if state.get("messages") else None
        if approval and isinstance(last, HumanMessage) and "approve" in str(last.content) and "approved" not in state:
            return "approve"
        return "agent"

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_conditional_edges(START, entry, ["agent", "approve"] if approval else ["agent"])
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    if approval:
        graph.add_node("approve", approve)
        graph.add_edge("approve", "agent")
    return graph.compile(checkpointer=checkpointer)


def keyword_script(messages: Sequence[BaseMessage]) -> Script:
    """What the served graph's model does: after a tool result, says what it got; for
    "weather", calls the server tool; for "card", shows a WeatherCard (a client component
    tool, arguments split mid-string); on the turn after a result the client sent (a
    component's), quotes it; after an approval, says so; otherwise it greets."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return text("Done: ", str(last.content)[:40])
    if len(messages) > 1 and isinstance(messages[-2], ToolMessage):  # the turn after a result the client sent
        return text("Earlier: ", str(messages[-2].content)[:60])
    said = str(last.content).lower() if isinstance(last, HumanMessage) else ""
    if "weather" in said:
        return [{"content": "Checking."}, *call("get_weather", f"call_{uuid.uuid4().hex[:8]}", '{"city": "Par', 'is"}'),
                *finish()]
    if "card" in said:
        return [*call("show_component_WeatherCard", f"call_{uuid.uuid4().hex[:8]}", '{"city": "Os', 'lo", "tempC": -3',
                      ".5}"), *finish()]
    if "approve" in said:
        return text("Approved, ", "going ahead.")
    return text("Hello ", "from ", "LangGraph.")


served_graph = agent_graph(ScriptedChatModel(choose=keyword_script), checkpointer=InMemorySaver(), approval=True)


async def official_events(graph: Any, input: Any) -> list[dict[str, Any]]:
    """The events ``ag-ui-langgraph`` 0.0.47 (the official integration) emits for ``input`` (our
    RunAgentInput), as wire dicts: raw events off, the structured interrupt outcome on."""
    import msgspec
    from ag_ui.core import RunAgentInput as OfficialInput
    from ag_ui_langgraph import LangGraphAgent as OfficialAgent

    agent = OfficialAgent(name="graph", graph=graph, emit_raw_events=False, emit_interrupt_outcome=True)
    official_input = OfficialInput.model_validate(msgspec.to_builtins(input))
    return [e.model_dump(mode="json", by_alias=True, exclude_none=True) async for e in agent.run(official_input)]
