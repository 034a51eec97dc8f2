"""email-outbox: a MySQL-backed transactional outbox that delivers email through Amazon SES."""

from email_outbox.message import Attachment, Message, Template, enqueue_message

__version__ = "0.1.0"
__all__ = ["Attachment", "Message", "Template", "enqueue_message"]
