"""Every example under examples/ runs as its docstring says: the commands are read from the
docstring itself (the indented lines starting with ``agui-engine``), ``serve`` runs as a real
subprocess from the repository root, and the documented ``agui-engine run`` is the client --
once as written (its rendered answer is checked) and once with ``--raw`` (its NDJSON events
pass the Verifier). The only change to a command is ``--port 0`` (a free port, as parallel
test runs need) and the URL it then prints; the remote proxy's ``--agent`` URL is the first
server's. Nothing is reached beyond 127.0.0.1: the frameworks' models are scripted models on
loopback, and CrewAI's offline switches are the ones ``serve`` sets by itself (the test's
environment sets none).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from agui_engine.protocol.codec import EventStreamDecoder
from agui_engine.protocol.events import Event, ToolCallResultEvent, ToolCallStartEvent
from agui_engine.protocol.verify import verify_events

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: How long a ``serve`` may take to listen: importing crewai or langgraph takes 5-20 s on a
#: loaded 2-core machine.
SERVE_START_SECONDS = 120
#: How long one ``agui-engine run`` may take (a crew's run included).
RUN_SECONDS = 120
#: What CrewAI's boxed console panels are drawn with (rich's rounded box).
PANEL_CHARS = ("╭", "╰")


def commands(example: str) -> list[str]:
    """The ``agui-engine`` command lines of ``examples/<example>.py``'s docstring, in order."""
    docstring = ast.get_docstring(ast.parse((EXAMPLES / f"{example}.py").read_text(encoding="utf-8"))) or ""
    return [line.strip() for line in docstring.splitlines() if line.startswith("    agui-engine ")]


def cli() -> list[str]:
    """The ``agui-engine`` console script next to this Python, else ``python -m agui_engine``."""
    script = Path(sys.executable).parent / "agui-engine"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agui_engine"]


def environment() -> dict[str, str]:
    drop = ("AGUI_AUTH_TOKEN", "CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED", "CREWAI_TRACING_ENABLED",
            "LITELLM_LOCAL_MODEL_COST_MAP")
    return {k: v for k, v in os.environ.items() if k not in drop}


