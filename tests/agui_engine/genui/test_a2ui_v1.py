"""A2UI v1.0 beside v0.9 (issue 34): the version and catalog negotiated from what the client declares,
v1.0's operations streamed component by component as v0.9's are, and v1.0's rules (the reserved
``Surface``, ``allowedParents`` / ``allowedChildren`` with the ``UNALLOWED_*`` codes)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.demo.booking import for_a2ui_version
from agui_engine.genui.a2ui import (
    A2UI_CLIENT_CAPABILITIES_KEY,
    A2UI_SCHEMA_CONTEXT_DESCRIPTION,
    A2UI_V1_VERSION,
    A2UI_VERSION,
    BASIC_CATALOG_ID,
    BASIC_CATALOG_V1_ID,
    A2UICatalog,
    A2UICatalogError,
    A2UISurfaceStream,
    a2ui_negotiate,
    prepare_a2ui_run,
    validate_components,
)
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.events import ActivityDeltaEvent, Context, RunAgentInput
from tests.hypothesis_profiles import at_most

from .a2ui_cases import FORM as FORM_V09
from .a2ui_cases import LIST as LIST_V09
from .a2ui_cases import build_events, call
from .test_a2ui import final_content, fold

V1 = A2UICatalog.basic(A2UI_V1_VERSION)
#: The recorded surfaces as v1.0 allows them (v1.0's basic Text has no h1..h5 variants: Markdown headings).
FORM = for_a2ui_version(FORM_V09, A2UI_V1_VERSION)
LIST = for_a2ui_version(LIST_V09, A2UI_V1_VERSION)
#: A v1.0 catalog with composition rules: a Page only at the top, a Field only inside a Form, a Form
#: holding Fields and Texts only, the surface holding a Page only.
RULES = {
    "catalogId": "https://example.com/rules.json", "protocolVersion": "1.0",
    "components": {
        "Surface": {"allowedChildren": ["Page"]},
        "Page": {"type": "object", "allowedParents": ["Surface"]},
        "Form": {"type": "object", "allowedChildren": ["Field", "Text"]},
        "Field": {"type": "object", "allowedParents": ["Form"]},
        "Text": {"type": "object"},
    },
}


def run_input(*, context: list[Context] | None = None, props: dict[str, Any] | None = None) -> RunAgentInput:
    return RunAgentInput(thread_id="t", run_id="r", messages=[], tools=[], context=context or [], state={},
                         forwarded_props=props or {})


def caps(**versions: list[str]) -> dict[str, Any]:
    return {A2UI_CLIENT_CAPABILITIES_KEY: {v.replace("_", "."): {"supportedCatalogIds": ids}
                                           for v, ids in versions.items()}}


def stream(args: str, pieces: list[str], catalog: A2UICatalog | None = V1) -> tuple[Any, A2UISurfaceStream]:
    """The final activity content of a call fed ``pieces``, and its stream."""
    final, s = final_content(args, pieces, catalog)
    return final, s


# ------------------------------------------------------------------------------------------ negotiation
def test_a_client_that_declares_nothing_gets_v0_9() -> None:
    host = A2UICatalog.basic()
    assert a2ui_negotiate(run_input(), host) is host and host.version == A2UI_VERSION


def test_a_client_that_renders_v1_0_gets_the_v1_0_basic_catalog() -> None:
    host = A2UICatalog.basic()
    chosen = a2ui_negotiate(run_input(props=caps(v1_0=[BASIC_CATALOG_V1_ID], v0_9=[BASIC_CATALOG_ID])), host)
    assert (chosen.catalog_id, chosen.version) == (BASIC_CATALOG_V1_ID, A2UI_V1_VERSION)
    # only v0.9 declared, or a v1.0 catalog the host does not serve: v0.9
    assert a2ui_negotiate(run_input(props=caps(v0_9=[BASIC_CATALOG_ID])), host) is host
    assert a2ui_negotiate(run_input(props=caps(v1_0=["https://elsewhere/c.json"])), host) is host
    # a host with its own catalog keeps it unless the client names it
    own = A2UICatalog("https://example.com/own.json", {"Text": {"type": "object"}})
    assert a2ui_negotiate(run_input(props=caps(v1_0=[BASIC_CATALOG_V1_ID])), own) is own


def test_the_front_ends_catalog_says_its_version() -> None:
    entry = Context(description=A2UI_SCHEMA_CONTEXT_DESCRIPTION, value=json.dumps(RULES))
    chosen = a2ui_negotiate(run_input(context=[entry], props=caps(v0_9=[BASIC_CATALOG_ID])), A2UICatalog.basic())
    assert (chosen.catalog_id, chosen.version) == (RULES["catalogId"], A2UI_V1_VERSION)
    assert "Surface" not in chosen.components and chosen.allowed_children["Surface"] == ["Page"]
    assert json.loads(chosen.context_entry().value)["protocolVersion"] == "1.0"
    v09 = A2UICatalog.from_json({"catalogId": "x", "components": {"Text": {"type": "object"}}})
    assert v09.version == A2UI_VERSION


@pytest.mark.parametrize(("props", "context", "where"), [
    ({A2UI_CLIENT_CAPABILITIES_KEY: ["v1.0"]}, None, "a2uiClientCapabilities must be an object"),
    ({A2UI_CLIENT_CAPABILITIES_KEY: {"v1.0": {"supportedCatalogIds": "basic"}}}, None, "supportedCatalogIds"),
    ({}, {"catalogId": "x", "protocolVersion": "2.0", "components": {}}, "/protocolVersion"),
    ({}, {"catalogId": "x", "protocolVersion": "1.0", "components": {"A": {"allowedParents": "Surface"}}},
     "allowedParents"),
])
def test_malformed_declarations_are_refused_before_the_run(props: dict[str, Any], context: Any, where: str) -> None:
    entries = [Context(description=A2UI_SCHEMA_CONTEXT_DESCRIPTION, value=json.dumps(context))] if context else []
    with pytest.raises(A2UICatalogError, match=where):
        prepare_a2ui_run(run_input(context=entries, props=props), A2UICatalog.basic())


def test_prepare_a2ui_run_streams_v1_0_for_a_v1_0_client() -> None:
    """The loops' shared step: the transformer of a run whose client renders v1.0 writes v1.0."""
    inner, transformer = prepare_a2ui_run(run_input(props=caps(v1_0=[BASIC_CATALOG_V1_ID])), A2UICatalog.basic())
    events = build_events([call("c1", FORM)], lambda text: [text[i:i + 16] for i in range(0, len(text), 16)])
    out: list[Any] = []
    for e in events:
        out += transformer.feed(decode_event(json.dumps(e)))
    out += transformer.close()
    _, final, _ = fold([json.loads(encode_event(e)) for e in out])
    (_, content), = final
    ops = content["a2ui_operations"]
    assert {op["version"] for op in ops} == {"v1.0"}
    assert ops[0]["createSurface"] == {"surfaceId": FORM["surfaceId"], "catalogId": BASIC_CATALOG_V1_ID}
    assert ops[1]["updateComponents"]["components"] == FORM["components"]
    assert sum(isinstance(e, ActivityDeltaEvent) for e in out) >= len(FORM["components"]) - 1  # per component


