"""The run registry's limits and periods, one frozen value (:class:`RegistryOptions`) that
the servers pass through unchanged, and the defaults it starts from (spec/limits.md)."""

from __future__ import annotations

import msgspec

from agui_engine.protocol.errors import UsageError

from .subscription import WRITE_COALESCE_SECONDS

__all__ = [
    "CANCEL_WAIT_SECONDS",
    "DEFAULT_DISCONNECT_GRACE_SECONDS",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "DEFAULT_MAX_RETAINED",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_MAX_RUNS_PER_CLIENT",
    "DEFAULT_RETENTION_SECONDS",
    "RegistryOptions",
]

#: How long ``cancel()`` / ``shutdown()`` wait for the agent's generator to close before giving
#: up on it (a generator that ignores cancellation must not hang the server).
CANCEL_WAIT_SECONDS = 5.0

#: Concurrent running runs per registry. Each holds an open model stream; 1,000
#: is what one gateway process on a 2-core machine streams comfortably (see the
#: transports benchmark) -- past it the server answers 503 + Retry-After.
DEFAULT_MAX_RUNS = 1000

#: Runs one client may hold at once: running, or finished but still being read
#: (a reader that stopped reading keeps its run's log until the send timeout
#: cuts it). A client is the principal its token names (per-client tokens), else
#: its address. 100 is a tenth of DEFAULT_MAX_RUNS: no single client can take
#: more than that of the server (300 stalled readers of one token took the
#: server from 418 MB to 1.9 GB), while a browser with many tabs or a backend
#: fanning out runs for a user stays far below it. Behind a reverse proxy every
#: client has the proxy's address: name the clients by token, raise it, or 0 (no cap).
DEFAULT_MAX_RUNS_PER_CLIENT = 100

#: Bytes of encoded events the run logs of one gateway may hold together (the
#: in-memory log's budget). Past it new runs are refused (503 + Retry-After) and a
#: run that keeps growing keeps only its newest eventlog.BUDGET_TRIM_FLOOR_BYTES,
#: so a server's logs hold at most this plus 256 KiB per run, whatever its
#: readers do. 512 MiB: 128 full 4 MiB logs, or thousands of ordinary runs (a
#: long answer is tens of KiB); with msgspec's allocation slack (~1.5x) about
#: 0.75 GiB of RAM. 0: no budget (each run is still bounded by DEFAULT_LOG_MAX_BYTES).
DEFAULT_MAX_BUFFERED_BYTES = 512 * 1024 * 1024

#: How long a run keeps going after its last subscriber left, so that a client
#: whose connection dropped can reconnect and resume. 30 s covers a mobile
#: network change or a laptop waking up, without paying for abandoned runs long.
DEFAULT_GRACE_SECONDS = 30.0

#: How long a run keeps going after its last subscriber left when that subscriber
#: did not declare it would resume (see ``RunRegistry.subscribe(resumable=...)``):
#: the official @ag-ui/client's abortRun() -- a chat UI's stop button -- only
#: closes the connection and never sends DELETE, and it never reconnects. Waiting
#: would only spend model tokens nobody reads, so the run is cancelled at once.
DEFAULT_DISCONNECT_GRACE_SECONDS = 0.0

#: How long a finished run's log stays available for resume (a client that lost
#: the connection just before the terminal event must still get it).
DEFAULT_RETENTION_SECONDS = 60.0

#: At most this many finished runs are retained; the oldest is discarded first.
#: Equal to DEFAULT_MAX_RUNS: a full server whose runs all finish at once keeps
#: every one resumable for DEFAULT_RETENTION_SECONDS, while the memory bound
#: stays the same as for live runs (each log <= eventlog.DEFAULT_LOG_MAX_BYTES).
DEFAULT_MAX_RETAINED = 1000


class RegistryOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The registry's limits and periods, in one value that servers pass through
    unchanged (``create_app(agent, options=RegistryOptions(max_runs=50))``).

    ``max_runs``: concurrent running runs (then 503 / 4503). ``grace_seconds``: how
    long a run outlives its last subscriber when that one declared it resumes;
    ``disconnect_grace_seconds``: when it did not (the official client's abort:
    0, it stops at once; see RunRegistry.subscribe). ``retention_seconds``: how long a
    finished run stays resumable. ``max_retained``: finished runs kept at most.
    ``verify``: run every event through the protocol Verifier (default on: the
    gateway never forwards a stream a client would reject).
    ``max_runs_per_client``: runs one client (its principal, else its address) may
    hold, running or still being read (then 503; 0: no cap). ``max_buffered_bytes``:
    the budget of event bytes all run logs hold (then 503, and growing runs are
    trimmed; 0: none; applies to the registry's own in-memory log).
    ``keep_history``: keep each thread's ended runs in the event log, when it is a
    :class:`~transports.history.ThreadStore` (spec/transports.md §4.4).
    ``tracing``: trace every run with OpenTelemetry (``transports/otel.py``: an
    ``invoke_agent`` span per run, chat and ``execute_tool`` spans under it; the
    ``[otel]`` extra, the application's configured tracer provider).
    ``write_coalesce_seconds``: a stream's events produced within this long of its last
    write join its next write (the first after a quiet spell goes at once;
    ``subscription.WRITE_COALESCE_SECONDS``; 0: every ready batch at once).
    Raises UsageError (at construction) for a value out of range.
    """

    max_runs: int = DEFAULT_MAX_RUNS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    disconnect_grace_seconds: float = DEFAULT_DISCONNECT_GRACE_SECONDS
    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    max_retained: int = DEFAULT_MAX_RETAINED
    verify: bool = True
    max_runs_per_client: int = DEFAULT_MAX_RUNS_PER_CLIENT
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    keep_history: bool = True
    tracing: bool = False
    write_coalesce_seconds: float = WRITE_COALESCE_SECONDS

    def __post_init__(self) -> None:
        if self.max_runs < 1:
            raise UsageError(f"RegistryOptions.max_runs must be >= 1, got {self.max_runs}")
        for count in ("max_retained", "max_runs_per_client", "max_buffered_bytes"):
            if getattr(self, count) < 0:
                raise UsageError(f"RegistryOptions.{count} must be >= 0, got {getattr(self, count)}")
        for name in ("grace_seconds", "disconnect_grace_seconds", "retention_seconds", "write_coalesce_seconds"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise UsageError(f"RegistryOptions.{name} must be >= 0, got {value}")
