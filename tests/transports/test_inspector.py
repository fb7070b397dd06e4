"""The inspector page and the static applier, served by the SSE gateway, in a real headless Chromium.

Chromium is Debian's (``/usr/bin/chromium``), driven by Playwright's Python API with the system
browser (no browser download). The page is exercised as a person would: type a message, watch a
component card fill in while the run is still streaming, drop the connection and see it resume,
open a broken recording and see its findings. A screenshot of the live run is saved under the test's
tmp dir (its path is printed).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_engine.cli.demo import demo_agent
from agui_engine.transports import inspector as inspector_module
from agui_engine.transports import start_sse_server
from agui_engine.transports.inspector import verify_recording
from tests.helpers import chromium

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "agui_engine" / "data" / "example-broken.ndjson"
#: Every wait in the browser has this deadline (ms): a run of the demo takes 1-3 s here.
DEADLINE_MS = 30_000


def chromium_path() -> str:
    return chromium()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"], headless=True)
        try:
            yield b
        finally:
            await b.close()


async def start_run(page: Any, message: str) -> None:
    """Type ``message``, press Enter, wait for a card showing props while it still streams."""
    await page.fill("#message", message)
    await page.press("#message", "Enter")
    await page.wait_for_selector(".card[data-streaming-state='streaming'] .prop", timeout=DEADLINE_MS)


async def open_inspector(browser: Any, url: str) -> Any:
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(url + "inspect")
    await page.wait_for_function("window.__inspector && window.__inspector.ready", timeout=DEADLINE_MS)
    page.errors = errors
    return page


COMPONENTS_JS = """() => [...window.__inspector.store.components.values()].map(c => ({
    id: c.id, name: c.name, props: c.props, finalProps: c.finalProps, streamingState: c.streamingState,
    propsStatus: c.propsStatus}))"""
RUN_FINISHED_JS = "() => window.__inspector.rows.some(r => r.type === 'RUN_FINISHED' || r.type === 'RUN_ERROR')"
#: The drawn tree of a ``render_ui`` card (by component id; the first tree card for null), nested:
#: ``[nodeId, component, done, [children...]]`` per node, a string per text.
TREE_JS = """(id) => {
    const card = document.querySelector(id ? `.card[data-component-id="${id}"]` : ".card.ui-tree");
    const walk = (el) => [...el.children].flatMap((c) => c.classList.contains("ui-node")
        ? [[c.dataset.nodeId, c.dataset.component, c.dataset.done, walk(c.querySelector(":scope > .ui-children")
            || document.createElement("div"))]]
        : c.classList.contains("ui-text") ? [c.textContent] : []);
    return walk(card);
}"""


async def test_live_run_card_fills_in_while_streaming(browser: Any, tmp_path: Path) -> None:
    server = await start_sse_server(demo_agent(pace_seconds=0.01), port=0, inspector=True)
    try:
        page = await open_inspector(browser, server.url)
        await start_run(page, "Show me the dashboard")
        # One atomic look inside the page: a card on the screen showing props, its component still
        # streaming, and no terminal event yet (a timeout here fails the test).
        handle = await page.wait_for_function(f"""() => {{
            const finished = ({RUN_FINISHED_JS})();
            const shown = document.querySelectorAll(".card[data-streaming-state='streaming'] .prop").length;
            const components = ({COMPONENTS_JS})();
            const streaming = components.filter(c => c.streamingState === "streaming" && Object.keys(c.props).length);
            return !finished && shown && streaming.length ? {{streaming, shown}} : null;
        }}""", timeout=DEADLINE_MS)
        mid = await handle.json_value()
        streaming = mid["streaming"]
        assert streaming[0]["props"] and mid["shown"] >= 1
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_function("document.querySelectorAll('.card[data-streaming-state=done]').length >= 1",
                                     timeout=DEADLINE_MS)
        final = await page.evaluate(COMPONENTS_JS)
        assert final and all(c["streamingState"] == "done" for c in final)
        for c in final:
            assert c["props"] == c["finalProps"] and c["props"]
            assert c["propsStatus"] and set(c["propsStatus"].values()) == {"done"}
        # the props mid-run were a prefix of the final ones (same keys seen so far)
        assert set(streaming[0]["props"]) <= set(next(c for c in final if c["id"] == streaming[0]["id"])["props"])
        # the card shows every prop with its status, the timeline every event, no finding for a clean run
        names = await page.eval_on_selector_all(".card .prop", "els => els.map(e => e.dataset.prop)")
        assert set(names) >= set(final[0]["props"])
        # the badge of every prop and the mark of every nested member come from the per-path status map
        await page.wait_for_function(
            "[...document.querySelectorAll('.card .prop, .card .value li')].every(e => e.dataset.status === 'done')",
            timeout=DEADLINE_MS)
        assert await page.eval_on_selector_all(".card .value li", "els => els.length") > 0
        await page.wait_for_function(  # the last render lands on the next animation frame
            "document.querySelectorAll('#timeline tbody tr').length === window.__inspector.store.events",
            timeout=DEADLINE_MS)
        assert await page.evaluate("window.__inspector.store.events") > 20
        assert await page.inner_text("#finding-count") == "0"
        assert await page.eval_on_selector_all(".message", "els => els.map(e => e.dataset.role)") >= ["user"]
        shot = tmp_path / "inspector-live.png"
        await page.screenshot(path=str(shot), full_page=False)
        print(f"inspector screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        assert page.errors == []
    finally:
        await server.close()


async def test_dropped_connection_resumes_visibly(browser: Any) -> None:
    server = await start_sse_server(demo_agent(pace_seconds=0.01), port=0, inspector=True)
    try:
        page = await open_inspector(browser, server.url)
        await start_run(page, "Show me the dashboard")
        await page.click("#drop")
        await page.wait_for_selector("#timeline tr.resume", timeout=DEADLINE_MS)
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        text = await page.inner_text("#timeline tr.resume")
        assert "resumed with Last-Event-ID" in text
        seqs = await page.evaluate("window.__inspector.rows.filter(r => r.kind === 'event').map(r => r.seq)")
        assert seqs == list(range(1, len(seqs) + 1)), "the resumed stream continues right after the cursor"
        final = await page.evaluate(COMPONENTS_JS)
        assert final and all(c["props"] == c["finalProps"] for c in final)
        assert await page.evaluate(RUN_FINISHED_JS)
        assert page.errors == []
    finally:
        await server.close()


async def test_broken_recording_shows_its_findings(browser: Any, tmp_path: Path) -> None:
    server = await start_sse_server(demo_agent(), port=0, inspector=True)
    try:
        page = await open_inspector(browser, server.url)
        await page.set_input_files("#recording", str(BROKEN))
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_function("window.__inspector.verified.length >= 4", timeout=DEADLINE_MS)
        flagged = await page.eval_on_selector_all(
            "#timeline tr.finding", "els => els.map(e => [Number(e.dataset.index), e.innerText])")
        by_index = {index: text for index, text in flagged}
        assert "tool_call.args_not_json" in by_index[5]  # TOOL_CALL_END of arguments that are not JSON
        assert "state_patch" in by_index[6]  # the applier could not apply the STATE_DELTA
        assert "text.not_open" in by_index[7]
        assert "lifecycle.run_ids" in by_index[8]
        assert await page.inner_text("#finding-count") != "0"
        await page.screenshot(path=str(tmp_path / "inspector-broken.png"))
        assert page.errors == []
    finally:
        await server.close()


async def test_routes_static_module_and_inspector_switch() -> None:
    on = await start_sse_server(demo_agent(), port=0, inspector=True)
    off = await start_sse_server(demo_agent(), port=0)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            js = await client.get(on.url + "static/agui-engine.js")
            assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
            assert "export class ThreadStore" in js.text
            again = await client.get(on.url + "static/agui-engine.js", headers={"If-None-Match": js.headers["etag"]})
            assert again.status_code == 304
            assert (await client.get(off.url + "static/agui-engine.js")).status_code == 200  # always served
            assert (await client.get(off.url + "inspect")).status_code == 404
            assert (await client.get(on.url + "static/../pyproject.toml")).status_code == 404
            page = await client.get(on.url + "inspect")
            assert page.status_code == 200 and "agui-engine inspector" in page.text
            verdict = await client.post(on.url + "inspect/verify", content=BROKEN.read_bytes())
            assert verdict.status_code == 200
            rules = [(f["eventIndex"], f["rule"]) for f in verdict.json()["findings"]]
            assert (5, "tool_call.args_not_json") in rules and (8, "lifecycle.run_ids") in rules
    finally:
        await on.close()
        await off.close()


async def test_verify_is_bounded_and_needs_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inspector_module, "MAX_RECORDING_BYTES", 1000)
    server = await start_sse_server(demo_agent(), port=0, inspector=True, auth_token="s3cret")
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            denied = await client.post(server.url + "inspect/verify", content=b"{}")
            assert denied.status_code == 401
            auth = {"Authorization": "Bearer s3cret"}
            big = await client.post(server.url + "inspect/verify", content=b"x" * 5000, headers=auth)
            assert big.status_code == 413 and "MAX_RECORDING_BYTES" in big.json()["error"]["message"]
    finally:
        await server.close()


def test_verify_recording_reports_a_frame_that_does_not_decode() -> None:
    lines = BROKEN.read_bytes().splitlines()
    data = b"\n".join(lines[:3] + [b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": 5}'] + lines[3:]) + b"\n"
    result = verify_recording(data)
    assert result["format"] == "ndjson" and result["events"] == 3
    assert result["decodeError"] is not None and result["decodeError"]["frameIndex"] == 3
    assert json.dumps(result)  # plain JSON for the page


async def test_ui_spec_tree_renders_nested(browser: Any, tmp_path: Path) -> None:
    """A recorded ``render_ui`` run (a real LLMAgent run, model scripted) opened in the inspector: the tree
    is drawn nested, each node by its identity, text as text; a refused tree shows why."""
    from agui_engine.genui.uispec import UI_SPEC_TOOL, UISpecTool
    from agui_engine.llm import Finish
    from agui_engine.loops.llm_agent import LLMAgent
    from agui_engine.protocol.codec import encode_event
    from agui_engine.protocol.events import RunAgentInput, UserMessage

    from ..agui_engine.scripted_llm import ScriptedLLM, call, counter_ids, text

    tree = {"root": [{"component": "Card", "props": {"title": "Sales"}, "children": [
        "Revenue is up.", {"component": "Stack", "children": [
            {"component": "Stat", "props": {"label": "Revenue", "value": "$124k"}, "key": "rev"},
            {"component": "Stat", "props": {"label": "Users", "value": "8.2k"}}]}], "key": "sales"}]}
    refused = {"root": [{"component": "Card", "props": {"title": "x"}}, {"component": "Chart"}]}
    spec, bad = json.dumps(tree), json.dumps(refused)
    llm = ScriptedLLM(call(0, "c1", UI_SPEC_TOOL, *[spec[i:i + 9] for i in range(0, len(spec), 9)])
                      + call(1, "c2", UI_SPEC_TOOL, bad) + [Finish(reason="tool_calls")], text("Shown."))
    agent = LLMAgent(llm, ui_spec=UISpecTool(["Card", "Stack", "Stat"]), id_factory=counter_ids())
    run = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="dashboard")])
    recording = tmp_path / "render-ui.ndjson"
    recording.write_bytes(b"".join([encode_event(e) + b"\n" async for e in agent.run(run)]))
    server = await start_sse_server(demo_agent(), port=0, inspector=True)
    try:
        page = await open_inspector(browser, server.url)
        await page.set_input_files("#recording", str(recording))
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_selector(".ui-tree .ui-error", timeout=DEADLINE_MS)
        ok, no = await page.eval_on_selector_all(".card.ui-tree", "els => els.map(e => e.dataset.componentId)")
        nested = await page.evaluate(TREE_JS, ok)
        assert nested == [["0", "Card", "true", ["Revenue is up.", ["0/1", "Stack", "true", [
            ["0/1/0", "Stat", "true", []], ["0/1/1", "Stat", "true", []]]]]]]
        props = await page.inner_text(f'.card[data-component-id="{ok}"] [data-node-id="0/1/0"] .prop[data-prop="value"]')
        assert "$124k" in props
        assert await page.inner_text(f'.card[data-component-id="{no}"] .ui-error') == (
            "refused: component 'Chart' at /root/1 is not in the generative UI allowlist")
        assert await page.eval_on_selector_all(f'.card[data-component-id="{no}"] .ui-node', "els => els.length") == 0
        assert await page.inner_text("#finding-count") == "0"
        await page.screenshot(path=str(tmp_path / "inspector-ui-tree.png"), full_page=True)
        print(f"inspector screenshot: {tmp_path / 'inspector-ui-tree.png'}")
        assert page.errors == []
    finally:
        await server.close()


async def test_served_ui_spec_tree_grows_live(browser: Any, tmp_path: Path) -> None:
    """``python -m agui_engine serve --ui-spec`` in a real subprocess: asking the embedded model for a weather
    dashboard draws its ``render_ui`` tree in the inspector while the run still streams, then whole and nested."""
    from .served import served

    with served(tmp_path, "--ui-spec", "--pace", "0.02") as url:
        page = await open_inspector(browser, url)
        posts: list[str] = []  # the browser's queries, seen on the wire
        page.on("request", lambda r: posts.append(r.post_data or "")
                if r.method == "POST" and r.url.endswith("/data/query") else None)
        await page.fill("#message", "dashboard for Tokyo and Paris")
        await page.press("#message", "Enter")
        # one atomic look: the Stack is on the screen and the run has not finished
        handle = await page.wait_for_function(f"""() => {{
            const stack = document.querySelector('.card.ui-tree .ui-node[data-node-id="0"]');
            return stack && !({RUN_FINISHED_JS})() ? {{
                done: stack.dataset.done, cards: stack.querySelectorAll('.ui-node').length}} : null;
        }}""", timeout=DEADLINE_MS)
        mid = await handle.json_value()
        assert mid["done"] == "false" and mid["cards"] < 2  # caught while it streams
        await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
        await page.wait_for_selector('.card.ui-tree .ui-node[data-node-id="0"][data-done="true"]', timeout=DEADLINE_MS)
        nested = await page.evaluate(TREE_JS, None)
        assert nested == [["0", "Stack", "true", ["Weather overview: Tokyo and Paris (demo data)",
                                                  ["0/1", "WeatherCard", "true", []],
                                                  ["0/2", "WeatherCard", "true", []]]]]
        city = await page.inner_text('.card.ui-tree [data-node-id="0/2"] .prop[data-prop="params"]')
        assert "Paris" in city
        # each bound card of the tree shows its weather numbers from its own query (bindQuery), like a top card
        from agui_engine.demo.weather_model import DEMO_WEATHER

        for node_id, name in (("0/1", "tokyo"), ("0/2", "paris")):
            field = f'.card.ui-tree [data-node-id="{node_id}"] .weather-view [data-field="temperature"]'
            await page.wait_for_selector(field, timeout=DEADLINE_MS)
            assert await page.inner_text(field) == f"{DEMO_WEATHER[name]['temperature']} °C"
            humidity = await page.inner_text(field.replace("temperature", "humidity"))
            assert humidity == f"{DEMO_WEATHER[name]['humidity']} % humidity"
        assert sorted(json.loads(body)["params"]["city"] for body in posts) == ["Paris", "Tokyo"]  # one POST per card
        assert await page.inner_text("#query-count") == "2"
        assert await page.inner_text("#finding-count") == "0"
        assert page.errors == []
