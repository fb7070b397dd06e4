"""The generative UI spec: allowlist validation, limits, and partial rendering while it streams."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_engine.genui.components import Component
from agui_engine.genui.tree import (
    MAX_SPEC_DEPTH,
    MAX_SPEC_NODES,
    GenUILimitError,
    GenUISpecError,
    GenUIStream,
    UINode,
    UnknownComponentError,
    genui_spec_schema,
    tree_document,
    validate_spec,
    validate_tree,
)
from agui_engine.jsonstream import JSONStreamError
from agui_engine.protocol.errors import LimitExceededError
from agui_engine.protocol.events import RunErrorEvent
from tests.hypothesis_profiles import at_most

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
    assert isinstance(row, UINode) and row.key is None and row.id == "0/1" and row.props == {} and row.done
    assert card.id == "0"  # the identity is the index path, whatever the key
    assert [(c.id, c.key, c.pointer) for c in row.children if isinstance(c, UINode)] == [
        ("0/1/0", None, "/root/0/children/1/children/0"), ("0/1/1", "7", "/root/0/children/1/children/1")]


def test_single_root_node_and_bare_tree() -> None:
    (node,) = validate_spec({"root": {"component": "Text", "props": {"v": 1}}}, ALLOW)
    assert isinstance(node, UINode) and node.id == "0" and node.key is None and node.pointer == "/root"
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
    assert (card.component, card.done, card.props, card.id, card.key) == ("Card", False, {"title": "Sal"}, "0", None)
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


def test_a_growing_key_is_not_shown_and_never_changes_the_identity() -> None:
    stream = GenUIStream(ALLOW)
    stream.feed('{"root": [{"key": "ab')
    assert stream.snapshot() == ()  # no name yet
    stream.feed('c", "component": "Card"')
    (card,) = stream.snapshot()
    assert isinstance(card, UINode) and (card.id, card.key) == ("0", "abc")
    late = GenUIStream(ALLOW)
    late.feed('{"root": [{"component": "Card", "props": {"t": 1}, "key": "x')
    (card,) = late.snapshot()
    assert isinstance(card, UINode) and (card.id, card.key, card.props) == ("0", None, {"t": 1})
    late.feed('y"}]}')
    (card,) = late.snapshot()
    assert isinstance(card, UINode) and (card.id, card.key) == ("0", "xy")


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


@settings(max_examples=at_most(100), deadline=None)
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

    path = Path(__file__).resolve().parents[3] / "spec" / "schema" / "genui-spec.schema.json"
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
    assert isinstance(chart, UINode) and (chart.component, chart.id, chart.key, chart.props) == (
        "Chart", "0/1", None, {"data": [1]})
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


# --------------------------------------------------------------------------- the tree document and its operations


def follow_ops(chunks: list[str], allow: list[str] = ALLOW, **kw: Any) -> tuple[list[list[dict[str, Any]]], GenUIStream]:
    """Every chunk's tree operations, checking after each that they build ``stream.document``."""
    stream = GenUIStream(allow, **kw)
    doc: Any = {}
    per_chunk = []
    for chunk in chunks:
        stream.feed(chunk)
        per_chunk.append(stream.tree_ops)
        doc = jsonpatch.JsonPatchWithAppend(stream.tree_ops).apply(doc)
        assert doc == stream.document
    stream.close()
    per_chunk.append(stream.tree_ops)
    doc = jsonpatch.JsonPatchWithAppend(stream.tree_ops).apply(doc)
    assert doc == stream.document == tree_document(stream.tree or ())
    return per_chunk, stream


def assert_identity_is_stable(per_chunk: list[list[dict[str, Any]]]) -> None:
    """Each node is added exactly once, at one path, with its id; nothing is ever moved, removed or
    replaced except a node's ``done`` flag and growing strings (a renderer never remounts a node)."""
    where: dict[str, str] = {}
    for ops in per_chunk:
        for op in ops:
            assert op["op"] in ("add", "append", "replace"), op
            value = op.get("value")
            if op["op"] == "add" and isinstance(value, dict) and "id" in value and "component" in value:
                def walk(node: Any, path: str) -> None:
                    if isinstance(node, dict):
                        assert node["id"] not in where, f"node {node['id']} added twice"
                        where[node["id"]] = path
                        for i, child in enumerate(node["children"]):
                            walk(child, f"{path}/children/{i}")
                walk(value, op["path"])
            if op["op"] == "replace":
                assert op["path"].endswith("/done") and value is True or isinstance(value, str), op


