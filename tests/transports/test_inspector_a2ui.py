"""A2UI surfaces in the inspector (agui_engine/static/inspector-a2ui.js), in a real headless Chromium,
against a real ``agui-engine serve`` subprocess.

The agent is a file of its own (``tests/transports/a2ui_surface_agent.py``, served with ``--agent
py:...``) that emits ``a2ui-surface`` activities in the official ``@ag-ui/a2ui-middleware`` 0.0.10
shape and in the engine's streamed shape (``ACTIVITY_DELTA`` per component). What a person would see
is checked: the surface drawn by the official ``@a2ui/lit`` renderer, its components appearing in
order while the run streams, the lifecycle (building, retrying, failed) shown, a button's action
starting the next run with the action in ``forwardedProps.a2uiAction.userAction``, the fallback
drawing when the renderer refuses a surface, and no string of a surface ever running as script.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from .served import served
from .test_inspector import DEADLINE_MS, RUN_FINISHED_JS, browser, open_inspector  # noqa: F401 (browser: a fixture)

ROOT = Path(__file__).resolve().parents[2]
AGENT = "py:tests.transports.a2ui_surface_agent:agent"

#: Every text of the Surfaces panel, shadow roots included (what the renderer drew), in document order.
SURFACE_TEXT_JS = """(sel) => {
    const walk = (node) => {
        let out = "";
        for (const child of node.childNodes) {
            if (child.nodeType === Node.TEXT_NODE) out += child.textContent;
            else if (child.nodeType === Node.ELEMENT_NODE) {
                if (child.tagName === "STYLE" || child.tagName === "SCRIPT") continue;
                if (child.shadowRoot) out += walk(child.shadowRoot);
                out += walk(child);
                if (child.tagName === "INPUT" || child.tagName === "TEXTAREA") out += " [" + child.value + "] ";
            }
        }
        return out;
    };
    const root = document.querySelector(sel || "#surfaces");
    return root ? walk(root).replace(/\\s+/g, " ").trim() : "";
}"""
#: Every element of the Surfaces panel matching a selector, shadow roots included.
DEEP_COUNT_JS = """(sel) => {
    const deep = (root) => [...root.querySelectorAll(sel),
        ...[...root.querySelectorAll("*")].filter((e) => e.shadowRoot).flatMap((e) => deep(e.shadowRoot))];
    return deep(document.querySelector("#surfaces")).length;
}"""


async def send(page: Any, text: str) -> None:
    await page.fill("#message", text)
    await page.press("#message", "Enter")


async def surface_text(page: Any, sel: str | None = None) -> str:
    return str(await page.evaluate(SURFACE_TEXT_JS, sel))


@pytest.mark.parametrize("scenario", ["book a table", "book a table (snapshots)"])
async def test_surface_grows_in_order_and_a_button_round_trips(browser: Any, tmp_path: Path, scenario: str) -> None:  # noqa: F811
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        posts: list[dict[str, Any]] = []
        page.on("request", lambda r: posts.append(json.loads(r.post_data))
                if r.method == "POST" and r.url == url and r.post_data else None)
        await send(page, scenario)
        await page.wait_for_selector(".a2ui-activity[data-lifecycle='building']", timeout=DEADLINE_MS)
        # the components appear one after another, in the order they stream, before the run ends
        seen: list[str] = []
        for expected in ("Book a table", "Name", "Guests"):
            handle = await page.wait_for_function(f"""(want) => {{
                const text = ({SURFACE_TEXT_JS})(null);
                return text.includes(want) ? {{text, finished: ({RUN_FINISHED_JS})()}} : null;
            }}""", arg=expected, timeout=DEADLINE_MS)
            state = await handle.json_value()
            assert not state["finished"], f"{expected!r} only appeared after the run ended"
            seen.append(state["text"])
            if expected == "Book a table":  # mark the drawn surface: later updates must keep this element
                await page.evaluate("document.querySelector('a2ui-surface').__seenFirst = true")
        assert "Name" not in seen[0] and "Guests" not in seen[1]  # caught before the next one arrived
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        # drawn by the official renderer: an <a2ui-surface> whose shadow tree holds the basic catalog's elements
        activity = page.locator(".a2ui-activity")
        assert await activity.get_attribute("data-renderer") == "lit"
        assert await activity.get_attribute("data-lifecycle") == "painted"
        assert await page.evaluate(DEEP_COUNT_JS, "a2ui-surface") == 1
        assert await page.evaluate("document.querySelector('a2ui-surface').__seenFirst") is True  # updated in place
        assert await page.evaluate(DEEP_COUNT_JS, "input") == 2
        await page.wait_for_function(f"({SURFACE_TEXT_JS})(null).includes('[Ada]')", timeout=DEADLINE_MS)
        assert "Book now" in await surface_text(page)
        # a person types a name and clicks the button: the next run carries the action
        name = page.locator("a2ui-surface input").first
        await name.fill("Grace")
        await page.locator("a2ui-surface button", has_text="Book now").click()
        await page.wait_for_function("document.querySelectorAll('.a2ui-activity').length === 2", timeout=DEADLINE_MS)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        action = posts[-1]["forwardedProps"]["a2uiAction"]["userAction"]
        assert {k: action[k] for k in ("name", "surfaceId", "sourceComponentId", "context")} == {
            "name": "book_table", "surfaceId": "booking", "sourceComponentId": "submit",
            "context": {"name": "Grace", "guests": "2"}}
        assert posts[-1]["messages"][0]["content"] == scenario and all(m["role"] != "activity" for m in posts[-1]["messages"])
        await page.wait_for_function(f"({SURFACE_TEXT_JS})(null).includes('Booked for Grace, 2 guests')",
                                     timeout=DEADLINE_MS)
        reply = await page.inner_text("#messages")
        assert 'You clicked book_table on booking: {"guests": "2", "name": "Grace"}' in reply
        assert await page.inner_text("#finding-count") == "0"
        shot = tmp_path / "inspector-a2ui.png"
        await page.screenshot(path=str(shot), full_page=True)
        print(f"inspector screenshot: {shot}")
        assert page.errors == []


async def test_the_engines_own_stream_of_the_demo_form(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """The surface as agui_engine.genui.a2ui.A2UISurfaceStream streams it (a delta per closed component)."""
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        posts: list[dict[str, Any]] = []
        page.on("request", lambda r: posts.append(json.loads(r.post_data))
                if r.method == "POST" and r.url == url and r.post_data else None)
        await send(page, "engine")
        texts = []
        for expected in ("Book a table", "Date and time", "Requests"):
            handle = await page.wait_for_function(f"""(want) => {{
                const text = ({SURFACE_TEXT_JS})(null);
                return text.includes(want) ? {{text, finished: ({RUN_FINISHED_JS})()}} : null;
            }}""", arg=expected, timeout=DEADLINE_MS)
            state = await handle.json_value()
            assert not state["finished"], f"{expected!r} only appeared after the run ended"
            texts.append(state["text"])
        assert "Date and time" not in texts[0] and "Requests" not in texts[1]
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        assert await page.eval_on_selector_all(".a2ui-activity", "els => els.map(e => e.dataset.renderer)") == [
            "lit", "lit"]
        dashboard = await surface_text(page, ".a2ui-activity:nth-child(2)")
        for text in ("Tonight at Trattoria Demo", "Free tables", "4.6 / 5", "18:30", "3 tables for 2", "21:00",
                     "2 tables for 6"):  # the Row of Cards, and the List's template repeated over /slots
            assert text in dashboard, text
        await page.locator("a2ui-surface input").first.fill("Ada")
        await page.locator("a2ui-surface button", has_text="Book the table").click()
        await page.wait_for_function(f"({SURFACE_TEXT_JS})(null).includes('Booked for Ada, 2 guests')",
                                     timeout=DEADLINE_MS)
        action = posts[-1]["forwardedProps"]["a2uiAction"]["userAction"]
        assert action["name"] == "book_table" and action["surfaceId"] == "table-booking"
        assert action["context"] == {"name": "Ada", "when": "2026-12-04T19:30", "guests": "2", "notes": ""}
        assert page.errors == []


async def test_hostile_strings_never_run_and_a_refused_surface_falls_back(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        for text in ("hostile", "refuse"):
            await send(page, text)
            await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_function("document.querySelectorAll('.a2ui-activity').length === 2", timeout=DEADLINE_MS)
        drawn, refused = page.locator(".a2ui-activity").nth(0), page.locator(".a2ui-activity").nth(1)
        assert await drawn.get_attribute("data-renderer") == "lit"
        assert await refused.get_attribute("data-renderer") == "fallback"
        problem = await refused.locator(".a2ui-problem").inner_text()
        assert "refused" in problem and "TextField" in problem  # the renderer's own reason, shown
        hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
        lit_text = await surface_text(page, ".a2ui-activity:nth-child(1)")
        fallback_text = await surface_text(page, ".a2ui-activity:nth-child(2)")
        assert lit_text.count(hostile) >= 2 and fallback_text.count(hostile) >= 2  # shown as text, whole
        # nothing of it became markup: no script, no image with a handler, no javascript: URL loaded
        assert await page.evaluate(DEEP_COUNT_JS, "script") == 0
        assert await page.evaluate(DEEP_COUNT_JS, "[onerror]") == 0
        assert await page.evaluate(DEEP_COUNT_JS, "img[src^='x']") == 0
        await page.wait_for_timeout(300)  # a handler that would fire on load has had its chance
        assert await page.evaluate("window.__pwned") is None
        assert page.errors == []


async def test_without_the_renderer_the_fallback_draws_and_its_button_round_trips(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """The vendored bundle does not load (answered 404 here): every surface is drawn by the inspector's
    own drawing, bound values read from the data model, and its button sends the same user action."""
    with served(tmp_path, "--agent", AGENT) as url:
        page = await browser.new_page()
        await page.route("**/static/a2ui-lit.js", lambda route: route.fulfill(status=404, body="gone"))
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(url + "inspect")
        await page.wait_for_function("window.__inspector && window.__inspector.ready", timeout=DEADLINE_MS)
        posts: list[dict[str, Any]] = []
        page.on("request", lambda r: posts.append(json.loads(r.post_data))
                if r.method == "POST" and r.url == url and r.post_data else None)
        await send(page, "book a table")
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        activity = page.locator(".a2ui-activity")
        await page.wait_for_selector(".a2ui-activity[data-renderer='fallback'] .a2ui-button", timeout=DEADLINE_MS)
        assert "did not load" in await activity.locator(".a2ui-problem").inner_text()
        nodes = await page.eval_on_selector_all(".a2ui-fallback .a2ui-node", "els => els.map(e => e.dataset.componentId)")
        assert nodes == ["root", "col", "title", "name", "guests", "submit", "submit-label"]  # the tree, in order
        text = await activity.inner_text()
        assert "label: Name" in text and "value: Ada" in text  # a bound value, read from the data model
        await page.click(".a2ui-button")
        await page.wait_for_function("document.querySelectorAll('.a2ui-activity').length === 2", timeout=DEADLINE_MS)
        action = posts[-1]["forwardedProps"]["a2uiAction"]["userAction"]
        assert {k: action[k] for k in ("name", "surfaceId", "sourceComponentId", "context")} == {
            "name": "book_table", "surfaceId": "booking", "sourceComponentId": "submit",
            "context": {"name": "Ada", "guests": "2"}}
        assert errors == []


async def test_lifecycle_retrying_then_painted_and_failed(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        await send(page, "retry")
        retrying = await page.wait_for_selector(".a2ui-activity[data-lifecycle='retrying']", timeout=DEADLINE_MS)
        status = await retrying.inner_text()
        assert "retrying" in status and "attempt 2/3" in status and "child 'nope' does not exist" in status
        await page.wait_for_selector(".a2ui-activity[data-lifecycle='painted'][data-renderer='lit']",
                                     timeout=DEADLINE_MS)  # replaced in place by the painted surface
        assert await page.locator(".a2ui-activity").count() == 1
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await send(page, "repaint")
        await page.wait_for_function(f"({SURFACE_TEXT_JS})('.a2ui-activity:nth-child(2)').includes('Book a table')",
                                     timeout=DEADLINE_MS)
        await page.wait_for_selector(".a2ui-activity:nth-child(2)[data-lifecycle='retrying']", timeout=DEADLINE_MS)
        gone = await page.evaluate(f"""() => ({{
            surfaces: document.querySelectorAll('.a2ui-activity:nth-child(2) a2ui-surface').length,
            text: ({SURFACE_TEXT_JS})('.a2ui-activity:nth-child(2) .a2ui-body')}})""")
        assert gone == {"surfaces": 0, "text": ""}  # the refused surface is not kept while it is retried
        await page.wait_for_function(f"({SURFACE_TEXT_JS})('.a2ui-activity:nth-child(2)').includes('Book now')",
                                     timeout=DEADLINE_MS)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await send(page, "failed")
        failed = await page.wait_for_selector(".a2ui-activity[data-lifecycle='failed']", timeout=DEADLINE_MS)
        assert "A2UI generation failed after 3 attempts" in await failed.inner_text()
        assert page.errors == []


async def test_the_renderer_and_its_licences_are_served(tmp_path: Path) -> None:
    with served(tmp_path, "--agent", AGENT) as url:
        async with httpx.AsyncClient() as client:
            bundle = await client.get(url + "static/a2ui-lit.js")
            licences = await client.get(url + "static/a2ui-lit.LICENSES.txt")
            view = await client.get(url + "static/inspector-a2ui.js")
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("text/javascript")
    assert bundle.text.startswith("/* @a2ui/lit 0.11.0 (Apache-2.0)")
    assert licences.status_code == 200 and "@a2ui/lit 0.11.0 (Apache-2.0)" in licences.text
    assert "lit 3.3.3 (BSD-3-Clause)" in licences.text
    assert view.status_code == 200


def test_the_vendored_bundle_is_what_the_build_script_makes() -> None:
    """The committed bundle is reproducible from the lock file (the script installs the build's pinned
    npm packages with ``npm ci``; tests/install-deps.sh has installed them already in CI)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_a2ui_lit.py"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_serve_a2ui_demo_booking_round_trip(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """``agui-engine serve --a2ui``: the embedded model's booking form and dashboard drawn by the official
    renderer while the run streams; the person books, and the model confirms from the action's context."""
    with served(tmp_path, "--a2ui", "--pace", "0.004") as url:
        page = await open_inspector(browser, url)
        posts: list[dict[str, Any]] = []
        page.on("request", lambda r: posts.append(json.loads(r.post_data))
                if r.method == "POST" and r.url == url and r.post_data else None)
        await send(page, "book a table for two")
        handle = await page.wait_for_function(f"""() => {{
            const text = ({SURFACE_TEXT_JS})(null);
            return text.includes("Book a table") ? {{text, finished: ({RUN_FINISHED_JS})()}} : null;
        }}""", timeout=DEADLINE_MS)
        early = await handle.json_value()
        assert not early["finished"] and "Book the table" not in early["text"]  # caught while it streams
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        renderers = await page.eval_on_selector_all(".a2ui-activity", "els => els.map(e => e.dataset.renderer)")
        assert renderers == ["lit", "lit"]
        text = await surface_text(page)
        for shown in ("Trattoria Demo · 12 Via Esempio (demo data)", "Book the table", "Free tables", "4.6 / 5",
                      "18:30", "3 tables for 2", "[2]", "[2026-12-04]", "[19:30]"):  # date and time: two inputs
            assert shown in text, shown
        await page.locator("a2ui-surface input").first.fill("Grace")
        await page.locator("a2ui-surface button", has_text="Book the table").click()
        await page.wait_for_function(
            f"({SURFACE_TEXT_JS})(null).includes('A table for 2 on 2026-12-04 at 19:30, under the name Grace.')",
            timeout=DEADLINE_MS)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        action = posts[-1]["forwardedProps"]["a2uiAction"]["userAction"]
        assert (action["name"], action["surfaceId"], action["sourceComponentId"]) == ("book_table", "table-booking",
                                                                                      "book")
        assert action["context"] == {"name": "Grace", "when": "2026-12-04T19:30", "guests": "2", "notes": ""}
        assert await page.locator(".a2ui-activity").count() == 3
        assert "Booking it." in await page.inner_text("#messages")
        assert await page.inner_text("#finding-count") == "0"
        shot = tmp_path / "inspector-a2ui-demo.png"
        await page.screenshot(path=str(shot), full_page=True)
        print(f"inspector screenshot: {shot}")
        assert page.errors == []


