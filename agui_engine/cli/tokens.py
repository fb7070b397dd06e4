"""The tokens file of ``agui-engine serve --auth-tokens-file FILE``: bearer tokens and
the principal each one names, so one gateway serves several users from the command
line as ``create_app(auth_token={token: name})`` does in code (each run is bound to the
principal that started it; others get 404 for it).

Two forms, told apart by the first character that is not white space:

* lines ``TOKEN NAME`` (the token, white space, the name: the rest of the line);
  blank lines and lines starting with ``#`` are skipped;
* a JSON object ``{"TOKEN": "NAME", ...}``.

A token is 1..MAX_TOKEN_CHARS printable ASCII characters without white space (what an
``Authorization: Bearer`` header carries); a name is non-empty. Two tokens may name one
principal (a key being rotated); one token twice is an error. Every error is a
:class:`~agui_engine.protocol.errors.UsageError` of one line naming the file and the line.
``serve`` reads the file at start and again on SIGHUP (a bad file then keeps the
tokens in use; see cli/serve.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from agui_engine.protocol.errors import UsageError

__all__ = ["MAX_AUTH_TOKENS", "MAX_TOKENS_FILE_BYTES", "MAX_TOKEN_CHARS", "parse_tokens", "read_small_file", "read_tokens_file"]

#: Bytes of a tokens file read at most: ~10,000 lines of a 64-character token and a
#: name, far above MAX_AUTH_TOKENS; a larger file is a wrong path (a log, a binary).
MAX_TOKENS_FILE_BYTES = 1024 * 1024

#: Tokens one file may hold. Every request compares its token with each one in
#: constant time (``check_bearer``: which token matched must not show in the
#: timing), so the count is a per-request cost: 1,000 is well under a millisecond.
MAX_AUTH_TOKENS = 1000

#: Characters of one token: a 256-bit secret is 43 characters of base64url; 4,096 is
#: far above any real token and keeps a pasted certificate or file out.
MAX_TOKEN_CHARS = 4096


def _check_token(token: str, where: str) -> None:
    if not token:
        raise UsageError(f"{where}: an empty token")
    if len(token) > MAX_TOKEN_CHARS:
        raise UsageError(f"{where}: the token is {len(token)} characters, more than {MAX_TOKEN_CHARS}")
    if not all("!" <= ch <= "~" for ch in token):
        raise UsageError(f"{where}: a token is printable ASCII without spaces (it goes in an Authorization header)")


def parse_tokens(text: str, where: str = "the tokens file") -> dict[str, str]:
    """Token -> principal name from a tokens file's text (either form: see the module
    docstring). Raises UsageError naming ``where`` and the line."""
    tokens: dict[str, str] = {}
    lines: dict[str, int] = {}
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where} line {exc.lineno}: not JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(doc, dict):
            raise UsageError(f"{where}: a JSON tokens file is one object {{\"TOKEN\": \"NAME\", ...}}")
        pairs = [(str(token), name, 0) for token, name in doc.items()]
    else:
        pairs = []
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            token, *name = stripped.split(None, 1)
            pairs.append((token, name[0] if name else "", number))
    for token, name, number in pairs:
        at = f"{where} line {number}" if number else f"{where} (token {len(tokens) + 1})"
        _check_token(token, at)
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"{at}: no principal name after the token (write 'TOKEN NAME')")
        if token in tokens:
            first = f" (first on line {lines[token]})" if number else ""
            raise UsageError(f"{at}: this token is listed twice{first}")
        if len(tokens) == MAX_AUTH_TOKENS:
            raise UsageError(f"{at}: more than {MAX_AUTH_TOKENS} tokens")
        tokens[token] = name.strip()
        lines[token] = number
    if not tokens:
        raise UsageError(f"{where}: no tokens (write one 'TOKEN NAME' per line): nobody could connect")
    return tokens


def read_tokens_file(path: str | Path) -> dict[str, str]:
    """Token -> principal name from the file at ``path``. Raises UsageError (one line:
    cannot be read, too large, not UTF-8, or what :func:`parse_tokens` finds)."""
    where = f"tokens file {str(path)!r}"
    return parse_tokens(read_small_file(path, MAX_TOKENS_FILE_BYTES, where), where)


def read_small_file(path: str | Path, max_bytes: int, where: str) -> str:
    """The UTF-8 text of a configuration file (``where`` names it in the errors). Raises
    UsageError (one line) when it cannot be read, is over ``max_bytes`` or is not UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the {where}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UsageError(f"the {where} is larger than {max_bytes} bytes: is it the right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{where} line {line}: not UTF-8 text") from None
