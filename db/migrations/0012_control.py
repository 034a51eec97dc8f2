"""Control over what goes out and when (issue 26): priority, expiry, cancel.

- `priority` 0-9, higher first, default 5: every existing row keeps the default, so the claim order of
  an upgraded outbox is what it was (due time, then id) until a caller gives a priority.
- `expires_at` (UTC, NULL: never): a row not handed to SES by then ends Failed 'Expired'.
- `claim_rank` = 9 - priority, a VIRTUAL column: an ascending index then reads the highest priority
  first and, within it, the oldest due, as one range per rank. Both servers refuse a descending key
  part before MariaDB 10.8, and a STORED column would rebuild the table (ALGORITHM=COPY, writes
  blocked); a VIRTUAL column is instant and its index is built online.
- `ix_email_delivery_attempts_claim_order (claim_rank, claim_due_at, id)`: the claim's index
  (docs/performance.md shows its plan at 1,000,000 rows). The old claim index stays for the readers of
  the oldest due time (queue health, stats).
- `ix_email_delivery_attempts_expiry (status, expires_at)`: the expiry sweep reads only the claimable
  rows whose time has passed, whatever the table's history.

Every step checks first, so a migrator killed mid-way simply runs again. New columns are trailing and
the ADD COLUMNs instant on MySQL 8 and MariaDB 10.3+.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing, add_index_if_missing

__depends__ = {"0001_schema", "0007_reservations"}

__transactional__ = False

INDEXES = {
    "ix_email_delivery_attempts_claim_order": "(claim_rank, claim_due_at, id)",
    "ix_email_delivery_attempts_expiry": "(status, expires_at)",
}


def add_columns(conn: Any) -> None:
    table = "email_delivery_attempts"
    add_column_if_missing(conn, table, "priority", "TINYINT NOT NULL DEFAULT 5")
    add_column_if_missing(conn, table, "expires_at", "DATETIME(6) NULL")
    add_column_if_missing(conn, table, "claim_rank", "TINYINT GENERATED ALWAYS AS (9 - priority) VIRTUAL")


def add_indexes(conn: Any) -> None:
    for name, columns in INDEXES.items():
        add_index_if_missing(conn, "email_delivery_attempts", name, columns)


steps = [step(add_columns), step(add_indexes)]
