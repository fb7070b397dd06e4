"""JSON Schemas of the AG-UI types, generated from the Structs in :mod:`agui_engine.protocol.events`.

The checked-in copies live in ``spec/schema/``; ``tests/agui_engine/test_schema.py`` fails when
they differ from what this module generates (it does no IO: the command below writes
them). Regenerate with::

    python -m agui_engine.cli.schema spec/schema

Each document is self-contained (JSON Schema 2020-12, definitions under ``$defs``). They
describe the wire form (camelCase names, tags always present). Unknown properties are
allowed, because decoders drop them (AG-UI 1.1 processing rule; see ``spec/events.md``).
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from .events import PROTOCOL_VERSION, Event, Message, RunAgentInput

__all__ = ["SCHEMA_DOCUMENTS", "render", "schemas"]

_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

#: file name -> (root type, title)
SCHEMA_DOCUMENTS: Final[dict[str, tuple[Any, str]]] = {
    "event.schema.json": (Event, "AG-UI 1.0 event (any of the 31 types, tagged on `type`)"),
    "message.schema.json": (Message, "AG-UI 1.0 message (tagged on `role`)"),
    "run-agent-input.schema.json": (RunAgentInput, "AG-UI 1.0 RunAgentInput"),
}


def schemas() -> dict[str, dict[str, Any]]:
    """file name -> JSON Schema document, generated from the Structs (no IO)."""
    out = {}
    for name, (root, title) in SCHEMA_DOCUMENTS.items():
        (top,), defs = msgspec.json.schema_components([root], ref_template="#/$defs/{name}")
        out[name] = {
            "$schema": _DIALECT,
            "$id": f"https://agui-engine.dev/spec/schema/{name}",
            "title": title,
            "description": f"Generated from agui_engine.protocol.events (AG-UI protocol {PROTOCOL_VERSION}) "
            "by `python -m agui_engine.cli.schema spec/schema`. Do not edit.",
            **top,
            "$defs": dict(sorted(defs.items())),
        }
    return out


def render(document: dict[str, Any]) -> str:
    """The exact text checked in: 2-space indent, UTF-8, trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