class Server:
    """A running ``agui-engine serve``: its URL, and every line it wrote (stdout, stderr)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url: str | None = None
        self._listening = threading.Event()
        self._readers = [threading.Thread(target=self._read, args=(stream,), daemon=True)
                         for stream in (process.stdout, process.stderr)]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: object) -> None:
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith("serving on "):
                self.url = line.split()[-1]
                self._listening.set()
        self._listening.set()  # the process ended

    def wait_listening(self) -> str:
        self._listening.wait(SERVE_START_SECONDS)
        assert self.url, "the server did not start:\n" + "\n".join(self.lines[-40:])
        return self.url

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(timeout=30) == 0, "\n".join(self.lines[-40:])
        for reader in self._readers:
            reader.join(10)


@contextmanager
def serving(command: str, *, extra: tuple[str, ...] = ()) -> Iterator[Server]:
    """``command`` (a documented ``agui-engine serve ...``) on a free port, from the repository root."""
    argv = command.split()
    assert argv[:2] == ["agui-engine", "serve"], command
    argv = [a for a in argv[2:]]
    if "--port" in argv:
        at = argv.index("--port")
        del argv[at:at + 2]
    process = subprocess.Popen([*cli(), "serve", *argv, "--port", "0", *extra], cwd=ROOT, env=environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = Server(process)
    try:
        server.wait_listening()
        yield server
    finally:
        server.stop()


def run_client(command: str, url: str) -> tuple[str, list[Event]]:
    """The documented ``agui-engine run --url ... "message"`` against ``url``: its rendered
    output (exit status 0), and the run's events from the same command with ``--raw``,
    verified."""
    match = re.fullmatch(r'agui-engine run --url (\S+) "(.+)"', command)
    assert match, f"not a documented run command: {command}"
    message = match.group(2)
    pretty = subprocess.run([*cli(), "run", "--url", url, message], cwd=ROOT, env=environment(),
                            capture_output=True, text=True, timeout=RUN_SECONDS)
    assert pretty.returncode == 0, pretty.stderr
    raw = subprocess.run([*cli(), "run", "--url", url, "--raw", message], cwd=ROOT, env=environment(),
                         capture_output=True, timeout=RUN_SECONDS)
    assert raw.returncode == 0, raw.stderr.decode()
    decoder = EventStreamDecoder("ndjson")
    events: list[Event] = [*decoder.feed(raw.stdout), *decoder.close()]
    assert verify_events(events) == [], verify_events(events)
    return pretty.stdout, events


def served(example: str, *, extra: tuple[str, ...] = ()) -> tuple[str, list[Event], Server]:
    serve, run = commands(example)
    with serving(serve, extra=extra) as server:
        out, events = run_client(run, server.url or "")
    return out, events, server


def tool_calls(events: list[Event]) -> list[tuple[str, str]]:
    """``(tool name, result)`` of every tool call of the run."""
    names = {e.tool_call_id: e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)}
    return [(names.get(e.tool_call_id, "?"), e.content) for e in events if isinstance(e, ToolCallResultEvent)]


def test_every_example_documents_one_serve_and_one_run_command() -> None:
    examples = sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "__init__")
    assert examples == ["crewai_crew", "crewai_flow", "custom_agent", "langgraph_graph", "llm_agent", "remote_proxy"]
    for example in examples:
        found = commands(example)
        assert [c.split()[1] for c in found] == (["serve", "serve", "run"] if example == "remote_proxy"
                                                  else ["serve", "run"]), (example, found)


@pytest.mark.timeout(300)
def test_the_langgraph_graph_calls_its_tool_and_answers_with_the_result() -> None:
    out, events, _ = served("langgraph_graph")
    assert tool_calls(events) == [("get_weather", "Tokyo: sunny, 21 C")]
    assert "The weather report says: Tokyo: sunny, 21 C." in out


@pytest.mark.timeout(300)
def test_the_crewai_crew_streams_the_tool_call_and_both_agents_answers_without_panels() -> None:
    out, events, server = served("crewai_crew")
    assert tool_calls(events) == [("get_weather", "Tokyo: sunny, 21 C")]
    # once: the crew's output is the writer's message, already streamed (issue 30: it came twice)
    assert out.count("In short: Tokyo: sunny, 21 C.") == 1, out
    assert not [line for line in server.lines if line.lstrip().startswith(PANEL_CHARS)]


@pytest.mark.timeout(300)
def test_the_crewai_flow_keeps_its_console_panels_out_of_the_log_unless_debug() -> None:
    out, events, server = served("crewai_flow")
    assert tool_calls(events) == [("get_weather", "Paris: sunny, 21 C")]
    assert "In short: Paris: sunny, 21 C." in out
    assert not [line for line in server.lines if line.lstrip().startswith(PANEL_CHARS)], "\n".join(server.lines)
    # --log-level debug shows them, as log records of agui_engine.console
    _, _, debug = served("crewai_flow", extra=("--log-level", "debug"))
    panels = [line for line in debug.lines if "console: " in line and PANEL_CHARS[0] in line]
    assert any("Flow" in line for line in panels), "\n".join(debug.lines[-60:])


def test_the_custom_async_generator_agent_streams_its_reply_and_state() -> None:
    out, events, _ = served("custom_agent")
    assert "You said 2 words: hello there" in out
    assert [e.snapshot for e in events if type(e).__name__ == "StateSnapshotEvent"] == [{"words": 2}]


def test_the_llm_agent_runs_its_sync_tool_behind_serve_with_no_tool_runner() -> None:
    out, events, _ = served("llm_agent")
    [(name, result)] = tool_calls(events)
    assert name == "get_weather" and msgspec.json.decode(result) == {"city": "Oslo", "temperature": 3.0,
                                                                      "condition": "Snow"}
    assert "Oslo: 3 °C, Snow." in out


def test_the_remote_proxy_serves_the_upstream_agent_through_a_second_gateway() -> None:
    upstream, proxy, run = commands("remote_proxy")
    with serving(upstream) as first:
        documented = re.search(r"--agent (http://\S+)", proxy)
        assert documented is not None
        with serving(proxy.replace(documented.group(1), first.url or "")) as second:
            assert second.url != first.url
            out, events = run_client(run, second.url or "")
    [(name, result)] = tool_calls(events)
    assert name == "get_weather" and "Cloudy" in result
    assert "Paris: 12 °C, Cloudy." in out
    # the run crossed both: the proxy logged it, and so did the upstream
    assert any("POST" in line for line in second.lines) and any("POST" in line for line in first.lines)
