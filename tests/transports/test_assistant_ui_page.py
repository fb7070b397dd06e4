"""A real assistant-ui page against the gateway, in headless Chromium.

The page (``tests/js/assistant-ui-page/page.jsx``) is assistant-ui's AG-UI runtime
(``@assistant-ui/react-ag-ui`` 0.0.58, ``useAgUiRuntime`` over ``@ag-ui/client`` 0.0.59's
``HttpAgent``, from the folder's committed lock file) with ``@assistant-ui/react`` 0.15's primitives,
its tools as a toolkit (``AuiConfig({tools: Tools({toolkit})})``) and its A2UI parts drawn with
``@assistant-ui/react-generative-ui``'s own library, bundled once per session by the package's own
esbuild and served from another origin; its agent URL is the gateway's agent path, so it gets the
0.x wire (spec/wire-versions.md). Checked as a person would see it: the answer's text in the thread
while the run is still running, the frontend tool executed and its result sent back in a follow-up
run that answers with it, a tool renderer seeing its arguments grow, the shared state both ways, the
demo's A2UI booking surface drawn whole and its button's action answered (snapshot mode chosen by
``auto`` for this client, spec/a2ui.md), a reloaded page showing its thread again through the
gateway (its history adapter reading ``connect``), a second turn, a RUN_ERROR, and no error results.
A screenshot is saved under the test's tmp dir when a check fails.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agui_engine.cli.demo import demo_agent
from agui_engine.protocol.agent import Agent
from agui_engine.protocol.events import (
    Event,
    ReplaceOperation,
    RunAgentInput,
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


#: Every tool call part of the runtime's thread whose result is an error (``isError``, or a
#: result object with an ``error`` / ``status: "error"``): what the thread would show as failed.
ERROR_RESULTS_JS = """() => window.auiMessages().flatMap((m) => m.content || [])
    .filter((p) => p.type === "tool-call" && (p.isError || (p.result && typeof p.result === "object"
        && (p.result.error !== undefined || p.result.status === "error"))))
    .map((p) => `${p.toolName}: ${JSON.stringify(p.result)}`)"""


@asynccontextmanager
async def opened(browser: Any, url: str, shot: Path) -> AsyncIterator[Any]:  # noqa: F811
    """A new page at ``url`` with its composer shown; page exceptions collected in ``page.errors``;
    a full-page screenshot at ``shot`` when the block fails."""
    page = await browser.new_page(viewport={"width": 1000, "height": 1200})
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    async with screenshot_on_failure(page, shot):
        await page.goto(url)
        await page.wait_for_selector("#composer", timeout=DEADLINE_MS)
        yield page


async def idle(page: Any) -> None:
    await page.wait_for_function("() => !document.querySelector('#running')", timeout=DEADLINE_MS)


async def texts(page: Any, selector: str) -> list[str]:
    return list(await page.eval_on_selector_all(selector, "ls => ls.map(l => l.textContent)"))


async def no_errors(page: Any) -> None:
    assert await texts(page, "#errors li") == []
    assert await page.evaluate(ERROR_RESULTS_JS) == []
    assert page.errors == []


class PausedAt:
    """``inner``'s runs, the first one held after the first event ``when(event, names)`` accepts
    (``names``: tool call id -> tool name so far) until ``resume`` is set: the page is looked at
    mid-run, with no timing assumption."""

    def __init__(self, inner: Agent, when: Callable[[Event, dict[str, str]], bool]) -> None:
        self.inner = inner
        self.when = when
        self.resume = asyncio.Event()
        self.paused = False

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        names: dict[str, str] = {}
        async for event in self.inner.run(input):
            if isinstance(event, ToolCallStartEvent):
                names[event.tool_call_id] = event.tool_call_name
            yield event
            if not self.paused and self.when(event, names):
                self.paused = True
                await self.resume.wait()


def weather_card_args(event: Event, names: dict[str, str]) -> bool:
    return isinstance(event, ToolCallArgsEvent) and names.get(event.tool_call_id) == "show_component_WeatherCard"


@pytest.mark.timeout(420)  # one esbuild bundle per session, Chromium and React, on a shared machine
async def test_an_assistant_ui_tool_renderer_sees_the_arguments_grow(
    browser: Any, aui_url: str, tmp_path: Path  # noqa: F811
) -> None:
    agent = PausedAt(demo_agent(), weather_card_args)  # the demo's weather card, paused after its first fragment
    async with await start_sse_server(agent, cors_origins=[aui_url]) as srv:
        async with opened(browser, f"{aui_url}/index.html?agent={srv.url}&thread=t-aui-args",
                          tmp_path / "args.png") as page:
            await send(page, "what is the weather in Paris?")
            # drawn from the first fragment of the arguments, while the model is still typing them
            await page.wait_for_function("() => document.querySelector('#weather-args li')", timeout=DEADLINE_MS)
            first = (await texts(page, "#weather-args li"))[0]
            with pytest.raises(json.JSONDecodeError):
                json.loads(first)  # part of the arguments, not yet a whole JSON text
            agent.resume.set()
            await page.wait_for_function("""() => [...document.querySelectorAll('#weather-args li')].some((l) => {
                try { return JSON.parse(l.textContent).params.city === "Paris"; } catch { return false; } })""",
                                         timeout=DEADLINE_MS)
            await idle(page)
            seen = await texts(page, "#weather-args li")
            final = next(t for t in seen if t.startswith("{") and t.endswith("}") and "Paris" in t)
            assert json.loads(final)["params"] == {"city": "Paris"}  # the card bound to weather.current
            assert all(final.startswith(t) for t in seen)  # each drawing a prefix of the whole, growing
            assert first != final
            await no_errors(page)


class SharedStateAgent:
    """Writes the shared state (a snapshot, then a delta) and answers with what the client's
    state said when the run began."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        note = input.state.get("note") if isinstance(input.state, dict) else None
        turns = input.state.get("turns", 0) if isinstance(input.state, dict) else 0
        yield StateSnapshotEvent(snapshot={"restaurant": "Trattoria Demo", "turns": turns,
                                           **({"note": note} if note else {})})
        yield StateDeltaEvent(delta=[ReplaceOperation(path="/turns", value=turns + 1)])
        yield TextMessageStartEvent(message_id=f"m-{input.run_id}")
        yield TextMessageContentEvent(message_id=f"m-{input.run_id}", delta=f"The state said note={note}.")
        yield TextMessageEndEvent(message_id=f"m-{input.run_id}")
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


