"""A real CopilotKit page against the gateway, in headless Chromium: straight at the gateway's
runtime routes (no Node runtime) and through CopilotKit's Node ``CopilotRuntime``.

The page (``tests/js/copilotkit-page/page.jsx``) is CopilotKit's v2 chat from the pinned
``@copilotkit/react-core`` 1.74 (its committed lock file), bundled once per session by the
package's own ``esbuild`` and served by a plain static server on loopback. Every test runs in two
modes (``mode``):

* ``gateway``: the page's ``runtimeUrl`` is the gateway itself (``start_sse_server``, CORS open to
  the page's origin): the page speaks CopilotKit's runtime routes (spec/runtime-routes.md) to it and
  gets the 0.x wire (spec/wire-versions.md);
* ``runtime``: the page's ``runtimeUrl`` is the real ``@copilotkit/runtime`` 1.75 ``CopilotRuntime``
  (``benchmarks/gateways/node/runtime.mjs``, a node subprocess, its A2UI middleware on, as a
  CopilotKit app that draws A2UI configures it) whose ``HttpAgent`` agents point at the gateway's
  agent paths.

What a person would see is checked: the answer's text growing in the chat while the run is still
running, a tool renderer seeing a call's arguments grow, the frontend tool registered with
``useFrontendTool`` running its handler and its result continuing the run, the agent's shared
state, the A2UI booking surface and its button's action, the MCP Apps dice app and its call back,
a second turn, a reload reconnecting to the thread, a RUN_ERROR; and no error shown or reported.
Nothing waits on time: the agents pause at the point the page is looked at (``Gated``) and every
wait is on a DOM condition with a generous deadline. A screenshot is saved under the test's tmp
dir when a check fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from agui_engine.cli.demo import demo_agent
from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results, user_text
from agui_engine.loops.llm_agent import LLMAgent
from agui_engine.protocol.events import (
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)
from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import chromium, require, screenshot_on_failure
from tests.loopback_http import serving_handler

PAGE = Path(__file__).resolve().parents[1] / "js" / "copilotkit-page"
#: CopilotKit's Node runtime (@copilotkit/runtime 1.75 under Express), shared with benchmarks/gateways.
RUNTIME_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "gateways" / "node"
#: Every wait in the browser has this deadline (ms): generous, a shared 2-core machine.
DEADLINE_MS = 60_000
#: esbuild bundling React + CopilotKit once per session (about 15 s here, more under load).
BUILD_TIMEOUT = 300
#: How long the node runtime may take to listen, and to exit when asked (s).
RUNTIME_START_SECONDS = 60
RUNTIME_STOP_SECONDS = 10

#: The first answer: long enough that its first streamed chunk is only part of it.
FIRST_TEXT = "Let me check that booking with you before I confirm it."

MODES = ("gateway", "runtime")


def _turn(messages: Any) -> ScriptedTurn:
    if "book" in user_text(messages):
        return ScriptedTurn(text=FIRST_TEXT, tool_calls=(ScriptedCall("confirm_booking", {"guests": 4}),))
    return ScriptedTurn(text=f"Second turn heard: {user_text(messages)}")


class Gated:
    """``inner``'s events, paused once after the first one ``pause_after`` says yes to, until
    ``resume`` is set: the page is then looked at mid-run, without any timing assumption."""

    def __init__(self, inner: Any, pause_after: Callable[[Event], bool]) -> None:
        self.inner = inner
        self.pause_after = pause_after
        self.resume = asyncio.Event()
        self.paused = False

    def capabilities(self) -> Any:
        return self.inner.capabilities()

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        async for event in self.inner.run(input):
            yield event
            if not self.paused and self.pause_after(event):
                self.paused = True
                await self.resume.wait()


class PausedAfterFirstDelta(Gated):
    """A scripted LLMAgent (the frontend tool ``confirm_booking``, then a second turn) whose first
    run waits after its first text delta until ``resume`` is set."""

    def __init__(self) -> None:
        inner = LLMAgent(ScriptedModel([_turn, lambda messages: f"Booked: {tool_results(messages)[-1]}."]))
        super().__init__(inner, lambda event: isinstance(event, TextMessageContentEvent))


class ArgsSoFar:
    """``pause_after`` for :class:`Gated`: yes once the arguments streamed so far of a call to
    ``tool`` contain ``fragment``."""

    def __init__(self, tool: str, fragment: str) -> None:
        self.tool, self.fragment = tool, fragment
        self.calls: dict[str, str] = {}

    def __call__(self, event: Event) -> bool:
        if isinstance(event, ToolCallStartEvent) and event.tool_call_name == self.tool:
            self.calls[event.tool_call_id] = ""
        elif isinstance(event, ToolCallArgsEvent) and event.tool_call_id in self.calls:
            self.calls[event.tool_call_id] += event.delta
            return self.fragment in self.calls[event.tool_call_id]
        return False


async def shown_mid_run(page: Any, agent: Gated, text_js: str) -> None:
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


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """``gateway``: the page talks to the gateway's runtime routes; ``runtime``: to CopilotKit's
    Node CopilotRuntime in front of the gateway."""
    if request.param == "runtime":
        require(shutil.which("node"), "node")
        require((RUNTIME_DIR / "node_modules" / "@copilotkit" / "runtime").is_dir(),
                "the npm packages of benchmarks/gateways/node (CopilotKit's runtime)")
    return str(request.param)


@asynccontextmanager
async def copilot_runtime(agents: Mapping[str, str], log: Path, a2ui: str = "--a2ui") -> AsyncIterator[str]:
    """CopilotKit's Node ``CopilotRuntime`` (a node subprocess, A2UI middleware on: ``--a2ui`` with
    its own tool, ``--a2ui-bare`` as ``a2ui: {}``) whose agents (id -> the gateway's agent URL) are
    ``HttpAgent``\\ s; yields its URL. Its output goes to ``log``."""
    node = shutil.which("node")
    assert node is not None
    pairs = [f"{agent_id}={url}" for agent_id, url in agents.items() if agent_id != "default"]
    default = agents.get("default", next(iter(agents.values())))
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            node, str(RUNTIME_DIR / "runtime.mjs"), "0", default, *pairs, a2ui, "--ready",
            cwd=RUNTIME_DIR, stdout=asyncio.subprocess.PIPE, stderr=out,
            env={**os.environ, "COPILOTKIT_TELEMETRY_DISABLED": "true"})
        try:
            assert proc.stdout is not None

            async def ready(stream: asyncio.StreamReader) -> re.Match[bytes] | None:
                while line := await stream.readline():
                    out.write(line)
                    if match := re.fullmatch(rb"READY (\d+)\s*", line):
                        return match
                return None

            try:
                match = await asyncio.wait_for(ready(proc.stdout), RUNTIME_START_SECONDS)
            except TimeoutError:
                match = None
            assert match, f"the node runtime did not listen within {RUNTIME_START_SECONDS} s; see {log}"

            async def drain(stream: asyncio.StreamReader) -> None:
                while await stream.readline():
                    pass

            drained = asyncio.ensure_future(drain(proc.stdout))
            yield f"http://127.0.0.1:{int(match.group(1))}"
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), RUNTIME_STOP_SECONDS)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            if "drained" in locals():
                await drained


@asynccontextmanager
async def runtime_url(mode: str, gateway_url: str, tmp_path: Path,
                      agents: Mapping[str, str] | None = None) -> AsyncIterator[str]:
    """The page's ``runtimeUrl`` in ``mode``: the gateway's (its runtime routes), or a Node
    CopilotRuntime's whose agents are the gateway's (``agents``: id -> agent path; default: the
    one agent at the gateway's root as ``default``)."""
    base = gateway_url.rstrip("/")
    if mode == "gateway":
        yield base
        return
    urls = {agent_id: base + path for agent_id, path in (agents or {"default": "/"}).items()}
    async with copilot_runtime(urls, tmp_path / "copilot-runtime.log") as url:
        yield url


async def send(page: Any, text: str) -> None:
    """Type ``text`` and send it once the chat takes it (CopilotKit enables its send button only
    when its agent is ready: the runtime's ``/info`` read, the thread connected); then wait until
    the chat shows it."""
    await page.fill("[data-testid='copilot-chat-textarea']", text)
    await page.wait_for_selector("[data-testid='copilot-send-button']:enabled", timeout=DEADLINE_MS)
    await page.press("[data-testid='copilot-chat-textarea']", "Enter")
    await page.locator("[data-testid='copilot-user-message']", has_text=text).last.wait_for(timeout=DEADLINE_MS)


ASSISTANT_TEXT_JS = """() => [...document.querySelectorAll("[data-testid='copilot-assistant-message']")]
    .map((m) => m.textContent.replace(/\\s+/g, " ").trim()).join(" | ")"""
NOT_RUNNING_JS = "() => !document.querySelector('[data-copilot-running=\"true\"]')"


async def open_chat(browser: Any, page_url: str, query: str) -> Any:
    page = await browser.new_page(viewport={"width": 1000, "height": 1000})
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.warnings = []  # what CopilotKit logs when it cannot apply an event (a surface patched twice, ...)
    page.on("console", lambda m: page.warnings.append(m.text) if m.type in ("warning", "error") else None)
    page.asked = []  # "METHOD URL" of every request the page makes
    page.on("request", lambda r: page.asked.append(f"{r.method} {r.url}"))
    await page.goto(f"{page_url}/index.html?{query}")
    await page.wait_for_selector("[data-testid='copilot-chat-textarea']", timeout=DEADLINE_MS)
    return page


async def shows(page: Any, text: str) -> None:
    """Wait until the assistant's messages show ``text``."""
    await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes({text!r})", timeout=DEADLINE_MS)


async def no_error(page: Any) -> None:
    """Nothing reported to CopilotKit's onError, no error banner, no page exception, no event
    CopilotKit failed to apply, and no tool result of the agent's messages is an error
    (CopilotKit's ``{"status": "error", ...}``)."""
    assert await page.eval_on_selector_all("#errors li", "ls => ls.map(l => l.textContent)") == []
    assert await page.query_selector("[data-testid='copilot-error-banner']") is None
    assert page.errors == []
    assert not [w for w in page.warnings if "failed to apply" in w.lower()]
    results = [json.loads(r) for r in await page.eval_on_selector_all("#tool-results li", "ls => ls.map(l => l.textContent)")]
    assert not [r for r in results if r.get("error") or '"status":"error"' in str(r.get("content")).replace(" ", "")]


@pytest.mark.timeout(420)  # one esbuild bundle per session, Chromium, React and CopilotKit, on a shared machine
async def test_copilotkit_chat_streams_runs_a_frontend_tool_and_a_second_turn(
    browser: Any, page_url: str, tmp_path: Path, mode: str
) -> None:
    agent = PausedAfterFirstDelta()
    async with await start_sse_server(agent, cors_origins=[page_url]) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-page")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page.png"):
            await send(page, "book a table for 4")
            await shown_mid_run(page, agent, ASSISTANT_TEXT_JS)  # streaming: text shown mid-run
            # the frontend tool's handler ran in the page and its result continued the run
            await page.wait_for_function("""() => document.querySelector('#handled li')""", timeout=DEADLINE_MS)
            await shows(page, "Booked: confirmed for 4 guests.")
            assert await page.eval_on_selector_all("#handled li", "ls => ls.map(l => l.textContent)") == [
                "confirmed for 4 guests"]
            await shows(page, FIRST_TEXT)
            # a second turn on the same thread
            await send(page, "and a window seat")
            await shows(page, "Second turn heard: and a window seat")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            await no_error(page)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 1  # the tool ran once


@pytest.mark.timeout(420)  # as above
async def test_a_reloaded_copilotkit_page_reconnects_to_its_thread(
    browser: Any, page_url: str, tmp_path: Path, mode: str
) -> None:
    """CopilotKit's ``connect``: a page reloaded after a finished conversation shows the thread's
    history again (the page's principal: a bearer token) without sending anything. Straight at the
    gateway the history comes from the gateway's thread history; through the Node runtime, from
    the runtime's own runner (CopilotRuntime answers ``connect`` itself)."""
    agent = PausedAfterFirstDelta()
    agent.resume.set()
    async with await start_sse_server(agent, cors_origins=[page_url], auth_token={"tok-alice": "alice"}) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-reload&token=tok-alice")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-reload.png"):
            await send(page, "book a table for 4")
            await shows(page, "Booked: confirmed for 4 guests.")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            asked: list[str] = []
            page.on("request", lambda r: asked.append(f"{r.method} {r.url}"))
            await page.reload()
            await page.wait_for_selector("[data-testid='copilot-chat-textarea']", timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 0  # a fresh page
            # the history comes back through connect: both answers, nothing run again
            await shows(page, "Booked: confirmed for 4 guests.")
            await shows(page, FIRST_TEXT)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.length") == 0  # the tool did not run again
            assert f"POST {runtime}/agent/default/connect" in asked  # CopilotKit's connect brought it
            assert not any(a.endswith("/agent/default/run") for a in asked)  # and no run
            await no_error(page)


class FailingAgent:
    """Streams a little text, then ends the run with RUN_ERROR."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id=f"{input.run_id}-m", role="assistant")
        yield TextMessageContentEvent(message_id=f"{input.run_id}-m", delta="Trying the kitchen")
        yield TextMessageEndEvent(message_id=f"{input.run_id}-m")
        yield RunErrorEvent(message="the kitchen is closed", code="kitchen_closed")


@pytest.mark.timeout(420)  # as above
async def test_a_run_error_reaches_the_copilotkit_page(browser: Any, page_url: str, tmp_path: Path, mode: str) -> None:
    async with await start_sse_server(FailingAgent(), cors_origins=[page_url]) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-error")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-error.png"):
            await send(page, "dinner?")
            await shows(page, "Trying the kitchen")
            # CopilotKit reports the run's error (its onError) with the gateway's message
            await page.wait_for_function("""() => [...document.querySelectorAll('#errors li')]
                .some((l) => l.textContent.includes('the kitchen is closed'))""", timeout=DEADLINE_MS)
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            assert page.errors == []


@pytest.mark.timeout(420)  # as above
async def test_a_copilotkit_tool_renderer_sees_the_arguments_grow(
    browser: Any, page_url: str, tmp_path: Path, mode: str
) -> None:
    """The demo agent's weather answer: ``show_component_WeatherCard``'s arguments (the card bound
    to the ``weather.current`` resource for a city, and a note) reach the page's ``useRenderTool``
    renderer while they stream (the run paused once the city is typed: the card has its city and
    not yet its note), then whole; the component's tool result is no error."""
    gate = ArgsSoFar("show_component_WeatherCard", '"Tokyo"')
    agent = Gated(demo_agent(), gate)
    async with await start_sse_server(agent, cors_origins=[page_url]) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-weather")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-weather.png"):
            await send(page, "What's the weather in Tokyo?")
            partial = await page.wait_for_function("""() => [...document.querySelectorAll('#weather li')]
                .map((l) => l.textContent).find((t) => t.includes('"Tokyo"'))""", timeout=DEADLINE_MS)
            status, args = str(await partial.json_value()).split(" ", 1)
            typed = json.loads(args)
            assert status == "inProgress" and typed["params"] == {"city": "Tokyo"}
            agent.resume.set()
            whole = await page.wait_for_function("""() => [...document.querySelectorAll('#weather li')]
                .map((l) => l.textContent).find((t) => t.startsWith('complete '))""", timeout=DEADLINE_MS)
            final = json.loads(str(await whole.json_value()).split(" ", 1)[1])
            assert final["params"] == {"city": "Tokyo"} and final["note"].startswith("Live from the weather.current")
            # what was shown mid-run is a part of the whole: the arguments grew
            assert typed != final and set(typed) <= set(final)
            assert all(final[key] == value or final[key].startswith(value) for key, value in typed.items())
            await shows(page, "It's 18.5°C and partly cloudy in Tokyo")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            assert await page.locator("[data-testid='weather-card'][data-status='complete']").count() == 1
            await no_error(page)


