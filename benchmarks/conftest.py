"""Benchmarks: collect ``bench_*.py`` files and report each group as ratios to our implementation.

Convention: in every pytest-benchmark group, the benchmark whose parameters include
``impl="ours"`` (or whose name contains ``[ours``) is the reference; the summary prints how many
times slower (>1) or faster (<1) every other member of the group is, by median time. With
``--benchmark-disable`` (CI) nothing is measured and nothing is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    # pyproject's python_files keeps pytest's default (test_*.py); benchmark modules are bench_*.py.
    # A file named on the command line is collected by pytest itself.
    patterns = parent.config.getini("python_files")
    if (
        file_path.suffix == ".py"
        and file_path.name.startswith("bench_")
        and "bench_*.py" not in patterns
        and not parent.session.isinitpath(file_path)
    ):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def _is_ours(bench: Any) -> bool:
    params = bench.params or {}
    return params.get("impl") == "ours" or "[ours" in bench.name or "-ours" in bench.name


def pytest_terminal_summary(terminalreporter: Any) -> None:
    session = getattr(terminalreporter.config, "_benchmarksession", None)
    if session is None or session.disabled:
        return
    groups: dict[str, list[Any]] = {}
    for bench in session.benchmarks:
        if bench and not bench.has_error:
            groups.setdefault(bench.group or "", []).append(bench)
    lines = []
    for group, benches in sorted(groups.items()):
        ours = [b for b in benches if _is_ours(b)]
        if len(ours) != 1 or len(benches) < 2:
            continue
        base = ours[0].stats.median
        for other in benches:
            if other is ours[0]:
                continue
            ratio = other.stats.median / base
            lines.append(
                f"{group:32s} {other.name:48s} {ratio:7.2f}x ours "
                f"(median {other.stats.median * 1e6:10.1f} us vs {base * 1e6:10.1f} us)"
            )
    if lines:
        terminalreporter.write_sep("-", "benchmark ratios (other / ours, by median; >1 means ours is faster)")
        for line in lines:
            terminalreporter.write_line(line)