@pytest.mark.timeout(420)  # as above
async def test_assistant_ui_shares_the_state_both_ways(browser: Any, aui_url: str, tmp_path: Path) -> None:  # noqa: F811
    async with await start_sse_server(SharedStateAgent(), cors_origins=[aui_url]) as srv:
        async with opened(browser, f"{aui_url}/index.html?agent={srv.url}&thread=t-aui-state",
                          tmp_path / "state.png") as page:
            await send(page, "hello")
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('The state said note=None.')",
                                         timeout=DEADLINE_MS)
            await idle(page)
            # the agent's STATE_SNAPSHOT and STATE_DELTA, applied by the runtime (useAgUiState)
            assert json.loads(await page.text_content("#state")) == {"restaurant": "Trattoria Demo", "turns": 1}
            # the page changes it (useAgUiSetState); the next run starts from it
            await page.click("#set-note")
            await page.wait_for_function("() => document.querySelector('#state').textContent.includes('window seat')",
                                         timeout=DEADLINE_MS)
            await send(page, "again")
            await page.wait_for_function(
                f"() => ({ASSISTANT_TEXT_JS})().includes('The state said note=window seat.')", timeout=DEADLINE_MS)
            await idle(page)
            assert json.loads(await page.text_content("#state")) == {
                "restaurant": "Trattoria Demo", "turns": 2, "note": "window seat"}
            await no_errors(page)


