"""The command line's logging: where records go, and what no record may show.

Theory of operation
-------------------
:func:`configure_logging` sets up stderr logging for a command (``serve``'s
``--log-level``) and puts a :class:`SecretFilter` on every root handler, so it
sees every record that reaches the output, whichever library logged it. At
``--log-level debug`` the HTTP and WebSocket libraries trace their traffic:
httpcore logs an upstream's response headers (``[(b'x-api-key', b'...')]``),
h2/hpack the request headers of HTTP/2, websockets every handshake header
(``> Authorization: Bearer ...``) and httpx, at INFO, each request URL (a
``?key=`` in it). The filter rewrites such a record before any handler formats it:

1. the values of the secrets it knows -- every provider API key found in the
   environment (each provider client's ``key_env``) and the gateway's bearer
   token -- are replaced wherever they appear, by the adapters' own
   :func:`~agui_engine.adapters.provider.redact` (the redaction of provider errors);
2. whatever follows a credential header name (SECRET_HEADER_NAMES) in the two
   shapes those libraries print, ``name: value`` and ``(b'name', b'value')``, the
   value of a credential query parameter (SECRET_QUERY_NAMES) and of a JSON
   ``runKey`` member (SECRET_JSON_MEMBERS), is replaced too,
   so a key the filter was not told about (a ``py:`` agent's own client) is covered.

The message (with its arguments merged), a traceback and a stack are rewritten;
nothing is dropped, so the trace stays useful. Raises nothing. One thing is cut: a
message longer than MAX_LOGGED_MESSAGE_CHARS keeps its start (after the scrubbing, so
the cut never leaves the start of a secret) and says how much was left out -- at
``--log-level debug`` the SDKs log whole protocol messages (a 500 KB proxied MCP
notification was one 500 KB line).

Console noise: agent frameworks print to stdout as they run -- CrewAI draws boxed
``rich`` panels (about 60 lines a run) for every crew, task, tool and flow method. A
server's stdout is not its log (and with ``--transport stdio`` it carries the protocol),
so :func:`route_console` puts a :class:`ConsoleToLog` in ``sys.stdout``'s place: every
line printed is a record of the ``agui_engine.console`` logger at DEBUG (ANSI colours
stripped, blank lines dropped), shown by ``--log-level debug`` and through the same
:class:`SecretFilter` as every other record.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TextIO

from agui_engine.adapters.redaction import REDACTED, redact

__all__ = [
    "CONSOLE_LOGGER",
    "ConsoleToLog",
    "MAX_LOGGED_MESSAGE_CHARS",
    "REDACTED",
    "SECRET_HEADER_NAMES",
    "SECRET_JSON_MEMBERS",
    "SECRET_QUERY_NAMES",
    "SecretFilter",
    "configure_logging",
    "cut_log_text",
    "known_secrets",
    "route_console",
    "scrub_log_text",
]

#: Characters of one log record's message; the rest is cut (with a note saying how many).
#: 8 KiB shows a whole JSON-RPC message of any ordinary size and a full traceback line; a
#: payload logged whole by a library at DEBUG (hundreds of KB) is not a log line.
MAX_LOGGED_MESSAGE_CHARS = 8 * 1024

#: Header names whose values are credentials (lower case): the bearer token, the
#: providers' key headers (Anthropic ``x-api-key``, Gemini ``x-goog-api-key``,
#: Azure OpenAI ``api-key``), proxy credentials and cookies.
SECRET_HEADER_NAMES = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "set-cookie",
    "x-agui-run-key",
)
#: Query parameters whose values are credentials: ``key`` (Google APIs),
#: ``access_token`` (the WebSocket gateway's browser token), ``api_key``, ``token``.
SECRET_QUERY_NAMES = ("key", "api_key", "access_token", "token", "runKey")
#: JSON members whose values are credentials: a run key in a WebSocket line that
#: websockets' frame trace prints (spec/transports.md §2.6).
SECRET_JSON_MEMBERS = ("runKey",)

_NAMES = "|".join(re.escape(n) for n in sorted(SECRET_HEADER_NAMES, key=len, reverse=True))
#: ``(b'name', b'value')`` / ``('name', 'value')``: httpcore's and hpack's header tuples.
_HEADER_TUPLE = re.compile(rf"""(?i)(\(\s*b?(['"])(?:{_NAMES})\2\s*,\s*b?)(['"])(?:\\.|(?!\3).)*\3""")
#: ``name: value`` up to the end of the line: websockets' handshake trace, raw HTTP.
_HEADER_LINE = re.compile(rf"(?i)(?<![\w-])((?:{_NAMES})\s*:[ \t]*)[^\r\n]+")
_QUERY = re.compile(rf"(?i)([?&](?:{'|'.join(SECRET_QUERY_NAMES)})=)[^&#\s'\"]+")
_JSON_MEMBER = re.compile(rf"""(\\?"(?:{'|'.join(SECRET_JSON_MEMBERS)})\\?"\s*:\s*\\?")[^"\\]*""")


def scrub_log_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every known secret and every credential header / query value replaced by REDACTED."""
    text = redact(text, secrets)
    text = _HEADER_TUPLE.sub(rf"\1\3{REDACTED}\3", text)
    text = _HEADER_LINE.sub(rf"\1{REDACTED}", text)
    text = _JSON_MEMBER.sub(rf"\1{REDACTED}", text)
    return _QUERY.sub(rf"\1{REDACTED}", text)


def cut_log_text(text: str) -> str:
    """``text`` cut to MAX_LOGGED_MESSAGE_CHARS, with a note of how many characters were left out."""
    if len(text) <= MAX_LOGGED_MESSAGE_CHARS:
        return text
    return (f"{text[:MAX_LOGGED_MESSAGE_CHARS]}... [{len(text) - MAX_LOGGED_MESSAGE_CHARS} more characters cut: "
            f"MAX_LOGGED_MESSAGE_CHARS={MAX_LOGGED_MESSAGE_CHARS}]")


def known_secrets(env: Mapping[str, str], extra_env_names: Iterable[str] = ()) -> list[str]:
    """The secrets found in ``env``: every provider client's key variables
    (``key_env``) and the variables named in ``extra_env_names`` (the bearer token's)."""
    from agui_engine.adapters.models import PROVIDER_CLIENTS

    names = {n for cls in PROVIDER_CLIENTS.values() for n in getattr(cls, "key_env", ())}
    names.update(extra_env_names)
    return sorted({env[n] for n in names if env.get(n)}, key=len, reverse=True)


class SecretFilter(logging.Filter):
    """Rewrites every record it sees so that no secret reaches a log line (see the
    module docstring). Put on handlers, it covers every logger that propagates."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a broken format string: logging reports it itself
            return True
        clean = cut_log_text(scrub_log_text(message, self.secrets))
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Cached where every Formatter looks first (Formatter.format keeps exc_text).
            record.exc_text = scrub_log_text(logging.Formatter().formatException(record.exc_info), self.secrets)
        elif record.exc_text:
            record.exc_text = scrub_log_text(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = scrub_log_text(record.stack_info, self.secrets)
        return True


def configure_logging(level: str, *, secret_env_names: Iterable[str] = (), env: Mapping[str, str] | None = None) -> SecretFilter:
    """Log to stderr at ``level`` (a name: ``"debug"``, ``"INFO"`` ...) with a
    :class:`SecretFilter` on every root handler, knowing the secrets of ``env``
    (default ``os.environ``; see :func:`known_secrets`). Returns the filter."""
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    secret_filter = SecretFilter(known_secrets(os.environ if env is None else env, secret_env_names))
    for handler in logging.getLogger().handlers:
        handler.addFilter(secret_filter)
    return secret_filter


#: The logger what a served agent prints to stdout is logged by (at DEBUG).
CONSOLE_LOGGER = "agui_engine.console"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class ConsoleToLog(io.TextIOBase):
    """A text stream whose every complete line becomes a DEBUG record of ``logger``
    (ANSI escapes stripped, blank lines dropped); what :func:`route_console` puts in
    ``sys.stdout``'s place. Not a terminal, so ``rich`` draws plain boxes without colour.
    Safe to write from several threads (a framework's kickoff threads): lines never interleave."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger
        self._pending = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            line, self._pending = self._pending, ""
        if line:
            self._emit(line)

    def _emit(self, line: str) -> None:
        clean = _ANSI.sub("", line).rstrip()
        if clean.strip() and self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("console: %s", clean)


@contextmanager
def route_console(logger_name: str = CONSOLE_LOGGER) -> Iterator[TextIO]:
    """While inside, ``sys.stdout`` is a :class:`ConsoleToLog` of ``logger_name``; yields
    the real stdout (where a stdio server writes its protocol lines). Restores it on exit."""
    real = sys.stdout
    sys.stdout = ConsoleToLog(logging.getLogger(logger_name))
    try:
        yield real
    finally:
        sys.stdout.flush()
        sys.stdout = real
