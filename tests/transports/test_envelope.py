"""The WebSocket / stdio envelope: one set of msgspec Structs that the servers and the
client agents share (``transports/envelope.py``, ``spec/transports.md`` §6)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from websockets.asyncio.client import connect

from agui_engine.protocol.codec import EventDecodeError, LegacyThinkingMapper, encode_event
from agui_engine.protocol.errors import LimitExceededError, RemoteInputError
from agui_engine.protocol.events import ReasoningStartEvent, RunAgentInput, TextMessageContentEvent
from agui_engine.transports import envelope, stdio_client, stdio_server, websocket_client, websocket_server
from agui_engine.transports.envelope import (
    CancelMessage,
    ErrorBody,
    EventLines,
    ResumeMessage,
    RunMessage,
    ServerLine,
    decode_client_message,
    decode_protocol_line,
    encode_client_message,
    error_line,
    keyed_event_line,
    message_run_id,
    run_message,
)
from agui_engine.transports.websocket_client import WebSocketAgent
from agui_engine.transports.websocket_server import start_websocket_server

from .scripted import ScriptedAgent, make_input


def test_client_messages_are_tagged_by_type_and_round_trip() -> None:
    input = make_input("r1")
    messages = [run_message(input), CancelMessage(run_id="r1"), ResumeMessage(run_id="r1", last_event_id="r1:7")]
    wire = [msgspec.json.decode(encode_client_message(m)) for m in messages]
    assert wire[0] == {"type": "run", "input": msgspec.json.decode(msgspec.json.encode(input))}
    assert wire[1] == {"type": "cancel", "runId": "r1"}
    assert wire[2] == {"type": "resume", "runId": "r1", "lastEventId": "r1:7"}
    decoded = [decode_client_message(encode_client_message(m)) for m in messages]
    assert isinstance(decoded[0], RunMessage)
    assert msgspec.json.decode(bytes(decoded[0].input), type=RunAgentInput) == input
    assert decoded[1:] == messages[1:]


@pytest.mark.parametrize(
    ("message", "code", "needle", "run_id"),
    [
        ("{not json", "malformed_json", "not valid JSON", None),
        ("[1]", "bad_input", "Expected `object`", None),
        ('{"type": "dance"}', "bad_input", "`$.type`", None),
        ('{"type": "cancel"}', "bad_input", "`runId`", None),
        ('{"type": "cancel", "runId": 5}', "bad_input", "`$.runId`", None),
        ('{"type": "resume", "runId": "r"}', "bad_input", "`lastEventId`", "r"),
        ('{"type": "run"}', "bad_input", "`input`", None),
    ],
)
def test_a_bad_client_message_says_why_and_which_run(message: str, code: str, needle: str, run_id: str | None) -> None:
    with pytest.raises(RemoteInputError) as info:
        decode_client_message(message)
    assert info.value.code == code and needle in info.value.message, info.value.message
    assert message_run_id(message) == run_id


def test_message_run_id_reads_the_run_of_a_run_message_leniently() -> None:
    assert message_run_id('{"type": "run", "input": {"runId": "x", "messages": 5}}') == "x"
    assert message_run_id('{"type": "run", "input": {"runId": 5}}') is None
    assert message_run_id("[]") is None and message_run_id("{nope") is None


def test_event_lines_carry_the_encoded_event_bytes_under_their_id() -> None:
    events = [TextMessageContentEvent(message_id="m", delta=d) for d in ("a", 'q"uote\n')]
    payloads = [encode_event(e) for e in events]
    lines = EventLines('r"1')(41, payloads)
    assert [msgspec.json.decode(line) for line in lines] == [
        {"id": 'r"1:41', "event": msgspec.json.decode(payloads[0])},
        {"id": 'r"1:42', "event": msgspec.json.decode(payloads[1])},
    ]
    assert all(p in line for p, line in zip(payloads, lines))  # copied, not re-encoded
    decoded = [decode_protocol_line(line, where="w") for line in lines]
    assert [(d.event_id, d.event) for d in decoded] == [('r"1:41', events[0]), ('r"1:42', events[1])]


@pytest.mark.parametrize("run_id", ["r1", 'q"uote\\', "100%d%%s", "@@seq@@:@@event@@", "é\u2028", "x" * 256])
def test_event_lines_are_exactly_the_server_line_encoding(run_id: str) -> None:
    """The per-run template equals encoding a ServerLine, whatever the run id holds
    (quotes, backslashes, %, the template's own placeholders, non-ASCII)."""
    payloads = [encode_event(TextMessageContentEvent(message_id="m", delta=str(i))) for i in range(3)]
    expected = [
        msgspec.json.encode(ServerLine(id=f"{run_id}:{9 + i}", event=msgspec.Raw(p))) for i, p in enumerate(payloads)
    ]
    assert EventLines(run_id)(9, payloads) == expected


def test_error_lines_round_trip_through_the_client_decoder() -> None:
    exc = LimitExceededError("gone")
    ws_line = error_line(exc, "r")
    assert msgspec.json.decode(ws_line) == {"runId": "r", "error": {"code": exc.code, "message": "gone", "status": 4413}}
    item = decode_protocol_line(ws_line, where="w")
    assert (item.event, item.error, item.run_id) == (None, ErrorBody(code=exc.code, message="gone", status=4413), "r")
    stdio_line = error_line(RemoteInputError("bad"), status=False, line=3)
    assert msgspec.json.decode(stdio_line) == {"error": {"code": "bad_input", "message": "bad"}, "line": 3}
    assert msgspec.json.decode(stdio_line, type=ServerLine).line == 3


def test_protocol_lines_envelopes_bare_events_errors_and_garbage() -> None:
    """The one decoder of the WebSocket and stdio output lines (both clients use it)."""
    env = decode_protocol_line(b'{"id":"r:7","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}}', where="w")
    assert env == (("r:7", TextMessageContentEvent(message_id="m", delta="x"), None, None, None))
    keyed = decode_protocol_line(keyed_event_line("r", 1, b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}', "k3y"), where="w")
    assert (keyed.event_id, keyed.run_key, type(keyed.event).__name__) == ("r:1", "k3y", "RunStartedEvent")
    bare = decode_protocol_line(b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}', where="w")
    assert bare.event == env.event and bare.event_id is None
    err = decode_protocol_line(b'{"runId":"r","error":{"code":"c","message":"m"}}', where="w")
    assert (err.event, err.error, err.run_id) == (None, ErrorBody(code="c", message="m"), "r")
    legacy = decode_protocol_line(b'{"type":"THINKING_START"}', where="w", legacy=LegacyThinkingMapper(lambda: "t1"))
    assert isinstance(legacy.event, ReasoningStartEvent)
    for garbage, kind, needle in [
        (b"{not json", RemoteInputError, "stdio line 3"),
        (b'{"hello": 1}', RemoteInputError, "stdio line 3"),
        (b'{"error": {"code": 1}}', RemoteInputError, "stdio line 3"),
        (b'{"id":"r:1","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":1,"delta":"x"}}', EventDecodeError, "$.messageId"),
    ]:
        with pytest.raises(kind) as ei:
            decode_protocol_line(garbage, where="stdio line 3")
        assert needle in str(ei.value)


def test_server_and_clients_use_the_one_definition() -> None:
    """No transport writes or parses the envelope by hand: both ends import these names."""
    for module, names in [
        (websocket_server, ["decode_client_message", "EventLines", "error_line"]),
        (websocket_client, ["encode_client_message", "decode_protocol_line"]),
        (stdio_server, ["decode_client_message", "EventLines", "error_line"]),
        (stdio_client, ["encode_client_message", "decode_protocol_line"]),
    ]:
        for name in names:
            assert getattr(module, name) is getattr(envelope, name), (module.__name__, name)


async def test_websocket_server_answers_envelope_structs_over_a_real_socket() -> None:
    """A raw WebSocket client speaking the Structs: run, then cancel; every line the
    server sends decodes as a ServerLine."""
    async with await start_websocket_server(ScriptedAgent(deltas=1, hang=True)) as srv:
        async with connect(srv.url + "?batch=0") as ws:
            await ws.send(encode_client_message(run_message(make_input("env"))).decode())
            first = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5), type=ServerLine)
            assert first.id == "env:1" and msgspec.json.decode(bytes(first.event))["type"] == "RUN_STARTED"
            await ws.send(encode_client_message(CancelMessage(run_id="env")).decode())
            last = first
            while True:
                last = msgspec.json.decode(await asyncio.wait_for(ws.recv(), 5), type=ServerLine)
                if msgspec.json.decode(bytes(last.event))["type"] in ("RUN_ERROR", "RUN_FINISHED"):
                    break
    assert msgspec.json.decode(bytes(last.event))["code"] == "cancelled"


async def test_websocket_agent_round_trip_uses_the_structs() -> None:
    async with await start_websocket_server(ScriptedAgent(deltas=3)) as srv:
        events = [e async for e in WebSocketAgent(srv.url).run(make_input("rt"))]
    assert events[0].type.value == "RUN_STARTED" and events[-1].type.value == "RUN_FINISHED"
