"""The pure side of tool sources: the naming rule (a hypothesis property), MCP content to text, the
server tools that call back into a source, and LLMAgent / AgentLoop over an in-process source."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results
from agui_engine.genui.components import Component, tool_from_schema
from agui_engine.loops.agent_loop import AgentLoop
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.loops.tool_sources import (
    SOURCE_NAME_SEPARATOR,
    SourceTool,
    SourceToolResult,
    ToolSource,
    name_source_tools,
    result_text,
    run_source_tools,
    tool_source_status,
)
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    RunAgentInput,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from ..run_checks import check_run

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class FakeSource:
    """An in-process tool source: its tools answer with their name and arguments."""

    def __init__(self, source_id: str, names: Sequence[str], *, error: str | None = None) -> None:
        self._id = source_id
        self.tools = [SourceTool(name=n, description=f"{n} of {source_id}") for n in names]
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.listed = 0
        self.error = error

    @property
    def source_id(self) -> str:
        return self._id

    async def list_tools(self) -> Sequence[SourceTool]:
        self.listed += 1
        return self.tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        self.calls.append((name, dict(arguments)))
        if self.error is not None:
            return SourceToolResult(text=self.error, is_error=True)
        return SourceToolResult(text=f"{self._id}.{name}({sorted(arguments.items())})")

    def status(self) -> dict[str, Any]:
        return {"serverId": self._id, "connected": True, "tools": len(self.tools), "error": None}


def _input(run_id: str = "r1") -> RunAgentInput:
    return RunAgentInput(thread_id="t", run_id=run_id, messages=[UserMessage(id="u", content="hi")], tools=[],
                         context=[], state=None, forwarded_props=None)


def test_a_free_valid_name_stays_and_collisions_are_namespaced() -> None:
    named = name_source_tools(
        [("a", SourceTool(name="search")), ("b", SourceTool(name="search")), ("a", SourceTool(name="only")),
         ("a", SourceTool(name="get_weather")), ("a", SourceTool(name="dotted.name")),
         ("a", SourceTool(name="show_component_Card"))],
        {"get_weather", "show_component_Card"},
    )
    assert [n for n, _, _ in named] == ["a__search", "b__search", "only", "a__get_weather", "a__dotted_name",
                                        "a__show_component_Card"]


def test_a_name_too_long_or_still_taken_ends_with_a_hash() -> None:
    long = "x" * 70
    [(name, _, _)] = name_source_tools([("srv", SourceTool(name=long))], set())
    assert len(name) == 64 and re.fullmatch(r"srv__x+_[0-9a-f]{8}", name)
    # "a__b" is the run's own: the namespaced a/b cannot take it
    [(taken, _, _)] = name_source_tools([("a", SourceTool(name="b"))], {"b", "a__b"})
    assert taken.startswith("a__b_") and taken != "a__b"
    # two namespaced names that sanitize alike are both hashed (no order decides)
    named = name_source_tools([("a", SourceTool(name="x.y")), ("a", SourceTool(name="x y")),
                               ("b", SourceTool(name="x.y")), ("b", SourceTool(name="x y"))], set())
    assert len({n for n, _, _ in named}) == 4 and all(re.search(r"_[0-9a-f]{8}$", n) for n, _, _ in named)


_names = st.text(alphabet="ab._-/ ", min_size=1, max_size=6)


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), _names), max_size=12),
       st.sets(st.text(alphabet="ab_", min_size=1, max_size=7), max_size=6), st.randoms())
def test_naming_property(pairs: list[tuple[str, str]], taken: set[str], rng: random.Random) -> None:
    tools = [(sid, SourceTool(name=name)) for sid, name in pairs]
    named = name_source_tools(tools, taken)
    names = [n for n, _, _ in named]
    assert len(names) == len(set(names)), "distinct"
    assert all(VALID.match(n) for n in names), "valid provider names"
    assert not set(names) & taken, "the run's own names never change"
    assert {(sid, t.name) for _, sid, t in named} == set(pairs), "every (source, tool) once"
    shuffled = list(tools)
    rng.shuffle(shuffled)
    again = {(sid, t.name): n for n, sid, t in name_source_tools(shuffled, taken)}
    assert again == {(sid, t.name): n for n, sid, t in named}, "the order of the sources decides nothing"
    for n, sid, tool in named:  # a kept name is the tool's own; any other is namespaced by its source
        assert n == tool.name or n.startswith(sid + SOURCE_NAME_SEPARATOR)


def test_result_text_is_the_middlewares() -> None:
    assert result_text([{"type": "text", "text": "a"}, {"type": "image", "data": "..."}, {"type": "text", "text": "b"}]) \
        == "a\nb"
    assert result_text([{"type": "image", "data": "AAA", "mimeType": "image/png"}]) == \
        '[{"type":"image","data":"AAA","mimeType":"image/png"}]'
    assert result_text([], {"n": 1}) == '{"n":1}'
    assert result_text(None) == ""


async def test_a_schema_tool_hands_the_arguments_over_without_strict_nulls() -> None:
    seen: list[dict[str, Any]] = []

    async def fn(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return "ok"

    tool = tool_from_schema("t", "d", {"type": "object", "properties": {"a": {"type": "string"}}}, fn)
    assert tool.is_async and tool.parameters["properties"] == {"a": {"type": "string"}}
    assert tool.to_llm_tool(strict=True).strict  # sent strict: the optional a became nullable
    assert await tool.call({"a": None}) == "ok" and seen == [{}]
    with pytest.raises(UsageError):
        tool_from_schema("bad name", "d", {}, fn)
    with pytest.raises(UsageError):
        tool_from_schema("t", "d", {"type": "array"}, fn)


async def test_run_source_tools_calls_back_into_the_source() -> None:
    a, b = FakeSource("a", ["x", "y"]), FakeSource("b", ["x"])
    tools = {t.name: t for t in await run_source_tools([a, b], {"y"})}
    assert set(tools) == {"a__x", "b__x", "a__y"}
    assert await tools["b__x"].call({"k": 1}) == "b.x([('k', 1)])"
    assert b.calls == [("x", {"k": 1})]


def test_fake_source_is_a_tool_source_and_status_is_collected() -> None:
    source = FakeSource("a", ["x"])
    assert isinstance(source, ToolSource)
    agent = LLMAgent(ScriptedModel(["hi"]), mcp_servers=[source])
    assert tool_source_status(agent) == [source.status()]
    assert tool_source_status(object()) == []


async def test_llm_agent_offers_source_tools_and_reports_is_error() -> None:
    ok, bad = FakeSource("ok", ["lookup"]), FakeSource("bad", ["broken"], error="disk full")
    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("lookup", {"q": "x"}), ScriptedCall("broken")]),
                           lambda messages: " | ".join(tool_results(messages))])
    agent = LLMAgent(model, mcp_servers=[ok, bad], tool_timeout=None)  # async tools: no runner needed
    events = [e async for e in agent.run(_input())]
    check_run(events)
    results = [e.content for e in events if isinstance(e, ToolCallResultEvent)]
    assert results == ["ok.lookup([('q', 'x')])", "Error: SourceToolError: disk full"]
    # a component's tool keeps its name; a source tool of that name gives way
    card = Component("Card", "a card", {"type": "object", "properties": {}})
    clash = FakeSource("c", ["show_component_Card"])
    agent = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("c__show_component_Card")]), "done"]),
                     components=[card], mcp_servers=[clash], tool_timeout=None)
    events = [e async for e in agent.run(_input())]
    assert [e.content for e in events if isinstance(e, ToolCallResultEvent)] == ["c.show_component_Card([])"]


async def test_agent_loop_runs_source_tools_as_client_tools_and_continues() -> None:
    source = FakeSource("s", ["lookup"])
    inner = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("lookup", {"q": "y"})]),
                                    lambda messages: "seen " + " | ".join(tool_results(messages))]))
    loop = AgentLoop(inner, mcp_servers=[source])
    events = [e async for e in loop.run(_input())]
    check_run(events)
    assert [e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)] == ["lookup"]
    assert "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent)) == "seen s.lookup([('q', 'y')])"
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome is None
    assert source.calls == [("lookup", {"q": "y"})]


async def test_agent_loop_stops_following_up_after_max_rounds() -> None:
    from agui_engine.loops.thread import MAX_TOOL_ROUNDS

    source = FakeSource("s", ["again"])
    inner = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("again")])] * (MAX_TOOL_ROUNDS + 5)))
    events = [e async for e in AgentLoop(inner, mcp_servers=[source]).run(_input())]
    check_run(events)
    assert len(source.calls) == MAX_TOOL_ROUNDS + 1
    assert isinstance(events[-1], RunFinishedEvent)


async def test_capabilities_list_the_source_tools() -> None:
    source = FakeSource("s", ["lookup"])
    agent = LLMAgent(ScriptedModel(["x"]), mcp_servers=[source])
    names = {t.name for t in (await agent.capabilities()).tools.items}  # type: ignore[union-attr]
    assert "lookup" in names
    loop = AgentLoop(LLMAgent(ScriptedModel(["x"])), mcp_servers=[source])
    names = {t.name for t in (await loop.capabilities()).tools.items}  # type: ignore[union-attr]
    assert "lookup" in names


async def test_the_cache_reuses_server_tools_until_the_source_changes_them() -> None:
    source = FakeSource("s", ["a", "b"])
    cache: dict[Any, Any] = {}
    first = await run_source_tools([source], set(), cache=cache)
    again = await run_source_tools([source], set(), cache=cache)
    assert [t.name for t in again] == ["a", "b"] and all(x is y for x, y in zip(first, again))
    source.tools = [source.tools[0], SourceTool(name="b", description="changed")]  # as after list_changed
    changed = await run_source_tools([source], set(), cache=cache)
    assert changed[0] is first[0] and changed[1] is not first[1] and changed[1].description == "changed"
    renamed = await run_source_tools([source], {"a"}, cache=cache)  # "a" is taken now: s__a, a new tool
    assert [t.name for t in renamed] == ["s__a", "b"] and len(cache) == 2


async def test_a_source_that_breaks_its_contract_offers_no_tools_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(FakeSource):
        async def list_tools(self) -> Sequence[SourceTool]:
            raise RuntimeError("boom")

    agent = LLMAgent(ScriptedModel(["fine"]), mcp_servers=[Broken("x", ["t"])])
    events = [e async for e in agent.run(_input())]
    check_run(events)
    assert isinstance(events[-1], RunFinishedEvent)
    assert "tool source x failed to list its tools: RuntimeError" in caplog.text
