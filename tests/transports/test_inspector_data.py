"""Data binding in the browser: the inspector, in real headless Chromium, against the real ``serve``.

``agui-engine serve`` (the embedded demo agent, a bearer token) runs as a subprocess on a free port;
the page is used as a person would: type the token and a message, watch the WeatherCard appear. The
model chose ``{resourceId: "weather.current", params: {city}}``; the card's numbers arrive through
``query()`` from ``POST <path>/data/query`` (seen on the wire by Playwright: one request per card,
the token in its Authorization header), not from the props. The Queries panel lists each query; the
form sends wrong ones by hand and the page shows the gateway's 404, 422 (with the JSON path: a param
of the wrong type, a city the resolver does not know) and 401.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agui_engine.demo.weather_model import DEMO_WEATHER

from .test_inspector import DEADLINE_MS, browser, open_inspector  # noqa: F401  (browser: a fixture)

TOKEN = "s3cret-data"
#: The server prints its URL within a second or two; this only stops a hang.
START_SECONDS = 60


@pytest.fixture
async def served() -> AsyncIterator[str]:
    """The inspector URL of a real ``agui-engine serve`` (port 0, bearer token), stopped after the test."""
    env = {**os.environ, "AGUI_AUTH_TOKEN": TOKEN}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--pace", "0.002", "--no-access-log",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env)
    assert proc.stderr is not None
    try:
        url = None
        async with asyncio.timeout(START_SECONDS):
            while url is None:
                line = (await proc.stderr.readline()).decode()
                assert line, f"serve exited ({await proc.wait()}) before printing its URL"
                if line.startswith("serving on "):
                    url = line.split()[-1]
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
        async with asyncio.timeout(15):
            assert await proc.wait() == 0


QUERIES_JS = """() => window.__inspector.binding.log.map(q => ({
    componentId: q.componentId, resourceId: q.resourceId, params: q.params, status: q.status,
    httpStatus: q.httpStatus, data: q.data ?? null, error: q.error ? {status: q.error.status, code: q.error.code,
    path: q.error.path, message: q.error.message} : null}))"""


async def test_weather_card_data_arrives_through_query(browser: Any, served: str, tmp_path: Path) -> None:  # noqa: F811
    page = await open_inspector(browser, served)
    requests: list[dict[str, Any]] = []
    page.on("request", lambda r: requests.append(
        {"url": r.url, "method": r.method, "body": r.post_data, "auth": r.headers.get("authorization")})
        if r.url.endswith("/data/query") else None)
    await page.fill("#token", TOKEN)
    await page.fill("#message", "Compare the weather in Tokyo and Paris")
    await page.press("#message", "Enter")
    await page.wait_for_selector("#status[data-state='done']", timeout=DEADLINE_MS)
    await page.wait_for_function(
        "document.querySelectorAll(\".card[data-component-name='WeatherCard'] [data-field='temperature']\").length == 2",
        timeout=DEADLINE_MS)
    cards = await page.evaluate("""() => [...window.__inspector.store.components.values()]
        .filter(c => c.name === 'WeatherCard').map(c => ({id: c.id, props: c.props}))""")
    assert len(cards) == 2
    shown = {}
    for card in cards:
        props = card["props"]
        # the model chose business meaning only: no numbers, no URL in the props
        assert props["resourceId"] == "weather.current" and set(props["params"]) == {"city"}
        assert "temperature" not in props and not any("http" in json.dumps(v) for v in props.values())
        city = props["params"]["city"]
        selector = f".card[data-component-id='{card['id']}']"
        shown[city] = {
            "temperature": await page.inner_text(f"{selector} [data-field='temperature']"),
            "condition": await page.inner_text(f"{selector} [data-field='condition']"),
            "city": await page.inner_text(f"{selector} .weather-city"),
        }
    for city, view in shown.items():
        expected = DEMO_WEATHER[city.lower()]
        assert view == {"temperature": f"{expected['temperature']} °C", "condition": expected["condition"],
                        "city": expected["city"]}
    # on the wire: one POST per card (not one per streamed delta), with the token, body {resourceId, params}
    bodies = sorted((json.loads(r["body"]) for r in requests), key=lambda b: b["params"]["city"])
    assert bodies == [{"resourceId": "weather.current", "params": {"city": "Paris"}},
                      {"resourceId": "weather.current", "params": {"city": "Tokyo"}}]
    assert {r["method"] for r in requests} == {"POST"} and {r["auth"] for r in requests} == {f"Bearer {TOKEN}"}
    assert all(r["url"] == served.rstrip("/") + "/data/query" for r in requests)
    # the Queries panel: one row per query, ok, HTTP 200
    rows = await page.eval_on_selector_all("#queries tbody tr", "els => els.map(e => [e.dataset.resourceId, "
                                           "e.dataset.status, e.dataset.httpStatus])")
    assert rows == [["weather.current", "ok", "200"]] * 2
    shot = tmp_path / "inspector-data.png"
    await page.screenshot(path=str(shot), full_page=True)
    print(f"inspector screenshot: {shot}")
    assert page.errors == []


async def test_refused_queries_are_shown(browser: Any, served: str) -> None:  # noqa: F811
    page = await open_inspector(browser, served)
    await page.fill("#token", TOKEN)

    async def ask(resource: str, params: str, status: int) -> dict[str, Any]:
        count = len(await page.evaluate(QUERIES_JS))
        await page.fill("#query-resource", resource)
        await page.fill("#query-params", params)
        await page.click("#query-send")
        await page.wait_for_selector(f"#queries tbody tr[data-seq='{count + 1}'][data-http-status='{status}']",
                                     timeout=DEADLINE_MS)
        entry = (await page.evaluate(QUERIES_JS))[-1]
        text = await page.inner_text(f"#queries tbody tr[data-seq='{count + 1}']")
        return {**entry, "text": text}

    ok = await ask("weather.current", '{"city": "Berlin"}', 200)
    assert ok["status"] == "ok" and ok["data"]["temperature"] == DEMO_WEATHER["berlin"]["temperature"]
    unknown = await ask("no.such.resource", "{}", 404)
    assert unknown["status"] == "error" and unknown["error"]["code"] == "unknown_resource"
    assert "unknown_resource" in unknown["text"]
    invalid = await ask("weather.current", '{"city": 5}', 422)
    assert invalid["error"]["code"] == "invalid_params" and invalid["error"]["path"] == "$.params.city"
    assert "$.params.city" in invalid["text"]
    nowhere = await ask("weather.current", '{"city": "Atlantis"}', 422)  # the resolver's own refusal
    assert nowhere["error"]["path"] == "$.params.city" and "known cities" in nowhere["error"]["message"]
    await page.fill("#token", "wrong")
    refused = await ask("weather.current", '{"city": "Berlin"}', 401)
    assert refused["error"]["status"] == 401
    assert await page.eval_on_selector_all("#queries tbody tr[data-status='error']", "els => els.length") == 4
    assert page.errors == []
