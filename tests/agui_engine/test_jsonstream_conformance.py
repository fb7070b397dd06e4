"""JSONTestSuite (nst/JSONTestSuite, MIT, vendored in tests/data/JSONTestSuite).

Every ``y_`` file is accepted with a value equal to ``json.loads``; every ``n_``
file is rejected with :class:`JSONStreamError`; every ``i_`` file gets the
outcome ``spec/jsonstream.md`` promises (``I_POLICY`` below). Each file is fed
as bytes whole, one byte at a time and in random splits, and as str one
character at a time; the outcome (and for bytes, the exact error) is the same
in every chunking, and nothing but JSONStreamError is ever raised.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_jsonstream import outcome, splits

SUITE = Path(__file__).resolve().parents[1] / "data" / "JSONTestSuite" / "test_parsing"
FILES = sorted(SUITE.iterdir())

# The implementation-defined cases, as spec/jsonstream.md decides them.
I_ACCEPTED = {
    "i_number_double_huge_neg_exp.json",  # underflows to 0.0, like json.loads
    "i_number_real_underflow.json",
    "i_number_too_big_neg_int.json",  # exact Python ints
    "i_number_too_big_pos_int.json",
    "i_number_very_big_negative_int.json",
    "i_structure_500_nested_arrays.json",  # within MAX_DEPTH (512)
}
# Everything else is rejected: overflow to infinity, lone or inverted surrogates,
# invalid / overlong / truncated UTF-8, Latin-1, UTF-16, and a BOM.


def test_the_suite_is_complete() -> None:
    assert len(FILES) == 318
    assert (SUITE.parent / "LICENSE").exists()


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_json_test_suite(path: Path) -> None:
    data = path.read_bytes()
    outcomes = {mode: outcome(chunks) for mode, chunks in splits(data, seed=len(data)).items()}
    # str input, one character at a time (undecodable files become lone surrogates, rejected too)
    text = data.decode("utf-8", "surrogateescape")
    str_kind, str_value = outcome(list(text))
    kinds = {kind for kind, _ in outcomes.values()}
    assert len(kinds) == 1, outcomes
    # For a bytes stream, even the error message (offsets, line, column) is split-invariant.
    assert len({repr(v) for _, v in outcomes.values()}) == 1, outcomes
    kind, value = outcomes["whole"]
    assert str_kind == kind, (str_value, value)
    name = path.name
    if name.startswith("y_") or name in I_ACCEPTED:
        assert kind == "ok", value
        assert value == json.loads(data) and str_value == value
    else:
        assert kind == "error", value
