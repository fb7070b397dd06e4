"""The event model against the official SDK (ag-ui-protocol 1.0.0): names, fields, interop."""

from __future__ import annotations

import json
import typing
from typing import Any

import ag_ui._generated.models as sdk  # the real source; ag_ui.core re-exports most of it
import msgspec
import pytest
from ag_ui.encoder import EventEncoder
from pydantic import BaseModel, TypeAdapter

from agui_engine.protocol import events as ev
from agui_engine.protocol.codec import EventStreamDecoder, decode_event, encode_event, encode_sse
from agui_engine.protocol.events import (
    EVENT_CLASSES,
    AssistantMessage,
    CustomEvent,
    Event,
    EventType,
    FunctionCall,
    ImagePart,
    Interrupt,
    Message,
    MoveOperation,
    ReasoningMessageStartEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextPart,
    ToolCall,
    UrlSource,
    UserMessage,
)
from tests.helpers import node_with

from ..event_samples import ALL_EVENT_SAMPLES, ALL_MESSAGES, EVENTS, MESSAGES, RUN_INPUT_FULL, RUN_INPUT_MIN, sample_id

SDK_EVENT = TypeAdapter(sdk.Event)
SDK_MESSAGE = TypeAdapter(sdk.Message)
ENCODER = EventEncoder()


def _union_members(annotated: Any) -> tuple[Any, ...]:
    union = typing.get_args(annotated)[0] if typing.get_origin(annotated) is typing.Annotated else annotated
    return typing.get_args(union)


SDK_EVENT_CLASSES = {cls.model_fields["type"].default.value: cls for cls in _union_members(sdk.Event)}

# Our Struct -> the SDK model it mirrors (every type the issue lists).
PAIRS: list[tuple[type, type[BaseModel]]] = [
    (EVENT_CLASSES[EventType(t)], cls) for t, cls in SDK_EVENT_CLASSES.items()
] + [
    (getattr(ev, name), getattr(sdk, name))
    for name in [
        "DeveloperMessage", "SystemMessage", "AssistantMessage", "UserMessage", "ToolMessage",
        "ActivityMessage", "ReasoningMessage", "ToolCall", "FunctionCall", "TextPart", "ImagePart",
        "AudioPart", "VideoPart", "DocumentPart", "DataSource", "UrlSource", "FileSource",
        "AddOperation", "RemoveOperation", "ReplaceOperation", "MoveOperation", "CopyOperation",
        "TestOperation", "RunAgentInput", "Tool", "Context", "ResumeEntry", "Interrupt",
        "TokenUsage", "RunFinishedSuccessOutcome", "RunFinishedInterruptOutcome",
        "RunFinishedCancelledOutcome", "SubagentFinishedSuccessOutcome",
        "SubagentFinishedSuspendedOutcome",
    ]
]


def _our_fields(cls: type) -> dict[str, bool]:
    """wire name -> required, the tag included (always written, required on decode in a union)."""
    fields = {f.encode_name: f.required for f in msgspec.structs.fields(cls)}
    config = cls.__struct_config__
    if config.tag_field is not None:
        fields[config.tag_field] = True
    return fields


def _sdk_fields(model: type[BaseModel]) -> dict[str, bool]:
    out = {}
    for name, info in model.model_fields.items():
        wire = info.serialization_alias or info.alias or name
        # Literal discriminators are defaulted in the SDK but required inside its unions.
        required = info.is_required() or (name in ("type", "role", "op") and info.default is not None)
        out[wire] = required
    return out


def test_all_31_event_types_with_sdk_class_names() -> None:
    assert len(EventType) == 31
    assert {t.value for t in EventType} == {t.value for t in sdk.EventType}
    assert len(typing.get_args(Event)) == 31
    for type_name, sdk_cls in SDK_EVENT_CLASSES.items():
        ours = EVENT_CLASSES[EventType(type_name)]
        assert ours.__name__ == sdk_cls.__name__
        assert ours.__struct_config__.tag == type_name
        assert ours.__struct_config__.tag_field == "type"


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=lambda c: c.__name__)
def test_fields_match_the_sdk(ours: type, theirs: type[BaseModel]) -> None:
    mine, sdks = _our_fields(ours), _sdk_fields(theirs)
    assert mine.keys() == sdks.keys()
    # Deliberate difference: absent tools/context are empty lists (the spec says equivalent).
    relaxed = {"tools", "context"} if ours is RunAgentInput else set()
    # REASONING_MESSAGE_START.role: both fill it in when absent.
    if ours is ReasoningMessageStartEvent:
        relaxed.add("role")
    for name in mine.keys() - relaxed:
        assert mine[name] == sdks[name], f"{ours.__name__}.{name} required-ness differs"
    assert ours.__name__ == theirs.__name__
    assert ours.__struct_config__.frozen
    assert ours.__struct_config__.omit_defaults


