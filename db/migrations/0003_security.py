"""From the security review: the sender allow-list and its log.

Idempotent like 0001: IF NOT EXISTS everywhere, so a migrator killed mid-way simply runs again.
"""

from yoyo import step

__depends__ = {"0001_schema", "0002_audit_in_procedures"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False


steps = [
    # Senders an enqueue may use: a whole address ('billing@example.com') or a whole domain
    # ('@example.com'), for every enqueuing account ('') or for one database user name (the user part
    # of SESSION_USER(), the server's word for who called).
    step(
        """
CREATE TABLE IF NOT EXISTS email_allowed_senders (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  sender      VARCHAR(320) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
  account     VARCHAR(300) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  added_at    DATETIME(6) NOT NULL,
  added_by    VARCHAR(191) NOT NULL,
  added_via   VARCHAR(300) NOT NULL,
  reason      VARCHAR(2000) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_email_allowed_senders (sender(191), account(100))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    # Every change to the allow-list, kept after a removal: who, from which account, when, why.
    step(
        """
CREATE TABLE IF NOT EXISTS email_allowed_senders_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  occurred_at DATETIME(6) NOT NULL,
  action      ENUM('add', 'remove') NOT NULL,
  sender      VARCHAR(320) NOT NULL,
  account     VARCHAR(300) NOT NULL,
  actor       VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  reason      VARCHAR(2000) NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]

# An installation that already sends keeps sending: every sender its enqueuers have used so far is
# allowed for every account, and logged as seeded. Review the list afterwards (`email-outbox senders list`).
steps.append(
    step(
        """
INSERT IGNORE INTO email_allowed_senders (sender, account, added_at, added_by, added_via, reason)
SELECT DISTINCT from_address, '', UTC_TIMESTAMP(6), 'migration 0003_security', SESSION_USER(),
       'seeded: in use before the allow-list existed'
  FROM email_delivery_attempts
 WHERE from_address IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM email_allowed_senders_log)
"""
    )
)
steps.append(
    step(
        """
INSERT INTO email_allowed_senders_log (occurred_at, action, sender, account, actor, db_account, reason)
SELECT added_at, 'add', sender, account, added_by, added_via, reason
  FROM email_allowed_senders
 WHERE added_by = 'migration 0003_security'
   AND NOT EXISTS (SELECT 1 FROM email_allowed_senders_log)
"""
    )
)
