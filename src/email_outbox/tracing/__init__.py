"""OpenTelemetry for the outbox (the `otel` extra): W3C trace context carried from the enqueue to the
send and to SES's events, spans per OpenTelemetry's messaging conventions, configured by the standard
OTEL_* variables. Without OpenTelemetry installed every function here is a cheap no-op: nothing is
imported, nothing is recorded (docs/frameworks.md, "OpenTelemetry").
"""

from email_outbox.tracing.context import current_trace_context, traceparent_tag
from email_outbox.tracing.setup import configure_from_environment
from email_outbox.tracing.spans import enqueue_span, send_attempt_span, ses_event_span

__all__ = [
    "configure_from_environment",
    "current_trace_context",
    "enqueue_span",
    "send_attempt_span",
    "ses_event_span",
    "traceparent_tag",
]
