"""Per-path status of streaming props, sent as changes only (spec/components.md, "Status").

The map a consumer rebuilds from the deltas' ``statusChanges`` -- the Python Accumulator,
the Python Thread client, the shipped JS applier in real Node -- must equal, after every
event, the map a full recompute gives: an independent parse of the argument text seen so
far, taking every pointer present in the props and calling it ``done`` if its value's
closing token (its last character, for a scalar) is in that text, else ``started``.
Random documents (duplicate keys, reserved ``_tambo_*`` keys, nulls a schema drops or
replaces by a default, keys with ``/`` and ``~``) are fed whole, one character at a time
and in random splits, in both string modes.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.genui.component_stream import (
    COMPONENT_END,
    COMPONENT_HANDLERS,
    COMPONENT_PROPS_DELTA,
    PROPS_STATUS_KEY,
    STATUS_CHANGES_KEY,
    ComponentStream,
    InteractableUpdateStream,
    PathStatus,
    apply_status_changes,
    find_component,
    implied_statuses,
)
from agui_engine.genui.components import Component
from agui_engine.genui.interactables import Interactable
from agui_engine.loops.thread import Thread
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import RemoteInputError
from agui_engine.protocol.events import (
    CustomEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui_engine.protocol.pointer import escape_token

from ..static.test_agui_engine_js import JS, MODULE, NODE_TIMEOUT, node
from .test_component_stream import pointers

# --------------------------------------------------------------------------- the reference


class _End(Exception):
    """The text ends inside the value being read."""


_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")


def reference_closed(text: str) -> dict[str, bool]:
    """Full recompute: ``{pointer: closed}`` for every value begun in the JSON prefix ``text``.

    A plain recursive reading of the whole prefix, sharing nothing with the tokenizer. A
    string, object or array begins at its opening token and is closed once its closing
    token is in ``text``; a number or literal exists only once complete (a number also
    needs the character after it, which proves it ended) and is closed from then on. A
    key seen twice starts its value afresh (the old value's paths are gone).
    """
    closed: dict[str, bool] = {}
    pos = 0
    n = len(text)

    def ws() -> None:
        nonlocal pos
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos == n:
            raise _End

    def string() -> str:
        nonlocal pos
        try:
            value, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError:
            raise _End from None
        return str(value)

    def forget(path: str) -> None:
        for stale in [p for p in closed if p == path or p.startswith(path + "/")]:
            del closed[stale]

    def value(path: str) -> None:
        nonlocal pos
        ws()
        c = text[pos]
        if c not in '{["':
            # a number or literal exists only once complete: a number needs the character after it
            m = _SCALAR.match(text, pos)
            if m is None or (c not in "tfn" and (m.end() == n or text[m.end()] not in ",]} \t\r\n")):
                raise _End
            pos = m.end()
            forget(path)
            closed[path] = True
            return
        forget(path)
        closed[path] = False
        if c == '"':
            string()
        else:
            pos += 1
            ws()
            end = "}" if c == "{" else "]"
            index = 0
            if text[pos] == end:
                pos += 1
            else:
                while True:
                    if c == "{":
                        ws()
                        key = string()
                        ws()
                        assert text[pos] == ":"
                        pos += 1
                        value(path + "/" + escape_token(key))
                    else:
                        value(path + "/" + str(index))
                        index += 1
                    ws()
                    pos += 1
                    if text[pos - 1] == end:
                        break
        closed[path] = True

    try:
        value("")
    except _End:
        pass
    closed.pop("", None)
    return closed


def expected_status(text: str, props: dict[str, Any]) -> dict[str, str]:
    """The full map a consumer must hold: every pointer of ``props``, judged on ``text``."""
    closed = reference_closed(text)

    def judged(path: str) -> bool:
        # inside a schema default (the text has a null there): judged as that null
        while path not in closed:
            path = path[: path.rindex("/")]
        return closed[path]

    return {p: "done" if judged(p) else "started" for p in pointers(props)}


# --------------------------------------------------------------------------- random documents

KEYS = ["title", "sub", "size", "items", "meta", "a", "b", "a/b", "~x", "", "_tambo_statusMessage", "z"]
#: Optional, not nullable: a strict null is held back (``sub``) or replaced by the default
#: (``size`` -> 3, ``meta`` -> {"k": [1]}, a whole container in one op).
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "sub": {"type": "string"},
        "size": {"type": "integer", "default": 3},
        "meta": {"type": "object", "default": {"k": [1]}},
    },
    "required": ["title"],
}
COMPONENTS = [Component("Free", "", {"type": "object"}), Component("Typed", "", SCHEMA)]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4).map(lambda v: ("array", v)),
                            st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=4).map(lambda v: ("object", v))),
    max_leaves=16,
)
documents = st.lists(st.tuples(st.sampled_from(KEYS), values), max_size=6)


def dump(value: Any, spaced: bool) -> str:
    """JSON text of a generated value; objects are member lists, so keys may repeat."""
    sep = ", " if spaced else ","
    colon = ": " if spaced else ":"
    if isinstance(value, tuple):
        kind, members = value
        if kind == "array":
            return "[" + sep.join(dump(v, spaced) for v in members) + "]"
        return "{" + sep.join(json.dumps(k) + colon + dump(v, spaced) for k, v in members) + "}"
    return json.dumps(value)


def pieces(text: str, mode: str, rng: random.Random) -> list[str]:
    if mode == "whole":
        return [text]
    if mode == "char":
        return list(text)
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 8)))) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def stream_events(text: str, chunks: list[str], component: Component,
                  append: bool) -> list[tuple[CustomEvent, str]]:
    """(event, argument text fed when it was emitted) for one component call."""
    stream = ComponentStream(component, message_id="m", component_id="c", append_strings=append)
    out = [(e, "") for e in stream.start()]
    fed = ""
    for chunk in chunks:
        fed += chunk
        out += [(e, fed) for e in stream.feed(chunk)]
    out += [(e, fed) for e in stream.close()]
    assert fed == text
    return out


def check_rebuilt(pairs: list[tuple[CustomEvent, str]], rebuilt_after: list[dict[str, str]]) -> None:
    """``rebuilt_after[i]``: a consumer's full map after event ``i``; compared with the reference."""
    props: dict[str, Any] = {}
    for (event, fed), rebuilt in zip(pairs, rebuilt_after, strict=True):
        if event.name == COMPONENT_PROPS_DELTA:
            props = jsonpatch.JsonPatchWithAppend(event.value["operations"]).apply(props)
            assert rebuilt == expected_status(fed, props), (fed, event.value)
        elif event.name == COMPONENT_END:
            assert rebuilt == dict.fromkeys(pointers(event.value["finalProps"]), "done")


def accumulator_maps(events: list[CustomEvent]) -> list[dict[str, str]]:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    out = []
    for event in events:
        acc.apply(event)
        block = find_component(acc, "c")
        out.append(dict(block[PROPS_STATUS_KEY]) if block else {})
    assert acc.problems == []
    return out


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, spaced=st.booleans(), mode=st.sampled_from(["whole", "char", "split"]),
       append=st.booleans(), typed=st.booleans(), seed=st.integers(0, 2**32))
