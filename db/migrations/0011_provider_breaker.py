"""The provider breaker shared by every worker replica (docs/design.md, "Provider outages").

One row per provider (`ses`): closed, open or half_open, since when, changed by which replica, the last
error that kept it open, and when the next probe may go out. Every replica reads it before it claims;
it changes only through the email_breaker_* procedures, each change logged in
email_provider_breaker_log. A database that has no row yet reads as closed, so an existing installation
upgrades with no data step.

Idempotent (CREATE TABLE IF NOT EXISTS), run outside a transaction like every migration here.
"""

from yoyo import step

__depends__ = {"0008_copy_recipient_events"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False

STATES = "'closed','open','half_open'"

steps = [
    step(
        f"""
CREATE TABLE IF NOT EXISTS email_provider_breaker (
  provider           VARCHAR(64) NOT NULL,
  state              ENUM({STATES}) NOT NULL,
  -- When the provider was last seen down (it left closed), or when it closed again.
  since              DATETIME(6) NOT NULL,
  changed_at         DATETIME(6) NOT NULL,
  changed_by         VARCHAR(191) NOT NULL,
  last_error_code    VARCHAR(191) NULL,
  last_error_message TEXT NULL,
  last_failure_at    DATETIME(6) NULL,
  -- Open: no probe before this time. Half-open: the probe of probe_by holds until this time.
  probe_at           DATETIME(6) NULL,
  probe_by           VARCHAR(191) NULL,
  -- Probes sent since the breaker last opened from closed.
  probes             INT UNSIGNED NOT NULL DEFAULT 0,
  row_version        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (provider)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(
        f"""
CREATE TABLE IF NOT EXISTS email_provider_breaker_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  provider    VARCHAR(64) NOT NULL,
  occurred_at DATETIME(6) NOT NULL,
  from_state  ENUM({STATES}) NOT NULL,
  to_state    ENUM({STATES}) NOT NULL,
  actor       VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  detail      TEXT NULL,
  PRIMARY KEY (id),
  KEY ix_email_provider_breaker_log_time (provider, occurred_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]
