"""RFC 6901 JSON Pointer reference tokens: the one place that escapes and unescapes them.

A pointer is ``""`` (the whole document) or ``/``-separated reference tokens, each with
``~`` written ``~0`` and ``/`` written ``~1``. Escaping replaces ``~`` first (§3) and
unescaping replaces ``~1`` first (§4), so ``"~1"`` round-trips as ``"~01"``. Each helper
returns its input unchanged (no copy) when there is nothing to escape: the tokenizer calls
them per object key and per status query.
"""

from __future__ import annotations

__all__ = ["escape_token", "pointer_tokens", "unescape_token"]


def escape_token(token: str) -> str:
    """``token`` as one reference token of a pointer (``~`` -> ``~0``, then ``/`` -> ``~1``)."""
    if "~" in token or "/" in token:
        return token.replace("~", "~0").replace("/", "~1")
    return token


def unescape_token(token: str) -> str:
    """The member name or index a reference token stands for (``~1`` -> ``/``, then ``~0`` -> ``~``)."""
    if "~" in token:
        return token.replace("~1", "/").replace("~0", "~")
    return token


def pointer_tokens(pointer: str) -> list[str]:
    """The unescaped tokens of ``pointer``: ``""`` -> ``[]``, ``"/a~1b/0"`` -> ``["a/b", "0"]``.

    ``pointer`` is ``""`` or starts with ``/`` (the caller checks: each caller has its own
    error for a malformed pointer); the first character is dropped unread."""
    if not pointer:
        return []
    tokens = pointer[1:].split("/")
    if "~" in pointer:
        return [unescape_token(t) for t in tokens]
    return tokens
