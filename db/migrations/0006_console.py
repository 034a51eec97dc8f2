"""The indexes the operator console reads by, so its pages stay fast on a big table.

- `(status, id)`: one status's rows newest first, a page at a time (keyset: `id < last seen`), and
  the bulk selection of UnknownOutcome rows; also the count per status the overview shows.
- `(to_address, id)`: the search by recipient prefix, in index order (keyset on the pair).
- `(sent_at)`: the overview's emails sent per minute over the last hour.

`notification_id` prefixes use the existing unique key. Each index is added only when missing, online
(ALGORITHM=INPLACE, LOCK=NONE: enqueues, claims and sends go on meanwhile), so a migrator killed
mid-way simply runs again.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_index_if_missing

__depends__ = {"0001_schema"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False

INDEXES = {
    "ix_email_delivery_attempts_status_id": "(status, id)",
    "ix_email_delivery_attempts_to_id": "(to_address, id)",
    "ix_email_delivery_attempts_sent_at": "(sent_at)",
}


def add_indexes(conn: Any) -> None:
    for name, columns in INDEXES.items():
        add_index_if_missing(conn, "email_delivery_attempts", name, columns)


steps = [step(add_indexes)]