def test_rebuilt_map_equals_the_full_recompute_at_every_step(doc: list[tuple[str, Any]], spaced: bool, mode: str,
                                                             append: bool, typed: bool, seed: int) -> None:
    text = dump(("object", doc), spaced)
    pairs = stream_events(text, pieces(text, mode, random.Random(seed)), COMPONENTS[typed], append)
    check_rebuilt(pairs, accumulator_maps([e for e, _ in pairs]))
    for event, _ in pairs:
        changes = event.value.get(STATUS_CHANGES_KEY) if isinstance(event.value, dict) else None
        assert changes is None or changes, "an empty statusChanges is left out"


# --------------------------------------------------------------------------- exact traces


def test_nested_values_are_done_at_their_own_closing_token() -> None:
    stream = ComponentStream(COMPONENTS[0], message_id="m", component_id="c")
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    sent, maps = [], []
    for chunk in ['{"rows": [{"a": "x', 'y"', "}", ", 2", "]", ', "n": 1', "}"]:
        for event in stream.feed(chunk):
            acc.apply(event)
            if event.name == COMPONENT_PROPS_DELTA:
                sent.append(event.value.get(STATUS_CHANGES_KEY))
                maps.append(dict(find_component(acc, "c")[PROPS_STATUS_KEY]))
    assert sent == [
        None,  # /rows, /rows/0, /rows/0/a are "started": what their add ops imply, so nothing is sent
        {"/rows/0/a": "done"},  # its closing quote
        {"/rows/0": "done"},  # its closing brace
        {"/rows": "done"},  # ``2`` is complete when ``]`` ends it (its add implies done); /rows closes
        None,  # ``1`` is complete when ``}`` proves it: its add implies done
    ]
    assert maps == [
        {"/rows": "started", "/rows/0": "started", "/rows/0/a": "started"},
        {"/rows": "started", "/rows/0": "started", "/rows/0/a": "done"},
        {"/rows": "started", "/rows/0": "done", "/rows/0/a": "done"},
        {"/rows": "done", "/rows/0": "done", "/rows/0/a": "done", "/rows/1": "done"},
        {"/rows": "done", "/rows/0": "done", "/rows/0/a": "done", "/rows/1": "done", "/n": "done"},
    ]


