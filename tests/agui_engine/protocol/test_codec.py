"""Codecs: SSE / NDJSON / JSON encode and decode, WHATWG rules, split invariance, located errors."""

from __future__ import annotations

import json
import random
import re
import typing
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.protocol.codec import (
    MSGSPEC_MAX_JSON_DEPTH,
    EventDecodeError,
    EventStreamDecoder,
    JSONTooDeepError,
    LegacyThinkingMapper,
    NDJSONDecoder,
    SSEDecoder,
    SSEMessage,
    decode_event,
    encode_event,
    encode_ndjson,
    encode_sse,
    encode_sse_comment,
)
from agui_engine.protocol.errors import LimitExceededError, RemoteInputError, UsageError
from agui_engine.protocol.events import (
    AddOperation,
    CustomEvent,
    Event,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    UnknownEvent,
)
from tests.hypothesis_profiles import at_most

from ..event_samples import ALL_EVENT_SAMPLES

EVENTS: list[Any] = [msgspec.convert(s, Event) for s in ALL_EVENT_SAMPLES]

# --------------------------------------------------------------------------------------------
# Helpers: feed whole, byte by byte, at random cut points
# --------------------------------------------------------------------------------------------


def run(decoder: Any, chunks: list[bytes]) -> tuple[list[Any], str | None]:
    """Feed chunks then close; -> (everything decoded, repr of the error that stopped it)."""
    out: list[Any] = []
    try:
        for chunk in chunks:
            out.extend(decoder.feed(chunk))
        out.extend(decoder.close())
    except (RemoteInputError, UsageError) as err:
        return out, f"{type(err).__name__}: {err}"
    return out, None


def splits(data: bytes, seed: int = 0) -> list[list[bytes]]:
    rnd = random.Random(seed)
    ways = [[data], [data[i : i + 1] for i in range(len(data))], [b""] + [data] + [b""]]
    for _ in range(5):
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randint(1, 12)))) if len(data) > 1 else []
        bounds = [0, *cuts, len(data)]
        ways.append([data[a:b] for a, b in zip(bounds, bounds[1:])])
    return ways


def assert_split_invariant(make: Any, data: bytes) -> tuple[list[Any], str | None]:
    results = [run(make(), chunks) for chunks in splits(data)]
    for other in results[1:]:
        assert other == results[0]
    return results[0]


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def test_encode_sse_frame_shapes() -> None:
    event = TextMessageContentEvent(message_id="m", delta="a\nb\r\nc\u2028")
    payload = encode_event(event)
    assert b"\n" not in payload and b"\r" not in payload
    assert encode_sse(event) == b"data: " + payload + b"\n\n"
    assert encode_sse(event, id="run-1:7") == b"id: run-1:7\ndata: " + payload + b"\n\n"
    assert encode_sse(payload, id="r:1", event="agui") == b"id: r:1\nevent: agui\ndata: " + payload + b"\n\n"
    assert encode_ndjson(event) == payload + b"\n"
    assert encode_sse_comment("ping") == b":ping\n\n"
    got = SSEDecoder().feed(encode_sse(event, id="run-1:7"))
    assert got == [SSEMessage(data=payload.decode(), id="run-1:7")]


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_encode_sse_refuses_ids_and_names_that_would_break_framing(bad: str) -> None:
    event = CustomEvent(name="n", value=1)
    with pytest.raises(UsageError):
        encode_sse(event, id=bad)
    with pytest.raises(UsageError):
        encode_sse(event, event=bad)
    with pytest.raises(UsageError):
        encode_sse_comment(bad)


def test_encode_sse_refuses_pre_encoded_bytes_with_raw_newlines() -> None:
    with pytest.raises(UsageError):
        encode_sse(b'{"type":"CUSTOM",\n"name":"x","value":1}')


def test_unknown_event_is_reencoded_unchanged() -> None:
    data = {"type": "FUTURE_EVENT", "x": [1, None], "nested": {"é": "😀"}}
    event = decode_event(json.dumps(data), tolerant=True)
    assert event == UnknownEvent("FUTURE_EVENT", data)
    assert json.loads(encode_event(event)) == data


# --------------------------------------------------------------------------------------------
# SSE decoding: WHATWG rules (web-platform-tests eventsource/format-* and the known bugs)
# --------------------------------------------------------------------------------------------

