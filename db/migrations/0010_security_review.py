"""The second security review (issue 25): notification ids per enqueuing account, and the
operator-managed list of configuration sets a message may name.

Ids per account. The idempotency key was the notification id alone, across accounts: one service
enqueuing `password-reset:user-7` first made another service's enqueue of the same id a "duplicate"
that was never sent. Each row now carries `account`, the database user name that enqueued it (the
server's SESSION_USER(), never a name the caller passes), and the unique key is (notification_id,
account): the same id from two accounts is two emails. notification_id stays the key's first column,
so the console's prefix search by id and the legacy lookup below use the same index.

Existing rows keep their account: it is read from the row's first audit event (`db_account`, the
calling account, recorded by every enqueue since 0003; `actor` before that). A row whose history is
gone keeps account '' (legacy): an enqueue of the same id from any account is still answered as that
row's duplicate, as before the upgrade, so no email is sent twice across the upgrade.

Configuration sets. A message's `configuration_set` overrode the worker's, so an enqueuer could name a
set with no event destination and hide its bounces from suppression. A message may now name only a set
on `email_allowed_configuration_sets`, managed by operators (`email-outbox configuration-sets`). So that
an installation already using per-message sets keeps sending, every set named by a row still waiting
to be sent (Pending, Retrying) is seeded onto the list, logged as seeded: review it afterwards.

Every step can run again (a migrator killed mid-way runs it again over what exists).
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0001_schema", "0003_security", "0005_messages", "0008_copy_recipient_events"}

__transactional__ = False

OLD_KEY = "uq_email_delivery_attempts_notification_id"
NEW_KEY = "uq_email_delivery_attempts_notification_account"
# Rows per backfill statement: each is its own short transaction, so a large table is never locked whole.
BACKFILL_BATCH = 10_000


def _has_index(conn: Any, name: str) -> bool:
    cursor = conn.cursor()
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
        " AND TABLE_NAME = 'email_delivery_attempts' AND INDEX_NAME = %s",
        (name,),
    )
    found = bool(cursor.fetchone()[0])
    cursor.close()
    return found


def add_account(conn: Any) -> None:
    # NULL until backfilled, so a rerun after a kill picks up exactly the rows not yet done.
    add_column_if_missing(
        conn,
        "email_delivery_attempts",
        "account",
        "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
    )


def backfill_accounts(conn: Any) -> None:
    cursor = conn.cursor()
    cursor.execute(
        "SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM email_delivery_attempts WHERE account IS NULL"
    )
    low, high = cursor.fetchone()
    start = int(low)
    while start and start <= int(high):
        cursor.execute(
            """
UPDATE email_delivery_attempts a
   SET a.account = COALESCE((
         SELECT SUBSTRING_INDEX(COALESCE(e.db_account, e.actor), '@', 1)
           FROM email_delivery_events e
          WHERE e.attempt_id = a.id
          ORDER BY e.id
          LIMIT 1), '')
 WHERE a.id >= %s AND a.id < %s AND a.account IS NULL
""",
            (start, start + BACKFILL_BATCH),
        )
        conn.commit()
        start += BACKFILL_BATCH
    cursor.close()


def key_per_account(conn: Any) -> None:
    cursor = conn.cursor()
    cursor.execute(
        "ALTER TABLE email_delivery_attempts MODIFY COLUMN account"
        " VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"
    )
    # One ALTER adds the new key and drops the old: there is never a moment without a unique key.
    changes = []
    if not _has_index(conn, NEW_KEY):
        changes.append(f"ADD UNIQUE KEY {NEW_KEY} (notification_id, account)")
    if _has_index(conn, OLD_KEY):
        changes.append(f"DROP KEY {OLD_KEY}")
    if changes:
        cursor.execute(f"ALTER TABLE email_delivery_attempts {', '.join(changes)}")
    cursor.close()


SEED_SETS = """
INSERT IGNORE INTO email_allowed_configuration_sets (name, added_at, added_by, added_via, reason)
SELECT DISTINCT JSON_UNQUOTE(JSON_EXTRACT(message_options, '$.configuration_set')), UTC_TIMESTAMP(6),
       'migration 0010_security_review', SESSION_USER(), 'seeded: named by a message waiting to be sent'
  FROM email_delivery_attempts
 WHERE status IN ('Pending', 'Retrying')
   AND JSON_EXTRACT(message_options, '$.configuration_set') IS NOT NULL
"""
LOG_SEEDED_SETS = """
INSERT INTO email_allowed_configuration_sets_log (occurred_at, action, name, actor, db_account, reason)
SELECT added_at, 'add', name, added_by, added_via, reason
  FROM email_allowed_configuration_sets
 WHERE added_by = 'migration 0010_security_review'
   AND NOT EXISTS (SELECT 1 FROM email_allowed_configuration_sets_log)
"""


def seed_configuration_sets(conn: Any) -> None:
    # One transaction, committed here: no DDL follows in this migration to commit it implicitly.
    cursor = conn.cursor()
    cursor.execute(SEED_SETS)
    cursor.execute(LOG_SEEDED_SETS)
    conn.commit()
    cursor.close()


steps = [
    step(add_account),
    step(backfill_accounts),
    step(key_per_account),
    step(
        """
CREATE TABLE IF NOT EXISTS email_allowed_configuration_sets (
  name        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  added_at    DATETIME(6) NOT NULL,
  added_by    VARCHAR(191) NOT NULL,
  added_via   VARCHAR(300) NOT NULL,
  reason      VARCHAR(2000) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    # Every change to that list, kept after a removal: who, from which account, when, why.
    step(
        """
CREATE TABLE IF NOT EXISTS email_allowed_configuration_sets_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  occurred_at DATETIME(6) NOT NULL,
  action      ENUM('add', 'remove') NOT NULL,
  name        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  actor       VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  reason      VARCHAR(2000) NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(seed_configuration_sets),
]
