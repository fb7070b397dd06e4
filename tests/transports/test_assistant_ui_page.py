"""A real assistant-ui page against the gateway, in headless Chromium.

The page (``tests/js/assistant-ui-page/page.jsx``) is assistant-ui's AG-UI runtime
(``@assistant-ui/react-ag-ui`` 0.0.58, ``useAgUiRuntime`` over ``@ag-ui/client`` 0.0.59's
``HttpAgent``, from the folder's committed lock file) with ``@assistant-ui/react`` 0.15's primitives,
bundled once per session by the package's own esbuild and served from another origin; its agent URL
is the gateway's agent path, so it gets the 0.x wire (spec/wire-versions.md). Checked as a person
would see it: the answer's text in the thread while the run is still running, the frontend tool
(``useAssistantTool``) executed and its result sent back in a follow-up run that answers with it, a
second turn, and no error. A screenshot is saved under the test's tmp dir when a check fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import require, screenshot_on_failure

from .test_copilotkit_page import (  # noqa: F401 (browser: a fixture)
    DEADLINE_MS,
    FIRST_TEXT,
    FailingAgent,
    PausedAfterFirstDelta,
    browser,
    bundle_page,
    shown_mid_run,
    static_site,
)

PAGE = Path(__file__).resolve().parents[1] / "js" / "assistant-ui-page"
#: The assistant messages' text (without the "●" assistant-ui shows in a message still running).
ASSISTANT_TEXT_JS = """() => [...document.querySelectorAll(".assistant-message")]
    .map((m) => m.textContent.replace(/\u25cf/g, "").replace(/\\s+/g, " ").trim()).filter((t) => t).join(" | ")"""


@pytest.fixture(scope="session")
def aui_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require((PAGE / "node_modules" / "@assistant-ui" / "react-ag-ui").is_dir(), "the npm packages of tests/js/assistant-ui-page")
    return bundle_page(PAGE, tmp_path_factory.mktemp("assistant-ui-page"))


@pytest.fixture
def aui_url(aui_bundle: Path) -> Iterator[str]:
    with static_site(aui_bundle) as url:
        yield url


async def send(page: Any, text: str) -> None:
    await page.fill("#composer", text)
    await page.click("#send")


@pytest.mark.timeout(420)  # one esbuild bundle per session, Chromium and React, on a shared machine
async def test_assistant_ui_streams_runs_a_frontend_tool_and_a_second_turn(
    browser: Any, aui_url: str, tmp_path: Path  # noqa: F811
) -> None:
    agent = PausedAfterFirstDelta()
    async with await start_sse_server(agent, cors_origins=[aui_url]) as srv:
        page = await browser.new_page(viewport={"width": 1000, "height": 900})
        page_errors: list[str] = []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        async with screenshot_on_failure(page, tmp_path / "assistant-ui-page.png"):
            await page.goto(f"{aui_url}/index.html?agent={srv.url}&thread=t-aui")
            await page.wait_for_selector("#composer", timeout=DEADLINE_MS)
            await send(page, "book a table for 4")
            await shown_mid_run(page, agent, ASSISTANT_TEXT_JS)  # streaming: text shown mid-run
            # the frontend tool ran in the page and its result continued the run (a follow-up run)
            await page.wait_for_function("() => document.querySelector('#handled li')", timeout=DEADLINE_MS)
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Booked: confirmed for 4 guests.")""", timeout=DEADLINE_MS)
            # all of the first answer (assistant-ui reveals streamed text gradually: wait for it)
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes({FIRST_TEXT!r})", timeout=DEADLINE_MS)
            await page.wait_for_function("() => !document.querySelector('#running')", timeout=DEADLINE_MS)
            # a second turn
            await send(page, "and a window seat")
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Second turn heard: and a window seat")""", timeout=DEADLINE_MS)
            await page.wait_for_function("() => !document.querySelector('#running')", timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.map(l => l.textContent)") == [
                "confirmed for 4 guests"]  # the tool ran once
            assert await page.eval_on_selector_all("#errors li", "ls => ls.map(l => l.textContent)") == []
            assert page_errors == []


@pytest.mark.timeout(420)  # as above
async def test_a_run_error_reaches_the_assistant_ui_page(browser: Any, aui_url: str, tmp_path: Path) -> None:  # noqa: F811
    async with await start_sse_server(FailingAgent(), cors_origins=[aui_url]) as srv:
        page = await browser.new_page(viewport={"width": 1000, "height": 900})
        page_errors: list[str] = []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        async with screenshot_on_failure(page, tmp_path / "assistant-ui-page-error.png"):
            await page.goto(f"{aui_url}/index.html?agent={srv.url}&thread=t-aui-error")
            await page.wait_for_selector("#composer", timeout=DEADLINE_MS)
            await send(page, "dinner?")
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('Trying the kitchen')",
                                         timeout=DEADLINE_MS)
            # the runtime reports the run's error (its onError) with the gateway's message, and stops
            await page.wait_for_function("""() => [...document.querySelectorAll('#errors li')]
                .some((l) => l.textContent.includes('the kitchen is closed'))""", timeout=DEADLINE_MS)
            await page.wait_for_function("() => !document.querySelector('#running')", timeout=DEADLINE_MS)
            assert page_errors == []