M = SSEMessage
WHATWG_CASES: list[tuple[str, bytes, list[SSEMessage]]] = [
    ("bom", b"\xef\xbb\xbfdata: 1\n\n", [M(data="1")]),
    # Only the first BOM is stripped: the second makes the field name "\ufeffdata" (ignored).
    ("double-bom", b"\xef\xbb\xbf\xef\xbb\xbfdata: 1\n\ndata: 2\n\n", [M(data="2")]),
    ("bom-only-at-start", b"data: 1\n\n\xef\xbb\xbfdata: 2\n\n", [M(data="1")]),
    ("comments", b": hi\n:\ndata: a\n: mid\ndata: b\n\n:only comment\n\n", [M(data="a\nb")]),
    (
        "field-parsing",
        b"data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n",
        [M(data="\0\n 2\n1\n3\n\n4")],
    ),
    ("leading-space", b"data:x\n\ndata: x\n\ndata:  x\n\n", [M(data="x"), M(data="x"), M(data=" x")]),
    ("no-colon-is-empty-value", b"data\n\ndata\ndata\n\n", [M(data=""), M(data="\n")]),
    ("newlines-mixed", b"data: a\rdata: b\r\ndata: c\n\rdata: d\r\r\ndata: e\n\n", [M(data="a\nb\nc"), M(data="d"), M(data="e")]),
    ("event-name", b"event: ping\ndata: x\n\nevent: a\nevent: b\ndata: y\n\ndata: z\n\n", [M(data="x", event="ping"), M(data="y", event="b"), M(data="z")]),
    ("event-name-without-data-is-reset", b"event: x\n\ndata: y\n\n", [M(data="y")]),
    ("id-persists", b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", [M(data="a", id="1"), M(data="b", id="1"), M(data="c")]),
    ("id-with-nul-ignored", b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n", [M(data="a", id="1"), M(data="b", id="1")]),
    ("id-only-block", b"id: 7\n\ndata: a\n\n", [M(data="a", id="7")]),
    ("retry", b"retry: 03000\ndata: a\n\nretry: 1000x\ndata: b\n\nretry:\ndata: c\n\nretry: \xd9\xa1\ndata: d\n\n", [M(data="a", retry=3000), M(data="b"), M(data="c"), M(data="d")]),
    ("unfinished-event-dropped", b"data: a\n\ndata: b\n", [M(data="a")]),
    ("unfinished-line-dropped", b"data: a\n\ndata: b", [M(data="a")]),
    ("nul-in-data-kept", b"data: a\0b\n\n", [M(data="a\0b")]),
    (
        "no-split-on-unicode-separators",
        "data: {\"t\":\"a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\"}\n\n".encode(),
        [M(data="{\"t\":\"a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei\"}")],
    ),
    ("utf8", "data: é 😀 漢字\n\n".encode(), [M(data="é 😀 漢字")]),
    ("unknown-field-ignored", b"foo: bar\ndata: a\n\n", [M(data="a")]),
    ("blank-lines", b"\n\n\r\n\rdata: a\n\n\n\n", [M(data="a")]),
]


@pytest.mark.parametrize("name,data,expected", WHATWG_CASES, ids=[c[0] for c in WHATWG_CASES])
def test_sse_whatwg_rules_in_every_split(name: str, data: bytes, expected: list[SSEMessage]) -> None:
    out, error = assert_split_invariant(SSEDecoder, data)
    assert error is None
    assert out == expected
    # CRLF-framed and CR-framed versions of the same stream give the same messages.
    if b"\r" not in data and b"\0" not in data:
        for eol in (b"\r\n", b"\r"):
            assert assert_split_invariant(SSEDecoder, data.replace(b"\n", eol)) == (expected, None)


def test_sse_cr_at_chunk_end_and_lf_at_next_start_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n") == []  # the LF completes CRLF: not a blank line
    assert decoder.feed(b"data: b\r\n\r") == [SSEMessage(data="a\nb")]
    assert decoder.feed(b"\ndata: c\n\n") == [SSEMessage(data="c")]


def test_sse_bom_split_across_chunks_and_stream_state() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"\xef") == [] and decoder.feed(b"\xbb") == []
    assert decoder.feed(b"\xbfid: 9\nretry: 50\ndata: x\n\ndata: y") == [SSEMessage(data="x", id="9", retry=50)]
    assert decoder.last_event_id == "9" and decoder.retry == 50
    assert decoder.close() == [] and decoder.truncated
    complete = SSEDecoder()
    complete.feed(b"data: x\n\n")
    complete.close()
    assert not complete.truncated


def test_empty_chunk_is_not_end_of_input() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == [SSEMessage(data="a")]


def _reference_sse(data: bytes) -> tuple[list[SSEMessage], str]:
    """A direct transcription of the WHATWG algorithm over the whole input (the oracle)."""
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split("\r\n|\r|\n", text)
    lines.pop()  # the part after the last line end is incomplete: discarded at EOF
    out = []
    data_buf, event_buf, last_id, id_buf, retry = "", "", "", "", None
    for line in lines:
        if line == "":
            last_id = id_buf
            if data_buf:
                out.append(SSEMessage(data=data_buf[:-1], event=event_buf or "message", id=id_buf or None, retry=retry))
            data_buf, event_buf, retry = "", "", None
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_buf += value + "\n"
        elif name == "event":
            event_buf = value
        elif name == "id" and "\0" not in value:
            id_buf = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    return out, last_id


SSE_ATOMS = st.sampled_from(
    ["data", "data:", "data: ", "id:", "id: 1", "event:", "event: e", "retry: 15", "retry: x",
     ":", ": c", "\n", "\r", "\r\n", "\n\n", " ", "\0", "é", "😀", "\u2028", "\x85", "{}", "x", "\ufeff", "Data:"]
)


@settings(deadline=None)
@given(st.lists(SSE_ATOMS, max_size=40), st.booleans(), st.data())
def test_sse_matches_the_whatwg_oracle_for_any_split(atoms: list[str], bom: bool, data: st.DataObject) -> None:
    raw = ("\ufeff" if bom else "").encode() + "".join(atoms).encode()
    expected, last_id = _reference_sse(raw)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    bounds = [0, *cuts, len(raw)]
    decoder = SSEDecoder()
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.extend(decoder.feed(raw[a:b]))
    out.extend(decoder.close())
    assert out == expected
    assert decoder.last_event_id == last_id


# --------------------------------------------------------------------------------------------
# SSE errors: typed, located, same for every split, nothing accepted is lost
# --------------------------------------------------------------------------------------------


def test_sse_invalid_utf8_names_its_byte_offset_in_every_split() -> None:
    data = b"data: ok\n\nid: 1\ndata: \xc3\xa9\xff tail\n\ndata: never\n\n"
    out, error = assert_split_invariant(SSEDecoder, data)
    assert out == [SSEMessage(data="ok")]
    assert error == "EventDecodeError: frame 1 at byte 24: invalid UTF-8"
    assert data[24:25] == b"\xff"


def test_sse_oversized_frame_is_a_limit_error_at_the_frame_start() -> None:
    data = b"data: small\n\n: comment\ndata: " + b"x" * 100 + b"\n\ndata: after\n\n"
    out, error = assert_split_invariant(lambda: SSEDecoder(max_frame_bytes=64), data)
    assert out == [SSEMessage(data="small")]
    assert error == "FrameTooLargeError: frame 1 at byte 13: SSE event larger than max_frame_bytes=64"
    with pytest.raises(LimitExceededError) as info:
        SSEDecoder(max_frame_bytes=64).feed(b"data: " + b"y" * 100)
    assert info.value.offset == 0 and info.value.http_status == 413


def test_sse_error_is_deferred_until_accepted_messages_are_delivered_then_sticks() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: \xff\n\n") == [SSEMessage(data="a")]
    with pytest.raises(EventDecodeError) as first:
        decoder.feed(b"data: b\n\n")
    with pytest.raises(EventDecodeError) as again:
        decoder.close()
    assert first.value is again.value and first.value.offset == 15


def test_sse_usage_errors() -> None:
    decoder = SSEDecoder()
    with pytest.raises(UsageError):
        decoder.feed("data: x\n\n")  # type: ignore[arg-type]
    decoder.close()
    with pytest.raises(UsageError):
        decoder.feed(b"data: x\n\n")
    assert SSEDecoder().feed(bytearray(b"data: x\n\n")) == [SSEMessage(data="x")]


# --------------------------------------------------------------------------------------------
# NDJSON
# --------------------------------------------------------------------------------------------


def test_ndjson_lines_blank_lines_crlf_and_final_line() -> None:
    data = b'{"a":1}\n\n  \r\n{"b":"\xe2\x80\xa8"}\r\n{"c":3}'
    out, error = assert_split_invariant(NDJSONDecoder, data)
    assert error is None
    assert out == [b'{"a":1}', b'{"b":"\xe2\x80\xa8"}', b'{"c":3}']


def test_ndjson_oversized_line_names_index_and_offset_in_every_split() -> None:
    data = b'{"a":1}\n\n' + b'"' + b"x" * 40 + b'"\n{"b":2}\n'
    out, error = assert_split_invariant(lambda: NDJSONDecoder(max_line_bytes=16), data)
    assert out == [b'{"a":1}']
    assert error == "FrameTooLargeError: frame 1 at byte 9: NDJSON line larger than max_line_bytes=16"


@settings(deadline=None)
@given(st.lists(st.sampled_from(['{"a":1}', "\n", "\r\n", " ", "\r", "[]", "é", "\u2028"]), max_size=30), st.data())
def test_ndjson_split_invariance_property(atoms: list[str], data: st.DataObject) -> None:
    raw = "".join(atoms).encode()
    lines = [line[:-1] if line.endswith(b"\r") else line for line in raw.split(b"\n")]
    expected = [line for line in lines if line.strip(b" \t\r")]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    bounds = [0, *cuts, len(raw)]
    assert run(NDJSONDecoder(), [raw[a:b] for a, b in zip(bounds, bounds[1:])]) == (expected, None)


# --------------------------------------------------------------------------------------------
# Event streams
# --------------------------------------------------------------------------------------------

SSE_STREAM = b"".join(encode_sse(e, id=f"run-1:{i}") for i, e in enumerate(EVENTS))
NDJSON_STREAM = b"".join(encode_ndjson(e) for e in EVENTS)


@pytest.mark.parametrize("fmt,data", [("sse", SSE_STREAM), ("ndjson", NDJSON_STREAM)])
def test_event_stream_round_trip_in_every_split(fmt: str, data: bytes) -> None:
    out, error = assert_split_invariant(lambda: EventStreamDecoder(fmt), data)  # type: ignore[arg-type]
    assert error is None
    assert out == EVENTS


def test_crlf_framed_sse_event_stream() -> None:
    data = SSE_STREAM.replace(b"\n", b"\r\n")  # JSON never holds a raw LF, so this is framing only
    assert assert_split_invariant(EventStreamDecoder, data) == (EVENTS, None)


@settings(max_examples=at_most(60), deadline=None)
@given(st.data())
def test_event_stream_split_invariance_property(data: st.DataObject) -> None:
    picked = data.draw(st.lists(st.sampled_from(range(len(EVENTS))), min_size=1, max_size=8))
    raw = b"".join(encode_sse(EVENTS[i]) + (b": keep-alive\n\n" if i % 3 == 0 else b"") for i in picked)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    bounds = [0, *cuts, len(raw)]
    assert run(EventStreamDecoder(), [raw[a:b] for a, b in zip(bounds, bounds[1:])]) == ([EVENTS[i] for i in picked], None)


BAD_FRAMES = [
    (b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":42}', "$.delta: expected str, got int"),
    (b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}', "$: object missing required field delta"),
    (b'{"type":"TEXT_MESSAGE_START","messageId":"m","role":"tool"}', "$.role: invalid enum value 'tool'"),
    (b'{"type":"NOT_A_TYPE"}', "$.type: unknown event type 'NOT_A_TYPE'"),
    (b'{"delta":"x"}', "$: object missing required field type"),
    (b'[1,2]', "$: expected object, got array"),
    (b'{"type":"STATE_DELTA","delta":[{"op":"increment","path":"/a"}]}', "$.delta[0].op: invalid value 'increment'"),
    (b'{"type":"STATE_DELTA","delta":[{"op":"add","path":"a","value":1}]}', "$.delta[0].path: expected str matching regex '^(/([^/~]|~[01])*)*$'"),
    (b'{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}}', "$.outcome.interrupts: expected array of length >= 1"),
    (b'{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":7}]}', "$.messages[0].content: expected str | array, got int"),
    (b'{"type":"RUN_ERROR","message":"x","usage":[{"inputTokens":-1}]}', "$.usage[0].inputTokens: expected int >= 0"),
    (b'{"type":"CUSTOM","name":"x"', "not valid JSON: Input data was truncated"),
    (b"not json", "not valid JSON: JSON is malformed: invalid character (byte 4)"),
    (b"[" * 5000, "$: expected object, got array"),
]


@pytest.mark.parametrize("frame,message", BAD_FRAMES, ids=[m[:40] for _, m in BAD_FRAMES])
def test_bad_event_errors_say_where_and_why(frame: bytes, message: str) -> None:
    with pytest.raises(EventDecodeError) as info:
        decode_event(frame)
    assert str(info.value) == message
    assert info.value.http_status == 400
    assert RunErrorEvent.from_error(info.value).code == info.value.code
    assert_located_in_a_stream(frame, f"EventDecodeError: {{where}}: {message}")


def assert_located_in_a_stream(frame: bytes, expected: str) -> None:
    """``frame`` after two good events: those are delivered, the error names frame 2 and its byte."""
    good = encode_sse(CustomEvent(name="ok", value=1))
    stream = good + good + b"data: " + frame + b"\n\n" + good
    out, error = assert_split_invariant(EventStreamDecoder, stream)
    assert out == [CustomEvent(name="ok", value=1)] * 2
    assert error == expected.replace("{where}", f"frame 2 at byte {2 * len(good)}")


def test_json_nested_past_msgspec_depth_is_a_limit_error_with_its_position() -> None:
    frame = b'{"type":"CUSTOM","name":"x","value":' + b"[" * 5000 + b"]" * 5000 + b"}"
    message = f"JSON nested too deeply (more than about MSGSPEC_MAX_JSON_DEPTH={MSGSPEC_MAX_JSON_DEPTH} levels)"
    with pytest.raises(JSONTooDeepError) as info:
        decode_event(frame)
    assert str(info.value) == message
    assert isinstance(info.value, LimitExceededError) and isinstance(info.value, EventDecodeError)
    assert (info.value.http_status, info.value.ws_close_code, info.value.code) == (413, 4413, "json_too_deep")
    assert_located_in_a_stream(frame, f"JSONTooDeepError: {{where}}: {message}")


def test_json_nested_within_the_depth_bound_decodes() -> None:
    depth = MSGSPEC_MAX_JSON_DEPTH // 2
    frame = b'{"type":"CUSTOM","name":"x","value":' + b"[" * depth + b"]" * depth + b"}"
    assert isinstance(decode_event(frame), CustomEvent)


# The issue's list of bad input: each a typed error with its position, never a crash, and the
# events accepted before it are delivered -- however the bytes arrive.
ISSUE_BAD_INPUT = {
    "wrong type in a known field": (
        b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":42}\n\n', 0, "$.delta: expected str, got int"
    ),
    "unknown op in STATE_DELTA": (
        b'data: {"type":"STATE_DELTA","delta":[{"op":"increment","path":"/n","value":1}]}\n\n',
        0,
        "$.delta[0].op: invalid value 'increment'",
    ),
    "non-UTF-8 byte": (b'data: {"type":"CUSTOM","name":"caf\xe9","value":1}\n\n', 34, "invalid UTF-8"),
    "SSE frame that is not JSON": (b"data: {'type': 'CUSTOM'}\n\n", 0, "not valid JSON"),
}


@pytest.mark.parametrize("name", list(ISSUE_BAD_INPUT))
def test_bad_input_is_a_typed_error_at_its_position_and_keeps_what_came_before(name: str) -> None:
    bad, offset_in_frame, why = ISSUE_BAD_INPUT[name]
    before = [CustomEvent(name="a", value=1), TextMessageContentEvent(message_id="m", delta="é 😀")]
    head = b"".join(encode_sse(e, id=str(i)) for i, e in enumerate(before))
    stream = head + bad + encode_sse(CustomEvent(name="never", value=0))
    out, error = assert_split_invariant(EventStreamDecoder, stream)
    assert out == before
    assert error is not None and error.startswith(f"EventDecodeError: frame 2 at byte {len(head) + offset_in_frame}: ")
    assert why in error
    decoder = EventStreamDecoder()
    assert decoder.feed(stream) == before  # the error waits until they are delivered ...
    with pytest.raises(EventDecodeError) as info:
        decoder.feed(b"")  # ... then it is raised, and stays
    assert isinstance(info.value, RemoteInputError) and info.value.frame_index == 2
    assert info.value.offset == len(head) + offset_in_frame


def test_bad_event_in_ndjson_names_line_index_and_offset() -> None:
    good = encode_ndjson(CustomEvent(name="ok", value=1))
    stream = good + b"\n" + b'{"type":"CUSTOM","name":5,"value":1}\n' + good
    out, error = assert_split_invariant(lambda: EventStreamDecoder("ndjson"), stream)
    assert out == [CustomEvent(name="ok", value=1)]
    assert error == f"EventDecodeError: frame 1 at byte {len(good) + 1}: $.name: expected str, got int"


def test_unknown_fields_are_dropped() -> None:
    event = decode_event(b'{"type":"CUSTOM","name":"x","value":1,"futureField":{"a":1}}')
    assert event == CustomEvent(name="x", value=1)


# --------------------------------------------------------------------------------------------
# Tolerant mode and the legacy THINKING_* mapping
# --------------------------------------------------------------------------------------------


def test_tolerant_mode_keeps_unknown_types_and_drops_unknown_union_members() -> None:
    frames = [
        b'{"type":"META","metaType":"x","payload":{"a":1}}',
        b'{"type":"STATE_DELTA","delta":[{"op":"increment","path":"/n","value":1},{"op":"add","path":"/a","value":1}]}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"paused"}}',
        b'{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"x","role":"narrator","content":"?"},{"id":"u","role":"user","content":[{"type":"hologram"},{"type":"text","text":"hi"}]}]}',
    ]
    decoder = EventStreamDecoder(tolerant=True)
    out = decoder.feed(b"".join(b"data: " + f + b"\n\n" for f in frames)) + decoder.close()
    assert out[0] == UnknownEvent("META", {"type": "META", "metaType": "x", "payload": {"a": 1}})
    assert out[1] == StateDeltaEvent(delta=[AddOperation(path="/a", value=1)])
    assert out[2] == RunFinishedEvent(thread_id="t", run_id="r")
    assert [m.id for m in out[3].messages] == ["u"] and len(out[3].messages[0].content) == 1
    assert decoder.warnings == [
        "frame 1: STATE_DELTA $.delta[0]: dropped unknown op 'increment'",
        "frame 2: RUN_FINISHED $.outcome: dropped unknown outcome type 'paused'",
        "frame 3: MESSAGES_SNAPSHOT $.messages[0]: dropped unknown role 'narrator'",
        "frame 3: MESSAGES_SNAPSHOT $.messages[0].content[0]: dropped unknown type 'hologram'",
    ]


def test_tolerant_mode_still_rejects_malformed_known_values() -> None:
    with pytest.raises(EventDecodeError, match=r"\$\.delta: expected str, got int"):
        decode_event(b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":42}', tolerant=True)
    with pytest.raises(EventDecodeError, match="expected object"):
        decode_event(b'{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":"success"}', tolerant=True)


def test_strict_mode_rejects_unknown_types() -> None:
    with pytest.raises(EventDecodeError) as info:
        decode_event(b'{"type":"THINKING_START"}')
    assert info.value.path == "$.type" and info.value.code == "unknown_event"


def test_thinking_events_map_to_reasoning_like_the_ts_compat_layer() -> None:
    ids = iter(["span-1", "msg-1"])
    stream = b"".join(
        b"data: " + json.dumps(obj).encode() + b"\n\n"
        for obj in [
            {"type": "THINKING_START", "title": "Planning", "timestamp": 5},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Let me think 🤔"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END", "rawEvent": {"n": 1}},
        ]
    )
    for strict in (True, False):
        ids = iter(["span-1", "msg-1"])
        decoder = EventStreamDecoder(tolerant=not strict, id_factory=lambda: next(ids))  # noqa: B023 (used within the iteration)
        out = decoder.feed(stream) + decoder.close()
        assert out == [
            ReasoningStartEvent(message_id="span-1", timestamp=5),
            ReasoningMessageStartEvent(message_id="msg-1"),
            ReasoningMessageContentEvent(message_id="msg-1", delta="Let me think 🤔"),
            ReasoningMessageEndEvent(message_id="msg-1"),
            ReasoningEndEvent(message_id="span-1", raw_event={"n": 1}),
        ]
        assert decoder.warnings[0] == "frame 0: deprecated THINKING_START mapped to REASONING_START"


def test_legacy_mapper_without_an_open_span_makes_fresh_ids() -> None:
    mapper = LegacyThinkingMapper()
    a = mapper.map({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "x"})
    b = mapper.map({"type": "THINKING_END"})
    assert a["type"] == "REASONING_MESSAGE_CONTENT" and len(a["messageId"]) == 36
    assert b["type"] == "REASONING_END" and b["messageId"] != a["messageId"]
    with pytest.raises(UsageError):
        mapper.map({"type": "TEXT_MESSAGE_START"})


def test_event_stream_decoder_usage() -> None:
    with pytest.raises(UsageError):
        EventStreamDecoder("protobuf")  # type: ignore[arg-type]
    decoder = EventStreamDecoder("ndjson")
    assert decoder.feed(encode_ndjson(CustomEvent(name="a", value=None))[:-1]) == []
    assert decoder.close() == [CustomEvent(name="a", value=None)]


@pytest.mark.parametrize("fmt", ["sse", "ndjson"])
def test_one_frame_per_feed_gives_the_same_events_and_errors_as_whole_input(fmt: str) -> None:
    encode = (lambda e, i: encode_sse(e, id=f"r:{i}")) if fmt == "sse" else (lambda e, i: encode_ndjson(e))
    frames = [encode(e, i) for i, e in enumerate(EVENTS)]
    bad = (b"data: " if fmt == "sse" else b"") + b'{"type":"CUSTOM","name":1,"value":2}' + (b"\n\n" if fmt == "sse" else b"\n")
    legacy = (b"data: " if fmt == "sse" else b"") + b'{"type":"THINKING_START"}' + (b"\n\n" if fmt == "sse" else b"\n")
    frames[3:3] = [legacy]
    frames.append(bad)
    whole = run(EventStreamDecoder(fmt, id_factory=lambda: "t1"), [b"".join(frames)])  # type: ignore[arg-type]
    framewise = run(EventStreamDecoder(fmt, id_factory=lambda: "t1"), frames)  # type: ignore[arg-type]
    assert framewise == whole
    assert whole[0] == EVENTS[:3] + [ReasoningStartEvent(message_id="t1")] + EVENTS[3:]
    assert whole[1] is not None and f"frame {len(EVENTS) + 1} at byte {sum(map(len, frames[:-1]))}: $.name" in whole[1]
    stream = EventStreamDecoder(fmt)  # type: ignore[arg-type]
    for f in frames[:-1]:
        stream.feed(f)
    assert stream.last_event_id == (f"r:{len(EVENTS) - 1}" if fmt == "sse" else None)


@pytest.mark.parametrize(
    "frame",
    [
        b'data: {"type":"CUSTOM",\r"name":"n","value":1}\n\n',  # CR ends the data line: truncated JSON
        b'data: {"type":"CUSTOM",\n"name":"n","value":1}\n\n',  # LF too
        b'id: 1\r\ndata: {"type":"CUSTOM","name":"n","value":1}\n\n',  # CRLF-framed: a valid frame
        b'id: 1\ndata: {"type":"CUSTOM","name":"n","value":1}\r\n\n',  # CR LF LF: a valid frame
        b'data: {"type":"CUSTOM","name":"n","value":1}\r\n',  # an unfinished frame
        b'id: \xff\ndata: {"type":"CUSTOM","name":"n","value":1}\n\n',  # invalid UTF-8 id
        b'data:{"type":"CUSTOM","name":"n","value":1}\n\n',  # no space after the colon
    ],
)
def test_a_frame_per_feed_that_is_almost_the_common_shape_is_parsed_by_the_rules(frame: bytes) -> None:
    # The one-frame fast path must never accept what the WHATWG parser reads differently.
    good = encode_sse(CustomEvent(name="ok", value=1))
    whole = run(EventStreamDecoder(), [good + frame + good])
    assert run(EventStreamDecoder(), [good, frame, good]) == whole
    decoder = EventStreamDecoder()
    decoder.feed(good)
    assert decoder._framer._idle  # so the next feed is offered to the fast path


def test_unencodable_events_are_usage_errors() -> None:
    for bad in (TextMessageContentEvent(message_id="m", delta="\ud800"), CustomEvent(name="x", value=object())):
        for encode in (encode_event, encode_sse, encode_ndjson, lambda e: encode_sse(e, id="1")):
            with pytest.raises(UsageError, match="cannot encode"):
                encode(bad)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(deadline=None)
@given(text=st.text(), value=JSON_VALUES, ts=st.none() | st.integers(-(2**53 - 1), 2**53 - 1))
def test_round_trip_with_the_sdk_property(text: str, value: Any, ts: int | None) -> None:
    import ag_ui.core as sdk
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    adapter = TypeAdapter(sdk.Event)
    for event in (
        TextMessageContentEvent(message_id=text, delta=text, timestamp=ts),
        CustomEvent(name=text, value=value, metadata={"k": value}),
        StateDeltaEvent(delta=[AddOperation(path="/" + text.replace("~", "~0").replace("/", "~1"), value=value)]),
    ):
        model = adapter.validate_json(encode_event(event))
        frame = EventEncoder().encode(model).encode()
        # Same document (float spelling may differ: pydantic writes 1e+16, msgspec 1e16).
        assert json.loads(frame[6:]) == json.loads(encode_event(event))
        decoder = EventStreamDecoder()
        assert decoder.feed(frame) == [event]


GARBAGE = [
    b"data: {\"type\":\"CUSTOM\",\"name\":5,\"value\":1}\n\n",
    b"data: not json\n\n",
    b"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"\xff\"}\n\n",
    b"id: \xff\ndata: {}\n\n",
    b"data: {\"type\":\"THINKING_START\"}\n\n",
    b"data: {\"type\":\"FUTURE\"}\n\n",
    b"data: " + b"x" * 3000 + b"\n\n",
    b"event: x\r\ndata: {\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":null}\r\n\r\n",
    # A CR is a line end to SSE but whitespace to JSON: the frame's data is cut at it.
    b"data: {\"type\":\"CUSTOM\",\r\"name\":\"n\",\"value\":2}\n\n",
    b"id: 7\ndata: {\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":3}\r\n\n",
]


