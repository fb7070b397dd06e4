"""PatchStream semantics: ops, strings, numbers, statuses, errors, limits, bytes.

Every behaviour is checked under whole input, one character (or byte) at a
time and random splits, with identical results. Conformance (JSONTestSuite) is
in test_jsonstream_conformance.py, property tests in test_jsonstream_properties.py.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import jsonpatch
import pytest

from agui_engine.jsonstream import (
    MAX_DEPTH,
    MAX_NUMBER_LENGTH,
    JSONStreamError,
    JSONStreamLimitError,
    PatchStream,
)
from agui_engine.protocol.errors import LimitExceededError, RemoteInputError, UsageError
from agui_engine.protocol.pointer import escape_token


def splits(text: str | bytes, seed: int = 0) -> dict[str, list[Any]]:
    """The same input cut three ways: whole, one unit at a time, random 1-8."""
    rng = random.Random(seed)
    rand = []
    i = 0
    while i < len(text):
        step = rng.randint(1, 8)
        rand.append(text[i : i + step])
        i += step
    return {"whole": [text], "single": [text[i : i + 1] for i in range(len(text))], "random": rand}


def outcome(chunks: list[Any]) -> tuple[str, Any]:
    """Feed ``chunks`` and close: ``("ok", value)`` or ``("error", (message, offset, line, column, pointer))``."""
    stream = PatchStream()
    try:
        for chunk in chunks:
            stream.feed(chunk)
        stream.close()
    except JSONStreamError as exc:
        return "error", (str(exc), exc.offset, exc.line, exc.column, exc.pointer)
    return "ok", stream.value


def stream_ops(chunks: list[Any], **kwargs: Any) -> tuple[PatchStream, list[list[dict[str, Any]]]]:
    stream = PatchStream(**kwargs)
    per_feed = [stream.feed(chunk) for chunk in chunks]
    per_feed.append(stream.close())
    return stream, per_feed


def apply_all(ops: list[dict[str, Any]], doc: Any = None, append: bool = False) -> Any:
    patch_cls = jsonpatch.JsonPatchWithAppend if append else jsonpatch.JsonPatch
    return patch_cls(ops).apply(doc, in_place=True) if ops else doc


def flat(per_feed: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [op for ops in per_feed for op in ops]


# --------------------------------------------------------------------------- ops


def test_object_ops_whole_input() -> None:
    stream, per_feed = stream_ops(['{"a": [1, "x", {"b": null}], "c": true}'])
    assert flat(per_feed) == [
        {"op": "add", "path": "", "value": {}},
        {"op": "add", "path": "/a", "value": []},
        {"op": "add", "path": "/a/0", "value": 1},
        {"op": "add", "path": "/a/1", "value": "x"},
        {"op": "add", "path": "/a/2", "value": {}},
        {"op": "add", "path": "/a/2/b", "value": None},
        {"op": "add", "path": "/c", "value": True},
    ]
    assert stream.value == {"a": [1, "x", {"b": None}], "c": True}
    assert stream.done


@pytest.mark.parametrize("append", [False, True])
@pytest.mark.parametrize("mode", ["whole", "single", "random"])
def test_ops_rebuild_value_after_every_feed(append: bool, mode: str) -> None:
    text = json.dumps(
        {"title": "Q3 \"ops\" ☃ 😀", "items": [{"n": -1.5e3, "ok": False}, [], {}, "a\\b\n"], "": {"/~": 0}},
        ensure_ascii=mode == "single",
    )
    stream = PatchStream(append_strings=append)
    doc: Any = None
    for chunk in splits(text)[mode]:
        doc = apply_all(stream.feed(chunk), doc, append)
        assert doc == stream.value
    doc = apply_all(stream.close(), doc, append)
    assert doc == stream.value == json.loads(text)


def test_emit_root_false_starts_with_empty_object_and_no_root_op() -> None:
    stream = PatchStream(emit_root=False)
    assert stream.value == {}
    ops = stream.feed('{"a": 1}')
    assert ops == [{"op": "add", "path": "/a", "value": 1}]
    assert stream.close() == []
    assert apply_all(ops, {}) == stream.value == {"a": 1}


@pytest.mark.parametrize("text", ["[1]", '"x"', "1", "null", "true"])
def test_emit_root_false_rejects_a_non_object_root(text: str) -> None:
    stream = PatchStream(emit_root=False)
    with pytest.raises(JSONStreamError, match="tool arguments must be a JSON object") as info:
        stream.feed(text)
        stream.close()
    assert info.value.offset == 0


def test_containers_appear_at_their_bracket_and_members_once_their_value_starts() -> None:
    stream = PatchStream()
    assert stream.feed('{"items"') == [{"op": "add", "path": "", "value": {}}]
    assert stream.feed(": ") == []  # a key alone shows nothing
    assert stream.feed("[") == [{"op": "add", "path": "/items", "value": []}]
    assert stream.feed('{"na') == [{"op": "add", "path": "/items/0", "value": {}}]
    assert stream.feed('me": "') == [{"op": "add", "path": "/items/0/name", "value": ""}]
    assert stream.value == {"items": [{"name": ""}]}


def test_pointer_escaping_of_keys() -> None:
    text = '{"": 1, "/": 2, "~": 3, "~1": 4, "a/b~c": {"": "x"}}'
    _, per_feed = stream_ops([text])
    paths = [op["path"] for op in flat(per_feed)]
    assert paths == ["", "/", "/~1", "/~0", "/~01", "/a~1b~0c", "/a~1b~0c/"]
    assert escape_token("a/b~c") == "a~1b~0c"


def test_nothing_is_replaced_wholesale() -> None:
    text = json.dumps({"a": {"b": [1, {"c": "deep"}]}, "d": [[[]]]})
    for mode, chunks in splits(text).items():
        _, per_feed = stream_ops(chunks)
        for op in flat(per_feed):
            if op["op"] == "replace":
                assert isinstance(op["value"], str), (mode, op)


def test_duplicate_keys_last_wins_with_replace() -> None:
    stream, per_feed = stream_ops(['{"a": 1, "a": {"x": 2}}'])
    assert flat(per_feed)[-2:] == [
        {"op": "replace", "path": "/a", "value": {}},
        {"op": "add", "path": "/a/x", "value": 2},
    ]
    assert stream.value == json.loads('{"a": 1, "a": {"x": 2}}')


# --------------------------------------------------------------------------- strings


def test_string_appears_at_its_quote_and_grows_with_replace() -> None:
    stream = PatchStream()
    stream.feed('{"t": ')
    assert stream.feed('"') == [{"op": "add", "path": "/t", "value": ""}]
    assert stream.feed("he") == [{"op": "replace", "path": "/t", "value": "he"}]
    assert stream.feed('llo"') == [{"op": "replace", "path": "/t", "value": "hello"}]
    assert stream.feed("}") == []
    assert stream.status_of("/t") == "done"


def test_default_mode_sends_at_most_one_op_per_path_per_feed() -> None:
    stream = PatchStream()
    stream.feed('{"t": "')
    ops = stream.feed("a\\nb\\u00e9c\\\"d")  # plain runs and escapes: still one op
    assert ops == [{"op": "replace", "path": "/t", "value": 'a\nbéc"d'}]
    ops = stream.feed('xyz", "u": "v')
    assert ops == [
        {"op": "replace", "path": "/t", "value": 'a\nbéc"dxyz'},
        {"op": "add", "path": "/u", "value": "v"},
    ]


def test_append_mode_sends_exactly_the_new_characters() -> None:
    stream = PatchStream(append_strings=True)
    assert stream.feed('{"t": "ab') == [
        {"op": "add", "path": "", "value": {}},
        {"op": "add", "path": "/t", "value": "ab"},
    ]
    assert stream.feed("cd\\n") == [{"op": "append", "path": "/t", "value": "cd\n"}]
    assert stream.feed("\\u00") == []  # half an escape: nothing to show yet
    assert stream.feed('e9"}') == [{"op": "append", "path": "/t", "value": "é"}]
    assert stream.value == {"t": "abcd\né"}
    assert stream.close() == []


def test_append_mode_value_is_live_while_a_string_is_open() -> None:
    stream = PatchStream(append_strings=True)
    stream.feed('["ab')
    stream.feed("cd")
    assert stream.value == ["abcd"]
    stream.feed("ef")
    assert stream.value == ["abcdef"]
    ops = stream.feed('g"]')
    assert ops == [{"op": "append", "path": "/0", "value": "g"}]


def test_root_string_grows_with_replace_in_both_modes() -> None:
    for append in (False, True):
        stream = PatchStream(append_strings=append)
        assert stream.feed('"ab') == [{"op": "add", "path": "", "value": "ab"}]
        assert stream.feed('c"') == [{"op": "replace", "path": "", "value": "abc"}]
        assert stream.close() == []


@pytest.mark.parametrize("append", [False, True])
def test_escapes_split_anywhere_are_never_shown_half_done(append: bool) -> None:
    final = 'q"b\\s/\b\f\n\r\t é € 😀 \U0001d11e end'
    text = json.dumps({"s": final}, ensure_ascii=True)
    assert "\\ud83d\\ude00" in text
    stream = PatchStream(append_strings=append)
    shown = ""
    for ch in text:
        for op in stream.feed(ch):
            if op["path"] == "/s":
                shown = shown + op["value"] if op["op"] == "append" else op["value"]
                assert final.startswith(shown)
    stream.close()
    assert shown == final == stream.value["s"]


# --------------------------------------------------------------------------- numbers and literals


def test_numbers_appear_only_when_complete() -> None:
    stream = PatchStream()
    stream.feed("[")
    assert stream.feed("1") == []
    assert stream.feed(".") == []
    assert stream.feed("5") == []
    assert stream.feed("e") == []
    assert stream.feed("2") == []
    assert stream.feed(",") == [{"op": "add", "path": "/0", "value": 150.0}]
    assert stream.feed("-0") == []
    assert stream.feed("]") == [{"op": "add", "path": "/1", "value": 0}]


@pytest.mark.parametrize("word,value", [("true", True), ("false", False), ("null", None)])
def test_literals_appear_only_when_complete(word: str, value: Any) -> None:
    stream = PatchStream()
    stream.feed('{"k": ')
    for ch in word[:-1]:
        assert stream.feed(ch) == []
        assert "k" not in stream.value
    assert stream.feed(word[-1]) == [{"op": "add", "path": "/k", "value": value}]
    assert stream.status_of("/k") == "done"


def test_a_root_number_is_complete_only_at_close() -> None:
    stream = PatchStream()
    assert stream.feed("12") == []
    assert stream.feed("3") == []
    assert not stream.done
    assert stream.value is None
    assert stream.close() == [{"op": "add", "path": "", "value": 123}]
    assert stream.done and stream.value == 123


def test_a_root_number_is_also_complete_at_trailing_whitespace() -> None:
    stream = PatchStream()
    assert stream.feed("-4.5 ") == [{"op": "add", "path": "", "value": -4.5}]
    assert stream.done


def test_numbers_match_json_loads() -> None:
    for text in ["0", "-0", "-0.0", "1E+2", "1e-2", "123456789012345678901234567890", "1.7976931348623157e308",
                 "5e-324", "1e-999", "0.1", "-12.5E-3"]:
        for chunks in splits(text).values():
            stream, _ = stream_ops(chunks)
            assert stream.value == json.loads(text) and type(stream.value) is type(json.loads(text))


# --------------------------------------------------------------------------- status


def test_statuses_started_streaming_done() -> None:
    stream = PatchStream()
    stream.feed('{"name": "')
    assert stream.status == {"name": "started"}
    stream.feed("Ad")
    assert stream.status == {"name": "streaming"}
    stream.feed('a"')
    # done the moment the closing quote arrives, not when the next key shows up
    assert stream.status == {"name": "done"}
    stream.feed(', "n": 4')
    assert stream.status == {"name": "done", "n": "started"}
    assert "n" not in stream.value
    stream.feed('2, "list": [')
    assert stream.status == {"name": "done", "n": "done", "list": "started"}
    stream.feed("1")
    assert stream.status_of("/list") == "started"
    assert stream.status_of("/list/0") == "started"
    stream.feed(", {")
    assert stream.status_of("/list") == "streaming"
    assert stream.status_of("/list/0") == "done"
    assert stream.status_of("/list/1") == "started"
    assert stream.status_of("/nope") is None
    assert stream.status_of("") == "streaming"
    stream.feed("}]}")
    assert stream.status == {"name": "done", "n": "done", "list": "done"}
    assert stream.status_of("") == "done"
    assert stream.done


def test_status_of_rejects_a_malformed_pointer() -> None:
    with pytest.raises(UsageError):
        PatchStream().status_of("a/b")


def test_status_for_array_and_scalar_roots() -> None:
    stream = PatchStream()
    stream.feed('["a", 1')
    assert stream.status == {0: "done", 1: "started"}
    scalar = PatchStream()
    scalar.feed('"x')
    assert scalar.status == {}
    assert scalar.status_of("") == "streaming"


# --------------------------------------------------------------------------- errors

# (input, message fragment, offset, line, column, pointer)
BROKEN = [
    ('{"a": 1 x}', "expected ',' or '}' after member, got 'x'", 8, 1, 9, ""),
    ("[1, 2,]", "expected a value, got ']'", 6, 1, 7, "/2"),
    ('{"a":\n  [1,\n   tru]}', "invalid literal: expected 'true', got ']'", 18, 3, 7, "/a/1"),
    ("[01]", "leading zeros are not allowed", 2, 1, 3, "/0"),
    ("[1.]", "expected a digit after '.', got ']'", 3, 1, 4, "/0"),
    ("[-]", "expected a digit after '-', got ']'", 2, 1, 3, "/0"),
    ("[1e+]", "expected a digit in the exponent", 4, 1, 5, "/0"),
    ('{"a" 1}', "expected ':' after key, got '1'", 5, 1, 6, ""),
    ('{"a": "b\nc"}', "unescaped control character '\\n' in string", 8, 1, 9, "/a"),
    ('{"a": "\\x"}', "invalid escape '\\x'", 7, 1, 8, "/a"),
    ('["\\u12G4"]', "expected 4 hex digits", 6, 1, 7, "/0"),
    ('["\\ud800"]', "lone high surrogate", 2, 1, 3, "/0"),
    ('["\\udc00"]', "lone low surrogate", 2, 1, 3, "/0"),
    ('["\\ud800\\u0041"]', "not a low surrogate", 2, 1, 3, "/0"),
    ("[1] [", "unexpected data after the JSON value, got '['", 4, 1, 5, ""),
    ("{,}", "expected '\"' or '}' at the start of an object, got ','", 1, 1, 2, ""),
    ('{"a":1,}', "expected '\"' (a key) after ',', got '}'", 7, 1, 8, ""),
    ("[NaN]", "expected a value or ']', got 'N'", 1, 1, 2, "/0"),
    ("[-Infinity]", "expected a digit after '-', got 'I'", 2, 1, 3, "/0"),
    ("[1e400]", "number out of range", 1, 1, 2, "/0"),
    ("\ufeff{}", "expected a value, got '\\ufeff'", 0, 1, 1, ""),
    ('{"x": [1, {"y": 2', "unexpected end of input: an unclosed object, expected ',' or '}'", 17, 1, 18, "/x/1"),
    ('["abc', "unexpected end of input: an unterminated string", 5, 1, 6, "/0"),
    ("[1, 2", "unexpected end of input: an unclosed array", 5, 1, 6, ""),
    ("", "unexpected end of input: no JSON value", 0, 1, 1, ""),
    ("[tr", "unexpected end of input in literal 'true'", 3, 1, 4, "/0"),
]


@pytest.mark.parametrize("text,message,offset,line,column,pointer", BROKEN)
def test_errors_say_where_and_what(text: str, message: str, offset: int, line: int, column: int, pointer: str) -> None:
    seen = set()
    for mode, chunks in splits(text).items():
        stream = PatchStream()
        with pytest.raises(JSONStreamError) as info:
            for chunk in chunks:
                stream.feed(chunk)
            stream.close()
        err = info.value
        assert message in str(err), mode
        assert (err.offset, err.line, err.column, err.pointer) == (offset, line, column, pointer), (mode, str(err))
        assert isinstance(err, ValueError) and isinstance(err, RemoteInputError)
        seen.add(str(err))
    assert len(seen) == 1  # identical in every chunking


def test_errors_in_a_bytes_stream_give_byte_offsets() -> None:
    text = '{"é€": "😀", "b": x}'.encode()
    for chunks in splits(text).values():
        stream = PatchStream()
        with pytest.raises(JSONStreamError) as info:
            for chunk in chunks:
                stream.feed(chunk)
        assert info.value.offset == text.index(b"x")
        assert info.value.column == 18  # characters
        assert info.value.pointer == "/b"


def test_after_an_error_the_stream_stays_failed_and_ops_stay_valid() -> None:
    stream = PatchStream()
    ops = stream.feed('{"a": [1, "xy')
    with pytest.raises(JSONStreamError) as info:
        stream.feed('z", 2 3')
    err = info.value
    assert err.ops == [{"op": "replace", "path": "/a/1", "value": "xyz"}, {"op": "add", "path": "/a/2", "value": 2}]
    assert apply_all(ops + err.ops) == stream.value == {"a": [1, "xyz", 2]}
    with pytest.raises(JSONStreamError) as again:
        stream.feed("]}")
    assert again.value is err
    with pytest.raises(JSONStreamError) as at_close:
        stream.close()
    assert at_close.value is err


def test_trailing_garbage_is_an_error_when_it_arrives() -> None:
    stream = PatchStream()
    stream.feed("{}")
    assert stream.done
    assert stream.feed("  \n") == []
    with pytest.raises(JSONStreamError, match="after the JSON value"):
        stream.feed("{")


def test_error_codes_and_statuses() -> None:
    err = JSONStreamError("x")
    assert err.code == "invalid_json" and err.http_status == 400
    limit = JSONStreamLimitError("y")
    assert isinstance(limit, LimitExceededError) and isinstance(limit, JSONStreamError)
    assert limit.http_status == 413


# --------------------------------------------------------------------------- limits


def test_depth_bomb_is_rejected_at_max_depth_in_small_memory() -> None:
    bomb = "[" * 100_000
    tracemalloc.start()
    try:
        for chunks in ([bomb], [bomb[i : i + 1] for i in range(2000)], [bomb.encode()]):
            stream = PatchStream()
            with pytest.raises(JSONStreamLimitError, match="max_depth") as info:
                for chunk in chunks:
                    stream.feed(chunk)
            assert info.value.offset == MAX_DEPTH
            assert len(info.value.ops) <= MAX_DEPTH
            assert len(str(info.value)) < 400  # the kilobyte-long pointer is abbreviated
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4_000_000  # the 200 KB bomb input itself, plus well under a megabyte of state


def test_max_depth_is_exact() -> None:
    ok = "[" * 5 + "]" * 5
    stream, _ = stream_ops([ok], max_depth=5)
    assert stream.value == [[[[[]]]]]
    with pytest.raises(JSONStreamLimitError):
        stream_ops(["[" * 6 + "]" * 6], max_depth=5)
    with pytest.raises(JSONStreamLimitError):
        stream_ops(['{"a":' * 6 + "1" + "}" * 6], max_depth=5)


def test_max_bytes() -> None:
    stream = PatchStream(max_bytes=10)
    stream.feed('["abcd",')
    with pytest.raises(JSONStreamLimitError, match="max_bytes"):
        stream.feed("12345")
    bstream = PatchStream(max_bytes=4)
    with pytest.raises(JSONStreamLimitError, match="4 bytes"):
        bstream.feed("[\"é\"]".encode())


@pytest.mark.parametrize("as_bytes", [False, True])
def test_max_bytes_counts_utf8_bytes_for_str_and_bytes_alike(as_bytes: bool) -> None:
    """One document is accepted or refused the same way whether it arrives as str or bytes."""
    text = json.dumps({"city": "東京", "mood": "😀", "note": "café"}, ensure_ascii=False)
    size = len(text.encode())
    assert size == len(text) + 8
    data: str | bytes = text.encode() if as_bytes else text
    for mode, chunks in splits(data).items():
        stream, _ = stream_ops(chunks, max_bytes=size)
        assert stream.value == json.loads(text), mode
        stream = PatchStream(max_bytes=size - 1)
        with pytest.raises(JSONStreamLimitError) as info:
            for chunk in chunks:
                stream.feed(chunk)
        assert info.value.got == f"{size} bytes", mode
        assert f"max_bytes ({size - 1} bytes)" in str(info.value)
        # Nothing of the refused chunk is parsed: positions end before it (for bytes,
        # before a character the previous chunk cut, which is still undecoded).
        before = len(data) - len(chunks[-1])
        assert before - (3 if as_bytes else 0) <= info.value.offset <= before, mode


def test_number_length_limit_instead_of_a_crash() -> None:
    digits = "1" * 5000
    for chunks in ([f"[{digits}]"], [f"[{digits}]"[i : i + 7] for i in range(0, 5002, 7)]):
        stream = PatchStream()
        with pytest.raises(JSONStreamLimitError, match="max_number_length"):
            for chunk in chunks:
                stream.feed(chunk)
    assert MAX_NUMBER_LENGTH < 4300
    # Above Python's own int conversion limit: still a JSONStreamError, not a crash.
    with pytest.raises(JSONStreamError, match="integer too long"):
        stream_ops([f"[{digits}]"], max_number_length=10_000)


def test_max_pointer_length() -> None:
    key = "k" * 50
    text = "{" + f'"{key}": {{' * 3 + "}" * 4
    with pytest.raises(JSONStreamLimitError, match="max_pointer_length"):
        stream_ops([text], max_pointer_length=100)
    stream, _ = stream_ops([text], max_pointer_length=200)
    assert stream.done


def test_a_key_arriving_in_pieces_is_refused_before_it_outgrows_the_pointer_limit() -> None:
    stream = PatchStream(max_pointer_length=100)
    stream.feed('{"')
    with pytest.raises(JSONStreamLimitError, match="max_pointer_length"):
        for _ in range(200):
            stream.feed("k")


def test_a_long_string_in_append_mode_is_kept_in_few_pieces() -> None:
    stream = PatchStream(append_strings=True)
    stream.feed('{"s": "')
    for _ in range(10_000):
        stream.feed("abcd")
    assert len(stream._parts) < 50  # O(log n) + 32 pieces, not one per feed
    assert stream.value == {"s": "abcd" * 10_000}
    stream.feed('"}')
    assert stream.close() == [] and stream.value == {"s": "abcd" * 10_000}


def test_limits_must_be_positive_ints() -> None:
    with pytest.raises(UsageError):
        PatchStream(max_depth=0)


# --------------------------------------------------------------------------- bytes and usage


def test_utf8_split_anywhere() -> None:
    value = {"s": "é€😀 \U0001d11e", "k€y": ["ü"]}
    data = json.dumps(value, ensure_ascii=False).encode()
    for chunks in splits(data).values():
        stream, _ = stream_ops(chunks)
        assert stream.value == value


def test_invalid_utf8_reports_the_byte_offset_and_keeps_what_came_before() -> None:
    data = b'{"a": "ok", "b": "x\xffy"}'
    for mode, chunks in splits(data).items():
        stream = PatchStream()
        with pytest.raises(JSONStreamError, match="invalid UTF-8") as info:
            for chunk in chunks:
                stream.feed(chunk)
        assert info.value.offset == data.index(b"\xff"), mode
        assert stream.value == {"a": "ok", "b": "x"}


def test_utf8_cut_off_at_the_end_is_an_error_at_close() -> None:
    stream = PatchStream()
    stream.feed(b'"\xe2\x82')
    with pytest.raises(JSONStreamError, match="invalid UTF-8") as info:
        stream.close()
    assert info.value.offset == 1


def test_raw_lone_surrogate_in_a_str_chunk_is_rejected() -> None:
    with pytest.raises(JSONStreamError, match="lone surrogate"):
        stream_ops(['["a\ud800b"]'])


def test_usage_errors() -> None:
    stream = PatchStream()
    stream.feed("[")
    with pytest.raises(UsageError):
        stream.feed(b"1")
    with pytest.raises(UsageError):
        PatchStream().feed(1)  # type: ignore[arg-type]
    done = PatchStream()
    done.feed("[]")
    done.close()
    assert done.close() == []
    with pytest.raises(UsageError, match="after close"):
        done.feed("1")


def test_an_empty_chunk_is_just_an_empty_chunk() -> None:
    stream = PatchStream()
    assert stream.feed("") == []
    assert stream.feed("[1") == [{"op": "add", "path": "", "value": []}]
    assert stream.feed("") == []
    assert stream.feed(b"" if False else "") == []
    assert not stream.done
    assert stream.feed("]") == [{"op": "add", "path": "/0", "value": 1}]
