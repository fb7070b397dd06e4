"""``agui-engine serve --otel``: the OpenTelemetry SDK configured from the standard ``OTEL_*`` variables.

The package itself only speaks the OpenTelemetry API (``transports/otel.py``); an application
configures the SDK. ``serve`` is such an application: with ``--otel`` it installs a tracer
provider and a meter provider that export over OTLP, the way the OpenTelemetry specification
says the variables read:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``), or per signal
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``; ``OTEL_EXPORTER_OTLP_HEADERS``
  (credentials: never logged); ``OTEL_EXPORTER_OTLP_PROTOCOL`` ``http/protobuf`` (default) or
  ``grpc`` (needs ``opentelemetry-exporter-otlp-proto-grpc``);
* ``OTEL_SERVICE_NAME`` (default here: ``agui-engine``), ``OTEL_RESOURCE_ATTRIBUTES``;
* ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG``, ``OTEL_BSP_*`` (batching),
  ``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_PROPAGATORS`` (default W3C trace context and baggage).

What is still buffered is exported when the server stops (SIGTERM or SIGINT), before it exits.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agui_engine.protocol.errors import UsageError

__all__ = ["DEFAULT_SERVICE_NAME", "configure_otel"]

#: ``service.name`` of the exported telemetry when neither OTEL_SERVICE_NAME nor
#: OTEL_RESOURCE_ATTRIBUTES names one.
DEFAULT_SERVICE_NAME = "agui-engine"


def configure_otel() -> Callable[[], None]:
    """Install the SDK's global tracer and meter providers exporting over OTLP (see the module
    docstring); returns the function that flushes and shuts them down. Raises UsageError saying
    what to install when the SDK or the exporter is missing, or for an unknown protocol."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise UsageError("--otel needs the OpenTelemetry SDK: pip install 'agui-engine[otel]'") from None
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    ).strip()
    try:
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        elif protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        else:
            raise UsageError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported here: use http/protobuf or grpc"
            )
    except ImportError:
        package = "opentelemetry-exporter-otlp-proto-" + ("http" if protocol == "http/protobuf" else "grpc")
        raise UsageError(f"--otel with OTEL_EXPORTER_OTLP_PROTOCOL={protocol} needs: pip install {package}") from None
    detected = OTELResourceDetector().detect()
    resource = Resource.create({"service.name": DEFAULT_SERVICE_NAME}).merge(detected)
    if "OTEL_SERVICE_NAME" in os.environ:
        resource = resource.merge(Resource.create({"service.name": os.environ["OTEL_SERVICE_NAME"]}))
    tracer_provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    metrics.set_meter_provider(meter_provider)

    def shutdown() -> None:
        tracer_provider.shutdown()  # flushes the batch
        meter_provider.shutdown()

    return shutdown
