"""Hypothesis strategies for AG-UI event streams, shared by the verifier and accumulator tests.

``valid_streams()`` builds streams that obey every ordering rule: one to three sequential runs,
each a random interleaving of entity *scripts* (a text message, a tool call with its JSON
arguments split at random points and maybe a result, a reasoning span, a step, a sub-agent with
an attributed message, chunk-form messages and tool calls, and single neutral events).
``event_soup()`` builds arbitrary sequences from small id alphabets, valid or not, for fuzzing.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from agui_engine.protocol.events import (
    ActivitySnapshotEvent,
    CustomEvent,
    RawEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def split_text(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at random points (empty pieces allowed)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(text[last:cut])
        last = cut
    pieces.append(text[last:])
    return pieces


@st.composite
def _text_script(draw: st.DrawFn, uid: str, owner: str | None = None) -> list[Any]:
    mid = f"msg_{uid}"
    role = draw(st.sampled_from([None, "assistant", "user", "system", "developer"]))
    out: list[Any] = [TextMessageStartEvent(message_id=mid, role=role, subagent_run_id=owner)]
    for delta in draw(split_text(draw(TEXT))):
        out.append(TextMessageContentEvent(message_id=mid, delta=delta, subagent_run_id=owner))
    out.append(TextMessageEndEvent(message_id=mid, subagent_run_id=owner))
    return out


@st.composite
def _tool_script(draw: st.DrawFn, uid: str) -> list[Any]:
    cid = f"call_{uid}"
    args = json.dumps(draw(st.dictionaries(TEXT, JSON_VALUES, max_size=3)), ensure_ascii=False)
    out: list[Any] = [ToolCallStartEvent(tool_call_id=cid, tool_call_name=f"tool_{uid}")]
    out += [ToolCallArgsEvent(tool_call_id=cid, delta=d) for d in draw(split_text(args))]
    out.append(ToolCallEndEvent(tool_call_id=cid))
    if draw(st.booleans()):
        content: Any = draw(TEXT) if draw(st.booleans()) else [TextPart(text=draw(TEXT))]
        out.append(ToolCallResultEvent(message_id=f"result_{uid}", tool_call_id=cid, content=content))
    return out


@st.composite
def _reasoning_script(draw: st.DrawFn, uid: str) -> list[Any]:
    span, mid = f"rsn_{uid}", f"rmsg_{uid}"
    out: list[Any] = [ReasoningStartEvent(message_id=span), ReasoningMessageStartEvent(message_id=mid)]
    out += [ReasoningMessageContentEvent(message_id=mid, delta=d) for d in draw(split_text(draw(TEXT)))]
    out += [ReasoningMessageEndEvent(message_id=mid), ReasoningEndEvent(message_id=span)]
    return out


@st.composite
def _subagent_script(draw: st.DrawFn, uid: str) -> list[Any]:
    sid = f"sub_{uid}"
    return [
        SubagentStartedEvent(subagent_run_id=sid, name="researcher"),
        *draw(_text_script(f"{uid}s", owner=sid)),
        SubagentFinishedEvent(subagent_run_id=sid),
    ]


@st.composite
def _text_chunks(draw: st.DrawFn, uid: str) -> list[Any]:
    mid = f"chunk_{uid}"
    deltas = draw(split_text(draw(TEXT)))
    out: list[Any] = [TextMessageChunkEvent(message_id=mid, delta=deltas[0])]
    for delta in deltas[1:]:
        out.append(TextMessageChunkEvent(message_id=draw(st.sampled_from([None, mid])), delta=delta))
    return out


@st.composite
def _tool_chunks(draw: st.DrawFn, uid: str) -> list[Any]:
    cid = f"chunkcall_{uid}"
    args = json.dumps(draw(st.dictionaries(TEXT, JSON_VALUES, max_size=2)))
    deltas = draw(split_text(args))
    out: list[Any] = [ToolCallChunkEvent(tool_call_id=cid, tool_call_name=f"t_{uid}", delta=deltas[0])]
    out += [ToolCallChunkEvent(delta=d) for d in deltas[1:]]
    return out


@st.composite
def _single(draw: st.DrawFn, uid: str) -> list[Any]:
    return [
        draw(
            st.sampled_from(
                [
                    StateSnapshotEvent(snapshot={"n": uid}),
                    CustomEvent(name="acme.note", value={"uid": uid}),
                    RawEvent(event={"provider": "x", "uid": uid}),
                    ActivitySnapshotEvent(message_id=f"act_{uid}", activity_type="progress", content={"uid": uid}),
                ]
            )
        )
    ]


# Scripts whose events must stay together (a chunk lane closes on the next event of another kind).
_ATOMIC = {"text_chunks", "tool_chunks"}
_SCRIPTS = {
    "text": _text_script,
    "tool": _tool_script,
    "reasoning": _reasoning_script,
    "step": None,
    "subagent": _subagent_script,
    "text_chunks": _text_chunks,
    "tool_chunks": _tool_chunks,
    "single": _single,
}


@st.composite
def _run_body(draw: st.DrawFn, run: int, interleave: bool = True) -> list[Any]:
    kinds = draw(st.lists(st.sampled_from(sorted(_SCRIPTS)), max_size=6))
    scripts: list[list[Any]] = []
    for i, kind in enumerate(kinds):
        uid = f"{run}_{i}"
        if kind == "step":
            scripts.append([StepStartedEvent(step_name=f"step_{uid}"), StepFinishedEvent(step_name=f"step_{uid}")])
        elif kind in _ATOMIC:
            scripts.append([draw(_SCRIPTS[kind](uid))])  # one atomic block
        else:
            scripts.append(draw(_SCRIPTS[kind](uid)))
    order = [i for i, script in enumerate(scripts) for _ in script]
    if interleave:
        order = draw(st.permutations(order))
    cursors = [0] * len(scripts)
    out: list[Any] = []
    for i in order:
        item = scripts[i][cursors[i]]
        cursors[i] += 1
        if isinstance(item, list):
            out.extend(item)
        else:
            out.append(item)
    return out


@st.composite
def valid_streams(draw: st.DrawFn, *, allow_error_end: bool = True, interleave: bool = True) -> list[Any]:
    """A stream that breaks no rule. With ``allow_error_end`` the last run may end in RUN_ERROR
    at a random point (leaving entities open, which is allowed). Without ``interleave`` a run's
    scripts follow one another (no two entities open at once, save a sub-agent and its message)."""
    events: list[Any] = []
    runs = draw(st.integers(1, 3))
    for run in range(runs):
        events.append(RunStartedEvent(thread_id="thread", run_id=f"run_{run}"))
        body = draw(_run_body(run, interleave))
        if allow_error_end and run == runs - 1 and draw(st.booleans()):
            cut = draw(st.integers(0, len(body)))
            events += body[:cut]
            events.append(RunErrorEvent(message="model overloaded", code="overloaded"))
        else:
            events += body
            events.append(RunFinishedEvent(thread_id="thread", run_id=f"run_{run}"))
    return events


_IDS = st.sampled_from(["a", "b"])
_SOUP_EVENTS = st.one_of(
    st.builds(RunStartedEvent, thread_id=st.just("t"), run_id=st.sampled_from(["r1", "r2"])),
    st.builds(RunFinishedEvent, thread_id=st.just("t"), run_id=st.sampled_from(["r1", "r2"])),
    st.builds(RunErrorEvent, message=st.just("boom")),
    st.builds(TextMessageStartEvent, message_id=_IDS, role=st.sampled_from([None, "user"])),
    st.builds(TextMessageContentEvent, message_id=_IDS, delta=TEXT),
    st.builds(TextMessageEndEvent, message_id=_IDS),
    st.builds(TextMessageChunkEvent, message_id=st.none() | _IDS, delta=st.none() | TEXT),
    st.builds(ToolCallStartEvent, tool_call_id=_IDS, tool_call_name=st.just("f")),
    st.builds(ToolCallArgsEvent, tool_call_id=_IDS, delta=st.sampled_from(["{", "}", '"x"', "1"])),
    st.builds(ToolCallEndEvent, tool_call_id=_IDS),
    st.builds(
        ToolCallChunkEvent, tool_call_id=st.none() | _IDS, tool_call_name=st.none() | st.just("f"), delta=st.none() | st.just("{}")
    ),
    st.builds(ToolCallResultEvent, message_id=st.just("res"), tool_call_id=_IDS, content=st.just("ok")),
    st.builds(StepStartedEvent, step_name=_IDS),
    st.builds(StepFinishedEvent, step_name=_IDS),
    st.builds(ReasoningStartEvent, message_id=_IDS),
    st.builds(ReasoningEndEvent, message_id=_IDS),
    st.builds(ReasoningMessageStartEvent, message_id=_IDS),
    st.builds(ReasoningMessageContentEvent, message_id=_IDS, delta=TEXT),
    st.builds(ReasoningMessageEndEvent, message_id=_IDS),
    st.builds(SubagentStartedEvent, subagent_run_id=_IDS, name=st.just("s")),
    st.builds(SubagentFinishedEvent, subagent_run_id=_IDS),
    st.builds(RawEvent, event=st.just({})),
    st.builds(CustomEvent, name=st.just("x.y"), value=st.just(1)),
)


def event_soup(max_size: int = 25) -> st.SearchStrategy[list[Any]]:
    """Arbitrary event sequences over tiny id alphabets, usually opening with RUN_STARTED (so that
    the run body is exercised, not only the first-event rule): mostly invalid, good for fuzzing."""
    opening = st.sampled_from([[RunStartedEvent(thread_id="t", run_id="r1")]] * 4 + [[]])
    return st.builds(lambda head, body: head + body, opening, st.lists(_SOUP_EVENTS, max_size=max_size))
