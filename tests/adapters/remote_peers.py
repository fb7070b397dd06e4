"""Third-party AG-UI servers, real, for ``agui-engine serve --agent http://...`` to stand in
front of: each module-level factory is an ASGI app for ``uvicorn --factory``.

* :func:`pydantic_ai_app` -- pydantic-ai's ``AGUIAdapter`` over a ``FunctionModel`` that calls
  a server tool (``get_weather``) and then answers with what it returned;
* :func:`langgraph_app` -- the official ``ag-ui-langgraph`` 0.0.47 FastAPI endpoint over a graph
  whose chat model sends the tool name *and* the first argument fragment in one chunk (as
  Gemini and vLLM-style servers do): ag-ui-langgraph drops that fragment from its
  ``TOOL_CALL_ARGS``, its closing ``MESSAGES_SNAPSHOT`` has the whole arguments.

Neither sends SSE event ids, and neither can resume a run.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

#: What both peers' tool returns and their model then says.
WEATHER = "Sunny, 21 C in Paris"


def pydantic_ai_app() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        returned = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if returned:
            for piece in ("The weather: ", str(returned[-1].content)):
                yield piece
            return
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        yield {0: DeltaToolCall(name="get_weather", json_args="", tool_call_id=call_id)}
        for fragment in ('{"city": "Par', 'is"}'):
            yield {0: DeltaToolCall(json_args=fragment)}

    agent = Agent(FunctionModel(stream_function=stream))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of one city."""
        return f"Sunny, 21 C in {city}"

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", run, methods=["POST"])])


def langgraph_app() -> Any:
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from .langgraph_graphs import ScriptedChatModel, agent_graph, finish, text

    def script(messages: Any) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return text("The weather: ", str(messages[-1].content))
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        return [{"content": "", "tool_call_chunks": [  # the name and the first fragment together
                    {"name": "get_weather", "args": '{"city": "Par', "id": call_id, "index": 0, "type": "tool_call_chunk"}]},
                {"content": "", "tool_call_chunks": [
                    {"name": None, "args": 'is"}', "id": None, "index": 0, "type": "tool_call_chunk"}]},
                *finish()]

    app = FastAPI()
    graph = agent_graph(ScriptedChatModel(choose=script), checkpointer=InMemorySaver())  # ag-ui-langgraph needs one
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="weather", graph=graph), "/")
    return app
