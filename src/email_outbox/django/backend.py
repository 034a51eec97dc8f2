"""The backend: each message enqueued on Django's own connection, in the caller's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend
from django.db import DatabaseError, connections, transaction

from email_outbox.django.messages import outbox_message
from email_outbox.errors import InvalidInput, refusal_from_driver_error
from email_outbox.message import enqueue_message


class EmailBackend(BaseEmailBackend):
    """`send_messages` returns how many messages the outbox accepted: new, or already enqueued under the
    same notification id (`X-Outbox-Notification-Id`). A message with no recipient is skipped, as
    Django's SMTP backend does. A refusal raises the outbox's exception (email_outbox.errors, with its
    errno) unless fail_silently; the caller's transaction stays usable either way."""

    def __init__(self, fail_silently: bool = False, database: str | None = None, **kwargs: Any) -> None:
        super().__init__(fail_silently=fail_silently, **kwargs)
        self.database: str = database or str(getattr(settings, "EMAIL_OUTBOX_DATABASE", "default"))

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        accepted = 0
        for email in email_messages:
            if not email.recipients():
                continue
            try:
                self._enqueue(email)
            except InvalidInput:
                if not self.fail_silently:
                    raise
            else:
                accepted += 1
        return accepted

    def _enqueue(self, email: EmailMessage) -> None:
        notification_id, message = outbox_message(email)
        connection = connections[self.database]
        try:
            # A savepoint inside the caller's atomic() (a transaction of its own outside one): a refusal
            # leaves the caller's transaction as it was and usable.
            with transaction.atomic(using=self.database):
                enqueue_message(connection, notification_id or f"django-{uuid.uuid4()}", message)
        except DatabaseError as exc:
            refusal = refusal_from_driver_error(exc)
            if refusal is None:
                raise
            raise refusal from exc
