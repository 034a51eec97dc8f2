"""The worker's and the events consumer's tracer provider, from the standard OTEL_* variables.

On when the OpenTelemetry SDK and the OTLP/HTTP exporter are installed (the `otel` extra) and an OTLP
endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), unless
OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. Everything else (headers such as an
authorization token, the service name, resource attributes, sampler, batch delay) is the SDK's own
reading of its variables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

log = logging.getLogger("email_outbox.tracing")


def configure_from_environment(default_service_name: str) -> Callable[[], None]:
    """Installs the global tracer provider when the environment asks for one; returns its shutdown
    (flushes the spans still buffered), a no-op when tracing is off."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return lambda: None
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return lambda: None
    if not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return lambda: None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "an OTLP endpoint is set but OpenTelemetry is not installed: pip install 'email-outbox[otel]'"
        )
        return lambda: None
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or default_service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("tracing: spans exported over OTLP/HTTP")
    return provider.shutdown
