"""The pure parts of durable threads (agui_engine/protocol/threads.py): cursors round-trip and
refuse anything else with one typed error, titles from the first user message, the listing's
checks, and AG-UI 1.0's interrupt rules for a resume."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_engine.protocol.events import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    TextPart,
    UserMessage,
)
from agui_engine.protocol.threads import (
    AUTO_TITLE_CHARS,
    DEFAULT_THREAD_PAGE,
    MAX_THREAD_PAGE,
    BadThreadRequestError,
    ResumeRejectedError,
    check_resume,
    check_search,
    check_title,
    decode_cursor,
    encode_cursor,
    open_interrupts,
    page_of,
    title_from_input,
)


@given(st.integers(min_value=-(2**62), max_value=2**62), st.text())
def test_a_cursor_round_trips(updated_at: int, thread_id: str) -> None:
    assert decode_cursor(encode_cursor(updated_at, thread_id)) == (updated_at, thread_id)


@given(st.text(max_size=200))
def test_anything_else_is_one_typed_error(junk: str) -> None:
    try:
        got = decode_cursor(junk)
    except BadThreadRequestError as exc:
        assert exc.http_status == 400 and "nextCursor" in exc.message
    else:  # a string that happens to be a valid cursor decodes to what it encodes
        assert encode_cursor(*got).rstrip("=") == junk.rstrip("=") or decode_cursor(encode_cursor(*got)) == got


def _input(*contents: object) -> RunAgentInput:
    return RunAgentInput(thread_id="t", run_id="r", messages=[
        UserMessage(id=f"u{i}", content=c) for i, c in enumerate(contents)])  # type: ignore[arg-type]


def test_the_title_is_the_first_user_messages_text() -> None:
    assert title_from_input(_input("  Hello\n\tworld  ", "second")) == "Hello world"
    assert title_from_input(_input([TextPart(text="from"), TextPart(text="parts")])) == "from parts"
    long = title_from_input(_input("word " * 100))
    assert len(long) == AUTO_TITLE_CHARS and long.endswith("…")
    assert title_from_input(RunAgentInput(thread_id="t", run_id="r", messages=[])) == ""


def test_a_page_holds_the_limit_and_a_cursor_when_there_is_more() -> None:
    rows = [(f"t{i}", "", 1, 100 - i, 1, "r") for i in range(3)]
    page = page_of(rows, 2)
    assert [t.thread_id for t in page.threads] == ["t0", "t1"]
    assert decode_cursor(page.next_cursor or "") == (99, "t1")
    assert page_of(rows, 3).next_cursor is None
    assert msgspec.json.decode(msgspec.json.encode(page))["threads"][0]["threadId"] == "t0"


def test_what_a_client_sends_is_checked() -> None:
    from agui_engine.protocol.threads import page_limit

    assert page_limit(None) == DEFAULT_THREAD_PAGE and page_limit(str(MAX_THREAD_PAGE)) == MAX_THREAD_PAGE
    for bad in ("0", "-1", "abc", "١", str(MAX_THREAD_PAGE + 1)):
        with pytest.raises(BadThreadRequestError):
            page_limit(bad)
    assert check_search("  ") is None and check_search(" x ") == "x"
    with pytest.raises(BadThreadRequestError):
        check_search("x" * 201)
    assert check_title({"title": " a  b "}) == "a b"
    for body in ([], {"title": 1}, {"title": "x", "more": 1}, {"title": " "}, {"title": "x" * 201}):
        with pytest.raises(BadThreadRequestError):
            check_title(body)


ASK = Interrupt(id="i1", reason="approval", response_schema={
    "type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}, expires_at="2030-01-01T00:00:00Z")


def _resume(*entries: ResumeEntry) -> RunAgentInput:
    return RunAgentInput(thread_id="t", run_id="r2", messages=[], resume=list(entries))


def test_a_resume_answers_the_open_interrupts_or_says_which_is_wrong() -> None:
    now = 1_800_000_000.0  # 2027
    check_resume([ASK], _resume(ResumeEntry(interrupt_id="i1", status="resolved", payload={"ok": True})), now)
    check_resume([ASK], _resume(ResumeEntry(interrupt_id="i1", status="cancelled")), now)
    check_resume([], RunAgentInput(thread_id="t", run_id="r", messages=[]), now)
    cases = [
        ([ASK], ResumeEntry(interrupt_id="nope", status="resolved"), now, "unknown_interrupt", ""),
        ([ASK], ResumeEntry(interrupt_id="i1", status="resolved", payload={"ok": 1}), now, "invalid_resume_payload",
         "/payload/ok"),
        ([ASK], ResumeEntry(interrupt_id="i1", status="resolved", payload=[]), now, "invalid_resume_payload",
         "/payload"),
        ([ASK], ResumeEntry(interrupt_id="i1", status="cancelled"), 1_900_000_000.0, "interrupt_expired", ""),
    ]
    for open_, entry, at, code, path in cases:
        with pytest.raises(ResumeRejectedError) as info:
            check_resume(open_, _resume(entry), at)
        assert info.value.code == code and info.value.http_status == 422, info.value
        assert info.value.path == path
        assert info.value.to_json()["error"]["interruptId"] == entry.interrupt_id
    odd = msgspec.structs.replace(ASK, expires_at="next tuesday", response_schema={"type": 12})
    check_resume([odd], _resume(ResumeEntry(interrupt_id="i1", status="resolved", payload="x")), now)


def test_open_interrupts_are_those_of_an_interrupt_outcome() -> None:
    from agui_engine.protocol.codec import encode_event
    from agui_engine.protocol.events import RunFinishedEvent, RunFinishedInterruptOutcome

    done = encode_event(RunFinishedEvent(thread_id="t", run_id="r"))
    asked = encode_event(RunFinishedEvent(thread_id="t", run_id="r", outcome=RunFinishedInterruptOutcome(
        interrupts=[ASK])))
    assert open_interrupts([done]) == [] and open_interrupts([]) == []
    assert open_interrupts([done, asked]) == [ASK]
