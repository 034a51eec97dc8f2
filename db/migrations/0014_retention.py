"""Retention and erasure (issue 28): deleting old terminal rows without losing idempotency, and
removing one person's address from every outbox table while it stays suppressed.

- `email_notification_tombstones`: what is left of a row retention deleted, for as long as its
  notification id must still answer "duplicate": the enqueuing account, a SHA-256 of the id and the
  dates, never the id, an address or a subject. An enqueue checks it after its insert (see
  email_internal_enqueue for why after).
- `email_retention_runs`: one row per retention run (who, from which account, when, the cutoff, how
  many rows), and the run's keyset position, so each `email_retention` call continues where the last
  one stopped.
- `email_erasures`: one row per erasure, naming the address only by its keyed hash.
- `email_outbox_secrets`: the key of that hash, until 0018 made keys versioned and copied it to
  `email_outbox_keys` (where the server makes a fresh installation's key; none is made here).
  No role is granted it (the procedures read it with their definer's rights), so the operator,
  viewer and console accounts that read the other tables cannot turn an erased entry back into an
  address by hashing guesses.
- an index on `email_suppressed_addresses.attempt_id`: retention clears the references of the rows it
  deletes (the entries stay: the addresses stay suppressed), by index, not by scanning the list.

Idempotent like the others: IF NOT EXISTS, the index only when missing.
"""

from typing import Any

from yoyo import step

__depends__ = {"0004_provider_events", "0005_messages", "0008_copy_recipient_events"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False


def _index_suppression_attempt(conn: Any) -> None:
    cursor = conn.cursor()
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
        " AND TABLE_NAME = 'email_suppressed_addresses' AND INDEX_NAME = 'ix_email_suppressed_addresses_attempt'"
    )
    if cursor.fetchone()[0] == 0:
        cursor.execute(
            "ALTER TABLE email_suppressed_addresses ADD INDEX ix_email_suppressed_addresses_attempt (attempt_id),"
            " ALGORITHM=INPLACE, LOCK=NONE"
        )
    cursor.close()


steps = [
    step(
        """
CREATE TABLE IF NOT EXISTS email_notification_tombstones (
  -- The account the id belongs to ('' while notification ids are unique across accounts).
  account     VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- SHA-256 of the notification id as stored (binary collation: 'Order-1' and 'order-1' differ).
  id_hash     BINARY(32) NOT NULL,
  -- The day retention deleted the row, and the last day an enqueue of the id is still a duplicate.
  deleted_on  DATE NOT NULL,
  keep_until  DATE NOT NULL,
  PRIMARY KEY (account, id_hash),
  -- Expired tombstones go in key order of this index, a batch at a time.
  KEY ix_email_notification_tombstones_keep_until (keep_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_retention_runs (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  started_at         DATETIME(6) NOT NULL,
  last_batch_at      DATETIME(6) NOT NULL,
  finished_at        DATETIME(6) NULL,
  actor              VARCHAR(191) NOT NULL,
  db_account         VARCHAR(300) NOT NULL,
  -- The session that runs it: a run is the calls of one connection, until a batch finds nothing left.
  connection_id      BIGINT UNSIGNED NOT NULL,
  older_than_days    INT UNSIGNED NOT NULL,
  keep_ids_days      INT UNSIGNED NOT NULL,
  cutoff             DATETIME(6) NOT NULL,
  -- The keyset position: the next batch starts after this id.
  last_id            BIGINT UNSIGNED NOT NULL DEFAULT 0,
  batches            INT UNSIGNED NOT NULL DEFAULT 0,
  deleted_rows       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  tombstones_expired BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_erasures (
  id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  occurred_at            DATETIME(6) NOT NULL,
  actor                  VARCHAR(191) NOT NULL,
  db_account             VARCHAR(300) NOT NULL,
  reason                 VARCHAR(2000) NOT NULL,
  -- The keyed hash of the lower-cased address (email_internal_erased_key): an auditor holding the
  -- address can ask whether it was erased; nobody holding only the tables can read it back.
  address_hash           VARCHAR(65) CHARACTER SET ascii NOT NULL,
  rows_erased            INT UNSIGNED NOT NULL,
  rows_processing        INT UNSIGNED NOT NULL,
  provider_events        INT UNSIGNED NOT NULL,
  suppression_entries    INT UNSIGNED NOT NULL,
  PRIMARY KEY (id),
  KEY ix_email_erasures_hash (address_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_outbox_secrets (
  name        VARCHAR(64) CHARACTER SET ascii NOT NULL,
  secret      BINARY(32) NOT NULL,
  created_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
    ),
    step(_index_suppression_attempt),
]
