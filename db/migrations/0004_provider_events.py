"""What happened after SES accepted. Provider events (SES event publishing), each email's
latest provider state, and the suppression list with its log.

Idempotent like 0001 and 0003: IF NOT EXISTS everywhere, and the one index on the big table is added
only when it is missing, so a migrator killed mid-way simply runs again.
"""

from typing import Any

from yoyo import step

__depends__ = {"0001_schema", "0002_audit_in_procedures", "0003_security"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False


def _index_provider_message_id(conn: Any) -> None:
    """Events published without tags (identity notifications, or a tag lost on the way) are matched
    by SES's MessageId alone, so finding a row by provider_message_id must be an index lookup.
    InnoDB adds a secondary index online (ALGORITHM=INPLACE, LOCK=NONE): sends go on meanwhile."""
    cursor = conn.cursor()
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
        " AND TABLE_NAME = 'email_delivery_attempts' AND INDEX_NAME = 'ix_email_delivery_attempts_message_id'"
    )
    if cursor.fetchone()[0] == 0:
        cursor.execute(
            "ALTER TABLE email_delivery_attempts"
            " ADD INDEX ix_email_delivery_attempts_message_id (provider_message_id),"
            " ALGORITHM=INPLACE, LOCK=NONE"
        )
    cursor.close()


steps = [
    # One row per SES event that concerns an email of this outbox, once: event_key is the event's
    # identity (SHA-256 of event type, SES MessageId, recipient and the event's own time), so a
    # redelivered or replayed event is a duplicate key, not a second row. Events for mail this outbox
    # did not send are not stored (the consumer counts them).
    step(
        """
CREATE TABLE IF NOT EXISTS email_provider_events (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_key      BINARY(32) NOT NULL,
  attempt_id     BIGINT UNSIGNED NOT NULL,
  event_type     VARCHAR(32) NOT NULL,
  ses_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  recipient      VARCHAR(320) NULL,
  event_at       DATETIME(6) NOT NULL,
  -- bounceType/bounceSubType of a Bounce, complaintFeedbackType/complaintSubType of a Complaint,
  -- delayType of a DeliveryDelay.
  kind           VARCHAR(64) NULL,
  subkind        VARCHAR(64) NULL,
  detail         VARCHAR(2000) NULL,
  match_note     VARCHAR(500) NULL,
  recorded_at    DATETIME(6) NOT NULL,
  recorded_by    VARCHAR(191) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_email_provider_events_key (event_key),
  -- An email's provider events in order (`show`), and the evidence look-up of the resolver.
  KEY ix_email_provider_events_attempt (attempt_id, event_at),
  -- The 24-hour rates: counts per type over a time range.
  KEY ix_email_provider_events_type_time (event_type, event_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    # Each email's latest provider state: the event with the latest (event time, rank) wins, so the
    # answer does not depend on the order events arrive in. The outbox status is not touched.
    step(
        """
CREATE TABLE IF NOT EXISTS email_delivery_status (
  attempt_id     BIGINT UNSIGNED NOT NULL,
  state          ENUM('sent','delayed','delivered','bounced','complained','rejected','rendering_failed') NOT NULL,
  state_at       DATETIME(6) NOT NULL,
  -- The event time in microseconds since 2000 times 10, plus the state's rank (a Complaint outranks a
  -- Delivery of the same instant): the one number an upsert compares, so it needs no multi-column logic.
  state_order    BIGINT UNSIGNED NOT NULL,
  ses_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  kind           VARCHAR(64) NULL,
  subkind        VARCHAR(64) NULL,
  event_count    INT UNSIGNED NOT NULL DEFAULT 1,
  updated_at     DATETIME(6) NOT NULL,
  PRIMARY KEY (attempt_id),
  KEY ix_email_delivery_status_state (state, state_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    # Addresses no email goes to any more. address_key is how mail systems compare addresses: the
    # local part exactly, the domain case-insensitively (local@lower(domain)), compared byte for byte.
    step(
        """
CREATE TABLE IF NOT EXISTS email_suppressed_addresses (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  address_key       VARCHAR(320) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  address           VARCHAR(320) NOT NULL,
  reason            ENUM('bounce','complaint','operator') NOT NULL,
  detail            VARCHAR(2000) NOT NULL,
  provider_event_id BIGINT UNSIGNED NULL,
  attempt_id        BIGINT UNSIGNED NULL,
  ses_message_id    VARCHAR(191) NULL,
  added_at          DATETIME(6) NOT NULL,
  added_by          VARCHAR(191) NOT NULL,
  added_via         VARCHAR(300) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_email_suppressed_addresses_key (address_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    # Every change to the suppression list, kept after a removal: who, from which account, when, why.
    step(
        """
CREATE TABLE IF NOT EXISTS email_suppressed_addresses_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  occurred_at DATETIME(6) NOT NULL,
  action      ENUM('add','remove') NOT NULL,
  address     VARCHAR(320) NOT NULL,
  reason      VARCHAR(20) NOT NULL,
  actor       VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  detail      VARCHAR(2000) NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(_index_provider_message_id),
]
