"""The feed of what happened (issue 40): `email_changes(after_cursor, max_rows)`.

Why a sequence of its own and not the events' ids: an auto-increment id is taken at insert and becomes
visible at commit, so ids commit out of order (an enqueue inside a long business transaction holds its
'enqueued' event's id for as long as the transaction lasts). A reader past id 100 would never see an
id 99 that commits later. So each event is given a feed position when it is already committed:
`email_changes` first sequences, in a short transaction of its own, the committed events that have no
position yet (a locking read that SKIPs the rows still locked by an open transaction), under the one
row of `email_changes_state`; positions therefore grow in commit-visible order, and a cursor misses
nothing and sees nothing twice.

- `feed_seq` on `email_delivery_events` and `email_provider_events`: NULL until sequenced; its index
  finds the unsequenced ones (all at its start) without reading the rest. The history before this
  migration is sequenced by the first calls, oldest first.
- `email_changes_feed`: one row per sequenced event, by position, with the account of its email, so
  an account's read is one range of (account, seq) however long the history and however busy the
  other accounts.
- `email_changes_state`: the last position given.

Idempotent like the others: every step checks first.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing, add_index_if_missing

__depends__ = {"0015_claim_queue"}

__transactional__ = False

SOURCES = ("email_delivery_events", "email_provider_events")


def add_columns(conn: Any) -> None:
    for table in SOURCES:
        add_column_if_missing(conn, table, "feed_seq", "BIGINT UNSIGNED NULL")


def add_indexes(conn: Any) -> None:
    for table in SOURCES:
        add_index_if_missing(conn, table, f"ix_{table}_feed", "(feed_seq)")


def add_state_row(conn: Any) -> None:
    # Committed here: a step outside a transaction leaves a plain INSERT to the connection's own.
    cursor = conn.cursor()
    cursor.execute("INSERT IGNORE INTO email_changes_state (id, last_seq) VALUES (1, 0)")
    cursor.close()
    conn.commit()


steps = [
    step(add_columns),
    step(add_indexes),
    step(
        """
CREATE TABLE IF NOT EXISTS email_changes_feed (
  seq        BIGINT UNSIGNED NOT NULL,
  account    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  attempt_id BIGINT UNSIGNED NOT NULL,
  source     ENUM('status', 'provider') NOT NULL,
  source_id  BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (seq),
  KEY ix_email_changes_feed_account (account, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_changes_state (
  id       TINYINT UNSIGNED NOT NULL,
  last_seq BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(add_state_row),
]
