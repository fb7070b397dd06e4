"""`agui-engine demo`: the real command as a subprocess, its NDJSON through ag-ui-validate, live rendering."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pyte

from agui_engine.cli.demo import SCENARIOS, demo_agent
from agui_engine.cli.render import Renderer, fetch_component_data
from agui_engine.protocol.events import RunAgentInput, UserMessage
from agui_engine.transports.data import ResourceBroker

ROOT = Path(__file__).resolve().parents[3]


def demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", *args],
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
    )


def test_weather_demo_renders_plain_lines_without_a_terminal() -> None:
    done = demo("What's the weather in Tokyo?")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out  # no terminal: no escape codes
    lines = out.splitlines()
    expected_in_order = [
        "you › What's the weather in Tokyo?",
        "● run demo-run-0 (thread demo-thread-0)",
        "  thinking › The user wants the current weather for Tokyo.",
        "  assistant › Let me check the weather in Tokyo.",
        '  ⚙ get_weather(city="Tokyo")  — Checking the weather in Tokyo',
        '    ↳ get_weather → {"city":"Tokyo","temperature":18.5',
        "  ▣ WeatherCard #1 started",
        "    ✓ WeatherCard #1 resourceId: weather.current",
        '    ✓ WeatherCard #1 params: {"city": "Tokyo"}',
        # the card's data: fetched from the weather.current resource, not written by the model
        "    ⇣ WeatherCard #1 city: Tokyo",
        "    ⇣ WeatherCard #1 temperature: 18.5",
        "    ⇣ WeatherCard #1 condition: Partly cloudy",
        "  ▣ WeatherCard #1 done · Showed the weather card for Tokyo",
        "  assistant › It's 18.5°C and partly cloudy in Tokyo, with 64% humidity.",
        "● finished · embedded-demo-1:",
        "AG-UI events, verified)",
    ]
    position = 0
    for wanted in expected_in_order:
        position = next(i for i in range(position, len(lines)) if wanted in lines[i]) + 1


def test_demo_without_a_message_runs_every_scenario() -> None:
    done = demo()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("AG-UI events, verified)") == len(SCENARIOS)
    for scenario in SCENARIOS:
        assert f"you › {scenario}" in out
    assert "WeatherCard #2 done · Showed the weather card for Paris" in out  # parallel calls
    assert "✓ Dashboard #1 sections:" in out and "- kind: chart" in out  # nested blocks
    assert "Hello! I'm the embedded demo model." in out


def test_ndjson_output_passes_ag_ui_validate_cli() -> None:
    done = demo("--format", "ndjson", "Compare the weather in Tokyo and Paris")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith('{"type":"RUN_STARTED"') and lines[-1].startswith('{"type":"RUN_FINISHED"')
    validate = subprocess.run(
        [sys.executable, "-c", "from ag_ui_validate.cli import main; raise SystemExit(main())", "-",
         "--json", "--fail-on", "warning"],
        input=done.stdout, capture_output=True, text=True, timeout=120, check=False,
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr


def test_bad_pace_is_refused() -> None:
    done = demo("--pace", "-1", "hi")
    assert done.returncode == 2 and "--pace" in done.stderr


async def test_live_rendering_draws_component_boxes_in_place() -> None:
    out = io.StringIO()
    renderer = Renderer(out, live=True, color=True, width=100, height=60)
    agent = demo_agent()
    broker = ResourceBroker(agent.resources)  # the cards' data, as the demo fetches it
    async for event in agent.run(RunAgentInput(thread_id="t", run_id="r",
                                               messages=[UserMessage(id="u", content=SCENARIOS[1])])):
        await fetch_component_data(renderer, event, broker.fetch)
        renderer.handle(event)
    raw = out.getvalue()
    assert "\x1b[" in raw and "F\x1b[J" in raw  # boxes were redrawn in place
    screen = pyte.Screen(100, 80)
    pyte.Stream(screen).feed(raw.replace("\n", "\r\n"))
    shown = [line.rstrip() for line in screen.display if line.strip()]
    for city in ("Tokyo", "Paris"):
        assert any(line.endswith(f'✓ params: {{"city": "{city}"}}') for line in shown)
    for figure in ("temperature: 18.5", "temperature: 11.2"):  # the resource's data, drawn inside the boxes
        assert any(line.endswith(f"⇣ {figure}") for line in shown), shown
    assert sum("WeatherCard #" in line and "· done" in line for line in shown) == 2
    assert not any("· streaming" in line for line in shown)  # nothing left half drawn
    assert shown[-1].startswith("● finished")


async def test_live_region_never_outgrows_the_screen() -> None:
    import re

    for scenario in (SCENARIOS[1], SCENARIOS[2]):
        out = io.StringIO()
        renderer = Renderer(out, live=True, color=False, width=80, height=24)
        async for event in demo_agent().run(RunAgentInput(thread_id="t", run_id="r",
                                                          messages=[UserMessage(id="u", content=scenario)])):
            renderer.handle(event)
        ups = [int(n) for n in re.findall(r"\x1b\[(\d+)F", out.getvalue())]
        assert ups and max(ups) < 24  # the cursor can always reach the top of the region
