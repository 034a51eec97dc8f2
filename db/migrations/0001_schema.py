"""The outbox schema: the delivery table and its append-only event log.

The procedures write the event log themselves (0002_audit_in_procedures explains why: no triggers).

Every step is idempotent (IF NOT EXISTS, or a check first): a migrator killed mid-way leaves the
migration unmarked, and the next run applies it again over what already exists.

Statuses are exactly docs/design.md section 2's names. Every time is a UTC DATETIME(6) from the database clock.
"""

from yoyo import step

__depends__: set[str] = set()

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False

STATUSES = "'Pending','Retrying','Processing','Sent','Failed','UnknownOutcome'"

steps = [
    step(
        f"""
CREATE TABLE IF NOT EXISTS email_delivery_attempts (
  id                  BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- The caller's idempotency key. Binary collation: 'Order-1' and 'order-1' are different emails.
  notification_id     VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  to_address          VARCHAR(320) NOT NULL,
  from_address        VARCHAR(320) NULL,
  subject             VARCHAR(998) NOT NULL,
  text_body           MEDIUMTEXT NULL,
  html_body           MEDIUMTEXT NULL,
  status              ENUM({STATUSES}) NOT NULL DEFAULT 'Pending',
  -- Where a release sends the row back to (Pending or Retrying).
  claimed_from_status ENUM('Pending','Retrying') NULL,
  attempt_count       INT UNSIGNED NOT NULL DEFAULT 0,
  max_attempts        INT UNSIGNED NOT NULL,
  next_attempt_at     DATETIME(6) NOT NULL,
  claim_token         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  claimed_by          VARCHAR(191) NULL,
  claimed_at          DATETIME(6) NULL,
  lease_expires_at    DATETIME(6) NULL,
  last_attempt_at     DATETIME(6) NULL,
  last_error_code     VARCHAR(191) NULL,
  last_error_message  TEXT NULL,
  provider_message_id VARCHAR(191) NULL,
  sent_at             DATETIME(6) NULL,
  bodies_purged_at    DATETIME(6) NULL,
  created_at          DATETIME(6) NOT NULL,
  updated_at          DATETIME(6) NOT NULL,
  -- Bumped by every write, so a guarded UPDATE always changes a column and ROW_COUNT() is the
  -- matched count whether or not the client set CLIENT_FOUND_ROWS (docs/design.md section 4).
  row_version         BIGINT UNSIGNED NOT NULL DEFAULT 0,
  -- Unused since 0002 (they fed the audit triggers); kept one release for rolling upgrades.
  updated_by          VARCHAR(191) NULL,
  transition_detail   TEXT NULL,
  -- The claim queue: due time for claimable rows, NULL for every other status. Terminal rows drop
  -- out of the claim index's range entirely, so a claim scan costs the same at 10k or 10M history
  -- rows; new rows land at the far (newest) end, never where every scan starts.
  claim_due_at        DATETIME(6) GENERATED ALWAYS AS
                        (IF(status IN ('Pending','Retrying'), next_attempt_at, NULL)) STORED,
  PRIMARY KEY (id),
  -- Idempotent enqueue.
  UNIQUE KEY uq_email_delivery_attempts_notification_id (notification_id),
  -- Claim scan: due claimable rows, oldest due first, with id as the tie-breaker the ORDER BY uses.
  KEY ix_email_delivery_attempts_claim (claim_due_at, id),
  -- Sweep scan: Processing rows whose lease has passed; also serves counts by status.
  KEY ix_email_delivery_attempts_lease (status, lease_expires_at)
  -- No index on claim_token: every fenced UPDATE goes by the primary key (FORCE INDEX (PRIMARY)),
  -- and a token index invites range plans with next-key locks that deadlock (docs/design.md section 5).
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        f"""
CREATE TABLE IF NOT EXISTS email_delivery_events (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  attempt_id  BIGINT UNSIGNED NOT NULL,
  occurred_at DATETIME(6) NOT NULL,
  from_status ENUM({STATUSES}) NULL,
  to_status   ENUM({STATUSES}) NOT NULL,
  claim_token VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  actor       VARCHAR(191) NULL,
  detail      TEXT NULL,
  PRIMARY KEY (id),
  -- A row's history in order (`show`, replay checks).
  KEY ix_email_delivery_events_attempt (attempt_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]
