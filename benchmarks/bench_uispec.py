"""The render_ui tree while it streams: UISpecStream against re-parsing the prefix, on the same chunks.

Contenders, each turning a ``render_ui`` call's argument fragments into the partial tree:

* **UISpecStream** (this engine): the call's one tokenizer pass, the tree followed piece by piece
  (``genui.structural_pieces``), operations on the tree document (``tambo.component.*`` events).
* **re-parse + validate**: what a renderer does with partial JSON (assistant-ui parses the partial
  arguments again on every delta, ``reference/generative-ui-peers.md`` §14.1): re-parse the whole
  prefix with ``partial_json_parser`` and rebuild the tree (``validate_tree`` of what is complete
  enough), every chunk. Quadratic in the document; it yields trees, not operations, so a client
  would still have to diff them.
* **ComponentStream** on the same text, as if it were a plain component's props: the floor of the
  tokenizer path (no tree, no allowlist).

Trees of about 1, 4 and 16 KB (nested cards, stats, text; keys after props), chunked like tokens
(1-8 characters, seeded). ``pytest benchmarks/bench_uispec.py --benchmark-only`` gives the tables
(grouped per tree, side by side); ``python benchmarks/bench_uispec.py`` the CPU per chunk and the
ratios. In CI (``--benchmark-disable``) each case runs once and checks the final tree.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from agui_engine.cli.bench_corpus import split_chunks
from agui_engine.genui.component_stream import ComponentStream
from agui_engine.genui.components import Component
from agui_engine.genui.tree import GenUISpecError, tree_document, validate_spec, validate_tree
from agui_engine.genui.uispec import UISpecStream, UISpecTool

partial_json_parser = pytest.importorskip("partial_json_parser") if "pytest" in sys.modules else None

ALLOW = ["Card", "Stack", "Stat", "Text"]
TOOL = UISpecTool(ALLOW)
FREE = Component("Tree", "Free-form props.", {"type": "object", "properties": {}})


def make_tree(cards: int) -> dict[str, Any]:
    """A dashboard of ``cards`` cards, each a title, a sentence and a row of three stats (keys last)."""
    root = []
    for i in range(cards):
        stats = [{"component": "Stat", "props": {"label": f"Metric {i}.{j}", "value": f"{(i + 1) * (j + 7)}k"},
                  "key": f"s{i}-{j}"} for j in range(3)]
        root.append({"component": "Card", "props": {"title": f"Section {i}: quarterly figures"}, "children": [
            f"Figures for section {i} are up against last quarter.",
            {"component": "Stack", "props": {"direction": "row"}, "children": stats}], "key": f"card-{i}"})
    return {"root": root}


def tree_documents() -> dict[str, tuple[dict[str, Any], str, list[str]]]:
    out = {}
    for cards in (2, 8, 32):
        spec = make_tree(cards)
        text = json.dumps({"_tambo_statusMessage": "Drawing", "_tambo_completionStatusMessage": "Drew", **spec})
        out[f"tree-{len(text) // 1024 or 1}KB"] = (spec, text, split_chunks(text))
    return out


def run_uispec(chunks: list[str]) -> dict[str, Any]:
    stream = UISpecStream(TOOL, message_id="m", component_id="c")
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    return stream.final_props  # type: ignore[return-value]


def run_reparse(chunks: list[str]) -> dict[str, Any]:
    from partial_json_parser import loads

    text = ""
    tree: Any = ()
    for chunk in chunks:
        text += chunk
        try:
            value = loads(text)
        except Exception:  # noqa: BLE001 - a prefix that does not parse yet shows the last tree
            continue
        root = value.get("root") if isinstance(value, dict) else None
        try:
            tree = validate_tree(root if root is not None else [], ALLOW)
        except GenUISpecError:  # a node whose name is still partial: keep the last tree
            continue
    return tree_document(tree)


def run_component(chunks: list[str]) -> dict[str, Any]:
    stream = ComponentStream(FREE, message_id="m", component_id="c", append_strings=True)
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    return stream.final_props  # type: ignore[return-value]


CONTENDERS: dict[str, Callable[[list[str]], dict[str, Any]]] = {
    "UISpecStream": run_uispec,
    "re-parse + validate": run_reparse,
    "ComponentStream (no tree)": run_component,
}

_DOCS = tree_documents()
_CASES = [(doc, name) for doc in _DOCS for name in CONTENDERS]


@pytest.mark.parametrize("document,contender", _CASES, ids=[f"{d}-{c}" for d, c in _CASES])
def test_ui_tree_streaming(benchmark: Any, document: str, contender: str) -> None:
    spec, text, chunks = _DOCS[document]
    benchmark.group = f"render_ui tree: {document} ({len(chunks)} chunks)"
    benchmark.extra_info.update(chunks=len(chunks), bytes=len(text.encode()))
    final = benchmark(CONTENDERS[contender], chunks)
    if contender == "ComponentStream (no tree)":
        assert final == spec
    else:
        assert final == tree_document(validate_spec(spec, ALLOW))


def main() -> None:
    rounds = 5
    print(f"{'tree':<12} {'chunks':>6} " + " ".join(f"{name:>26}" for name in CONTENDERS) + "   ratios")
    for document, (_, _, chunks) in _DOCS.items():
        times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
        for _ in range(rounds):
            for name, run in CONTENDERS.items():  # interleaved: load on the machine hits all alike
                start = time.perf_counter()
                run(chunks)
                times[name].append(time.perf_counter() - start)
        per_chunk = {name: statistics.median(t) / len(chunks) * 1e6 for name, t in times.items()}
        ours = per_chunk["UISpecStream"]
        print(f"{document:<12} {len(chunks):>6} " + " ".join(f"{per_chunk[n]:>21.1f} us/c" for n in CONTENDERS)
              + f"   re-parse/UISpecStream {per_chunk['re-parse + validate'] / ours:.1f}x,"
              f" UISpecStream/ComponentStream {ours / per_chunk['ComponentStream (no tree)']:.1f}x")


if __name__ == "__main__":
    main()
