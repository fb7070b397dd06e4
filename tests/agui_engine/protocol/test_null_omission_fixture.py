"""The AG-UI SDKs' shared producer fixture (``sdks/fixtures/null-omission.json``, vendored in
``tests/data/ag_ui_sdk_fixtures``): a producer leaves out what has no value and keeps every ``null``
the contract carries. Each case's ``input`` is decoded and encoded again by this package's codec
and must parse to exactly ``expected``, as each official SDK's test does.

One case differs, on purpose and documented (``spec/wire-versions.md``, "Null omission"):
``RUN_STARTED.input`` with ``tools: []`` and ``context: []``. This package's ``RunAgentInput``
holds an absent list as an empty one (the 1.0 spec makes them equivalent) and writes neither, so
those two empty lists are left out; the official Python SDK 1.0 keeps the distinction (``None``
absent, ``[]`` given) and writes them back. The test pins that exact difference, so that a change
either way is seen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_engine.protocol.codec import decode_event, encode_event

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "ag_ui_sdk_fixtures" / "null-omission.json"
CASES: list[dict[str, Any]] = [c for c in json.loads(FIXTURE.read_text(encoding="utf-8"))["stream"]
                               if "python" in c["producedBy"]]
#: The case this package answers differently (see the module docstring), and how.
EMPTY_LISTS_CASE = "run_started_input_with_bare_null_state_converges_on_omission"


def _produced(case: dict[str, Any]) -> Any:
    return json.loads(encode_event(decode_event(json.dumps(case["input"]).encode())))


def test_the_fixture_is_the_upstream_one_with_its_28_cases() -> None:
    assert len(json.loads(FIXTURE.read_text(encoding="utf-8"))["stream"]) == 28 and len(CASES) == 28


@pytest.mark.parametrize("case", [c for c in CASES if c["name"] != EMPTY_LISTS_CASE], ids=lambda c: c["name"])
def test_each_case_is_produced_exactly_as_expected(case: dict[str, Any]) -> None:
    assert _produced(case) == case["expected"], case["note"]


def test_the_one_documented_difference_is_the_empty_tools_and_context_of_run_started_input() -> None:
    [case] = [c for c in CASES if c["name"] == EMPTY_LISTS_CASE]
    expected = json.loads(json.dumps(case["expected"]))
    assert expected["input"].pop("tools") == [] and expected["input"].pop("context") == []
    assert _produced(case) == expected
