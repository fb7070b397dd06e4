"""agui_engine.bench: deterministic documents and chunks, every contender runs, the CLI prints the table."""

from __future__ import annotations

import itertools
import json

import pytest

from agui_engine.bench import (
    CHUNK_MAX,
    CONTENDERS,
    available_contenders,
    growth,
    make_documents,
    measure,
    split_chunks,
)
from agui_engine.cli import main


def test_documents_are_valid_deterministic_and_sized() -> None:
    docs = make_documents()
    assert docs == make_documents()
    sizes = {name: len(text.encode()) for name, text in docs.items()}
    assert 150 <= sizes["weather-200B"] <= 400
    for kb in (1, 4, 5, 16, 64):
        assert kb * 1024 <= sizes[f"dashboard-{kb}KB"] <= kb * 1024 * 1.3
    assert sizes["markdown-50KB"] >= 50 * 1024 and sizes["table-200KB"] >= 200 * 1024
    for text in docs.values():
        json.loads(text)
    depth = 0
    node = json.loads(docs["deep-200"])
    while isinstance(node, dict):
        node = node.get("child", node.get("values"))
        depth += 1
    assert depth == 200  # 200 nested objects (the leaf holds one more list)


def test_chunks_rejoin_and_cut_escapes_numbers_and_literals() -> None:
    text = make_documents()["dashboard-5KB"]
    chunks = split_chunks(text)
    assert "".join(chunks) == text and chunks == split_chunks(text)
    assert all(1 <= len(c) <= CHUNK_MAX for c in chunks)
    assert any(c.endswith("\\") for c in chunks)  # an escape cut in two
    assert any(c[-1].isdigit() and n[0].isdigit() for c, n in itertools.pairwise(chunks))  # a number cut


@pytest.mark.parametrize("contender", available_contenders(), ids=lambda c: c.name)
def test_every_installed_contender_streams_a_document(contender: object) -> None:
    text = make_documents()["weather-200B"]
    result = measure(contender, "weather-200B", text, split_chunks(text), repeat=1)  # type: ignore[arg-type]
    assert result.chunks == len(split_chunks(text)) and result.seconds > 0
    if result.contender.startswith("PatchStream") or result.contender == "jiter+make_patch":
        assert result.patch_bytes > len(text)


def test_growth_is_the_worst_ratio_between_steps() -> None:
    from agui_engine.bench import Measurement

    results = {
        "a": Measurement("x", "a", 1000, 10, 1.0e-3, 0),
        "b": Measurement("x", "b", 4000, 40, 4.4e-3, 0),
        "c": Measurement("x", "c", 16000, 160, 16.0e-3, 0),
    }
    assert growth(results, ["a", "b", "c"]) == pytest.approx(1.1)


def test_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["ours", "append", "msgspec whole"]  # by id or by name
    assert main(["bench", "--documents", "weather-200B", "--repeat", "1", "--contenders", *names]) == 0
    out = capsys.readouterr().out
    assert "us/chunk" in out and "PatchStream append" in out and "msgspec whole" in out
    assert main(["bench", "--documents", "nope"]) == 2
    assert len({c.id for c in CONTENDERS}) == len(CONTENDERS)
