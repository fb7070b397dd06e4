"""The generative UI spec: allowlist validation, limits, and partial rendering while it streams."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.components import Component
from agui_engine.errors import LimitExceededError
from agui_engine.events import RunErrorEvent
from agui_engine.genui import (
    MAX_SPEC_DEPTH,
    MAX_SPEC_NODES,
    GenUILimitError,
    GenUISpecError,
    GenUIStream,
    UINode,
    UnknownComponentError,
    genui_spec_schema,
    validate_spec,
    validate_tree,
)
from agui_engine.jsonstream import JSONStreamError

ALLOW = ["Card", "Row", "Chart", "Text"]

DASHBOARD = {
    "root": [
        {
            "component": "Card",
            "key": "summary",
            "props": {"title": "Sales \"Q3\" é"},
            "children": [
                "Revenue is up.",
                {"component": "Row", "children": [{"component": "Chart", "props": {"data": [1, 2, 3]}},
                                                  {"component": "Chart", "key": 7, "props": {"data": []}}]},
                None,
            ],
        },
        "Footer text",
    ]
}


def test_validate_normalises_the_tree() -> None:
    root = validate_spec(DASHBOARD, ALLOW)
    card, footer = root
    assert footer == "Footer text"
    assert isinstance(card, UINode)
    assert (card.component, card.key, card.pointer, card.props) == ("Card", "summary", "/root/0",
                                                                    {"title": 'Sales "Q3" é'})
    text, row = card.children  # the null child renders nothing
    assert text == "Revenue is up."
    assert isinstance(row, UINode) and row.key == "0/1" and row.props == {} and row.done
    assert [(c.key, c.pointer) for c in row.children if isinstance(c, UINode)] == [
        ("0/1/0", "/root/0/children/1/children/0"), ("7", "/root/0/children/1/children/1")]


def test_single_root_node_and_bare_tree() -> None:
    (node,) = validate_spec({"root": {"component": "Text", "props": {"v": 1}}}, ALLOW)
    assert isinstance(node, UINode) and node.key == "0" and node.pointer == "/root"
    assert validate_tree([{"component": "Text"}, "x"], {"Text": object()})[1] == "x"
    assert validate_spec({"root": []}, ALLOW) == ()
    assert validate_spec({"root": None}, ALLOW) == ()


def test_allowlist_from_components() -> None:
    allow = [Component("Card", "", {"type": "object", "properties": {}})]
    assert validate_spec({"root": {"component": "Card"}}, allow)[0].component == "Card"  # type: ignore[union-attr]


def test_unknown_component_names_itself() -> None:
    with pytest.raises(UnknownComponentError) as info:
        validate_spec(DASHBOARD, ["Card", "Row"])
    err = info.value
    assert err.component_name == "Chart" and err.pointer == "/root/0/children/1/children/0"
    assert str(err) == ("component 'Chart' at /root/0/children/1/children/0 is not in the generative UI "
                        "allowlist")
    assert err.http_status == 400 and RunErrorEvent.from_error(err).code == "unknown_component"


def test_fallback_renders_unknown_components() -> None:
    root = validate_spec(DASHBOARD, ["Card", "Row"], fallback="Unknown")
    row = root[0].children[1]  # type: ignore[union-attr]
    chart = row.children[0]
    assert (chart.component, chart.fallback_for, chart.props) == ("Unknown", "Chart", {"data": [1, 2, 3]})


@pytest.mark.parametrize(
    "spec,pointer,message",
    [
        ([], "", "must be an object with 'root'"),
        ({}, "/root", "needs 'root'"),
        ({"root": [{"props": {}}]}, "/root/0", "'component' is missing"),
        ({"root": [{"component": 3}]}, "/root/0/component", "non-empty string"),
        ({"root": [{"component": ""}]}, "/root/0/component", "non-empty string"),
        ({"root": [{"component": "Card", "props": []}]}, "/root/0/props", "must be an object"),
        ({"root": [{"component": "Card", "children": "x"}]}, "/root/0/children", "must be a list"),
        ({"root": [{"component": "Card", "key": {"a": 1}}]}, "/root/0/key", "string or an integer"),
        ({"root": [{"component": "Card", "key": True}]}, "/root/0/key", "string or an integer"),
        ({"root": [1]}, "/root/0", "got a number"),
        ({"root": [{"component": "Card", "key": "a"}, {"component": "Row", "key": "a"}]}, "/root/1/key",
         "duplicate key"),
    ],
)
def test_malformed_specs(spec: Any, pointer: str, message: str) -> None:
    with pytest.raises(GenUISpecError, match=message) as info:
        validate_spec(spec, ALLOW)
    assert info.value.pointer == pointer


def test_depth_and_size_limits() -> None:
    node: Any = {"component": "Card"}
    for _ in range(MAX_SPEC_DEPTH - 1):
        node = {"component": "Card", "children": [node]}
    assert validate_spec({"root": node}, ALLOW)
    with pytest.raises(GenUILimitError, match="MAX_SPEC_DEPTH") as info:
        validate_spec({"root": {"component": "Card", "children": [node]}}, ALLOW)
    assert isinstance(info.value, LimitExceededError)
    assert validate_spec({"root": ["x"] * MAX_SPEC_NODES}, ALLOW)
    with pytest.raises(GenUILimitError, match="MAX_SPEC_NODES"):
        validate_spec({"root": ["x"] * (MAX_SPEC_NODES + 1)}, ALLOW)


# --------------------------------------------------------------------------- streaming


def stream_all(chunks: list[str], allow: list[str] = ALLOW, **kw: Any) -> tuple[list[UINode], GenUIStream]:
    stream = GenUIStream(allow, **kw)
    completed: list[UINode] = []
    for chunk in chunks:
        completed += stream.feed(chunk)
    completed += stream.close()
    return completed, stream


def test_stream_completes_children_before_parents() -> None:
    text = json.dumps(DASHBOARD)
    completed, stream = stream_all(list(text))
    assert [n.pointer for n in completed] == [
        "/root/0/children/1/children/0", "/root/0/children/1/children/1", "/root/0/children/1", "/root/0"]
    assert stream.tree == validate_spec(DASHBOARD, ALLOW)
    assert completed[-1] == stream.tree[0]


def test_stream_results_do_not_depend_on_the_split() -> None:
    text = json.dumps(DASHBOARD, indent=2)
    rng = random.Random(3)
    expected = [n.pointer for n in stream_all([text])[0]]
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(text)), 10))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        completed, stream = stream_all(chunks)
        assert [n.pointer for n in completed] == expected
        assert stream.tree == validate_spec(DASHBOARD, ALLOW)


def test_snapshot_renders_partially() -> None:
    stream = GenUIStream(ALLOW)
    stream.feed('{"root": [{"component": "Ca')
    assert stream.snapshot() == ()  # the name is not complete: held back
    stream.feed('rd", "props": {"title": "Sal')
    (card,) = stream.snapshot()
    assert isinstance(card, UINode)
    assert (card.component, card.done, card.props, card.key) == ("Card", False, {"title": "Sal"}, "0")
    stream.feed('es"}, "children": ["Reven')
    assert stream.snapshot()[0].children == ("Reven",)  # type: ignore[union-attr]
    done = stream.feed('ue", {"component": "Chart", "props": {"data": [1]}}')
    assert [n.pointer for n in done] == ["/root/0/children/1"] and done[0].done
    (card,) = stream.snapshot()
    assert card.children[1].done and not card.done  # type: ignore[union-attr]
    done = stream.feed("]}]}")
    assert [n.pointer for n in done] == ["/root/0"]
    assert stream.snapshot()[0].done  # type: ignore[union-attr]
    assert stream.close() == []


def test_snapshot_holds_back_a_growing_key() -> None:
    stream = GenUIStream(ALLOW)
    stream.feed('{"root": [{"key": "ab')
    assert stream.snapshot() == ()
    stream.feed('c", "component": "Card"')
    assert stream.snapshot()[0].key == "abc"  # type: ignore[union-attr]


def test_stream_fails_fast_on_unknown_component() -> None:
    stream = GenUIStream(["Card"])
    stream.feed('{"root": {"component": "Card", "children": [{"component": "Evil')
    with pytest.raises(UnknownComponentError, match="'Evil'") as info:
        stream.feed('", "props": {')
    assert info.value.pointer == "/root/children/0"
    with pytest.raises(UnknownComponentError):  # the stream stays failed
        stream.feed("}")
    with pytest.raises(UnknownComponentError):
        stream.close()


def test_stream_fallback_and_errors() -> None:
    completed, _ = stream_all([json.dumps({"root": {"component": "Evil"}})], ["Card"], fallback="Box")
    assert completed[0].component == "Box" and completed[0].fallback_for == "Evil"
    with pytest.raises(JSONStreamError):
        stream_all(['{"root": [}'])
    with pytest.raises(GenUISpecError):
        stream_all(['{"root": [{"component": "Card", "props": 3}]}'])


def test_stream_limits() -> None:
    node: Any = {"component": "Card"}
    for _ in range(MAX_SPEC_DEPTH):
        node = {"component": "Card", "children": [node]}
    with pytest.raises(GenUILimitError, match="MAX_SPEC_DEPTH"):
        stream_all([json.dumps({"root": node})])


# --------------------------------------------------------------------------- property

names = st.sampled_from(ALLOW)
leaf_props = st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=6)), max_size=2)
nodes = st.recursive(
    st.one_of(st.text(max_size=8), st.fixed_dictionaries({"component": names}, optional={"props": leaf_props})),
    lambda children: st.fixed_dictionaries(
        {"component": names}, optional={"props": leaf_props, "children": st.lists(children, max_size=3)}
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(root=st.lists(nodes, max_size=3), cuts=st.lists(st.integers(min_value=0, max_value=10**5), max_size=8))
def test_random_trees_stream_like_they_validate(root: list[Any], cuts: list[int]) -> None:
    spec = {"root": root}
    text = json.dumps(spec)
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    stream = GenUIStream(ALLOW)
    completed: list[UINode] = []
    for chunk in chunks:
        completed += stream.feed(chunk)
        for node in stream.snapshot():
            assert not isinstance(node, UINode) or node.component in ALLOW
    completed += stream.close()
    expected = validate_spec(spec, ALLOW)
    assert stream.tree == expected
    assert stream.snapshot() == expected

    def count(items: tuple[Any, ...]) -> int:
        return sum(1 + count(n.children) for n in items if isinstance(n, UINode))

    assert len(completed) == count(expected)
    assert len({n.pointer for n in completed}) == len(completed)


def test_spec_schema_is_current_and_agrees_with_the_validator() -> None:
    import jsonschema

    path = Path(__file__).resolve().parents[2] / "spec" / "schema" / "genui-spec.schema.json"
    assert path.read_text(encoding="utf-8") == json.dumps(genui_spec_schema(), indent=2, ensure_ascii=False) + "\n"
    validator = jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))
    validator.check_schema(validator.schema)
    validator.validate(DASHBOARD)
    assert not validator.is_valid({"root": [{"props": {}}]})
    pinned = jsonschema.Draft202012Validator(genui_spec_schema(ALLOW))
    assert pinned.is_valid(DASHBOARD) and not pinned.is_valid({"root": {"component": "Evil"}})


FLAT = {"root": [{"$type": "Card", "$key": "k", "title": "Hi", "$action": "x",
                  "children": ["t", {"$type": "Chart", "data": [1]}]}]}


def test_flat_node_shape() -> None:
    (card,) = validate_spec(FLAT, ALLOW)
    assert isinstance(card, UINode)
    assert (card.component, card.key, card.props) == ("Card", "k", {"title": "Hi"})
    chart = card.children[1]
    assert isinstance(chart, UINode) and (chart.component, chart.key, chart.props) == ("Chart", "0/1", {"data": [1]})
    with pytest.raises(UnknownComponentError):
        validate_spec({"root": {"$type": "Evil"}}, ALLOW)
    with pytest.raises(GenUISpecError) as info:
        validate_spec({"root": {"$type": 3}}, ALLOW)
    assert info.value.pointer == "/root/$type"
    text = json.dumps(FLAT)
    completed, stream = stream_all(list(text))
    assert [n.pointer for n in completed] == ["/root/0/children/1", "/root/0"]
    assert stream.tree == validate_spec(FLAT, ALLOW)
    partial = GenUIStream(["Card"])
    evil = json.dumps({"root": {"$type": "Evil", "x": "y" * 50}})
    fed = 0
    with pytest.raises(UnknownComponentError):
        for ch in evil:
            fed += 1
            partial.feed(ch)
    assert fed == evil.index('"Evil"') + len('"Evil"')  # at the closing quote, before any prop
