"""``ScriptedModel``: a model that answers from a script of turns -- for examples, tests and
offline demos of agent frameworks, no network and no API key.

Theory of operation
-------------------
A script is a list of turns. Each turn is what the model says at one step of a
conversation: text, tool calls with their complete arguments, or both
(:class:`ScriptedTurn`, :class:`ScriptedCall`; a plain ``str`` is a text turn; a
callable ``turn(messages) -> ScriptedTurn | str`` writes the turn from the conversation,
e.g. an answer that quotes the tool's result, see :func:`tool_results` and :func:`user_text`).

Which turn answers a ``complete()`` call is read from the conversation, never from a
counter: the number of assistant messages after the last user message. The first call
after the user speaks gets turn 0; after the agent has run the tools of turn 0 and sent
their results back, the call gets turn 1; a new user message starts the script again.
So one model serves any number of runs and threads at once, each in step, and a model
behind an HTTP endpoint (``agui_engine.adapters.loopback``) behaves the same as in process.

Streaming (:meth:`ScriptedModel.complete`): text and every call's JSON arguments are cut
into chunks of 1 to ``MAX_CHUNK_CHARS`` characters as a tokenizer would (the embedded
model's deterministic cutter), so argument fragments exercise the same partial-JSON paths
a provider stream does. Several calls of one turn stream one after another, each with its
id (stable for a given conversation: ``call_<hash>_<step>_<n>``). Usage (an estimate, four
characters a token) and the finish reason (``tool_calls`` or ``stop``) close every reply.

A conversation that asks for a turn past the script's end gets a
:class:`~agui_engine.llm.StreamError` (code ``script_exhausted``) saying how many turns
the script has: the agent ends that run with ``RUN_ERROR`` instead of looping.
Cancelling the consumer stops the generator at once. No IO, no clock.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Union

import msgspec

from ..llm import (
    Finish,
    LLMStreamItem,
    LLMTool,
    StreamError,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    Usage,
)
from ..protocol.errors import UsageError
from .weather_model import chunk_text, message_field, message_role, message_text

__all__ = [
    "SCRIPTED_MODEL_NAME",
    "ScriptStep",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "tool_results",
    "user_text",
]

#: The model name a :class:`ScriptedModel` reports in its usage (and, served over HTTP, answers to).
SCRIPTED_MODEL_NAME: Final = "scripted-1"

#: Characters per token of the usage estimate (the embedded model's rule of thumb).
_CHARS_PER_TOKEN = 4


class ScriptedCall(msgspec.Struct, frozen=True):
    """One tool call of a turn: the tool's name and its complete arguments."""

    name: str
    arguments: dict[str, Any] = {}


class ScriptedTurn(msgspec.Struct, frozen=True, kw_only=True):
    """What the model says at one step: ``text`` first, then ``tool_calls`` (a turn with
    calls finishes with ``tool_calls``, so the agent runs them and asks again)."""

    text: str = ""
    tool_calls: Sequence[ScriptedCall] = ()


#: A turn of a script: fixed, text only, or written from the conversation so far.
ScriptStep = Union[ScriptedTurn, str, Callable[[Sequence[Any]], "ScriptedTurn | str"]]


def tool_results(messages: Sequence[Any]) -> list[str]:
    """The contents of the tool messages after the last user message, in order: what the
    tools of the earlier turns returned (for a turn written as a callable)."""
    out: list[str] = []
    for message in messages[_last_user(messages) + 1 :]:
        if message_role(message) == "tool":
            out.append(message_text(message_field(message, "content")))
    return out


def user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message ("" when there is none): what a turn written as a
    callable answers (a framework's prompt -- a CrewAI task's description -- arrives as it)."""
    at = _last_user(messages)
    return message_text(message_field(messages[at], "content")) if at >= 0 else ""


def _last_user(messages: Sequence[Any]) -> int:
    for at in range(len(messages) - 1, -1, -1):
        if message_role(messages[at]) == "user":
            return at
    return -1


class ScriptedModel:
    """An :class:`~agui_engine.llm.LLMClient` that answers from ``turns`` (see the module
    docstring). ``seed`` changes how replies are cut into chunks; ``name`` is the model name
    reported in usage. Raises :class:`UsageError` for an empty script or a turn of another type.

    ``ScriptedModel([ScriptedTurn(tool_calls=(ScriptedCall("get_weather", {"city": "Tokyo"}),)),
    lambda messages: f"Tokyo: {tool_results(messages)[-1]}"])``
    """

    def __init__(self, turns: Sequence[ScriptStep], *, seed: str = "", name: str = SCRIPTED_MODEL_NAME) -> None:
        if isinstance(turns, (str, ScriptedTurn)) or not turns:
            raise UsageError("ScriptedModel needs a list of turns (ScriptedTurn, str or a function of the messages)")
        for at, turn in enumerate(turns):
            if not (isinstance(turn, (ScriptedTurn, str)) or callable(turn)):
                raise UsageError(
                    f"turn {at} of the script is a {type(turn).__name__}: give a ScriptedTurn, a str, "
                    "or a function of the messages returning one"
                )
        self.turns = list(turns)
        self.seed = seed
        self.name = name

    def turn_for(self, messages: Sequence[Any]) -> ScriptedTurn | None:
        """The turn that answers ``messages``, None past the script's end. Raises
        :class:`UsageError` when a callable turn returns something else than a turn."""
        step = sum(1 for m in messages[_last_user(messages) + 1 :] if message_role(m) == "assistant")
        if step >= len(self.turns):
            return None
        turn = self.turns[step]
        if callable(turn) and not isinstance(turn, (ScriptedTurn, str)):
            turn = turn(messages)
        if isinstance(turn, str):
            return ScriptedTurn(text=turn)
        if not isinstance(turn, ScriptedTurn):
            raise UsageError(f"turn {step} of the script returned a {type(turn).__name__}, not a ScriptedTurn or str")
        return turn

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]:
        turn = self.turn_for(messages)
        step = sum(1 for m in messages if message_role(m) == "assistant")
        key = zlib.crc32(user_text(messages).encode())
        input_chars = sum(len(message_text(message_field(m, "content"))) for m in messages)
        return self._stream(turn, f"call_{key:08x}_{step}", input_chars)

    async def _stream(self, turn: ScriptedTurn | None, call_prefix: str, input_chars: int) -> AsyncIterator[LLMStreamItem]:
        if turn is None:
            yield StreamError(
                message=f"the conversation asks for turn {len(self.turns) + 1} of a script of {len(self.turns)} turns",
                code="script_exhausted",
            )
            return
        out_chars = 0
        for piece in chunk_text(turn.text, seed=self.seed):
            out_chars += len(piece)
            yield TextDelta(text=piece)
        for index, call in enumerate(turn.tool_calls):
            yield ToolCallStart(index=index, id=f"{call_prefix}_{index}", name=call.name)
            arguments = msgspec.json.encode(_plain(call.arguments)).decode()
            for piece in chunk_text(arguments, seed=self.seed):
                out_chars += len(piece)
                yield ToolCallArgsDelta(index=index, delta=piece)
            yield ToolCallEnd(index=index)
        yield Usage(input_tokens=-(-input_chars // _CHARS_PER_TOKEN), output_tokens=-(-out_chars // _CHARS_PER_TOKEN),
                    provider="scripted", model=self.name)
        yield Finish(reason="tool_calls" if turn.tool_calls else "stop")


def _plain(value: Any) -> Any:
    """Arguments as JSON values (a Mapping that is not a dict, e.g. a frozen one, as a dict)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