class SharedStateAgent:
    """Shared state both ways: each run reads the page's state (``RunAgentInput.state``), counts a
    visit in a STATE_SNAPSHOT, answers, and adds the user's words to ``items`` with a STATE_DELTA."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        state = input.state if isinstance(input.state, dict) else {}
        visits = int(state.get("visits", 0)) + 1
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield StateSnapshotEvent(snapshot={"visits": visits, "items": list(state.get("items", []))})
        yield TextMessageStartEvent(message_id=f"{input.run_id}-m", role="assistant")
        yield TextMessageContentEvent(message_id=f"{input.run_id}-m", delta=f"Visit {visits} noted.")
        yield TextMessageEndEvent(message_id=f"{input.run_id}-m")
        yield StateDeltaEvent(delta=[{"op": "add", "path": "/items/-", "value": user_text(input.messages)}])
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


@pytest.mark.timeout(420)  # as above
async def test_copilotkit_shares_state_with_the_agent(browser: Any, page_url: str, tmp_path: Path, mode: str) -> None:
    """STATE_SNAPSHOT and STATE_DELTA reach the page's agent state (``useAgent``), and the page
    sends that state back with its next run (the agent counts the second visit from it)."""
    async with await start_sse_server(SharedStateAgent(), cors_origins=[page_url]) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-state")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-state.png"):
            state_js = "() => JSON.parse(document.querySelector('#state').textContent)"
            await send(page, "a table by the window")
            await page.wait_for_function(f"() => ({state_js})()?.items?.length === 1", timeout=DEADLINE_MS)
            assert await page.evaluate(state_js) == {"visits": 1, "items": ["a table by the window"]}
            await shows(page, "Visit 1 noted.")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            await send(page, "and candles")
            await page.wait_for_function(f"() => ({state_js})()?.items?.length === 2", timeout=DEADLINE_MS)
            assert await page.evaluate(state_js) == {"visits": 2, "items": ["a table by the window", "and candles"]}
            await shows(page, "Visit 2 noted.")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            await no_error(page)


async def book_a_table(page: Any) -> None:
    """Ask the demo agent for a table: one booking form (one "Book the table" button) and tonight's
    availability drawn; the button's action draws the confirmation; then :func:`no_error`."""
    await send(page, "Book a table for 4")
    book = page.get_by_role("button", name="Book the table")
    await book.wait_for(timeout=DEADLINE_MS)
    await page.get_by_text("Tonight at Trattoria Demo (demo data)").wait_for(timeout=DEADLINE_MS)
    await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
    assert await book.count() == 1  # one surface drawn
    await book.click()
    await page.get_by_text("Booked at Trattoria Demo").wait_for(timeout=DEADLINE_MS)
    await page.get_by_text("A table for 4 on").wait_for(timeout=DEADLINE_MS)
    await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
    await no_error(page)


