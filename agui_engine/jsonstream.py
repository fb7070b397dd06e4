"""Incremental JSON tokenizer: tool-call argument fragments in, RFC 6902 operations out.

Theory of operation
-------------------
A :class:`PatchStream` is a push parser. ``feed(chunk)`` hands it the next piece of
a JSON document (``str``, or UTF-8 ``bytes`` split anywhere) and returns the JSON
Patch operations that piece caused; ``close()`` marks the end of input. The
document is parsed exactly once, left to right: no prefix is ever re-scanned, so
the cost of a chunk depends on the chunk, not on how much came before it.

Speed comes from letting C do the scanning. A run of plain string characters is
found by one compiled regular expression and kept as one slice; whitespace runs,
numbers and ``"key":`` pairs are each one ``match`` call; Python objects are
touched once per *token*, never once per character. A chunk that lies wholly
inside a string (the common case while a model types prose) takes a fast path
in :meth:`PatchStream.feed` that costs a few C calls.

State is a small table (``_S_*`` below) plus a stack of open containers. Each
stack frame keeps its container and its escaped JSON Pointer, so the path of a
new member is one string concatenation (``parent + "/" + key``), not a join over
the stack. The bottom frame is a one-slot dict (``_rootbox``) holding the root
value under the key ``""``, so the root needs no special case when a value is
placed. At most one string is open at any time (JSON is sequential), so the
"dirty strings" of a feed are that one string: its growth is emitted once, at the
end of the feed or when it closes, whichever comes first. That is what makes
"at most one op per path per feed" hold by construction.

A token cut by the end of a chunk (a number, ``tru``, half an escape such as
``\\ud83d`` waiting for its low surrogate) is kept as ``_pending`` text and parsed
when the next chunk arrives. Pending text is bounded: at most
``max_number_length`` characters for a number, 5 for a literal, 11 for an
escape, so carrying it over keeps the whole parse linear. Strings and keys of any
length are never pending: their characters are collected as slices as they come.

Status (``started`` / ``streaming`` / ``done``) is not stored per value: it is
derived on demand from the open-container stack and the open scalar, so the hot
loop pays nothing for it. The exact rules are in ``spec/jsonstream.md``.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Callable
from typing import Any, Final, cast

from .protocol.errors import LimitExceededError, RemoteInputError, UsageError
from .protocol.pointer import escape_token, pointer_tokens, unescape_token

__all__ = [
    "JSONStreamError",
    "JSONStreamLimitError",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NUMBER_LENGTH",
    "MAX_POINTER_LENGTH",
    "PatchStream",
]

# --------------------------------------------------------------------------- limits
#: Deepest nesting of arrays/objects accepted. Real tool arguments and component
#: props nest fewer than 20 levels; 512 still accepts JSONTestSuite's
#: ``i_structure_500_nested_arrays`` (as ``json.loads`` does). The parser is
#: iterative, so this is not about the C stack: it bounds the frame stack, whose
#: pointer strings cost O(depth**2) characters (512 levels of ``/0`` = 262 K chars),
#: and makes the 100,000-bracket nesting bomb fail after 513 brackets.
MAX_DEPTH: Final = 512
#: Total input accepted by one stream, in UTF-8 bytes whether it is fed bytes or
#: str (a str chunk counts as its UTF-8 encoding), so one document is accepted or
#: refused the same way whichever form the caller has. The largest single model
#: response today is about 128 K output tokens (~0.5 MB of text); 4 MiB is 8x
#: that, while keeping a hostile stream from growing the live document without bound.
MAX_BYTES: Final = 4 * 1024 * 1024
#: Longest number token, in characters. A float needs at most 25 (17 significant
#: digits, sign, point, ``e-308``) and a 128-bit integer 40; 1,000 leaves room
#: for exact big integers while staying far below CPython's 4,300-digit limit on
#: int conversion (``sys.get_int_max_str_digits``), and keeps re-scanning a
#: number cut into one-character chunks cheap (it is pending text, see above).
MAX_NUMBER_LENGTH: Final = 1000
#: Longest JSON Pointer of an open container or member, in characters. Every op
#: carries its full path and every open frame keeps its own, so without a bound a
#: 4 MiB document of long keys nested 512 deep could hold gigabytes of paths.
#: Real pointers are under 200 characters; 8,192 is 40x that.
MAX_POINTER_LENGTH: Final = 8192

# --------------------------------------------------------------------------- states
# The parser's states (c = next non-whitespace character):
#   VALUE        (root, after ':', after ',' in an array) -- c starts a value
#   VALUE_OR_END (just after '[')                      -- c starts a value, or ']'
#   AFTER        (after a value inside a container)    -- ',' -> KEY | VALUE; the closer pops
#   KEY          (after ',' in an object)              -- '"' starts a key
#   KEY_OR_END   (just after '{')                      -- '"' starts a key, or '}'
#   COLON        (after a key)                         -- ':' -> VALUE
#   DONE         (root value complete)                 -- whitespace only
#   STRING       (inside a value string)               -- '"' closes -> AFTER | DONE
#   KEYSTR       (inside a key)                        -- '"' closes -> COLON
# A completed value moves to AFTER when a container is open, else to DONE.
# The numbering is part of the dispatch: the hot loop tests ``state >= 7`` (in a
# string), ``state <= 1`` (a value starts) and so on with int literals, because
# a literal compare is the cheapest test Python has; keep the two in step.
_S_VALUE: Final = 0
_S_VALUE_OR_END: Final = 1
_S_AFTER: Final = 2
_S_KEY: Final = 3
_S_KEY_OR_END: Final = 4
_S_COLON: Final = 5
_S_DONE: Final = 6
_S_STRING: Final = 7
_S_KEYSTR: Final = 8

# What each state expects, for error messages ("expected X, got 'c'").
_EXPECTED: Final = {
    _S_VALUE: ("a value", ""),
    _S_VALUE_OR_END: ("a value or ']'", ""),
    _S_KEY_OR_END: ("'\"' or '}'", " at the start of an object"),
    _S_KEY: ("'\"'", " (a key) after ','"),
    _S_COLON: ("':'", " after key"),
    _S_DONE: ("end of input", " after the JSON value"),
}

# --------------------------------------------------------------------------- scanners
# The ``*`` patterns always match (possibly empty): typed as returning a Match.
_Scan = Callable[..., "re.Match[str]"]
_WS: Final = cast(_Scan, re.compile(r"[ \t\n\r]*").match)
#: A run of string characters that need no decoding: not a quote, not a backslash,
#: not a control character (RFC 8259 requires those escaped), not a surrogate
#: code point (only reachable from a str input; never valid Unicode text).
_PLAIN: Final = cast(_Scan, re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*').match)
#: A complete simple key with its colon: the common case of an object member.
#: No whitespace before the colon: newlines are only ever consumed by ``_WS``
#: (which counts them for line numbers), and no serialiser puts spaces there.
_KEY_COLON: Final = re.compile(r'"([^"\\\x00-\x1f\ud800-\udfff]*)":').match
#: The rest of a key cut by a chunk boundary, with its colon.
_KEY_TAIL: Final = re.compile(r'([^"\\\x00-\x1f\ud800-\udfff]*)":').match
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?").match
#: Characters that can continue a number: a number touching the end of the
#: available text might still grow, so it waits for more input.
_NUM_RUN: Final = cast(_Scan, re.compile(r"[-+.eE0-9]*").match)
_HEX4: Final = re.compile(r"[0-9a-fA-F]{4}").fullmatch
_HEX_PART: Final = re.compile(r"[0-9a-fA-F]{0,3}").fullmatch
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_INF: Final = math.inf
_LITERALS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}


class JSONStreamError(RemoteInputError):
    """The JSON text is invalid (or incomplete at ``close()``).

    Attributes say where and why: ``offset`` (bytes for a bytes stream, characters
    for a str stream, 0-based), ``line`` and ``column`` (1-based, in characters;
    lines end at LF), ``pointer`` (RFC 6901 pointer of the value or container being
    parsed), ``expected`` (what would have been valid) and ``got`` (what arrived).
    ``ops`` holds the operations the failing ``feed``/``close`` produced before the
    error: with every op returned earlier they rebuild the stream's ``value``.
    """

    default_code = "invalid_json"

    def __init__(
        self,
        message: str,
        *,
        offset: int = 0,
        line: int = 1,
        column: int = 1,
        pointer: str = "",
        expected: str = "",
        got: str = "",
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.offset = offset
        self.line = line
        self.column = column
        self.pointer = pointer
        self.expected = expected
        self.got = got
        self.ops: list[dict[str, Any]] = []


class JSONStreamLimitError(JSONStreamError, LimitExceededError):
    """The JSON text crossed a documented limit (depth, size, number or pointer length)."""

    default_code = "json_limit_exceeded"


class PatchStream:
    """Parse a JSON document incrementally into RFC 6902 operations.

    ``PatchStream(append_strings=False, emit_root=True, max_depth=MAX_DEPTH,
    max_bytes=MAX_BYTES, max_number_length=MAX_NUMBER_LENGTH,
    max_pointer_length=MAX_POINTER_LENGTH)``

    * ``append_strings``: grow strings with ``{"op": "append", ...}`` (the string
      append operation of ``jsonpatch.JsonPatchWithAppend``) carrying only the new
      characters, instead of re-sending the string with ``replace``.
    * ``emit_root``: emit ``add ""`` for the root. With ``False`` the root must be
      an object, it starts as ``{}`` and no op is emitted for it (component props).

    One stream takes either ``str`` or ``bytes`` chunks, not both.
    """

    __slots__ = (
        "_append",
        "_bytes_in",
        "_chars",
        "_closed",
        "_compact",
        "_conts",
        "_decoder",
        "_emit_root",
        "_error",
        "_key",
        "_line",
        "_line_start",
        "_mark",
        "_max_bytes",
        "_max_depth",
        "_max_number",
        "_max_pointer",
        "_mode",
        "_mpath",
        "_parts",
        "_pending",
        "_ptrs",
        "_ready",
        "_room",
        "_rootbox",
        "_s_announced",
        "_s_holder",
        "_s_op",
        "_s_path",
        "_s_slot",
        "_size",
        "_state",
    )

    def __init__(
        self,
        *,
        append_strings: bool = False,
        emit_root: bool = True,
        max_depth: int = MAX_DEPTH,
        max_bytes: int = MAX_BYTES,
        max_number_length: int = MAX_NUMBER_LENGTH,
        max_pointer_length: int = MAX_POINTER_LENGTH,
    ) -> None:
        for name, limit in (
            ("max_depth", max_depth),
            ("max_bytes", max_bytes),
            ("max_number_length", max_number_length),
            ("max_pointer_length", max_pointer_length),
        ):
            if not isinstance(limit, int) or limit < 1:
                raise UsageError(f"{name} must be a positive int, got {limit!r}")
        self._append = bool(append_strings)
        self._emit_root = bool(emit_root)
        self._max_depth = max_depth
        self._max_bytes = max_bytes
        self._room = max_bytes  # str streams: max_bytes less the non-ASCII bytes beyond one per character
        self._max_number = max_number_length
        self._max_pointer = max_pointer_length
        self._state = _S_VALUE
        self._pending = ""
        # The root lives in a one-slot dict so that placing it is like placing a member.
        self._rootbox: dict[str, Any] = {} if emit_root else {"": {}}
        self._conts: list[Any] = [self._rootbox]
        self._ptrs: list[str] = [""]
        self._key = ""  # key (in the top object) of the value being parsed
        self._mpath = ""  # pointer of that value
        # The one open string (or key): its decoded pieces, and how many were emitted.
        self._parts: list[str] = []
        self._mark = 0
        self._compact = 0  # leading pieces of an append-mode string already compacted
        self._s_holder: Any = None
        self._s_slot: Any = None
        self._s_path = ""
        self._s_op = "add"
        self._s_announced = False
        self._size = 0
        self._chars = 0  # characters decoded so far (bytes streams; str streams use _size)
        self._ready = False  # a str stream that has not failed or closed: feed's fast check
        self._line = 1
        self._line_start = 0
        self._mode = 0  # 0 = no input yet, 1 = str, 2 = bytes
        self._decoder: Any = None
        self._bytes_in = 0
        self._error: JSONStreamError | None = None
        self._closed = False

    # ------------------------------------------------------------------ public API
    def feed(self, chunk: str | bytes | bytearray | memoryview) -> list[dict[str, Any]]:
        """Parse the next piece of the document; return the ops it caused, in order.

        An empty chunk is just an empty chunk (end of input is :meth:`close`).
        Raises :class:`JSONStreamError` on invalid input (and on every later call);
        :class:`JSONStreamLimitError` when a limit is crossed; :class:`UsageError`
        after ``close()``, when str and bytes are mixed, or for another type.
        """
        # ``_ready``: a str stream that has neither failed nor been closed. Every
        # other case (first chunk, bytes, errors, misuse) takes the slow path.
        if type(chunk) is str and self._ready:
            if not chunk.isascii():  # O(1): CPython keeps an ASCII flag on every str
                # ``max_bytes`` is in UTF-8 bytes: charge what is beyond one per character.
                self._room -= len(chunk.encode("utf-8", "surrogatepass")) - len(chunk)
            size = self._size + len(chunk)
            self._size = size
            if size > self._room:
                self._limit_from_size(chunk)
            if (
                self._state >= 7  # _S_STRING, _S_KEYSTR
                and not self._pending
                and '"' not in chunk
                and "\\" not in chunk
                and chunk
                and (chunk.isprintable() or _PLAIN(chunk).end() == len(chunk))
            ):
                # Fast path: the whole chunk is plain characters inside a string or a key.
                parts = self._parts
                parts.append(chunk)
                ops: list[dict[str, Any]] = []
                if self._state == 7:
                    self._flush_string(ops)
                elif len(parts) > 16:
                    self._join_key(chunk, ops)
                return ops
            return self._run(chunk, False)
        return self._feed_slow(chunk)

    def _feed_slow(self, chunk: str | bytes | bytearray | memoryview) -> list[dict[str, Any]]:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise UsageError("PatchStream.feed() called after close()")
        if type(chunk) is str:
            self._set_mode(1)
            return self.feed(chunk)
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise UsageError(f"PatchStream.feed() takes str or bytes, got {type(chunk).__name__}")
        if self._mode != 2:
            self._set_mode(2)
        self._size += len(chunk)
        if self._size > self._max_bytes:
            self._limit_from_size(chunk)
        text = self._decode(chunk, False)
        self._chars += len(text)
        return self._run(text, False) if text else []

    def close(self) -> list[dict[str, Any]]:
        """End of input: return the last ops (a number at the root completes here).

        Raises :class:`JSONStreamError` if the document is incomplete (or invalid
        UTF-8 was cut off at the end). Calling ``close()`` again returns ``[]``.
        """
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        self._ready = False
        text = ""
        if self._mode == 2:
            text = self._decode(b"", True)
            self._chars += len(text)
        ops = self._run(text, True)
        if self._state != _S_DONE:
            # _run reports most truncations itself; this catches the rest.
            self._fail_end(ops)
        return ops

    @property
    def value(self) -> Any:
        """The document so far as plain Python values (``None`` before the root starts)."""
        self._sync_string()
        return self._rootbox.get("")

    @property
    def append_strings(self) -> bool:
        """Whether growing strings are sent as ``append`` operations (else ``replace``)."""
        return self._append

    @property
    def done(self) -> bool:
        """Whether the whole value is complete (a root number completes at ``close()``)."""
        return self._state == _S_DONE

    @property
    def status(self) -> dict[Any, str]:
        """Status of each member of the root: ``{key: "started" | "streaming" | "done"}``.

        For an array root the keys are the element indices; a scalar root has none.
        A member whose key is complete and whose value has begun (even a number not
        yet shown in ``value``) is listed.
        """
        root = self._rootbox.get("")
        out: dict[Any, str] = {}
        if isinstance(root, dict):
            for key in root:
                out[key] = self._status_at("/" + escape_token(key), True)  # type: ignore[assignment]
        elif isinstance(root, list):
            for index in range(len(root)):
                out[index] = self._status_at("/" + str(index), True)  # type: ignore[assignment]
        else:
            return out
        open_path = self._open_scalar_path()
        if open_path is not None and len(self._conts) == 2:  # a number or literal directly in the root
            token = unescape_token(open_path[1:])
            out[token if isinstance(root, dict) else int(token)] = "started"
        return out

    def open_pointer(self, level: int) -> str | None:
        """Pointer of the open value at nesting ``level`` (0 = the root), or ``None`` when
        fewer values are open. Open values are the containers whose closing bracket has not
        arrived and the open string; JSON is sequential, so they form one chain from the
        root down. O(1): with the ops, it is all a per-path status needs."""
        ptrs = self._ptrs
        if 0 <= level < len(ptrs) - 1:
            return ptrs[level + 1]
        if level == len(ptrs) - 1 and self._state == _S_STRING:
            return self._s_path
        return None

    def status_of(self, pointer: str) -> str | None:
        """Status of the value at ``pointer``: ``"started"``, ``"streaming"``,
        ``"done"``, or ``None`` if it has not begun. Raises :class:`UsageError`
        for a malformed pointer."""
        if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
            raise UsageError(f"not a JSON pointer: {pointer!r}")
        return self._status_at(pointer, False)

    # ------------------------------------------------------------------ status helpers
    def _open_scalar_path(self) -> str | None:
        """Pointer of the scalar being parsed that is not yet shown (a number or literal)."""
        state = self._state
        if state in (_S_VALUE, _S_VALUE_OR_END) and self._pending:
            return self._value_path()
        return None

    def _value_path(self) -> str:
        top = self._conts[-1]
        if type(top) is list:
            return self._ptrs[-1] + "/" + str(len(top))
        return self._mpath

    def _status_at(self, pointer: str, known_present: bool) -> str | None:
        conts, ptrs = self._conts, self._ptrs
        for depth in range(1, len(ptrs)):
            if ptrs[depth] == pointer:
                return "streaming" if conts[depth] else "started"
        if self._state == _S_STRING and self._s_path == pointer:
            return "streaming" if any(self._parts) else "started"
        if pointer == self._open_scalar_path():
            return "started"
        if known_present or self._resolves(pointer):
            return "done"
        return None

    def _resolves(self, pointer: str) -> bool:
        node = self._rootbox
        if "" not in node:
            return False
        node = node[""]
        if pointer == "":
            return True
        for token in pointer_tokens(pointer):
            if isinstance(node, dict):
                if token not in node:
                    return False
                node = node[token]
            elif isinstance(node, list):
                if not token.isdigit() or (len(token) > 1 and token[0] == "0") or int(token) >= len(node):
                    return False
                node = node[int(token)]
            else:
                return False
        return True

    # ------------------------------------------------------------------ input plumbing
    def _set_mode(self, mode: int) -> None:
        if self._mode:
            raise UsageError("one PatchStream takes either str or bytes chunks, not both")
        self._mode = mode
        if mode == 1:
            self._ready = True
        else:
            self._decoder = codecs.getincrementaldecoder("utf-8")("strict")

    def _chars_total(self) -> int:
        """Characters handed to the parser so far (a str stream counts them in ``_size``)."""
        return self._size if self._mode == 1 else self._chars

    def _decode(self, data: bytes | bytearray | memoryview, final: bool) -> str:
        before = self._bytes_in
        self._bytes_in = before + len(data)
        try:
            return self._decoder.decode(data, final)  # type: ignore[no-any-return]
        except UnicodeDecodeError as exc:
            buffered = len(exc.object) - len(data)
            good = bytes(exc.object[: exc.start]).decode("utf-8")
            # Parse what was valid first: an earlier syntax error wins, and
            # everything accepted before the bad byte is kept.
            self._bytes_in = before - buffered + exc.start
            self._decoder.reset()
            self._chars += len(good)
            ops = self._run(good, False) if good else []
            err = self._make_error(
                f"invalid UTF-8: {exc.reason} (byte {bytes(exc.object[exc.start:exc.start + 1])!r})",
                self._pending,
                len(self._pending),
                expected="valid UTF-8",
                got=repr(bytes(exc.object[exc.start : exc.end])),
                pointer=self._where(),
            )
            err.offset = before - buffered + exc.start
            self._raise(err, ops)
            raise AssertionError("unreachable") from None  # pragma: no cover

    def _limit_from_size(self, chunk: str | bytes | bytearray | memoryview) -> None:
        """Refuse ``chunk``, which took the input past ``max_bytes`` (UTF-8 bytes)."""
        # A str stream counts characters in ``_size`` and the bytes beyond one per
        # character as ``max_bytes - _room``.
        total = self._size + self._max_bytes - self._room
        self._size -= len(chunk)  # the refused chunk is not part of the input: positions end before it
        err = self._make_error(
            f"input exceeds max_bytes ({self._max_bytes} bytes)",
            self._pending,
            len(self._pending),
            expected=f"at most {self._max_bytes} bytes",
            got=f"{total} bytes",
            pointer=self._where(),
            limit=True,
        )
        self._raise(err, [])

    # ------------------------------------------------------------------ strings
    def _announce_string(self) -> dict[str, Any]:
        parts = self._parts
        cur = "".join(parts)
        parts[:] = [cur] if cur else []
        self._mark = len(parts)
        self._compact = 0
        self._s_holder[self._s_slot] = cur
        self._s_announced = True
        return {"op": self._s_op, "path": self._s_path, "value": cur}

    def _flush_string(self, ops: list[dict[str, Any]]) -> None:
        """Emit the open string's growth since the last emission: one op at most.

        The one place that decides between ``add`` (first sight), ``append``
        (append mode, not the root) and ``replace``; used at the end of a feed,
        when the string closes, and before an error is raised.
        """
        if not self._s_announced:
            ops.append(self._announce_string())
            return
        parts = self._parts
        mark = self._mark
        if len(parts) <= mark:
            return
        path = self._s_path
        if self._append and path:
            new = parts[mark] if len(parts) == mark + 1 else "".join(parts[mark:])
            del parts[mark:]
            parts.append(new)
            if len(parts) - self._compact > 32:
                # Keep a long string in few pieces, not one per feed: join the small
                # pieces after the compacted ones, then merge while the earlier piece
                # is not longer (a binary counter). Each character is copied O(log n)
                # times; the list holds O(log n) + 32 pieces.
                k = self._compact
                parts[k:] = ["".join(parts[k:])]
                while len(parts) > 1 and len(parts[-2]) <= len(parts[-1]):
                    last = parts.pop()
                    parts[-1] += last
                self._compact = len(parts)
            self._mark = len(parts)
            ops.append({"op": "append", "path": path, "value": new})
        else:
            cur = "".join(parts)
            parts[:] = [cur]
            self._mark = 1
            self._s_holder[self._s_slot] = cur
            ops.append({"op": "replace", "path": path, "value": cur})

    def _sync_string(self) -> None:
        """Bring the open string's slot in ``value`` up to date (append mode lags)."""
        if self._state == _S_STRING and self._s_announced:
            parts = self._parts
            mark = self._mark
            head = "".join(parts[:mark])
            tail = parts[mark:]
            parts[:] = [head, *tail] if head else tail
            self._mark = self._compact = 1 if head else 0
            self._s_holder[self._s_slot] = head + "".join(tail)

    # ------------------------------------------------------------------ the parser
    def _run(self, chunk: str, final: bool) -> list[dict[str, Any]]:
        """Parse ``pending + chunk``; see the module docstring. ``final`` = end of input.

        Hot loop: states are compared as int literals (see the state table), and
        a key, its colon and the start of its value are handled in one pass
        through the loop body.
        """
        ops: list[dict[str, Any]] = []
        s = self._pending + chunk  # CPython returns ``chunk`` itself when nothing is pending
        self._pending = ""
        n = len(s)
        i = 0
        state = self._state
        conts = self._conts
        ptrs = self._ptrs
        parts = self._parts
        if state == 8:  # _S_KEYSTR: a key cut by the last chunk; most often its rest and ':' are here
            m = _KEY_TAIL(s)
            if m is not None:
                parts.append(m.group(1))
                self._key = "".join(parts)
                parts.clear()
                state = 5  # _S_COLON, at the ':'
                i = m.end() - 1
        while i < n:
            # ------------------------------------------------ inside a string or key
            if state >= 7:  # _S_STRING, _S_KEYSTR
                j = _PLAIN(s, i).end()
                if j > i:
                    parts.append(s[i:j])
                if j == n:
                    break
                c = s[j]
                if c == '"':
                    i = j + 1
                    if state == 8:
                        self._key = "".join(parts)
                        parts.clear()
                        state = 5  # _S_COLON
                        continue
                    # The value string is complete: one op for its growth in this feed.
                    self._flush_string(ops)
                    # (append mode leaves the slot in ``value`` behind until now)
                    self._s_holder[self._s_slot] = parts[0] if len(parts) == 1 else "".join(parts)
                    parts.clear()
                    self._mark = 0
                    self._compact = 0
                    self._s_announced = False
                    state = 2 if len(conts) > 1 else 6  # _S_AFTER / _S_DONE
                    continue
                if c == "\\":
                    decoded, end = self._escape(s, j, n, state, ops)
                    if decoded is None:
                        # Cut in the middle: wait for the rest of the escape.
                        self._pending = s[j:]
                        break
                    parts.append(decoded)
                    i = end
                    continue
                if "\ud800" <= c <= "\udfff":
                    self._fail(state, s, j, ops, f"lone surrogate {c!r} in string", "a Unicode scalar value", c)
                self._fail(
                    state, s, j, ops, f"unescaped control character {c!r} in string",
                    "an escaped character", c,
                )

            c = s[i]
            if c in " \t\n\r":
                if c == " " and i + 1 < n and s[i + 1] not in " \t\n\r":
                    i += 1  # one space, the common case (", " and ": " separators)
                else:
                    i = self._skip_ws(s, i, n)
                    if i == n:
                        break
                c = s[i]

            # ------------------------------------------------ after a value
            if state == 2:  # _S_AFTER
                if type(conts[-1]) is list:
                    if c == ",":
                        state = 0  # _S_VALUE
                        i += 1
                        continue
                    if c == "]":
                        conts.pop()
                        ptrs.pop()
                        if len(conts) == 1:
                            state = 6  # _S_DONE
                        i += 1
                        continue
                    self._fail(
                        state, s, i, ops, f"expected ',' or ']' after array element, got {c!r}", "',' or ']'", c
                    )
                if c == ",":
                    state = 3  # _S_KEY
                    i += 1
                    if i == n:
                        break
                    c = s[i]
                    if c in " \t\n\r":
                        continue  # the loop's top skips whitespace
                elif c == "}":
                    conts.pop()
                    ptrs.pop()
                    if len(conts) == 1:
                        state = 6  # _S_DONE
                    i += 1
                    continue
                else:
                    self._fail(state, s, i, ops, f"expected ',' or '}}' after member, got {c!r}", "',' or '}'", c)

            # ------------------------------------------------ keys: on to the value
            if state >= 3:
                if state <= 4:  # _S_KEY, _S_KEY_OR_END
                    if c == '"':
                        m = _KEY_COLON(s, i)
                        if m is None:
                            # A key cut by the chunk end, with escapes, or spaced from its colon.
                            state = 8  # _S_KEYSTR
                            i += 1
                            continue
                        key = m.group(1)
                        self._key = key
                        i = m.end()
                    elif c == "}" and state == 4:
                        conts.pop()
                        ptrs.pop()
                        state = 2 if len(conts) > 1 else 6
                        i += 1
                        continue
                    else:
                        exp, ctx = _EXPECTED[state]
                        self._fail(state, s, i, ops, f"expected {exp}{ctx}, got {c!r}", exp, c)
                elif state == 5:  # _S_COLON
                    if c != ":":
                        self._fail(state, s, i, ops, f"expected ':' after key, got {c!r}", "':'", c)
                    i += 1
                    key = self._key
                else:  # _S_DONE
                    self._fail(state, s, i, ops, f"unexpected data after the JSON value, got {c!r}", "end of input", c)
                # The key and its colon are in: the member's pointer, computed once.
                if "~" in key or "/" in key:  # checked inline: most keys need no call
                    key = escape_token(key)
                mpath = ptrs[-1] + "/" + key
                self._mpath = mpath
                state = 0  # _S_VALUE
                if len(mpath) > self._max_pointer:
                    self._fail(
                        state, s, i, ops, f"JSON pointer longer than max_pointer_length ({self._max_pointer})",
                        f"a pointer of at most {self._max_pointer} characters", f"{len(mpath)} characters",
                        limit=True,
                    )
                if i == n:
                    break
                c = s[i]
                if c in " \t\n\r":
                    continue  # the loop's top skips whitespace

            # ------------------------------------------------ a value starts at s[i]
            top = conts[-1]
            if type(top) is list:
                if c == "]" and state == 1:
                    conts.pop()
                    ptrs.pop()
                    state = 2 if len(conts) > 1 else 6
                    i += 1
                    continue
                slot: Any = len(top)
                path = ptrs[-1] + "/" + str(slot)
                op = "add"
            else:
                slot = self._key
                path = self._mpath
                if slot not in top:
                    op = "add"
                elif top is not self._rootbox:
                    op = "replace"  # a duplicate key: the last one wins
                else:
                    # Component props (emit_root=False): the root box already holds
                    # the root object, which is not announced.
                    if c != "{":
                        self._fail(state, s, i, ops, "tool arguments must be a JSON object", "'{'", c)
                    conts.append(top[""])
                    ptrs.append("")
                    state = 4  # _S_KEY_OR_END
                    i += 1
                    continue
            if c == '"':
                j = _PLAIN(s, i + 1).end()
                if j < n and s[j] == '"':
                    # The whole string is in this chunk: one op, no open-string bookkeeping.
                    value = s[i + 1 : j]
                    if type(top) is list:
                        top.append(value)
                    else:
                        top[slot] = value
                    ops.append({"op": op, "path": path, "value": value})
                    state = 2 if len(conts) > 1 else 6
                    i = j + 1
                    continue
                self._s_holder = top
                self._s_slot = slot
                self._s_path = path
                self._s_op = op
                state = 7  # _S_STRING
                value = s[i + 1 : j]
                if type(top) is list:
                    top.append(value)
                else:
                    top[slot] = value
                if j == n:
                    # The chunk ends inside the string: announce it now with what we have.
                    ops.append({"op": op, "path": path, "value": value})
                    if value:
                        parts.append(value)
                    self._mark = len(parts)
                    self._s_announced = True
                    i = n
                    break
                if value:
                    parts.append(value)
                self._s_announced = False
                self._mark = 0
                i = j
                continue
            if c in "-0123456789":
                if s[-1] in "0123456789+-.eE":
                    # The chunk may end inside this number: if so, wait for the rest.
                    k = _NUM_RUN(s, i).end()
                    if k == n and not final:
                        if k - i > self._max_number:
                            self._fail(
                                state, s, i, ops, f"number longer than max_number_length ({self._max_number})",
                                f"at most {self._max_number} characters", f"{k - i} characters", limit=True,
                            )
                        self._pending = s[i:]
                        break
                m = _NUMBER(s, i)
                j = m.end() if m is not None else i
                if m is None or j == n or s[j] in "0123456789+-.eE":
                    k = _NUM_RUN(s, i).end()
                    if k - i > self._max_number:
                        self._fail(
                            state, s, i, ops, f"number longer than max_number_length ({self._max_number})",
                            f"at most {self._max_number} characters", f"{k - i} characters", limit=True,
                        )
                    if k == n and not final:
                        # It may go on in the next chunk: numbers appear only when complete.
                        self._pending = s[i:]
                        break
                    if m is None or j != k:
                        self._number_error(state, s, i, m, n, ops)
                text = s[i:j]
                if j - i > self._max_number:
                    self._fail(
                        state, s, i, ops, f"number longer than max_number_length ({self._max_number})",
                        f"at most {self._max_number} characters", f"{j - i} characters", limit=True,
                    )
                if m.lastindex:  # type: ignore[union-attr]  # a fraction or an exponent
                    number: Any = float(text)
                    if number == _INF or number == -_INF:
                        self._fail(
                            state, s, i, ops, f"number out of range: {text[:40]}", "a finite number", text[:40]
                        )
                else:
                    try:
                        number = int(text)
                    except ValueError:  # past sys.get_int_max_str_digits
                        self._fail(
                            state, s, i, ops, "integer too long to convert", "a shorter integer",
                            f"{j - i} digits", limit=True,
                        )
                if type(top) is list:
                    top.append(number)
                else:
                    top[slot] = number
                ops.append({"op": op, "path": path, "value": number})
                state = 2 if len(conts) > 1 else 6
                i = j
                continue
            if c == "{" or c == "[":
                if len(conts) > self._max_depth:
                    self._fail(
                        state, s, i, ops, f"nesting deeper than max_depth ({self._max_depth})",
                        f"at most {self._max_depth} levels", c, limit=True,
                    )
                if len(path) > self._max_pointer:
                    self._fail(
                        state, s, i, ops, f"JSON pointer longer than max_pointer_length ({self._max_pointer})",
                        f"a pointer of at most {self._max_pointer} characters", f"{len(path)} characters",
                        limit=True,
                    )
                if c == "{":
                    new: Any = {}
                    ops.append({"op": op, "path": path, "value": {}})
                    state = 4  # _S_KEY_OR_END
                else:
                    new = []
                    ops.append({"op": op, "path": path, "value": []})
                    state = 1  # _S_VALUE_OR_END
                if type(top) is list:
                    top.append(new)
                else:
                    top[slot] = new
                conts.append(new)
                ptrs.append(path)
                i += 1
                continue
            lit = _LITERALS.get(c)
            if lit is not None:
                word, literal = lit
                if s.startswith(word, i):
                    if type(top) is list:
                        top.append(literal)
                    else:
                        top[slot] = literal
                    ops.append({"op": op, "path": path, "value": literal})
                    state = 2 if len(conts) > 1 else 6
                    i += len(word)
                    continue
                rest = s[i : i + len(word)]
                if i + len(rest) == n and word.startswith(rest) and not final:
                    self._pending = rest
                    break
                k = i
                while k < n and k - i < len(word) and s[k] == word[k - i]:
                    k += 1
                if k == n:
                    self._fail(
                        state, s, k, ops, f"unexpected end of input in literal {word!r}", repr(word), "end of input"
                    )
                self._fail(state, s, k, ops, f"invalid literal: expected {word!r}, got {s[k]!r}", repr(word), s[k])
            exp = "a value or ']'" if state == 1 else "a value"
            self._fail(state, s, i, ops, f"expected {exp}, got {c!r}", exp, c)
        # ---- end of the available text
        self._state = state
        if state >= 7:
            if state == 7:
                if len(parts) > self._mark or not self._s_announced:
                    self._flush_string(ops)
            elif len(parts) > 16:
                self._join_key(s, ops)
        if final and state != 6:
            self._fail_end(ops)
        return ops

    def _join_key(self, s: str, ops: list[dict[str, Any]]) -> None:
        """A key arriving in many pieces (``s`` ends the input so far): join them,
        and refuse the key before it grows past the longest pointer it could be part of."""
        parts = self._parts
        key = "".join(parts)
        parts[:] = [key]
        if len(key) >= self._max_pointer:
            self._fail(
                _S_KEYSTR, s, len(s), ops, f"JSON pointer longer than max_pointer_length ({self._max_pointer})",
                f"a pointer of at most {self._max_pointer} characters", f"a key of {len(key)} characters",
                limit=True,
            )

    def _skip_ws(self, s: str, i: int, n: int) -> int:
        """Skip the whitespace run at ``s[i]``, counting its newlines; return where it ends."""
        j = _WS(s, i).end()
        newlines = s.count("\n", i, j)
        if newlines:
            self._line += newlines
            # ``s`` ends at the end of the input so far, so its start is total - len(s).
            self._line_start = self._chars_total() - n + s.rindex("\n", i, j) + 1
        return j

    # ------------------------------------------------------------------ tokens
    def _escape(self, s: str, j: int, n: int, state: int, ops: list[dict[str, Any]]) -> tuple[str | None, int]:
        """Decode the escape at ``s[j]`` (a backslash). ``(None, j)`` if cut off."""
        if j + 1 >= n:
            return None, j
        c = s[j + 1]
        if c != "u":
            decoded = _SIMPLE_ESCAPES.get(c)
            if decoded is None:
                self._fail(state, s, j, ops, f"invalid escape '\\{c}' in string", "one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", "\\" + c)
            return decoded, j + 2
        hex1 = s[j + 2 : j + 6]
        if len(hex1) < 4:
            if not _HEX_PART(hex1):
                self._bad_hex(s, j + 2, n, state, ops)
            return None, j
        if not _HEX4(hex1):
            self._bad_hex(s, j + 2, n, state, ops)
        code = int(hex1, 16)
        if code < 0xD800 or code > 0xDFFF:
            return chr(code), j + 6
        if code >= 0xDC00:
            self._fail(state, s, j, ops, f"lone low surrogate '\\u{hex1}' in string", "a high surrogate first", "\\u" + hex1)
        # A high surrogate: the low half must follow at once.
        tail = s[j + 6 : j + 12]
        expect = "\\u"
        if tail[:2] != expect[: len(tail[:2])]:
            self._fail(
                state, s, j, ops, f"lone high surrogate '\\u{hex1}' in string (no '\\u' low surrogate follows)",
                "a low surrogate escape", tail[:2],
            )
        if len(tail) < 6:
            if not _HEX_PART(tail[2:]):
                self._bad_hex(s, j + 8, n, state, ops)
            return None, j
        hex2 = tail[2:]
        if not _HEX4(hex2):
            self._bad_hex(s, j + 8, n, state, ops)
        low = int(hex2, 16)
        if not 0xDC00 <= low <= 0xDFFF:
            self._fail(
                state, s, j, ops, f"high surrogate '\\u{hex1}' followed by '\\u{hex2}', not a low surrogate",
                "a low surrogate escape", "\\u" + hex2,
            )
        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), j + 12

    def _bad_hex(self, s: str, k: int, n: int, state: int, ops: list[dict[str, Any]]) -> None:
        while k < n and s[k] in "0123456789abcdefABCDEF":
            k += 1
        got = s[k] if k < n else "end of input"
        self._fail(state, s, k, ops, f"expected 4 hex digits after '\\u', got {got!r}", "a hex digit", got)

    def _number_error(self, state: int, s: str, i: int, m: Any, n: int, ops: list[dict[str, Any]]) -> None:
        """Explain why the number at ``s[i:]`` is malformed (``m`` = the valid prefix, if any)."""
        k = i + 1 if s[i] == "-" else i
        if k == n:
            self._fail(state, s, k, ops, "unexpected end of input in number", "a digit", "end of input")
        if m is None:
            self._fail(state, s, k, ops, f"expected a digit after '-', got {s[k]!r}", "a digit", s[k])
        if s[k] == "0" and k + 1 < n and s[k + 1] in "0123456789":
            self._fail(
                state, s, k + 1, ops, "leading zeros are not allowed in numbers",
                "'.', 'e' or the end of the number", s[k + 1],
            )
        # Say what is wrong with the character where the valid number stops.
        j = m.end()
        c = s[j] if j < n else ""
        if c == "." and m.group(1) is None and m.group(2) is None:
            got = s[j + 1] if j + 1 < n else "end of input"
            self._fail(state, s, j + 1, ops, f"expected a digit after '.', got {got!r}", "a digit", got)
        if c in ("e", "E") and m.group(2) is None:
            k = j + 1
            if k < n and s[k] in "+-":
                k += 1
            got = s[k] if k < n else "end of input"
            self._fail(state, s, k, ops, f"expected a digit in the exponent, got {got!r}", "a digit", got)
        got = c or "end of input"
        self._fail(state, s, j, ops, f"unexpected {got!r} after number", "',' or the end of the container", got)

    # ------------------------------------------------------------------ errors
    def _where(self) -> str:
        """The pointer to blame: the open string or scalar, else the innermost container."""
        state = self._state
        if state == _S_STRING:
            return self._s_path
        if state in (_S_VALUE, _S_VALUE_OR_END):
            return self._value_path()
        return self._ptrs[-1]

    def _make_error(
        self,
        message: str,
        s: str,
        k: int,
        *,
        expected: str,
        got: str,
        pointer: str,
        limit: bool = False,
    ) -> JSONStreamError:
        # Newlines only ever occur in whitespace, which the parser counts as it
        # skips it; so the line is current and the column is the distance from
        # the last line start.
        base = self._chars_total() - len(s)  # ``s`` always ends at the end of the input so far
        line = self._line
        column = base + k - self._line_start + 1
        if self._mode == 2:
            decoded_total = self._bytes_in - len(self._decoder.getstate()[0])
            offset = decoded_total - len(s[k:].encode("utf-8"))
        else:
            offset = base + k
        cls = JSONStreamLimitError if limit else JSONStreamError
        # A pointer can be kilobytes long (deep nesting); the message shows its ends.
        shown = pointer if len(pointer) <= 120 else pointer[:60] + "..." + pointer[-57:]
        text = f"{message} (line {line}, column {column}, offset {offset}, pointer {shown!r})"
        return cls(text, offset=offset, line=line, column=column, pointer=pointer, expected=expected, got=got)

    def _raise(self, err: JSONStreamError, ops: list[dict[str, Any]]) -> None:
        if self._state == _S_STRING:
            self._flush_string(ops)
        err.ops = ops
        self._error = err
        self._ready = False
        raise err

    def _fail(
        self,
        state: int,
        s: str,
        k: int,
        ops: list[dict[str, Any]],
        message: str,
        expected: str,
        got: str,
        *,
        limit: bool = False,
    ) -> None:
        """Raise (and remember) the error at ``s[k]``, parsing in ``state``."""
        self._state = state  # so that the pointer names the value or container being parsed
        err = self._make_error(message, s, k, expected=expected, got=got, pointer=self._where(), limit=limit)
        self._raise(err, ops)

    def _fail_end(self, ops: list[dict[str, Any]]) -> None:
        state = self._state
        what = {
            _S_STRING: "an unterminated string",
            _S_KEYSTR: "an unterminated key",
            _S_AFTER: "an unclosed " + ("array" if type(self._conts[-1]) is list else "object"),
        }.get(state)
        if what is None:
            if self._pending:
                what = "an incomplete value"
            elif state == _S_VALUE and len(self._conts) == 1:
                what = "no JSON value"
            else:
                what = "an incomplete " + ("array" if type(self._conts[-1]) is list else "object")
        expected = {
            _S_STRING: "'\"'",
            _S_KEYSTR: "'\"'",
            _S_AFTER: "',' or '" + ("]" if type(self._conts[-1]) is list else "}") + "'",
        }.get(state) or _EXPECTED.get(state, ("more input", ""))[0]
        pending = self._pending
        self._fail(
            state, pending, len(pending), ops, f"unexpected end of input: {what}, expected {expected}",
            expected, "end of input",
        )
