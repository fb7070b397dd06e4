"""ComponentStream: tambo.component.* events from argument fragments, and the accumulator handler."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.genui.component_stream import (
    BLOCKS_KEY,
    COMPONENT_END,
    COMPONENT_HANDLERS,
    COMPONENT_PROPS_DELTA,
    COMPONENT_START,
    COMPONENT_STATE_DELTA,
    MAX_COMPONENT_ARGS_CHARS,
    ComponentSizeError,
    ComponentStream,
    InteractableUpdateStream,
    apply_status_changes,
    component_blocks,
    find_component,
    implied_statuses,
    seed_interactables,
)
from agui_engine.genui.components import Component, StatusMessages, unstrict_value
from agui_engine.genui.interactables import Interactable
from agui_engine.jsonstream import JSONStreamError
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.errors import LimitExceededError, RemoteInputError, UsageError
from agui_engine.protocol.events import (
    CustomEvent,
    RunErrorEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from tests.hypothesis_profiles import at_most

S = {"type": "string"}


def obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        out["required"] = required
    return out


WEATHER = Component("WeatherCard", "Weather.", obj({"title": S, "count": {"type": "integer"},
                                                    "temperature": {"type": "number"}, "location": S}))
ANY = Component("Any", "", obj({
    "a": {"type": ["string", "number", "boolean", "null"]}, "b": {"type": ["string", "number", "boolean", "null"]},
    "c": {"type": ["string", "number", "boolean", "null"]}, "n": {"type": ["number", "null"]},
    "s": {"type": ["string", "null"]}, "ok": {"type": ["boolean", "null"]}, "x": {"type": ["number", "null"]},
    "a/b": {"type": "integer"}, "c~d": S,
}))


def run(component: Component, chunks: list[str], **kw: Any) -> tuple[list[CustomEvent], ComponentStream]:
    stream = ComponentStream(component, message_id="m1", component_id="c1", **kw)
    events = stream.start()
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.close()
    return events, stream


def brief(events: list[CustomEvent]) -> list[tuple[Any, ...]]:
    """Each event in short; a props delta with its ops and the full per-path status map rebuilt so far."""
    out: list[tuple[Any, ...]] = []
    status: dict[str, str] = {}
    for ev in events:
        if ev.name == COMPONENT_PROPS_DELTA:
            ops = [(o["op"], o["path"], o.get("value")) for o in ev.value["operations"]]
            apply_status_changes(status, implied_statuses(ev.value["operations"]), ev.value.get("statusChanges"))
            out.append(("P", ops, dict(status)))
        elif ev.name == COMPONENT_START:
            out.append(("S",))
        else:
            out.append(("E", ev.value["finalProps"]))
    return out


def pointers(value: Any, base: str = "") -> set[str]:
    """Every RFC 6901 pointer inside ``value`` (the root excluded)."""
    out: set[str] = set()
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        path = base + "/" + str(key).replace("~", "~0").replace("/", "~1")
        out.add(path)
        out |= pointers(child, path)
    return out


def accumulate(events: list[CustomEvent]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for ev in events:
        if ev.name == COMPONENT_PROPS_DELTA:
            doc = jsonpatch.JsonPatchWithAppend(ev.value["operations"]).apply(doc)
    return doc


# --------------------------------------------------------------------------- exact payloads


def test_event_payloads_exact() -> None:
    events, stream = run(WEATHER, ['{"temperature": 72', ', "location": "NYC"}'])
    assert [e.name for e in events] == [COMPONENT_START, COMPONENT_PROPS_DELTA, COMPONENT_END]
    assert events[0].value == {"messageId": "m1", "componentId": "c1", "componentName": "WeatherCard"}
    # 72 might still grow into 721: it appears only when the ',' ends it, already done.
    assert events[1].value == {
        "componentId": "c1",
        "operations": [{"op": "add", "path": "/temperature", "value": 72},
                       {"op": "add", "path": "/location", "value": "NYC"}],
        # both statuses are what the add ops imply (a number is complete when it appears; "NYC"
        # closed in the same feed): only the string's "done" has to travel
        "statusChanges": {"/location": "done"},
    }
    assert events[2].value == {"componentId": "c1", "finalProps": {"temperature": 72, "location": "NYC"}}
    assert stream.final_props == {"temperature": 72, "location": "NYC"}
    assert stream.status == {"/temperature": "done", "/location": "done"}


def test_trace_strings_done_the_moment_they_close() -> None:
    """Peer trace 1 (Q1): there `title` becomes done only when `count` appears and `count` never does."""
    events, _ = run(WEATHER, ['{"ti', 'tle": "He', "llo", '", "count": 1', "2}"])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/title", "He")], {"/title": "started"}),
        ("P", [("append", "/title", "llo")], {"/title": "started"}),
        ("P", [], {"/title": "done"}),  # the closing quote
        ("P", [("add", "/count", 12)], {"/title": "done", "/count": "done"}),
        ("E", {"title": "Hello", "count": 12}),
    ]


def test_trace_strict_rfc6902_mode_resends_the_string() -> None:
    """``append_strings=False``: only standard RFC 6902 ops, the growing string re-sent whole."""
    events, _ = run(WEATHER, ['{"ti', 'tle": "He', "llo", '", "count": 1', "2}"], append_strings=False)
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/title", "He")], {"/title": "started"}),
        ("P", [("replace", "/title", "Hello")], {"/title": "started"}),
        ("P", [], {"/title": "done"}),
        ("P", [("add", "/count", 12)], {"/title": "done", "/count": "done"}),
        ("E", {"title": "Hello", "count": 12}),
    ]
    assert {o["op"] for e in events if e.name == COMPONENT_PROPS_DELTA for o in e.value["operations"]} <= {
        "add", "replace", "remove"}


def test_trace_end_and_start_in_one_chunk_q2() -> None:
    events, _ = run(ANY, ['{"a": "x', 'y", "b": "z', '", "c": 1}'])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/a", "x")], {"/a": "started"}),
        ("P", [("append", "/a", "y"), ("add", "/b", "z")], {"/a": "done", "/b": "started"}),
        ("P", [("add", "/c", 1)], {"/a": "done", "/b": "done", "/c": "done"}),
        ("E", {"a": "xy", "b": "z", "c": 1}),
    ]


def test_trace_numbers_never_removed_q4() -> None:
    events, _ = run(ANY, ['{"a": 1', ".", '5, "b": true}'])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/a", 1.5), ("add", "/b", True)], {"/a": "done", "/b": "done"}),
        ("E", {"a": 1.5, "b": True}),
    ]


def test_trace_literals_only_when_complete_q5() -> None:
    events, _ = run(ANY, ['{"ok": t', "ru", 'e, "x": nu', "ll}"])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/ok", True)], {"/ok": "done"}),
        ("P", [("add", "/x", None)], {"/ok": "done", "/x": "done"}),  # x is nullable: its null is real
        ("E", {"ok": True, "x": None}),
    ]


def test_trace_nested_paths_and_array_appends() -> None:
    comp = Component("List", "", obj({"items": {"type": "array", "items": obj({"id": {"type": "integer"},
                                                                             "name": S}, ["id", "name"])}},
                                     ["items"]))
    events, _ = run(comp, ['{"items": [', '{"id": 1, "name": "A', '"}, {"id"', ": 2}]}"])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/items", [])], {"/items": "started"}),
        ("P", [("add", "/items/0", {}), ("add", "/items/0/id", 1), ("add", "/items/0/name", "A")],
         {"/items": "started", "/items/0": "started", "/items/0/id": "done", "/items/0/name": "started"}),
        # a nested value is done at its own closing token: "A" at its quote, /items/0 at its brace
        ("P", [("add", "/items/1", {})], {"/items": "started", "/items/0": "done", "/items/0/id": "done",
                                          "/items/0/name": "done", "/items/1": "started"}),
        ("P", [("add", "/items/1/id", 2)], {"/items": "done", "/items/0": "done", "/items/0/id": "done",
                                            "/items/0/name": "done", "/items/1": "done", "/items/1/id": "done"}),
        ("E", {"items": [{"id": 1, "name": "A"}, {"id": 2}]}),
    ]


def test_trace_escapes_split_across_chunks() -> None:
    events, _ = run(ANY, ['{"s": "a\\', "n\\u00", 'e9"}'])
    assert accumulate(events) == {"s": "a\né"}
    assert events[-1].value["finalProps"] == {"s": "a\né"}


def test_standard_parameters_never_in_ops_and_become_status_messages() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    events = stream.start()
    events += stream.feed('{"_tambo_statusMessage": "Showing')
    assert stream.status_messages == StatusMessages(status_message="Showing")
    events += stream.feed('", "_tambo_completionStatusMessage": "Shown", "location": "NY')
    assert stream.status_messages == StatusMessages(status_message="Showing", completion_status_message="Shown")
    events += stream.feed('C"}')
    events += stream.close()
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/location", "NY")], {"/location": "started"}),
        ("P", [("append", "/location", "C")], {"/location": "done"}),
        ("E", {"location": "NYC"}),
    ]
    assert "_tambo" not in json.dumps([e.value for e in events])


def test_strict_nulls_held_back_and_defaults_sent() -> None:
    comp = Component("C", "", obj({"title": S, "sub": S, "size": {"type": "integer", "default": 3},
                                   "note": {"type": ["string", "null"]}}, ["title"]))
    events, stream = run(comp, ['{"title": null, "sub": nu', 'll, "size": null, "note": null}'])
    assert brief(events) == [
        ("S",),
        ("P", [("add", "/title", None)], {"/title": "done"}),  # required: the null is the model's answer
        ("P", [("add", "/size", 3), ("add", "/note", None)], {"/title": "done", "/size": "done", "/note": "done"}),
        ("E", {"title": None, "size": 3, "note": None}),
    ]
    assert stream.props == stream.final_props


def test_duplicate_keys_stay_consistent() -> None:
    comp = Component("C", "", obj({"a": {"type": "integer"}, "b": {"type": "integer"}}))
    events, stream = run(comp, ['{"a": 1, "a": null, "b": null, "b": 2}'])
    assert accumulate(events) == stream.final_props == {"b": 2}
    ops = [o for e in events if e.name == COMPONENT_PROPS_DELTA for o in e.value["operations"]]
    assert ops == [{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/a"},
                   {"op": "add", "path": "/b", "value": 2}]


def test_keys_with_slash_and_tilde() -> None:
    events, _ = run(ANY, ['{"a/b": 1, "c~d": "x', 'y"}'])
    assert brief(events)[1:3] == [
        ("P", [("add", "/a~1b", 1), ("add", "/c~0d", "x")], {"/a~1b": "done", "/c~0d": "started"}),
        ("P", [("append", "/c~0d", "y")], {"/a~1b": "done", "/c~0d": "done"}),
    ]


def test_append_strings_mode_is_the_default() -> None:
    events, _ = run(ANY, ['{"s": "ab', "cd", 'e"}'])
    ops = [o for e in events if e.name == COMPONENT_PROPS_DELTA for o in e.value["operations"]]
    assert ops == [{"op": "add", "path": "/s", "value": "ab"}, {"op": "append", "path": "/s", "value": "cd"},
                   {"op": "append", "path": "/s", "value": "e"}]
    assert accumulate(events) == {"s": "abcde"}


# --------------------------------------------------------------------------- edges and errors


@pytest.mark.parametrize("chunks", [[], [""], ["  ", "\n"]])
def test_empty_arguments_are_an_empty_object(chunks: list[str]) -> None:
    events, stream = run(WEATHER, chunks)
    assert brief(events) == [("S",), ("E", {})]
    assert stream.props == {}


def test_start_is_prepended_when_not_called() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    events = stream.feed('{"title": "x"}')
    assert [e.name for e in events] == [COMPONENT_START, COMPONENT_PROPS_DELTA]
    with pytest.raises(UsageError):
        stream.start()
    assert [e.name for e in stream.close()] == [COMPONENT_END]
    assert stream.close() == []
    with pytest.raises(UsageError):
        stream.feed("x")


def test_root_not_an_object_fails_before_any_operation() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    stream.start()
    with pytest.raises(RemoteInputError, match="tool arguments must be a JSON object"):
        stream.feed("[1,2]")
    with pytest.raises(RemoteInputError):  # the stream stays failed
        stream.feed("{}")
    with pytest.raises(RemoteInputError):
        stream.close()


@pytest.mark.parametrize("text", ['{"title": "x"} garbage', '{"title" 1}', '{"title": "x",}'])
def test_malformed_arguments(text: str) -> None:
    with pytest.raises(JSONStreamError) as info:
        run(WEATHER, [text])
    assert info.value.offset > 0


def test_error_offsets_count_leading_whitespace() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    stream.feed("  \n ")
    with pytest.raises(JSONStreamError) as info:
        stream.feed('{"title" 1}')
    assert (info.value.offset, info.value.line) == (13, 2)


def test_truncated_arguments_fail_at_close_and_streamed_ops_stay_valid() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    events = stream.start() + stream.feed('{"title": "He')
    assert accumulate(events) == {"title": "He"} == stream.props
    with pytest.raises(JSONStreamError, match="end of input"):
        stream.close()


def test_size_limit() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1", max_chars=100)
    stream.feed('{"title": "' + "x" * 80)
    with pytest.raises(ComponentSizeError, match=r"WeatherCard \(c1\).*100 characters") as info:
        stream.feed("x" * 30)
    assert isinstance(info.value, LimitExceededError) and info.value.http_status == 413
    with pytest.raises(ComponentSizeError):
        stream.feed("x")
    assert MAX_COMPONENT_ARGS_CHARS == 2 * 1024 * 1024
    big = ComponentStream(WEATHER, message_id="m", component_id="c")
    with pytest.raises(ComponentSizeError):
        big.feed('{"title": "' + "x" * MAX_COMPONENT_ARGS_CHARS)


def test_errors_become_run_errors() -> None:
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    with pytest.raises(RemoteInputError) as info:
        stream.feed('"text"')
    run_error = RunErrorEvent.from_error(info.value)
    assert run_error.message and run_error.code


@pytest.mark.parametrize("kind", ["component", "update"])
@pytest.mark.parametrize("arguments", ["", "  ", '{"componentId": "N-1"}'])
def test_feed_after_close_and_after_an_error_raise_for_both_streams(kind: str, arguments: str) -> None:
    note = Interactable(id="N-1", component_name="Note", props={"title": "t"})

    def make() -> ComponentStream | InteractableUpdateStream:
        if kind == "component":
            return ComponentStream(WEATHER, message_id="m", component_id="c")
        return InteractableUpdateStream(note, "props")

    closed = make()
    closed.feed(arguments)
    closed.close()
    with pytest.raises(UsageError, match="after close"):
        closed.feed("{}")  # even when only whitespace came before (nothing reached the tokenizer's close)
    failed = make()
    with pytest.raises(RemoteInputError) as first:
        failed.feed("[")
    for again in (lambda: failed.feed("{}"), failed.close):
        with pytest.raises(RemoteInputError) as later:
            again()
        assert later.value is first.value  # sticky: the same error every time


def test_constructor_misuse() -> None:
    with pytest.raises(UsageError):
        ComponentStream("WeatherCard", message_id="m", component_id="c")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        ComponentStream(WEATHER, message_id="m", component_id="c", max_chars=0)
    with pytest.raises(UsageError):
        ComponentStream(WEATHER, message_id="m", component_id="c").feed(b"{}")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- property tests

PROPERTY_SCHEMA = obj(
    {
        "title": S,
        "subtitle": S,
        "count": {"type": "integer"},
        "ratio": {"type": "number", "default": 0.5},
        "flag": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": S},
        "items": {"type": "array", "items": obj({"id": {"type": "integer"}, "label": S, "extra": S}, ["id"])},
        "meta": obj({"a": S, "b": {"type": "integer", "default": 7}, "deep": obj({"z": S})}, ["a"]),
        "weird/key~x": S,
        "": {"type": "integer"},
    },
    ["title"],
)
PROPERTY_COMPONENT = Component("Random", "", PROPERTY_SCHEMA)

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
ints = st.integers(min_value=-(10**12), max_value=10**12)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


item = st.fixed_dictionaries({"id": ints}, optional={"label": maybe(text), "extra": maybe(text)})
meta = st.fixed_dictionaries(
    {"a": maybe(text)},
    optional={"b": maybe(ints), "deep": maybe(st.fixed_dictionaries({}, optional={"z": maybe(text)}))},
)
props_docs = st.fixed_dictionaries(
    {"title": maybe(text)},
    optional={
        "_tambo_statusMessage": text,
        "_tambo_completionStatusMessage": text,
        "subtitle": maybe(text),
        "count": maybe(ints),
        "ratio": maybe(floats),
        "flag": maybe(st.booleans()),
        "note": maybe(text),
        "tags": maybe(st.lists(text, max_size=3)),
        "items": maybe(st.lists(item, max_size=3)),
        "meta": maybe(meta),
        "weird/key~x": maybe(text),
        "": maybe(ints),
        "unknown": maybe(text),
    },
)


def _split(data: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


def _check_no_reserved_or_dropped_nulls(props: dict[str, Any]) -> None:
    assert not any(k.startswith("_tambo_") for k in props)
    for key in ("subtitle", "count", "flag", "tags", "items", "meta", "weird/key~x", ""):
        assert props.get(key, 0) is not None, key
    if isinstance(props.get("meta"), dict):
        assert props["meta"].get("deep", 0) is not None
        assert props["meta"].get("b", 0) is not None
    for it in props.get("items") or ():
        assert it.get("label", 0) is not None and it.get("extra", 0) is not None


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=props_docs, cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=12),
       indent=st.sampled_from([None, 1]), ascii_only=st.booleans(), append=st.booleans())
def test_random_props_and_chunkings(doc: dict[str, Any], cuts: list[int], indent: int | None, ascii_only: bool,
                                    append: bool) -> None:
    data = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    stream = ComponentStream(PROPERTY_COMPONENT, message_id="m", component_id="c", append_strings=append)
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    accumulated: dict[str, Any] = {}
    events = stream.start()
    for piece in _split(data, cuts):
        events += stream.feed(piece)
        for ev in events:
            acc.apply(ev)
            if ev.name == COMPONENT_PROPS_DELTA:
                ops = ev.value["operations"]
                assert not any("_tambo_" in op["path"] for op in ops)
                accumulated = jsonpatch.JsonPatchWithAppend(ops).apply(accumulated)
                _check_no_reserved_or_dropped_nulls(accumulated)
                assert set(find_component(acc, "c")["propsStatus"]) == pointers(accumulated)
        events = []
        assert accumulated == stream.props
    for ev in stream.close():
        acc.apply(ev)
        if ev.name == COMPONENT_PROPS_DELTA:
            accumulated = jsonpatch.JsonPatchWithAppend(ev.value["operations"]).apply(accumulated)
            assert set(ev.value.get("statusChanges", {}).values()) <= {"done"}
    expected = unstrict_value({k: v for k, v in json.loads(data).items() if not k.startswith("_tambo_")},
                              PROPERTY_SCHEMA)
    assert accumulated == stream.final_props == expected == PROPERTY_COMPONENT.unstrict_props(json.loads(data))
    assert find_component(acc, "c") == {"type": "component", "id": "c", "name": "Random", "props": expected,
                                         "streamingState": "done",
                                         "propsStatus": dict.fromkeys(pointers(expected), "done")}
    assert acc.problems == []
    assert stream.status_messages == StatusMessages(
        status_message=doc.get("_tambo_statusMessage"),
        completion_status_message=doc.get("_tambo_completionStatusMessage"),
    )


def test_whole_byte_at_a_time_and_random_splits_agree() -> None:
    rng = random.Random(7)
    doc = {"_tambo_statusMessage": "Showing ✓", "title": "Tokyo \"quoted\" \\ é 😀", "count": -12,
           "ratio": 1.25e-3, "flag": False, "note": None, "subtitle": None,
           "items": [{"id": 1, "label": "a", "extra": None}, {"id": 2}], "meta": {"a": "x", "b": None}}
    data = json.dumps(doc)
    splits = [[data], list(data)] + [_split(data, [rng.randrange(len(data)) for _ in range(8)]) for _ in range(20)]
    results = []
    for chunks in splits:
        events, stream = run(PROPERTY_COMPONENT, chunks)
        results.append((accumulate(events), stream.final_props))
    assert all(r == results[0] for r in results)
    assert results[0][0] == results[0][1]


# --------------------------------------------------------------------------- accumulator


def test_accumulator_blocks_on_the_text_message() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    acc.apply(TextMessageStartEvent(message_id="m1", role="assistant"))
    acc.apply(TextMessageContentEvent(message_id="m1", delta="Here it is:"))
    acc.apply(TextMessageEndEvent(message_id="m1"))
    a = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    b = ComponentStream(WEATHER, message_id="m1", component_id="c2")
    acc.apply_all(a.start() + b.start())
    assert [blk["streamingState"] for blk in component_blocks(acc)] == ["started", "started"]
    acc.apply_all(a.feed('{"title": "A'))
    acc.apply_all(b.feed('{"title": "B"}'))
    assert find_component(acc, "c1") == {"type": "component", "id": "c1", "name": "WeatherCard",
                                         "props": {"title": "A"}, "streamingState": "streaming",
                                         "propsStatus": {"/title": "started"}}
    acc.apply_all(a.feed('"}') + a.close() + b.close())
    message = acc.get_message("m1")
    assert message is not None and message["content"] == "Here it is:"
    assert [(blk["id"], blk["props"], blk["streamingState"]) for blk in message[BLOCKS_KEY]] == [
        ("c1", {"title": "A"}, "done"), ("c2", {"title": "B"}, "done")]
    assert acc.messages_as_structs()[0].content == "Here it is:"
    assert acc.problems == []


def test_accumulator_creates_the_message_and_reports_bad_events() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    stream = ComponentStream(WEATHER, message_id="m9", component_id="c9")
    acc.apply_all(stream.start())
    assert acc.get_message("m9") == {"id": "m9", "role": "assistant", BLOCKS_KEY: [
        {"type": "component", "id": "c9", "name": "WeatherCard", "props": {}, "streamingState": "started",
         "propsStatus": {}}]}
    acc.apply(CustomEvent(name=COMPONENT_START, value={"messageId": "m9", "componentId": "c9",
                                                      "componentName": "X"}))
    acc.apply(CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": "nope", "operations": []}))
    acc.apply(CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": "c9",
                                                            "operations": [{"op": "replace", "path": "/x",
                                                                            "value": 1}]}))
    acc.apply(CustomEvent(name=COMPONENT_END, value="bad"))
    acc.apply(CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": "c9", "operations": [],
                                                            "statusChanges": {"/x": "streaming"}}))
    assert [p.kind for p in acc.problems] == ["handler"] * 5
    assert "statusChanges['/x']" in acc.problems[4].message and find_component(acc, "c9")["propsStatus"] == {}
    assert "already started" in acc.problems[0].message and "unknown component" in acc.problems[1].message
    # The end event's finalProps repair what a failed delta left behind.
    acc.apply(CustomEvent(name=COMPONENT_END, value={"componentId": "c9", "finalProps": {"title": "T"}}))
    assert find_component(acc, "c9")["props"] == {"title": "T"}
    assert acc.problems[-1].kind == "component_final_mismatch"


def test_find_component_after_the_message_is_replaced() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    stream = ComponentStream(WEATHER, message_id="m1", component_id="c1")
    acc.apply_all(stream.start())
    assert find_component(acc, "c1") is not None
    acc.add_message({"id": "m1", "role": "assistant", "content": "replaced"})  # what a snapshot does
    assert find_component(acc, "c1") is None
    moved = {"id": "m2", "role": "assistant", "content": "",
             BLOCKS_KEY: [{"type": "component", "id": "c1", "name": "WeatherCard", "props": {"a": 1}}]}
    acc.add_message(moved)
    assert find_component(acc, "c1") is moved[BLOCKS_KEY][0]


def test_interactable_updates_stream_as_shallow_merges() -> None:
    note = Interactable(id="Note-1", component_name="Note", props={"title": "a", "body": "b", "tags": ["x"]},
                        state={"pinned": False, "color": "red"},
                        props_schema=obj({"title": S, "body": S, "tags": {"type": "array", "items": S}},
                                         ["title", "body"]),
                        state_schema=obj({"pinned": {"type": "boolean"}, "color": S}))
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    seed_interactables(acc, [note])
    args = ('{"_tambo_statusMessage": "Renaming", "componentId": "Note-1", '
            '"newProps": {"title": "New title", "body": null, "tags": ["y", "z"]}}')
    update = InteractableUpdateStream(note, "props")
    events = []
    for ch in args:
        events += update.feed(ch)
    events += update.close()
    acc.apply_all(events)
    ops = [o for e in events if e.name == COMPONENT_PROPS_DELTA for o in e.value["operations"]]
    assert all(not o["path"].startswith(("/newProps", "/componentId", "/_tambo")) for o in ops)
    assert update.final == {"title": "New title", "body": "b", "tags": ["y", "z"]}
    assert update.update == {"title": "New title", "tags": ["y", "z"]}
    assert update.status_messages == StatusMessages(status_message="Renaming")
    block = find_component(acc, "Note-1")
    assert block is not None and block["props"] == update.final and block["streamingState"] == "done"
    assert acc.problems == []

    state = InteractableUpdateStream(note, "state")
    events = state.feed('{"componentId": "Note-1", "newState": {"pinned": true, "color": null}}') + state.close()
    assert {e.name for e in events} == {COMPONENT_STATE_DELTA, COMPONENT_END}
    assert events[-1].value == {"componentId": "Note-1", "finalState": {"pinned": True, "color": "red"}}
    acc.apply_all(events)
    assert find_component(acc, "Note-1")["state"] == {"pinned": True, "color": "red"}
    assert acc.problems == []


@settings(max_examples=at_most(100), deadline=None)
@given(update=st.fixed_dictionaries({}, optional={"title": maybe(text), "body": maybe(text),
                                                  "tags": maybe(st.lists(text, max_size=3))}),
       cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=10))
def test_random_interactable_updates(update: dict[str, Any], cuts: list[int]) -> None:
    note = Interactable(id="N-1", component_name="Note", props={"title": "t", "body": "b", "tags": []},
                        props_schema=obj({"title": S, "body": S, "tags": {"type": "array", "items": S}},
                                         ["title", "body", "tags"]))
    data = json.dumps({"_tambo_statusMessage": "s", "componentId": "N-1", "newProps": update})
    stream = InteractableUpdateStream(note, "props")
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    seed_interactables(acc, [note])
    for piece in _split(data, cuts):
        acc.apply_all(stream.feed(piece))
        assert find_component(acc, "N-1")["props"] == {**note.props, **stream.update}
    acc.apply_all(stream.close())
    merged = {**note.props, **{k: v for k, v in update.items() if v is not None}}
    assert stream.final == merged == find_component(acc, "N-1")["props"]
    assert acc.problems == []


def test_interactable_update_of_a_streamed_component_and_errors() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    shown = ComponentStream(WEATHER, message_id="m1", component_id="W-1")
    acc.apply_all(shown.feed('{"title": "Tokyo", "count": 3}') + shown.close())
    note = Interactable(id="W-1", component_name="WeatherCard", props={"title": "Tokyo", "count": 3})
    update = InteractableUpdateStream(note, "props")
    acc.apply_all(update.feed('{"componentId": "W-1", "newProps": {"count": 4}}') + update.close())
    assert find_component(acc, "W-1")["props"] == {"title": "Tokyo", "count": 4}
    bad = InteractableUpdateStream(note, "props")
    with pytest.raises(RemoteInputError):
        bad.feed("[")
    with pytest.raises(UsageError):
        InteractableUpdateStream(note, "other")  # type: ignore[arg-type]
    empty = InteractableUpdateStream(note, "props")
    assert empty.close()[-1].value == {"componentId": "W-1", "finalProps": {"title": "Tokyo", "count": 3}}


def test_events_round_trip_through_the_official_sdk() -> None:
    from ag_ui.core import CustomEvent as SDKCustomEvent

    from agui_engine.protocol.codec import decode_event, encode_event

    events, _ = run(WEATHER, ['{"title": "Tok', 'yo", "count": 3}'])
    for event in events:
        wire = encode_event(event)
        sdk = SDKCustomEvent.model_validate_json(wire)
        assert (sdk.name, sdk.value) == (event.name, event.value)
        assert decode_event(sdk.model_dump_json(by_alias=True, exclude_none=True)) == event


def test_events_match_the_checked_in_schema() -> None:
    import jsonschema

    from agui_engine.protocol.codec import encode_event

    path = Path(__file__).resolve().parents[3] / "spec" / "schema" / "component-events.schema.json"
    validator = jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))
    validator.check_schema(validator.schema)
    events, _ = run(ANY, ['{"_tambo_statusMessage": "x", "a/b": 1, "s": "a', 'b", "n": null}'])
    events += run(ANY, ['{"s": "a', 'b"}'], append_strings=True)[0]
    note = Interactable(id="N", component_name="Note", props={"a": 1})
    update = InteractableUpdateStream(note, "state")
    events += update.feed('{"componentId": "N", "newState": {"x": [1]}}') + update.close()
    for event in events:
        validator.validate(json.loads(encode_event(event)))
    bad = {"type": "CUSTOM", "name": "tambo.component.end", "value": {"componentId": "c",
                                                                     "finalProps": {"_tambo_statusMessage": "x"}}}
    assert not validator.is_valid(bad)


def test_accumulator_appends_in_place_with_the_jsonpatch_result() -> None:
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS)
    start = CustomEvent(name=COMPONENT_START, value={"messageId": "m", "componentId": "c", "componentName": "X"})
    acc.apply(start)
    shared = "sh"
    ops_list = [
        [{"op": "add", "path": "/a~1b", "value": {"s": shared, "l": ["x", "y"]}},
         {"op": "add", "path": "/t", "value": "1"}],
        [{"op": "append", "path": "/a~1b/s", "value": "ared"}, {"op": "append", "path": "/a~1b/l/1", "value": "z"}],
        [{"op": "append", "path": "/t", "value": "2"}, {"op": "append", "path": "/t", "value": "3"}],
    ]
    expected: dict[str, Any] = {}
    for ops in ops_list:
        acc.apply(CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": "c", "operations": ops}))
        expected = jsonpatch.JsonPatchWithAppend(ops).apply(expected)
    block = find_component(acc, "c")
    assert block is not None and block["props"] == expected == {"a/b": {"s": "shared", "l": ["x", "yz"]}, "t": "123"}
    assert shared == "sh" and ops_list[0][0]["value"]["s"] == "sh"  # nothing shared was changed
    assert list(block["props"]) == ["a/b", "t"]  # key order kept
    # appends that do not apply are reported as before, and the props stay usable
    for bad in ({"op": "append", "path": "/missing", "value": "x"},
                {"op": "append", "path": "/a~1b/l", "value": "x"},
                {"op": "append", "path": "/a~1b/l/7", "value": "x"},
                {"op": "append", "path": "/t", "value": 5}):
        acc.apply(CustomEvent(name=COMPONENT_PROPS_DELTA, value={"componentId": "c", "operations": [bad]}))
    assert len(acc.problems) == 4 and all("did not apply" in p.message for p in acc.problems)
    assert block["props"] == expected


def test_importing_the_library_registers_no_accumulator_handler() -> None:
    # A fresh interpreter imports every module of the core and the CLI (validate and render
    # use the component handlers): the Accumulator class is left as it was defined, and an
    # accumulator gets the component handlers only when it is given them.
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import agui_engine
        for info in pkgutil.walk_packages(agui_engine.__path__, "agui_engine."):
            if not info.name.startswith(("agui_engine.adapters", "agui_engine.transports", "agui_engine.__main__")):
                importlib.import_module(info.name)
        from agui_engine import Accumulator, CustomEvent
        registries = [k for k in vars(Accumulator) if k in ("_custom_handlers", "_event_handlers")]
        acc = Accumulator()
        acc.apply(CustomEvent(name="tambo.component.start", value={}))
        print(registries, len(acc.unhandled_custom), Accumulator._has_hooks)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] 1 False"


def test_the_component_handlers_are_read_only() -> None:
    with pytest.raises(TypeError):
        COMPONENT_HANDLERS["tambo.component.start"] = lambda acc, ev: None  # type: ignore[index]