@pytest.mark.timeout(420)  # as above
async def test_copilotkit_draws_the_a2ui_booking_surface_and_its_action_completes(
    browser: Any, page_url: str, tmp_path: Path, mode: str
) -> None:
    """The demo agent's table booking (``render_a2ui``, the A2UI basic catalog) drawn by CopilotKit's
    own A2UI renderer: the booking form and tonight's availability; its "Book the table" button's
    action goes back as a run and the confirmation surface is drawn; no tool result is an error.
    Straight at the gateway the gateway applies A2UI (``/info`` says so); through the runtime its
    A2UI middleware does, and the gateway leaves A2UI to it (spec/a2ui.md, applied once)."""
    async with await start_sse_server(demo_agent(a2ui=True), cors_origins=[page_url]) as srv, \
            runtime_url(mode, srv.url, tmp_path) as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-a2ui")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-a2ui.png"):
            await book_a_table(page)


@pytest.mark.timeout(420)  # as above
async def test_a_bare_runtime_a2ui_switch_in_front_of_the_gateway_draws_the_booking_surface_once(
    browser: Any, page_url: str, tmp_path: Path
) -> None:
    """CopilotRuntime with a bare ``a2ui: {}`` (its middleware on, no tool of its own, so nothing in
    the run says it is there) in front of a gateway that applies A2UI (``serve --a2ui``, the default
    ``auto`` snapshot mode): the run carries CopilotKit's A2UI context, so the gateway paints with
    whole snapshots, as the middleware does; both paint the same ``a2ui-surface-<call id>``
    activity and nothing is patched on a content the other replaced. One booking form and its
    availability are drawn, "Book the table" completes, no "Failed to apply" warning, no error
    result (spec/a2ui.md, "Behind a bare a2ui switch"). With deltas the same page logged "Failed to
    apply activity patch" (a gateway delta on the middleware's ``building`` snapshot)."""
    require(shutil.which("node"), "node")
    require((RUNTIME_DIR / "node_modules" / "@copilotkit" / "runtime").is_dir(),
            "the npm packages of benchmarks/gateways/node (CopilotKit's runtime)")
    async with await start_sse_server(demo_agent(a2ui=True), cors_origins=[page_url]) as srv, \
            copilot_runtime({"default": srv.url.rstrip("/") + "/"}, tmp_path / "copilot-runtime.log",
                            a2ui="--a2ui-bare") as runtime:
        page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-a2ui-bare")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-a2ui-bare.png"):
            await book_a_table(page)


