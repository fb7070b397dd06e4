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
import subprocess
from pathlib import Path
from typing import Any

import jsonpatch

from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.verify import Verifier
from tests.helpers import node_with

JS_DIR = Path(__file__).resolve().parents[2] / "js"
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
        self.reasoning_ids: set[str] = set()  # the client keeps no owner for these (spec/verifier.md)
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
        attribution = self.sub(subagent)
        if own and self.rng.random() < 0.4:
            parent = {"parentMessageId": self.rng.choice(own)}  # a tool call belongs to its message's author
            if parent["parentMessageId"] not in self.reasoning_ids and self.rng.random() < 0.3:
                attribution = {}  # the START may leave it out: the call inherits its parent's owner
        self.emit({"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "lookup", **parent,
                   **attribution, **self.meta()})
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
            if kind == "reasoning":
                self.reasoning_ids.add(cid)
        if self.rng.random() < 0.5:
            self.snapshot(subagent)  # closes every chunk lane

    def subagent(self, _: str | None) -> None:
        sid = self.new_id("s")
        self.emit({"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper"})
        for _ in range(self.rng.randint(1, 4)):
            self.rng.choice([self.text, self.chunks, self.chunks, self.tool_call, self.tool_call, self.activity,
                             self.reasoning, self.snapshot])(sid)
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

    def snapshot(self, subagent: str | None) -> None:
        rng = self.rng
        # inside a sub-agent, its own messages stay (its later tool calls may name them as parent)
        kept = [m for m in self.message_ids
                if rng.random() < 0.5 or (subagent is not None and self.owners.get(m) == subagent)]
        messages: list[dict[str, Any]] = []
        for m in kept:
            # The snapshot's version is the truth about who owns a message: it may keep a
            # sub-agent's attribution (that sub-agent's later tool calls may name it as their
            # parent) or leave it out (the message then belongs to the run itself).
            owner = self.owners.get(m) if rng.random() < 0.5 else None
            self.owners[m] = owner
            messages.append({"id": m, "role": "user", "content": f"kept {m}", **self.sub(owner)})
        fresh = self.new_id("u")
        messages.append({"id": fresh, "role": "user", "content": "new"})
        self.message_ids = [*kept, fresh]
        self.owners[fresh] = None
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


