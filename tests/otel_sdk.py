"""The OpenTelemetry SDK as an application would configure it, once per test process: a global
tracer provider exporting to an in-memory exporter and a global meter provider read by an
in-memory reader (the API allows one global provider per process, so every test shares them
and picks its own trace out by trace id)."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_state: dict[str, Any] = {}


def sdk() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's exporter and metric reader (installed on first call)."""
    if not _state:
        # The SDK reads OTEL_SDK_DISABLED once, when a provider is built, and then records nothing:
        # say so instead of letting every test time out waiting for its spans.
        disabled = os.environ.get("OTEL_SDK_DISABLED", "")
        assert disabled.strip().lower() != "true", (
            f"OTEL_SDK_DISABLED={disabled!r} in this test process: the OpenTelemetry SDK would record nothing "
            "(a module that sets it at import, at collection, leaks it to every test of the process)")
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _state.update(exporter=exporter, reader=reader)
    return _state["exporter"], _state["reader"]


def spans_of(trace_id: int) -> list[ReadableSpan]:
    """The finished spans of one trace, in the order they ended."""
    exporter, _ = sdk()
    return [s for s in exporter.get_finished_spans() if s.context is not None and s.context.trace_id == trace_id]


def counter_total(name: str, **attributes: str) -> float:
    """The current sum of a counter over the data points whose attributes include ``attributes``."""
    _, reader = sdk()
    data = reader.get_metrics_data()
    total = 0.0
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in attributes.items()):
                        total += point.value
    return total
