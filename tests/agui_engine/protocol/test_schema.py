"""The checked-in JSON Schemas (spec/schema/) are current and describe real events."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from agui_engine.protocol.schema import SCHEMA_DOCUMENTS, render, schemas

from ..event_samples import ALL_EVENT_SAMPLES, ALL_MESSAGES, RUN_INPUT_FULL, RUN_INPUT_MIN, sample_id

SPEC_SCHEMA = Path(__file__).resolve().parents[3] / "spec" / "schema"
GENERATED = schemas()


@pytest.mark.parametrize("name", list(SCHEMA_DOCUMENTS))
def test_checked_in_schema_is_not_stale(name: str) -> None:
    path = SPEC_SCHEMA / name
    assert path.exists(), f"{path} missing: run `python -m agui_engine.cli.schema spec/schema`"
    assert path.read_text(encoding="utf-8") == render(GENERATED[name]), (
        f"{path} is stale: run `python -m agui_engine.cli.schema spec/schema` and commit the result"
    )


def _validator(name: str) -> jsonschema.Draft202012Validator:
    document = json.loads((SPEC_SCHEMA / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


EVENT = _validator("event.schema.json")


@pytest.mark.parametrize("sample", ALL_EVENT_SAMPLES, ids=sample_id)
def test_every_sample_event_is_valid(sample: dict) -> None:
    EVENT.validate(sample)


def test_messages_and_run_input_are_valid() -> None:
    message = _validator("message.schema.json")
    for m in ALL_MESSAGES:
        message.validate(m)
    run_input = _validator("run-agent-input.schema.json")
    run_input.validate(RUN_INPUT_FULL)
    run_input.validate(RUN_INPUT_MIN)


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 42},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"},
        {"type": "NOT_A_TYPE"},
        {"type": "STEP_STARTED", "stepName": "s", "timestamp": 1.5},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "no-slash", "value": 1}]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt", "interrupts": []}},
    ],
)
def test_schema_rejects_what_the_decoder_rejects(bad: dict) -> None:
    from agui_engine.protocol.codec import EventDecodeError, decode_event

    assert not EVENT.is_valid(bad)
    with pytest.raises(EventDecodeError):
        decode_event(json.dumps(bad))