@settings(deadline=None)
@given(st.data(), st.sampled_from(["sse", "ndjson"]), st.booleans())
def test_event_stream_errors_are_split_invariant_property(data: st.DataObject, fmt: str, tolerant: bool) -> None:
    pieces = data.draw(
        st.lists(st.sampled_from(range(len(EVENTS) + len(GARBAGE))), min_size=1, max_size=8)
    )
    if fmt == "sse":
        frames = [encode_sse(EVENTS[i], id=str(i)) if i < len(EVENTS) else GARBAGE[i - len(EVENTS)] for i in pieces]
    else:
        frames = [encode_ndjson(EVENTS[i]) if i < len(EVENTS) else GARBAGE[i - len(EVENTS)][6:-1] for i in pieces]
    raw = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    bounds = [0, *cuts, len(raw)]

    def make() -> EventStreamDecoder:
        return EventStreamDecoder(fmt, tolerant=tolerant, max_frame_bytes=2048, id_factory=lambda: "x")  # type: ignore[arg-type]

    whole = run(make(), [raw])
    assert run(make(), [raw[a:b] for a, b in zip(bounds, bounds[1:])]) == whole
    assert run(make(), frames) == whole  # a frame per feed: the one-frame fast path


def test_ndjson_oversized_last_line_without_lf() -> None:
    for data in (b'{"a":1}\n' + b"1" * 17, b'{"a":1}\n' + b"1" * 17 + b"\r"):
        out, error = assert_split_invariant(lambda: NDJSONDecoder(max_line_bytes=16), data)
        assert out == [b'{"a":1}']
        assert error == "FrameTooLargeError: frame 1 at byte 8: NDJSON line larger than max_line_bytes=16"
    assert run(NDJSONDecoder(max_line_bytes=16), [b"1" * 16 + b"\r"]) == ([b"1" * 16], None)