def test_a_duplicate_key_forgets_the_old_subtree() -> None:
    tracker = PathStatus()
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/a", "value": {}}, {"op": "add", "path": "/a/x", "value": []},
                                 {"op": "add", "path": "/a/x/0", "value": 1}]
    assert tracker.observe(ops, {0: "/a", 1: "/a/x"}.get) == {}  # all implied by the ops
    assert tracker.status == {"/a": "started", "/a/x": "started", "/a/x/0": "done"}
    # ``"a": "new`` replaces the whole object while it is still open in the consumer's map
    second = tracker.observe([{"op": "replace", "path": "/a", "value": "new"}], {0: "/a"}.get)
    assert second == {"/a/x": None, "/a/x/0": None}
    assert tracker.status == {"/a": "started"}
    assert tracker.finish() == {"/a": "done"}


def test_a_default_container_arrives_done_with_everything_inside() -> None:
    stream = ComponentStream(COMPONENTS[1], message_id="m", component_id="c")
    _start, delta = stream.feed('{"meta": null')
    assert delta.value["operations"] == [{"op": "add", "path": "/meta", "value": {"k": [1]}}]
    # /meta: done is what a non-empty value implies; what is inside it is not in any op
    assert delta.value[STATUS_CHANGES_KEY] == {"/meta/k": "done", "/meta/k/0": "done"}


def test_apply_status_changes_checks_the_shape_before_changing_anything() -> None:
    status = {"/a": "started"}
    implied = implied_statuses([{"op": "add", "path": "/b", "value": "x"}, {"op": "add", "path": "/c", "value": 1},
                                {"op": "add", "path": "/d", "value": []}, {"op": "append", "path": "/b", "value": "y"},
                                {"op": "add", "path": "/e", "value": {"k": 1}}, {"op": "remove", "path": "/e"}])
    assert implied == [("/b", "started"), ("/c", "done"), ("/d", "started"), ("/e", "done")]
    apply_status_changes(status, implied, {"/a": "done", "/e": None})
    assert status == {"/a": "done", "/b": "started", "/c": "done", "/d": "started"}
    apply_status_changes(status, [], {"/b": None, "/d": "done"})
    assert status == {"/a": "done", "/c": "done", "/d": "done"}
    for bad in ([], {"a": "done"}, {"": "done"}, {"/c": "streaming"}, {"/d": "done", "/e": 1}):
        with pytest.raises(RemoteInputError, match="statusChanges"):
            apply_status_changes(status, [("/z", "done")], bad)
        assert status == {"/a": "done", "/c": "done", "/d": "done"}


def test_the_end_event_marks_whatever_is_left_done() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    start, delta = ComponentStream(COMPONENTS[0], message_id="m", component_id="c").feed('{"t": "unfinished')
    acc.apply_all([start, delta])
    assert find_component(acc, "c")[PROPS_STATUS_KEY] == {"/t": "started"}
    acc.apply(CustomEvent(name=COMPONENT_END, value={"componentId": "c", "finalProps": {"t": "unfinished"}}))
    assert find_component(acc, "c")[PROPS_STATUS_KEY] == {"/t": "done"}


# --------------------------------------------------------------------------- the thread client


