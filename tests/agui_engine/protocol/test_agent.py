"""as_agent: both forms of an agent are accepted, anything else is refused with a
message saying what was given and what an agent is; check_event."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agui_engine.protocol.agent import Agent, FunctionAgent, NotAnEventError, as_agent, check_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    UserMessage,
)
from tests.helpers import collect

INPUT = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")])


async def hello(input: RunAgentInput) -> AsyncIterator[Event]:
    yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
    yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


class Hello:
    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        return hello(input)


async def test_an_object_with_run_is_returned_as_is() -> None:
    obj = Hello()
    assert as_agent(obj) is obj
    assert [e.type.value for e in await collect(as_agent(obj), INPUT)] == ["RUN_STARTED", "RUN_FINISHED"]


async def test_an_async_generator_function_becomes_a_function_agent() -> None:
    agent = as_agent(hello)
    assert isinstance(agent, FunctionAgent) and isinstance(agent, Agent)
    assert repr(agent) == "FunctionAgent(hello)"
    assert await collect(agent, INPUT) == await collect(Hello(), INPUT)
    # a bound method and a partial with the input left open are async generator functions too
    class Holder:
        async def agent(self, input: RunAgentInput) -> AsyncIterator[Event]:
            async for e in hello(input):
                yield e

    assert len(await collect(as_agent(Holder().agent), INPUT)) == 2

    async def greeter(prefix: str, input: RunAgentInput) -> AsyncIterator[Event]:
        async for e in hello(input):
            yield e

    assert len(await collect(as_agent(functools.partial(greeter, "x")), INPUT)) == 2


async def not_a_generator(input: RunAgentInput) -> list[Event]:
    return []


async def no_input() -> AsyncIterator[Event]:
    yield RunStartedEvent(thread_id="t", run_id="r")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"type": "RUN_STARTED"}, r"^agent: got a dict \(\{'type': 'RUN_STARTED'\}\); an agent is an object with a run\(input\)"),
        ("py:mod:agent", r"got a str \('py:mod:agent'\)"),
        (None, r"got None; an agent is"),
        (Hello, r"got the class Hello; pass an instance, Hello\(...\)"),
        (not_a_generator, r"not_a_generator is an async function that does not yield"),
        (no_input, r"no_input must take exactly one argument"),
        (len, r"len is a plain function; .*if it builds an agent, pass what it returns"),
        (lambda input: hello(input), r"<lambda> is a plain function"),
    ],
)
def test_anything_else_is_refused_saying_what_it_got_and_what_is_expected(given: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        as_agent(given)


def test_the_refusal_names_the_parameter_and_quotes_a_long_value_briefly() -> None:
    with pytest.raises(UsageError, match=r"^start_sse_server\(agent\): got a str \('x{60,}…\)") as ei:
        as_agent("x" * 500, where="start_sse_server(agent)")
    assert len(ei.value.message) < 400


def test_check_event_accepts_events_and_names_type_and_index_of_anything_else() -> None:
    check_event(RunStartedEvent(thread_id="t", run_id="r"), 0)
    for value, shown in [({"type": "TEXT_MESSAGE_CONTENT"}, "a dict"), ("hi", "a str ('hi')"), (None, "None")]:
        with pytest.raises(NotAnEventError) as ei:
            check_event(value, 3)
        assert ei.value.message.startswith(f"the agent yielded {shown}")
        assert "at event index 3" in ei.value.message
        assert ei.value.code == "not_an_event" and RunErrorEvent.from_error(ei.value).code == "not_an_event"


async def test_the_agent_loop_wraps_either_form() -> None:
    from agui_engine.loops.agent_loop import AgentLoop

    for inner in (hello, Hello()):
        events = [e async for e in AgentLoop(inner).run(INPUT)]
        assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_FINISHED"]
    with pytest.raises(UsageError, match=r"^AgentLoop\(agent\): got a str"):
        AgentLoop("agent")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- capabilities


async def test_agent_capabilities_asks_the_agent_or_declares_nothing() -> None:
    from agui_engine.protocol.agent import CapableAgent, agent_capabilities
    from agui_engine.protocol.capabilities import AgentCapabilities, StateCapabilities

    declared = AgentCapabilities(state=StateCapabilities(deltas=True))

    class Capable:
        async def capabilities(self) -> AgentCapabilities:
            return declared

        async def run(self, input: Any) -> Any:  # pragma: no cover - never run here
            yield None

    async def function_agent(input: Any) -> Any:  # pragma: no cover - never run here
        yield None

    assert isinstance(Capable(), CapableAgent)
    assert await agent_capabilities(Capable()) is declared
    assert await agent_capabilities(as_agent(function_agent)) == AgentCapabilities()


@pytest.mark.parametrize(
    "body,match",
    [
        ("def capabilities(self):\n    return AgentCapabilities()", "must be an async def"),
        ("async def capabilities(self):\n    return {'state': {}}", "not an AgentCapabilities"),
        ("capabilities = 3", "must be a method"),
    ],
)
async def test_a_capabilities_method_that_breaks_the_contract_is_a_usage_error(body: str, match: str) -> None:
    from agui_engine.protocol.agent import agent_capabilities
    from agui_engine.protocol.capabilities import AgentCapabilities

    namespace: dict[str, Any] = {"AgentCapabilities": AgentCapabilities}
    exec("class Broken:\n" + "".join(f"    {line}\n" for line in body.splitlines()), namespace)  # noqa: S102
    with pytest.raises(UsageError, match=match):
        await agent_capabilities(namespace["Broken"]())
