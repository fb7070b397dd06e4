"""A2UI surfaces: the differential against the official @ag-ui/a2ui-middleware 0.0.10 under node (every
recorded stream, whole / one character at a time / random splits), split invariance (hypothesis),
validation and refusals, the tool and its guide, user actions."""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.a2ui import (
    A2UI_ACTIVITY_TYPE,
    A2UI_SCHEMA_CONTEXT_DESCRIPTION,
    A2UI_TOOL,
    BASIC_CATALOG_ID,
    MAX_A2UI_ATTEMPTS,
    MAX_A2UI_COMPONENTS,
    MAX_A2UI_DEPTH,
    A2UIActionError,
    A2UICatalog,
    A2UICatalogError,
    A2UISurfaceStream,
    A2UITransformer,
    a2ui_context,
    a2ui_guide,
    a2ui_user_action,
    render_a2ui_tool,
    validate_components,
)
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.events import Context, RunAgentInput
from tests.helpers import node_with
from tests.hypothesis_profiles import at_most

from .a2ui_cases import DEVIATING, FORM, INVALID, LIST, STREAMS, build_events, call

JS_DIR = Path(__file__).resolve().parents[2] / "js"
SEED = 23
INPUT = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], "state": {}}
_BASIC = A2UICatalog.basic()
MIDDLEWARE_CONFIG = {"schema": {"catalogId": _BASIC.catalog_id, "components": _BASIC.components}}


def whole(text: str) -> list[str]:
    return [text]


def chars(text: str) -> list[str]:
    return list(text)


def sixteen(text: str) -> list[str]:
    return [text[i:i + 16] for i in range(0, len(text), 16)]


