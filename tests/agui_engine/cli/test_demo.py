"""``agui-engine demo`` through the production path: the embedded model behind
the real OpenAI adapter over loopback HTTP, served by the real gateway and read
by the real client, gives the same conversation as the in-process shortcut."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from agui_engine.cli import main
from agui_engine.cli.demo import SCENARIOS
from agui_engine.genui.component_stream import COMPONENT_HANDLERS
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.verify import Verifier


def _conversation(ndjson: bytes) -> list[tuple[str, str, object]]:
    decoder = EventStreamDecoder("ndjson")
    events = decoder.feed(ndjson) + decoder.close()
    verifier = Verifier()
    accumulator = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    for event in events:
        for checked in verifier.feed(event):
            accumulator.apply(checked)
    verifier.close()
    assert accumulator.problems == []
    view = []
    for message in accumulator.messages:
        data = message if isinstance(message, dict) else __import__("msgspec").to_builtins(message)
        if data.get("role") == "reasoning":
            continue  # the Chat wire has no field for the embedded model's reasoning signature
        # component ids are minted per run; everything else must match
        blocks = [{k: v for k, v in block.items() if k != "id"} for block in data.get("contentBlocks") or []]
        view.append((data.get("role"), data.get("content"), blocks))
    return view


def _ndjson(capsys: pytest.CaptureFixture[str], *argv: str) -> bytes:
    assert main(["demo", "--format", "ndjson", *argv]) == 0
    return capsys.readouterr().out.encode()


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("transport", ["sse", "ws"])
def test_production_path_gives_the_same_conversation(capsys: pytest.CaptureFixture[str], scenario: str,
                                                     transport: str) -> None:
    direct = _conversation(_ndjson(capsys, "--via", "direct", "--model-path", "direct", scenario))
    production = _conversation(_ndjson(capsys, "--transport", transport, scenario))
    assert production == direct
    assert any(role == "assistant" for role, _, _ in production)


def test_readme_demo_command_in_a_real_subprocess() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", "What's the weather in Tokyo?"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "path: embedded model → OpenAI Chat over loopback HTTP → OpenAI adapter → LLMAgent → SSE gateway" in done.stdout
    assert "WeatherCard" in done.stdout and "verified" in done.stdout


def test_ui_spec_demo_prints_the_tree_in_a_real_subprocess() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", "--ui-spec", "dashboard for Tokyo and Paris"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    nodes = [line.split("▸ ", 1)[1] for line in done.stdout.splitlines() if line.startswith("    ▸ ")]
    from agui_engine.demo.weather_model import DEMO_WEATHER

    # each bound card of the tree carries what its query of weather.current answered (in-process broker)
    answers = {city: [f"     ⇣ {k}: {v}" for k, v in DEMO_WEATHER[city].items()] for city in ("tokyo", "paris")}
    assert nodes == [
        "✓ Stack [0] key=weather-overview",
        "   direction=row gap=12",
        "  “Weather overview: Tokyo and Paris (demo data)”",
        "  ✓ WeatherCard [0/1] key=tokyo",
        '     resourceId=weather.current params={"city":"Tokyo"}',
        *answers["tokyo"],
        "  ✓ WeatherCard [0/2] key=paris",
        '     resourceId=weather.current params={"city":"Paris"}',
        *answers["paris"],
    ]
    assert "⇣ temperature: 18.5" in done.stdout and "⇣ temperature: 11.2" in done.stdout
    assert "render_ui → The UI is shown" in done.stdout and "verified" in done.stdout
    # without the flag the same words show the business dashboard, no tree
    plain = subprocess.run([sys.executable, "-m", "agui_engine", "demo", "dashboard for Tokyo and Paris"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert plain.returncode == 0 and "Dashboard #1" in plain.stdout and "generative-ui" not in plain.stdout


def test_a2ui_demo_prints_the_surfaces_in_a_real_subprocess() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", "--a2ui", "--no-inspect", "book a table for two"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  assistant › Here is a booking form for 2 at Trattoria Demo, and tonight's availability." in lines
    assert lines.count("  ◇ A2UI surface · building") == 2  # one lifecycle line a surface
    assert '  ⚙ render_a2ui(surfaceId="table-booking")' in lines
    start = lines.index("  │ table-booking:")
    assert lines[start : start + 8] == [
        "  │ table-booking:",
        "  │   ┆ ## Book a table",
        "  │   ┆ Trattoria Demo · 12 Via Esempio (demo data)",
        "  │   ┆ Name: [ ]",
        "  │   ┆ Date and time: [2026-12-04T19:30]",
        "  │   ┆ Guests: [2]",
        "  │   ┆ Requests: [ ]",
        "  │   ┆ [ Book the table ] → book_table",
    ]
    start = lines.index("  │ table-availability:")
    assert lines[start + 2 : start + 7] == [
        "  │   Free tables 4 │ Wait 15 min │ Rating 4.6 / 5",
        "  │   #### Open slots",
        "  │   18:30 │ 3 tables for 2",
        "  │   19:30 │ 1 table for 2, 1 for 4",
        "  │   21:00 │ 2 tables for 6",
    ]
    assert lines.count('    ↳ render_a2ui → {"status":"rendered"}') == 2
    # the calls were answered in the run (as the middleware answers them), so nothing waits for the client
    finished = next(line for line in lines if line.startswith("● finished"))
    assert "waiting for client tools" not in finished
    assert "verified" in lines[-1]
    # without the flag the same words get a one-line answer saying how to see it
    plain = subprocess.run([sys.executable, "-m", "agui_engine", "demo", "--no-inspect", "book a table for two"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert plain.returncode == 0 and "demo --a2ui" in plain.stdout and "A2UI surface" not in plain.stdout


def test_a2ui_demo_shows_a_v1_0_surface() -> None:
    """``demo --a2ui --a2ui-version 1.0`` (issue 34): the same booking, streamed as A2UI v1.0 operations
    (checked in the NDJSON events: every operation says v1.0 and names the v1.0 basic catalog)."""
    done = subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", "--a2ui", "--a2ui-version", "1.0", "--no-inspect",
         "book a table for two"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count("  ▤ A2UI surface (v1.0)") == 2 and "  │ table-booking:" in lines
    events = subprocess.run(
        [sys.executable, "-m", "agui_engine", "demo", "--a2ui", "--a2ui-version", "1.0", "--no-inspect",
         "--format", "ndjson", "book a table for two"], capture_output=True, text=True, timeout=120, check=False)
    assert events.returncode == 0, events.stderr
    snapshots = [e for e in map(json.loads, events.stdout.splitlines())
                 if e.get("type") == "ACTIVITY_SNAPSHOT" and "a2ui_operations" in e.get("content", {})]
    ops = [op for e in snapshots for op in e["content"]["a2ui_operations"]]
    assert ops and {op["version"] for op in ops} == {"v1.0"}
    assert {op["createSurface"]["catalogId"] for op in ops if "createSurface" in op} == {
        "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json"}


def test_serve_a2ui_is_for_the_embedded_agent() -> None:
    done = subprocess.run([sys.executable, "-m", "agui_engine", "serve", "--a2ui", "--agent", "http://127.0.0.1:9/"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "agui-engine serve: --a2ui offers render_a2ui to the embedded agent: drop --agent or write --agent embedded"]


def test_a2ui_demo_agent_round_trip_in_process() -> None:
    """demo_agent(a2ui=True): the surfaces as activities, then the action as the next run's input."""
    from agui_engine.cli.demo import demo_agent
    from agui_engine.genui.a2ui import A2UIActionError
    from agui_engine.protocol.events import ActivityMessage, ActivitySnapshotEvent, RunAgentInput, UserMessage

    agent = demo_agent(a2ui=True)

    async def run(input: RunAgentInput) -> list[Any]:
        return [e async for e in agent.run(input)]

    first = RunAgentInput(thread_id="t", run_id="r1", messages=[UserMessage(id="u", content="Book a table for four")])
    events = asyncio.run(run(first))
    verifier = Verifier()
    for e in events:  # raises at the first event the protocol refuses
        verifier.feed(e)
    verifier.close()
    acc = Accumulator()
    for e in events:
        acc.apply(e)
    surfaces = [m for m in acc.messages if m["role"] == "activity"]
    ops = [m["content"]["a2ui_operations"] for m in surfaces]
    assert [o[0]["createSurface"]["surfaceId"] for o in ops] == ["table-booking", "table-availability"]
    assert ops[0][2]["updateDataModel"]["value"]["booking"]["guests"] == "4"
    assert any(isinstance(e, ActivitySnapshotEvent) for e in events)
    history = acc.messages_as_structs()
    action = {"name": "book_table", "surfaceId": "table-booking", "sourceComponentId": "book",
              "context": {"name": "Lin", "when": "2026-12-04T19:30", "guests": "4", "notes": "quiet corner"}}
    second = RunAgentInput(thread_id="t", run_id="r2", messages=[
        *first.messages, *(m for m in history if not isinstance(m, ActivityMessage))],
                           forwarded_props={"a2uiAction": {"userAction": action}})
    acc2 = Accumulator()
    for e in asyncio.run(run(second)):
        acc2.apply(e)
    (done,) = [m for m in acc2.messages if m["role"] == "activity"]
    texts = [c.get("text") for c in done["content"]["a2ui_operations"][1]["updateComponents"]["components"]]
    assert "A table for 4 on 2026-12-04 at 19:30, under the name Lin." in texts and "Requests: quiet corner" in texts
    bad = RunAgentInput(thread_id="t", run_id="r3", messages=[UserMessage(id="u", content="hi")],
                        forwarded_props={"a2uiAction": {"userAction": "click"}})
    with pytest.raises(A2UIActionError):
        asyncio.run(run(bad))