@pytest.mark.timeout(420)  # as above
async def test_copilotkit_draws_the_mcp_apps_dice_app_and_it_calls_back(
    browser: Any, page_url: str, tmp_path: Path, mode: str
) -> None:
    """The demo agent with the demo MCP server (``roll_dice`` and its MCP App): CopilotKit's MCP Apps
    renderer fetches the app through the agent (a proxied ``resources/read``), draws it with the
    roll, and the app's "Roll again" button calls ``roll_dice`` back through the host (a proxied
    ``tools/call`` run) and shows the new roll."""
    from agui_engine.adapters.mcp import mcp_connections

    try:
        async with await start_sse_server(demo_agent(mcp=True), cors_origins=[page_url]) as srv, \
                runtime_url(mode, srv.url, tmp_path) as runtime:
            page = await open_chat(browser, page_url, f"runtime={runtime}&thread=t-mcp")
            async with screenshot_on_failure(page, tmp_path / "copilotkit-page-mcp.png"):
                await send(page, "Roll dice with 20 sides")
                app = page.frame_locator("iframe").frame_locator("iframe")  # the app inside the sandbox proxy
                detail = app.locator("#detail")
                await detail.filter(has_text="sided die").wait_for(timeout=DEADLINE_MS)
                assert re.fullmatch(r"rolled \d+ on a 20-sided die", await detail.text_content() or "")
                await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
                async with page.expect_response(
                        lambda r: r.request.method == "POST" and '"tools/call"' in (r.request.post_data or ""),
                        timeout=DEADLINE_MS) as called:
                    await app.locator("#again").click()
                response = await called.value
                assert response.ok
                await response.finished()
                rolled = re.search(r"rolled \d+ on a 20-sided die", await response.text())
                assert rolled, "the proxied tools/call run brought no roll"
                # the app shows the roll its call brought back
                await detail.filter(has_text=re.compile(rf"^{rolled.group(0)}$")).wait_for(timeout=DEADLINE_MS)
                await no_error(page)
    finally:
        await mcp_connections().aclose()


