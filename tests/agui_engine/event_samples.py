"""Realistic wire samples of every AG-UI 1.0 event and message type, shared by the event and
codec tests.

Each type has a ``full`` sample (every optional field set) and a ``minimal`` one (required
fields only). Values are deliberately awkward: unicode and emoji, escapes, the empty string,
``null`` in free-form values, nested JSON in ``value`` / ``snapshot`` / ``result``.
Samples are wire JSON objects (camelCase), so the same dict builds our Struct and the SDK model.
"""

from __future__ import annotations

from typing import Any

UNICODE = 'Grüße 👋🏽 — "quoted" \\ back\\slash\n\tnew line, CJK 漢字, RTL שלום, \u2028 sep'
NESTED = {
    "ok": True,
    "n": -12.5e-3,
    "big": 9007199254740991,
    "none": None,
    "list": [1, "two", {"three": [3, None, False]}, []],
    "emoji 🎉": {"": "empty key", "a/b~c": "pointer chars"},
}
META = {"ag-ui": {"trace": "t-1"}, "source": "unit-test", "nullable": None}

TEXT_PART = {"type": "text", "text": UNICODE, "id": "part-1", "metadata": {"lang": "de"}}
IMAGE_DATA = {
    "type": "image",
    "id": "img-1",
    "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"},
    "metadata": {"alt": "a tiny png"},
}
AUDIO_URL = {
    "type": "audio",
    "source": {"type": "url", "value": "https://example.com/a.mp3", "mimeType": "audio/mpeg"},
}
AUDIO_DATA_FULL = {
    "type": "audio",
    "id": "aud-1",
    "source": {"type": "data", "value": "UklGRg==", "mimeType": "audio/wav"},
    "metadata": {"transcript": "héllo 👋"},
}
VIDEO_URL_MIN = {"type": "video", "source": {"type": "url", "value": "https://example.com/v"}}
VIDEO_URL_FULL = {
    "type": "video",
    "id": "vid-1",
    "source": {"type": "url", "value": "https://example.com/v.mp4?t=1&q=é", "mimeType": "video/mp4"},
    "metadata": {"durationSeconds": 12.5, "chapters": [{"at": 0, "title": "intro"}]},
}
TEXT_PART_MIN = {"type": "text", "text": ""}
IMAGE_URL_MIN = {"type": "image", "source": {"type": "url", "value": "https://example.com/i.png"}}
DOC_FILE = {
    "type": "document",
    "id": "doc-1",
    "source": {
        "type": "file",
        "value": "file-abc123",
        "provider": "openai",
        "mimeType": "application/pdf",
    },
    "metadata": {"pages": 3, "title": "Q3 «report»"},
}
DOC_FILE_MIN = {"type": "document", "source": {"type": "file", "value": "file-xyz"}}
ALL_PARTS = [
    TEXT_PART, TEXT_PART_MIN, IMAGE_DATA, IMAGE_URL_MIN, AUDIO_URL, AUDIO_DATA_FULL,
    VIDEO_URL_MIN, VIDEO_URL_FULL, DOC_FILE, DOC_FILE_MIN,
]

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Zürich","units":"metric"}'},
    "encryptedValue": "enc-sig==",
    "metadata": {"provider": "anthropic"},
}
TOOL_CALL_MIN = {
    "id": "call_2",
    "type": "function",
    "function": {"name": "noop", "arguments": ""},
}

