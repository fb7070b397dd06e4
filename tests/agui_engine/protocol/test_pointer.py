"""agui_engine.protocol.pointer: RFC 6901 reference tokens, escaped and unescaped in one place."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agui_engine.protocol.pointer import escape_token, pointer_tokens, unescape_token

ROOT = Path(__file__).resolve().parents[3]


def test_rfc_6901_examples() -> None:
    # RFC 6901 §5: "/a~1b" is the member "a/b", "/m~0n" the member "m~n"
    assert pointer_tokens("/a~1b") == ["a/b"]
    assert pointer_tokens("/m~0n") == ["m~n"]
    assert pointer_tokens("") == [] and pointer_tokens("/") == [""] and pointer_tokens("/foo/0") == ["foo", "0"]
    # order matters (§4): "~01" is "~1", never "/"
    assert unescape_token("~01") == "~1" and escape_token("~1") == "~01"
    assert escape_token("a/b~c") == "a~1b~0c"


def test_nothing_to_escape_returns_the_same_object() -> None:
    key = "".join(["plain", "key"])
    assert escape_token(key) is key and unescape_token(key) is key


@given(st.lists(st.text(alphabet=st.sampled_from("ab~/01 é"), max_size=6), max_size=5))
def test_tokens_round_trip(tokens: list[str]) -> None:
    pointer = "".join("/" + escape_token(t) for t in tokens)
    assert pointer_tokens(pointer) == tokens
    assert all(unescape_token(escape_token(t)) == t for t in tokens)


def test_no_other_module_escapes_pointers_by_hand() -> None:
    """``"~0"`` / ``"~1"`` string literals appear in pointer.py only: every other module
    calls the helpers (one piece of code per job)."""
    offenders = []
    for folder in ("agui_engine",):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "pointer.py" and path.parent.name == "protocol":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in ("~0", "~1"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
