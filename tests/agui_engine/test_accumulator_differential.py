"""Differential test: random valid threads through the Python Accumulator and the real ``@ag-ui/client``.

A seeded generator writes threads (several runs each: text, reasoning and tool
calls with metadata, chunks in the main lane and in sub-agent lanes including
bare continuations, state patches with every op, activity snapshots and deltas,
messages snapshots, interrupts resumed by runs that finish or fail). All
threads go as NDJSON to ONE ``node tests/js/apply_events.mjs`` process, which
applies them with the client's own ``transformChunks -> verifyEvents ->
defaultApplyEvents``; the final messages, state and pending interrupts must
equal the Accumulator's. The Python Verifier must accept every thread too.

The one documented departure (spec/accumulator.md): the client's
fast-json-patch is not RFC 6902 on some ``move`` patches; the generator only
writes moves on which the two agree, so zero differences are allowed.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonpatch

from agui_engine.accumulator import Accumulator
from agui_engine.codec import decode_event
from agui_engine.verify import Verifier

JS_DIR = Path(__file__).resolve().parents[1] / "js"
#: Threads per run of the test: enough to hit every generator branch many times, a few seconds in all
#: (PARITY_THREADS / PARITY_SEED explore further: 900 threads over seeds 1, 2, 15 gave zero differences).
THREADS = int(__import__("os").environ.get("PARITY_THREADS", "80"))
SEED = int(__import__("os").environ.get("PARITY_SEED", "15"))


class ThreadWriter:
    """Writes one random valid thread as wire-form event dicts."""

    def __init__(self, rng: random.Random, number: int) -> None:
        self.rng = rng
        self.prefix = f"t{number}"
        self.events: list[dict[str, Any]] = []
        self.counter = 0
        self.state: dict[str, Any] = {}
        self.message_ids: list[str] = []
        self.owners: dict[str, str | None] = {}  # message id -> subagentRunId of its author
        self.activity_ids: list[str] = []
        self.pending: list[str] = []

    def new_id(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}{self.counter}"

    def meta(self) -> dict[str, Any]:
        if self.rng.random() < 0.35:
            return {"metadata": {self.rng.choice(["trace", "model", "tokens", "k"]): self.rng.randint(0, 3)}}
        return {}

    def sub(self, subagent: str | None) -> dict[str, Any]:
        return {"subagentRunId": subagent} if subagent is not None else {}

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def thread(self) -> list[dict[str, Any]]:
        for run in range(self.rng.randint(1, 3)):
            self.run(f"r{run}")
        return self.events

    def run(self, run_id: str) -> None:
        started: dict[str, Any] = {"type": "RUN_STARTED", "threadId": self.prefix, "runId": run_id}
        if self.pending or self.rng.random() < 0.3:
            user = {"id": self.new_id("u"), "role": "user", "content": "hello"}
            started["input"] = {
                "threadId": self.prefix, "runId": run_id, "state": {}, "messages": [user], "tools": [],
                "context": [], "forwardedProps": {},
                **({"resume": [{"interruptId": i, "status": "resolved"} for i in self.pending]} if self.pending else {}),
            }
            self.message_ids.append(user["id"])
        self.emit(started)
        for _ in range(self.rng.randint(1, 7)):
            self.rng.choice([self.text, self.text, self.reasoning, self.tool_call, self.chunks, self.subagent,
                             self.state_change, self.state_change, self.activity, self.snapshot, self.misc])(None)
        end = self.rng.random()
        if end < 0.2:
            self.emit({"type": "RUN_ERROR", "message": "failed", **self.meta()})
        elif end < 0.45:
            self.pending = [self.new_id("int") for _ in range(self.rng.randint(1, 2))]
            self.emit({"type": "RUN_FINISHED", "threadId": self.prefix, "runId": run_id,
                       "outcome": {"type": "interrupt", "interrupts": [{"id": i, "reason": "approve"} for i in self.pending]}})
        else:
            self.pending = []
            self.emit({"type": "RUN_FINISHED", "threadId": self.prefix, "runId": run_id})

    # -- segments (each leaves nothing open)

    def text(self, subagent: str | None) -> None:
        mid = self.new_id("m")
        self.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **self.sub(subagent), **self.meta()})
        for _ in range(self.rng.randint(0, 3)):
            self.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": self.rng.choice(["a", "bc", " "]),
                       **self.sub(subagent), **self.meta()})
        self.emit({"type": "TEXT_MESSAGE_END", "messageId": mid, **self.sub(subagent), **self.meta()})
        self.message_ids.append(mid)
        self.owners[mid] = subagent

    def reasoning(self, subagent: str | None) -> None:
        mid = self.new_id("rm")
        self.emit({"type": "REASONING_START", "messageId": mid, **self.sub(subagent)})
        self.emit({"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning", **self.sub(subagent),
                   **self.meta()})
        self.emit({"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": "think", **self.sub(subagent),
                   **self.meta()})
        self.emit({"type": "REASONING_MESSAGE_END", "messageId": mid, **self.sub(subagent), **self.meta()})
        self.emit({"type": "REASONING_END", "messageId": mid, **self.sub(subagent)})

    def tool_call(self, subagent: str | None) -> None:
        cid = self.new_id("c")
        parent: dict[str, Any] = {}
        own = [m for m in self.message_ids if self.owners.get(m) == subagent]
        if own and self.rng.random() < 0.4:
            parent = {"parentMessageId": self.rng.choice(own)}  # a tool call belongs to its message's author
        self.emit({"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "lookup", **parent,
                   **self.sub(subagent), **self.meta()})
        for piece in self.rng.choice([['{"q":', '"x"}'], ["{}"], []]):
            self.emit({"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": piece, **self.sub(subagent), **self.meta()})
        self.emit({"type": "TOOL_CALL_END", "toolCallId": cid, **self.sub(subagent), **self.meta()})
        if self.rng.random() < 0.6:
            rid = self.new_id("tr")
            self.emit({"type": "TOOL_CALL_RESULT", "messageId": rid, "toolCallId": cid, "content": "done",
                       "role": "tool", **self.sub(subagent), **self.meta()})
            self.message_ids.append(rid)

    def chunks(self, subagent: str | None) -> None:
        kind = self.rng.choice(["text", "tool", "reasoning"])
        cid = self.new_id("k")
        first: dict[str, Any]
        if kind == "text":
            first = {"type": "TEXT_MESSAGE_CHUNK", "messageId": cid, "role": "assistant"}
        elif kind == "tool":
            first = {"type": "TOOL_CALL_CHUNK", "toolCallId": cid, "toolCallName": "search"}
        else:
            first = {"type": "REASONING_MESSAGE_CHUNK", "messageId": cid}
        id_key = "toolCallId" if kind == "tool" else "messageId"
        self.emit({**first, "delta": "{" if kind == "tool" else "a", **self.sub(subagent), **self.meta()})
        for _ in range(self.rng.randint(0, 3)):
            form = self.rng.random()
            piece = {"type": first["type"], "delta": "" if kind == "tool" else self.rng.choice(["x", "", "yz"])}
            if form < 0.35:
                piece[id_key] = cid  # names its entity, no subagentRunId: joins the owner's lane
            elif form < 0.7:
                piece.update(self.sub(subagent))  # bare in the main lane, or attributed
            else:
                piece.update({id_key: cid, **self.sub(subagent)})
            self.emit({**piece, **self.meta()})
        if kind == "tool":
            self.emit({"type": first["type"], id_key: cid, "delta": "}", **self.sub(subagent)})
        else:
            self.message_ids.append(cid)
            self.owners[cid] = subagent
        if self.rng.random() < 0.5:
            self.snapshot(subagent)  # closes every chunk lane

    def subagent(self, _: str | None) -> None:
        sid = self.new_id("s")
        self.emit({"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper"})
        for _ in range(self.rng.randint(1, 3)):
            self.rng.choice([self.text, self.chunks, self.chunks, self.tool_call, self.activity, self.reasoning])(sid)
        if self.rng.random() < 0.8:
            self.emit({"type": "SUBAGENT_FINISHED", "subagentRunId": sid})
        else:
            self.emit({"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "sub failed"})

    def state_change(self, _: str | None) -> None:
        rng = self.rng
        if not self.state or rng.random() < 0.15:
            self.state = {"n": rng.randint(0, 9), "items": ["a"], "obj": {"x": 1}}
            self.emit({"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(self.state), **self.meta()})
            return
        keys = sorted(self.state)
        ops: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(keys)
            fresh = f"k{rng.randint(0, 20)}"
            op = rng.choice(["add", "replace", "remove", "test", "copy", "move", "append"])
            if op == "add":
                ops.append({"op": "add", "path": f"/{fresh}", "value": {"v": rng.randint(0, 5)}})
            elif op == "replace":
                ops.append({"op": "replace", "path": f"/{key}", "value": [rng.randint(0, 5)]})
            elif op == "remove" and len(keys) > 1:
                ops.append({"op": "remove", "path": f"/{key}"})
            elif op == "test":
                ops.append({"op": "test", "path": f"/{key}", "value": copy.deepcopy(self.state[key])})
            elif op == "copy" and fresh != key:
                ops.append({"op": "copy", "from": f"/{key}", "path": f"/{fresh}"})
            elif op == "move" and fresh not in self.state and len(keys) > 1:
                ops.append({"op": "move", "from": f"/{key}", "path": f"/{fresh}"})  # RFC and fast-json-patch agree
            elif op == "append" and isinstance(self.state[key], list):
                ops.append({"op": "add", "path": f"/{key}/-", "value": rng.randint(0, 5)})
            else:
                continue
            self.state = jsonpatch.apply_patch(self.state, [ops[-1]])
            keys = sorted(self.state)
        if ops:
            self.emit({"type": "STATE_DELTA", "delta": ops, **self.meta()})

    def activity(self, subagent: str | None) -> None:
        rng = self.rng
        own = [a for a in self.activity_ids if self.owners.get(a) == subagent]
        if own and rng.random() < 0.6:
            aid = rng.choice(own)
            if rng.random() < 0.5:
                self.emit({"type": "ACTIVITY_DELTA", "messageId": aid, "activityType": rng.choice(["PLAN", "SEARCH"]),
                           "patch": [{"op": "add", "path": f"/s{rng.randint(0, 3)}", "value": rng.randint(0, 9)}],
                           **self.sub(subagent), **self.meta()})
                return
            replace: dict[str, Any] = {"replace": rng.choice([True, False])} if rng.random() < 0.5 else {}
        else:
            aid = self.new_id("a")
            self.activity_ids.append(aid)
            self.owners[aid] = subagent
            replace = {}
        self.emit({"type": "ACTIVITY_SNAPSHOT", "messageId": aid, "activityType": rng.choice(["PLAN", "SEARCH"]),
                   "content": {"step": rng.randint(0, 3)}, **replace, **self.sub(subagent), **self.meta()})

    def snapshot(self, _: str | None) -> None:
        rng = self.rng
        kept = [m for m in self.message_ids if rng.random() < 0.5]
        messages: list[dict[str, Any]] = [{"id": m, "role": "user", "content": f"kept {m}"} for m in kept]
        fresh = self.new_id("u")
        messages.append({"id": fresh, "role": "user", "content": "new"})
        self.message_ids = [*kept, fresh]
        self.owners.update(dict.fromkeys(self.message_ids))  # the snapshot's versions carry no subagentRunId
        self.emit({"type": "MESSAGES_SNAPSHOT", "messages": messages})

    def misc(self, _: str | None) -> None:
        self.emit(self.rng.choice([
            {"type": "CUSTOM", "name": "note", "value": {"x": 1}},
            {"type": "RAW", "event": {"any": "thing"}},
            {"type": "STEP_STARTED", "stepName": "plan"},
        ]))
        if self.events[-1]["type"] == "STEP_STARTED":
            self.text(None)
            self.emit({"type": "STEP_FINISHED", "stepName": "plan"})


def python_side(thread: list[dict[str, Any]]) -> dict[str, Any]:
    acc = Accumulator()
    verifier = Verifier(collect=True)
    for wire in thread:
        event = decode_event(json.dumps(wire))
        verifier.feed(event)
        acc.apply(event)
    verifier.close()
    return {
        "messages": acc.messages,
        "state": acc.state,
        "pendingInterrupts": acc.pending_interrupts,
        "violations": [f"{v.rule}@{v.event_index}: {v.message}" for v in verifier.violations],
        "problems": [str(p) for p in acc.problems],
    }


def test_accumulator_equals_the_real_client_on_random_threads() -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (tests/install-deps.sh)"
    assert (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), "run tests/install-deps.sh"
    rng = random.Random(SEED)
    threads = [ThreadWriter(rng, n).thread() for n in range(THREADS)]
    stdin = "".join(json.dumps(thread) + "\n" for thread in threads)
    done = subprocess.run([node, "apply_events.mjs"], cwd=JS_DIR, input=stdin, capture_output=True, text=True,
                          timeout=120, check=True)
    client = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(client) == len(threads)
    differences = []
    for number, (thread, theirs) in enumerate(zip(threads, client, strict=True)):
        ours = python_side(thread)
        assert theirs["error"] is None, (number, theirs["error"], thread)
        assert ours["violations"] == [], (number, ours["violations"], thread)
        for key in ("messages", "state", "pendingInterrupts"):
            if ours[key] != theirs[key]:
                differences.append((number, key, ours[key], theirs[key]))
    events = sum(len(t) for t in threads)
    assert events > 20 * THREADS  # the generator writes real threads, not stubs
    assert differences == [], f"{len(differences)} differences over {THREADS} threads / {events} events: {differences[:3]}"
