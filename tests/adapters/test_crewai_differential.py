"""Differential test: our CrewAI adapter against ``ag-ui-crewai`` 1.0 (the official bridge) on
the same flow (written its way: ``CopilotKitState``, ``copilotkit_stream`` around litellm)
driven by the same recorded provider streams from the replay server. Everything it emits
that carries content (text, tool calls with their arguments, tool results, state, custom
events) we emit too; and we stream the tokens of the crew inside the flow, which it does
not translate at all (``shared/reference/provider-streams.md`` §10.2)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.adapters.crewai import CrewAIAgent
from agui_engine.adapters.replay import ReplayServer
from agui_engine.protocol.codec import EventStreamDecoder, encode_event
from agui_engine.protocol.events import RunAgentInput

from .agent_runs import check, digest
from .crewai_flows import QUESTION, chat_flow


async def official_events(flow: Any, input: RunAgentInput) -> list[dict[str, Any]]:
    """The events ``ag-ui-crewai``'s FastAPI flow endpoint streams for ``input``, as wire dicts
    (in-process ASGI, the endpoint's own SSE)."""
    from ag_ui_crewai import add_crewai_flow_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_crewai_flow_fastapi_endpoint(app, flow, "/")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://official",
                                 timeout=60) as client:
        response = await client.post("/", content=encode_event_input(input),
                                     headers={"content-type": "application/json", "accept": "text/event-stream"})
        decoder = EventStreamDecoder()
        events = decoder.feed(response.content) + decoder.close()
    return [msgspec.json.decode(encode_event(e)) for e in events]


def encode_event_input(input: RunAgentInput) -> bytes:
    return msgspec.json.encode(msgspec.to_builtins(input))


async def both(*fixtures: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    async with ReplayServer() as server:
        ours_events = [e async for e in CrewAIAgent(chat_flow(server.base_url("openai_chat", *fixtures))).run(QUESTION)]
        check(ours_events)
        ours = [msgspec.json.decode(encode_event(e)) for e in ours_events]
        theirs = await official_events(chat_flow(server.base_url("openai_chat", *fixtures))(), QUESTION)
    return digest(ours), digest(theirs), ours


def assert_covers(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Everything ag-ui-crewai's events carry, ours carry too. Ids of the crew's tool calls are
    each adapter's own, so calls and results compare by content."""
    assert not theirs["text"] - ours["text"], f"text they sent and we did not: {theirs['text'] - ours['text']}"

    def calls(d: dict[str, Any]) -> Counter[str]:
        return Counter(repr((name, msgspec.json.decode(args) if args else None)) for name, args in d["calls"].values())

    assert not calls(theirs) - calls(ours), f"tool calls they sent and we did not: {calls(theirs) - calls(ours)}"
    assert not Counter(theirs["results"].values()) - Counter(ours["results"].values())
    assert not Counter(map(repr, theirs["custom"])) - Counter(map(repr, ours["custom"]))
    # every state they sent, we sent; ids are each adapter's own (theirs puts CrewAI's flow id and
    # the AG-UI message ids into the state, ours leaves them out: Chat messages carry none)
    ours_states = [without_ids(s) for s in ours["states"]]
    for state in theirs["states"]:
        assert without_ids(state) in ours_states, state


def without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


@pytest.mark.timeout(180)  # both bridges run the flow and its crew; litellm's first import takes 5-10 s
async def test_text_flow_and_its_crew() -> None:
    ours, theirs, ours_events = await both("text")
    assert theirs["text"]
    assert_covers(ours, theirs)
    # the crew's agents' tokens: ours streams them, theirs has none
    assert ours["text"]["sunny "] > theirs["text"]["sunny "]


@pytest.mark.timeout(180)  # as above
async def test_tool_call_flow_and_its_crew() -> None:
    ours, theirs, _ = await both("tool_calls")
    assert len(theirs["calls"]) >= 2  # the fixture's two parallel calls (and the crew's tool, once it finished)
    assert_covers(ours, theirs)