def random_split(seed: int) -> Callable[[str], list[str]]:
    def split(text: str) -> list[str]:
        rnd = random.Random(seed * 7919 + len(text))
        cuts = sorted(rnd.sample(range(1, len(text)), min(len(text) - 1, rnd.randint(1, max(1, len(text) // 5)))))
        return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return split


SPLITS: dict[str, Callable[[str], list[str]]] = {"whole": whole, "chars": chars, "sixteen": sixteen,
                                                 **{f"random{s}": random_split(s) for s in range(3)}}


def middleware(cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The official middleware's output for each case, in one node process."""
    node = node_with("@ag-ui/a2ui-middleware")
    done = subprocess.run([node, "a2ui_middleware.mjs"], cwd=JS_DIR, input=json.dumps({"cases": cases}),
                          capture_output=True, text=True, timeout=300, check=True)
    results = json.loads(done.stdout)["results"]
    for r in results:
        assert r["error"] is None, r["error"]
    return [r["events"] for r in results]


def ours(events: list[dict[str, Any]], run_input: dict[str, Any] = INPUT, **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("catalog", _BASIC)
    t = A2UITransformer(msgspec.convert(run_input, RunAgentInput), **kw)
    out = []
    for e in events:
        out += t.feed(decode_event(json.dumps(e)))
    out += t.close()
    return [json.loads(encode_event(e)) for e in out]


def fold(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``(other events, final activity content per message id in first-seen order, every state)``;
    the message ids of tool results the middleware mints are normalised."""
    inner_results = set()
    others: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    states: list[tuple[str, Any]] = []
    for e in events:
        if e["type"] == "ACTIVITY_SNAPSHOT":
            assert e["activityType"] == A2UI_ACTIVITY_TYPE and e.get("replace", True) is True
            state[e["messageId"]] = copy.deepcopy(e["content"])
        elif e["type"] == "ACTIVITY_DELTA":
            assert e["activityType"] == A2UI_ACTIVITY_TYPE
            assert all(op["op"] == "add" for op in e["patch"])  # RFC 6902, nothing the client must undo
            state[e["messageId"]] = jsonpatch.apply_patch(state[e["messageId"]], e["patch"])
        else:
            e = dict(e)
            if e["type"] == "TOOL_CALL_RESULT":
                if e["messageId"].startswith("res-"):
                    inner_results.add(e["messageId"])
                else:
                    e["messageId"] = "<minted>"
            others.append(e)
            continue
        states.append((e["messageId"], copy.deepcopy(state[e["messageId"]])))
    return others, list(state.items()), states


def check_shapes(states: list[tuple[str, Any]]) -> None:
    """Every intermediate state has a shape the middleware sends: a lifecycle status, or operations;
    while a surface is painted its component list only grows (nothing is re-sent or moved)."""
    last: dict[str, list[Any]] = {}
    for mid, content in states:
        if "status" in content:
            assert content["status"] in ("building", "retrying", "failed")
            assert set(content) <= {"status", "progressTokens", "attempt", "maxAttempts", "errors", "error",
                                    "attempts"}
            last.pop(mid, None)
            continue
        ops = content["a2ui_operations"]
        assert all(op["version"] == "v0.9" and len(op) == 2 for op in ops)
        if len(ops) > 1 and "updateComponents" in ops[1]:
            now = ops[1]["updateComponents"]["components"]
            before = last.get(mid, [])
            assert now[:len(before)] == before or now == before[:len(now)]
            last[mid] = now


def refusal_as_rendered(others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our refusals read as the middleware's ``{"status":"rendered"}`` (the one documented difference
    on a refused call: the model is told what to fix)."""
    out = []
    for e in others:
        if e["type"] == "TOOL_CALL_RESULT" and e["content"].startswith("Error: the A2UI surface was not shown"):
            e = {**e, "content": '{"status":"rendered"}'}
        out.append(e)
    return out


@pytest.fixture(scope="module")
def oracle() -> dict[tuple[str, str], list[dict[str, Any]]]:
    keys = [(name, split) for name in STREAMS for split in SPLITS]
    cases = [{"input": INPUT, "config": MIDDLEWARE_CONFIG, "events": build_events(STREAMS[n], SPLITS[s])}
             for n, s in keys]
    return dict(zip(keys, middleware(cases), strict=True))


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("name", list(STREAMS))
def test_the_final_state_is_the_middlewares(oracle: dict[Any, Any], name: str, split: str) -> None:
    events = build_events(STREAMS[name], SPLITS[split])
    theirs_others, theirs_final, theirs_states = fold(oracle[(name, split)])
    our_others, our_final, our_states = fold(ours(events))
    assert refusal_as_rendered(our_others) == theirs_others
    assert our_final == theirs_final
    check_shapes(our_states)
    check_shapes(theirs_states)


def test_the_surface_is_on_the_wire_before_the_arguments_end(oracle: dict[Any, Any]) -> None:
    """While the middleware shows nothing until the component array closes, a component of ours is
    drawn the moment its object closes: the first painted state comes after the first component."""
    events = build_events(STREAMS["list_template"], chars)
    args = json.dumps(LIST)
    first_close = args.index("}")  # our activity event comes just before the fragment that caused it
    seen = 0
    for e in ours(events):
        if e["type"] == "TOOL_CALL_ARGS":
            seen += len(e["delta"])
        if e["type"] == "ACTIVITY_SNAPSHOT" and "a2ui_operations" in e["content"]:
            break
    assert seen == first_close
    theirs_seen = 0
    for e in oracle[("list_template", "chars")]:
        if e["type"] == "TOOL_CALL_ARGS":
            theirs_seen += len(e["delta"])
        if e["type"] == "ACTIVITY_SNAPSHOT" and "a2ui_operations" in e["content"]:
            break
    assert theirs_seen == args.index("}]", args.index('"components"')) + 1 > seen


@pytest.mark.parametrize("name", list(DEVIATING))
def test_what_the_middleware_leaves_stuck_is_refused(name: str) -> None:
    """Input where the middleware shows ``building`` forever (or paints props its catalog refuses):
    ours replaces the activity with ``retrying`` and tells the model what is wrong."""
    events = build_events([call("c", DEVIATING[name])], sixteen)
    [theirs] = middleware([{"input": INPUT, "config": MIDDLEWARE_CONFIG, "events": events}])
    _, their_final, _ = fold(theirs)
    others, final, _ = fold(ours(events))
    if name == "invalid_props":
        assert "a2ui_operations" in their_final[0][1]
    else:
        assert their_final == [("a2ui-surface-c", {"status": "building"})] or their_final[0][1]["status"] == "building"
    assert final[0][1]["status"] == "retrying" and final[0][1]["errors"]
    [result] = [e for e in others if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"].startswith("Error: the A2UI surface was not shown")


def final_content(args: str, pieces: list[str], catalog: A2UICatalog | None = _BASIC) -> Any:
    s = A2UISurfaceStream("c", catalog=catalog)
    events: list[Any] = [s.start()]
    for p in pieces:
        events += s.feed(p)
    events += s.close()
    _, final, _ = fold([json.loads(encode_event(e)) for e in events])
    return final, s


ALL_ARGS = [c["args"] for stream in STREAMS.values() for c in stream if c["name"] == A2UI_TOOL] + list(DEVIATING.values())


@settings(max_examples=at_most(60), deadline=None)
@given(st.sampled_from(ALL_ARGS), st.lists(st.integers(min_value=0, max_value=4000), max_size=30))
def test_any_split_gives_the_same_surface(args: str, cuts: list[int]) -> None:
    points = sorted({c % (len(args) + 1) for c in cuts})
    pieces = [args[a:b] for a, b in zip([0, *points], [*points, len(args)], strict=True)]
    assert final_content(args, pieces)[0] == final_content(args, [args])[0]


def test_every_component_is_sent_once() -> None:
    """Bytes on the wire grow with the arguments, not with their square: each component and data
    member is sent once however finely the arguments are cut."""
    args = json.dumps(LIST)
    s = A2UISurfaceStream("c", catalog=_BASIC)
    events: list[Any] = [s.start()]
    for ch in args:
        events += s.feed(ch)
    events += s.close()
    wire = sum(len(encode_event(e)) for e in events)
    assert wire < 12 * len(args.encode())
    assert s.operations is not None and s.operations[1]["updateComponents"]["components"] == LIST["components"]
    assert s.operations[2]["updateDataModel"]["value"] == LIST["data"]


def test_a_refused_component_stops_the_surface_at_once() -> None:
    """An unknown component refuses the call when its object closes, before the array ends; the
    tool result names the code, the toolkit path, the component id and the JSON pointer."""
    args = json.dumps(INVALID["unknown_component"])
    s = A2UISurfaceStream("c", catalog=_BASIC)
    cut = args.index('"value"')
    early = s.feed(args[:cut + 20])
    assert early[-1].content["status"] == "retrying"  # type: ignore[union-attr]
    assert early[-1].content["attempt"] == 2 and early[-1].content["maxAttempts"] == MAX_A2UI_ATTEMPTS  # type: ignore[union-attr]
    assert s.feed(args[cut + 20:]) == [] and s.close() == []
    content, error = s.tool_result()
    assert error is not None
    assert '[unknown_component] components[1].component (component id "m") at /components/1/component' in content


def test_bad_input_is_refused_with_a_reason() -> None:
    # arguments that stop mid-component
    final, s = final_content("", ['{"surfaceId":"s","components":[{"id":"root","comp'])
    assert s.problems[0].code == "invalid_arguments" and final[0][1]["status"] == "retrying"
    # 10,000 components
    many = {"surfaceId": "s", "components": [{"id": "root", "component": "Column", "children": []}] +
            [{"id": f"t{i}", "component": "Text", "text": "x"} for i in range(10_000)]}
    _, s = final_content("", [json.dumps(many)])
    assert [p.code for p in s.problems] == ["too_many_components"] and MAX_A2UI_COMPONENTS < 10_000
    # a child tree deeper than the limit
    deep = [{"id": "root", "component": "Card", "child": "n0"}] + [
        {"id": f"n{i}", "component": "Card", "child": f"n{i + 1}"} for i in range(MAX_A2UI_DEPTH + 1)] + [
        {"id": f"n{MAX_A2UI_DEPTH + 1}", "component": "Divider"}]
    assert [p.code for p in validate_components(deep, _BASIC)] == ["too_deep"]
    # JSON nesting past the tokenizer's limit for this tool
    _, s = final_content("", ['{"surfaceId":"s","components":[{"id":"root","x":' + "[" * 100])
    assert s.problems[0].code == "too_large"
    # not an object
    _, s = final_content("", ["[1,2]"])
    assert s.problems[0].code == "invalid_arguments"
    # a catalog the host does not have
    _, s = final_content("", [json.dumps({"catalogId": "https://evil.example/cat.json", **FORM})])
    assert [p.code for p in s.problems] == ["unknown_catalog"]
    _, s = final_content("", [json.dumps({"catalogId": "basic", **FORM})])
    assert s.valid and s.resolved_catalog_id == BASIC_CATALOG_ID


def test_props_are_checked_against_the_catalog_schema() -> None:
    problems = validate_components([{"id": "root", "component": "Column", "children": ["t"]},
                                    {"id": "t", "component": "Text", "text": 42}], _BASIC)
    assert [(p.code, p.path, p.component_id, p.pointer) for p in problems] == [
        ("invalid_props", "components[1].text", "t", "/components/1/text")]
    assert validate_components(FORM["components"], _BASIC) == []
    assert validate_components(INVALID["unknown_component"]["components"]) == []  # no catalog: structure only


def test_the_tool_and_the_guide_are_the_middlewares() -> None:
    node = shutil.which("node")
    assert node is not None
    script = ("import * as m from '@ag-ui/a2ui-middleware';"
              "process.stdout.write(JSON.stringify({tool: m.RENDER_A2UI_TOOL, guide: m.RENDER_A2UI_TOOL_GUIDELINES("
              "'render_a2ui'), desc: m.A2UI_SCHEMA_CONTEXT_DESCRIPTION}))")
    done = subprocess.run([node, "--input-type=module", "-e", script], cwd=JS_DIR, capture_output=True, text=True,
                          timeout=60, check=True)
    theirs = json.loads(done.stdout)
    tool = render_a2ui_tool()
    assert {"name": tool.name, "description": tool.description, "parameters": tool.parameters} == theirs["tool"]
    assert a2ui_guide() == theirs["guide"]
    assert A2UI_SCHEMA_CONTEXT_DESCRIPTION == theirs["desc"]
    entries = a2ui_context(_BASIC)
    assert entries[0].description == A2UI_SCHEMA_CONTEXT_DESCRIPTION
    assert entries[1].description == "A2UI render tool usage guide \u2014 how to call render_a2ui with valid arguments."


def test_the_catalog_comes_from_the_context() -> None:
    custom = {"catalogId": "https://example.com/cat.json", "components": {"Badge": {"type": "object",
                                                                                    "required": ["label"]}}}
    ctx = [Context(description="other", value="x"),
           Context(description=A2UI_SCHEMA_CONTEXT_DESCRIPTION, value=json.dumps(custom))]
    catalog = A2UICatalog.from_context(ctx)
    assert catalog is not None and catalog.catalog_id == "https://example.com/cat.json"
    assert [p.code for p in validate_components([{"id": "root", "component": "Badge"}], catalog)] == [
        "missing_required_prop"]
    assert A2UICatalog.from_context([]) is None
    with pytest.raises(A2UICatalogError, match="catalogId"):
        A2UICatalog.from_json({"components": {}})
    with pytest.raises(A2UICatalogError, match="not JSON"):
        A2UICatalog.from_context([Context(description=A2UI_SCHEMA_CONTEXT_DESCRIPTION, value="{")])
    # the surface carries the front end's catalog id, as the middleware's does
    run_input = {**INPUT, "context": [{"description": A2UI_SCHEMA_CONTEXT_DESCRIPTION, "value": json.dumps(custom)}]}
    events = build_events([call("c", {"surfaceId": "s", "components": [{"id": "root", "component": "Badge",
                                                                         "label": "x"}]})], whole)
    [theirs] = middleware([{"input": run_input, "events": events}])
    assert fold(ours(events, run_input, catalog=catalog))[1] == fold(theirs)[1]
    assert fold(theirs)[1][0][1]["a2ui_operations"][0]["createSurface"]["catalogId"] == custom["catalogId"]
    assert BASIC_CATALOG_ID == _BASIC.catalog_id


def test_a_user_action_becomes_a_log_event_call_and_result() -> None:
    action = {"name": "book", "surfaceId": "booking-form", "sourceComponentId": "submit",
              "context": {"name": "Ada", "guests": 2}}
    run_input = msgspec.convert({**INPUT, "forwardedProps": {"a2uiAction": {"userAction": action}}}, RunAgentInput)
    n = iter(range(100))
    out = a2ui_user_action(run_input, ids=lambda: f"id{next(n)}")
    call_msg, result = out.messages[-2:]
    assert call_msg.tool_calls[0].function.name == "log_a2ui_event"  # type: ignore[union-attr]
    assert json.loads(call_msg.tool_calls[0].function.arguments) == action  # type: ignore[union-attr]
    assert result.content == ('User performed action "book" on surface "booking-form" (component: submit). '  # type: ignore[union-attr]
                              'Context: {"name":"Ada","guests":2}')
    assert a2ui_user_action(msgspec.convert(INPUT, RunAgentInput)).messages == []
    with pytest.raises(A2UIActionError, match="never rendered"):
        a2ui_user_action(run_input, known_surfaces={"other"})
    bad = msgspec.convert({**INPUT, "forwardedProps": {"a2uiAction": {"userAction": [1]}}}, RunAgentInput)
    with pytest.raises(A2UIActionError, match="must be an object"):
        a2ui_user_action(bad)
