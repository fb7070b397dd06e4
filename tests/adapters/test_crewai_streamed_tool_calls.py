"""Issue 22: a crew on CrewAI's own streaming ``LLM`` (``LLM("openai/...", base_url=..., stream=True)``,
the way a user runs one) whose model streams two tool calls in one message, each one's arguments in
several fragments as OpenAI sends them, then answers. The OpenAI-compatible server is the project's
replay server on loopback (a real HTTP stream, written in odd-sized slices), so CrewAI's real
provider code reports the chunks: its native OpenAI provider (cumulative ``tool_call`` arguments)
and its LiteLLM path (incremental ones). Every run passes the Verifier and ag-ui-validate; each
call's ``TOOL_CALL_ARGS`` are exactly the fragments the server streamed, once; the crew's text
after the tools is there. The same crew served by ``agui-engine serve --agent crewai:...`` reaches
the real ``@ag-ui/client`` with the same calls."""

from __future__ import annotations

# first: test_crewai sets CrewAI's offline environment (no telemetry, tracing or cost-map
# download) before crewai is imported, and has the crew tests' weather tool and run input
from tests.adapters.test_crewai import WeatherTool, run_input  # isort: skip

import asyncio
import json
import os
from typing import Any

import pytest
from crewai import LLM, Agent, BaseLLM, Crew, Task
from crewai.events.types.llm_events import FunctionCall, LLMStreamChunkEvent, ToolCall
from crewai.tools import BaseTool

from agui_engine.adapters.crewai import CrewAIAgent, CrewEventTranslator
from agui_engine.adapters.replay import Fixture, ReplayServer
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.protocol.events import (
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from tests.adapters.agent_runs import KEY, check, collect, of, served_client_result

#: The two calls of the model's one message: id, tool, and its arguments in the fragments the
#: server streams them in (split inside keys and values, as OpenAI splits them).
CALLS = [
    ("call_K1", "research", ['{"topic', '": "kes', 'trel", "de', 'pth": 2}']),
    ("call_W2", "get_weather", ['{"ci', 'ty": "Os', 'lo"}']),
]
#: The model's answer once the tools ran, in the chunks it streams.
ANSWER = ["Kestrels hover ", "to hunt; Oslo ", "is sunny, 21 C."]

#: The environment variable the served crew (:func:`served_target`) takes its base URL from.
URL_ENV = "AGUI_TEST_CREWAI_OPENAI_URL"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    """One Chat Completions stream chunk as OpenAI writes it (tests/adapters/fixtures/openai_chat)."""
    return "data: " + json.dumps({
        "id": "chatcmpl-C22kSt", "object": "chat.completion.chunk", "created": 1732000000, "model": "gpt-4o-2024-08-06",
        "service_tier": "default", "system_fingerprint": "fp_50cad350e4",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], "usage": None,
    }) + "\n\n"


def _stream(chunks: list[str]) -> Fixture:
    body = "".join(chunks) + "data: [DONE]\n\n"
    return Fixture(provider="openai_chat", name="crewai-issue-22", status=200,
                   headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}, body=body.encode())


def tool_calls_stream() -> Fixture:
    """The first answer: both calls, each opened (id, name, empty arguments) then its fragments."""
    chunks = []
    for index, (call_id, name, fragments) in enumerate(CALLS):
        opening: dict[str, Any] = {"tool_calls": [
            {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}
        if index == 0:
            opening = {"role": "assistant", "content": None, "refusal": None, **opening}
        chunks.append(_chunk(opening))
        chunks += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}) for f in fragments]
    return _stream(chunks + [_chunk({}, "tool_calls")])


def answer_stream() -> Fixture:
    chunks = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [_chunk({"content": piece}) for piece in ANSWER]
    return _stream(chunks + [_chunk({}, "stop")])


class ResearchTool(BaseTool):
    name: str = "research"
    description: str = "Research a topic to a depth."

    def _run(self, topic: str, depth: int) -> str:
        return f"{topic}, depth {depth}: a small falcon that hovers"


