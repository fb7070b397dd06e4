"""The event log a server runs with, named by a URL (``agui-engine serve --event-log``):
the in-memory log of one process, or a Redis log shared by several gateway nodes. The one
place that knows both kinds (``eventlog`` and ``redislog`` do not import each other).
"""

from __future__ import annotations

from agui_engine.protocol.errors import UsageError

from .eventlog import EventLog, InMemoryEventLog

__all__ = ["open_event_log"]


async def open_event_log(url: str | None = None) -> EventLog:
    """The event log named by ``url``: ``None`` or ``"memory"`` for an
    :class:`InMemoryEventLog` (one process), ``redis://host:port/db`` (or
    ``rediss://``) for a connected :class:`~transports.redislog.RedisEventLog`
    shared by several gateway nodes (call its ``aclose()`` at the end).
    Raises UsageError (unknown scheme, the ``redis`` package missing) and
    EventLogUnavailableError (Redis unreachable or too old)."""
    if url is None or url == "memory":
        return InMemoryEventLog()
    scheme = url.partition("://")[0].lower()
    if scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f"event log {url!r}: use 'memory' or a redis://host:port/db URL")
    try:
        import redis  # noqa: F401 - checks the optional dependency
    except ImportError:
        raise UsageError("a Redis event log needs the redis package: pip install 'agui-engine[redis]'") from None
    from .redislog import RedisEventLog

    try:
        log = RedisEventLog(url)
    except ValueError as exc:  # redis-py's URL parser
        raise UsageError(f"event log {url!r}: {exc}") from None
    try:
        await log.connect()
    except BaseException:
        await log.aclose()
        raise
    return log
