"""SES event records (docs: "Contents of event data that Amazon SES publishes to Amazon SNS") turned
into the fields `email_record_provider_event` takes: one ProviderEvent per recipient the record
names (the outbox sends to one recipient, so usually one).

Types recorded: Send, Delivery, Bounce, Complaint, Reject, Rendering Failure, DeliveryDelay. Open,
Click and Subscription are not about whether a message went out: skipped, as is any type SES adds later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any

from email_outbox.events.envelopes import MalformedMessage
from email_outbox.tracing.context import TRACEPARENT_TAG

OUTBOX_ID_TAG = "outbox_id"

# eventType (event publishing) or notificationType (identity notifications) -> the type recorded.
RECORDED_TYPES = {
    "Send": "Send",
    "Delivery": "Delivery",
    "Bounce": "Bounce",
    "Complaint": "Complaint",
    "Reject": "Reject",
    "Rendering Failure": "RenderingFailure",
    "RenderingFailure": "RenderingFailure",
    "DeliveryDelay": "DeliveryDelay",
}

# The same rule set the procedures apply to log fields (email_internal_check_text): such characters in
# free text SES passes on from remote mail servers become spaces, so a record is never refused for them.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


@dataclass(frozen=True)
class ProviderEvent:
    event_type: str
    ses_message_id: str
    outbox_id: str | None
    recipient: str | None
    event_at: datetime
    kind: str | None = None
    subkind: str | None = None
    detail: str | None = None
    # The traceparent of the send (the worker's TRACEPARENT_TAG email tag), for the event's span link.
    traceparent: str | None = None


class SkippedRecord(Exception):
    """A well-formed record of a type this outbox does not record (Open, Click, ...)."""


def _clean(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = _UNSAFE.sub(" ", str(value)).strip()
    return text[:limit] or None


def _time(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise MalformedMessage(f"{what} is missing or not a string")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedMessage(f"{what} is not an ISO time: {value[:40]!r}") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _address(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if "<" in text:
        text = parseaddr(text)[1] or text
    return _clean(text, 320)


def _object(record: dict[str, Any], key: str) -> dict[str, Any]:
    value = record.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedMessage(f"{key} is not an object")
    return value


def _recipients(entries: Any, mail: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(address, its entry) per recipient the event names, else the message's destination."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            found.append((_address(entry.get("emailAddress")), entry))
        else:
            found.append((_address(entry), {}))
    if not found:
        destination = mail.get("destination")
        found = [(_address(d), {}) for d in destination] if isinstance(destination, list) else []
    return found or [(None, {})]


def events_of(record: dict[str, Any]) -> list[ProviderEvent]:
    """The ProviderEvents of one SES event record. Raises MalformedMessage or SkippedRecord."""
    raw_type = record.get("eventType", record.get("notificationType"))
    if not isinstance(raw_type, str):
        raise MalformedMessage("eventType is not a string")
    event_type = RECORDED_TYPES.get(raw_type)
    if event_type is None:
        raise SkippedRecord(raw_type[:40])
    mail = _object(record, "mail")
    message_id = mail.get("messageId")
    if not isinstance(message_id, str) or not 1 <= len(message_id) <= 191:
        raise MalformedMessage("mail.messageId is missing or not 1 to 191 characters")
    tags = mail.get("tags")
    outbox_id = traceparent = None
    if isinstance(tags, dict):
        values = tags.get(OUTBOX_ID_TAG)
        if isinstance(values, list) and values and isinstance(values[0], str):
            outbox_id = _clean(values[0], 191)
        parents = tags.get(TRACEPARENT_TAG)
        if isinstance(parents, list) and parents and isinstance(parents[0], str):
            traceparent = _clean(parents[0], 64)
    mail_at = _time(mail.get("timestamp"), "mail.timestamp")

    kind = subkind = detail = None
    entries: Any = None
    event_at = mail_at
    if event_type == "Delivery":
        body = _object(record, "delivery")
        event_at = _time(body.get("timestamp"), "delivery.timestamp") if "timestamp" in body else mail_at
        entries, detail = body.get("recipients"), body.get("smtpResponse")
    elif event_type == "Bounce":
        body = _object(record, "bounce")
        event_at = _time(body.get("timestamp"), "bounce.timestamp") if "timestamp" in body else mail_at
        kind, subkind = body.get("bounceType"), body.get("bounceSubType")
        entries, detail = body.get("bouncedRecipients"), body.get("feedbackId")
    elif event_type == "Complaint":
        body = _object(record, "complaint")
        event_at = _time(body.get("timestamp"), "complaint.timestamp") if "timestamp" in body else mail_at
        kind, subkind = body.get("complaintFeedbackType"), body.get("complaintSubType")
        entries, detail = body.get("complainedRecipients"), body.get("feedbackId")
    elif event_type == "DeliveryDelay":
        body = _object(record, "deliveryDelay")
        event_at = _time(body.get("timestamp"), "deliveryDelay.timestamp") if "timestamp" in body else mail_at
        kind, entries = body.get("delayType"), body.get("delayedRecipients")
        detail = f"expires {body.get('expirationTime')}" if body.get("expirationTime") else None
    elif event_type == "Reject":
        detail = _object(record, "reject").get("reason")
    elif event_type == "RenderingFailure":
        failure = _object(record, "failure")
        detail = failure.get("errorMessage") or failure.get("templateName")

    events = []
    for recipient, entry in _recipients(entries, mail):
        diagnostic = entry.get("diagnosticCode") if entry else None
        text = " ".join(str(p) for p in (detail, diagnostic) if p)
        events.append(
            ProviderEvent(
                event_type=event_type,
                ses_message_id=message_id,
                outbox_id=outbox_id,
                recipient=recipient,
                event_at=event_at,
                kind=_clean(kind, 64),
                subkind=_clean(subkind, 64),
                detail=_clean(text, 2000),
                traceparent=traceparent,
            )
        )
    return events
