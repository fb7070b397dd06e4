"""A LangGraph graph served as an AG-UI agent, offline: a model node and a tool node.

Run it from the repository root::

    agui-engine serve --agent langgraph:examples.langgraph_graph:graph

then, in another terminal::

    agui-engine run --url http://127.0.0.1:8000/ "What's the weather in Tokyo?"

The graph is ordinary LangGraph: ``ChatOpenAI`` with ``bind_tools``, a ``ToolNode``, the
prebuilt ``tools_condition``. Its model is a :class:`~agui_engine.demo.scripted.ScriptedModel` (call
``get_weather``, then answer with what the tool returned) served over loopback HTTP in the
OpenAI Chat Completions format by :func:`agui_engine.adapters.loopback.serve_openai_compatible`:
no API key, no network. For a real model, drop ``base_url`` and ``api_key`` (and set
``OPENAI_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import SecretStr

from agui_engine.adapters.loopback import serve_openai_compatible
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results


@tool
def get_weather(city: str) -> str:
    """The current weather for a city (example data)."""
    return f"{city}: sunny, 21 C"


def answer(messages: Sequence[Any]) -> str:
    """The second turn: say what the tool returned."""
    return f"The weather report says: {tool_results(messages)[-1]}."


#: the model's script: one tool call (its arguments stream in fragments), then the answer
MODEL = serve_openai_compatible(ScriptedModel([
    ScriptedTurn(text="Let me look that up. ", tool_calls=[ScriptedCall("get_weather", {"city": "Tokyo"})]),
    answer,
]))

llm = ChatOpenAI(model="scripted-1", base_url=MODEL.base_url, api_key=SecretStr("offline"), streaming=True)
tools = [get_weather]
model_with_tools = llm.bind_tools(tools)


async def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model_with_tools.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode(tools))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = builder.compile()
