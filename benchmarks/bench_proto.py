"""The binary encoding against SSE JSON and against the ``protobuf`` package, on three runs.

Runs (each a list of our event Structs):

* ``genui`` -- bench_codec's realistic run: a 200-token answer, a component tool call in 50
  argument fragments, 20 component ``CUSTOM`` events with JSON Patch, state snapshot and delta,
  a ``MESSAGES_SNAPSHOT`` (305 events);
* ``long-text`` -- one 2,000-delta answer between RUN_STARTED and RUN_FINISHED;
* ``tool-heavy`` -- 20 tool calls, each START + 30 ARGS fragments + END + TOOL_CALL_RESULT, and a
  STATE_DELTA after each.

Groups, per run:

* ``proto-encode-<run>``: events -> bytes for the wire. ``ours`` = ``encode_proto_frame``;
  ``sse`` = ``encode_sse`` (msgspec JSON, the engine's SSE path); ``pb`` = the ``protobuf``
  package (upb, C) with classes built from the same schema (``_proto_schema``), fed the same
  event -> message mapping (``proto._wire_event``) through ``json_format.ParseDict`` and
  ``SerializeToString`` -- what an implementation on the official runtime has to do;
  ``pb-serialize`` = ``SerializeToString`` alone on prebuilt messages (a lower bound).
* ``proto-decode-<run>``: the whole body -> events. ``ours`` = ``ProtoEventDecoder``; ``sse`` =
  ``EventStreamDecoder``; ``pb-parse`` = ``Event.FromString`` per frame only, *no* conversion to
  events (a lower bound for the official runtime: the mapping back to events would come on top).

``test_wire_bytes`` prints bytes per event, protobuf against SSE, for each run. Run:
``pytest benchmarks/bench_proto.py --benchmark-enable --benchmark-only -s``.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from bench_codec import realistic_run  # noqa: E402  (rootdir-relative, as bench_scaleout imports)
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, struct_pb2

from agui_engine.protocol import _proto_schema as schema
from agui_engine.protocol.codec import EventStreamDecoder, encode_sse
from agui_engine.protocol.events import (
    ReplaceOperation,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agui_engine.protocol.proto import _ARMS, ProtoEventDecoder, _wire_event, decode_proto, encode_proto_frame

# --------------------------------------------------------------------------------------------
# the protobuf package's classes, built from the same table
# --------------------------------------------------------------------------------------------

_SCALARS = {"string": 9, "bool": 8, "int32": 5, "int64": 3, "double": 1}  # FieldDescriptorProto.Type


def _pb_event_class() -> Any:
    f = descriptor_pb2.FileDescriptorProto(name="ag_ui_bench.proto", package="ag_ui", syntax="proto3",
                                           dependency=["google/protobuf/struct.proto"])
    for name, members in schema.ENUMS.items():
        enum = f.enum_type.add(name=name)
        for key, number in members.items():
            enum.value.add(name=f"{name}_{key}", number=number)
    for name, fields in schema.MESSAGES.items():
        msg = f.message_type.add(name=name)
        for number, key, _, kind, label in fields:
            fd = msg.field.add(name=key, number=number, json_name=key,
                               label=3 if label == "repeated" else 1)
            if kind.startswith("message:"):
                fd.type, fd.type_name = 11, ".ag_ui." + kind[8:]
            elif kind in ("value", "struct"):
                fd.type, fd.type_name = 11, ".google.protobuf." + kind.capitalize()
            elif kind.startswith("enum:"):
                fd.type, fd.type_name = 14, ".ag_ui." + kind[5:]
            else:
                fd.type = _SCALARS[kind]
                if label == "optional":
                    fd.proto3_optional = True
                    fd.oneof_index = len(msg.oneof_decl)
                    msg.oneof_decl.add(name="_" + key)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ag_ui.Event"))


PB_EVENT = _pb_event_class()


def _pb_encode(event: Any) -> bytes:
    kind, obj = _wire_event(event)
    message = json_format.ParseDict({_ARMS_KEYS[kind]: obj}, PB_EVENT())
    data: bytes = message.SerializeToString()
    return struct.pack(">I", len(data)) + data


_ARMS_KEYS = {kind: key for kind in _ARMS for n, key, *_ in schema.MESSAGES["Event"]
              if key == "".join(p if i == 0 else p.capitalize() for i, p in enumerate(kind.lower().split("_")))}

# --------------------------------------------------------------------------------------------
# the runs
# --------------------------------------------------------------------------------------------


def long_text_run() -> list[Any]:
    words = "The quick brown fox — grüße 👋 — jumps over the lazy dog, again and again".split()
    return [RunStartedEvent(thread_id="thread_1", run_id="run_1"),
            TextMessageStartEvent(message_id="msg_1", role="assistant"),
            *[TextMessageContentEvent(message_id="msg_1", delta=" " + words[i % len(words)]) for i in range(2000)],
            TextMessageEndEvent(message_id="msg_1"), RunFinishedEvent(thread_id="thread_1", run_id="run_1")]


def tool_heavy_run() -> list[Any]:
    events: list[Any] = [RunStartedEvent(thread_id="thread_2", run_id="run_2")]
    args = '{"query":"SELECT city, avg(temp) FROM weather GROUP BY city","limit":100,"format":"table"}'
    step = max(1, len(args) // 30)
    for n in range(20):
        call = f"call_{n:03d}"
        events.append(ToolCallStartEvent(tool_call_id=call, tool_call_name="run_query", parent_message_id="msg_2"))
        events += [ToolCallArgsEvent(tool_call_id=call, delta=args[i : i + step]) for i in range(0, len(args), step)]
        events.append(ToolCallEndEvent(tool_call_id=call))
        events.append(ToolCallResultEvent(message_id=f"res_{n}", tool_call_id=call,
                                          content='[{"city":"Zürich","avg":14.2},{"city":"Bern","avg":13.1}]'))
        events.append(StateDeltaEvent(delta=[ReplaceOperation(path="/calls", value=n + 1)]))
    events.append(RunFinishedEvent(thread_id="thread_2", run_id="run_2"))
    return events


RUNS = {"genui": realistic_run(), "long-text": long_text_run(), "tool-heavy": tool_heavy_run()}
PROTO_BODIES = {name: b"".join(encode_proto_frame(e) for e in run) for name, run in RUNS.items()}
SSE_BODIES = {name: b"".join(encode_sse(e) for e in run) for name, run in RUNS.items()}


def _frames(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        (n,) = struct.unpack_from(">I", body, pos)
        out.append(body[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


PROTO_FRAMES = {name: _frames(body) for name, body in PROTO_BODIES.items()}


def encode_ours(run: str) -> list[bytes]:
    return [encode_proto_frame(e) for e in RUNS[run]]


def encode_sse_json(run: str) -> list[bytes]:
    return [encode_sse(e) for e in RUNS[run]]


def encode_pb(run: str) -> list[bytes]:
    return [_pb_encode(e) for e in RUNS[run]]


PB_MESSAGES = {name: [PB_EVENT.FromString(encode_proto_frame(e)[4:]) for e in run] for name, run in RUNS.items()}


def encode_pb_serialize(run: str) -> list[bytes]:
    """Only upb's serializer, on messages already built: a lower bound no event-to-bytes path reaches."""
    out = []
    for message in PB_MESSAGES[run]:
        data = message.SerializeToString()
        out.append(struct.pack(">I", len(data)) + data)
    return out


