"""The W3C Trace Context as the outbox stores and forwards it, and the OpenTelemetry API if installed."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from email_outbox.models import ClaimedEmail

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the `otel` extra is not installed: tracing is off
    otel_trace = None  # type: ignore[assignment]
    TraceContextTextMapPropagator = None  # type: ignore[assignment,misc]

__all__ = [
    "TRACEPARENT_TAG",
    "current_trace_context",
    "enabled",
    "extract",
    "otel_trace",
    "traceparent_tag",
    "with_traceparent_tag",
]

# The SES email tag that carries a send's traceparent to SES's event records, so the events consumer
# can link an event to the send it belongs to (SES tag values allow hex and '-').
TRACEPARENT_TAG = "otel_traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def enabled() -> bool:
    return otel_trace is not None


def current_trace_context() -> dict[str, str] | None:
    """The current span's context as the `trace_context` message member (traceparent, tracestate);
    None without OpenTelemetry or outside a valid span."""
    if otel_trace is None or not otel_trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier if "traceparent" in carrier else None


def extract(trace_context: Mapping[str, Any] | None) -> Any:
    """The span context a stored `trace_context` names; None when there is none valid."""
    if otel_trace is None or not isinstance(trace_context, Mapping):
        return None
    carrier = {k: str(v) for k, v in trace_context.items() if k in ("traceparent", "tracestate")}
    if not _TRACEPARENT.match(carrier.get("traceparent", "")):
        return None
    span_context = otel_trace.get_current_span(
        TraceContextTextMapPropagator().extract(carrier)
    ).get_span_context()
    return span_context if span_context.is_valid else None


def with_traceparent_tag(email: ClaimedEmail, traceparent: str | None) -> ClaimedEmail:
    """The email with its send's traceparent as an SES email tag, while SES's 50 tags allow one more
    (the message's own, at most 49, and outbox_id)."""
    if traceparent is None:
        return email
    options = email.options
    tags = dict(options.get("tags") or {})
    if len(tags) >= 49:
        return email
    tags[TRACEPARENT_TAG] = traceparent
    return replace(email, message_options=json.dumps({**options, "tags": tags}))


def traceparent_tag(span: Any) -> str | None:
    """A recording span's traceparent, for the TRACEPARENT_TAG email tag."""
    if otel_trace is None or span is None:
        return None
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
