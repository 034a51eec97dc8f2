"""Tenants, second step (issue 37): the reputation guard's figures.

- `email_tenants.guard_lifted_at`: when an operator last lifted a tenant's guard; the guard then counts
  only SES events after it, so a resume is not undone at once by the same day's complaints.
- `email_tenant_event_hours`: per tenant and hour of the events' own time, the SES Send, permanent
  Bounce and Complaint events recorded (email_record_provider_event counts them as it records them),
  so a tenant's 24-hour rates are read from at most 25 rows, never from the events themselves.

Idempotent: every step checks first."""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0017_tenants"}

__transactional__ = False


def add_columns(conn: Any) -> None:
    add_column_if_missing(conn, "email_tenants", "guard_lifted_at", "DATETIME(6) NULL")


steps = [
    step(add_columns),
    step(
        """
CREATE TABLE IF NOT EXISTS email_tenant_event_hours (
  tenant_id         INT UNSIGNED NOT NULL,
  hour_at           DATETIME NOT NULL,
  sends             BIGINT NOT NULL DEFAULT 0,
  permanent_bounces BIGINT NOT NULL DEFAULT 0,
  complaints        BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, hour_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]