def run_client(threads: list[list[dict[str, Any]]], *flags: str) -> list[dict[str, Any]]:
    """Each thread through the real client in one node process: {messages, state, pendingInterrupts, error}."""
    node = node_with("@ag-ui/client")
    stdin = "".join(json.dumps(thread) + "\n" for thread in threads)
    done = subprocess.run([node, "apply_events.mjs", *flags], cwd=JS_DIR, input=stdin, capture_output=True,
                          text=True, timeout=120, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_accumulator_equals_the_real_client_on_random_threads() -> None:
    rng = random.Random(SEED)
    threads = [ThreadWriter(rng, n).thread() for n in range(THREADS)]
    client = run_client(threads)
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


# --------------------------------------------------------------------------- a tool call's parent message

RS = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
RF = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def _sub(name: str | None) -> dict[str, Any]:
    return {"subagentRunId": name} if name else {}


def _text(mid: str, sub: str | None = None) -> list[dict[str, Any]]:
    return [{"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **_sub(sub)},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "hi", **_sub(sub)},
            {"type": "TEXT_MESSAGE_END", "messageId": mid, **_sub(sub)}]


def _call(cid: str, parent: str | None, start_sub: str | None, sub: str | None = None) -> list[dict[str, Any]]:
    p = {"parentMessageId": parent} if parent else {}
    return [{"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "lookup", **p, **_sub(start_sub)},
            {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": "{}", **_sub(sub)},
            {"type": "TOOL_CALL_END", "toolCallId": cid, **_sub(sub)}]


def _started(*names: str) -> list[dict[str, Any]]:
    return [{"type": "SUBAGENT_STARTED", "subagentRunId": n, "name": "helper"} for n in names]


def _finished(*names: str) -> list[dict[str, Any]]:
    return [{"type": "SUBAGENT_FINISHED", "subagentRunId": n} for n in names]


def _snap(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"type": "MESSAGES_SNAPSHOT", "messages": list(messages)}


_M = {"id": "m", "role": "assistant", "content": "hi"}
#: name -> (thread, whether the client's verifier refuses it). A sub-agent's TOOL_CALL_START naming a
#: parent message: the owner the client keeps for the message decides (spec/verifier.md).
PARENT_CASES: dict[str, tuple[list[dict[str, Any]], bool]] = {
    "snapshot gives the sub-agent's message to the run": (
        [RS, *_started("s"), *_text("m", "s"), _snap(_M), *_call("c", "m", "s", "s"), *_finished("s"), RF], True),
    "snapshot drops the message: its owner stays": (
        [RS, *_started("s"), *_text("m", "s"), _snap({"id": "u", "role": "user", "content": "x"}),
         *_call("c", "m", "s", "s"), *_finished("s"), RF], False),
    "snapshot keeps the sub-agent's attribution": (
        [RS, *_started("s"), _snap({**_M, "subagentRunId": "s"}), *_call("c", "m", "s", "s"), *_finished("s"), RF],
        False),
    "snapshot message is a user message": (
        [RS, *_started("s"), _snap({"id": "m", "role": "user", "content": "hi"}), *_call("c", "m", "s", "s"),
         *_finished("s"), RF], True),
    "the run's own message": ([RS, *_text("m"), *_started("s"), *_call("c", "m", "s", "s"), *_finished("s"), RF], True),
    "unknown parent": ([RS, *_started("s"), *_call("c", "m", "s", "s"), *_finished("s"), RF], False),
    "no attribution on START: the call inherits the parent's owner": (
        [RS, *_started("s"), _snap({**_M, "subagentRunId": "s"}), *_call("c", "m", None, "s"), *_finished("s"), RF],
        False),
    "inherited owner, another sub-agent on ARGS": (
        [RS, *_started("s", "s2"), _snap({**_M, "subagentRunId": "s"}), *_call("c", "m", None, "s2"),
         *_finished("s", "s2"), RF], True),
    "a tool result belongs to its sender": (
        [RS, *_started("s", "s2"), *_call("c0", None, "s", "s"),
         {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c0", "content": "ok", "subagentRunId": "s"},
         *_call("c", "r", "s2", "s2"), *_finished("s", "s2"), RF], True),
    "a chunk after the snapshot": (
        [RS, *_started("s"), *_text("m", "s"), _snap(_M),
         {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "x", "parentMessageId": "m",
          "subagentRunId": "s", "delta": "{}"}, *_finished("s"), RF], True),
    "the run's input registers its messages": (
        [{**RS, "input": {"threadId": "t", "runId": "r", "state": {}, "messages": [{**_M, "subagentRunId": "s"}],
                          "tools": [], "context": [], "forwardedProps": {}}},
         *_started("s", "s2"), *_call("c", "m", "s2", "s2"), *_finished("s", "s2"), RF], True),
    "the next run forgets the owners": (
        [RS, *_started("s"), *_text("m", "s"), *_finished("s"), RF,
         {**RS, "runId": "r2"}, *_started("s2"), *_call("c", "m", "s2", "s2"), *_finished("s2"),
         {**RF, "runId": "r2"}], False),
    "a reasoning message is not judged": (
        [RS, *_started("s"), {"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "reasoning"},
         {"type": "REASONING_MESSAGE_END", "messageId": "m"}, *_call("c", "m", "s", "s"), *_finished("s"), RF],
        False),
}


def test_a_tool_calls_parent_message_is_judged_as_the_client_judges_it() -> None:
    """The Verifier refuses exactly what the client's verifyEvents refuses; the Accumulator builds
    what the client's applier builds (run without verifyEvents, so refused streams compare too)."""
    threads = [thread for thread, _ in PARENT_CASES.values()]
    verified = run_client(threads)
    applied = run_client(threads, "--no-verify")
    for (name, (thread, refused)), theirs, their_apply in zip(PARENT_CASES.items(), verified, applied, strict=True):
        ours = python_side(thread)
        assert (theirs["error"] is not None) == refused, (name, theirs["error"])
        assert bool(ours["violations"]) == refused, (name, ours["violations"])
        if refused:
            assert any(v.startswith("attribution.") for v in ours["violations"]), (name, ours["violations"])
        assert their_apply["error"] is None and ours["messages"] == their_apply["messages"], name
        assert ours["problems"] == [], (name, ours["problems"])
