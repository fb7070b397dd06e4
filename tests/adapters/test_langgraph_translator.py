"""The LangGraph stream translator alone (no graph): hypothesis property tests over model
streams cut into chunks at random, with parallel tool calls interleaved at random and the
tool-call fields (name, id, arguments) arriving in any chunk; and odd items a future
LangGraph might send."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage

from agui_engine.adapters.langgraph import GraphStreamTranslator
from agui_engine.protocol.events import (
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agui_engine.protocol.verify import verify_events
from tests.hypothesis_profiles import at_most

SETTINGS = settings(max_examples=at_most(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
META = {"langgraph_node": "agent", "langgraph_checkpoint_ns": "agent:t1", "ls_provider": "p", "ls_model_name": "m"}
TASK_START = ((), "tasks", {"id": "t1", "name": "agent", "input": {}, "triggers": ()})
TASK_END = ((), "tasks", {"id": "t1", "name": "agent", "error": None, "result": {}, "interrupts": []})


def pieces(draw: Any, text: str) -> list[str]:
    """``text`` cut at random places (every piece non-empty)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6))) if len(text) > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@st.composite
def model_streams(draw: Any) -> tuple[str, dict[str, tuple[str, str]], list[dict[str, Any]]]:
    """(text, {call id: (name, args)}, the chunks' fields in a random interleaving)."""
    text = draw(st.text(alphabet="ab é😀\n", min_size=0, max_size=12))
    n_calls = draw(st.integers(0, 3))
    calls: dict[str, tuple[str, str]] = {}
    streams: list[list[dict[str, Any]]] = []
    for index in range(n_calls):
        call_id, name = f"call_{index}", f"tool_{index}"
        args = msgspec.json.encode({"q": draw(st.text(alphabet='xy"\\ü', max_size=8)), "n": index}).decode()
        calls[call_id] = (name, args)
        frags = pieces(draw, args)
        # the id and the name come in the first or a later chunk; the arguments from any chunk on
        id_at, name_at = draw(st.integers(0, len(frags) - 1)), draw(st.integers(0, len(frags) - 1))
        chunks = []
        for i, frag in enumerate(frags):
            chunks.append({"tool_call_chunks": [{"index": index, "args": frag, "id": call_id if i == id_at else None,
                                                 "name": name if i == name_at else None}]})
        streams.append(chunks)
    text_chunks = [{"content": p} for p in pieces(draw, text)] if text else []
    order: list[dict[str, Any]] = list(text_chunks)  # text first, as models do
    queues = [list(s) for s in streams]
    while any(queues):  # the calls interleaved at random
        choice = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        order.append(queues[choice].pop(0))
    if order and draw(st.booleans()):  # finish_reason on the last data chunk
        order[-1] = {**order[-1], "response_metadata": {"finish_reason": "tool_calls"}}
    return text, calls, order


def run(items: list[Any], client_tools: tuple[str, ...] = ()) -> tuple[list[Any], GraphStreamTranslator]:
    translator = GraphStreamTranslator(client_tool_names=client_tools)
    events: list[Any] = [RunStartedEvent(thread_id="t", run_id="r")]
    for item in items:
        events += translator.feed(item)
    events += translator.finish()
    events.append(RunFinishedEvent(thread_id="t", run_id="r", outcome=translator.outcome()))
    return events, translator


@SETTINGS
@given(model_streams(), st.booleans())
def test_any_chunking_gives_the_whole_text_and_every_call_with_its_arguments(stream: Any, last_chunk: bool) -> None:
    text, calls, order = stream
    items: list[Any] = [TASK_START]
    items += [((), "messages", (AIMessageChunk(id="m1", **{"content": "", **fields}), META)) for fields in order]
    if last_chunk:
        items.append(((), "messages", (AIMessageChunk(id="lc_run--x", content="", chunk_position="last"), META)))
    items.append(TASK_END)
    events, _ = run(items)
    assert verify_events(events) == []
    assert "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent)) == text
    started = {e.tool_call_id: e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)}
    assert started == {call_id: name for call_id, (name, _) in calls.items()}
    args: dict[str, str] = {}
    for e in events:
        if isinstance(e, ToolCallArgsEvent):
            assert e.delta
            args[e.tool_call_id] = args.get(e.tool_call_id, "") + e.delta
    assert args == {call_id: a for call_id, (_, a) in calls.items()}


@SETTINGS
@given(model_streams())
def test_a_whole_message_gives_the_same_as_its_chunks(stream: Any) -> None:
    text, calls, _ = stream
    message = AIMessage(id="m1", content=text, tool_calls=[
        {"id": cid, "name": name, "args": msgspec.json.decode(a), "type": "tool_call"} for cid, (name, a) in calls.items()])
    events, _ = run([TASK_START, ((), "messages", (message, META)), TASK_END])
    assert verify_events(events) == []
    assert "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent)) == text
    args = {e.tool_call_id: msgspec.json.decode(e.delta) for e in events if isinstance(e, ToolCallArgsEvent)}
    assert args == {cid: msgspec.json.decode(a) for cid, (_, a) in calls.items()}


def test_pending_client_calls_results_and_odd_items() -> None:
    chunk = AIMessageChunk(id="m1", content="", tool_call_chunks=[
        {"index": 0, "id": "c1", "name": "confirm", "args": "{}"}, {"index": 1, "id": "c2", "name": "lookup", "args": "{}"}])
    items: list[Any] = [
        TASK_START,
        ((), "messages", (chunk, META)),
        ((), "messages", (ToolMessage(id="tm", tool_call_id="c2", content=[{"type": "text", "text": "x"}]), META)),
        ((), "messages", (ToolMessage(id="tm2", tool_call_id="never-shown", content="y", name="other"), META)),
        ((), "future_mode", {"what": "ever"}),  # a stream mode this adapter does not know: skipped
        ((), "tasks", {"no": "name"}),
        ((), "custom", {1, 2}),  # a value that is not JSON: shown as text
        ((), "values", ["not", "a", "mapping"]),
        ((), "messages", (AIMessageChunk(id="m2", content=[{"type": "unknown_block"}, "plain"]), "not a mapping")),
        TASK_END,
    ]
    events, translator = run(items, client_tools=("confirm",))
    assert verify_events(events) == []
    assert translator.outcome().pending_tool_call_ids == ["c1"]  # type: ignore[union-attr]
    results = {e.tool_call_id: e.content for e in events if isinstance(e, ToolCallResultEvent)}
    assert results == {"c2": '[{"type":"text","text":"x"}]', "never-shown": "y"}
    assert "plain" in [e.delta for e in events if isinstance(e, TextMessageContentEvent)]
