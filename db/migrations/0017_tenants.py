"""Tenants: one outbox shared by many services, each with its share, its limits and its own
reputation (issue 37; docs/design.md, "Tenants").

- `email_tenants`: one row per tenant, managed by operators (`email-outbox tenants ...`, the
  procedures email_tenant_*): its name (SES's rule), weight, highest priority, send rate, daily
  quota, cap on waiting rows, SES tenant name, why it is paused, and the claim's schedule for it
  (`pass`, the rate schedule, the day's count). Row 1 is the shared default tenant `default`, which
  every account may use.
- `email_tenant_accounts`: which accounts may use which tenant (`*`: every account), and each
  account's default tenant.
- `email_tenants_log`: every operator change, who, from which account, when, why.
- `email_tenant_schedule`: one row, the claim's virtual time (the fair-share clock a tenant that was
  idle starts again from, so it never banks a share while it had nothing to send).
- `email_delivery_attempts.tenant_id` (instant: a column with a default at the end; every existing
  row belongs to the shared default), `claim_tenant` = tenant_id for a claimable row and NULL for any
  other (VIRTUAL), and two online indexes: `..._tenant_due (claim_tenant, claim_due_at)`, which finds
  the tenants with a due row in one read per such tenant, and `..._tenant_queue (claim_tenant,
  claim_queue_rank, claim_due_at, id)`, which the claim reads per tenant in priority order.

Every step checks first or is idempotent, so a migrator killed mid-way runs again.
"""

from typing import Any

from yoyo import step

from email_outbox.db.tenant_calls import INITIAL_TENANT_ROWS
from email_outbox.schema.migrate import add_column_if_missing, add_index_if_missing

__depends__ = {"0015_claim_queue"}

__transactional__ = False

TABLE = "email_delivery_attempts"


def add_columns(conn: Any) -> None:
    add_column_if_missing(conn, TABLE, "tenant_id", "INT UNSIGNED NOT NULL DEFAULT 1")
    add_column_if_missing(
        conn,
        TABLE,
        "claim_tenant",
        "INT UNSIGNED GENERATED ALWAYS AS (IF(status IN ('Pending', 'Retrying'), tenant_id, NULL)) VIRTUAL",
    )


def add_indexes(conn: Any) -> None:
    add_index_if_missing(conn, TABLE, "ix_email_delivery_attempts_tenant_due", "(claim_tenant, claim_due_at)")
    add_index_if_missing(
        conn,
        TABLE,
        "ix_email_delivery_attempts_tenant_queue",
        "(claim_tenant, claim_queue_rank, claim_due_at, id)",
    )


def insert_first_rows(conn: Any) -> None:
    cursor = conn.cursor()
    for statement in INITIAL_TENANT_ROWS:
        cursor.execute(statement)
    cursor.close()
    conn.commit()


steps = [
    step(
        """
CREATE TABLE IF NOT EXISTS email_tenants (
  id                 INT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- SES's rule for a tenant name: 1 to 64 of A-Za-z0-9_-; compared exactly.
  name               VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The fair share: sends are shared among tenants with due rows in proportion to weight.
  weight             INT UNSIGNED NOT NULL DEFAULT 1,
  -- The highest priority its messages may ask for.
  max_priority       TINYINT UNSIGNED NOT NULL DEFAULT 9,
  -- Limits within the account's: sends per second and per 24 hours (NULL: the account's only), and
  -- the most rows it may have waiting (Pending or Retrying; NULL: no cap).
  send_rate          DOUBLE NULL,
  daily_quota        BIGINT NULL,
  max_waiting_rows   BIGINT NULL,
  -- SES's tenant (TenantName on SendEmail, GetTenant), NULL: sends carry none.
  ses_tenant_name    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  -- Paused: nothing is claimed. operator, ses-disabled (GetTenant), ses-sending-paused (a send's answer).
  paused_reason      VARCHAR(32) NULL,
  paused_at          DATETIME(6) NULL,
  -- The reputation guard: rows below this priority wait (NULL: none), since when and why.
  guard_below_priority TINYINT UNSIGNED NULL,
  guard_at           DATETIME(6) NULL,
  guard_reason       VARCHAR(200) NULL,
  -- SES's SendingStatus as last read, when, and the replica whose turn it is to read it again.
  ses_sending_status VARCHAR(16) NULL,
  ses_checked_at     DATETIME(6) NULL,
  ses_check_taken_at DATETIME(6) NULL,
  -- The claim's schedule for this tenant: its fair-share pass (virtual time of its next send), its
  -- rate schedule (no send before), and the day's count since day_started_at.
  pass               DOUBLE NOT NULL DEFAULT 0,
  rate_next_at       DATETIME(6) NULL,
  day_started_at     DATETIME(6) NULL,
  day_count          BIGINT NOT NULL DEFAULT 0,
  created_at         DATETIME(6) NOT NULL,
  updated_at         DATETIME(6) NOT NULL,
  row_version        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  UNIQUE KEY uq_email_tenants_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_tenant_accounts (
  account    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  tenant_id  INT UNSIGNED NOT NULL,
  -- The account's tenant when a message names none (at most one per account, procedure-enforced).
  is_default TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (account, tenant_id),
  KEY ix_email_tenant_accounts_tenant (tenant_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_tenants_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  occurred_at DATETIME(6) NOT NULL,
  action      VARCHAR(32) NOT NULL,
  name        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  detail      TEXT NULL,
  actor       VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  reason      VARCHAR(500) NULL,
  PRIMARY KEY (id),
  KEY ix_email_tenants_log_name (name, occurred_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        """
CREATE TABLE IF NOT EXISTS email_tenant_schedule (
  id           TINYINT UNSIGNED NOT NULL,
  virtual_time DOUBLE NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(insert_first_rows),
    step(add_columns),
    step(add_indexes),
]
