"""MCP Apps tool input while the model types: what streaming an app's partial input costs, from the
gateway's one parse, against re-parsing the prefix on every chunk (as hosts do today).

Groups ``mcp-apps-partial-1KB``, ``-10KB``, ``-80KB``: one tool call whose JSON arguments (a title, a list
of rows, a long note) are that size, cut as a model streams them (the embedded model's cutter, 1-8
characters a chunk). Each member takes every chunk and produces what an app is given while the model
types:

* ``ours`` -- what the gateway does (``ToolCallRequest`` with an ``AppTool``): the chunk parsed once by
  ``PatchStream`` (the parse ``TOOL_CALL_ARGS`` is written from anyway), its operations made the
  ``agui_engine.mcp_apps.tool_input`` CUSTOM event (``AppTool.input``) and encoded for the wire;
* ``reparse-jiter`` -- the prefix so far re-parsed whole on every chunk with ``jiter``'s partial mode
  (Rust; what pydantic / the OpenAI SDK use for partial tool arguments) and the arguments encoded whole;
* ``reparse-partial-json-parser`` -- the same with ``partial-json-parser`` (pure Python, the common
  "close the unclosed brackets" parser); 1 and 10 KB only: at 80 KB one call takes minutes.

Each benchmark is one whole call; per chunk = median / chunks. The wire bytes (``extra_info``, printed):
``ours`` = the CUSTOM events' bytes (added beside ``TOOL_CALL_ARGS``); ``reparse-*`` = the whole partial
arguments sent once per chunk (what a gateway sending snapshots would add, and what each
``tool-input-partial`` carries to the app when it is sent per chunk).

Run: ``python -m pytest benchmarks/bench_mcp_apps_partial.py --benchmark-enable -s``. In CI
(``--benchmark-disable``) each runs once and the arguments are checked equal at the end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agui_engine.demo.weather_model import chunk_text
from agui_engine.genui.mcp_apps import AppServer, AppTool
from agui_engine.jsonstream import PatchStream
from agui_engine.protocol.codec import encode_event

#: the re-parse baselines are quadratic by design: jiter at 80 KB takes ~30 s a call on this machine
pytestmark = pytest.mark.timeout(300)

APP = AppTool(resource_uri="ui://bench/app.html", server=AppServer(type="http", url="http://127.0.0.1:1/mcp"))
SIZES = {"1KB": 1024, "10KB": 10 * 1024, "80KB": 80 * 1024}


def arguments(size: int) -> dict[str, Any]:
    """Tool arguments of about ``size`` bytes of JSON: a title, rows, and a note filling the rest."""
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"], "score": i * 1.5} for i in range(max(1, size // 400))]
    doc: dict[str, Any] = {"title": "A report", "rows": rows, "note": ""}
    missing = size - len(json.dumps(doc))
    doc["note"] = ("The model types this note word by word. " * (missing // 40 + 1))[:max(0, missing)]
    return doc


def ours(chunks: list[str]) -> tuple[dict[str, Any], int]:
    parser = PatchStream(emit_root=False, append_strings=True)
    wire = 0
    for chunk in chunks:
        event = APP.input("call-1", parser.feed(chunk))
        if event is not None:
            wire += len(encode_event(event))
    event = APP.input("call-1", parser.close())
    if event is not None:
        wire += len(encode_event(event))
    return parser.value, wire


def reparse(chunks: list[str], parse: Any) -> tuple[dict[str, Any], int]:
    prefix = ""
    wire = 0
    value: Any = {}
    for chunk in chunks:
        prefix += chunk
        try:
            value = parse(prefix)
        except ValueError:
            continue  # a prefix the parser cannot close yet (inside a number or a key)
        wire += len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    return value, wire


def _jiter(prefix: str) -> Any:
    import jiter

    return jiter.from_json(prefix.encode(), partial_mode="trailing-strings")


def _partial_json_parser(prefix: str) -> Any:
    from partial_json_parser import loads

    return loads(prefix)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", ["ours", "reparse-jiter", "reparse-partial-json-parser"])
def test_partial_input_of_one_call(benchmark: Any, impl: str, size: str) -> None:
    if impl == "reparse-partial-json-parser" and size == "80KB":
        pytest.skip("minutes per call: the prefix re-parsed in pure Python on each of ~18,000 chunks")
    benchmark.group = f"mcp-apps-partial-{size}"
    doc = arguments(SIZES[size])
    text = json.dumps(doc)
    chunks = chunk_text(text, seed="bench")
    if impl == "ours":
        def run() -> tuple[dict[str, Any], int]:
            return ours(chunks)
    else:
        parse = _jiter if impl == "reparse-jiter" else _partial_json_parser

        def run() -> tuple[dict[str, Any], int]:
            return reparse(chunks, parse)

    # the quadratic baseline at 80 KB takes half a minute a call: measured once
    rounds = 1 if impl != "ours" and size == "80KB" else 3
    value, wire = benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=0)
    assert value == doc
    benchmark.extra_info.update({"chunks": len(chunks), "bytes": len(text), "wire_bytes": wire})
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        print(f"\n{benchmark.group} {impl}: {len(chunks)} chunks, {len(text)} B of arguments, "
              f"{stats.stats.median / len(chunks) * 1e6:.2f} us a chunk, {wire} wire bytes")
