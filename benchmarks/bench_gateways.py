"""The published gateway benchmark (``benchmarks/gateways/run.py``, spec/benchmarks.md), kept from
rotting: in CI each Python contender is started, serves a short token stream to the load generator
and is measured once. The figures come from ``python benchmarks/gateways/run.py`` on an idle
machine; this checks only that every contender runs and every stream it serves verifies."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

GATEWAYS = Path(__file__).resolve().parent / "gateways"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gateways_run", GATEWAYS / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# each contender is a fresh process (pydantic-ai and LangGraph import for seconds on a busy machine)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["engine", "fastapi-encoder", "pydantic-ai", "ag-ui-langgraph", "engine-proxy"])
def test_every_python_contender_serves_verified_streams(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGUI_BENCH_TOKENS", "20")
    run = _runner()
    result = asyncio.run(run.measure(name, 2, 0, 2, None, idle=True))
    assert result.error is None, result.error
    assert result.outcomes == {"finished": result.runs} and result.runs == 20
    assert result.events >= result.runs * 24 and result.cpu_us_per_event > 0
    assert result.rss_kib_per_stream is not None
    if name == "engine-proxy":
        assert result.upstream_cpu_us_per_event is not None and result.upstream_cpu_us_per_event > 0


def test_the_table_names_every_contender_and_its_ratio_to_the_engine() -> None:
    run = _runner()
    results = [run.Measurement("engine", 1, 0, events=100, runs=1, outcomes={"finished": 1}, cpu_us_per_event=10.0),
               run.Measurement("fastapi-encoder", 1, 0, events=100, runs=1, outcomes={"finished": 1},
                               cpu_us_per_event=25.0),
               run.Measurement("pydantic-ai", 1, 0, error="pydantic-ai exited")]
    table = run.table(results, [1], ["engine", "fastapi-encoder", "pydantic-ai"])
    assert "| fastapi-encoder | 1 | 25.00 | 2.50 |" in table and "pydantic-ai exited" in table
    assert os.path.exists(GATEWAYS / "servers.py")
