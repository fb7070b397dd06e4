"""A CrewAI crew served by ``agui-engine serve --agent crewai:<module>:<name>`` (a real
subprocess, HTTP SSE) and watched by the real ``@ag-ui/client`` 1.0.0 in Node: its agents'
tokens, its tool call and its steps arrive while the crew runs, not when it is done; and a
flow's ``@human_feedback`` pause reaches the client as an interrupt its next run answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.agent_runs import served_client_result

SPEC = "crewai:tests.adapters.test_crewai:live_target"
#: How long before the crew's last task ends its first token must have reached the client.
#: The crew streams ~100 chunks 10 ms apart after its first token (>= 1 s), so a buffered
#: stream (everything at the end) misses this by far, and a live one meets it with room.
EARLY_SECONDS = 0.4


@pytest.mark.timeout(300)  # the server process imports crewai (5-20 s on a loaded machine)
def test_served_crew_streams_live_to_the_real_ag_ui_client() -> None:
    runs = served_client_result(SPEC, "crewai_client.mjs")["runs"]
    crew, asked, resumed = runs
    assert [r["error"] for r in runs] == [None] * 3, "the client's own verifier accepted every run"
    events: list[dict[str, Any]] = crew["events"]
    at: list[float] = crew["at"]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps[0] == "crew:crew" and "agent:forecaster" in steps and "agent:writer" in steps
    [call] = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert call["toolCallName"] == "get_weather"
    [result_event] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result_event["toolCallId"] == call["toolCallId"] and result_event["content"] == "Paris: sunny, 21 C"
    # live: the first token, the tool call and the first task's end reached the client well
    # before the crew's last task ended (a stream buffered until the end would deliver all at once)
    first_token = kinds.index("TEXT_MESSAGE_CONTENT")
    last_task_end = max(i for i, e in enumerate(events)
                        if e["type"] == "STEP_FINISHED" and e["stepName"].startswith("task:"))
    assert at[last_task_end] - at[first_token] >= EARLY_SECONDS * 1000, (at[first_token], at[last_task_end])
    assert at[last_task_end] - at[kinds.index("TOOL_CALL_RESULT")] >= EARLY_SECONDS * 1000
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.endswith("It is sunny in Paris, " + LIVE_WORDS + ".")
    # the review: the flow pauses (an interrupt outcome), the client's resume finishes it with its answer
    (interrupt,) = asked["events"][-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "crewai.human_feedback" and interrupt["message"] == "Publish this draft?"
    resumed_text = "".join(e["delta"] for e in resumed["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert resumed_text == "published 'A post about cats.' with 'ship it'"
    assert "outcome" not in resumed["events"][-1]


LIVE_WORDS = " ".join(["warm"] * 50)