def test_key_after_props_keeps_the_node_where_it_first_appeared() -> None:
    spec = '{"root": [{"component": "Card", "props": {"title": "Hello"}, "children": ["a"], "key": "card-1"}]}'
    for chunks in (list(spec), [spec], [spec[:40], spec[40:70], spec[70:]]):
        per_chunk, stream = follow_ops(chunks)
        ops = [op for chunk_ops in per_chunk for op in chunk_ops]
        node_adds = [op for op in ops if op["op"] == "add" and isinstance(op.get("value"), dict)
                     and "component" in op["value"]]
        assert [(op["path"], op["value"]["id"]) for op in node_adds] == [("/root/0", "0")]
        # every later op of the node stays at /root/0; the key arrives as data, the identity is untouched
        assert all(op["path"] == "/root" or op["path"].startswith("/root/0") for op in ops)
        # shown (at its name, even within one chunk) before its key arrived: the key is added to it, in place
        assert "key" not in node_adds[0]["value"]
        assert {"op": "add", "path": "/root/0/key", "value": "card-1"} in ops
        assert not any(op["op"] in ("remove", "move") for op in ops)
        assert_identity_is_stable(per_chunk)
        (card,) = stream.tree or ()
        assert isinstance(card, UINode) and (card.id, card.key) == ("0", "card-1")
    # byte at a time: the node is shown as soon as its name is complete, long before its key
    stream = GenUIStream(ALLOW)
    for i, ch in enumerate(spec):
        stream.feed(ch)
        if stream.tree_ops and stream.tree_ops[0]["path"] == "/root/0":
            assert spec[: i + 1].endswith('"Card"') and "key" not in stream.tree_ops[0]["value"]
            break
    else:
        raise AssertionError("the node never appeared")


def test_name_after_props_shows_the_node_whole_once_named() -> None:
    spec = ('{"root": {"props": {"title": "T"}, "children": ["x", {"children": ["y"], "component": "Row"}],'
            ' "key": 5, "component": "Card"}}')
    per_chunk, stream = follow_ops(list(spec))
    adds = [op for ops in per_chunk for op in ops if op["op"] == "add" and op["path"] == "/root/0"]
    assert adds == [{"op": "add", "path": "/root/0", "value": {
        "id": "0", "component": "Card", "props": {"title": "T"}, "key": "5", "done": False,
        "children": ["x", {"id": "0/1", "component": "Row", "props": {}, "children": ["y"], "done": True}]}}]
    assert stream.document["root"][0]["done"] is True


def test_nulls_and_flat_nodes_in_the_tree_document() -> None:
    spec = json.dumps({"root": [None, {"$type": "Card", "title": "Hi", "$action": "go", "children": [
        None, "t", {"$type": "Chart", "data": [1, 2], "$key": "c"}]}, "tail"]})
    per_chunk, stream = follow_ops(list(spec))
    assert_identity_is_stable(per_chunk)
    assert stream.document == {"root": [
        {"id": "1", "component": "Card", "props": {"title": "Hi"}, "done": True, "children": [
            "t", {"id": "1/2", "component": "Chart", "props": {"data": [1, 2]}, "key": "c", "done": True,
                  "children": []}]},
        "tail"]}


@pytest.mark.parametrize("spec, pointer", [
    ('{"root": [{"component": "Card", "component": "Row"}]}', "/root/0/component"),
    ('{"root": [{"component": "Card", "props": {}, "props": {}}]}', "/root/0/props"),
    ('{"root": [{"component": "Card", "$type": "Row"}]}', "/root/0"),
    ('{"root": [{"props": {}}, "x"]}', "/root/0"),
    ('{"root": [{"component": "Card", "key": "a"}, {"component": "Card", "key": "a"}]}', "/root/1/key"),
    ('{"root": [], "root": []}', "/root"),
])
def test_stream_refuses_what_a_whole_parser_would_resolve_silently(spec: str, pointer: str) -> None:
    for chunks in (list(spec), [spec]):
        with pytest.raises(GenUISpecError) as info:
            follow_ops(chunks)
        assert info.value.pointer == pointer


def _order(node: Any, rnd: random.Random) -> Any:
    """The same tree with every node's members in a random order (keys may come last)."""
    if not isinstance(node, dict):
        return node
    items = [(k, [_order(c, rnd) for c in v] if k == "children" else v) for k, v in node.items()]
    rnd.shuffle(items)
    return dict(items)


def _keyed(nodes_: list[Any], flags: list[bool]) -> list[Any]:
    out = []
    for i, node in enumerate(nodes_):
        if isinstance(node, dict):
            node = dict(node)
            if flags and flags[i % len(flags)]:
                node["key"] = f"k{i}"
            if "children" in node:
                node["children"] = _keyed(node["children"], flags[1:])
        out.append(node)
    return out


child_nodes = st.recursive(
    st.one_of(st.none(), st.text(max_size=8), st.fixed_dictionaries({"component": names}, optional={"props": leaf_props})),
    lambda children: st.fixed_dictionaries(
        {"component": names}, optional={"props": leaf_props, "children": st.lists(children, max_size=3)}
    ),
    max_leaves=12,
)


@settings(deadline=None)
@given(root=st.lists(child_nodes, max_size=3), flags=st.lists(st.booleans(), max_size=4),
       seed=st.integers(0, 2**16), cuts=st.lists(st.integers(min_value=0, max_value=10**5), max_size=8))
def test_random_trees_build_the_same_document_for_any_split(root: list[Any], flags: list[bool], seed: int,
                                                            cuts: list[int]) -> None:
    spec = {"root": [_order(n, random.Random(seed)) for n in _keyed(root, flags)]}
    text = json.dumps(spec)
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    per_chunk, stream = follow_ops(chunks)
    per_byte, by_byte = follow_ops(list(text))
    whole, at_once = follow_ops([text])
    expected = tree_document(validate_spec(spec, ALLOW))
    assert stream.document == by_byte.document == at_once.document == expected
    assert stream.tree == by_byte.tree == at_once.tree == validate_spec(spec, ALLOW)
    assert_identity_is_stable(per_chunk)
    assert_identity_is_stable(per_byte)
