"""Reservations. A worker with slow sends claims its next rows ahead, as reservations: the
row is Processing under the worker's claim token, but its send has not started. `reserved_at` is set
by email_reserve_batch and cleared by the start mark (email_start_send, or a `started` item of
email_finalize_batch) written just before the send. The lease sweep sends an expired reservation back
to the status it was claimed from, since it was never sent, and only a started claim to
UnknownOutcome: claiming ahead then leaves no more rows ambiguous after a crash than before.

NULL means started, or claimed the old way: every claim made before this migration, or by a procedure
that does not know the column, is treated as possibly sent. The column is trailing and nullable: an
instant ALTER on MySQL 8 and MariaDB 10.3+. Idempotent (MySQL 8 has no ADD COLUMN IF NOT EXISTS).
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0001_schema", "0005_messages"}

__transactional__ = False


def add_column(conn: Any) -> None:
    add_column_if_missing(conn, "email_delivery_attempts", "reserved_at", "DATETIME(6) NULL")


steps = [step(add_column)]