#: How long the page may take to run a trivial script after a hostile surface (generous: a busy
#: machine; a hung tab never answers at all, a crashed one raises).
ANSWER_BOUND_S = 30.0


@pytest.mark.timeout(120)  # six hostile runs in a real browser, one of them a ~4 MB event
async def test_hostile_surfaces_from_any_source_are_refused_and_the_page_keeps_answering(
        browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """Issue 30 point 3: a reference cycle (in a snapshot, formed by a later delta, or in a tool's
    ``a2ui_operations`` result), 3,000 levels of nesting, 100,000 components and 31 components each
    referenced twice (2**31 to draw) arrive as activities,
    past ``render_a2ui``'s checks: the inspector checks each surface itself (the limits the server hands
    it, spec/limits.md) and shows a refusal instead of drawing it; the tab keeps answering."""
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        cases = [("bomb cycle", "child_cycle", "a -> b -> a"), ("bomb cycle delta", "child_cycle", "a -> b -> a"),
                 ("bomb result", "child_cycle", "a -> b -> a"), ("bomb deep", "too_deep", "64"),
                 ("bomb many", "too_many_components", "4096"),
                 ("bomb shared", "too_many_components", "referenced from several places")]
        for n, (text, code, detail) in enumerate(cases, start=1):
            await send(page, text)
            await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
            card = page.locator(f".a2ui-activity:nth-child({n})")
            await card.and_(page.locator("[data-renderer='refused']")).wait_for(timeout=DEADLINE_MS)
            answer = await asyncio.wait_for(page.evaluate("() => 6 * 7"), ANSWER_BOUND_S)
            assert answer == 42, text
            problem = await card.locator(".a2ui-problem").inner_text()
            assert code in problem and detail in problem, (text, problem)
            assert await card.locator("a2ui-surface, .a2ui-fallback").count() == 0  # nothing of it drawn
        # the page still works: a drawable surface after them is drawn by the renderer
        await send(page, "book a table (snapshots)")
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_selector(f".a2ui-activity:nth-child({len(cases) + 1})[data-renderer='lit']",
                                     timeout=DEADLINE_MS)
        assert page.errors == []


async def test_the_page_gets_the_servers_a2ui_limits(tmp_path: Path) -> None:
    """The inspector's checks use the Python constants (spec/limits.md), served as a module."""
    from agui_engine.genui import a2ui

    with served(tmp_path, "--agent", AGENT) as url:
        async with httpx.AsyncClient() as client:
            limits = await client.get(url + "static/a2ui-limits.js")
    assert limits.status_code == 200 and limits.headers["content-type"].startswith("text/javascript")
    for name in ("MAX_A2UI_COMPONENTS", "MAX_A2UI_DEPTH", "MAX_A2UI_JSON_DEPTH"):
        assert f"export const {name} = {getattr(a2ui, name)};" in limits.text


@pytest.mark.parametrize(("scenario", "texts"), [
    ("v1 streamed", ("Book a table", "Date and time", "Requests")),
    ("v1 inline", ("Book a table", "Name", "Guests", "Book now")),
])
async def test_a2ui_v1_0_surfaces_are_drawn(browser: Any, tmp_path: Path, scenario: str,  # noqa: F811
                                            texts: tuple[str, ...]) -> None:
    """Issue 34: A2UI v1.0 operations (streamed by the engine with the v1.0 basic catalog, or one v1.0
    createSurface with inline components and data model) are drawn; no npm renderer supports v1.0, so
    the inspector hands them to the v0.9 Lit renderer in their v0.9 form, or draws them itself."""
    with served(tmp_path, "--agent", AGENT) as url:
        page = await open_inspector(browser, url)
        await send(page, scenario)
        for text in texts:
            await page.wait_for_function(f"({SURFACE_TEXT_JS})(null).includes({json.dumps(text)})",
                                         timeout=DEADLINE_MS)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        card = page.locator(".a2ui-activity")
        assert await card.get_attribute("data-a2ui-version") == "v1.0"
        renderer = await card.get_attribute("data-renderer")
        print(f"{scenario}: drawn by {renderer}: {await card.locator('.a2ui-problem').inner_text()}")
        if scenario == "v1 streamed":
            assert renderer == "lit"  # the v1.0 basic catalog's components are v0.9's
        else:  # v1.0's TextField placeholder is no v0.9 prop: the v0.9 renderer refuses, the fallback draws
            assert renderer == "fallback"
            assert "placeholder" in await card.locator(".a2ui-problem").inner_text()
        assert page.errors == []
