"""A2UI progress as whole snapshots (issue 31: clients without ACTIVITY_DELTA, assistant-ui): the same
final surfaces as the delta stream on every recorded stream and chunking, no ACTIVITY_DELTA, still
component by component while the arguments stream (a big surface's later steps grouped, bytes linear);
``serve --a2ui --a2ui-snapshots`` end to end is a CLI test (tests/agui_engine/cli/test_serve.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from agui_engine.genui.a2ui import A2UICatalog, A2UISurfaceStream, A2UITransformer
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.events import RunAgentInput

from .a2ui_cases import FORM, LIST, STREAMS, build_events
from .test_a2ui import INPUT, chars, fold, random_split, sixteen, whole

SPLITS = {"whole": whole, "chars": chars, "sixteen": sixteen, "random": random_split(7)}


def transformed(events: list[dict[str, Any]], *, snapshots: bool) -> list[dict[str, Any]]:
    t = A2UITransformer(msgspec.convert(INPUT, RunAgentInput), catalog=A2UICatalog.basic(), snapshots=snapshots)
    out = []
    for e in events:
        out += t.feed(decode_event(json.dumps(e)))
    out += t.close()
    return [json.loads(encode_event(e)) for e in out]


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_snapshots_end_where_deltas_end(name: str, split: str) -> None:
    events = build_events(STREAMS[name], SPLITS[split])
    deltas, snaps = transformed(events, snapshots=False), transformed(events, snapshots=True)
    assert "ACTIVITY_DELTA" not in [e["type"] for e in snaps]
    others_d, final_d, _ = fold(deltas)
    others_s, final_s, _ = fold(snaps)
    assert final_s == final_d and others_s == others_d
    # at most one snapshot where each delta was (A2UI_SNAPSHOT_GROWTH groups the later steps of a big surface)
    extra = sum(e["type"] == "ACTIVITY_SNAPSHOT" for e in snaps) - sum(e["type"] == "ACTIVITY_SNAPSHOT" for e in deltas)
    assert 0 <= extra <= sum(e["type"] == "ACTIVITY_DELTA" for e in deltas)


@pytest.mark.parametrize("surface", [FORM, LIST], ids=["form", "list"])
def test_snapshots_grow_component_by_component(surface: dict[str, Any]) -> None:
    args = json.dumps(surface)
    s = A2UISurfaceStream("c", catalog=A2UICatalog.basic(), snapshots=True)
    counts = []
    s.start()
    for at, ch in enumerate(args):
        for e in s.feed(ch):
            ops = e.content.get("a2ui_operations") if isinstance(e.content, dict) else None
            if ops:
                counts.append((at, len(ops[1]["updateComponents"]["components"])))
    s.close()
    n = len(surface["components"])
    shown = [c for _, c in counts]
    assert sorted(set(shown)) == list(range(1, n + 1))  # every count from the first component to the last
    assert shown == sorted(shown)  # only ever grows
    assert counts[0][0] < len(args) // 2  # the first one well before the arguments end


def test_a_big_surfaces_snapshots_stay_linear_in_bytes() -> None:
    """4,000 components: each snapshot repeats all before it, so one per component would be quadratic
    (~2,000x the arguments); grouped by A2UI_SNAPSHOT_GROWTH they stay a small multiple."""
    comps = [{"id": "root", "component": "Column", "children": [f"t{i}" for i in range(3999)]},
             *({"id": f"t{i}", "component": "Text", "text": f"row {i}"} for i in range(3999))]
    args = json.dumps({"surfaceId": "big", "components": comps})
    s = A2UISurfaceStream("c", catalog=None, snapshots=True)
    events = [s.start()]
    for at in range(0, len(args), 16):
        events += s.feed(args[at:at + 16])
    events += s.close()
    assert s.valid
    wire = sum(len(encode_event(e)) for e in events)
    assert wire < 20 * len(args)
    last = events[-1].content["a2ui_operations"][1]["updateComponents"]["components"]
    assert last == comps
