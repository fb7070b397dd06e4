"""The one contract every run producer meets.

An :class:`Agent` turns a ``RunAgentInput`` into an async stream of AG-UI
events, from ``RUN_STARTED`` to ``RUN_FINISHED`` or ``RUN_ERROR``. The LLM
decision loop is an Agent, an agent framework behind an adapter is an Agent,
and every transport client is an Agent; every transport server serves any
Agent. So agents compose: a WebSocket server in front of a remote SSE agent is
``serve_ws(SSEAgent(url))``.

Two forms are accepted wherever an agent is (the run registry behind every
server, the ``start_*`` functions, the command line's ``py:`` spec), and
:func:`as_agent` turns either into an :class:`Agent`:

* an object with a ``run(input)`` method returning an async iterator of
  events (usually an ``async def run(self, input): ... yield event``);
* an async generator function taking the input:
  ``async def agent(input): yield RunStartedEvent(...) ...``
  (wrapped in a :class:`FunctionAgent`).

Anything else is a :class:`~agui_engine.protocol.errors.UsageError` saying what was
given and what is expected. What an agent yields must be events (instances of
the :mod:`agui_engine.protocol.events` classes): :func:`check_event` is how a server
refuses anything else, with :class:`NotAnEventError` naming the value's type
and its position.

Capabilities: an agent may also say what it supports, with an ``async def
capabilities(self) -> AgentCapabilities`` (:class:`CapableAgent`; the TypeScript
``AbstractAgent.getCapabilities()``). :func:`agent_capabilities` asks any agent: its own
document, or the minimal one, :class:`AgentCapabilities()` (nothing declared: unknown,
not unsupported), for an agent without the method. A server adds what it speaks
(``transport``) before serving the document.

Cancellation: the consumer stops by closing the async iterator
(``aclose()``); the agent must then release what it holds (close the model
stream, abort the HTTP request) before ``aclose()`` returns.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .capabilities import AgentCapabilities
from .errors import UsageError
from .events import BaseEvent

if TYPE_CHECKING:  # pragma: no cover
    from .events import Event, RunAgentInput

__all__ = [
    "Agent",
    "AgentFunction",
    "CapableAgent",
    "FunctionAgent",
    "MAX_QUOTED_VALUE_CHARS",
    "NotAnEventError",
    "agent_capabilities",
    "as_agent",
    "check_event",
]

#: Characters of a refused value's ``repr`` quoted in an error message: enough to
#: recognise it (``{'type': 'TEXT_MESSAGE_CONTENT', ...``), not a whole payload.
MAX_QUOTED_VALUE_CHARS = 80

_EXPECTED = (
    "an agent is an object with a run(input) method or an async generator function taking the input "
    "(async def agent(input): yield RunStartedEvent(...) ...)"
)


@runtime_checkable
class Agent(Protocol):
    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """Stream the events of one run. Must not raise after the first event:
        failures become a ``RUN_ERROR`` event that ends the stream."""
        ...


@runtime_checkable
class CapableAgent(Agent, Protocol):
    """An :class:`Agent` that declares its capabilities."""

    async def capabilities(self) -> AgentCapabilities:
        """What this agent supports. A remote agent asks its server (it may raise the
        transport's errors); a local one answers from its configuration."""
        ...


async def agent_capabilities(agent: object) -> AgentCapabilities:
    """``agent``'s capabilities: what its ``capabilities()`` returns, or
    ``AgentCapabilities()`` (nothing declared) when it has no such method (a function
    agent, your own class).

    Raises UsageError when ``capabilities`` is not an ``async def`` returning an
    :class:`AgentCapabilities`; passes on what the agent's method raises."""
    method = getattr(agent, "capabilities", None)
    if method is None:
        return AgentCapabilities()
    if not callable(method):
        raise UsageError(f"{type(agent).__name__}.capabilities must be a method (async def capabilities(self))")
    result = method()
    if not inspect.isawaitable(result):
        raise UsageError(
            f"{type(agent).__name__}.capabilities() returned {_describe(result)}: it must be an async def "
            "returning AgentCapabilities"
        )
    value = await result
    if not isinstance(value, AgentCapabilities):
        raise UsageError(
            f"{type(agent).__name__}.capabilities() returned {_describe(value)}, not an AgentCapabilities"
        )
    return value


#: The function form of an agent: an async generator function taking the input.
AgentFunction = Callable[["RunAgentInput"], AsyncIterator["Event"]]


class FunctionAgent:
    """An async generator function as an :class:`Agent` (made by :func:`as_agent`)."""

    __slots__ = ("function",)

    def __init__(self, function: AgentFunction) -> None:
        self.function = function

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        return self.function(input)

    def __repr__(self) -> str:
        return f"FunctionAgent({_name(self.function)})"


class NotAnEventError(UsageError):
    """An agent yielded something that is not an AG-UI event (a dict, a str, None).

    A bug in the agent: it ends the run with ``RUN_ERROR{code: "not_an_event"}``;
    everything it yielded before was verified and sent.
    """

    default_code = "not_an_event"


def as_agent(obj: object, *, where: str = "agent") -> Agent:
    """``obj`` as an :class:`Agent`: an object with ``run(input)`` is returned as
    is; an async generator function taking one argument is wrapped in a
    :class:`FunctionAgent`. ``where`` names the parameter in the error.

    Raises UsageError saying what ``obj`` is and what an agent must be.
    """
    if isinstance(obj, type):
        hint = f"; pass an instance, {obj.__name__}(...)" if callable(getattr(obj, "run", None)) else ""
        raise UsageError(f"{where}: got the class {obj.__name__}{hint}; {_EXPECTED}")
    if callable(getattr(obj, "run", None)):
        return obj  # type: ignore[return-value]
    if inspect.isasyncgenfunction(obj):
        try:
            inspect.signature(obj).bind(None)
        except TypeError:
            raise UsageError(
                f"{where}: the async generator function {_name(obj)} must take exactly one argument, the run's "
                "input (async def agent(input): ...)"
            ) from None
        except ValueError:  # no signature to inspect (a builtin): trust it
            pass
        return FunctionAgent(obj)
    if inspect.iscoroutinefunction(obj):
        raise UsageError(
            f"{where}: {_name(obj)} is an async function that does not yield: an agent function must be an async "
            "generator (yield each event)"
        )
    if callable(obj):
        raise UsageError(
            f"{where}: {_name(obj)} is a plain function; {_EXPECTED} (if it builds an agent, pass what it returns)"
        )
    raise UsageError(f"{where}: got {_describe(obj)}; {_EXPECTED}")


def check_event(value: object, index: int) -> None:
    """Raise :class:`NotAnEventError` unless ``value`` is an AG-UI event;
    ``index`` is its position in what the agent yielded (0 = the first value)."""
    if not isinstance(value, BaseEvent):
        raise NotAnEventError(
            f"the agent yielded {_describe(value)} at event index {index}, not an AG-UI event: yield instances of "
            "the agui_engine.protocol.events classes (RunStartedEvent, TextMessageContentEvent, ...)"
        )


def _name(function: object) -> str:
    return str(getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function))


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > MAX_QUOTED_VALUE_CHARS:
        text = text[: MAX_QUOTED_VALUE_CHARS - 1] + "…"
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name} ({text})"
