"""Enqueue a whole message from Python, on the caller's own connection and inside its transaction.

    from email_outbox import Message, Attachment, enqueue_message

    with connection:  # your business transaction
        save_invoice(connection, invoice)
        enqueue_message(connection, f"invoice-{invoice.id}", Message(
            to=["Ann Lee <ann@example.com>"], subject="Your invoice", text="Attached.",
            attachments=[Attachment("invoice.pdf", "application/pdf", pdf_bytes)],
        ))

It builds the JSON document of email_enqueue_message (docs/procedures.md) and CALLs it; the database
checks every rule, so another language gets the same answer for the same document. Works with any
DB-API connection that takes %s parameters (mysql-connector-python, PyMySQL, mysqlclient).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from email_outbox.errors import MessageTooLarge
from email_outbox.models import EnqueueResult, optional_id
from email_outbox.tracing.context import current_trace_context
from email_outbox.tracing.spans import enqueue_span


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    content: bytes
    disposition: str = "attachment"  # or "inline", referenced from the HTML as cid:<content_id>
    content_id: str | None = None

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "filename": self.filename,
            "content_type": self.content_type,
            "content_base64": base64.b64encode(self.content).decode("ascii"),
            "disposition": self.disposition,
        }
        if self.content_id is not None:
            doc["content_id"] = self.content_id
        return doc


@dataclass(frozen=True)
class Template:
    """An SES stored template and the data it is rendered with, instead of subject, text and html."""

    name: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    to: Sequence[str] = ()
    subject: str | None = None
    text: str | None = None
    html: str | None = None
    cc: Sequence[str] = ()
    bcc: Sequence[str] = ()
    reply_to: Sequence[str] = ()
    sender: str | None = None  # `from`; None: the worker's default sender
    headers: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    configuration_set: str | None = None
    attachments: Sequence[Attachment] = ()
    template: Template | None = None
    max_attempts: int | None = None
    send_after: datetime | None = None  # a naive time is taken as UTC
    priority: int | None = None  # 0-9, 9 first; None: 5
    expires_at: datetime | None = None  # a naive time is taken as UTC; None: never
    tenant: str | None = None  # None: the calling account's default tenant (email-outbox tenants)
    # W3C trace context (traceparent, tracestate); None: the current span's, when OpenTelemetry is installed
    trace_context: Mapping[str, str] | None = None

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"to": list(self.to)}
        for key, value in (("cc", self.cc), ("bcc", self.bcc), ("reply_to", self.reply_to)):
            if value:
                doc[key] = list(value)
        for key, scalar in (("from", self.sender), ("subject", self.subject), ("text", self.text),
                            ("html", self.html), ("configuration_set", self.configuration_set),
                            ("max_attempts", self.max_attempts), ("priority", self.priority),
                            ("tenant", self.tenant)):  # fmt: skip
            if scalar is not None:
                doc[key] = scalar
        if self.headers:
            doc["headers"] = dict(self.headers)
        if self.tags:
            doc["tags"] = dict(self.tags)
        if self.attachments:
            doc["attachments"] = [a.document() for a in self.attachments]
        if self.trace_context is not None:
            doc["trace_context"] = dict(self.trace_context)
        if self.template is not None:
            doc["template"] = {"name": self.template.name, "data": dict(self.template.data)}
        for key, moment in (("send_after", self.send_after), ("expires_at", self.expires_at)):
            if moment is not None:
                doc[key] = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()
        return doc

    def to_json(self) -> str:
        document = self.document()
        check_size(document)
        return _json(document)


def _json(document: Mapping[str, Any]) -> str:
    # Raw UTF-8, not \\u escapes: a 4-byte character arrives as itself on every server.
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


# SES's limits as email_enqueue_message applies them (procedures/email_enqueue_message.sql, which
# refuses the same with 45006), checked here first so a message over them is refused before its bytes
# cross the network (a 50 MB message took 14 s to upload only to be refused).
MESSAGE_LIMIT_BYTES = 41_943_040  # bodies and base64 attachments together: SES's 40 MB
BODY_LIMIT_BYTES = 16_777_215  # each body: the column's 16 MiB


def check_size(document: Mapping[str, Any]) -> None:
    """Raise MessageTooLarge when a message document is over a limit email_enqueue_message enforces."""
    bodies = [document.get(key) for key in ("text", "html")]
    body_bytes = [len(b.encode("utf-8")) for b in bodies if isinstance(b, str)]
    if any(size > BODY_LIMIT_BYTES for size in body_bytes):
        raise MessageTooLarge("text and html must each be at most 16 MiB")
    encoded = sum(
        len(a.get("content_base64") or "")
        for a in document.get("attachments") or ()
        if isinstance(a, Mapping) and isinstance(a.get("content_base64"), str)
    )
    total = sum(body_bytes) + encoded
    if total > MESSAGE_LIMIT_BYTES:
        raise MessageTooLarge(
            f"the message is {total / 1_048_576:.1f} MiB with its attachments in base64: at most 40 MB"
            " (SES's limit), bodies and base64 attachments together; nothing was sent to the database"
        )


def enqueue_message(
    connection: Any, notification_id: str, message: Message | Mapping[str, Any]
) -> EnqueueResult:
    """CALL email_enqueue_message on `connection`, in whatever transaction it has open; never commits.
    A duplicate notification_id returns affected 0 and the existing id. Bad input raises the driver's
    error for SQLSTATE 45000, whose errno is its rule class (email_outbox.errors.REFUSAL_BY_ERRNO) and
    whose message names the member and the rule."""
    fields = message.document() if isinstance(message, Message) else dict(message)
    check_size(fields)
    with enqueue_span(notification_id) as span:
        if "trace_context" not in fields:
            # The enqueue span's context (the caller's current one without an SDK recording it).
            trace_context = current_trace_context()
            if trace_context is not None:
                fields["trace_context"] = trace_context
        document = _json(fields)
        cursor = connection.cursor()
        try:
            cursor.execute("CALL email_enqueue_message(%s, %s)", (notification_id, document))
            affected, attempt_id = cursor.fetchall()[0][:2]
            while cursor.nextset():
                if cursor.description:
                    cursor.fetchall()
        finally:
            cursor.close()
        if span is not None and attempt_id is not None:
            span.set_attribute("messaging.message.id", str(attempt_id))
    return EnqueueResult(int(affected), optional_id(attempt_id))
