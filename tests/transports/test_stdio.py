"""The stdio transport through a real subprocess (``agui-engine serve --transport stdio``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import msgspec
import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.transports.retrying_client import RemoteAgentError
from agui_engine.transports.stdio_client import StdioAgent

from .scripted import ScriptedAgent, make_input

SERVE = [sys.executable, "-m", "agui_engine", "serve", "--transport", "stdio"]


def line(run_id: str) -> bytes:
    return msgspec.json.encode(make_input(run_id)) + b"\n"


def test_lines_in_events_out_errors_keep_serving_and_eof_exits_0() -> None:
    stdin = (
        line("a")
        + b"not json\n"
        + b'{"threadId": "t", "runId": 7, "messages": []}\n'
        + b"\n"
        + line("a")  # duplicate of a finished run: refused, the server goes on
        + line("b")
    )
    proc = subprocess.run(
        SERVE + ["--agent", "py:tests.transports.scripted:agent", "--log-level", "DEBUG"],
        input=stdin,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    docs = [msgspec.json.decode(x) for x in proc.stdout.splitlines()]
    errors = [d for d in docs if "error" in d]
    # bare while a run is alone in flight, enveloped once two overlap
    events = [decode_event(msgspec.json.encode(d if "type" in d else d["event"])) for d in docs if "error" not in d]
    assert [(e["line"], e["error"]["code"]) for e in errors] == [
        (2, "malformed_json"),
        (3, "invalid_input"),
        (5, "run_exists"),
    ]
    assert errors[2]["runId"] == "a"
    assert [e.type.value for e in events].count("RUN_FINISHED") == 2
    assert all(b"Traceback" not in x for x in proc.stdout.splitlines())


def test_concurrent_runs_are_tagged_and_eof_finishes_them() -> None:
    stdin = line("a") + line("b")
    proc = subprocess.run(
        SERVE + ["--agent", "py:tests.transports.scripted:slow_agent"], input=stdin, capture_output=True, timeout=30
    )
    assert proc.returncode == 0
    docs = [msgspec.json.decode(x) for x in proc.stdout.splitlines()]
    tagged = [d for d in docs if "event" in d]
    assert {d["id"].rpartition(":")[0] for d in tagged} == {"a", "b"}
    for rid in ("a", "b"):
        seqs = [int(d["id"].rpartition(":")[2]) for d in tagged if d["id"].startswith(rid + ":")]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert [d["event"]["type"] for d in tagged if d["id"].startswith(rid + ":")][-1] == "RUN_FINISHED"
    # every line is one of the two shapes; run a's first event comes first either way
    assert all(("type" in d) != ("event" in d) for d in docs)
    first = docs[0] if "type" in docs[0] else docs[0]["event"]
    assert first["type"] == "RUN_STARTED" and first["runId"] == "a"


async def test_stdio_agent_spawns_the_server_and_matches_the_direct_stream() -> None:
    agent = StdioAgent(SERVE + ["--agent", "py:tests.transports.scripted:agent"])
    remote = [e async for e in agent.run(make_input("r1"))]
    direct = [e async for e in ScriptedAgent(deltas=5).run(make_input("r1"))]
    assert remote == direct


async def test_stdio_agent_typed_error_and_cancel() -> None:
    bad = make_input("x\u2028y")
    bad_agent = StdioAgent(SERVE + ["--agent", "py:tests.transports.scripted:agent"])
    events = [e async for e in bad_agent.run(make_input("ok"))]
    assert events[-1].type.value == "RUN_FINISHED"
    with pytest.raises(RemoteAgentError):
        # an unusable run id (CR) is refused by the server with an error line
        [e async for e in bad_agent.run(msgspec.structs.replace(bad, run_id="x\ry"))]
    slow = StdioAgent(SERVE + ["--agent", "py:tests.transports.scripted:slow_agent"])
    gen = slow.run(make_input("c"))
    async for e in gen:
        if e.type.value == "TEXT_MESSAGE_CONTENT":
            break
    await asyncio.wait_for(gen.aclose(), 10)  # sends cancel, the child exits


class _Trickle(__import__("io").RawIOBase):
    """A raw stream that hands out at most the next chunk size per read, as a pipe
    may: the stdio server must serve the same lines however the input is cut."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.pos, self.sizes, self.i = data, 0, sizes or [len(data) or 1], 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
        n = min(len(buf), max(1, self.sizes[self.i % len(self.sizes)]), len(self.data) - self.pos)
        self.i += 1
        buf[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def _normalised(out: bytes) -> tuple[dict[str, list[str]], list[tuple[int, str]]]:
    runs: dict[str, list[str]] = {}
    errors = []
    alone = ""  # a bare line belongs to the only run in flight: the last one started bare
    for raw in out.splitlines():
        d = msgspec.json.decode(raw)
        if "error" in d:
            errors.append((d["line"], d["error"]["code"]))
            continue
        if "type" in d:
            if d["type"] == "RUN_STARTED":
                alone = d["runId"]
            runs.setdefault(alone, []).append(raw.decode())
        else:
            runs.setdefault(d["id"].rpartition(":")[0], []).append(msgspec.json.encode(d["event"]).decode())
    return runs, errors


def test_the_server_reads_the_same_lines_however_stdin_is_cut() -> None:
    import io

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from agui_engine.transports.stdio_server import serve_stdio
    from tests.hypothesis_profiles import at_most

    data = line("a") + b'{"bad json\n' + line("a") + b"\n" + line("b")[:-1]  # last line without LF

    def serve(sizes: list[int]) -> bytes:
        out = io.BytesIO()
        stdin = io.BufferedReader(_Trickle(data, sizes), buffer_size=8)
        assert asyncio.run(serve_stdio(ScriptedAgent(deltas=2), stdin=stdin, stdout=out)) == 0
        return out.getvalue()

    whole = _normalised(serve([len(data)]))
    assert whole[1] == [(2, "malformed_json"), (3, "run_exists")]
    assert sorted(whole[0]) == ["a", "b"] and all(len(v) == 10 for v in whole[0].values())
    assert _normalised(serve([1])) == whole

    @settings(max_examples=at_most(40), deadline=None)  # each example runs a real subprocess
    @given(st.lists(st.integers(1, 300), min_size=1, max_size=20))
    def prop(sizes: list[int]) -> None:
        assert _normalised(serve(sizes)) == whole

    prop()


async def test_stdio_agent_ends_the_run_on_a_malformed_output_line() -> None:
    """A child that writes a garbage line after its first event: the Agent contract
    holds (no exception after the first event): RUN_ERROR naming the line, and the
    child is told to cancel and exits."""
    child = (
        "import sys; sys.stdin.readline(); "
        "print('{\"type\":\"RUN_STARTED\",\"threadId\":\"thread-1\",\"runId\":\"run-1\"}'); "
        "print('{\"neither\": \"event nor envelope\"}', flush=True); "
        "sys.stdout.write(sys.stdin.read())"
    )
    events = [e async for e in StdioAgent([sys.executable, "-c", child]).run(make_input())]
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "bad_line" and "output line 2" in events[-1].message


def test_a_flood_on_stdin_is_held_back_while_the_loop_is_slow() -> None:
    """The reader thread never gets more than STDIN_MAX_PENDING_LINES ahead of the loop:
    a writer flooding stdin is held back (in a real pipe, by the kernel) instead of
    every line being queued in our memory."""
    import io
    import threading
    import time

    from agui_engine.transports.stdio_server import STDIN_MAX_PENDING_LINES, serve_stdio

    lines = 300
    lock = threading.Lock()
    state = {"read": 0, "answered": 0, "max_ahead": 0}

    class CountingStdin(io.BytesIO):
        def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
            data = super().readline(size)
            if data:
                with lock:
                    state["read"] += 1
            return data

    class SlowStdout(io.BytesIO):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            with lock:
                state["max_ahead"] = max(state["max_ahead"], state["read"] - state["answered"])
                state["answered"] += data.count(b"\n")
            time.sleep(0.0005)  # a slow loop: the thread has all the time it wants to read ahead
            return super().write(data)

    stdin = CountingStdin(b"not json\n" * lines)
    out = SlowStdout()
    assert asyncio.run(serve_stdio(ScriptedAgent(deltas=1), stdin=stdin, stdout=out)) == 0
    assert state["answered"] == lines  # every line got its error line: nothing lost
    errors = [msgspec.json.decode(x) for x in out.getvalue().splitlines()]
    assert [e["line"] for e in errors] == list(range(1, lines + 1))
    # Taken by the loop (1) + waiting (the bound) + read and blocked in the thread's hand (1).
    assert state["max_ahead"] <= STDIN_MAX_PENDING_LINES + 2
