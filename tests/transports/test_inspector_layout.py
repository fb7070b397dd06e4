"""The inspector's layout, measured in a real headless Chromium: a query is one line (its rows were
140 px tall, the data squeezed into a sliver), and no column of the event timeline is clipped (the
time and finding columns were pushed past the panel's edge by long types and run ids)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agui_engine.cli.demo import demo_agent
from agui_engine.transports import start_sse_server

from .test_inspector import BROKEN, DEADLINE_MS, browser, open_inspector  # noqa: F401 - the Chromium fixture

#: Per table: each column's cells that overflow their box (scrollWidth > clientWidth) and its
#: rightmost edge; every row's height; the panels' edges and horizontal overflow.
MEASURE_JS = """() => {
  const columns = (table) => {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
    const out = {};
    for (const tr of table.querySelectorAll("tbody tr")) {
      if (tr.children.length !== heads.length) continue;
      [...tr.children].forEach((td, i) => {
        const c = out[heads[i]] || (out[heads[i]] = { clipped: 0, right: 0 });
        if (td.scrollWidth > td.clientWidth) c.clipped++;
        c.right = Math.max(c.right, td.getBoundingClientRect().right);
      });
    }
    return out;
  };
  const panel = document.querySelector("#timeline-panel");
  return {
    queryRows: [...document.querySelectorAll("#queries tbody tr")].map((r) => r.getBoundingClientRect().height),
    eventRows: [...document.querySelectorAll("#timeline tbody tr:not(.finding)")].map((r) => r.getBoundingClientRect().height),
    timeline: columns(document.querySelector("#timeline")),
    timelineRight: panel.getBoundingClientRect().right,
    timelineOverflow: panel.scrollWidth - panel.clientWidth,
    queries: columns(document.querySelector("#queries")),
    sideRight: document.querySelector("#side").getBoundingClientRect().right,
    cutTitles: [...document.querySelectorAll("#queries td")].every((td) => td.title === td.textContent),
    pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


PAGE_OVERFLOW_JS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.parametrize("width", [1280, 1440])
async def test_query_rows_are_one_line_and_no_timeline_column_is_clipped(browser: Any, width: int,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    server = await start_sse_server(demo_agent(), port=0, inspector=True)
    try:
        page = await open_inspector(browser, server.url)
        await page.set_viewport_size({"width": width, "height": 900})
        # the page never scrolls sideways (at 1280 px the queries' "data / error" header spilled 45 px
        # past its column and the document scrolled): empty, and once full (below)
        assert await page.evaluate(PAGE_OVERFLOW_JS) <= 0
        # findings (long texts) from a recording, then a live run with two bound cards: long CUSTOM
        # types, a run id per row, two queries with data
        await page.set_input_files("#recording", str(BROKEN))
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.fill("#message", "Compare the weather in Tokyo and Paris")
        await page.press("#message", "Enter")
        await page.wait_for_function("document.querySelector('#status').textContent.startsWith('done (')",
                                     timeout=DEADLINE_MS)
        await page.wait_for_function("""window.__inspector.binding.log.length === 2
            && window.__inspector.binding.log.every((q) => q.status === "ok")
            && document.querySelectorAll("#queries tbody tr").length === 2""", timeout=DEADLINE_MS)
        await page.wait_for_function(
            "document.querySelectorAll('#timeline tbody tr').length === window.__inspector.store.events",
            timeout=DEADLINE_MS)
        m = await page.evaluate(MEASURE_JS)
        await page.screenshot(path=str(tmp_path / f"inspector-{width}.png"), full_page=True)
        assert m["pageOverflow"] <= 0, m
        line = max(m["eventRows"])  # an event row without a finding: one line of text
        assert line < 30, m["eventRows"]
        assert len(m["queryRows"]) == 2 and all(h <= line + 1 for h in m["queryRows"]), m["queryRows"]
        # the timeline: no cell overflows its column, the table stays inside its panel
        assert {name: c["clipped"] for name, c in m["timeline"].items() if c["clipped"]} == {}, m["timeline"]
        assert m["timelineOverflow"] <= 0 and m["timeline"]["finding"]["right"] <= m["timelineRight"], m
        assert m["timeline"]["time"]["right"] < m["timeline"]["finding"]["right"]
        # the queries: the short columns whole, the table inside the side panel; a cut value has its tooltip
        for name in ("#", "status", "HTTP", "time"):
            assert m["queries"][name]["clipped"] == 0, (name, m["queries"])
        assert m["queries"]["data / error"]["right"] <= m["sideRight"] + 0.5, m
        assert m["cutTitles"]
        assert page.errors == []
    finally:
        await server.close()