#: What the tools return for the calls above, by call id.
RESULTS = {"call_K1": "kestrel, depth 2: a small falcon that hovers", "call_W2": "Oslo: sunny, 21 C"}


def tools_crew(base_url: str, *, litellm: bool = False) -> Crew:
    """A one-agent crew on CrewAI's own ``LLM`` streaming from ``base_url``."""
    llm = LLM(model="openai/gpt-4o", base_url=base_url, api_key=KEY, stream=True, is_litellm=litellm)
    agent = Agent(role="researcher", goal="answer with the tools", backstory="careful", llm=llm,
                  tools=[ResearchTool(), WeatherTool()], verbose=False)
    return Crew(agents=[agent], verbose=False,
                tasks=[Task(description="{message}", expected_output="an answer", agent=agent)])


def served_target(input: RunAgentInput) -> Crew:
    """What ``agui-engine serve --agent crewai:<this module>:served_target`` serves."""
    return tools_crew(os.environ[URL_ENV])


#: What the user asks.
QUESTION = "kestrels, and the weather in Oslo"


def assert_streamed_once(events: list[Any]) -> None:
    """Each call opened once, with its own id and name; its ARGS exactly the server's fragments
    (which concatenate to the JSON the server streamed), ended once; its one result."""
    assert [(e.tool_call_id, e.tool_call_name) for e in of(events, ToolCallStartEvent)] == [
        (call_id, name) for call_id, name, _ in CALLS]
    for call_id, _, fragments in CALLS:
        assert [e.delta for e in of(events, ToolCallArgsEvent) if e.tool_call_id == call_id] == fragments
        assert len([e for e in of(events, ToolCallEndEvent) if e.tool_call_id == call_id]) == 1
    assert {e.tool_call_id: e.content for e in of(events, ToolCallResultEvent)} == RESULTS
    assert len(of(events, ToolCallResultEvent)) == len(CALLS)


@pytest.mark.parametrize("litellm", [False, True], ids=["native-openai", "litellm"])
async def test_crewais_streaming_llm_two_tool_calls_in_fragments_then_text(litellm: bool) -> None:
    async with ReplayServer() as server:
        crew = tools_crew(server.base_url("openai_chat", tool_calls_stream(), answer_stream()), litellm=litellm)
        llm = crew.agents[0].llm
        assert isinstance(llm, BaseLLM) and llm.is_litellm is litellm  # the CrewAI path under test
        events = await collect(CrewAIAgent(crew), run_input(QUESTION))  # Verifier + ag-ui-validate
    assert_streamed_once(events)
    # the crew's text after the tools: streamed as the model sent it, once; the crew's output is
    # that same text, so it is not said a second time (issue 30, point 7)
    last_result = max(i for i, e in enumerate(events) if isinstance(e, ToolCallResultEvent))
    after = [e.delta for e in events[last_result:] if isinstance(e, TextMessageContentEvent)]
    assert after == ANSWER
    assert isinstance(events[-1], RunFinishedEvent)
    # CrewAI itself parsed the same arguments: its second request carries both calls and results
    # (by name: CrewAI's LiteLLM path sends the calls back with "id": null and no tool_call_id)
    assert len(server.requests) == 2
    messages = server.requests[1].json["messages"]
    sent = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in messages for c in m.get("tool_calls") or ()]
    assert sent == [(name, json.loads("".join(fragments))) for _, name, fragments in CALLS]
    assert [m["content"] for m in messages if m["role"] == "tool"] == list(RESULTS.values())


async def test_through_the_agent_loop_the_run_is_not_a_protocol_violation() -> None:
    """The issue's run: the agent loop verifies what the adapter sends; cumulative arguments
    made it end RUN_ERROR protocol_violation [tool_call.args_not_json] and lose the text."""
    async with ReplayServer() as server:
        crew = tools_crew(server.base_url("openai_chat", tool_calls_stream(), answer_stream()))
        events = [e async for e in AgentLoop(CrewAIAgent(crew)).run(run_input(QUESTION))]
    check(events)
    assert not of(events, RunErrorEvent)
    assert_streamed_once(events)
    assert "".join(ANSWER) in "".join(e.delta for e in of(events, TextMessageContentEvent))
    assert isinstance(events[-1], RunFinishedEvent)