def test_samples_cover_every_field_of_every_event() -> None:
    for type_name, pair in EVENTS.items():
        cls = EVENT_CLASSES[EventType(type_name)]
        assert set(pair["full"]) == set(_our_fields(cls)), type_name
        required = {k for k, req in _our_fields(cls).items() if req}
        assert set(pair["minimal"]) == required | {"type"}, type_name
    for role, pair in MESSAGES.items():
        cls = next(c for c in typing.get_args(Message) if c.__struct_config__.tag == role)
        assert set(pair["full"]) == set(_our_fields(cls)), role


# --------------------------------------------------------------------------------------------
# Interop in both directions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ALL_EVENT_SAMPLES, ids=sample_id)
def test_our_bytes_decode_with_the_sdk_to_an_equal_model(sample: dict[str, Any]) -> None:
    ours = msgspec.convert(sample, Event)
    data = encode_event(ours)
    expected = SDK_EVENT.validate_python(sample)
    assert SDK_EVENT.validate_json(data) == expected
    # Same JSON document as the SDK writes (key order differs only for messages, whose
    # ``role`` tag msgspec writes first).
    assert json.loads(data) == json.loads(expected.model_dump_json(by_alias=True))
    if "messages" not in sample and "input" not in sample:
        assert data == expected.model_dump_json(by_alias=True).encode()


@pytest.mark.parametrize("sample", ALL_EVENT_SAMPLES, ids=sample_id)
def test_sdk_encoder_bytes_decode_with_ours_to_an_equal_struct(sample: dict[str, Any]) -> None:
    model = SDK_EVENT.validate_python(sample)
    frame = ENCODER.encode(model).encode("utf-8")
    decoder = EventStreamDecoder("sse")
    got = decoder.feed(frame) + decoder.close()
    assert got == [msgspec.convert(sample, Event)]
    # And our SSE frame for it is byte-identical to the SDK's where key order allows.
    if "messages" not in sample and "input" not in sample:
        assert encode_sse(got[0]) == frame


@pytest.mark.parametrize("sample", ALL_MESSAGES, ids=sample_id)
def test_messages_interop(sample: dict[str, Any]) -> None:
    ours = msgspec.json.decode(json.dumps(sample), type=Message)
    assert SDK_MESSAGE.validate_json(msgspec.json.encode(ours)) == SDK_MESSAGE.validate_python(sample)
    sdk_bytes = SDK_MESSAGE.validate_python(sample).model_dump_json(by_alias=True)
    assert msgspec.json.decode(sdk_bytes, type=Message) == ours


@pytest.mark.parametrize("sample", [RUN_INPUT_FULL, RUN_INPUT_MIN], ids=["full", "minimal"])
def test_run_agent_input_interop(sample: dict[str, Any]) -> None:
    ours = msgspec.json.decode(json.dumps(sample), type=RunAgentInput)
    theirs = sdk.RunAgentInput.model_validate(sample)
    assert sdk.RunAgentInput.model_validate_json(msgspec.json.encode(ours)) == theirs.model_copy(
        update={"tools": theirs.tools or None, "context": theirs.context or None}
    )
    assert msgspec.json.decode(theirs.model_dump_json(by_alias=True), type=RunAgentInput) == ours


def test_run_agent_input_as_the_ts_client_sends_it() -> None:
    body = {
        "threadId": "t", "runId": "r", "state": {}, "messages": [
            {"id": "u1", "role": "user", "content": "Hello! Please respond briefly."}
        ], "tools": [], "context": [], "forwardedProps": {},
    }
    got = msgspec.json.decode(json.dumps(body), type=RunAgentInput)
    assert got.tools == [] and got.context == [] and got.state == {} and got.forwarded_props == {}
    assert got.messages == [UserMessage(id="u1", content="Hello! Please respond briefly.")]