# ------------------------------------------------------------------------------------------ streaming
@functools.cache
def whole_and_byte_at_a_time(args: str) -> tuple[Any, Any]:
    """The final content of ``args`` fed whole and fed a character at a time (the same for
    every example of one ``args``: computed once)."""
    return stream(args, [args])[0], stream(args, list(args))[0]


@settings(max_examples=at_most(40), deadline=None)
@given(st.sampled_from([json.dumps(FORM), json.dumps(LIST)]),
       st.lists(st.integers(min_value=0, max_value=4000), max_size=30))
def test_v1_0_streams_split_invariant_and_component_by_component(args: str, cuts: list[int]) -> None:
    points = sorted({c % (len(args) + 1) for c in cuts})
    pieces = [args[a:b] for a, b in zip([0, *points], [*points, len(args)], strict=True)]
    final, s = stream(args, pieces)
    whole, by_char = whole_and_byte_at_a_time(args)
    assert final == whole == by_char
    assert s.valid and s.operations is not None
    assert [op["version"] for op in s.operations] == [A2UI_V1_VERSION] * len(s.operations)
    assert s.operations[0]["createSurface"]["catalogId"] == BASIC_CATALOG_V1_ID


def test_v1_0_components_appear_while_the_arguments_stream() -> None:
    args = json.dumps(FORM)
    s = A2UISurfaceStream("c", catalog=V1)
    s.start()
    seen = []
    for i, ch in enumerate(args):
        for e in s.feed(ch):
            if isinstance(e, ActivityDeltaEvent):
                seen.append(i)
    assert len(seen) >= len(FORM["components"]) - 1 and seen[0] < len(args) // 2


