"""The official A2UI Python SDK (``a2ui-core`` 0.4.0, what ``a2ui-agent-sdk`` 0.9.0 validates with) against
this engine's own catalog handling, on the demo's surfaces, per component (issue 34).

What a streaming surface needs is a per-component check the moment a component's object closes (the
engine does it for every closed component, ``A2UISurfaceStream``), and a catalog loaded once. Measured
in one process, side by side, median of interleaved rounds:

* **import**: ``import a2ui.core`` (catalogs, validator) vs ``import agui_engine.genui.a2ui``, each in a
  fresh interpreter (best of 3);
* **catalog**: building the v0.9 and v1.0 basic catalogs (``BasicCatalog()`` vs ``A2UICatalog.basic``,
  the first props check included: the engine compiles a component's JSON Schema validator on first use);
* **per component**: ``PayloadValidator(catalog).validate_component(c)`` vs the engine's own check of one
  component (membership, then the catalog's JSON Schema: ``props_problem``), on the 30
  components of the demo's booking form and dashboard, v0.9 and v1.0 (the v1.0 ones as the demo writes
  them for v1.0: headings as Markdown);
* **verdicts**: which components each side refuses, and why, on the same corpus plus known-bad ones.

``/work/wt/<you>-venv/bin/python benchmarks/bench_a2ui_sdk.py`` (a venv with ``a2ui-core==0.4.0`` and
``babel``; not a dependency of the engine) prints the table; ``spec/a2ui.md`` has the figures. Without
``a2ui-core`` it says so and exits 0.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

from agui_engine.demo.booking import availability_dashboard, booking_form, for_a2ui_version
from agui_engine.genui import a2ui as engine

ROUNDS = 7
BAD = [  # (why, component): each one some side should refuse
    ("unknown prop", {"id": "x", "component": "Text", "text": "a", "colour": "red"}),
    ("wrong enum", {"id": "x", "component": "Image", "url": "u", "fit": "stretchy"}),
    ("missing required", {"id": "x", "component": "Image"}),
    ("unknown component", {"id": "x", "component": "Carousel"}),
    ("id not UAX #31", {"id": "submit-label", "component": "Text", "text": "a"}),
    ("h2 heading", {"id": "x", "component": "Text", "text": "a", "variant": "h2"}),
]


def corpus(version: str) -> list[dict[str, Any]]:
    surfaces = (booking_form(2), availability_dashboard())
    return [c for s in surfaces for c in for_a2ui_version(s, version)["components"]]


def ours_check(catalog: engine.A2UICatalog, comp: dict[str, Any], i: int) -> list[str]:
    """What the stream checks when one component closes: membership, then its props' schema."""
    if comp.get("component") not in catalog.components:
        return ["unknown_component"]
    problem = catalog.props_problem(comp, i)
    return [] if problem is None else [problem.code]


def sdk_check(validator: Any, comp: dict[str, Any]) -> list[str]:
    from a2ui.core.exceptions import A2uiCatalogError, A2uiValidationError

    try:
        validator.validate_component(comp)
    except A2uiValidationError as exc:
        return [d.code for d in exc.details] or ["invalid"]
    except A2uiCatalogError:
        return ["unknown_component"]
    return []


def import_seconds(module: str) -> float:
    best = float("inf")
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", f"import time; t = time.perf_counter(); import {module}; "
                               "print(time.perf_counter() - t)"], capture_output=True, text=True, check=True)
        best = min(best, float(done.stdout))
    return best


def measure() -> dict[str, Any]:
    from a2ui.core.basic_catalog import v0_9, v1_0
    from a2ui.core.validation.payload_validator import PayloadValidator

    out: dict[str, Any] = {"import_ms": {"a2ui-core": import_seconds("a2ui.core.validation.payload_validator") * 1e3,
                                         "engine": import_seconds("agui_engine.genui.a2ui") * 1e3}}
    rows = []
    for version, sdk_cls in (("v0.9", v0_9.BasicCatalog), ("v1.0", v1_0.BasicCatalog)):
        comps = corpus(version)
        t = time.perf_counter()
        sdk_validator = PayloadValidator(sdk_cls())
        sdk_check(sdk_validator, comps[0])
        sdk_load = time.perf_counter() - t
        t = time.perf_counter()
        catalog = engine.A2UICatalog.from_json(engine.A2UICatalog.basic(version).context_entry().value)
        ours_check(catalog, comps[0], 0)
        ours_load = time.perf_counter() - t
        for c in comps:  # warm: every validator compiled on both sides
            sdk_check(sdk_validator, c)
            ours_check(catalog, c, 0)
        sdk_times, our_times = [], []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            for c in comps:
                sdk_check(sdk_validator, c)
            sdk_times.append((time.perf_counter() - t) / len(comps))
            t = time.perf_counter()
            for i, c in enumerate(comps):
                ours_check(catalog, c, i)
            our_times.append((time.perf_counter() - t) / len(comps))
        refused = {"a2ui-core": {c["id"]: sdk_check(sdk_validator, c) for c in comps if sdk_check(sdk_validator, c)},
                   "engine": {c["id"]: ours_check(catalog, c, 0) for c in comps if ours_check(catalog, c, 0)}}
        bad = {why: {"a2ui-core": sdk_check(sdk_validator, c), "engine": ours_check(catalog, c, 0)} for why, c in BAD}
        rows.append({"version": version, "components": len(comps), "sdk_us": statistics.median(sdk_times) * 1e6,
                     "ours_us": statistics.median(our_times) * 1e6, "sdk_load_ms": sdk_load * 1e3,
                     "ours_load_ms": ours_load * 1e3, "refused": refused, "bad": bad})
    out["rows"] = rows
    return out


def main() -> None:
    try:
        import a2ui.core  # noqa: F401
    except ImportError:
        print("a2ui-core is not installed here (pip install a2ui-core==0.4.0 babel in a venv): nothing to compare")
        return
    result = measure()
    imp = result["import_ms"]
    print(f"import: a2ui-core {imp['a2ui-core']:.0f} ms, engine {imp['engine']:.0f} ms")
    print("| version | components | a2ui-core µs/component | engine µs/component | engine / a2ui-core | "
          "a2ui-core catalog ms | engine catalog ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in result["rows"]:
        print(f"| {r['version']} | {r['components']} | {r['sdk_us']:.0f} | {r['ours_us']:.0f} | "
              f"{r['ours_us'] / r['sdk_us']:.1f}x | {r['sdk_load_ms']:.1f} | {r['ours_load_ms']:.1f} |")
    for r in result["rows"]:
        print(f"{r['version']} demo components refused: {json.dumps(r['refused'])}")
        print(f"{r['version']} known-bad: {json.dumps(r['bad'])}")


if __name__ == "__main__":
    main()
