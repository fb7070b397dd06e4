"""Secrets out of text: :func:`redact` replaces every API key in a string with
``[redacted]``. Its own module (no HTTP library) so that the command line's log filter
(``agui_engine.cli.logs``) uses it without importing httpx with the provider base
(``agui_engine.adapters.provider``, whose ``scrub`` calls it for every error string)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MIN_REDACTED_SECRET_CHARS", "REDACTED", "redact"]

#: Secrets shorter than this are not redacted: a real API key is 30+ characters, while a
#: placeholder key ("x", "sk", an empty env var) would be replaced inside ordinary words
#: and numbers all over an error message, mangling it while protecting nothing.
MIN_REDACTED_SECRET_CHARS = 4
#: What a secret becomes.
REDACTED = "[redacted]"


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (API key) replaced by ``[redacted]``.

    Secrets shorter than :data:`MIN_REDACTED_SECRET_CHARS` are left alone (see there).
    """
    for secret in secrets:
        if len(secret) >= MIN_REDACTED_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    return text