BYTE_SOUP = st.lists(
    st.sampled_from([b"data: ", b"id: ", b"event: ", b"retry: 7", b":", b"\n", b"\r", b"\r\n", b"\n\n",
                     b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xa9", b"\0", b'{"type":"CUSTOM","name":"n","value":1}', b"x"])
    | st.binary(max_size=6),
    max_size=30,
).map(b"".join)


@settings(deadline=None)
@given(BYTE_SOUP, st.data())
def test_arbitrary_bytes_give_the_same_result_for_any_split(raw: bytes, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    bounds = [0, *cuts, len(raw)]
    chunks = [raw[a:b] for a, b in zip(bounds, bounds[1:])]
    for make in (
        lambda: SSEDecoder(max_frame_bytes=64),
        lambda: NDJSONDecoder(max_line_bytes=64),
        lambda: EventStreamDecoder("sse", max_frame_bytes=64, id_factory=lambda: "i"),
        lambda: EventStreamDecoder("ndjson", tolerant=True, max_frame_bytes=64, id_factory=lambda: "i"),
    ):
        assert run(make(), chunks) == run(make(), [raw])


# --------------------------------------------------------------------------- tolerant mode knows what events.py declares


def _declared(union: Any) -> tuple[str, set[str]]:
    """The tag field and tags of a union of the event model, read with msgspec.inspect
    (independently of how the codec reads them)."""
    info = msgspec.inspect.type_info(union)
    assert isinstance(info, msgspec.inspect.UnionType)
    fields = {t.tag_field for t in info.types}  # type: ignore[attr-defined]
    assert len(fields) == 1
    return fields.pop(), {t.tag for t in info.types}  # type: ignore[attr-defined]


def test_tolerant_pruning_knows_every_member_the_event_model_declares() -> None:
    """The roles, content-part types, patch ops and outcomes the tolerant decoder keeps are
    derived from the unions of events.py, so a member added there is known at once (not
    pruned silently as 'unknown')."""
    from agui_engine.protocol import codec
    from agui_engine.protocol import events as model

    for known, union in [
        (codec._ROLES, model.Message),
        (codec._PART_TYPES, typing.Union[model.ContentPart, model.BinaryInputContent]),  # binary: upgraded on decode
        (codec._PATCH_OPS, model.JsonPatchOperation),
        (codec._RUN_OUTCOMES, model.RunFinishedOutcome),
        (codec._SUBAGENT_OUTCOMES, model.SubagentFinishedOutcome),
    ]:
        field, tags = _declared(union)
        assert (known.field, set(known.tags)) == (field, tags), union


def test_a_message_of_every_declared_role_and_part_type_survives_tolerant_decoding() -> None:
    from agui_engine.protocol import events as model

    from ..event_samples import ALL_MESSAGES, ALL_PARTS

    _, roles = _declared(model.Message)
    _, part_types = _declared(model.ContentPart)
    assert {m["role"] for m in ALL_MESSAGES} == roles, "event_samples needs a message of every role"
    assert {p["type"] for p in ALL_PARTS} == part_types, "event_samples needs a part of every type"
    user_parts = {"id": "u-parts", "role": "user", "content": ALL_PARTS}
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": [*ALL_MESSAGES, user_parts]}
    warnings: list[str] = []
    event = decode_event(json.dumps(snapshot), tolerant=True, warnings=warnings)
    assert warnings == []
    assert len(event.messages) == len(ALL_MESSAGES) + 1  # type: ignore[union-attr]
    assert len(event.messages[-1].content) == len(ALL_PARTS)  # type: ignore[union-attr]
