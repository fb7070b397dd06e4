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

Per event type, protobuf / SSE JSON side by side (issue 35: "protobuf encoding no dearer than SSE
JSON per event"): ``python benchmarks/bench_proto.py [reps]`` prints, for each event type of the
long-text and tool-heavy runs, the CPU time (``time.process_time``: the machine is shared) per
event of ``encode_proto_frame`` and of ``encode_sse`` over the same events, measured interleaved
(ours, then SSE, then ours ...) ``reps`` times, and the ratio's median and spread; then the same for
the gateway's path from its event log (a JSON payload -> ``proto_frame_from_json`` against the SSE
frame template ``frame_sse``). ``test_per_event_table_runs`` runs it once, tiny, as a smoke test.
"""

from __future__ import annotations

import statistics
import struct
import sys
import time
from collections import defaultdict
from typing import Any

import pytest
from bench_codec import realistic_run  # noqa: E402  (rootdir-relative, as bench_scaleout imports)
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, struct_pb2

from agui_engine.protocol import _proto_schema as schema
from agui_engine.protocol.codec import EventStreamDecoder, encode_event, encode_sse
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
from agui_engine.protocol.proto import (
    _ARMS,
    ProtoEventDecoder,
    _wire_event,
    decode_proto,
    encode_proto_frame,
)
from agui_engine.transports.http_gateway import frame_proto, frame_sse

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


# --------------------------------------------------------------------------------------------
# per event type: protobuf / SSE JSON, side by side in one run
# --------------------------------------------------------------------------------------------


def _cpu_per_item(fn: Any, items: list[Any], loops: int) -> float:
    """CPU seconds per item of ``fn`` over ``items`` (best of 3 passes of ``loops`` rounds)."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(loops):
            for item in items:
                fn(item)
        best = min(best, time.process_time() - start)
    return best / (loops * len(items))


def _frame_proto_one(payload: bytes) -> bytes:
    return frame_proto([payload])


def _frame_sse_one(payload: bytes) -> bytes:
    return frame_sse("run_1", 7, [payload])


def per_event_rows(reps: int = 7, loops: int = 20) -> list[dict[str, Any]]:
    """One row per event type of the long-text and tool-heavy runs, and per gateway path:
    ``{what, events, ours_ns, sse_ns, ratios}``, ours and SSE measured alternately ``reps`` times."""
    by_type: dict[str, list[Any]] = defaultdict(list)
    for run in ("long-text", "tool-heavy"):
        for event in RUNS[run]:
            by_type[event.type.value].append(event)
    cases: list[tuple[str, Any, Any, list[Any]]] = [
        (kind, encode_proto_frame, encode_sse, events) for kind, events in by_type.items()]
    token = by_type["TEXT_MESSAGE_CONTENT"] + by_type["TOOL_CALL_ARGS"]
    cases.append(("gateway log -> frame (content + args)", _frame_proto_one, _frame_sse_one,
                  [encode_event(e) for e in token]))
    for run, events in RUNS.items():
        cases.append((f"whole run: {run}", encode_proto_frame, encode_sse, events))
    rows = []
    for what, ours, sse, items in cases:
        n = max(1, loops * 400 // len(items))  # ~same work per type
        ours_ns, sse_ns = [], []
        for _ in range(reps):
            ours_ns.append(_cpu_per_item(ours, items, n) * 1e9)
            sse_ns.append(_cpu_per_item(sse, items, n) * 1e9)
        rows.append({"what": what, "events": len(items), "ours_ns": ours_ns, "sse_ns": sse_ns,
                     "ratios": [o / s for o, s in zip(ours_ns, sse_ns)]})
    return rows


def print_per_event_table(rows: list[dict[str, Any]]) -> None:
    print("| event type | events | protobuf ns/event | SSE JSON ns/event | protobuf / SSE: median [min-max] |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        ratios = r["ratios"]
        print(f"| {r['what']} | {r['events']:,} | {statistics.median(r['ours_ns']):.0f} | "
              f"{statistics.median(r['sse_ns']):.0f} | {statistics.median(ratios):.2f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] |")


def test_per_event_table_runs() -> None:
    """The per-event table's code runs (tiny: one repetition, one loop); no timing is asserted."""
    rows = per_event_rows(reps=1, loops=1)
    assert {r["what"] for r in rows} >= {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}
    assert all(r["ratios"][0] > 0 for r in rows)


if __name__ == "__main__":
    print_per_event_table(per_event_rows(reps=int(sys.argv[1]) if len(sys.argv) > 1 else 7))