# ------------------------------------------------------------------------------------------ v1.0's rules
def test_the_reserved_surface_component_is_refused_in_v1_0_only() -> None:
    comps = [{"id": "root", "component": "Column", "children": ["s"]},
             {"id": "s", "component": "Surface", "child": "t"}, {"id": "t", "component": "Text", "text": "x"}]
    args = json.dumps({"surfaceId": "x", "components": comps})
    final, s = stream(args, list(args))
    assert [p.code for p in s.problems] == ["reserved_component"] and s.problems[0].component_id == "s"
    ((_, content),) = final
    assert content["status"] == "retrying" and content["errors"][0]["code"] == "reserved_component"
    # v1.0's basic catalog refuses a v0.9 heading variant (its Text has caption and body only)
    assert [p.code for p in validate_components(FORM_V09["components"], V1)] == ["invalid_props"]
    # v0.9 has no such rule: the basic catalog has no Surface, so it is an unknown component there
    assert [p.code for p in validate_components(comps, A2UICatalog.basic())] == ["unknown_component"]


def test_composition_rules_give_the_unallowed_codes() -> None:
    rules = A2UICatalog.from_json(RULES)
    good = [{"id": "root", "component": "Page", "child": "f"}, {"id": "f", "component": "Form", "children": ["n", "t"]},
            {"id": "n", "component": "Field"}, {"id": "t", "component": "Text"}]
    assert validate_components(good, rules) == []
    outside = [{"id": "root", "component": "Page", "child": "n"}, {"id": "n", "component": "Field"}]
    (p,) = validate_components(outside, rules)
    assert (p.code, p.component_id) == ("UNALLOWED_PARENT", "n")
    assert p.message == "Component 'n' (Field) cannot be placed under parent 'root' (Page). Allowed parents: ['Form']."
    wrong_child = [{"id": "root", "component": "Page", "child": "f"}, {"id": "f", "component": "Form", "children": ["p"]},
                   {"id": "p", "component": "Page"}]
    codes = {(p.code, p.component_id) for p in validate_components(wrong_child, rules)}
    assert codes == {("UNALLOWED_PARENT", "p"), ("UNALLOWED_CHILD", "f")}
    top = [{"id": "root", "component": "Text"}]
    (p,) = validate_components(top, rules)
    assert p.code == "UNALLOWED_CHILD" and "'Surface' (Surface) cannot contain child 'root' (Text)" in p.message
    # streamed: refused when the array closes, the client told why
    args = json.dumps({"surfaceId": "x", "components": outside})
    _, s = stream(args, [args[i:i + 5] for i in range(0, len(args), 5)], rules)
    assert [p.code for p in s.problems] == ["UNALLOWED_PARENT"]
    assert "UNALLOWED_PARENT" in s.tool_result()[0]
    # the same rules in a v0.9 catalog are not v0.9's: ignored
    v09 = A2UICatalog.from_json({k: v for k, v in RULES.items() if k != "protocolVersion"})
    assert validate_components(outside, v09) == []
