"""Whole messages. Recipients beyond the first, reply-to, headers, tags, a configuration set
and a stored template travel in `message_options` (JSON, read by the claim); attachments live in a
table of their own, so claims and listings never read them.

Idempotent: the columns are added only when missing (MySQL 8 has no ADD COLUMN IF NOT EXISTS), the
table IF NOT EXISTS. Both columns are trailing and nullable or defaulted: an instant ALTER on MySQL 8
and MariaDB 10.3+, whatever the table's size.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0001_schema", "0002_audit_in_procedures", "0003_security"}
__transactional__ = False

COLUMNS = {
    # The message document minus what has columns of its own (from, the first recipient, subject,
    # bodies) and minus the attachments: to, cc, bcc, reply_to, headers, tags, configuration_set,
    # template. NULL for a row enqueued by email_enqueue.
    "message_options": "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
    # Decoded bytes of this row's attachments: the worker holds that much of its memory budget and
    # loads them (email_claimed_attachments) just before the send.
    "attachment_bytes": "BIGINT UNSIGNED NOT NULL DEFAULT 0",
}


def add_columns(conn: Any) -> None:
    for name, definition in COLUMNS.items():
        add_column_if_missing(conn, "email_delivery_attempts", name, definition)


steps = [
    step(add_columns),
    step(
        """
CREATE TABLE IF NOT EXISTS email_attachments (
  attempt_id    BIGINT UNSIGNED NOT NULL,
  position      SMALLINT UNSIGNED NOT NULL,
  filename      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  content_type  VARCHAR(78) CHARACTER SET ascii NOT NULL,
  disposition   ENUM('attachment', 'inline') NOT NULL,
  content_id    VARCHAR(78) CHARACTER SET ascii NULL,
  content       LONGBLOB NULL,
  PRIMARY KEY (attempt_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]
