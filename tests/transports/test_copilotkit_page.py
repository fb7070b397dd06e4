"""A real CopilotKit page against the gateway, in headless Chromium, with no Node runtime.

The page (``tests/js/copilotkit-page/page.jsx``) is CopilotKit's v2 chat from the pinned
``@copilotkit/react-core`` 1.74 (its committed lock file), bundled once per session by the
package's own ``esbuild`` and served by a plain static server on loopback; its ``runtimeUrl`` is
the gateway (``start_sse_server``, CORS open to the page's origin), so the page speaks
CopilotKit's runtime routes (spec/runtime-routes.md) straight to it and gets the 0.x wire
(spec/wire-versions.md). What a person would see is checked: the answer's text growing in the
chat while the run is still running, the frontend tool registered with ``useFrontendTool``
running its handler and its result continuing the run, a second turn, and no error shown or
reported. A screenshot is saved under the test's tmp dir when a check fails.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results, user_text
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import chromium, require, screenshot_on_failure
from tests.loopback_http import serving_handler

PAGE = Path(__file__).resolve().parents[1] / "js" / "copilotkit-page"
#: Every wait in the browser has this deadline (ms): generous, a shared 2-core machine.
DEADLINE_MS = 60_000
#: esbuild bundling React + CopilotKit once per session (about 15 s here, more under load).
BUILD_TIMEOUT = 300

#: The first answer: long enough that its first streamed chunk is only part of it.
FIRST_TEXT = "Let me check that booking with you before I confirm it."


def _turn(messages: Any) -> ScriptedTurn:
    if "book" in user_text(messages):
        return ScriptedTurn(text=FIRST_TEXT, tool_calls=(ScriptedCall("confirm_booking", {"guests": 4}),))
    return ScriptedTurn(text=f"Second turn heard: {user_text(messages)}")


class PausedAfterFirstDelta:
    """An LLMAgent whose first run waits after its first text delta until ``resume`` is set:
    the page is then looked at mid-run (streaming shown without any timing assumption)."""

    def __init__(self) -> None:
        self.inner = LLMAgent(ScriptedModel([_turn, lambda messages: f"Booked: {tool_results(messages)[-1]}."]))
        self.resume = asyncio.Event()
        self.paused = False

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        async for event in self.inner.run(input):
            yield event
            if not self.paused and isinstance(event, TextMessageContentEvent):
                self.paused = True
                await self.resume.wait()


async def shown_mid_run(page: Any, agent: PausedAfterFirstDelta, text_js: str) -> None:
    """Streaming: part of the first answer (``text_js``'s text) is shown while ``agent`` is paused
    mid-text; then the run goes on."""
    partial = await page.wait_for_function(f"""() => {{
        const text = ({text_js})();
        return text.length > 0 ? text : null;
    }}""", timeout=DEADLINE_MS)
    shown = str(await partial.json_value())
    assert FIRST_TEXT.startswith(shown) and shown != FIRST_TEXT
    agent.resume.set()


def bundle_page(folder: Path, out: Path) -> Path:
    """Bundle ``folder``'s page.jsx with its own installed esbuild into ``out`` (with its index.html)."""
    esbuild = folder / "node_modules" / ".bin" / "esbuild"
    require(esbuild.exists(), f"the npm packages of tests/js/{folder.name}")
    subprocess.run(
        [str(esbuild), "page.jsx", "--bundle", "--minify", f"--outfile={out / 'page.js'}", "--jsx=automatic",
         '--define:process.env.NODE_ENV="production"', "--loader:.woff=empty", "--loader:.woff2=empty",
         "--loader:.ttf=empty", "--log-level=error"],
        cwd=folder, check=True, timeout=BUILD_TIMEOUT,
    )
    shutil.copy(folder / "index.html", out / "index.html")
    return out


@contextmanager
def static_site(root: Path) -> Iterator[str]:
    """Serve the files of ``root`` on loopback (another origin than the gateway's)."""

    class Static(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving_handler(Static) as url:
        yield url


@pytest.fixture(scope="session")
def page_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page bundled from the installed packages into a temp dir (index.html, page.js, page.css)."""
    require((PAGE / "node_modules" / "@copilotkit" / "react-core").is_dir(), "the npm packages of tests/js/copilotkit-page")
    return bundle_page(PAGE, tmp_path_factory.mktemp("copilotkit-page"))


@pytest.fixture
def page_url(page_bundle: Path) -> Iterator[str]:
    with static_site(page_bundle) as url:
        yield url


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    path = chromium()
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=path, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            yield b
        finally:
            await b.close()


async def send(page: Any, text: str) -> None:
    await page.fill("[data-testid='copilot-chat-textarea']", text)
    await page.press("[data-testid='copilot-chat-textarea']", "Enter")


ASSISTANT_TEXT_JS = """() => [...document.querySelectorAll("[data-testid='copilot-assistant-message']")]
    .map((m) => m.textContent.replace(/\\s+/g, " ").trim()).join(" | ")"""


@pytest.mark.timeout(420)  # one esbuild bundle per session, Chromium, React and CopilotKit, on a shared machine
async def test_copilotkit_chat_streams_runs_a_frontend_tool_and_a_second_turn(
    browser: Any, page_url: str, tmp_path: Path
) -> None:
    agent = PausedAfterFirstDelta()
    async with await start_sse_server(agent, cors_origins=[page_url]) as srv:
        page = await browser.new_page(viewport={"width": 1000, "height": 900})
        page_errors: list[str] = []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page.png"):
            await page.goto(f"{page_url}/index.html?runtime={srv.url.rstrip('/')}&thread=t-page")
            await page.wait_for_selector("[data-testid='copilot-chat-textarea']", timeout=DEADLINE_MS)
            await send(page, "book a table for 4")
            await shown_mid_run(page, agent, ASSISTANT_TEXT_JS)  # streaming: text shown mid-run
            # the frontend tool's handler ran in the page and its result continued the run
            await page.wait_for_function("""() => document.querySelector('#handled li')""", timeout=DEADLINE_MS)
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Booked: confirmed for 4 guests.")""", timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.map(l => l.textContent)") == [
                "confirmed for 4 guests"]
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes({FIRST_TEXT!r})", timeout=DEADLINE_MS)
            # a second turn on the same thread
            await send(page, "and a window seat")
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Second turn heard: and a window seat")""", timeout=DEADLINE_MS)
            await page.wait_for_function(
                "() => !document.querySelector('[data-copilot-running=\"true\"]')", timeout=DEADLINE_MS)
            # no error anywhere: none reported to CopilotKit's onError, no banner, no page exception
            assert await page.eval_on_selector_all("#errors li", "ls => ls.map(l => l.textContent)") == []
            assert await page.query_selector("[data-testid='copilot-error-banner']") is None
            assert page_errors == []
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 1  # the tool ran once