def _chunk_event(chunk: str, index: int, arguments: str, call_id: str | None = None, name: str = "") -> Any:
    """A tool-call chunk as CrewAI emits it (its own event and ToolCall models)."""
    return LLMStreamChunkEvent(chunk=chunk, call_id="llm-1", tool_call=ToolCall(
        id=call_id, function=FunctionCall(name=name, arguments=arguments), type="function", index=index))


def _args_of(translator: CrewEventTranslator, chunk_events: list[Any]) -> list[str]:
    out = [e for ce in chunk_events for e in translator.feed(ce)]
    return [e.delta for e in out if isinstance(e, ToolCallArgsEvent)]


FRAGMENTS = ['{"topic', '": "kes', 'trel"}']


def _cumulative(fragments: list[str]) -> list[str]:
    return ["".join(fragments[: i + 1]) for i in range(len(fragments))]


@pytest.mark.parametrize(("shape", "chunks", "arguments"), [
    # crewai 1.15.30's native providers: chunk = the fragment, arguments = everything so far
    ("native", FRAGMENTS, _cumulative(FRAGMENTS)),
    # its LiteLLM path: both the fragment
    ("litellm", FRAGMENTS, FRAGMENTS),
    # an emitter that reports arguments only (chunk empty): told apart by prefix
    ("cumulative arguments only", ["", "", ""], _cumulative(FRAGMENTS)),
    ("incremental arguments only", ["", "", ""], FRAGMENTS),
])
def test_each_shape_crewai_reports_gives_each_fragment_once(shape: str, chunks: list[str], arguments: list[str]) -> None:
    translator = CrewEventTranslator(run_id="r", thread_id="t")
    opening = _chunk_event("", 0, "", call_id="call_1", name="research")
    deltas = _args_of(translator, [opening] + [_chunk_event(c, 0, a) for c, a in zip(chunks, arguments)])
    assert deltas == FRAGMENTS, shape


def test_arguments_before_the_name_are_sent_once_the_call_starts() -> None:
    translator = CrewEventTranslator(run_id="r", thread_id="t")
    first = translator.feed(_chunk_event('{"ci', 0, '{"ci', call_id="call_1"))
    assert first == []  # no name yet: nothing can be opened
    # LiteLLM's shape (incremental): the first fragment must not be lost
    started = translator.feed(_chunk_event('ty": "Oslo"}', 0, 'ty": "Oslo"}', name="get_weather"))
    assert [type(e).__name__ for e in started] == ["ToolCallStartEvent", "ToolCallArgsEvent"]
    assert started[1].delta == '{"city": "Oslo"}'


@pytest.mark.timeout(300)  # the server process imports crewai (5-20 s on a loaded machine)
async def test_served_to_the_real_ag_ui_client(monkeypatch: pytest.MonkeyPatch) -> None:
    async with ReplayServer() as server:
        monkeypatch.setenv(URL_ENV, server.base_url("openai_chat", tool_calls_stream(), answer_stream()))
        result = await asyncio.to_thread(
            served_client_result, "crewai:tests.adapters.test_crewai_streamed_tool_calls:served_target",
            "crewai_tools_client.mjs")
    [run] = result["runs"]
    assert run["error"] is None, "the client's own verifier accepted the run"
    events = run["events"]
    assert events[-1]["type"] == "RUN_FINISHED" and not [e for e in events if e["type"] == "RUN_ERROR"]
    for call_id, _, fragments in CALLS:
        assert [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == call_id] == fragments
    # the client assembled the calls from the events: the arguments are the JSON the server streamed
    calls = {c["id"]: (c["function"]["name"], c["function"]["arguments"])
             for m in result["messages"] for c in m.get("toolCalls") or ()}
    assert calls == {call_id: (name, "".join(fragments)) for call_id, name, fragments in CALLS}
    tool_messages = {m["toolCallId"]: m["content"] for m in result["messages"] if m["role"] == "tool"}
    assert tool_messages == RESULTS
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "".join(ANSWER) in text
