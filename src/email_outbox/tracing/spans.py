"""The outbox's spans, per OpenTelemetry's messaging conventions (messaging.system, the operation's
type and name, the message id), with the outbox's own attributes under `email_outbox.*`.

- enqueue: a PRODUCER span `send email_outbox` (operation type `send`) around the enqueue; its context
  is what the row stores (the `trace_context` member).
- each send attempt: a CONSUMER span `deliver email_outbox` (operation type `process`): the stored
  context is the parent of the first attempt and a link of each later one (a later attempt is its own
  trace: it may come hours later). Outcome, SES message id and error.type are set when SES answered.
- each SES event recorded: a CONSUMER span `process aws_ses_events`, linked to the send it belongs to
  through the traceparent the worker gave SES as an email tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from email_outbox.tracing.context import extract, otel_trace, traceparent_tag

SYSTEM = "email_outbox"
TRACER = "email_outbox"


class SendAttempt:
    """What the worker reports of one attempt; a no-op without a recording span."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def traceparent(self) -> str | None:
        return traceparent_tag(self._span) if self._span is not None and self._span.is_recording() else None

    def finish(self, outcome: str, message_id: str | None, error_code: str | None, error: str | None) -> None:
        if self._span is None or not self._span.is_recording():
            return
        self._span.set_attribute("email_outbox.outcome", outcome)
        if message_id:
            self._span.set_attribute("email_outbox.ses_message_id", message_id)
        if outcome != "accepted":
            from opentelemetry.trace import Status, StatusCode

            self._span.set_attribute("error.type", error_code or outcome)
            self._span.set_status(Status(StatusCode.ERROR, (error or error_code or outcome)[:300]))


@contextmanager
def enqueue_span(notification_id: str) -> Iterator[Any]:
    """Around an enqueue from Python; yields the span (None without OpenTelemetry)."""
    if otel_trace is None:
        yield None
        return
    tracer = otel_trace.get_tracer(TRACER)
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": SYSTEM,
        "email_outbox.notification_id": notification_id,
    }
    span = tracer.start_span("send email_outbox", kind=otel_trace.SpanKind.PRODUCER, attributes=attributes)
    if not span.is_recording():
        # No SDK in this process: a no-op span would hide the caller's own context, which is stored instead.
        yield None
        return
    with otel_trace.use_span(span, end_on_exit=True, record_exception=True):
        yield span


@contextmanager
def send_attempt_span(
    row_id: int, notification_id: str, attempt: int, message_options: str | None
) -> Iterator[SendAttempt]:
    if otel_trace is None:
        yield SendAttempt(None)
        return
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, NonRecordingSpan

    stored = _stored_context(message_options)
    enqueued = extract(stored)
    # Never the worker's own current context: each attempt is the email's, not the claim loop's.
    parent: Any = Context()
    links = []
    if enqueued is not None and attempt <= 1:
        parent = otel_trace.set_span_in_context(NonRecordingSpan(enqueued), Context())
    elif enqueued is not None:
        links.append(Link(enqueued, {"email_outbox.link": "enqueue"}))
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "deliver",
        "messaging.destination.name": SYSTEM,
        "messaging.message.id": str(row_id),
        "email_outbox.notification_id": notification_id,
        "email_outbox.attempt": attempt,
    }
    tracer = otel_trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        "deliver email_outbox", context=parent, kind=otel_trace.SpanKind.CONSUMER, links=links,
        attributes=attributes, record_exception=True,
    ) as span:  # fmt: skip
        yield SendAttempt(span)


def ses_event_span(
    event_type: str, ses_message_id: str, outbox_id: str | None, traceparent: str | None, outcome: str
) -> None:
    """One span for an SES event just recorded, linked to its send."""
    if otel_trace is None:
        return
    from opentelemetry.context import Context
    from opentelemetry.trace import Link

    send = extract({"traceparent": traceparent}) if traceparent else None
    attributes = {
        "messaging.system": "aws_ses",
        "messaging.operation.type": "process",
        "messaging.operation.name": "record",
        "messaging.destination.name": "aws_ses_events",
        "messaging.message.id": ses_message_id,
        "email_outbox.event_type": event_type,
        "email_outbox.record_outcome": outcome,
    }
    if outbox_id:
        attributes["email_outbox.row_id"] = outbox_id
    tracer = otel_trace.get_tracer(TRACER)
    span = tracer.start_span(
        "process aws_ses_events", context=Context(), kind=otel_trace.SpanKind.CONSUMER,
        links=[Link(send, {"email_outbox.link": "send"})] if send is not None else [], attributes=attributes,
    )  # fmt: skip
    span.end()


def _stored_context(message_options: str | None) -> Mapping[str, Any] | None:
    if not message_options:
        return None
    try:
        value = json.loads(message_options).get("trace_context")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, Mapping) else None
