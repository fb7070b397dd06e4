"""agui-engine.js's activities and A2UI user actions in real Node, against the real npm packages.

The activity messages the module's ThreadStore keeps equal, after the same events, the ones the
official ``@ag-ui/client`` 1.0 applier keeps (its ``defaultApplyEvents``, through
``tests/js/apply_events.mjs``): ``a2ui-surface`` activities in the middleware's shape (whole
snapshots, lifecycle replaced in place) and in the engine's streamed shape (``ACTIVITY_DELTA`` per
component), ``replace: false``, a patch that does not apply, a delta for no activity. The user
action it builds is read by the real ``@ag-ui/a2ui-middleware`` 0.0.10 as the user action it is:
its ``processUserAction`` turns it into the ``log_a2ui_event`` call and result the agent reads.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import Event, RunAgentInput, UserMessage
from tests.transports import a2ui_surface_agent

from .test_agui_engine_js import JS, MODULE, NODE_TIMEOUT, node


def agent_events(message: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setattr(a2ui_surface_agent, "PAUSE_SECONDS", 0)

    async def collect() -> list[Event]:
        run = RunAgentInput(thread_id="t", run_id="r1", messages=[UserMessage(id="u1", content=message)])
        return [e async for e in a2ui_surface_agent.agent(run)]

    return [json.loads(encode_event(e)) for e in asyncio.run(collect())]


def in_node(events: list[dict[str, Any]], action: dict[str, Any] | None = None) -> dict[str, Any]:
    done = subprocess.run([node(), str(JS / "a2ui_store.mjs"), str(MODULE)],
                          input=json.dumps({"events": events, "action": action}), capture_output=True, text=True,
                          timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def client_activities(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run([node(), str(JS / "apply_events.mjs")], input=json.dumps(events) + "\n",
                          capture_output=True, text=True, timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["error"] is None, result["error"]
    return [{k: m.get(k) for k in ("id", "role", "activityType", "content")}
            for m in result["messages"] if m["role"] == "activity"]


@pytest.mark.parametrize("message", ["book a table", "book a table (snapshots)", "engine", "retry", "failed", "hostile"])
def test_activities_equal_the_official_clients(message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = agent_events(message, monkeypatch)
    ours = in_node(events)
    assert ours["activities"] == client_activities(events)
    assert ours["findings"] == []
    assert all(m["role"] != "activity" for m in ours["history"])  # never sent back to the agent
    assert len(ours["surfaces"]) == (2 if message == "engine" else 1)
    for surface in ours["surfaces"]:
        if message == "failed":
            assert surface["status"] == "failed" and surface["operations"] is None
        else:
            kinds = [next(k for k in op if k != "version") for op in surface["operations"]]
            assert kinds == ["createSurface", "updateComponents", "updateDataModel"]


def test_replace_false_unknown_and_failing_deltas() -> None:
    def snap(content: dict[str, Any], replace: bool | None = None) -> dict[str, Any]:
        e = {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "a2ui-surface", "content": content}
        return e if replace is None else {**e, "replace": replace}

    delta = {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "a2ui-surface"}
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        snap({"status": "building"}),
        snap({"status": "ignored"}, replace=False),  # kept: replace false on an existing activity
        {**delta, "patch": [{"op": "replace", "path": "/status", "value": "retrying"}]},
        {**delta, "patch": [{"op": "remove", "path": "/nothing"}]},  # does not apply: last good content kept
        {**delta, "messageId": "nobody", "patch": []},  # no such activity
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {**snap({"status": "kept out"}, replace=False), "messageId": "m"},  # a text message stays one
        {**snap({"status": "building"}), "messageId": "m"},  # ... and a replacing snapshot overwrites it
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    ours = in_node(events)
    assert ours["activities"] == client_activities(events)
    assert [a["id"] for a in ours["activities"]] == ["a", "m"]
    assert ours["activities"][0]["content"] == {"status": "retrying"}
    assert ours["findings"] == ["activity_patch", "activity"]


def test_the_middleware_reads_the_user_action_it_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    events = agent_events("book a table", monkeypatch)
    action = {"name": "book_table", "surfaceId": "booking", "sourceComponentId": "submit",
              "timestamp": "2026-12-02T10:00:00.000Z", "context": {"name": "Grace", "guests": "2"}}
    out = in_node(events, action)
    assert out["input"]["forwardedProps"] == {"a2uiAction": {"userAction": action}}
    assert out["input"]["messages"] == out["history"] and out["input"]["threadId"] == "t"
    call, result = out["processed"]
    assert call["role"] == "assistant" and call["toolCalls"][0]["function"]["name"] == "log_a2ui_event"
    assert json.loads(call["toolCalls"][0]["function"]["arguments"]) == action
    assert result == {"id": result["id"], "role": "tool", "toolCallId": call["toolCalls"][0]["id"],
                      "content": 'User performed action "book_table" on surface "booking" (component: submit). '
                                 'Context: {"name":"Grace","guests":"2"}'}
