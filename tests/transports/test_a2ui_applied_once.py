"""A2UI applied once (issue 31): the official ``@ag-ui/a2ui-middleware`` 0.0.10 under node, on a real
``@ag-ui/client`` ``HttpAgent`` in front of a real ``agui-engine serve --a2ui`` subprocess. The
middleware injects its ``render_a2ui`` tool into the run's tools; the gateway sees it, does not apply
A2UI itself (no surface of its own, no ``ACTIVITY_DELTA``), and says so in its log once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .served import served

JS = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS / "a2ui_client_middleware.mjs"
LOG_LINE = "a client-side A2UI middleware is active"


def _node(*args: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "@ag-ui" / "a2ui-middleware").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("node and tests/js's npm packages are required: run tests/install-deps.sh")
        pytest.skip("needs node and tests/js's npm packages: run tests/install-deps.sh")
    done = subprocess.run([node, str(SCRIPT), *args], capture_output=True, text=True, timeout=90, cwd=JS, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.timeout(120)  # a gateway subprocess and two runs of the embedded model under node
def test_with_the_middleware_in_front_the_gateway_leaves_a2ui_to_it(tmp_path: Path) -> None:
    with served(tmp_path, "--a2ui", "--pace", "0") as url:
        result = _node(url, "thread-once", "book a table for two")
        log = (tmp_path / "serve.log").read_text()
    assert [r["error"] for r in result["runs"]] == [None, None]
    for run in result["runs"]:
        events = run["events"]
        types = [e["type"] for e in events]
        assert "ACTIVITY_DELTA" not in types  # the gateway's own surfaces stream as deltas: none came
        # the model called the middleware's tool, as a client tool; the middleware drew its surfaces
        calls = [e for e in events if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "render_a2ui"]
        surfaces = [e for e in events if e["type"] == "ACTIVITY_SNAPSHOT" and e["activityType"] == "a2ui-surface"]
        assert calls and surfaces
        ids = {f"a2ui-surface-{c['toolCallId']}" for c in calls}
        assert {s["messageId"] for s in surfaces} == ids  # one writer per surface: the middleware
        painted = [s for s in surfaces if "a2ui_operations" in s["content"]]
        # the middleware paints a surface only once its component array has closed (then re-sends it per
        # data item); the gateway paints at the first closed component: every paint holds the whole list
        for i in ids:
            lists = [[op["updateComponents"]["components"] for op in s["content"]["a2ui_operations"]
                      if "updateComponents" in op] for s in painted if s["messageId"] == i]
            assert lists and all(one == lists[0] for one in lists) and len(lists[0][0]) > 1
        assert types[-1] == "RUN_FINISHED"
    final = [s for s in result["runs"][0]["events"]
             if s["type"] == "ACTIVITY_SNAPSHOT" and "a2ui_operations" in s["content"]][-1]["content"]
    assert any(op.get("updateComponents") for op in final["a2ui_operations"])
    assert not [w for w in result["warnings"] if "activity" in w.lower()], result["warnings"]
    assert log.count(LOG_LINE) == 1, log  # said once, though two runs showed it
