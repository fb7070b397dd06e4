"""The AG-UI SDKs' shared producer fixture (``sdks/fixtures/null-omission.json``, vendored in
``tests/data/ag_ui_sdk_fixtures``): a producer leaves out what has no value and keeps every ``null``
the contract carries. Each case's ``input`` is decoded and encoded again by this package's codec
and must parse to exactly ``expected``, as each official SDK's test does.

All 28 are equal, ``RUN_STARTED.input`` with ``tools: []`` and ``context: []`` included: a list
the sender gave is written back, an absent one stays absent (``RunAgentInput``'s shared read-only
default), as the official Python SDK 1.0 does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_engine.protocol.codec import decode_event, encode_event

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "ag_ui_sdk_fixtures" / "null-omission.json"
CASES: list[dict[str, Any]] = [c for c in json.loads(FIXTURE.read_text(encoding="utf-8"))["stream"]
                               if "python" in c["producedBy"]]
#: The case with the empty ``tools`` and ``context`` a producer keeps.
EMPTY_LISTS_CASE = "run_started_input_with_bare_null_state_converges_on_omission"


def _produced(case: dict[str, Any]) -> Any:
    return json.loads(encode_event(decode_event(json.dumps(case["input"]).encode())))


def test_the_fixture_is_the_upstream_one_with_its_28_cases() -> None:
    assert len(json.loads(FIXTURE.read_text(encoding="utf-8"))["stream"]) == 28 and len(CASES) == 28


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_each_case_is_produced_exactly_as_expected(case: dict[str, Any]) -> None:
    assert _produced(case) == case["expected"], case["note"]


def test_all_28_cases_are_equal() -> None:
    assert [c["name"] for c in CASES if _produced(c) != c["expected"]] == []
    [case] = [c for c in CASES if c["name"] == EMPTY_LISTS_CASE]
    assert _produced(case)["input"]["tools"] == [] and _produced(case)["input"]["context"] == []


def test_given_empty_lists_are_kept_and_absent_ones_stay_absent_as_the_official_python_sdk_writes_them() -> None:
    from ag_ui.core import RunStartedEvent as SdkRunStartedEvent
    from ag_ui.encoder import EventEncoder

    for given in ({}, {"tools": []}, {"context": []}, {"tools": [], "context": []},
                  {"tools": [{"name": "t", "description": "d", "parameters": {}}]}):
        wire = {"type": "RUN_STARTED", "threadId": "t", "runId": "r",
                "input": {"threadId": "t", "runId": "r", "messages": [], **given}}
        sdk = SdkRunStartedEvent.model_validate(wire)
        theirs = EventEncoder().encode(sdk).removeprefix("data: ").strip()
        ours = encode_event(decode_event(json.dumps(wire).encode())).decode()
        assert json.loads(ours) == json.loads(theirs) == wire, given