# --------------------------------------------------------------------------------------------
# The Python API
# --------------------------------------------------------------------------------------------


def test_constructing_with_python_names_equals_decoding_the_wire_form() -> None:
    built = RunFinishedEvent(
        thread_id="thread-1",
        run_id="run-1",
        outcome=RunFinishedInterruptOutcome(interrupts=[Interrupt(id="int-2", reason="input_required")]),
    )
    wire = {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "int-2", "reason": "input_required"}]}}
    assert decode_event(json.dumps(wire)) == built
    assert json.loads(encode_event(built)) == wire
    msg = AssistantMessage(id="a", tool_calls=[ToolCall(id="c", function=FunctionCall(name="f", arguments="{}"))])
    assert json.loads(msgspec.json.encode(msg)) == {
        "role": "assistant", "id": "a",
        "toolCalls": [{"type": "function", "id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    user = UserMessage(id="u", content=[TextPart(text="hi"), ImagePart(source=UrlSource(value="https://x/y.png"))])
    assert SDK_MESSAGE.validate_json(msgspec.json.encode(user)).content[1].source.value == "https://x/y.png"


def test_structs_are_frozen_keyword_only_and_know_their_type() -> None:
    e = TextMessageContentEvent(message_id="m", delta="x")
    assert e.type is EventType.TEXT_MESSAGE_CONTENT
    with pytest.raises(AttributeError):
        e.delta = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        TextMessageContentEvent("m", "x")  # type: ignore[misc]
    assert e == TextMessageContentEvent(message_id="m", delta="x")
    assert hash(e) == hash(TextMessageContentEvent(message_id="m", delta="x"))


def test_every_struct_of_the_event_model_says_frozen_itself() -> None:
    # msgspec inherits frozen at run time, but type checkers only see it on the class that
    # says it: a subclass that repeats kw_only=True without frozen=True looks mutable to them.
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(ev))
    missing = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            keywords = {k.arg: k.value for k in node.keywords}
            if "kw_only" in keywords and not (
                isinstance(keywords.get("frozen"), ast.Constant) and keywords["frozen"].value is True
            ):
                missing.append(node.name)
    assert missing == []


def test_unset_optionals_are_omitted_but_required_nulls_are_written() -> None:
    assert encode_event(CustomEvent(name="x", value=None)) == b'{"type":"CUSTOM","name":"x","value":null}'
    assert encode_event(TextMessageContentEvent(message_id="m1", delta="", timestamp=None, metadata=None)) == (
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""}'
    )
    # The fixed role is written even though it has a default (TS requires it).
    assert encode_event(ReasoningMessageStartEvent(message_id="r")) == (
        b'{"type":"REASONING_MESSAGE_START","messageId":"r","role":"reasoning"}'
    )
    assert encode_event(StateDeltaEvent(delta=[MoveOperation(from_="/a", path="/b")])) == (
        b'{"type":"STATE_DELTA","delta":[{"op":"move","from":"/a","path":"/b"}]}'
    )
    # The reference's exact SDK output examples (agui-protocol.md §9).
    assert encode_sse(TextMessageContentEvent(message_id="m1", delta='Hi "there" é 😀\n')) == (
        'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hi \\"there\\" é 😀\\n"}\n\n'.encode()
    )


def test_timestamp_is_an_int_and_bounded() -> None:
    ok = decode_event(b'{"type":"STEP_STARTED","stepName":"s","timestamp":9007199254740991}')
    assert ok.timestamp == 9007199254740991
    for bad in (b"1.5", b'"123"', b"9007199254740992", b"true"):
        with pytest.raises(ValueError) as info:
            decode_event(b'{"type":"STEP_STARTED","stepName":"s","timestamp":' + bad + b"}")
        assert info.value.path == "$.timestamp"


def _walk(value: Any, seen: dict[type, tuple[set[str], set[str]]]) -> None:
    """Record, per Struct class, which optional fields were set and which were left unset."""
    if isinstance(value, msgspec.Struct):
        is_set, unset = seen.setdefault(type(value), (set(), set()))
        for field in msgspec.structs.fields(value):
            if field.required:
                continue
            got = getattr(value, field.name)
            default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
            (unset if got == default else is_set).add(field.encode_name)
        for field in msgspec.structs.fields(value):
            _walk(getattr(value, field.name), seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, seen)


def test_interop_samples_set_and_unset_every_optional_field_of_every_type() -> None:
    """What the interop tests above run through: every event, message, part, outcome and input
    type the SDK has, each optional field once set and once unset."""
    seen: dict[type, tuple[set[str], set[str]]] = {}
    for sample in ALL_EVENT_SAMPLES:
        _walk(msgspec.convert(sample, Event), seen)
    for sample in ALL_MESSAGES:
        _walk(msgspec.convert(sample, Message), seen)
    for sample in (RUN_INPUT_FULL, RUN_INPUT_MIN):
        _walk(msgspec.convert(sample, RunAgentInput), seen)
    # REASONING_MESSAGE_START.role has one value and is always written; ``type`` of a tool call too.
    fixed = {(ReasoningMessageStartEvent, "role"), (ToolCall, "type")}
    missing = []
    for ours, _ in PAIRS:
        if ours not in seen:
            missing.append(f"{ours.__name__}: never sampled")
            continue
        is_set, unset = seen[ours]
        for field in msgspec.structs.fields(ours):
            if field.required or (ours, field.encode_name) in fixed:
                continue
            if field.encode_name not in is_set:
                missing.append(f"{ours.__name__}.{field.encode_name}: never set")
            if field.encode_name not in unset:
                missing.append(f"{ours.__name__}.{field.encode_name}: never unset")
    assert not missing, "\n".join(missing)


#: 0.x ``binary`` parts of every kind the upgrade distinguishes (MIME prefix, data / url, filename).
_BINARY_PARTS = [
    {"type": "text", "text": "see these"},
    {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo=", "filename": "a.png"},
    {"type": "binary", "mimeType": "audio/wav", "data": "UklGRg=="},
    {"type": "binary", "mimeType": "video/mp4", "data": "AAAA", "url": "https://example.com/v.mp4"},
    {"type": "binary", "mimeType": "application/pdf", "url": "https://example.com/a.pdf", "filename": "a.pdf"},
    {"type": "binary", "mimeType": "text/csv", "url": "https://example.com/t.csv", "id": "file-9"},
]


def test_a_0x_binary_part_is_upgraded_exactly_as_the_official_client_upgrades_it() -> None:
    import subprocess
    from pathlib import Path

    from agui_engine.transports.input_decoding import decode_run_input

    js = Path(__file__).resolve().parents[2] / "js"
    node = node_with("@ag-ui/client")
    wire = {"threadId": "t", "runId": "r", "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": "u1", "role": "user", "content": _BINARY_PARTS},
                         {"id": "t1", "role": "tool", "toolCallId": "c1", "content": _BINARY_PARTS[1:3]}]}
    out = subprocess.run([node, str(js / "binary_parts.mjs")], input=json.dumps(wire), capture_output=True,
                         text=True, timeout=60, cwd=js)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)
    ours = msgspec.to_builtins(decode_run_input(json.dumps(wire).encode()).messages)
    assert ours == theirs
    assert all(part["type"] != "binary" for m in ours for part in m["content"])


def test_an_id_only_binary_part_keeps_its_file_and_a_sourceless_one_is_refused_with_its_path() -> None:
    from agui_engine.protocol.events import FileSource, ImagePart, UserMessage
    from agui_engine.transports.input_decoding import decode_run_input
    from agui_engine.transports.input_errors import InvalidInputError

    message = msgspec.convert({"id": "u", "role": "user", "content": [
        {"type": "binary", "mimeType": "image/jpeg", "id": "file-abc"}]}, UserMessage)
    # the official client leaves this part as it is (no 1.0 form for it): kept as a file handle
    assert message.content == [ImagePart(source=FileSource(value="file-abc", mime_type="image/jpeg"))]
    bad = {"threadId": "t", "runId": "r", "messages": [
        {"id": "u", "role": "user", "content": [{"type": "text", "text": "x"}, {"type": "binary", "mimeType": "image/png"}]}]}
    with pytest.raises(InvalidInputError) as info:
        decode_run_input(json.dumps(bad).encode())
    assert "content[1]: a binary content part needs data, url or id" in info.value.message
    assert "$.messages[0]" in info.value.message
