r"""Property tests: any JSON value, any formatting, any chunking.

Documents come two ways: ``json.dumps`` of any value (wide, deep, unicode,
big and small numbers) with its formatting options, and a serialiser of our
own (:class:`_Writer`) that writes any formatting JSON allows: whitespace runs
of `` \t\n\r`` between any tokens, every character escaped or not at random
(``\uXXXX`` in either case, surrogate pairs for astral characters, the short
escapes, ``\/``), numbers in every form (``-0``, 300-digit integers,
``1E+2``, ``5e-324``, ``1e-999``) and objects with duplicate keys. Each is fed
in random pieces (str or bytes, cut anywhere, including inside escapes,
surrogate pairs, UTF-8 sequences, numbers and literals), and after EVERY feed:

* the ops applied with ``jsonpatch`` (``JsonPatchWithAppend`` in append mode)
  equal ``value``; at the end they equal ``json.loads``;
* a feed never sends two ops for one path in default mode (except at a
  duplicated key, where the member is replaced);
* every scalar, once shown, equals its final value; every string shown is a
  prefix of its final value;
* statuses only move forward (None -> started -> streaming -> done).

Duplicate keys (spec/jsonstream.md §3): the last one wins, as in
``json.loads``, and a duplicate key starts a new value at its path. So for a
path that occurs more than once, "final value" means the value of the
occurrence being shown, and the path (with everything below it) may go back
to ``started`` exactly in the feed where a later occurrence's value begins.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.jsonstream import PatchStream
from agui_engine.protocol.pointer import escape_token
from tests.hypothesis_profiles import at_most

from .test_jsonstream import outcome

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text without lone surrogates (not valid Unicode text); includes astral
# characters, which ensure_ascii turns into surrogate-pair escapes.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
    max_leaves=30,
)
# Deep values: nesting well beyond what the random recursion reaches.
DEEP = st.integers(min_value=1, max_value=60).flatmap(
    lambda depth: SCALARS.map(lambda leaf: _nest(leaf, depth))
)


def _nest(leaf: Any, depth: int) -> Any:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf, "": [1]}
    return leaf


@st.composite
def documents(draw: st.DrawFn, values: st.SearchStrategy[Any] = VALUES) -> tuple[Any, str]:
    value = draw(values)
    indent = draw(st.sampled_from([None, 0, 2, "\t"]))
    separators = draw(st.sampled_from([None, (",", ":"), (" , ", " : ")]))
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), indent=indent, separators=separators)
    return value, text


@st.composite
def chunkings(draw: st.DrawFn, data: str | bytes) -> list[Any]:
    cuts = sorted(draw(st.sets(st.integers(min_value=1, max_value=max(1, len(data) - 1)), max_size=40)))
    bounds = [0, *[c for c in cuts if c < len(data)], len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _resolve(doc: Any, pointer: str) -> Any:
    if pointer == "":
        return doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def _pointers(doc: Any, prefix: str = "") -> list[str]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, item in doc.items():
            out += _pointers(item, prefix + "/" + escape_token(key))
    elif isinstance(doc, list):
        for index, item in enumerate(doc):
            out += _pointers(item, f"{prefix}/{index}")
    return out


_RANK = {None: 0, "started": 1, "streaming": 2, "done": 3}


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, with int and float told apart (``1`` is not ``1.0``)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _check_stream(
    text: str,
    chunks: list[Any],
    append: bool,
    versions: dict[str, list[Any]] | None = None,
    restarts: list[tuple[int, int, str]] = (),  # type: ignore[assignment]
) -> None:
    """Feed ``chunks`` (of ``text``) and check every property after every feed.

    ``versions`` maps each pointer to the values it takes in the document, one
    per occurrence (more than one only at or below a duplicated key); by default
    each pointer's value in ``json.loads(text)``. ``restarts`` lists where (in
    units of the chunks: characters or bytes) a later occurrence's value begins and
    where it ends, as ``(start, end, pointer)``: the feed that contains ``start`` may
    move the pointer and everything below it back to ``started`` (or ``None``). For a
    number or literal the window runs on to the feed that contains ``end`` (or the
    close): such a value is written only once the character after it ends it.
    """
    final = json.loads(text)
    if versions is None:
        versions = {p: [_resolve(final, p)] for p in _pointers(final)}
    final_pointers = _pointers(final)
    duplicated = {p for _, _, p in restarts}
    whole: Any = b"".join(chunks) if chunks and isinstance(chunks[0], bytes) else "".join(chunks)
    windows = [
        (start, end if whole[start : start + 1] not in ("{", "[", '"', b"{", b"[", b'"') else start, p)
        for start, end, p in restarts
    ]
    stream = PatchStream(append_strings=append)
    patch_cls = jsonpatch.JsonPatchWithAppend if append else jsonpatch.JsonPatch
    doc: Any = None
    shown: dict[str, str] = {}
    ranks = dict.fromkeys(versions, 0)
    position = 0
    for index in range(len(chunks) + 1):
        ops = stream.feed(chunks[index]) if index < len(chunks) else stream.close()
        begin, position = position, position + (len(chunks[index]) if index < len(chunks) else 0)
        closing = index == len(chunks)
        restarted = [p for start, last, p in windows if begin <= last and (start < position or closing)]
        if not append:
            paths = [op["path"] for op in ops if not any(_under(op["path"], d) for d in duplicated)]
            assert len(paths) == len(set(paths)), ops
        for op in ops:
            path, value = op["path"], op["value"]
            seen = versions[path]
            if op["op"] == "append":
                shown[path] += value
                assert any(isinstance(v, str) and v.startswith(shown[path]) for v in seen), (path, shown[path])
            elif isinstance(value, str):
                shown[path] = value
                assert any(isinstance(v, str) and v.startswith(value) for v in seen), (path, value)
            elif isinstance(value, (dict, list)):
                assert value in ({}, []) and any(type(v) is type(value) for v in seen), (path, value)
            else:
                assert any(_same(value, v) for v in seen), (path, value, seen)
        if ops:
            doc = patch_cls(ops).apply(doc, in_place=True)
        assert doc == stream.value
        for pointer in versions:
            rank = _RANK[stream.status_of(pointer)]
            if rank < ranks[pointer]:
                assert any(_under(pointer, p) for p in restarted), (pointer, stream.status_of(pointer))
            ranks[pointer] = rank
    assert stream.done
    assert _same(doc, final) and _same(stream.value, final)
    assert all(ranks[p] == 3 for p in final_pointers)


def _under(pointer: str, ancestor: str) -> bool:
    return pointer == ancestor or pointer.startswith(ancestor + "/")


# --------------------------------------------------------------------------- any formatting
_WS = " \t\n\r"
_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

# A node: ("object", [(key, node), ...]) (keys may repeat), ("array", [node, ...]),
# ("string", text) or ("token", number or literal text).
KEYS = st.sampled_from(["a", "b", "", "a/b", "~1", "é"]) | TEXT
DIGITS = st.text("0123456789", min_size=1, max_size=300)
INTEGERS = st.integers(min_value=-(10**20), max_value=10**20).map(str) | DIGITS.map(
    lambda d: d.lstrip("0") or "0"
) | st.just("-0")
REALS = st.builds(
    lambda sign, whole, frac, exp: sign + whole + frac + exp,
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "9"]) | st.integers(min_value=1, max_value=10**17).map(str),
    st.sampled_from([""]) | st.text("0123456789", min_size=1, max_size=20).map(lambda d: "." + d),
    st.sampled_from([""])
    | st.builds(
        lambda e, sign, value: e + sign + value,
        st.sampled_from(["e", "E"]),
        st.sampled_from(["", "+", "-"]),
        st.integers(min_value=0, max_value=999).map(str) | st.just("0008"),
    ),
).filter(lambda text: math.isfinite(float(text)))  # overflow is rejected by design (spec)
# The edges: subnormal, underflow to 0.0, the largest double, the smallest normal one.
EDGE_NUMBERS = st.sampled_from(
    ["5e-324", "1e-999", "-1E-400", "1.7976931348623157e308", "2.2250738585072014E-308", "-0.0", "0e0", "1E+2"]
)
TOKENS = INTEGERS | REALS | EDGE_NUMBERS | st.sampled_from(["true", "false", "null"])
NODES = st.recursive(
    st.tuples(st.just("token"), TOKENS) | st.tuples(st.just("string"), TEXT),
    lambda children: st.tuples(st.just("array"), st.lists(children, max_size=4))
    | st.tuples(st.just("object"), st.lists(st.tuples(KEYS, children), max_size=4)),
    max_leaves=25,
)


class _Writer:
    """Serialise a node with random formatting; record where each value begins and ends."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.out: list[str] = []
        self.pos = 0
        self.occurrences: list[tuple[str, int, int]] = []  # (pointer, start, end)

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.pos += len(text)

    def ws(self) -> None:
        if self.rng.random() < 0.4:
            self.emit("".join(self.rng.choice(_WS) for _ in range(self.rng.randint(1, 3))))

    def string(self, text: str) -> None:
        rng = self.rng
        out = ['"']
        for c in text:
            code = ord(c)
            choice = rng.random()
            if c in _SHORT and choice < 0.5:
                out.append(_SHORT[c])
            elif choice < 0.3 or code < 0x20 or c in '"\\':
                if code > 0xFFFF:
                    code -= 0x10000
                    hexes = [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
                else:
                    hexes = [code]
                for h in hexes:
                    out.append(f"\\u{h:04x}" if rng.random() < 0.5 else f"\\u{h:04X}")
            else:
                out.append(c)
        out.append('"')
        self.emit("".join(out))

    def value(self, node: tuple[str, Any], pointer: str) -> None:
        start = self.pos
        kind, body = node
        if kind == "token":
            self.emit(body)
        elif kind == "string":
            self.string(body)
        else:
            close = "}" if kind == "object" else "]"
            self.emit("{" if kind == "object" else "[")
            self.ws()
            for index, item in enumerate(body):
                if index:
                    self.emit(",")
                    self.ws()
                if kind == "object":
                    key, item = item
                    self.string(key)
                    self.ws()
                    self.emit(":")
                    self.ws()
                    self.value(item, pointer + "/" + escape_token(key))
                else:
                    self.value(item, f"{pointer}/{index}")
                self.ws()
            self.emit(close)
        self.occurrences.append((pointer, start, self.pos))


@st.composite
def formatted(draw: st.DrawFn) -> tuple[str, dict[str, list[Any]], list[tuple[int, int, str]]]:
    """Any node in any formatting: (text, versions of each pointer, restarts as
    ``(start, end, pointer)`` in characters)."""
    # The formatting's coin flips (one or more per character) come from a Random seeded by one
    # draw: as Hypothesis draws they made thousands of choices per example, most of the test's
    # time, so that under CI load the 60 s per-test timeout struck mid-draw (reported as
    # FlakyStrategyDefinition). The node still shrinks; the formatting replays from its seed.
    writer = _Writer(draw(st.randoms(use_true_random=True)))
    writer.ws()
    writer.value(draw(NODES), "")
    writer.ws()
    text = "".join(writer.out)
    versions: dict[str, list[Any]] = {}
    restarts: list[tuple[int, int, str]] = []
    for pointer, start, end in sorted(writer.occurrences, key=lambda o: o[1]):
        if pointer in versions:
            restarts.append((start, end, pointer))
        versions.setdefault(pointer, []).append(json.loads(text[start:end]))
    return text, versions, restarts


@SETTINGS
@given(data=st.data(), doc=formatted(), append=st.booleans(), as_bytes=st.booleans())
def test_any_formatting_duplicate_keys_any_chunking(
    data: st.DataObject, doc: tuple[str, dict[str, list[Any]], list[tuple[int, int, str]]], append: bool, as_bytes: bool
) -> None:
    text, versions, restarts = doc
    if as_bytes:
        restarts = [(len(text[:start].encode()), len(text[:end].encode()), pointer) for start, end, pointer in restarts]
        _check_stream(text, data.draw(chunkings(text.encode())), append, versions, restarts)
    else:
        _check_stream(text, data.draw(chunkings(text)), append, versions, restarts)


def test_a_duplicate_key_restarts_its_member_and_everything_below() -> None:
    """The one case where a status moves back: a later occurrence of a key begins."""
    stream = PatchStream()
    stream.feed('{"a": {"x": "old", "y": 1}, "b": 2, "a": ')
    assert stream.status_of("/a") == "done" and stream.status_of("/a/x") == "done"
    assert stream.feed("{") == [{"op": "replace", "path": "/a", "value": {}}]
    assert stream.status_of("/a") == "started" and stream.status_of("/a/x") is None
    stream.feed('"x": "n')
    assert stream.status_of("/a/x") == "streaming"
    stream.feed('ew"}, "b": 3')
    assert stream.status_of("/b") == "started" and stream.value["b"] == 2  # 3 is not complete yet
    assert stream.feed("}") == [{"op": "replace", "path": "/b", "value": 3}]
    stream.close()
    assert stream.value == json.loads('{"a": {"x": "old", "y": 1}, "b": 2, "a": {"x": "new"}, "b": 3}')
    assert stream.status == {"a": "done", "b": "done"}


@SETTINGS
@given(data=st.data(), doc=documents(), append=st.booleans())
def test_any_document_any_str_chunking(data: st.DataObject, doc: tuple[Any, str], append: bool) -> None:
    _, text = doc
    _check_stream(text, data.draw(chunkings(text)), append)


@SETTINGS
@given(data=st.data(), doc=documents(), append=st.booleans())
def test_any_document_any_byte_chunking(data: st.DataObject, doc: tuple[Any, str], append: bool) -> None:
    _, text = doc
    _check_stream(text, data.draw(chunkings(text.encode())), append)


@settings(max_examples=at_most(60), deadline=None)
@given(data=st.data(), doc=documents(DEEP), append=st.booleans())
def test_deep_documents(data: st.DataObject, doc: tuple[Any, str], append: bool) -> None:
    _, text = doc
    _check_stream(text, data.draw(chunkings(text)), append)


@SETTINGS
@given(text=st.text(max_size=30), data=st.data())
def test_arbitrary_text_never_raises_anything_but_jsonstreamerror(text: str, data: st.DataObject) -> None:
    """Fuzz: whatever arrives, the outcome is a value or a JSONStreamError, the same for every split."""
    whole = outcome([text])
    assert outcome(data.draw(chunkings(text))) == whole
    if whole[0] == "ok":
        assert whole[1] == json.loads(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    _, text = draw(documents())
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        pos = draw(st.integers(min_value=0, max_value=len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(st.sampled_from(list('{}[],:"\\ 0123456789-+.eEtrufalsn\n\x00é😀\ud800')))
        if kind == "insert":
            text = text[:pos] + char + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + 1 :]
        else:
            text = text[:pos] + char + text[pos + 1 :]
    return text


def _strict_loads(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)


@SETTINGS
@given(text=mutated(), data=st.data())
def test_broken_documents_fail_the_same_way_in_every_chunking(text: str, data: st.DataObject) -> None:
    whole = outcome([text])
    assert outcome(data.draw(chunkings(text))) == whole
    assert outcome(list(text)) == whole
    try:
        expected: tuple[str, Any] = ("ok", _strict_loads(text))
    except (ValueError, RecursionError):
        expected = ("error", None)
    if any("\ud800" <= c <= "\udfff" for c in text):
        expected = ("error", None)  # raw surrogates in a str chunk are not Unicode text
    if expected[0] == "ok" and whole[0] == "error":
        # json.loads accepts lone surrogates from \\u escapes and overflows to
        # infinity; both are rejected by design (spec/jsonstream.md).
        assert "surrogate" in whole[1][0] or "out of range" in whole[1][0], whole
    else:
        assert whole[0] == expected[0], (text, whole)
        if whole[0] == "ok":
            assert whole[1] == expected[1]
