"""What the client agents (SSEAgent, WebSocketAgent) share: their errors
(:class:`RemoteAgentError`, :class:`ConnectionLostError`), the bounded reconnect
policy (:class:`RetryPolicy`) and the run loop that resumes a dropped stream
(:class:`RemoteClientBase`).
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec

from agui_engine.protocol.errors import (
    MAX_ERROR_MESSAGE_CHARS,
    AguiEngineError,
    UpstreamError,
)
from agui_engine.protocol.events import (
    AnyEvent,
    Event,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
)

from .envelope import ErrorBody
from .input_decoding import MAX_SEQ_DIGITS

__all__ = [
    "AttemptItem",
    "BACKOFF_JITTER_MIN",
    "ConnectionLostError",
    "DEFAULT_BACKOFF_INITIAL",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_MAX_RETRIES",
    "MAX_RECONNECTS_PER_RUN",
    "MAX_REMEMBERED_THREAD_KEYS",
    "RETRYABLE_STATUSES",
    "RemoteAgentError",
    "RemoteClientBase",
    "RetryPolicy",
    "StreamDropped",
    "TERMINAL_EVENTS",
    "UpstreamStoppedError",
    "end_or_raise",
    "media_type",
    "remote_error_from_body",
    "remote_error_from_line",
    "tls_failure",
    "unresumable",
]


class RemoteAgentError(UpstreamError):
    """A remote AG-UI endpoint refused a request (a non-2xx answer, a WebSocket
    error message or close code). ``status`` is the HTTP status (or the close
    code), ``code`` the remote's machine-readable error code when it sent one
    (``cursor_expired``, ``unauthorized``, ``invalid_input`` ...)."""

    default_code = "remote_refused"

    def __init__(self, message: str, *, status: int, code: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.status = status
        #: The media type of the answer when it was not one of this protocol's (``text/html``), else None.
        self.content_type: str | None = None


class ConnectionLostError(UpstreamError):
    """The connection to a remote AG-UI endpoint dropped and resuming failed
    after the bounded retries (or the endpoint could not be reached at all)."""

    default_code = "connection_lost"

    def __init__(self, message: str, *, tls_failure: str | None = None) -> None:
        super().__init__(message, retryable=True)
        #: The TLS failure's reason (``WRONG_VERSION_NUMBER``: the server speaks plain HTTP) when the
        #: connection failed in the TLS handshake, else None.
        self.tls_failure = tls_failure


class UpstreamStoppedError(UpstreamError):
    """A remote AG-UI endpoint ended its stream before the run's ``RUN_FINISHED`` /
    ``RUN_ERROR`` and sent no event id to resume from: the run ends here (starting it
    again would run the remote agent twice). Code ``upstream_stopped``."""

    default_code = "upstream_stopped"


#: HTTP statuses after which trying again later may succeed.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def remote_error_from_body(
    status: int, body: bytes, *, where: str, content_type: str | None = None
) -> RemoteAgentError:
    """A RemoteAgentError for a refused request, using the ``{"error": {code,
    message}}`` body this project's servers send when it is there. Any other body
    is quoted only when it is plain text, on one line (an HTML error page is named by
    its content type, not dumped). The message is cut to ``MAX_ERROR_MESSAGE_CHARS``
    characters and never contains request headers."""
    code: str | None = None
    message = ""
    try:
        doc = msgspec.json.decode(body)
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = err["code"] if isinstance(err.get("code"), str) else None
            message = err["message"] if isinstance(err.get("message"), str) else ""
    except msgspec.DecodeError:
        if content_type is None or media_type(content_type) == "text/plain":
            message = " ".join(body[: MAX_ERROR_MESSAGE_CHARS * 4].decode("utf-8", "replace").split())
    kind = f" {media_type(content_type)}" if content_type and code is None and not message else ""
    text = (f"{where} answered {status}{kind}" + (f" ({code})" if code else "")
            + (f": {message[:MAX_ERROR_MESSAGE_CHARS]}" if message else ""))
    error = RemoteAgentError(text, status=status, code=code, retryable=status in RETRYABLE_STATUSES)
    error.content_type = media_type(content_type) if content_type else None
    return error


def media_type(content_type: str | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html`` (lower case); ``""`` for none."""
    return (content_type or "").partition(";")[0].strip().lower()