@pytest.mark.timeout(420)  # as above
async def test_a_copilotkit_page_with_use_single_endpoint_talks_to_the_gateway(
    browser: Any, page_url: str, tmp_path: Path
) -> None:
    """``useSingleEndpoint``: the page sends every call as an envelope POSTed to ``runtimeUrl`` (the
    gateway's agent path) and the chat works as over the REST routes: text, the frontend tool's
    round trip, no error."""
    agent = PausedAfterFirstDelta()
    agent.resume.set()
    async with await start_sse_server(agent, cors_origins=[page_url]) as srv:
        endpoint = srv.url.rstrip("/")
        page = await open_chat(browser, page_url, f"runtime={endpoint}&thread=t-single&single=1")
        async with screenshot_on_failure(page, tmp_path / "copilotkit-page-single.png"):
            await send(page, "book a table for 4")
            await shows(page, "Booked: confirmed for 4 guests.")
            await page.wait_for_function(NOT_RUNNING_JS, timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all("#handled li", "ls => ls.map(l => l.textContent)") == [
                "confirmed for 4 guests"]
            await no_error(page)
            posts = [a for a in page.asked if a.split()[1].startswith(endpoint) and not a.startswith("OPTIONS ")]
            assert posts and set(posts) <= {f"POST {endpoint}", f"POST {endpoint}/"}  # envelopes only