MESSAGES: dict[str, dict[str, dict[str, Any]]] = {
    "developer": {
        "full": {
            "id": "dev-1",
            "role": "developer",
            "content": "Be terse. 🤐",
            "name": "ops",
            "encryptedValue": "e1",
            "metadata": META,
            "subagentRunId": "sub-1",
        },
        "minimal": {"id": "dev-2", "role": "developer", "content": ""},
    },
    "system": {
        "full": {
            "id": "sys-1",
            "role": "system",
            "content": UNICODE,
            "name": "sys",
            "encryptedValue": "e2",
            "metadata": META,
            "subagentRunId": "sub-1",
        },
        "minimal": {"id": "sys-2", "role": "system", "content": "You are helpful."},
    },
    "assistant": {
        "full": {
            "id": "asst-1",
            "role": "assistant",
            "content": "Let me check ☀️",
            "toolCalls": [TOOL_CALL, TOOL_CALL_MIN],
            "name": "helper",
            "encryptedValue": "e3",
            "metadata": META,
            "subagentRunId": "sub-2",
        },
        "minimal": {"id": "asst-2", "role": "assistant"},
    },
    "user": {
        "full": {
            "id": "user-1",
            "role": "user",
            "content": ALL_PARTS,
            "name": "Zoë",
            "encryptedValue": "e4",
            "metadata": META,
            "subagentRunId": "sub-3",
        },
        "minimal": {"id": "user-2", "role": "user", "content": "What's the weather in 東京?"},
    },
    "tool": {
        "full": {
            "id": "toolmsg-1",
            "role": "tool",
            "content": [TEXT_PART, IMAGE_DATA],
            "toolCallId": "call_1",
            "error": "partial failure: \"timeout\"",
            "encryptedValue": "e5",
            "metadata": META,
            "subagentRunId": "sub-3",
        },
        "minimal": {"id": "toolmsg-2", "role": "tool", "content": "", "toolCallId": "call_2"},
    },
    "activity": {
        "full": {
            "id": "act-1",
            "role": "activity",
            "activityType": "PLAN",
            "content": {"steps": [{"title": "search 🔎", "done": False}], "nested": NESTED},
            "metadata": META,
            "subagentRunId": "sub-4",
        },
        "minimal": {"id": "act-2", "role": "activity", "activityType": "PLAN", "content": {}},
    },
    "reasoning": {
        "full": {
            "id": "rsn-1",
            "role": "reasoning",
            "content": "First, consider… 🤔",
            "encryptedValue": "opaque-blob",
            "metadata": META,
            "subagentRunId": "sub-4",
        },
        "minimal": {"id": "rsn-2", "role": "reasoning", "content": ""},
    },
}

ALL_MESSAGES = [v for pair in MESSAGES.values() for v in pair.values()]

INTERRUPT = {
    "id": "int-1",
    "reason": "approval_required",
    "message": "Approve the transfer of 100 € ?",
    "toolCallId": "call_1",
    "responseSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    "expiresAt": "2026-12-01T00:00:00Z",
    "metadata": META,
    "subagentRunId": "sub-1",
}
INTERRUPT_MIN = {"id": "int-2", "reason": "input_required"}

USAGE = {
    "provider": "openai",
    "model": "gpt-4o",
    "inputTokens": 1200,
    "outputTokens": 340,
    "totalTokens": 1540,
    "reasoningTokens": 100,
    "cachedInputTokens": 1000,
    "cacheWriteInputTokens": 0,
}

RUN_INPUT_FULL = {
    "threadId": "thread-1",
    "runId": "run-1",
    "protocolVersion": "1.0",
    "parentRunId": "run-0",
    "state": NESTED,
    "messages": ALL_MESSAGES,
    "tools": [
        {
            "name": "show_component_WeatherCard",
            "description": "Render a weather card 🌦",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "metadata": {"ui": True},
        },
        {"name": "noop", "description": ""},
    ],
    "context": [{"description": "user locale", "value": "de-CH"}],
    "forwardedProps": {"availableComponents": [], "x": None},
    "resume": [
        {"interruptId": "int-1", "status": "resolved", "payload": {"ok": True}, "metadata": META},
        {"interruptId": "int-2", "status": "cancelled"},
    ],
}
RUN_INPUT_MIN = {"threadId": "thread-2", "runId": "run-2", "messages": []}

BASE_FULL = {"timestamp": 1767225600123, "rawEvent": {"provider": "native", "x": [1, None]}, "metadata": META}
ATTR = {"subagentRunId": "sub-9"}

_PATCH = [
    {"op": "add", "path": "/a", "value": None},
    {"op": "add", "path": "/items/-", "value": {"t": "✓"}},
    {"op": "remove", "path": "/old"},
    {"op": "replace", "path": "/", "value": "empty key"},
    {"op": "move", "from": "/a", "path": "/b~1c"},
    {"op": "copy", "from": "/b~1c", "path": "/d~0e"},
    {"op": "test", "path": "", "value": NESTED},
]


