"""``agui-engine validate``: the shipped example, files, stdin, exit codes, JSON output."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agui_engine.cli import main
from agui_engine.cli.validate import EXAMPLES, validate_stream
from agui_engine.protocol.codec import EventStreamDecoder, encode_ndjson, encode_sse
from agui_engine.protocol.events import RunFinishedEvent, RunStartedEvent, TextMessageChunkEvent
from agui_engine.protocol.proto import PROTO_KEEPALIVE_FRAME, encode_proto_frame
from agui_engine.protocol.verify import verify_events

DATA = Path(__file__).resolve().parents[3] / "agui_engine" / "data"
CORPUS = Path(__file__).resolve().parents[2] / "data" / "ag_ui_validate"


class Trickle(io.BytesIO):
    """A byte stream that hands out at most ``size`` bytes per read."""

    def __init__(self, data: bytes, size: int) -> None:
        super().__init__(data)
        self.size = size

    def read(self, n: int | None = -1) -> bytes:
        return super().read(self.size)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_shipped_example_is_a_valid_run_in_every_split() -> None:
    data = (DATA / EXAMPLES["weather"]).read_bytes()
    events = EventStreamDecoder("sse").feed(data)
    assert len(events) == 40 and verify_events(events, include_warnings=True) == []
    # The verdict does not depend on how the bytes arrive.
    for size in (1, 7, 4096):
        result = validate_stream(Trickle(data, size))
        assert result.valid and result.events == 40


def test_validate_without_arguments_runs_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([], capsys)
    assert code == 0
    assert "VALID: 40 events; runs: run_01HZX4 finished (success)" in out
    assert "[assistant] msg_asst_1: Let me check the current weather in Tokyo." in out
    assert 'tool call get_weather (call_wx_1): {"city":"Tokyo","unit":"celsius"}' in out
    assert "[tool] msg_tool_1 -> call_wx_1" in out
    assert '"history": ["Tokyo"]' in out
    assert "WeatherCard" in out  # the component block built from the tambo.component.* events


def test_broken_example_lists_every_violation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--example", "broken"], capsys)
    assert code == 1
    assert "INVALID: 4 problem(s) in 9 events" in out
    for line in ("event 5 TOOL_CALL_END [tool_call.args_not_json] toolCallId='call_9'",
                 "event 7 TEXT_MESSAGE_CONTENT [text.not_open] messageId='m2'",
                 "event 8 RUN_FINISHED [lifecycle.run_ids]",
                 "event 8 RUN_FINISHED [text.unterminated] messageId='m1'",
                 "event 6 (STATE_DELTA) at /delta/0: [state_patch]"):
        assert line in out


def test_files_of_both_framings_and_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [RunStartedEvent(thread_id="t", run_id="r"), TextMessageChunkEvent(message_id="m", delta="hi"),
              RunFinishedEvent(thread_id="t", run_id="r")]
    sse = tmp_path / "run.sse"
    sse.write_bytes(b"".join(encode_sse(e) for e in events))
    ndjson = tmp_path / "run.ndjson"
    ndjson.write_bytes(b"".join(encode_ndjson(e) for e in events))
    binary = tmp_path / "run.bin"  # what curl saves from Accept: application/vnd.ag-ui.event+proto
    binary.write_bytes(b"".join(encode_proto_frame(e) for e in events) + PROTO_KEEPALIVE_FRAME)
    for path, framing in ((sse, "sse"), (ndjson, "ndjson"), (binary, "proto")):
        code, out, _ = run_cli([str(path), "--json"], capsys)
        report = json.loads(out)
        assert code == 0 and report["valid"] and report["format"] == framing
        assert report["messages"] == [{"id": "m", "role": "assistant", "content": "hi"}]
    code, out, _ = run_cli([str(CORPUS / "invalid" / "AGUI203-unterminated-tool-call" / "stream.jsonl"), "--json"],
                           capsys)
    report = json.loads(out)
    assert code == 1
    assert [(v["rule"], v["event_index"], v["ids"]) for v in report["violations"]] == [
        ("tool_call.unterminated", 3, {"toolCallId": "call_7"})]


def test_undecodable_input_names_the_frame_and_keeps_what_came_before(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([str(CORPUS / "invalid" / "AGUI502-payload-not-json" / "stream.jsonl")], capsys)
    assert code == 1
    assert "undecodable input, stream abandoned" in out and "frame 1" in out
    assert "runs: run_001 running" in out


def test_unreadable_path_and_conflicting_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([str(tmp_path / "missing.sse")], capsys)
    assert code == 2 and "cannot read" in err and "Traceback" not in err
    code, _, err = run_cli([str(tmp_path / "x"), "--example"], capsys)
    assert code == 2


def test_stdin_and_exit_status_in_a_real_subprocess() -> None:
    # A real subprocess: `python -m agui_engine`, stdin, and the exit status as a shell sees them.
    data = (CORPUS / "invalid" / "AGUI001-first-event-not-run-started" / "stream.jsonl").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "agui_engine", "validate", "-", "--quiet"], input=data,
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert b"[lifecycle.first_event]" in proc.stdout and b"conversation" not in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "agui_engine", "validate", "--quiet"], capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and b"VALID: 40 events" in proc.stdout


def test_tolerant_mode_keeps_unknown_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = CORPUS / "invalid" / "AGUI503-unknown-event-type" / "stream.jsonl"
    code, out, _ = run_cli([str(path)], capsys)
    assert code == 1 and "unknown event type 'AGUI_PING'" in out
    code, out, _ = run_cli([str(path), "--tolerant"], capsys)
    assert code == 0 and "VALID: 3 events" in out


def test_a_damaged_binary_capture_names_the_frame_and_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frames = [encode_proto_frame(e) for e in (RunStartedEvent(thread_id="t", run_id="r"),
                                               TextMessageChunkEvent(message_id="m", delta="hi"))]
    for tail, says in ((frames[1][:-2], f"frame 1 at byte {len(frames[0])}: truncated message"),
                       (b"\xff\xff\xff\xff", f"frame 1 at byte {len(frames[0])}: protobuf frame of 4294967295 bytes")):
        path = tmp_path / "cut.bin"
        path.write_bytes(frames[0] + tail)
        code, out, _ = run_cli([str(path)], capsys)
        assert code == 1 and "[PROTO]" in out and says in out and "runs: r running" in out, out