async def open_chat(browser: Any, page_url: str, query: str) -> Any:
    page = await browser.new_page(viewport={"width": 1000, "height": 900})
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    await page.goto(f"{page_url}/index.html?{query}")
    await page.wait_for_selector("[data-testid='copilot-chat-textarea']", timeout=DEADLINE_MS)
    return page


@pytest.mark.timeout(420)  # as above
async def test_a_reloaded_copilotkit_page_reconnects_to_its_thread(browser: Any, page_url: str, tmp_path: Path) -> None:
    """CopilotKit's ``connect`` through the gateway: a page reloaded after a finished conversation
    shows the thread's history again (the page's principal: a bearer token) without sending anything."""
    agent = PausedAfterFirstDelta()
    agent.resume.set()
    async with await start_sse_server(agent, cors_origins=[page_url], auth_token={"tok-alice": "alice"}) as srv:
        query = f"runtime={srv.url.rstrip('/')}&thread=t-reload&token=tok-alice"
        page = await open_chat(browser, page_url, query)
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-reload.png"):
            await send(page, "book a table for 4")
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Booked: confirmed for 4 guests.")""", timeout=DEADLINE_MS)
            await page.wait_for_function(
                "() => !document.querySelector('[data-copilot-running=\"true\"]')", timeout=DEADLINE_MS)
            asked: list[str] = []
            page.on("request", lambda r: asked.append(f"{r.method} {r.url}"))
            await page.reload()
            await page.wait_for_selector("[data-testid='copilot-chat-textarea']", timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 0  # a fresh page
            # the history comes back through connect: both answers, nothing run again
            await page.wait_for_function(f"""() => ({ASSISTANT_TEXT_JS})().includes(
                "Booked: confirmed for 4 guests.")""", timeout=DEADLINE_MS)
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes({FIRST_TEXT!r})", timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 0  # the tool did not run again
            assert f"POST {srv.url.rstrip('/')}/agent/default/connect" in asked  # CopilotKit's connect brought it
            assert not any(a.endswith("/agent/default/run") for a in asked)  # and no run
            assert await page.eval_on_selector_all("#errors li", "ls => ls.map(l => l.textContent)") == []
            assert page.errors == []


class FailingAgent:
    """Streams a little text, then ends the run with RUN_ERROR."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id=f"{input.run_id}-m", role="assistant")
        yield TextMessageContentEvent(message_id=f"{input.run_id}-m", delta="Trying the kitchen")
        yield TextMessageEndEvent(message_id=f"{input.run_id}-m")
        yield RunErrorEvent(message="the kitchen is closed", code="kitchen_closed")


@pytest.mark.timeout(420)  # as above
async def test_a_run_error_reaches_the_copilotkit_page(browser: Any, page_url: str, tmp_path: Path) -> None:
    async with await start_sse_server(FailingAgent(), cors_origins=[page_url]) as srv:
        page = await open_chat(browser, page_url, f"runtime={srv.url.rstrip('/')}&thread=t-error")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-error.png"):
            await send(page, "dinner?")
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('Trying the kitchen')",
                                         timeout=DEADLINE_MS)
            # CopilotKit reports the run's error (its onError) with the gateway's message
            await page.wait_for_function("""() => [...document.querySelectorAll('#errors li')]
                .some((l) => l.textContent.includes('the kitchen is closed'))""", timeout=DEADLINE_MS)
            await page.wait_for_function(
                "() => !document.querySelector('[data-copilot-running=\"true\"]')", timeout=DEADLINE_MS)
            assert page.errors == []
