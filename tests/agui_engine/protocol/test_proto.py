"""The binary (protobuf) codec: byte-equal to the official @ag-ui/proto encoder, field-equal to its
decoder, split-invariant, and strict about bad bytes (typed errors naming the byte offset)."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.protocol import proto
from agui_engine.protocol.codec import FrameTooLargeError
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import CustomEvent, Event, TextMessageContentEvent, UnknownEvent
from agui_engine.protocol.proto import (
    MAX_PROTO_DEPTH,
    ProtoDecodeError,
    ProtoEventDecoder,
    ProtoFrameDecoder,
    ProtoTooDeepError,
    UnknownProtoEventError,
    _varint,
    decode_proto,
    encode_proto,
    encode_proto_frame,
)
from tests.helpers import JS, node_with, require
from tests.hypothesis_profiles import at_most, scaled

from ..event_samples import ALL_EVENT_SAMPLES

JS_DIR = Path(__file__).resolve().parents[2] / "js"
SEED = 25
RANDOM_EVENTS = 400
EVENTS: list[Any] = [msgspec.convert(s, Event) for s in ALL_EVENT_SAMPLES]


def official(encode: list[Any] = [], decode: list[bytes] = []) -> dict[str, list[Any]]:  # noqa: B006
    """@ag-ui/proto 1.0.0's encode / decode under node, in one process."""
    node = node_with("@ag-ui/proto")
    request = {"encode": [msgspec.to_builtins(e) for e in encode], "decode": [b.hex() for b in decode]}
    done = subprocess.run([node, "proto_codec.mjs"], cwd=JS_DIR, input=json.dumps(request), capture_output=True,
                          text=True, timeout=120, check=True)
    result: dict[str, list[Any]] = json.loads(done.stdout)
    return result


def test_the_generated_schema_is_what_the_pinned_package_gives() -> None:
    """scripts/gen_proto.py --check: the table and the .proto files are regenerated, not edited
    (from the pinned npm package @ag-ui/proto in tests/js, which it reads)."""
    require((JS / "node_modules" / "@ag-ui" / "proto" / "package.json").is_file(), "the npm package @ag-ui/proto (tests/js)")
    script = Path(__file__).resolve().parents[3] / "scripts" / "gen_proto.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------------------------
# random events: every sample with its strings and free-form JSON values replaced
# --------------------------------------------------------------------------------------------

_FREE_JSON = {"rawEvent", "value", "snapshot", "result", "event", "state", "forwardedProps", "parameters",
              "payload"}
_FIXED = {"type", "role", "op", "path", "from", "subtype", "status", "mimeType", "protocolVersion", "outcome",
          "activityType"}
_KEYS = ["", "a", "1", "01", "0", "-1", "10", "2", "4294967294", "4294967295", "é", "👋", "x y", "__proto__x"]
_TEXT = ["", "a", "Grüße 👋🏽", "\u2028\x00\n", "漢字" * 20, "x" * 200, "\"\\"]


def _text(rng: random.Random) -> str:
    return rng.choice(_TEXT) + "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0xD7FF),
                                                       rng.randrange(0x10000, 0x10FFFF)]))
                                       for _ in range(rng.randrange(6)))