def decode_ours(run: str) -> list[Any]:
    decoder = ProtoEventDecoder()
    return decoder.feed(PROTO_BODIES[run]) + decoder.close()


def decode_sse_json(run: str) -> list[Any]:
    decoder = EventStreamDecoder("sse")
    return decoder.feed(SSE_BODIES[run]) + decoder.close()


def decode_pb_parse(run: str) -> list[Any]:
    return [PB_EVENT.FromString(frame) for frame in PROTO_FRAMES[run]]


@pytest.mark.parametrize("run", list(RUNS))
def test_alternatives_agree(run: str) -> None:
    """Same events out of every decoder; pb's bytes decode (by ours) to the same events (its
    bytes need not be equal: upb writes map entries in its own order, not insertion order)."""
    assert decode_ours(run) == decode_sse_json(run) == RUNS[run]
    assert [decode_proto(frame[4:]) for frame in encode_pb(run)] == RUNS[run]
    assert len(decode_pb_parse(run)) == len(RUNS[run])


@pytest.mark.parametrize("run", list(RUNS))
def test_wire_bytes(run: str) -> None:
    """Bytes on the wire per event, protobuf (with its 4-byte prefixes) against SSE JSON."""
    n = len(RUNS[run])
    proto, sse = len(PROTO_BODIES[run]), len(SSE_BODIES[run])
    print(f"\n{run:10s} {n:5d} events: protobuf {proto / n:6.1f} B/event, SSE {sse / n:6.1f} B/event, "
          f"ratio {proto / sse:.2f}")
    assert proto < sse


CASES = {
    "encode": {"ours": encode_ours, "sse": encode_sse_json, "pb": encode_pb, "pb-serialize": encode_pb_serialize},
    "decode": {"ours": decode_ours, "sse": decode_sse_json, "pb-parse": decode_pb_parse},
}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize(("group", "impl"), [(g, i) for g, impls in CASES.items() for i in impls])
def test_proto(benchmark: Any, group: str, run: str, impl: str) -> None:
    benchmark.group = f"proto-{group}-{run}"
    result = benchmark(CASES[group][impl], run)
    assert len(result) == len(RUNS[run])