def tls_failure(exc: BaseException) -> str | None:
    """The reason of the TLS failure anywhere in ``exc``'s chain of causes
    (``WRONG_VERSION_NUMBER``, ``CERTIFICATE_VERIFY_FAILED`` ...), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            # aiohttp's ClientConnectorSSLError is an SSLError without a reason of its own: the
            # ssl module's error it wraps (os_error) has it
            for error in (seen, getattr(seen, "os_error", None)):
                reason = getattr(error, "reason", None)
                if reason:
                    return str(reason)
            return type(seen).__name__
        seen = seen.__cause__ or seen.__context__
    return None


#: The events that end a run.
TERMINAL_EVENTS = (RunFinishedEvent, RunErrorEvent)


#: Reconnect attempts of the client agents after a drop, before they give up.
#: 5 attempts with the backoff below span ~6 s: a server restart behind a load
#: balancer or a brief network loss, not an outage (the run's grace period is 30 s).
DEFAULT_MAX_RETRIES = 5


#: Reconnects of one run, in all, however much each connection delivered. The per-drop count
#: (``max_retries``) starts again after every new event, so a server that sends one event and
#: drops, again and again, was followed forever (170 reconnects in 30 s, each repeating the
#: request). 100 carries a run through a proxy that cuts streams every minute for well over an
#: hour; past it the run ends with ``ConnectionLostError``.
MAX_RECONNECTS_PER_RUN = 100


#: First reconnect delay (seconds); doubles per attempt, with jitter. 0.2 s is
#: long enough not to hammer a server that just dropped us (a restart takes at
#: least that), short enough that a one-off network blip costs the user nothing
#: visible; 0.2 * (1+2+4+8) + 5 = 8 s worst case, ~6 s with jitter, over 5 tries.
DEFAULT_BACKOFF_INITIAL = 0.2


#: Ceiling of the reconnect delay (seconds): every try must land well inside the
#: run's 30 s grace period (runs.DEFAULT_GRACE_SECONDS), or the run is gone.
DEFAULT_BACKOFF_MAX = 5.0

#: Threads whose latest run key one client agent (SSEAgent, WebSocketAgent) remembers (the
#: oldest is forgotten first): it presents the key when it starts the thread's next run, so
#: that a gateway without per-client tokens keeps the run in that thread's history. One
#: agent serving a few hundred conversations stays within it; each entry is ~100 bytes.
MAX_REMEMBERED_THREAD_KEYS = 1024


#: Smallest random factor of a reconnect delay (the largest is 1): "equal jitter".
#: Keeping at least half the delay means a retry never comes at once, while
#: clients dropped together spread over the other half instead of reconnecting
#: in step.
BACKOFF_JITTER_MIN = 0.5


class RetryPolicy:
    """Bounded reconnects with exponential backoff and jitter, shared by the client agents."""

    def __init__(
        self,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
    ) -> None:
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

    def delay(self, failures: int) -> float:
        """Seconds to wait before attempt ``failures`` (1-based): initial * 2^(n-1),
        capped, times a random factor in [BACKOFF_JITTER_MIN, 1] so that clients do not reconnect in step."""
        base = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
        return float(base * random.uniform(BACKOFF_JITTER_MIN, 1.0))

    async def wait(self, failures: int) -> None:
        await asyncio.sleep(self.delay(failures))


class StreamDropped(Exception):
    """A client agent's connection ended before the run's terminal event (a drop
    the shared reconnect loop resumes)."""


#: One item of a client agent's connection attempt (see RemoteClientBase._attempt):
#: ``None`` once the server has accepted the run, else ``(event id, events)`` -- a
#: batch of events and the id of its last one (``None`` when the server sent no id).
AttemptItem = tuple[str | None, list[AnyEvent]] | None


class RemoteClientBase:
    """What the network client agents share: the endpoint, extra headers (never
    logged or put in error messages), the retry policy, a reconnect counter, and
    :meth:`run` itself -- the reconnect-and-resume loop. A transport provides one
    connection attempt (:meth:`_attempt`), the remote cancel (:meth:`_cancel`),
    the per-run session (:meth:`_open` / :meth:`_close`) and the exceptions that
    mean "the connection dropped" (``_drops``)."""

    #: The transport's network errors that count as a drop (retried with backoff).
    _drops: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.retry = RetryPolicy(max_retries, backoff_initial, backoff_max)
        #: Reconnections made by the last run (for diagnostics and tests).
        self.reconnects = 0
        #: thread id -> the run key of its latest run started here (or given to history()).
        self._thread_keys: OrderedDict[str, str] = OrderedDict()

    def thread_key(self, thread_id: str) -> str | None:
        """The run key of the thread's latest run started by this agent (None: none yet, or
        forgotten past MAX_REMEMBERED_THREAD_KEYS): presented with the thread's next run, so
        that a gateway without per-client tokens keeps it in that thread's history, and what a
        client keeps (a browser's storage) to read the history after a reload
        (``Thread.restore(..., run_key=)``; spec/transports.md §4.4)."""
        return self._thread_keys.get(thread_id)

    def remember_thread_key(self, thread_id: str, key: str) -> None:
        """Note ``key`` as the thread's latest run key (the oldest thread is forgotten past
        MAX_REMEMBERED_THREAD_KEYS)."""
        keys = self._thread_keys
        keys[thread_id] = key
        keys.move_to_end(thread_id)
        while len(keys) > MAX_REMEMBERED_THREAD_KEYS:
            keys.popitem(last=False)

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """The Agent contract over the remote endpoint. Before the first event,
        raises RemoteAgentError (refused), ConnectionLostError (unreachable, or the
        drops outlasted the retries), or the codec's EventDecodeError; after it, such
        a failure ends the stream with its ``RUN_ERROR`` instead. A drop is resumed
        from the last event id (``max_retries`` attempts with backoff); a batch of
        events whose last ``seq`` was already delivered is skipped. Closing the
        generator before the terminal event cancels the remote run."""
        run_id = input.run_id
        session = await self._open()
        last_seq = 0
        # The cursor a drop resumes from: only an event id this upstream sent (or the run's
        # start, when the upstream said it keeps the run: _keeps_runs). Without one the run
        # is never started a second time (a server that does not resume would run the agent
        # twice): the run ends with UpstreamStoppedError instead.
        last_id: str | None = None
        accepted = False
        yielded = False
        failures = 0
        self.reconnects = 0
        # True until the run ended or the server refused it: then the consumer stopped early.
        abandoned = True
        drops: tuple[type[BaseException], ...] = (StreamDropped, *self._drops)
        try:
            while True:
                attempt = self._attempt(session, input, last_id)
                try:
                    async for item in attempt:
                        if item is None:
                            accepted = True  # a drop from here on resumes or ends the run, never restarts it
                            if last_id is None and self._keeps_runs(session):
                                last_id = f"{run_id}:0"  # the upstream said it keeps the run: from its start
                            continue
                        ident, events = item
                        if ident is not None:
                            seq = _seq_of(ident, run_id)
                            if seq:
                                if seq <= last_seq:
                                    continue  # already delivered before a reconnect
                                last_seq = seq
                            last_id = ident
                        failures = 0
                        for event in events:
                            yielded = True
                            if isinstance(event, TERMINAL_EVENTS):
                                abandoned = False  # ended: a consumer that stops here cancels nothing
                                yield event
                                return
                            yield event  # type: ignore[misc]
                    raise StreamDropped("the stream ended before RUN_FINISHED / RUN_ERROR")
                except drops as exc:
                    failures += 1
                    stop = unresumable(self.url, exc, accepted=accepted, last_id=last_id, failures=failures,
                                       max_retries=self.retry.max_retries, reconnects=self.reconnects)
                    if stop is not None:
                        abandoned = False
                        yield end_or_raise(stop, yielded)
                        return
                    await self.retry.wait(failures)
                    self.reconnects += 1
                except AguiEngineError as exc:
                    # Refused (RemoteAgentError: 410 cursor expired, 404 unknown run, an
                    # error line): the server is done with the run. A malformed event:
                    # we are, so the remote run is cancelled below.
                    abandoned = not isinstance(exc, RemoteAgentError)
                    yield end_or_raise(exc, yielded)
                    return
                finally:
                    await attempt.aclose()  # type: ignore[attr-defined]
        finally:
            try:
                if abandoned and accepted:
                    await self._cancel(session, run_id)
            finally:
                await self._close(session)

    # -- what a transport provides -------------------------------------------------------

    async def _open(self) -> Any:
        """The per-run session (an HTTP client, a connection holder)."""
        return None

    def _attempt(self, session: Any, input: RunAgentInput, last_id: str | None) -> AsyncIterator[AttemptItem]:
        """One connection: start the run (``last_id`` None) or resume it after
        ``last_id``; yield ``None`` once the server accepted, then batches. Raises
        a ``_drops`` error or StreamDropped on a drop, AguiEngineError when refused."""
        raise NotImplementedError

    def _keeps_runs(self, session: Any) -> bool:
        """Whether the upstream said, when it accepted the run, that it keeps it for a resume
        (this project's gateways give the run a run key): a drop before its first event id
        then resumes from ``<runId>:0``. A third-party server says nothing: False."""
        return False

    async def _cancel(self, session: Any, run_id: str) -> None:
        """Cancel the remote run (the consumer stopped early); must not raise."""

    async def _close(self, session: Any) -> None:
        """Release the session."""


def unresumable(
    url: str, exc: BaseException, *, accepted: bool, last_id: str | None, failures: int, max_retries: int,
    reconnects: int = 0,
) -> UpstreamError | None:
    """Why a dropped run must not be tried again (``None``: resume it from ``last_id``).

    The one rule every client follows: a run is resumed only from an event id the upstream
    sent. A server that sent none cannot resume, and POSTing the input again would run its
    agent a second time (its side effects repeated, a second ``RUN_STARTED``): such a drop
    ends the run with :class:`UpstreamStoppedError` (``upstream_stopped``). An endpoint
    that never accepted the run is unreachable (:class:`ConnectionLostError`), and so is
    one whose drops outlast ``max_retries`` in a row, or whose run has already been
    reconnected :data:`MAX_RECONNECTS_PER_RUN` times in all."""
    tls = tls_failure(exc)
    what = f"TLS handshake failed: {tls}" if tls else type(exc).__name__
    if not accepted:
        return ConnectionLostError(f"cannot reach {url} ({what})", tls_failure=tls)
    if last_id is None:
        return UpstreamStoppedError(
            f"{url} stopped before the end of the run (no RUN_FINISHED or RUN_ERROR; {what}) and sent no "
            "event id to resume from: the run is not started again"
        )
    if failures > max_retries:
        return ConnectionLostError(f"connection to {url} lost ({what}) and not resumed after {failures - 1} retries")
    if reconnects >= MAX_RECONNECTS_PER_RUN:
        return ConnectionLostError(f"connection to {url} lost ({what}) again after {reconnects} reconnects in this run "
                                   f"(MAX_RECONNECTS_PER_RUN={MAX_RECONNECTS_PER_RUN}): given up")
    return None


def _seq_of(ident: str, run_id: str) -> int:
    """The ``seq`` of an event id of this run; 0 for an id of another form (a
    server whose ids are not ``<runId>:<seq>``: nothing is skipped then)."""
    rid, _, seq = ident.rpartition(":")
    return int(seq) if rid == run_id and seq.isascii() and seq.isdigit() and len(seq) <= MAX_SEQ_DIGITS else 0


def end_or_raise(error: AguiEngineError, yielded: bool) -> RunErrorEvent:
    """How a client agent fails: before its first event it raises ``error``; after
    it, the Agent contract forbids raising, so it returns the ``RUN_ERROR`` that
    ends the stream (the caller yields it and returns)."""
    if not yielded:
        raise error
    return RunErrorEvent.from_error(error)


def remote_error_from_line(err: ErrorBody, *, where: str) -> RemoteAgentError:
    """The RemoteAgentError for the ``error`` of an error line of the WebSocket / stdio
    protocols (:class:`~agui_engine.transports.envelope.ErrorBody`)."""
    return RemoteAgentError(
        f"{where} refused: {err.message[:MAX_ERROR_MESSAGE_CHARS]}",
        status=err.status or 0,
        code=err.code,
        retryable=err.code in ("server_busy",),
    )
