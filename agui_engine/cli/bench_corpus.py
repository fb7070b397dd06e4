"""The benchmark's input: realistic tool-argument JSON documents built from a seeded
``random.Random`` (:func:`make_documents`) and LLM-token-sized chunks of them
(:func:`split_chunks`), so every run and every machine measures the same bytes.

Shared by ``agui-engine bench`` (:mod:`agui_engine.cli.bench`), its props section
(:mod:`agui_engine.cli.bench_props`) and ``benchmarks/``; it imports neither command module.
"""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = ["CHUNK_MAX", "CHUNK_MIN", "CHUNK_SEED", "DOCUMENT_SEED", "make_documents", "split_chunks"]

#: Seeds for the documents and the chunking: fixed so every run (and every
#: machine) measures the same input.
DOCUMENT_SEED = 20240601
CHUNK_SEED = 7
#: Chunk sizes in characters: a model's token is 1-8 characters of JSON.
CHUNK_MIN = 1
CHUNK_MAX = 8

_WORDS = ["revenue", "growth", "quarter", "region", "active", "users", "churn", "latency", "p95", "conversion", "funnel", "cohort", "retention", "pipeline", "forecast", "budget", "spend", "margin", "orders", "refunds", "tickets", "backlog", "deploys", "incidents", "uptime", "north", "south", "east", "west", "café", "naïve", "résumé", "東京", "Zürich", "São", "Paulo"]
_EMOJI = ("📈", "✅", "⚠️", "🚀")


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:]


def _markdown(rng: random.Random, size: int) -> str:
    """Markdown prose with headings, lists, quotes, code and emoji: many escapes once JSON-encoded."""
    out: list[str] = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.15:
            piece = f"## {_sentence(rng, rng.randint(2, 5))}\n\n"
        elif kind < 0.35:
            piece = "".join(f"- {_sentence(rng, rng.randint(3, 8))} {rng.choice(_EMOJI)}\n" for _ in range(3)) + "\n"
        elif kind < 0.45:
            piece = f'```python\nprint("{_sentence(rng, 3)}")\t# \\ path\n```\n\n'
        else:
            piece = f'{_sentence(rng, rng.randint(8, 25))}, "quoted" and **bold** ({rng.randint(1, 999)}%).\n\n'
        out.append(piece)
        total += len(piece)
    return "".join(out)


def _block(rng: random.Random, index: int) -> dict[str, Any]:
    kind = index % 4
    if kind == 0:
        return {
            "type": "metric",
            "id": f"m{index}",
            "label": _sentence(rng, 2),
            "value": round(rng.uniform(-1000, 100000), 2),
            "delta": round(rng.uniform(-30, 30), 1),
            "trend": rng.choice(["up", "down", "flat"]),
            "highlighted": rng.random() < 0.5,
            "note": None,
        }
    if kind == 1:
        return {
            "type": "chart",
            "id": f"c{index}",
            "title": _sentence(rng, 4),
            "kind": rng.choice(["line", "bar", "area"]),
            "series": [
                {
                    "name": rng.choice(_WORDS),
                    "points": [{"x": month, "y": round(rng.uniform(0, 500), 1)} for month in range(6)],
                }
                for _ in range(2)
            ],
            "options": {"stacked": False, "legend": {"position": "bottom", "visible": True}},
        }
    if kind == 2:
        return {
            "type": "table",
            "id": f"t{index}",
            "columns": ["name", "region", "amount", "active"],
            "rows": [
                [_sentence(rng, 2), rng.choice(["EU", "US", "APAC"]), rng.randint(-5000, 99999), rng.random() < 0.7]
                for _ in range(4)
            ],
        }
    return {"type": "text", "id": f"x{index}", "markdown": _markdown(rng, 160)}


def _dashboard(rng: random.Random, size: int) -> str:
    doc: dict[str, Any] = {
        "title": "Q3 operations dashboard",
        "layout": {"columns": 3, "gap": 12, "theme": "dark"},
        "blocks": [],
    }
    length = len(json.dumps(doc, ensure_ascii=False))
    index = 0
    while length < size:
        block = _block(rng, index)
        doc["blocks"].append(block)
        length += len(json.dumps(block, ensure_ascii=False)) + 2  # ", " between blocks
        index += 1
    return json.dumps(doc, ensure_ascii=False)


def _table(rng: random.Random, size: int) -> str:
    rows: list[list[Any]] = []
    doc = {"columns": ["id", "customer", "country", "amount", "paid", "note"], "rows": rows}
    length = 60
    while length < size:
        row = [
            len(rows) + 1,
            _sentence(rng, 2),
            rng.choice(["DE", "FR", "US", "JP", "BR"]),
            round(rng.uniform(0, 10000), 2),
            rng.random() < 0.8,
            None if rng.random() < 0.7 else _sentence(rng, 3),
        ]
        rows.append(row)
        length += len(json.dumps(row, ensure_ascii=False)) + 1
    return json.dumps(doc, ensure_ascii=False)


def _deep(rng: random.Random, depth: int) -> str:
    node: dict[str, Any] = {"leaf": _sentence(rng, 3), "values": [1, 2.5, True, None]}
    for level in range(depth - 1, 0, -1):
        node = {"level": level, "name": _sentence(rng, 2), "child": node}
    return json.dumps(node, ensure_ascii=False)


def make_documents(seed: int = DOCUMENT_SEED) -> dict[str, str]:
    """The benchmark documents, by name; the same text for the same seed."""
    rng = random.Random(seed)
    docs = {
        "weather-200B": json.dumps(
            {
                "location": "San Francisco, CA",
                "temperature": 18.5,
                "unit": "celsius",
                "conditions": "Partly cloudy",
                "humidity": 72,
                "wind": {"speed": 14.2, "direction": "NW"},
                "forecast": [{"day": "Tue", "high": 21, "low": 12}, {"day": "Wed", "high": 19, "low": 11}],
                "alert": None,
            }
        ),
        "dashboard-5KB": _dashboard(rng, 5 * 1024),
        "markdown-50KB": json.dumps({"title": "Report", "content": _markdown(rng, 50 * 1024)}, ensure_ascii=False),
        "table-200KB": _table(rng, 200 * 1024),
        "deep-50": _deep(rng, 50),
        "deep-200": _deep(rng, 200),
    }
    for kb in (1, 4, 16, 64):
        docs[f"dashboard-{kb}KB"] = _dashboard(rng, kb * 1024)
    # A quarter of the long string and of the table, for their growth per 4x (made
    # last, so that the documents above stay the same bytes as in earlier runs).
    docs["markdown-12KB"] = json.dumps({"title": "Report", "content": _markdown(rng, 50 * 256)}, ensure_ascii=False)
    docs["table-50KB"] = _table(rng, 50 * 1024)
    return docs


def split_chunks(text: str, seed: int = CHUNK_SEED) -> list[str]:
    """Cut ``text`` into 1-8 character pieces, the same way for the same seed."""
    rng = random.Random(seed)
    chunks = []
    i = 0
    n = len(text)
    while i < n:
        step = rng.randint(CHUNK_MIN, CHUNK_MAX)
        chunks.append(text[i : i + step])
        i += step
    return chunks
