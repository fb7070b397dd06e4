"""Prometheus metrics of one gateway (``GET <path>/metrics``).

Theory of operation
-------------------
:class:`GatewayMetrics` owns a private ``prometheus_client.CollectorRegistry``
(so two gateways in one process never collide) and the metrics below; the run
registry and the transports call its ``note_*`` methods where the things
happen, and :meth:`GatewayMetrics.render` produces the text exposition format.
``prometheus-client`` is imported when a GatewayMetrics is built, never by
``import agui_engine.transports``; without metrics the gateway pays nothing.

=======================================  =========  =========================================
name                                     type       labels / meaning
=======================================  =========  =========================================
``agui_active_runs``                     gauge      runs running on this node
``agui_draining``                        gauge      1 while the node drains (not ready)
``agui_events_sent_total``               counter    ``transport``: events written to clients
``agui_bytes_sent_total``                counter    ``transport``: bytes written (framing incl.)
``agui_resumes_total``                   counter    ``transport``: resumes served (a cursor given)
``agui_runs_ended_total``                counter    ``terminal`` (RUN_FINISHED / RUN_ERROR), ``code``
``agui_errors_total``                    counter    ``code``: refusals and streams cut with an error
``agui_upstream_first_token_seconds``    histogram  run start -> the agent's first event after RUN_STARTED
``agui_event_log_append_seconds``        histogram  one batch stored by a shared event log
=======================================  =========  =========================================

With ``GatewayMetrics(otel=True)`` the same notes also feed OpenTelemetry instruments
(``transports/otel.py``: ``agui.events.sent``, ``agui.runs.ended`` ...), exported by whatever
meter provider the application configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .otel import OTelMetrics

__all__ = ["FIRST_TOKEN_BUCKETS", "GatewayMetrics", "LOG_APPEND_BUCKETS", "METRICS_CONTENT_TYPE"]

#: Histogram buckets (seconds) of the upstream latency to the first token: model
#: APIs answer in 0.2-3 s, reasoning models can think for a minute.
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

#: Histogram buckets (seconds) of one event-log batch append: a Redis round trip
#: on a LAN is ~0.2-1 ms; tens of ms mean a loaded or distant Redis.
LOG_APPEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

#: The Content-Type of the text exposition format (version 0.0.4).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class GatewayMetrics:
    """The metrics of one gateway node (see the module docstring). ``otel``: also count them
    as OpenTelemetry instruments (:class:`~transports.otel.OTelMetrics`, the global meter
    provider). Raises UsageError when ``prometheus-client`` (or, with ``otel``, the
    OpenTelemetry API) is not installed."""

    def __init__(self, *, otel: bool = False) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError:  # pragma: no cover - a declared dependency
            from agui_engine.protocol.errors import UsageError

            raise UsageError("metrics need the prometheus-client package: pip install prometheus-client") from None
        reg = self.registry = CollectorRegistry(auto_describe=True)
        self._active: Callable[[], float] = lambda: 0.0
        self._draining: Callable[[], float] = lambda: 0.0
        Gauge("agui_active_runs", "Runs running on this node", registry=reg).set_function(lambda: self._active())
        Gauge("agui_draining", "1 while this node drains (refuses new runs)", registry=reg).set_function(
            lambda: self._draining()
        )
        self.events_sent = Counter("agui_events_sent", "Events written to clients", ["transport"], registry=reg)
        self.bytes_sent = Counter("agui_bytes_sent", "Bytes written to clients", ["transport"], registry=reg)
        self.resumes = Counter("agui_resumes", "Resumes served (a Last-Event-ID / lastEventId given)", ["transport"], registry=reg)
        self.runs_ended = Counter("agui_runs_ended", "Runs ended, by terminal event and RUN_ERROR code", ["terminal", "code"], registry=reg)
        self.errors = Counter("agui_errors", "Requests refused and streams cut, by error code", ["code"], registry=reg)
        self.first_token = Histogram(
            "agui_upstream_first_token_seconds",
            "From a run's start to the agent's first event after RUN_STARTED",
            buckets=FIRST_TOKEN_BUCKETS,
            registry=reg,
        )
        self.log_append = Histogram(
            "agui_event_log_append_seconds",
            "Time to store one batch of events in a shared event log",
            buckets=LOG_APPEND_BUCKETS,
            registry=reg,
        )
        # Children per label value, resolved once (labels() costs a dict lookup and a lock).
        self._sent: dict[str, tuple[Any, Any]] = {}
        #: The same counts as OpenTelemetry instruments (None: Prometheus only).
        self.otel: OTelMetrics | None = None
        if otel:
            from .otel import OTelMetrics

            self.otel = OTelMetrics()
            self.otel.bind(lambda: self._active())

    def bind(self, active: Callable[[], float], draining: Callable[[], float]) -> None:
        """Where the gauges read from (the run registry calls this)."""
        self._active = active
        self._draining = draining

    def note_sent(self, transport: str, events: int, nbytes: int) -> None:
        children = self._sent.get(transport)
        if children is None:
            children = self._sent[transport] = (self.events_sent.labels(transport), self.bytes_sent.labels(transport))
        children[0].inc(events)
        children[1].inc(nbytes)
        if self.otel is not None:
            self.otel.note_sent(transport, events, nbytes)

    def note_resume(self, transport: str) -> None:
        self.resumes.labels(transport).inc()
        if self.otel is not None:
            self.otel.note_resume(transport)

    def note_run_ended(self, code: str | None) -> None:
        if code is None:
            self.runs_ended.labels("RUN_FINISHED", "").inc()
        else:
            self.runs_ended.labels("RUN_ERROR", code).inc()
        if self.otel is not None:
            self.otel.note_run_ended(code)

    def note_error(self, code: str) -> None:
        self.errors.labels(code).inc()
        if self.otel is not None:
            self.otel.note_error(code)

    def note_first_token(self, seconds: float) -> None:
        self.first_token.observe(seconds)

    def note_log_append(self, seconds: float) -> None:
        self.log_append.observe(seconds)

    def render(self) -> bytes:
        """The text exposition format of every metric."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
