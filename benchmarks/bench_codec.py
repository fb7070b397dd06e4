"""Event codec throughput: ours (msgspec) against the official SDK, side by side in one run.

Workload: one realistic run of 300 events, shaped like what the gateway streams -- RUN_STARTED,
a 200-token text message, a tool call whose arguments arrive in 50 fragments, component CUSTOM
events with JSON Patch operations, a state snapshot and delta, a MESSAGES_SNAPSHOT, RUN_FINISHED.

* ``encode``: events -> SSE frames as bytes. Ours: ``encode_sse``; SDK: ``EventEncoder.encode``
  + UTF-8 encoding (the transport must send bytes).
* ``decode``: the whole SSE body -> event objects. Ours: ``EventStreamDecoder.feed`` (the
  WHATWG parser + msgspec); SDK (which has no SSE decoder): split on blank lines, strip
  ``data: ``, ``TypeAdapter(Event).validate_json`` -- the minimum a client must do.
* ``decode-per-frame``: the same, but fed one frame per ``feed`` call, as a socket delivers it.
* ``decode-json``: one event's JSON text -> object, no framing (``decode_event`` vs
  ``validate_json``).

Run: ``pytest benchmarks/bench_codec.py --benchmark-enable --benchmark-only``; the summary
prints the ratio of each alternative to ours per group (benchmarks/conftest.py). In CI
(``--benchmark-disable``) every function runs once, as a smoke test.
"""

from __future__ import annotations

from typing import Any

import ag_ui.core as sdk
import pytest
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

from agui_engine.protocol.codec import EventStreamDecoder, decode_event, encode_event, encode_sse
from agui_engine.protocol.events import (
    AddOperation,
    AssistantMessage,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ReplaceOperation,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UserMessage,
)

SDK_EVENT: Any = TypeAdapter(sdk.Event)
SDK_ENCODER = EventEncoder()


def realistic_run() -> list[Any]:
    events: list[Any] = [RunStartedEvent(thread_id="thread_8f2c", run_id="run_41d0", protocol_version="1.0")]
    events.append(TextMessageStartEvent(message_id="msg_01", role="assistant"))
    words = "Here is the forecast for Zürich — mostly sunny ☀️, highs of 21 °C and light wind".split()
    events += [TextMessageContentEvent(message_id="msg_01", delta=" " + words[i % len(words)]) for i in range(200)]
    events.append(TextMessageEndEvent(message_id="msg_01"))
    events.append(ToolCallStartEvent(tool_call_id="call_7", tool_call_name="show_component_WeatherCard", parent_message_id="msg_01"))
    args = '{"city":"Zürich","days":[{"day":"Mon","high":21,"low":12,"sky":"sunny"}],"units":"metric"}'
    step = max(1, len(args) // 50)
    events += [ToolCallArgsEvent(tool_call_id="call_7", delta=args[i : i + step]) for i in range(0, len(args), step)]
    events.append(ToolCallEndEvent(tool_call_id="call_7"))
    for i in range(20):
        events.append(
            CustomEvent(
                name="tambo.component.props_delta",
                value={
                    "componentId": "cmp_1",
                    "operations": [{"op": "replace", "path": "/days/0/sky", "value": "sun" + "n" * i}],
                    "streamingStatus": {"city": "done", "days": "streaming"},
                },
            )
        )
    events.append(StateSnapshotEvent(snapshot={"city": "Zürich", "units": "metric", "history": list(range(20))}))
    events.append(StateDeltaEvent(delta=[ReplaceOperation(path="/city", value="Bern"), AddOperation(path="/history/-", value=21)]))
    events.append(
        MessagesSnapshotEvent(
            messages=[
                UserMessage(id="u1", content="What's the weather in Zürich?"),
                AssistantMessage(
                    id="msg_01",
                    content="Here is the forecast",
                    tool_calls=[ToolCall(id="call_7", function=FunctionCall(name="show_component_WeatherCard", arguments=args))],
                ),
            ]
        )
    )
    events.append(RunFinishedEvent(thread_id="thread_8f2c", run_id="run_41d0"))
    return events


OURS = realistic_run()
THEIRS = [SDK_EVENT.validate_json(encode_event(e)) for e in OURS]
BODY = b"".join(encode_sse(e) for e in OURS)
FRAMES = [encode_sse(e) for e in OURS]
JSON_TEXTS = [encode_event(e) for e in OURS]


def encode_ours() -> list[bytes]:
    return [encode_sse(e) for e in OURS]


def encode_sdk() -> list[bytes]:
    return [SDK_ENCODER.encode(m).encode("utf-8") for m in THEIRS]


def decode_ours() -> list[Any]:
    decoder = EventStreamDecoder("sse")
    return decoder.feed(BODY) + decoder.close()


def decode_sdk() -> list[Any]:
    return [SDK_EVENT.validate_json(frame[6:]) for frame in BODY.split(b"\n\n")[:-1]]


def decode_per_frame_ours() -> list[Any]:
    decoder = EventStreamDecoder("sse")
    out: list[Any] = []
    for frame in FRAMES:
        out += decoder.feed(frame)
    return out + decoder.close()


def decode_per_frame_sdk() -> list[Any]:
    # A client that gets one frame per read still has to buffer and split.
    out: list[Any] = []
    buffer = b""
    for chunk in FRAMES:
        buffer += chunk
        *frames, buffer = buffer.split(b"\n\n")
        out += [SDK_EVENT.validate_json(frame[6:]) for frame in frames]
    return out


def decode_json_ours() -> list[Any]:
    return [decode_event(t) for t in JSON_TEXTS]


def decode_json_sdk() -> list[Any]:
    return [SDK_EVENT.validate_json(t) for t in JSON_TEXTS]


def test_alternatives_agree() -> None:
    """Both sides produce the same bytes and the same events, so the race is fair."""
    ours, theirs = encode_ours(), encode_sdk()
    for a, b, e in zip(ours, theirs, OURS):
        if not isinstance(e, MessagesSnapshotEvent):  # message key order differs (role first)
            assert a == b
    assert decode_ours() == decode_per_frame_ours() == decode_json_ours() == OURS
    assert [m.type for m in decode_sdk()] == [m.type for m in decode_per_frame_sdk()] == [m.type for m in THEIRS]


CASES = {
    "encode": (encode_ours, encode_sdk),
    "decode": (decode_ours, decode_sdk),
    "decode-per-frame": (decode_per_frame_ours, decode_per_frame_sdk),
    "decode-json": (decode_json_ours, decode_json_sdk),
}


@pytest.mark.parametrize("impl", ["ours", "sdk"])
@pytest.mark.parametrize("group", list(CASES))
def test_codec(benchmark: Any, group: str, impl: str) -> None:
    benchmark.group = f"codec-{group}"
    func = CASES[group][0 if impl == "ours" else 1]
    result = benchmark(func)
    assert len(result) == len(OURS)
