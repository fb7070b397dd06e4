"""The event log on Redis Streams, shared by several gateway nodes.

Theory of operation
-------------------
Keys of one run (``<prefix>`` defaults to ``agui:``; the run id sits in a hash
tag so a Redis Cluster keeps a run's keys on one shard)::

    <prefix>{<runId>}:s   stream: the events, in batches
    <prefix>{<runId>}:m   hash:   owner (node id), thread (thread id)
    <prefix>{<runId>}:r   zset:   nodes following the run -> when they last read (ms)
    <prefix>live:{<threadId>}   string: the thread's latest run started by any node (its keys' TTL)
    <prefix>node:<node>   string: the node's heartbeat (expires after OWNER_TTL_SECONDS)
    <prefix>ctl:<node>    pub/sub channel: run ids to cancel, sent to the owner

Thread histories (:class:`~transports.history.ThreadStore`; spec/transports.md §4.4)::

    <prefix>thread:{<threadId>}:h   list:   the thread's kept run records, oldest first
    <prefix>thread:{<threadId>}:m   hash:   dropped (runs the budget evicted)
    <prefix>threads                 zset:   thread id -> when a run was last kept (s)
    <prefix>threads:bytes           hash:   thread id -> bytes of its records
    <prefix>threads:total           string: bytes of every thread's records

One Lua script keeps a record and evicts, atomically, exactly as the in-memory store
does (idle threads past the retention, the thread's oldest runs past its budget, the
least recently kept threads past the total); it touches other threads' keys, so the
history needs a Redis that is not a cluster (the run keys above are cluster-ready).

**Entries.** The owning node appends; every entry of the stream holds the
events of one write tick of one run: its id is ``<last seq>-0`` and its fields
``s`` (the first seq) and ``p`` (the payloads joined by ``\\n`` -- an encoded
event never holds a raw newline). The end of the run is a marker entry
``<head>-1`` (field ``e``), so ``XREAD BLOCK`` wakes for it like for events. A
reader with cursor ``c`` asks ``XRANGE c-1 +``: the first entry returned is the
end marker or the entry holding event ``c + 1``, so a resume costs one command
whatever the cursor. Each append trims with ``MINID`` to the entries holding the
last ``max_events`` events (an entry that straddles the bound is kept whole);
the byte bound (``max_bytes``) applies to the owner's copy only.

**Write behind, read after store.** The owning node keeps its runs' events in
an :class:`~transports.eventlog.InMemoryEventLog` (the *mirror*) as well, and
serves its own subscribers from it. ``appender`` adds to the mirror and queues
the event; one flusher task sends everything queued during a loop pass as one
pipeline (one ``XADD`` per run), so a busy node pays one round trip per pass,
not per event. A subscriber on the owner sees an event only once it is stored
(``log_advanced``): a client that moves to another node can never hold a
cursor that node has not got.

**Owner liveness.** Every node refreshes its heartbeat key every
HEARTBEAT_INTERVAL_SECONDS with a TTL of OWNER_TTL_SECONDS, from a thread with
its own connection (a busy event loop is not a dead process). A follower waiting
for events checks every OWNER_CHECK_SECONDS whether the owner's key is gone; if
so it ends the run for everyone: one Lua script appends ``RUN_ERROR{code:
"owner_lost"}`` and the end marker, atomically and only if nothing else ended
the run first. Readers of a run whose owner was ``kill -9``-ed therefore get
``RUN_ERROR`` at most OWNER_LOST_BOUND_SECONDS after the owner's last heartbeat.
A node that finds its own heartbeat key expired (it stalled longer than the
TTL) ends its runs the same way, so a run never has two writers.

**Failures.** Any Redis error during a flush or a heartbeat ends this node's
running runs with ``RUN_ERROR{code: "event_log_unavailable"}`` (written to the
mirror, so local subscribers get it) and marks the node unready; ``open_run``
raises EventLogUnavailableError (503) while Redis is away. Followers get the
same code from their failed reads. The next successful command makes the node
ready again; the broken runs' keys are deleted then. Readiness (``ping``) also
needs this node's heartbeat key in Redis: after a restart Redis is empty until the
next heartbeat, and a run started before it would look ownerless. Each pipeline that
creates runs writes the heartbeat key first for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import RunErrorEvent, RunStartedEvent

from .eventlog import (
    DEFAULT_LOG_MAX_BYTES,
    DEFAULT_LOG_MAX_EVENTS,
    READ_MAX_BYTES,
    READ_MAX_EVENTS,
    BadCursorError,
    CursorExpiredError,
    EventLogUnavailableError,
    InMemoryEventLog,
    LogSlice,
    RunControl,
    UnknownRunError,
)
from .history import HistoryBudget, ThreadRuns

__all__ = [
    "DEFAULT_REDIS_RETENTION_SECONDS",
    "HEARTBEAT_INTERVAL_SECONDS",
    "OWNER_CHECK_SECONDS",
    "OWNER_LOST_BOUND_SECONDS",
    "OWNER_TTL_SECONDS",
    "REDIS_MAX_CONNECTIONS",
    "REDIS_MIN_VERSION",
    "REDIS_RECONNECT_RETRIES",
    "REDIS_TIMEOUT_SECONDS",
    "RUNNING_TTL_SECONDS",
    "RedisEventLog",
]

_log = logging.getLogger("agui_engine.transports")

#: Seconds between a node's heartbeats. One pipelined command per second per node
#: is nothing for Redis, and it sets how fast a dead owner is noticed.
HEARTBEAT_INTERVAL_SECONDS = 1.0

#: A node whose heartbeat is this old is dead: three missed beats, so one slow
#: beat (a GC pause, a busy loop) is not mistaken for a crash.
OWNER_TTL_SECONDS = 3.0

#: How often a follower waiting for events checks that the owner lives (the
#: length of one XREAD BLOCK). One second keeps the bound below tight while a
#: follower costs one cheap EXISTS per idle second.
OWNER_CHECK_SECONDS = 1.0

#: Readers of a run whose owner died get RUN_ERROR{owner_lost} at most this long
#: after the owner's last heartbeat: the key expires after OWNER_TTL_SECONDS, a
#: waiting follower looks within OWNER_CHECK_SECONDS, plus one second for the
#: command round trips and the reconnect of the reader.
OWNER_LOST_BOUND_SECONDS = OWNER_TTL_SECONDS + OWNER_CHECK_SECONDS + 1.0

#: TTL of a running run's keys, refreshed by its owner every quarter of it. Only
#: reached when the owner died and no reader ever came to end the run: then the
#: keys of the orphan go away by themselves after 10 minutes.
RUNNING_TTL_SECONDS = 600.0

#: TTL of a finished run's keys when no registry is attached (a registry sets its
#: own ``retention_seconds``); the same 60 s as runs.DEFAULT_RETENTION_SECONDS.
DEFAULT_REDIS_RETENTION_SECONDS = 60.0

#: Times a command is sent again, on a new connection, when its connection turns out
#: closed (redis-py's ConnectionError; never after a timeout). One: right after Redis
#: restarts every pooled connection is dead and fails its first command, which never
#: reached Redis; a second failure in a row means Redis is really away.
REDIS_RECONNECT_RETRIES = 1

#: Connect and command (socket) timeout against Redis. A command on a healthy Redis
#: takes well under a millisecond, and a Redis that died refuses connections at
#: once; this bounds a network partition. 5 s: at 2 s a node whose own event loop
#: was saturated (hundreds of streams on a loaded machine) read its replies late
#: and declared a healthy Redis lost.
REDIS_TIMEOUT_SECONDS = 5.0

#: Connections one node opens to Redis at most. A follower waiting for a run's
#: next events holds one (a blocking XREAD) for up to OWNER_CHECK_SECONDS, so a
#: node needs about one per concurrently followed run plus a few: 4,096 covers
#: runs.DEFAULT_MAX_RUNS followed runs on top of its own, and stays well under
#: Redis's default maxclients (10,000) for two nodes. redis-py's default (100)
#: refused followers with "Too many connections".
REDIS_MAX_CONNECTIONS = 4096

#: Streams (5.0), XADD's MINID trimming (6.2) and the Lua features used here.
REDIS_MIN_VERSION = (6, 2)

_CANCEL_MESSAGE = "the run was cancelled (DELETE on another gateway node)"
_LOST_MESSAGE = "the event log (Redis) is unreachable; the run cannot continue"
_OWNER_LOST_MESSAGE = "the gateway node running this run stopped (no heartbeat)"

# Creates a run's meta hash, atomically and only if no node has the run (one
# round trip). KEYS: meta. ARGV: owner node, thread id, TTL in ms, the principal
# that started the run, its run key's hash (who may touch it from any node).
_CREATE_SCRIPT = """
if redis.call('HSETNX', KEYS[1], 'owner', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'thread', ARGV[2], 'principal', ARGV[4], 'keyhash', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# Keeps one thread's run record and evicts (see the module docstring). KEYS: the
# thread's list, its meta, the threads zset, the bytes hash, the total. ARGV: record,
# now (s), max runs, max thread bytes, max total bytes, retention (s), key prefix,
# thread id, a backstop TTL in ms.
_KEEP_SCRIPT = """
local function drop(tid)
  local b = tonumber(redis.call('HGET', KEYS[4], tid) or '0')
  redis.call('DEL', ARGV[7] .. 'thread:{' .. tid .. '}:h', ARGV[7] .. 'thread:{' .. tid .. '}:m')
  redis.call('ZREM', KEYS[3], tid)
  redis.call('HDEL', KEYS[4], tid)
  redis.call('DECRBY', KEYS[5], b)
end
local now = tonumber(ARGV[2])
for _, tid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[6]))) do drop(tid) end
local n = string.len(ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[1])
local bytes = redis.call('HINCRBY', KEYS[4], ARGV[8], n)
redis.call('INCRBY', KEYS[5], n)
redis.call('ZADD', KEYS[3], now, ARGV[8])
local len = redis.call('LLEN', KEYS[1])
while len > 1 and (len > tonumber(ARGV[3]) or bytes > tonumber(ARGV[4])) do
  local old = string.len(redis.call('LPOP', KEYS[1]))
  bytes = redis.call('HINCRBY', KEYS[4], ARGV[8], -old)
  redis.call('DECRBY', KEYS[5], old)
  redis.call('HINCRBY', KEYS[2], 'dropped', 1)
  len = len - 1
end
while tonumber(redis.call('GET', KEYS[5]) or '0') > tonumber(ARGV[5]) do
  local victim = nil
  for _, tid in ipairs(redis.call('ZRANGE', KEYS[3], 0, 1)) do
    if tid ~= ARGV[8] and victim == nil then victim = tid end
  end
  if victim == nil then break end
  drop(victim)
end
redis.call('PEXPIRE', KEYS[1], ARGV[9])
redis.call('PEXPIRE', KEYS[2], ARGV[9])
return 1
"""

# Sets the TTL of a thread's live-run key while it still names the run. KEYS: the key.
# ARGV: run id, TTL in ms.
_LIVE_EXPIRE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"""

# Ends a run whose owner is gone: appends the given events and the end marker,
# only if the stream's last entry is still the one the caller saw (nobody ended
# or extended the run in between). KEYS: stream, meta. ARGV: last id seen
# ("0-0": empty), first seq, joined payloads, last seq, TTL in ms.
_REAP_SCRIPT = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local lastid = '0-0'
if #last > 0 then lastid = last[1][1] end
if lastid ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], ARGV[4] .. '-0', 's', ARGV[2], 'p', ARGV[3])
redis.call('XADD', KEYS[1], ARGV[4] .. '-1', 'e', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
"""


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.RedisError, OSError, asyncio.TimeoutError)


