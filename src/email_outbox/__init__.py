"""email-outbox: a MySQL-backed transactional outbox that delivers email through Amazon SES."""

from email_outbox.message import Attachment, Message, Template, enqueue_message
from email_outbox.version import PACKAGE_VERSION as __version__

__all__ = ["Attachment", "Message", "Template", "__version__", "enqueue_message"]