@pytest.mark.timeout(420)  # as above
async def test_assistant_ui_draws_the_booking_surface_and_its_action_completes_it(
    browser: Any, aui_url: str, tmp_path: Path  # noqa: F811
) -> None:
    # serve --a2ui as it is: no snapshot flag; `auto` gives this client whole snapshots (it has no
    # ACTIVITY_DELTA handler) in the form its converter draws
    async with await start_sse_server(demo_agent(a2ui=True), cors_origins=[aui_url]) as srv:
        async with opened(browser, f"{aui_url}/index.html?agent={srv.url}&thread=t-aui-a2ui",
                          tmp_path / "a2ui.png") as page:
            await send(page, "book a table for 4")
            # the whole form: its fields and the button inside the card (v0.9's `child`)
            book = page.locator(".a2ui-surface[data-surface='a2ui:table-booking'] button",
                                has_text="Book the table")
            await book.wait_for(timeout=DEADLINE_MS)
            assert await page.eval_on_selector_all(
                ".a2ui-surface[data-surface='a2ui:table-booking'] input", "ls => ls.map(l => l.name)") == [
                "name", "guests", "notes"]
            await idle(page)
            await book.click()
            # the action went back to the agent (forwardedProps.a2uiAction), which drew the confirmation
            await page.wait_for_function("""() => document.querySelector(
                ".a2ui-surface[data-surface='a2ui:booking-confirmation']")""", timeout=DEADLINE_MS)
            await idle(page)
            assert await texts(page, "#a2ui-actions li") == ["book_table"]
            confirmation = await page.text_content(".a2ui-surface[data-surface='a2ui:booking-confirmation']")
            assert "Booked at Trattoria Demo" in confirmation and "A table for 4" in confirmation
            await no_errors(page)


@pytest.mark.timeout(420)  # as above
async def test_a_reloaded_assistant_ui_page_shows_its_thread_again(
    browser: Any, aui_url: str, tmp_path: Path  # noqa: F811
) -> None:
    runs: list[str] = []

    class Counted:
        def __init__(self) -> None:
            self.inner = demo_agent()

        def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
            runs.append(input.run_id)
            return self.inner.run(input)

    # the thread belongs to the bearer token's principal: connect answers it to that principal only
    async with await start_sse_server(Counted(), auth_token={"tok-aui": "alice"}, cors_origins=[aui_url]) as srv:
        url = f"{aui_url}/index.html?agent={srv.url}&thread=t-aui-reload&token=tok-aui&history=1"
        async with opened(browser, url, tmp_path / "reload.png") as page:
            await page.wait_for_function("() => document.querySelector('#history li')", timeout=DEADLINE_MS)
            assert await texts(page, "#history li") == ["0 messages"]  # a new thread: nothing to show
            await send(page, "what is the weather in Tokyo?")
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('Tokyo')", timeout=DEADLINE_MS)
            await idle(page)
            before = await page.evaluate(ASSISTANT_TEXT_JS)
            assert len(runs) == 1
            await page.reload()
            await page.wait_for_selector("#composer", timeout=DEADLINE_MS)
            # the history adapter read the thread back from the gateway (POST .../agent/default/connect)
            await page.wait_for_function("() => document.querySelector('#history li')", timeout=DEADLINE_MS)
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('Tokyo')", timeout=DEADLINE_MS)
            assert await page.evaluate("() => [...document.querySelectorAll('.user-message')].map(m => m.textContent)"
                                       ) == ["what is the weather in Tokyo?"]
            # the same answers (the history may split one assistant turn into more message elements)
            assert (await page.evaluate(ASSISTANT_TEXT_JS)).replace(" | ", "") == before.replace(" | ", "")
            assert len(runs) == 1  # shown from the kept history: no run
            # and the thread goes on from there
            await send(page, "and in Paris?")
            await page.wait_for_function(f"() => ({ASSISTANT_TEXT_JS})().includes('Paris')", timeout=DEADLINE_MS)
            await idle(page)
            assert len(runs) == 2
            await no_errors(page)