@dataclass(slots=True)
class _Owned:
    """Write-behind state of a run this node owns."""

    thread_id: str
    #: Who may touch the run from any node (RunRegistry.check_owner): its principal, its run key's hash.
    principal: str = ""
    key_hash: str = ""
    #: Seq of the newest event appended (stored or not).
    head: int = 0
    #: Highest seq stored in Redis (what subscribers may read).
    durable: int = 0
    #: Seq of the first event queued and not yet sent.
    queued_from: int = 1
    queued: list[bytes] = field(default_factory=list)
    #: finish() was called; the end marker is queued or stored.
    finishing: bool = False
    #: The end marker is stored (or the run broke): readers may see the end.
    end_visible: bool = False
    #: Redis failed under this run: it lives on in the mirror only.
    broken: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


def _text(value: Any) -> str:
    """A Redis reply as text ("" for a missing field)."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse_id(raw: bytes) -> tuple[int, int]:
    ms, _, sub = raw.partition(b"-")
    return int(ms), int(sub)


class RedisEventLog:
    """A :class:`~transports.eventlog.SharedEventLog` on Redis Streams (see the
    module docstring). One instance per gateway node (per registry).

    ``url``: ``redis://host:port/db`` (any URL ``redis.asyncio.from_url`` takes),
    or pass ``client`` (a ``redis.asyncio.Redis`` without ``decode_responses``).
    ``node_id``: this node's name in Redis (default: host, pid and a random
    part). Call :meth:`connect` (checks Redis, starts the heartbeat) before use
    and :meth:`aclose` at the end; ``async with`` does both.
    Raises UsageError for bad bounds.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        node_id: str | None = None,
        prefix: str = "agui:",
        max_events: int = DEFAULT_LOG_MAX_EVENTS,
        max_bytes: int = DEFAULT_LOG_MAX_BYTES,
        timeout: float = REDIS_TIMEOUT_SECONDS,
        history: HistoryBudget | None = None,
    ) -> None:
        if (url is None) == (client is None):
            raise UsageError("RedisEventLog needs exactly one of url or client")
        if max_events < 1 or max_bytes < 1:
            raise UsageError("RedisEventLog: max_events and max_bytes must be >= 1")
        if client is None:
            import redis.asyncio
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError

            assert url is not None
            client = redis.asyncio.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # After Redis restarts, each pooled connection fails its first command
                # ("Connection closed by server"): that command never reached Redis, so
                # it is sent once more on a new connection. A timeout is not retried.
                retry=Retry(NoBackoff(), REDIS_RECONNECT_RETRIES, supported_errors=(RedisConnectionError,)),
                retry_on_error=[RedisConnectionError],
                max_connections=REDIS_MAX_CONNECTIONS,
            )
        self.url = url
        self.redis = client
        self.node_id = node_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.prefix = prefix
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._mirror = InMemoryEventLog(max_events=max_events, max_bytes=max_bytes)
        self._owned: dict[str, _Owned] = {}
        self._dirty: list[str] = []  # owned runs with queued events or a queued end, in order
        # (run id, thread id, principal, key hash, created?)
        self._creating: list[tuple[str, str, str, str, asyncio.Future[bool]]] = []
        self._deleting: set[str] = set()
        self._following: dict[str, int] = {}
        self._control: RunControl | None = None
        self._wake_flusher: asyncio.Event | None = None
        # One flush at a time: two pipelines on two connections could reach Redis
        # out of order, and a stream refuses an entry id below its last one.
        self._flush_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._reap: Any = None
        self._create: Any = None
        self._keep: Any = None
        self._history = history if history is not None else HistoryBudget()
        self._stop_beating: threading.Event | None = None
        self._beat_thread: threading.Thread | None = None
        self._closed = False
        #: False after a Redis error until the next successful command (readiness).
        self.healthy = True
        #: True from a failed heartbeat until the next one succeeds.
        self._beat_failing = False

    # -- keys ----------------------------------------------------------------------------

    def _k(self, run_id: str, kind: str) -> str:
        return f"{self.prefix}{{{run_id}}}:{kind}"

    def _live_key(self, thread_id: str) -> str:
        return f"{self.prefix}live:{{{thread_id}}}"

    async def live_run(self, thread_id: str) -> str | None:
        try:
            value = await self.redis.get(self._live_key(thread_id))
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        return None if value is None else value.decode() if isinstance(value, bytes) else str(value)

    def _thread_key(self, thread_id: str, kind: str) -> str:
        return f"{self.prefix}thread:{{{thread_id}}}:{kind}"

    def _node_key(self, node: str) -> str:
        return f"{self.prefix}node:{node}"

    def _ctl(self, node: str) -> str:
        return f"{self.prefix}ctl:{node}"

    def _retention_ms(self) -> int:
        seconds = self._control.retention_seconds if self._control is not None else DEFAULT_REDIS_RETENTION_SECONDS
        return max(1, int(seconds * 1000))

    # -- lifecycle -----------------------------------------------------------------------

    async def connect(self) -> None:
        """Check that Redis answers and is recent enough, then start the heartbeat,
        the flusher and the cancel listener. Raises EventLogUnavailableError
        (unreachable, or older than REDIS_MIN_VERSION)."""
        try:
            info = await self.redis.info("server")
        except _redis_errors() as exc:
            raise EventLogUnavailableError(
                f"cannot reach Redis at {self.url or 'the given client'}: {str(exc) or type(exc).__name__}"
            ) from None
        version = tuple(int(x) for x in str(info.get("redis_version", "0.0")).split(".")[:2])
        if version < REDIS_MIN_VERSION:
            raise EventLogUnavailableError(
                f"Redis {info.get('redis_version')} is too old: the event log needs Redis "
                f"{'.'.join(map(str, REDIS_MIN_VERSION))} or newer (XADD MINID)"
            )
        self._reap = self.redis.register_script(_REAP_SCRIPT)
        self._create = self.redis.register_script(_CREATE_SCRIPT)
        self._keep = self.redis.register_script(_KEEP_SCRIPT)
        key, value, ttl = self._node_set_args()
        try:
            await self.redis.set(key, value, px=ttl)
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        self._start_beating()
        loop = asyncio.get_running_loop()
        self._wake_flusher = asyncio.Event()
        self._tasks = [
            loop.create_task(self._flusher(), name="agui-redis-flusher"),
            loop.create_task(self._maintain(), name="agui-redis-maintain"),
            loop.create_task(self._listen(), name="agui-redis-cancel-listener"),
        ]

    async def aclose(self) -> None:
        """Store what is queued, stop the background tasks, remove this node's
        heartbeat and close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(*_redis_errors()):
            await self._flush()
        if self._stop_beating is not None and self._beat_thread is not None:
            self._stop_beating.set()
            await asyncio.to_thread(self._beat_thread.join, self.timeout)
        tasks = list(self._tasks)  # done callbacks remove touch tasks from the list
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, *_redis_errors()):
                await task
        with contextlib.suppress(*_redis_errors()):
            await self.redis.delete(self._node_key(self.node_id))
        with contextlib.suppress(*_redis_errors()):
            await self.redis.aclose()

    async def __aenter__(self) -> RedisEventLog:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def attach(self, control: RunControl) -> None:
        if self._control is not None and self._control is not control:
            raise UsageError("this RedisEventLog already serves another registry (use one log per node)")
        self._control = control

    async def ping(self) -> None:
        """Redis answers *and* holds this node's heartbeat key (readiness). Right after
        Redis restarts (empty) the key is missing until the next heartbeat: a run
        started then would look ownerless to the other nodes and to this node's own
        heartbeat, and end ``owner_lost``; so the node is not ready until then."""
        try:
            beating = await self.redis.exists(self._node_key(self.node_id))
        except _redis_errors() as exc:
            self.healthy = False
            raise EventLogUnavailableError(f"Redis is unreachable: {str(exc) or type(exc).__name__}") from None
        self.healthy = True
        if not beating:
            raise EventLogUnavailableError(
                "this node's heartbeat is not in Redis (Redis restarted?); ready after the next heartbeat"
            )

    def _unavailable(self, exc: BaseException) -> EventLogUnavailableError:
        self.healthy = False
        return EventLogUnavailableError(f"the event log (Redis) is unreachable: {str(exc) or type(exc).__name__}")

    # -- the owner's side: write behind ----------------------------------------------------

    async def create(self, run_id: str) -> None:
        await self.open_run(run_id, "")

    async def open_run(self, run_id: str, thread_id: str, *, principal: str = "", key_hash: str = "") -> None:
        if run_id in self._owned:
            raise UsageError(f"event log for run {run_id!r} already exists")
        # Created by the flusher with whatever else this loop pass queued: a burst
        # of new runs costs one pipeline, not one connection each.
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._creating.append((run_id, thread_id, principal, key_hash, fut))
        if self._wake_flusher is None:
            await self._flush()
        else:
            self._wake_flusher.set()
        created = await fut
        if not created:
            raise UsageError(f"event log for run {run_id!r} already exists")
        self.healthy = True
        await self._mirror.create(run_id)
        self._owned[run_id] = _Owned(thread_id, principal, key_hash)

    def appender(self, run_id: str) -> Callable[[bytes], int]:
        """The producer's fast path: add to the mirror, queue for Redis, return the
        highest seq already stored (what subscribers may read; see SharedEventLog)."""
        own = self._owned.get(run_id)
        if own is None:
            raise UnknownRunError(run_id)
        mirror_append = self._mirror.appender(run_id)

        def append(payload: bytes) -> int:
            mirror_append(payload)
            own.head += 1
            if own.broken:
                own.durable += 1
                return own.durable
            if not own.queued:
                self._dirty.append(run_id)
                if self._wake_flusher is not None:
                    self._wake_flusher.set()
            own.queued.append(payload)
            return own.durable

        return append

    async def append(self, run_id: str, payload: bytes) -> int:
        own = self._owned.get(run_id)
        if own is None:
            raise UnknownRunError(run_id)
        if own.finishing:
            raise UsageError(f"append to the finished event log of run {run_id!r}")
        self.appender(run_id)(payload)
        seq = own.head
        await self._until_durable(own, seq)
        return seq

    async def _until_durable(self, own: _Owned, seq: int) -> None:
        while own.durable < seq and not own.broken:
            if self._wake_flusher is None:  # not connected: flush inline
                await self._flush()
                continue
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            own.waiters.append(fut)
            await fut

    async def finish(self, run_id: str) -> None:
        own = self._owned.get(run_id)
        if own is None:
            await self._remote_meta(run_id)  # UnknownRunError for a run nobody has
            return
        await self._mirror.finish(run_id)
        if own.finishing:
            return
        own.finishing = True
        if own.broken:
            own.end_visible = True
        elif not own.queued:
            self._dirty.append(run_id)
            if self._wake_flusher is not None:
                self._wake_flusher.set()
        await self._until_durable(own, own.head)
        while not own.end_visible:
            if self._wake_flusher is None:
                await self._flush()
                continue
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            own.waiters.append(fut)
            await fut

    async def _flusher(self) -> None:
        assert self._wake_flusher is not None
        wake = self._wake_flusher
        while True:
            await wake.wait()
            wake.clear()
            await self._flush()

    async def _flush(self) -> None:
        """Send everything queued as one pipeline (one XADD per run)."""
        async with self._flush_lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        dirty, self._dirty = self._dirty, []
        deleting, self._deleting = self._deleting, set()
        creating, self._creating = self._creating, []
        if not dirty and not deleting and not creating:
            return
        pipe = self.redis.pipeline(transaction=False)
        running_ttl = int(RUNNING_TTL_SECONDS * 1000)
        if creating:
            # A new run's owner key goes first: whatever Redis lost (a restart), no node
            # ever sees a run of ours without our heartbeat (and reaps it owner_lost).
            key, value, ttl = self._node_set_args()
            pipe.set(key, value, px=ttl)
        # Where each create's reply sits among the pipeline's replies: a thread's live-run
        # SET follows its create, so the replies are not one per create.
        created_at: list[int] = []
        queued = 1 if creating else 0
        for run_id, thread_id, principal, key_hash, _ in creating:
            # On a pipeline this only queues the EVALSHA (the pipeline loads the script first).
            await self._create(
                keys=[self._k(run_id, "m")], args=[self.node_id, thread_id, running_ttl, principal, key_hash], client=pipe
            )
            created_at.append(queued)
            queued += 1
            if thread_id:  # the thread's live run, for a reload landing on any node (live_run)
                pipe.set(self._live_key(thread_id), run_id, px=running_ttl)
                queued += 1
        sent: list[tuple[_Owned, str, int, bool]] = []
        events = 0
        retention = self._retention_ms()
        max_events = self.max_events
        for run_id in dirty:
            own = self._owned.get(run_id)
            if own is None or own.broken:
                continue
            stream = self._k(run_id, "s")
            last = own.queued_from - 1
            if own.queued:
                payloads, own.queued = own.queued, []
                first = own.queued_from
                last = first + len(payloads) - 1
                own.queued_from = last + 1
                events += len(payloads)
                pipe.xadd(
                    stream,
                    {b"s": first, b"p": b"\n".join(payloads)},
                    id=f"{last}-0",
                    minid=max(0, last - max_events + 1),
                    approximate=False,
                )
            end = own.finishing
            if end:
                pipe.xadd(stream, {b"e": b"1"}, id=f"{last}-1")
                pipe.pexpire(stream, retention)
                pipe.pexpire(self._k(run_id, "m"), retention)
                if own.thread_id:
                    # as long as the run's keys (a newer run of the thread, set since, keeps its own)
                    pipe.eval(_LIVE_EXPIRE_SCRIPT, 1, self._live_key(own.thread_id), run_id, retention)
            sent.append((own, run_id, last, end))
        for run_id in deleting:
            pipe.delete(self._k(run_id, "s"), self._k(run_id, "m"), self._k(run_id, "r"))
        started = time.perf_counter()
        try:
            results = await pipe.execute()
        except _redis_errors() as exc:
            self.healthy = False
            self._deleting |= deleting
            for *_, fut in creating:
                if not fut.done():
                    fut.set_exception(self._unavailable(exc))
            _log.error("event log: storing %d events in Redis failed (%s); ending the affected runs", events, exc)
            for own, run_id, _, _ in sent:
                self._break(run_id, own)
            return
        self.healthy = True
        elapsed = time.perf_counter() - started
        for (*_, fut), at in zip(creating, created_at):
            if not fut.done():
                fut.set_result(bool(results[at]))
        control = self._control
        if control is not None and events:
            control.log_append_latency(elapsed, events)
        for own, run_id, last, end in sent:
            if last > own.durable:
                own.durable = last
                if control is not None:
                    control.log_advanced(run_id, last)
            if end:
                own.end_visible = True
                if control is not None:
                    control.log_advanced(run_id, last)
            own.wake()

    def _break(self, run_id: str, own: _Owned) -> None:
        """Redis failed under this run: serve the rest from the mirror, end it."""
        if own.broken:
            return
        own.broken = True
        own.queued = []
        self._deleting.add(run_id)  # its shared copy has a gap: remove it once Redis is back
        # Everything produced so far becomes readable here (the mirror has it).
        head = own.durable = own.head
        if own.finishing:
            own.end_visible = True
        control = self._control
        if control is not None:
            control.log_advanced(run_id, head)
            control.log_cancel(run_id, "event_log_unavailable", _LOST_MESSAGE)
        own.wake()

    # -- heartbeat, ownership, cancel ----------------------------------------------------

    def _node_set_args(self) -> tuple[str, bytes, int]:
        return self._node_key(self.node_id), b"1", int(OWNER_TTL_SECONDS * 1000)

    def _start_beating(self) -> None:
        """The heartbeat runs in a thread with its own (blocking) connection: a
        node whose event loop is saturated by streams is alive, and must not
        lose its runs because a heartbeat task waited its turn for 3 s."""
        import redis

        kwargs = self.redis.connection_pool.connection_kwargs
        if self.url is not None:
            sync = redis.Redis.from_url(self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout)
        else:
            keep = ("host", "port", "db", "username", "password", "path", "socket_timeout", "socket_connect_timeout")
            sync = redis.Redis(**{k: v for k, v in kwargs.items() if k in keep})
        loop = asyncio.get_running_loop()
        stop = self._stop_beating = threading.Event()
        key, value, ttl = self._node_set_args()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_INTERVAL_SECONDS):
                try:
                    previous = sync.set(key, value, px=ttl, get=True)
                except Exception as exc:  # noqa: BLE001 - any failure means Redis is not there for us
                    loop.call_soon_threadsafe(self._beat_failed, exc)
                    continue
                loop.call_soon_threadsafe(self._beat_ok, previous is None)
            sync.close()

        self._beat_thread = threading.Thread(target=beat, name="agui-redis-heartbeat", daemon=True)
        self._beat_thread.start()

    def _beat_ok(self, lapsed: bool) -> None:
        recovering, self._beat_failing = self._beat_failing, False
        if lapsed and recovering:
            # The heartbeat failed before (Redis away), so this node's runs were ended
            # then (event_log_unavailable); Redis came back without our key: no stall.
            _log.info("event log: Redis is back; this node's heartbeat is written again")
        elif lapsed and self.healthy:
            # Our key had expired (the process stalled longer than the TTL):
            # followers may have ended our runs as owner_lost; end them here too.
            _log.error("event log: this node's heartbeat lapsed; ending its runs (owner_lost)")
            control = self._control
            for run_id, own in list(self._owned.items()):
                if not own.finishing and control is not None:
                    control.log_cancel(run_id, "owner_lost", _OWNER_LOST_MESSAGE)
        self.healthy = True
        if self._deleting and self._wake_flusher is not None:
            self._wake_flusher.set()

    def _beat_failed(self, exc: BaseException) -> None:
        self._beat_failing = True
        if self.healthy:
            _log.error("event log: Redis heartbeat failed (%s); ending this node's runs", exc)
        self.healthy = False
        for run_id, own in list(self._owned.items()):
            if not own.finishing:
                self._break(run_id, own)

    async def _maintain(self) -> None:
        """Every heartbeat interval: mark the runs followed here as read (for the
        owners' grace timers) and, every quarter of RUNNING_TTL_SECONDS, refresh
        the TTL of the runs owned here."""
        beats = 0
        every = max(1, int(RUNNING_TTL_SECONDS / 4 / HEARTBEAT_INTERVAL_SECONDS))
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_SECONDS)
            beats += 1
            now_ms = int(time.time() * 1000)
            pipe = self.redis.pipeline(transaction=False)
            for run_id in self._following:
                pipe.zadd(self._k(run_id, "r"), {self.node_id: now_ms})
                pipe.pexpire(self._k(run_id, "r"), int(RUNNING_TTL_SECONDS * 1000))
            if beats % every == 0:
                ttl = int(RUNNING_TTL_SECONDS * 1000)
                for run_id, own in self._owned.items():
                    if not own.finishing and not own.broken:
                        pipe.pexpire(self._k(run_id, "s"), ttl)
                        pipe.pexpire(self._k(run_id, "m"), ttl)
                        if own.thread_id:
                            pipe.eval(_LIVE_EXPIRE_SCRIPT, 1, self._live_key(own.thread_id), run_id, ttl)
            if len(pipe):
                with contextlib.suppress(*_redis_errors()):  # the heartbeat thread reports Redis loss
                    await pipe.execute()

    async def _listen(self) -> None:
        # The cancel channel: other nodes publish the ids of our runs to cancel.
        # Reconnects (after a Redis restart) with a pause of one heartbeat.
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self._ctl(self.node_id))
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=HEARTBEAT_INTERVAL_SECONDS)
                    if msg is None or msg.get("type") != "message":
                        continue
                    run_id = msg["data"].decode() if isinstance(msg["data"], bytes) else str(msg["data"])
                    own = self._owned.get(run_id)
                    if own is not None and not own.finishing and self._control is not None:
                        self._control.log_cancel(run_id, "cancelled", _CANCEL_MESSAGE)
            except _redis_errors():
                await asyncio.sleep(HEARTBEAT_INTERVAL_SECONDS)
            finally:
                with contextlib.suppress(*_redis_errors()):
                    await pubsub.aclose()

    async def request_cancel(self, run_id: str) -> bool:
        own = self._owned.get(run_id)
        if own is not None:
            if own.finishing:
                return False
            if self._control is not None:
                self._control.log_cancel(run_id, "cancelled", "the run was cancelled")
            return True
        try:
            owner, _, _, finished = await self._remote_state(run_id)
            if finished:
                return False
            receivers = await self.redis.publish(self._ctl(owner), run_id)
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if not receivers:
            await self._reap_if_dead(run_id, owner)
        return True

    def follow(self, run_id: str) -> None:
        n = self._following.get(run_id, 0)
        self._following[run_id] = n + 1
        if n == 0:
            self._touch(run_id)

    def unfollow(self, run_id: str) -> None:
        n = self._following.get(run_id, 0) - 1
        if n > 0:
            self._following[run_id] = n
            return
        self._following.pop(run_id, None)
        self._touch(run_id)

    def _touch(self, run_id: str) -> None:
        # Say now (not at the next heartbeat) that a reader is here / just left:
        # the owner's grace timer may be about to fire.
        async def touch() -> None:
            with contextlib.suppress(*_redis_errors()):
                await self.redis.zadd(self._k(run_id, "r"), {self.node_id: int(time.time() * 1000)})

        task = asyncio.get_running_loop().create_task(touch())
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def remote_reader_age(self, run_id: str) -> float | None:
        try:
            top = await self.redis.zrange(self._k(run_id, "r"), -1, -1, withscores=True)
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if not top:
            return None
        return max(0.0, time.time() - float(top[0][1]) / 1000)

    # -- reading -------------------------------------------------------------------------

    async def head(self, run_id: str) -> int:
        own = self._owned.get(run_id)
        if own is not None:
            return own.durable
        _, head, _, _ = await self._remote_state(run_id)
        return head

    def read_nowait(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        """A run owned here, from the mirror, up to what is stored. Raises
        UnknownRunError (not owned here), CursorExpiredError, BadCursorError."""
        own = self._owned.get(run_id)
        if own is None:
            raise UnknownRunError(run_id)
        readable = own.durable - after
        if readable <= 0:
            sl = self._mirror.read_nowait(run_id, after, max_events=1, max_bytes=max_bytes)
            end = own.end_visible and after == own.durable
            return LogSlice(after + 1, [], end)
        sl = self._mirror.read_nowait(run_id, after, max_events=min(max_events, readable), max_bytes=max_bytes)
        sl.finished = sl.finished and own.end_visible
        return sl

    async def read(
        self, run_id: str, after: int, *, max_events: int = READ_MAX_EVENTS, max_bytes: int = READ_MAX_BYTES
    ) -> LogSlice:
        if run_id in self._owned:
            return self.read_nowait(run_id, after, max_events=max_events, max_bytes=max_bytes)
        if after < 0:
            raise BadCursorError(f"run {run_id!r}: resume cursor {after} is negative")
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.exists(self._k(run_id, "m"))
            pipe.xrange(self._k(run_id, "s"), f"{after}-1", "+", count=max_events + 1)
            pipe.xrevrange(self._k(run_id, "s"), "+", "-", count=1)
            exists, entries, last = await pipe.execute()
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if not exists and not last:
            raise UnknownRunError(run_id)
        head = _parse_id(last[0][0])[0] if last else 0
        payloads: list[bytes] = []
        nbytes = 0
        ended = False
        for entry_id, fields in entries:
            if _parse_id(entry_id)[1] == 1:  # the end marker (a lapsed owner's late writes after it are ignored)
                ended = True
                break
            first = int(fields[b"s"])
            want = after + 1 + len(payloads)
            if first > want:
                raise CursorExpiredError(run_id, after, first)
            for p in fields[b"p"].split(b"\n")[want - first :]:
                if payloads and (len(payloads) >= max_events or nbytes + len(p) > max_bytes):
                    return LogSlice(after + 1, payloads, False)
                payloads.append(p)
                nbytes += len(p)
        if not payloads and not ended and after > head:
            raise BadCursorError(f"run {run_id!r}: resume cursor {after} is outside 0..{head}")
        return LogSlice(after + 1, payloads, ended)

    async def run_access(self, run_id: str) -> tuple[str, str]:
        own = self._owned.get(run_id)
        if own is not None:
            return own.principal, own.key_hash
        try:
            principal, key_hash, owner = await self.redis.hmget(self._k(run_id, "m"), "principal", "keyhash", "owner")
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if owner is None:
            raise UnknownRunError(run_id)
        return _text(principal), _text(key_hash)

    async def _remote_meta(self, run_id: str) -> str:
        owner = await self.redis.hget(self._k(run_id, "m"), "owner")
        if owner is None:
            raise UnknownRunError(run_id)
        return owner.decode() if isinstance(owner, bytes) else str(owner)

    async def _remote_state(self, run_id: str) -> tuple[str, int, bytes, bool]:
        """(owner, head, last entry id, finished) of a run in Redis. Raises
        UnknownRunError, EventLogUnavailableError."""
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hmget(self._k(run_id, "m"), "owner", "thread")
            pipe.xrevrange(self._k(run_id, "s"), "+", "-", count=1)
            (owner, _thread), last = await pipe.execute()
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if owner is None:
            raise UnknownRunError(run_id)
        if not last:
            return owner.decode(), 0, b"0-0", False
        head, sub = _parse_id(last[0][0])
        return owner.decode(), head, last[0][0], sub == 1

    async def wait(self, run_id: str, after: int, timeout: float | None) -> bool:
        own = self._owned.get(run_id)
        loop = asyncio.get_running_loop()
        if own is not None:
            if own.durable > after or own.end_visible:
                return True
            fut: asyncio.Future[None] = loop.create_future()
            own.waiters.append(fut)
            try:
                await asyncio.wait_for(fut, timeout)
            except TimeoutError:
                return False
            return True
        deadline = None if timeout is None else loop.time() + timeout
        block = 0.0  # the first XREAD only looks: anything after the cursor (or the end marker)?
        while True:
            try:
                # block < OWNER_CHECK_SECONDS < the socket timeout: a blocked read never times out
                streams = {self._k(run_id, "s"): f"{after}-0"}
                got = await (
                    self.redis.xread(streams, count=1, block=max(1, int(block * 1000)))
                    if block
                    else self.redis.xread(streams, count=1)
                )
            except _redis_errors() as exc:
                raise self._unavailable(exc) from None
            if got:
                return True
            # Nothing yet: is the run still there, and its owner alive?
            owner, _, _, _ = await self._remote_state(run_id)
            if block and await self._reap_if_dead(run_id, owner):
                return True
            left = OWNER_CHECK_SECONDS if deadline is None else min(OWNER_CHECK_SECONDS, deadline - loop.time())
            if left <= 0:
                return False
            block = left

    async def _reap_if_dead(self, run_id: str, owner: str) -> bool:
        """End a run whose owner's heartbeat is gone (RUN_ERROR{owner_lost}); True
        when the run is over (ended by this call or by anyone before)."""
        try:
            if await self.redis.exists(self._node_key(owner)):
                return False
            pipe = self.redis.pipeline(transaction=False)
            pipe.hget(self._k(run_id, "m"), "thread")
            pipe.xrevrange(self._k(run_id, "s"), "+", "-", count=1)
            thread, last = await pipe.execute()
            last_id = last[0][0] if last else b"0-0"
            head, sub = _parse_id(last_id)
            if sub == 1:
                return True
            events: list[Any] = []
            if head == 0:
                events.append(RunStartedEvent(thread_id=(thread or b"").decode(), run_id=run_id))
            events.append(RunErrorEvent(message=_OWNER_LOST_MESSAGE, code="owner_lost"))
            payloads = [encode_event(e) for e in events]
            await self._reap(
                keys=[self._k(run_id, "s"), self._k(run_id, "m")],
                args=[last_id, head + 1, b"\n".join(payloads), head + len(payloads), self._retention_ms()],
            )
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        _log.warning("run %s: its gateway node %s stopped; ended it with RUN_ERROR{owner_lost}", run_id, owner)
        return True

    # -- discard -------------------------------------------------------------------------

    def discard_nowait(self, run_id: str) -> None:
        """Forget a run here and delete its keys with the next flush."""
        own = self._owned.pop(run_id, None)
        if own is not None:
            own.wake()
        self._mirror.discard_nowait(run_id)
        self._deleting.add(run_id)
        if self._wake_flusher is not None:
            self._wake_flusher.set()

    # -- thread histories (transports.history.ThreadStore) --------------------------------

    @property
    def history_budget(self) -> HistoryBudget:
        return self._history

    async def keep_run(self, thread_id: str, record: bytes, now: float) -> None:
        budget = self._history
        # A backstop for a store nobody writes to any more: the keys go twice the
        # retention after the last run (the script expires them at the retention).
        ttl_ms = max(1, int(budget.retention_seconds * 2000))
        keys = [
            self._thread_key(thread_id, "h"),
            self._thread_key(thread_id, "m"),
            f"{self.prefix}threads",
            f"{self.prefix}threads:bytes",
            f"{self.prefix}threads:total",
        ]
        args = [
            record, repr(now), budget.max_runs_per_thread, budget.max_thread_bytes, budget.max_total_bytes,
            repr(budget.retention_seconds), self.prefix, thread_id, ttl_ms,
        ]
        try:
            await self._keep(keys=keys, args=args)
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None

    async def thread_runs(self, thread_id: str, now: float) -> ThreadRuns:
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zscore(f"{self.prefix}threads", thread_id)
            pipe.lrange(self._thread_key(thread_id, "h"), 0, -1)
            pipe.hget(self._thread_key(thread_id, "m"), "dropped")
            last, records, dropped = await pipe.execute()
        except _redis_errors() as exc:
            raise self._unavailable(exc) from None
        if last is None or float(last) <= now - self._history.retention_seconds:
            return ThreadRuns([], 0)
        return ThreadRuns(list(records), int(dropped or 0))

    async def discard(self, run_id: str) -> None:
        own = self._owned.pop(run_id, None)
        if own is not None:
            own.wake()
        self._mirror.discard_nowait(run_id)
        try:
            await self.redis.delete(self._k(run_id, "s"), self._k(run_id, "m"), self._k(run_id, "r"))
        except _redis_errors():
            self._deleting.add(run_id)  # retried with the next flush

    def owned(self) -> Iterator[str]:
        """Run ids this node owns and has not discarded (for tests and metrics)."""
        return iter(list(self._owned))
