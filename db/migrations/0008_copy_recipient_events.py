"""SES events matched through a cc or bcc of a whole message. An event whose `outbox_id` tag names a row
addressed to the event's recipient only as a cc or bcc (not its `to_address`) is recorded against that
row (its history, its provider state, the recipient's suppression) but is no evidence of whether the
row was accepted: an archive address that another outbox sharing the SES account also copies would
otherwise let that outbox's events settle this outbox's row with the same id. `evidence` = 0 marks
such an event; neither email_record_provider_event nor email_resolve_unknown_from_evidence settles a
row from it.

The column is trailing with a default: an instant ALTER on MySQL 8 and MariaDB 10.3+. Idempotent
(MySQL 8 has no ADD COLUMN IF NOT EXISTS).
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0004_provider_events", "0007_reservations"}

__transactional__ = False


def add_column(conn: Any) -> None:
    add_column_if_missing(conn, "email_provider_events", "evidence", "TINYINT NOT NULL DEFAULT 1")


steps = [step(add_column)]
