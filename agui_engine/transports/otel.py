"""OpenTelemetry for the gateway: the run's spans and the counters, over the OpenTelemetry API only.

Theory of operation
-------------------
The package imports ``opentelemetry-api`` (the ``[otel]`` extra) here and only here, on first
use: when a :class:`~transports.runs.RunRegistry` is built with ``RegistryOptions(tracing=True)``
or a :class:`~transports.metrics.GatewayMetrics` with ``otel=True``. The application configures
the SDK (a ``TracerProvider`` and ``MeterProvider`` with their exporters; ``agui-engine serve
--otel`` does it from the standard ``OTEL_*`` variables, ``cli/otel.py``); without one the API's
no-op providers make every call here free of output.

Spans (the OpenTelemetry GenAI semantic conventions):

=====================================  ========  ================================================
span                                   kind      attributes
=====================================  ========  ================================================
``invoke_agent {agent}``               internal  ``gen_ai.operation.name`` = ``invoke_agent``,
                                                 ``gen_ai.agent.name``, ``gen_ai.conversation.id``
                                                 (the threadId), ``agui.run.id``; ``error.type``
                                                 (the RUN_ERROR code) when the run failed
``chat {model}``                       client    ``gen_ai.operation.name`` = ``chat``,
                                                 ``gen_ai.provider.name``, ``gen_ai.request.model``,
                                                 ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
                                                 ``gen_ai.usage.output_tokens``,
                                                 ``gen_ai.response.finish_reasons``
``execute_tool {tool}``                internal  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
                                                 ``gen_ai.tool.type``; ``error.type`` when it failed
=====================================  ========  ================================================

``invoke_agent`` is opened by the run registry in the task that runs the agent, as the child of
the trace context the client sent (W3C ``traceparent``: the HTTP front ends adopt it with
:func:`incoming_trace` around ``registry.start``); the core's hook (``loops/observe.py``) opens
the chat and tool spans under it. Outgoing requests of the run carry the current span's
``traceparent``: a provider's HTTP request, a remote AG-UI agent's (``SSEAgent``), an MCP tool
call's ``params._meta`` (the MCP convention, so stdio servers get it too).

Metrics (:class:`OTelMetrics`, beside Prometheus: the same notes feed both): ``agui.events.sent``
and ``agui.bytes.sent`` (``agui.transport``), ``agui.runs.ended`` (``agui.terminal``,
``error.type``), ``agui.resumes``, ``agui.errors`` (``error.type``), ``agui.runs.active``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from agui_engine.loops.observe import AttributeValue, SpanKind
from agui_engine.protocol.errors import UsageError
from agui_engine.protocol.events import RunAgentInput

__all__ = [
    "INSTRUMENTATION_NAME",
    "OTelMetrics",
    "OTelObserver",
    "OTelSpan",
    "incoming_trace",
    "require_otel",
    "run_span",
]

#: The instrumentation scope of every span and instrument of the package.
INSTRUMENTATION_NAME = "agui_engine"


def require_otel() -> Any:
    """The ``opentelemetry.trace`` module; UsageError saying what to install when it is absent."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise UsageError("tracing needs the OpenTelemetry API: pip install 'agui-engine[otel]'") from None
    return trace


class OTelSpan:
    """One open span, current in the context that opened it until :meth:`end` (a SpanHandle)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Any, token: Any) -> None:
        self._span = span
        self._token = token

    def set(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def end(self, error: str | None = None) -> None:
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        if self._token is None:
            return  # ended already
        span = self._span
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()
        token, self._token = self._token, None
        context.detach(token)  # in another context (a generator finalised elsewhere) the API logs it


class OTelObserver:
    """The tracing hook of ``loops/observe.py`` over the OpenTelemetry API (an Observer).
    ``tracer_provider``: the provider to trace with (default: the global one, as configured
    by the application). Raises UsageError when ``opentelemetry-api`` is not installed."""

    def __init__(self, tracer_provider: Any = None) -> None:
        trace = require_otel()
        from agui_engine import __version__

        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider)
        self._kinds = {
            "client": trace.SpanKind.CLIENT,
            "internal": trace.SpanKind.INTERNAL,
            "server": trace.SpanKind.SERVER,
        }
        self._trace = trace

    def start(self, name: str, kind: SpanKind, attributes: Mapping[str, AttributeValue]) -> OTelSpan:
        from opentelemetry import context

        span = self._tracer.start_span(name, kind=self._kinds[kind], attributes=dict(attributes))
        return OTelSpan(span, context.attach(self._trace.set_span_in_context(span)))

    def headers(self) -> dict[str, str]:
        from opentelemetry import propagate

        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier


def run_span(observer: OTelObserver | Any, input: RunAgentInput, agent: object) -> Any:
    """Open the ``invoke_agent`` span of one run (current until its end)."""
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        name = type(agent).__name__
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.conversation.id": input.thread_id,
        "agui.run.id": input.run_id,
    }
    return observer.start(f"invoke_agent {name}", "internal", attributes)


@contextlib.contextmanager
def incoming_trace(observer: object | None, headers: Mapping[str, str]) -> Iterator[None]:
    """Make the trace context of a client's request (``traceparent``, ``tracestate``) current
    while the block runs: a run started in it continues the client's trace. Nothing when
    ``observer`` is None (tracing off) or the request carries no trace context."""
    if observer is None or "traceparent" not in headers:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract({k: headers[k] for k in ("traceparent", "tracestate") if k in headers}))
    try:
        yield
    finally:
        context.detach(token)


class OTelMetrics:
    """The gateway's counters as OpenTelemetry instruments (fed by GatewayMetrics' notes).
    ``meter_provider``: default, the global one. Raises UsageError without the API."""

    def __init__(self, meter_provider: Any = None) -> None:
        require_otel()
        from opentelemetry import metrics

        from agui_engine import __version__

        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider)
        self.events_sent = meter.create_counter("agui.events.sent", unit="{event}", description="Events written to clients")
        self.bytes_sent = meter.create_counter("agui.bytes.sent", unit="By", description="Bytes written to clients")
        self.runs_ended = meter.create_counter("agui.runs.ended", unit="{run}", description="Runs ended")
        self.resumes = meter.create_counter("agui.resumes", unit="{resume}", description="Resumes served")
        self.errors = meter.create_counter("agui.errors", unit="{error}", description="Requests refused, streams cut")
        self._active: Any = lambda: 0.0
        self._meter = meter
        self._attrs: dict[str, dict[str, str]] = {}

        def active(options: Any) -> Iterator[Any]:
            yield metrics.Observation(self._active())

        meter.create_observable_gauge("agui.runs.active", callbacks=[active], unit="{run}", description="Runs running")

    def bind(self, active: Any) -> None:
        self._active = active

    def note_sent(self, transport: str, events: int, nbytes: int) -> None:
        attrs = self._attrs.get(transport)
        if attrs is None:
            attrs = self._attrs[transport] = {"agui.transport": transport}
        self.events_sent.add(events, attrs)
        self.bytes_sent.add(nbytes, attrs)

    def note_resume(self, transport: str) -> None:
        self.resumes.add(1, {"agui.transport": transport})

    def note_run_ended(self, code: str | None) -> None:
        if code is None:
            self.runs_ended.add(1, {"agui.terminal": "RUN_FINISHED"})
        else:
            self.runs_ended.add(1, {"agui.terminal": "RUN_ERROR", "error.type": code})

    def note_error(self, code: str) -> None:
        self.errors.add(1, {"error.type": code})
