"""protocol/wire.py: which wire a run gets, and the 0.x form of each 1.0 event (the real 0.0.59
schemas judge it in tests/transports/test_wire_versions.py)."""

from __future__ import annotations

import msgspec
import pytest

from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import (
    DocumentPart,
    FileSource,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    TextMessageContentEvent,
)
from agui_engine.protocol.wire import (
    check_wire_choice,
    declares_1x,
    event_to_wire0,
    to_wire0,
    wire_for,
    wire_translator,
)

from .. import event_samples
from ..event_samples import ALL_EVENT_SAMPLES


@pytest.mark.parametrize(("declared", "want"), [
    (None, False), ("", False), ("0.0.59", False), ("0.9", False), ("1.0", True), ("1", True), ("1.1", True),
    ("2.0", True), ("v1", False), (" 1.0", True), ("x.y", False),
])
def test_declares_1x(declared: str | None, want: bool) -> None:
    assert declares_1x(declared) is want


def test_wire_for_a_fixed_choice_ignores_the_declaration() -> None:
    assert wire_for("auto", "1.0") == "1" and wire_for("auto", None) == "0"
    assert wire_for("0", "1.0") == "0" and wire_for("1", None) == "1"
    assert wire_translator("1") is None and wire_translator("0") is to_wire0
    assert check_wire_choice("auto", "x") == "auto"
    with pytest.raises(UsageError, match=r"^--wire: wire must be one of 0, 1, auto, got 'one'$"):
        check_wire_choice("one", "--wire")


def test_an_event_0x_carries_as_it_is_passes_as_the_same_bytes() -> None:
    for event in (TextMessageContentEvent(message_id="m", delta="hi"), RunFinishedEvent(thread_id="t", run_id="r")):
        payload = encode_event(event)
        assert to_wire0(payload) is payload
    assert to_wire0(b"not json") == b"not json"  # not this module's to judge


def test_pending_tool_call_ids_move_to_metadata_beside_what_was_there() -> None:
    event = RunFinishedEvent(thread_id="t", run_id="r", outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1"]),
                             metadata={"ag-ui": {"trace": "x"}, "mine": 1})
    got = msgspec.json.decode(to_wire0(encode_event(event)))
    assert got["outcome"] == {"type": "success"}
    assert got["metadata"] == {"ag-ui": {"trace": "x", "outcome": {"type": "success", "pendingToolCallIds": ["c1"]}},
                               "mine": 1}
    decode_event(to_wire0(encode_event(event)))  # still a valid 1.0 event


def test_cancelled_outcome_becomes_no_outcome_and_interrupt_keeps_only_its_two_keys() -> None:
    cancelled = event_to_wire0({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}})
    assert "outcome" not in cancelled and cancelled["metadata"]["ag-ui"]["outcome"] == {"type": "cancelled"}
    interrupts = [event_samples.INTERRUPT_MIN]
    loose = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
             "outcome": {"type": "interrupt", "interrupts": interrupts, "extra": 1}}
    assert event_to_wire0(loose)["outcome"] == {"type": "interrupt", "interrupts": interrupts}
    plain = {**loose, "outcome": {"type": "interrupt", "interrupts": interrupts}}
    assert event_to_wire0(plain) is plain


def test_content_parts_become_their_text_with_the_media_kept() -> None:
    text_only = {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c",
                 "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert event_to_wire0(text_only) == {**text_only, "content": "ab"}
    mixed = {**text_only, "content": [{"type": "text", "text": "a"}, event_samples.IMAGE_DATA]}
    got = event_to_wire0(mixed)
    assert got["content"] == "a" and got["metadata"] == {"ag-ui": {"content": mixed["content"]}}
    assert mixed["content"][1] is event_samples.IMAGE_DATA  # the input is never modified


def test_a_file_source_becomes_the_0x_binary_part_the_gateway_upgrades_back() -> None:
    user = {"id": "u", "role": "user", "content": [event_samples.DOC_FILE, event_samples.TEXT_PART]}
    snap = event_to_wire0({"type": "MESSAGES_SNAPSHOT", "messages": [user]})
    part = snap["messages"][0]["content"][0]
    assert part == {"type": "binary", "mimeType": "application/pdf", "id": "file-abc123"}
    # the gateway reads it back as the file part it was (events.upgrade_binary_part)
    back = decode_event(msgspec.json.encode({"type": "MESSAGES_SNAPSHOT", "messages": snap["messages"]}))
    part_back = back.messages[0].content[0]  # type: ignore[attr-defined]
    assert isinstance(part_back, DocumentPart) and part_back.source == FileSource(value="file-abc123",
                                                                                  mime_type="application/pdf")


def test_run_started_input_gets_the_lists_0x_requires() -> None:
    event = {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": event_samples.RUN_INPUT_MIN}
    assert event_to_wire0(event)["input"] == {**event_samples.RUN_INPUT_MIN, "tools": [], "context": []}
    full = {"type": "RUN_STARTED", "threadId": "t", "runId": "r",
            "input": {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": []}}
    assert event_to_wire0(full) is full


@pytest.mark.parametrize("sample", ALL_EVENT_SAMPLES, ids=event_samples.sample_id)
def test_the_0x_form_is_stable_and_still_a_1_0_event(sample: dict[str, object]) -> None:
    once = to_wire0(msgspec.json.encode(sample))
    assert to_wire0(once) == once
    decode_event(once)
