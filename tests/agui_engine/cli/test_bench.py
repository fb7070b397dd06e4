"""agui_engine.cli.bench: deterministic documents and chunks, every contender runs, the CLI prints the table."""

from __future__ import annotations

import io
import itertools
import json

import pytest

from agui_engine.cli import main
from agui_engine.cli.bench import (
    CONTENDERS,
    _progress,
    available_contenders,
    check_targets,
    growth,
    measure,
    missing_contenders,
)
from agui_engine.cli.bench_corpus import CHUNK_MAX, make_documents, split_chunks


def test_documents_are_valid_deterministic_and_sized() -> None:
    docs = make_documents()
    assert docs == make_documents()
    sizes = {name: len(text.encode()) for name, text in docs.items()}
    assert 150 <= sizes["weather-200B"] <= 400
    for kb in (1, 4, 5, 16, 64):
        assert kb * 1024 <= sizes[f"dashboard-{kb}KB"] <= kb * 1024 * 1.3
    assert sizes["markdown-50KB"] >= 50 * 1024 and sizes["table-200KB"] >= 200 * 1024
    # The quarter-size long string and table (growth per 4x of every shape).
    assert 3.5 <= sizes["markdown-50KB"] / sizes["markdown-12KB"] <= 4.5
    assert 3.5 <= sizes["table-200KB"] / sizes["table-50KB"] <= 4.5
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
    from agui_engine.cli.bench import Measurement

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


def test_cli_reports_missing_alternatives_and_runs_the_rest(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jiter" else real(name, *a))
    assert {c.id for c, _ in missing_contenders()} == {"jiter", "jiter-make-patch"}
    assert main(["bench", "--documents", "weather-200B", "--repeat", "1", "--contenders", "ours", "jiter"]) == 0
    captured = capsys.readouterr()
    assert "skipped jiter re-parse: jiter is not installed (pip install jiter)" in captured.err
    table, _, footer = captured.out.partition("\n(")
    assert "PatchStream" in table and "jiter re-parse" not in table
    # said under the table too (the stderr line scrolls away above the progress bar): issue 30
    assert footer.startswith("1 contender(s) not run, their packages not installed: jiter re-parse; "
                             "pip install 'agui-engine[bench]'"), captured.out  # the one of those named


def test_progress_bar_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    _progress(tty, 3, 12, "round 1: PatchStream on weather-200B")
    _progress(pipe, 3, 12, "round 1: PatchStream on weather-200B")
    assert tty.getvalue().startswith("\r[#######.......................] 3/12 round 1: PatchStream")
    assert pipe.getvalue() == ""  # piped output (CI, --json) stays clean


def test_targets_are_checked_against_the_measurements() -> None:
    from agui_engine.cli.bench import Halves, Measurement

    def m(name: str, doc: str, size: int, seconds: float) -> Measurement:
        return Measurement(name, doc, size, size // 4, seconds, 0)

    results = {
        ("PatchStream", "dashboard-5KB"): m("PatchStream", "dashboard-5KB", 4000, 1.5e-3),
        ("PatchStream", "dashboard-64KB"): m("PatchStream", "dashboard-64KB", 64000, 24e-3),
        ("jiter re-parse", "dashboard-64KB"): m("jiter re-parse", "dashboard-64KB", 64000, 1.2),
        ("PatchStream", "deep-50"): m("PatchStream", "deep-50", 1000, 1e-3),
        ("PatchStream", "deep-200"): m("PatchStream", "deep-200", 4000, 5e-3),
    }
    lines = check_targets(results, Halves("PatchStream append", (1.0, 1.0), (50.0, 50.0), (10.0, 10.1)))
    assert lines[0].startswith("  ok   1.50 us/chunk on dashboard-5KB")
    assert any(line.startswith("  MISS PatchStream growth per 4x on deep: 1.25x") for line in lines)
    assert "  MISS 50.0x faster than jiter re-parse on dashboard-64KB (>= 100x)" in lines
    assert any(line.startswith("  ok   append mode") and "patch bytes" in line for line in lines)
