"""Django's email backend for the outbox: `EMAIL_BACKEND = "email_outbox.django.EmailBackend"`.

`send_mail`, `send_mass_mail`, `EmailMessage` and `EmailMultiAlternatives` enqueue on Django's own
database connection (`EMAIL_OUTBOX_DATABASE`, default "default"), inside the caller's
`transaction.atomic()`: a rolled-back transaction enqueues nothing. docs/frameworks.md has the settings.
"""

from email_outbox.django.backend import EmailBackend
from email_outbox.django.messages import NOTIFICATION_ID_HEADER, outbox_message

__all__ = ["NOTIFICATION_ID_HEADER", "EmailBackend", "outbox_message"]
