"""A Django EmailMessage as the outbox's Message: every recipient, header, body and attachment."""

from __future__ import annotations

import mimetypes
from email.message import Message as MimePart
from email.utils import formataddr, getaddresses
from typing import Any

from django.core.mail import EmailMessage

from email_outbox.errors import InvalidArgument, InvalidMember
from email_outbox.message import Attachment, Message

# The header that names the email's notification id (the outbox's idempotency key); it is read here
# and never sent. Without it, each message gets a fresh id.
NOTIFICATION_ID_HEADER = "X-Outbox-Notification-Id"
_OCTET_STREAM = "application/octet-stream"


def outbox_message(email: EmailMessage) -> tuple[str | None, Message]:
    """The notification id the message names (None: none) and the Message to enqueue."""
    headers = dict(email.extra_headers)
    notification_id = _pop(headers, NOTIFICATION_ID_HEADER)
    sender = _pop(headers, "From") or email.from_email
    reply_to_header = _pop(headers, "Reply-To")
    reply_to = _mailboxes([reply_to_header]) if reply_to_header else list(email.reply_to)
    text, html = _bodies(email)
    return notification_id, Message(
        to=list(email.to),
        cc=list(email.cc),
        bcc=list(email.bcc),
        reply_to=reply_to,
        sender=sender,
        subject=str(email.subject),
        text=text,
        html=html,
        headers={name: str(value) for name, value in headers.items()},
        attachments=[_attachment(item, i) for i, item in enumerate(email.attachments)],
    )


def _pop(headers: dict[str, Any], name: str) -> str | None:
    """Headers compare case-insensitively, as Django's own message building does."""
    for key in list(headers):
        if key.lower() == name.lower():
            return str(headers.pop(key))
    return None


def _mailboxes(values: list[str]) -> list[str]:
    return [formataddr(pair) for pair in getaddresses(values)]


def _bodies(email: EmailMessage) -> tuple[str | None, str | None]:
    text: str | None = None
    html: str | None = None
    body = str(email.body) if email.body else None
    if email.content_subtype == "html":
        html = body
    else:
        text = body
    for content, mimetype in getattr(email, "alternatives", ()):
        value = content.decode() if isinstance(content, bytes) else str(content)
        if mimetype == "text/html" and html is None:
            html = value
        elif mimetype == "text/plain" and text is None:
            text = value
        else:
            raise InvalidMember(
                f"alternative {mimetype}: the outbox sends one text and one HTML body (send it as an attachment)"
            )
    if text is None and html is None:
        text = ""
    return text, html


def _attachment(item: Any, position: int) -> Attachment:
    if isinstance(item, MimePart):
        return _mime_attachment(item, position)
    filename, content, mimetype = item
    data = content.encode() if isinstance(content, str) else bytes(content)
    content_type = (
        mimetype or (mimetypes.guess_type(filename or "")[0] if filename else None) or _OCTET_STREAM
    )
    return Attachment(filename or _generated_name(position, content_type), content_type, data)


def _mime_attachment(part: MimePart, position: int) -> Attachment:
    if part.is_multipart():
        raise InvalidArgument(
            f"attachments[{position}] is a multipart MIME part: attach its parts one by one"
        )
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else str(part.get_payload()).encode()
    content_type = part.get_content_type()
    content_id = part.get("Content-ID")
    cid = str(content_id).strip().strip("<>") if content_id else None
    disposition = part.get_content_disposition() or ("inline" if cid else "attachment")
    filename = part.get_filename() or _generated_name(position, content_type)
    return Attachment(filename, content_type, data, disposition=disposition, content_id=cid)


def _generated_name(position: int, content_type: str) -> str:
    """A part without a filename (an inline image often has none): the outbox needs one."""
    return f"part-{position + 1}{mimetypes.guess_extension(content_type) or '.bin'}"