def _json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**53, -(2**53), 2**31, rng.randrange(-10**9, 10**9)])
    if kind == 3:
        return rng.choice([0.5, 1e308, 5e-324, 2.0, -123.456, rng.uniform(-1e6, 1e6)])
    if kind in (4, 5):
        return _text(rng)
    if kind == 6:
        return [_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return _obj(rng, depth)


def _obj(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    return {rng.choice(_KEYS) + (_text(rng) if rng.random() < 0.3 else ""): _json(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def _mutate(rng: random.Random, value: Any, key: str = "") -> Any:
    if key in _FREE_JSON:
        return _json(rng)
    if key in ("metadata", "content") and isinstance(value, dict):
        return _obj(rng)
    if key in _FIXED:
        return value
    if isinstance(value, dict):
        return {k: _mutate(rng, v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mutate(rng, v) for v in value]
    if isinstance(value, str):
        return _text(rng)
    if key == "timestamp":
        return rng.choice([0, 1, 2**53 - 1, -(2**53) + 1, 1767225600123])
    return value


def random_events(n: int, seed: int = SEED) -> list[Any]:
    rng = random.Random(seed)
    out: list[Any] = []
    while len(out) < n:
        sample = _mutate(rng, rng.choice(ALL_EVENT_SAMPLES))
        try:
            out.append(msgspec.convert(sample, Event))
        except msgspec.ValidationError:
            continue  # e.g. a random id where the schema wants a pattern: draw again
    return out


# --------------------------------------------------------------------------------------------
# differential against @ag-ui/proto
# --------------------------------------------------------------------------------------------


def _differential(events: list[Any]) -> None:
    ours = [encode_proto(e) for e in events]
    theirs = official(events, ours)
    enc_diff = [(e, o.hex(), t) for e, o, t in zip(events, ours, theirs["encoded"], strict=True) if o.hex() != t]
    assert enc_diff == [], f"{len(enc_diff)} of {len(events)} encode differently: {enc_diff[:2]}"
    dec_diff = []
    for event, data, decoded in zip(events, ours, theirs["decoded"], strict=True):
        assert "error" not in decoded, (event, decoded)
        mine = decode_proto(data)
        # field for field: their decoded object read through our model is our decoded event, and
        # it is the event that was encoded (up to what protobuf cannot tell apart: an absent
        # repeated field and an empty one, so re-encoding it gives the same bytes)
        if not (mine == msgspec.convert(decoded, Event) and encode_proto(mine) == data):
            dec_diff.append((event, mine, decoded))
    assert dec_diff == [], f"{len(dec_diff)} of {len(events)} decode differently: {dec_diff[:2]}"


def test_every_wire_sample_encodes_to_the_official_bytes_and_decodes_alike() -> None:
    assert {e.type for e in EVENTS} == {t for t in Event.__args__ for t in [t.__struct_config__.tag]}  # type: ignore[attr-defined]
    _differential(EVENTS)


def test_random_events_encode_to_the_official_bytes_and_decode_alike() -> None:
    events = random_events(RANDOM_EVENTS)
    assert len({e.type for e in events}) > 25
    _differential(events)


def test_official_bytes_decode_to_the_same_events() -> None:
    """The other direction: what @ag-ui/proto writes, we read (the bytes come from node)."""
    events = random_events(100, seed=SEED + 1)
    theirs = official(events)
    for event, hex_bytes in zip(events, theirs["encoded"], strict=True):
        mine = decode_proto(bytes.fromhex(hex_bytes))
        assert encode_proto(mine) == encode_proto(event)
        lossy = getattr(getattr(event, "input", None), "resume", []) is None
        assert mine == event or lossy


# --------------------------------------------------------------------------------------------
# framing and split invariance
# --------------------------------------------------------------------------------------------

STREAM_FRAMES = [encode_proto_frame(e) for e in EVENTS]
STREAM = b"".join(STREAM_FRAMES)
#: what the stream decodes to: the events, up to an absent repeated field read back as empty
DECODED = [decode_proto(encode_proto(e)) for e in EVENTS]


def _decode_in(chunks: list[bytes]) -> list[Any]:
    decoder = ProtoEventDecoder()
    out = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def test_whole_stream_and_one_byte_at_a_time_give_the_same_events() -> None:
    assert _decode_in([STREAM]) == DECODED
    assert _decode_in([STREAM[i : i + 1] for i in range(len(STREAM))]) == DECODED
    assert sum(a != b for a, b in zip(DECODED, EVENTS)) == 1  # RUN_STARTED.input.resume None -> []


@settings(max_examples=at_most(60), deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=40))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    assert _decode_in([STREAM[a:b] for a, b in zip(bounds, bounds[1:])]) == DECODED


def test_frame_is_a_big_endian_length_then_the_message() -> None:
    event = TextMessageContentEvent(message_id="m", delta="hi")
    frame = encode_proto_frame(event)
    assert frame[:4] == struct.pack(">I", len(frame) - 4) and frame[4:] == encode_proto(event)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------

GOOD = encode_proto(TextMessageContentEvent(message_id="m1", delta="hello"))


def _frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def _error(data: bytes, **kwargs: Any) -> ProtoDecodeError | FrameTooLargeError:
    decoder = ProtoEventDecoder(**kwargs)
    with pytest.raises((ProtoDecodeError, FrameTooLargeError)) as info:
        decoder.feed(data)
        decoder.close()
    err = info.value
    assert isinstance(err, (ProtoDecodeError, FrameTooLargeError))
    assert 400 <= err.http_status < 500
    return err


def test_truncated_length_prefix_names_its_offset() -> None:
    err = _error(_frame(GOOD) + b"\x00\x00")
    assert err.offset == len(GOOD) + 4 and err.frame_index == 1 and "length prefix: 2 of 4" in str(err)


def test_truncated_message_names_its_offset() -> None:
    err = _error(_frame(GOOD)[:-3])
    assert err.offset == 0 and "truncated message" in str(err)


def test_a_length_of_4_gib_is_refused_before_its_body_is_buffered() -> None:
    framer = ProtoFrameDecoder()
    assert len(framer.feed(_frame(GOOD) * 2 + b"\xff\xff\xff\xff" + b"x" * 10)) == 2  # not lost
    with pytest.raises(FrameTooLargeError) as info:
        framer.feed(b"x" * 10)
    assert info.value.http_status == 413 and info.value.offset == 2 * (len(GOOD) + 4)
    assert len(framer._buf) <= 4 + 10  # nothing past what was fed, nothing of the 4 GiB body awaited
    decoder = ProtoEventDecoder()
    assert len(decoder.feed(_frame(GOOD) * 2 + b"\xff\xff\xff\xff")) == 2
    with pytest.raises(FrameTooLargeError):
        decoder.feed(b"")


def test_unknown_field_numbers_are_skipped_as_protobuf_says() -> None:
    # field 99 (varint) in the envelope and field 77 (bytes) inside the event
    inner = GOOD[2:]
    extra = bytes([0x98, 0x06, 0x01]) + bytes([0xEA, 0x04, 0x01, 0x00])
    message = extra + bytes([GOOD[0], len(inner) + 4]) + inner + bytes([0xEA, 0x04, 0x01, 0x00])
    assert decode_proto(message) == decode_proto(GOOD)


def test_wrong_wire_type_names_field_and_offset() -> None:
    bad = GOOD + bytes([0x10, 0x05])  # envelope arm 2 as a varint
    err = _error(_frame(bad))
    assert err.offset == 4 + len(GOOD) and "wire type varint, expected length-delimited" in str(err)
    inner = bytes([0x10, 0x01])  # TextMessageContentEvent.messageId (2) as a varint
    err = _error(_frame(bytes([0x12, len(inner)]) + inner))
    assert err.offset == 6 and "messageId (field 2): wire type varint" in str(err)


def test_unknown_event_type_is_a_typed_error_or_dropped_when_tolerant() -> None:
    future = bytes([0xFA, 0x03, 0x02, 0x08, 0x63])  # arm 63, an event from a later protocol
    err = _error(_frame(GOOD) + _frame(future))
    assert isinstance(err, UnknownProtoEventError) and err.offset == len(GOOD) + 8 and err.frame_index == 1
    decoder = ProtoEventDecoder(tolerant=True)
    assert len(decoder.feed(_frame(future) + _frame(GOOD))) == 1 and decoder.warnings


def test_base_type_enum_unknown_or_disagreeing_is_an_error() -> None:
    fields = b"\x12\x02m1\x1a\x05hello"
    for type_number, reason in ((99, "the unknown type 99"), (0, "declares TEXT_MESSAGE_START")):
        body = bytes([0x0A, 2, 0x08, type_number]) + fields
        err = _error(_frame(bytes([0x12, len(body)]) + body))
        assert reason in str(err) and err.offset == 4


@pytest.mark.parametrize(
    "message, reason",
    [
        (b"", "names no event"),
        (bytes([0x12, 0x7F]) + b"x", "runs past the end"),
        (bytes([0x12]) + b"\xff" * 6, "varint"),
        (bytes([0x13]), "wire type start-group, expected length-delimited"),
        (bytes([0xFB, 0x03]), "group wire type"),
        (bytes([0x0F]), "wire type invalid (7)"),
        (bytes([0xFF, 0x03]), "invalid wire type 7"),
        (bytes([0x00, 0x00]), "field number 0"),
        (GOOD + encode_proto(CustomEvent(name="n", value=1)), "two events"),
        (bytes([0x12, 0x04, 0x12, 0x02, 0xC3, 0x28]), "invalid UTF-8"),
        # a JsonPatchOperationType value unknown to this version (STATE_DELTA, op 99)
        (bytes.fromhex("4217" "0a020807" "1211" "0863" "12022f61220911000000000000f03f"),
         "$.delta[0].op: invalid value '99'"),
    ],
)
def test_malformed_messages_raise_typed_errors(message: bytes, reason: str) -> None:
    err = _error(_frame(message))
    assert reason in str(err) and err.offset is not None and err.frame_index == 0


def test_nesting_past_the_limit_is_a_413_not_a_crash() -> None:
    value: Any = 1
    for _ in range(MAX_PROTO_DEPTH):
        value = [value]
    # built by hand: ListValue(Value(ListValue(...))) as CustomEvent.value
    payload = b"\x11" + struct.pack("<d", 1.0)
    for _ in range(MAX_PROTO_DEPTH):
        inner = b"\x0a" + bytes(_varint(len(payload))) + payload
        payload = b"\x32" + bytes(_varint(len(inner))) + inner
    base = b"\x08\x0a"
    body = b"\x0a" + bytes([len(base)]) + base + b"\x12\x01n" + b"\x1a" + _varint(len(payload)) + payload
    err = _error(_frame(b"\x5a" + _varint(len(body)) + body))
    assert isinstance(err, ProtoTooDeepError) and err.http_status == 413




def test_numbers_travel_as_doubles_and_integral_ones_come_back_as_ints() -> None:
    event = CustomEvent(name="n", value=[1, 2.5, -0.0, 2**53, float("nan")])
    assert decode_proto(encode_proto(event)) == CustomEvent(name="n", value=[1, 2.5, 0, 2**53, None])
    decoded = decode_proto(encode_proto(event))
    assert isinstance(decoded, CustomEvent) and type(decoded.value[0]) is int


def test_decoded_before_the_error_is_not_lost() -> None:
    decoder = ProtoEventDecoder()
    assert len(decoder.feed(_frame(GOOD) + _frame(b"\x13"))) == 1
    with pytest.raises(ProtoDecodeError):
        decoder.feed(b"")
    with pytest.raises(ProtoDecodeError):
        decoder.close()


def test_a_schema_error_names_the_json_path() -> None:
    # TEXT_MESSAGE_CONTENT with an empty delta: valid protobuf, invalid AG-UI event
    err = _error(_frame(encode_proto(TextMessageContentEvent(message_id="m", delta="x"))[:-3]))
    assert err.offset is not None


def test_what_has_no_protobuf_form_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        encode_proto(UnknownEvent("FUTURE", {"type": "FUTURE"}))
    with pytest.raises(UsageError):
        encode_proto(CustomEvent(name="n", value={"k": object()}))
    with pytest.raises(UsageError):
        encode_proto(CustomEvent(name="\ud800", value=1))
    with pytest.raises(UsageError):
        ProtoFrameDecoder().feed("text")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# the fast paths decide nothing the general code would decide differently
# --------------------------------------------------------------------------------------------


def _general(message: bytes) -> dict[str, Any] | None:
    try:
        return proto._message_to_dict(message, [])
    except (proto._Bad, proto._Invalid):
        return None


def test_flat_fast_path_equals_the_general_decoder_on_every_event() -> None:
    hits = 0
    for event in [*EVENTS, *random_events(200, seed=SEED + 2)]:
        message = encode_proto(event)
        flat = proto._flat_dict(message)
        if flat is not None:
            hits += 1
            assert flat == _general(message), event
    assert hits >= 25


@settings(deadline=None)
@given(st.sampled_from([encode_proto(e) for e in EVENTS if type(e) in proto._FLAT]), st.data())
def test_flat_fast_path_on_damaged_bytes_is_none_or_the_general_answer(message: bytes, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(message) - 1))
    damaged = message[:index] + bytes([data.draw(st.integers(0, 255))]) + message[index + 1 :]
    damaged = damaged[: data.draw(st.integers(index, len(damaged)))]
    flat = proto._flat_dict(damaged)
    assert flat is None or flat == _general(damaged)


def test_flat_encoder_equals_the_table_walk() -> None:
    """The attribute encoders (string events: _FLAT; state, activity, custom, raw: _ATTRS) write the
    table walk's bytes, on every sample and on random events (random free JSON in every Value)."""
    assert {c.__name__ for c in proto._ATTRS} == {"ActivityDeltaEvent", "ActivitySnapshotEvent", "CustomEvent",
                                                  "RawEvent", "StateDeltaEvent", "StateSnapshotEvent"}
    covered = set()
    for event in [*EVENTS, *random_events(400, seed=SEED + 3)]:
        if type(event) in proto._FLAT or type(event) in proto._ATTRS:
            covered.add(type(event))
            kind, obj = proto._wire_event(event)
            tag, name = proto._ARMS[kind]
            assert encode_proto(event) == proto._ld(tag, proto._enc_message(name, obj))
    assert set(proto._ATTRS) <= covered


_FREE_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=at_most(60), deadline=None)
@given(_FREE_JSON_VALUES, st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
       st.text(max_size=10).map(lambda t: t.replace("~", "~0").replace("/", "~1")),  # one pointer token
       st.none() | st.integers(-(2**53) + 1, 2**53 - 1))
def test_state_and_custom_encoders_equal_the_table_walk(value: Any, op: str, path: str, timestamp: int | None) -> None:
    """Free JSON of any shape (NaN and infinities, big ints, index-like keys -- "²" is a digit to
    Python, not an index to JavaScript --, empty strings) and every operation kind: the attribute
    encoder's bytes are the table walk's."""
    operation = {"op": op, "path": "/" + path, **({"from": "/x"} if op in ("move", "copy") else {}),
                 **({"value": value} if op in ("add", "replace", "test") else {})}
    samples = [{"type": "STATE_DELTA", "delta": [operation, operation]},
               {"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "a", "patch": [operation]},
               {"type": "CUSTOM", "name": path, "value": value},
               {"type": "STATE_SNAPSHOT", "snapshot": value},
               {"type": "RAW", "event": value, "source": path or None},
               {"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "a", "content": {"v": value},
                "replace": bool(path)}]
    for sample in samples:
        event = msgspec.convert({**sample, "timestamp": timestamp}, Event)
        kind, obj = proto._wire_event(event)
        tag, name = proto._ARMS[kind]
        assert encode_proto(event) == proto._ld(tag, proto._enc_message(name, obj))


def _table_walk_frame(event: Any) -> bytes:
    kind, obj = proto._wire_event(event)
    tag, name = proto._ARMS[kind]
    message = proto._ld(tag, proto._enc_message(name, obj))
    return struct.pack(">I", len(message)) + message


_TOKEN_TEXT = st.text(st.characters(codec="utf-8"), max_size=300) | st.sampled_from(["", "a", "x" * 127, "é" * 64])


@settings(max_examples=at_most(300), deadline=None)
@given(st.sampled_from(sorted(proto._PAIRS, key=lambda c: c.__name__)), _TOKEN_TEXT, _TOKEN_TEXT,
       st.none() | st.sampled_from(["sub-1", ""]), st.none() | st.sampled_from([0, 5, 1767225600123]))
def test_token_stream_fast_path_writes_the_table_walks_bytes(
    cls: Any, key: str, delta: str, subagent: str | None, timestamp: int | None
) -> None:
    """The one-step writer of text / tool-args / reasoning content (any id and delta: empty, ASCII,
    multi-byte, either side of the one-byte varint at 128, with the optional fields or without)
    gives the table walk's frame, through encode_proto_frame and encode_proto alike."""
    key_attr = cls.__struct_fields__[4]
    event = cls(**{key_attr: key, "delta": delta, "subagent_run_id": subagent, "timestamp": timestamp})
    expected = _table_walk_frame(event)
    assert encode_proto_frame(event) == expected
    assert encode_proto(event) == expected[4:]


def test_token_stream_fast_path_covers_the_token_events_and_refuses_what_the_general_path_refuses() -> None:
    assert {c.__name__ for c in proto._PAIRS} == {"TextMessageContentEvent", "ToolCallArgsEvent",
                                                  "ReasoningMessageContentEvent"}
    with pytest.raises(UsageError):
        encode_proto_frame(TextMessageContentEvent(message_id="m", delta="\ud800"))  # a lone surrogate


# twice the profile: damage (set, insert, delete at any offset) times the frames times the splits is a
# large space whose rare corners (a damaged length prefix) are the point
@settings(max_examples=scaled(2), deadline=None)
@given(st.sampled_from(STREAM_FRAMES), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255),
                                                          st.sampled_from(["set", "insert", "delete"])),
                                                min_size=1, max_size=4), st.data())
def test_damaged_frames_are_events_or_typed_errors_alike_in_any_split(
    frame: bytes, edits: list[tuple[int, int, str]], data: st.DataObject
) -> None:
    """Any damage to a frame (bytes changed, inserted, deleted; the length prefix too): the
    decoder gives events or an error of the error tree with a 4xx status, whole or split."""
    from agui_engine.protocol.errors import AguiEngineError

    damaged = bytearray(frame)
    for where, value, how in edits:
        i = where % (len(damaged) + 1)
        if how == "set" and i < len(damaged):
            damaged[i] = value
        elif how == "insert":
            damaged[i:i] = bytes([value])
        elif i < len(damaged):
            del damaged[i]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(damaged)), max_size=5)))

    def outcome(chunks: list[bytes]) -> Any:
        try:
            return _decode_in(chunks)
        except AguiEngineError as err:
            assert 400 <= err.http_status < 500
            return (type(err), err.offset, err.frame_index)

    whole = outcome([bytes(damaged)])
    pieces = [bytes(damaged[a:b]) for a, b in zip([0, *cuts], [*cuts, len(damaged)], strict=True)]
    assert outcome(pieces) == whole