def _ev(kind: str, full: dict[str, Any], minimal: dict[str, Any], *, attributable: bool = True) -> dict[str, dict[str, Any]]:
    extra = {**BASE_FULL, **(ATTR if attributable else {})}
    return {
        "full": {"type": kind, **extra, **full},
        "minimal": {"type": kind, **minimal},
    }


EVENTS: dict[str, dict[str, dict[str, Any]]] = {
    "TEXT_MESSAGE_START": _ev(
        "TEXT_MESSAGE_START", {"messageId": "m1", "role": "user", "name": "Zoë"}, {"messageId": "m1"}
    ),
    "TEXT_MESSAGE_CONTENT": _ev(
        "TEXT_MESSAGE_CONTENT", {"messageId": "m1", "delta": UNICODE}, {"messageId": "m1", "delta": ""}
    ),
    "TEXT_MESSAGE_END": _ev("TEXT_MESSAGE_END", {"messageId": "m1"}, {"messageId": "m1"}),
    "TEXT_MESSAGE_CHUNK": _ev(
        "TEXT_MESSAGE_CHUNK",
        {"messageId": "m2", "role": "assistant", "delta": "chunk 🚀", "name": "bot"},
        {},
    ),
    "TOOL_CALL_START": _ev(
        "TOOL_CALL_START",
        {"toolCallId": "call_1", "toolCallName": "get_weather", "parentMessageId": "m1"},
        {"toolCallId": "call_1", "toolCallName": "get_weather"},
    ),
    "TOOL_CALL_ARGS": _ev(
        "TOOL_CALL_ARGS",
        {"toolCallId": "call_1", "delta": '{"city":"Zür'},
        {"toolCallId": "call_1", "delta": ""},
    ),
    "TOOL_CALL_END": _ev("TOOL_CALL_END", {"toolCallId": "call_1"}, {"toolCallId": "call_1"}),
    "TOOL_CALL_CHUNK": _ev(
        "TOOL_CALL_CHUNK",
        {"toolCallId": "call_3", "toolCallName": "search", "parentMessageId": "m2", "delta": '{"q":"🦀"}'},
        {},
    ),
    "TOOL_CALL_RESULT": _ev(
        "TOOL_CALL_RESULT",
        {"messageId": "tr-1", "toolCallId": "call_1", "content": ALL_PARTS, "role": "tool"},
        {"messageId": "tr-1", "toolCallId": "call_1", "content": '{"temp": 21.5, "unit": "°C"}'},
    ),
    "STATE_SNAPSHOT": _ev("STATE_SNAPSHOT", {"snapshot": NESTED}, {"snapshot": None}),
    "STATE_DELTA": _ev("STATE_DELTA", {"delta": _PATCH}, {"delta": []}),
    "MESSAGES_SNAPSHOT": _ev(
        "MESSAGES_SNAPSHOT", {"messages": ALL_MESSAGES}, {"messages": []}, attributable=False
    ),
    "ACTIVITY_SNAPSHOT": _ev(
        "ACTIVITY_SNAPSHOT",
        {"messageId": "act-1", "activityType": "PLAN", "content": {"plan": NESTED}, "replace": False},
        {"messageId": "act-1", "activityType": "PLAN", "content": {}},
    ),
    "ACTIVITY_DELTA": _ev(
        "ACTIVITY_DELTA",
        {"messageId": "act-1", "activityType": "PLAN", "patch": _PATCH},
        {"messageId": "act-1", "activityType": "PLAN", "patch": []},
    ),
    "RAW": _ev("RAW", {"event": {"type": "content_block_delta", "delta": NESTED}, "source": "anthropic"}, {"event": None}),
    "CUSTOM": _ev("CUSTOM", {"name": "tambo.component.start", "value": NESTED}, {"name": "x", "value": None}),
    "RUN_STARTED": _ev(
        "RUN_STARTED",
        {"threadId": "thread-1", "runId": "run-1", "protocolVersion": "1.0", "parentRunId": "run-0", "input": RUN_INPUT_FULL},
        {"threadId": "thread-1", "runId": "run-1"},
        attributable=False,
    ),
    "RUN_FINISHED": _ev(
        "RUN_FINISHED",
        {
            "threadId": "thread-1",
            "runId": "run-1",
            "result": NESTED,
            "outcome": {"type": "interrupt", "interrupts": [INTERRUPT, INTERRUPT_MIN]},
            "usage": [USAGE, {}],
        },
        {"threadId": "thread-1", "runId": "run-1"},
        attributable=False,
    ),
    "RUN_ERROR": _ev(
        "RUN_ERROR",
        {"message": "Upstream failed: «rate limited» 🚦", "code": "upstream_error", "usage": [USAGE]},
        {"message": ""},
        attributable=False,
    ),
    "STEP_STARTED": _ev("STEP_STARTED", {"stepName": "plan ✍️"}, {"stepName": "s"}),
    "STEP_FINISHED": _ev("STEP_FINISHED", {"stepName": "plan ✍️"}, {"stepName": "s"}),
    "REASONING_START": _ev("REASONING_START", {"messageId": "r1"}, {"messageId": "r1"}),
    "REASONING_MESSAGE_START": _ev(
        "REASONING_MESSAGE_START", {"messageId": "rm1", "role": "reasoning"}, {"messageId": "rm1"}
    ),
    "REASONING_MESSAGE_CONTENT": _ev(
        "REASONING_MESSAGE_CONTENT", {"messageId": "rm1", "delta": "Hmm… 🤔"}, {"messageId": "rm1", "delta": ""}
    ),
    "REASONING_MESSAGE_END": _ev("REASONING_MESSAGE_END", {"messageId": "rm1"}, {"messageId": "rm1"}),
    "REASONING_MESSAGE_CHUNK": _ev(
        "REASONING_MESSAGE_CHUNK", {"messageId": "rm2", "delta": "step 1"}, {}
    ),
    "REASONING_END": _ev("REASONING_END", {"messageId": "r1"}, {"messageId": "r1"}),
    "REASONING_ENCRYPTED_VALUE": _ev(
        "REASONING_ENCRYPTED_VALUE",
        {"subtype": "tool-call", "entityId": "call_1", "encryptedValue": "EqQBCkgIARABGAIiQ=="},
        {"subtype": "message", "entityId": "m1", "encryptedValue": ""},
    ),
    "SUBAGENT_STARTED": _ev(
        "SUBAGENT_STARTED",
        {
            "subagentRunId": "sub-1",
            "name": "researcher 🔬",
            "description": "finds facts",
            "parentSubagentRunId": "sub-0",
            "parentToolCallId": "call_1",
            "parentMessageId": "m1",
        },
        {"subagentRunId": "sub-1", "name": "researcher"},
        attributable=False,
    ),
    "SUBAGENT_FINISHED": _ev(
        "SUBAGENT_FINISHED",
        {"subagentRunId": "sub-1", "result": NESTED, "outcome": {"type": "suspended", "interruptIds": ["int-1"]}},
        {"subagentRunId": "sub-1"},
        attributable=False,
    ),
    "SUBAGENT_ERROR": _ev(
        "SUBAGENT_ERROR",
        {"subagentRunId": "sub-1", "message": "tool crashed 💥", "code": "E_TOOL"},
        {"subagentRunId": "sub-1", "message": "x"},
        attributable=False,
    ),
}

#: Extra variants that exercise the other members of the inner unions.
EXTRA_EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success", "pendingToolCallIds": ["call_1"]}},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}, "result": None},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}, "result": "done ✅"},
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": RUN_INPUT_MIN},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "success"}, "result": [1, 2]},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "suspended"}},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "developer"},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": ""},
    {"type": "STATE_SNAPSHOT", "snapshot": [1, "a", None]},
    {"type": "STATE_SNAPSHOT", "snapshot": 0},
    {"type": "CUSTOM", "name": "n", "value": False},
    {"type": "RAW", "event": "plain string"},
    {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": []},
]

ALL_EVENT_SAMPLES: list[dict[str, Any]] = [
    v for pair in EVENTS.values() for v in pair.values()
] + EXTRA_EVENTS


def sample_id(sample: dict[str, Any]) -> str:
    keys = len(sample)
    return f"{sample.get('type', sample.get('role'))}-{keys}keys"