class _ComponentAgent:
    """An in-process agent that streams one component call's props in the given chunks."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def run(self, run_input: RunAgentInput) -> AsyncIterator[Event]:
        yield RunStartedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)
        yield TextMessageStartEvent(message_id="m")
        yield TextMessageEndEvent(message_id="m")
        stream = ComponentStream(COMPONENTS[1], message_id="m", component_id="c")
        for chunk in self.chunks:
            for event in stream.feed(chunk):
                yield event
        for event in stream.close():
            yield event
        yield RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)


def test_the_thread_client_rebuilds_the_map_at_every_step() -> None:
    rng = random.Random(7)
    text = dump(("object", [("title", "Groceries"), ("meta", ("object", [("rows", ("array", [1, "two", None]))])),
                            ("size", None), ("_tambo_statusMessage", "Listing"), ("items", ("array", [
                                ("object", [("a", "x"), ("a", ("array", [True]))])]))]), True)
    chunks = pieces(text, "split", rng)
    thread_maps: list[dict[str, str]] = []
    seen: list[CustomEvent] = []

    def on_event(event: Event) -> None:
        if isinstance(event, CustomEvent):
            seen.append(event)
            block = find_component(thread.accumulator, "c")
            thread_maps.append(dict(block[PROPS_STATUS_KEY]) if block else {})

    thread = Thread(_ComponentAgent(chunks), on_event=on_event)
    asyncio.run(thread.send("show it"))
    # the text each event was emitted after, from a second identical stream
    pairs = stream_events(text, chunks, COMPONENTS[1], True)
    assert [e.value for e, _ in pairs] == [e.value for e in seen]
    check_rebuilt(pairs, thread_maps)
    assert set(thread_maps[-1]) >= {"/title", "/meta/rows/2", "/items/0/a/0", "/size"}


# --------------------------------------------------------------------------- the JS applier


def test_the_js_applier_rebuilds_the_map_at_every_step() -> None:
    """Seeded random documents in every feeding mode, applied in one Node process."""
    rng = random.Random(15)
    calls = []
    for number in range(60):
        doc = _random_doc(rng, 3)
        text = dump(("object", doc), rng.random() < 0.5)
        mode = ["whole", "char", "split"][number % 3]
        calls.append(stream_events(text, pieces(text, mode, rng), COMPONENTS[number % 2], rng.random() < 0.7))
    lines = []
    for index, pairs in enumerate(calls):
        for event, _ in pairs:
            wire = json.loads(encode_event(event))
            wire["value"] = {**wire["value"], "componentId": f"c{index}"}
            if "messageId" in wire["value"]:
                wire["value"]["messageId"] = f"m{index}"
            lines.append(wire)
    done = subprocess.run([node(), str(JS / "apply.mjs"), str(MODULE)], input="".join(
        json.dumps(line) + "\n" for line in lines), capture_output=True, text=True, timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    after = [json.loads(line) for line in done.stdout.splitlines()][:-1]
    assert after[-1]["findings"] == []
    cursor = 0
    for index, pairs in enumerate(calls):
        maps = [row["status"].get(f"c{index}", {}) for row in after[cursor: cursor + len(pairs)]]
        cursor += len(pairs)
        check_rebuilt(pairs, maps)


def _random_doc(rng: random.Random, depth: int) -> list[tuple[str, Any]]:
    def value(level: int) -> Any:
        roll = rng.random()
        if level == 0 or roll < 0.5:
            return rng.choice([None, True, False, rng.randint(-999, 999), rng.random() * 100, "", "x~/y",
                               "h\u00e9llo \"q\" " * rng.randint(0, 3)])
        if roll < 0.75:
            return ("array", [value(level - 1) for _ in range(rng.randint(0, 4))])
        return ("object", [(rng.choice(KEYS), value(level - 1)) for _ in range(rng.randint(0, 4))])

    return [(rng.choice(KEYS), value(depth)) for _ in range(rng.randint(0, 6))]


# --------------------------------------------------------------------------- after an interactable update


def test_an_interactable_update_leaves_no_stale_status_in_either_consumer() -> None:
    """A streamed component, then an update that replaces its 4-element list with a 1-element one:
    while the update streams its ops imply statuses; its end leaves exactly the final props' paths."""
    stream = ComponentStream(COMPONENTS[0], message_id="m", component_id="W-1")
    events = stream.start()
    for chunk in ['{"title": "Groceries", "items": [1, 2, ', '3, 4]}']:
        events += stream.feed(chunk)
    events += stream.close()
    note = Interactable(id="W-1", component_name="Free", props=stream.final_props or {})
    update = InteractableUpdateStream(note, "props")
    updates: list[CustomEvent] = []
    for chunk in ['{"componentId": "W-1", "newProps": {"items": [9', ']}}']:
        updates += update.feed(chunk)
    updates += update.close()
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    maps = []
    for event in [*events, *updates]:
        acc.apply(event)
        maps.append(dict(find_component(acc, "W-1")[PROPS_STATUS_KEY]))
    assert acc.problems == []
    final = {"/title": "done", "/items": "done", "/items/0": "done"}
    assert maps[len(events) - 1] == {**final, "/items/1": "done", "/items/2": "done", "/items/3": "done"}
    assert maps[len(events)]["/items"] == "started"  # the update's `add /items []` implies it
    assert maps[-1] == final
    wire = [json.loads(encode_event(e)) for e in [*events, *updates]]
    done = subprocess.run([node(), str(JS / "apply.mjs"), str(MODULE)], input="".join(
        json.dumps(line) + "\n" for line in wire), capture_output=True, text=True, timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    js = [json.loads(line)["status"]["W-1"] for line in done.stdout.splitlines()[:-1]]
    assert js == maps
