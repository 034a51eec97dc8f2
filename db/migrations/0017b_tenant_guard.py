"""Tenants, second step (issue 37): when an operator last lifted a tenant's reputation guard
(`guard_lifted_at`: the guard then counts only SES events after it, so a resume is not undone at
once by the same day's complaints). Idempotent: every step checks first."""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing

__depends__ = {"0017_tenants"}

__transactional__ = False


def add_columns(conn: Any) -> None:
    add_column_if_missing(conn, "email_tenants", "guard_lifted_at", "DATETIME(6) NULL")


steps = [step(add_columns)]
