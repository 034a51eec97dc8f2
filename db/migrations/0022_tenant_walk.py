"""The claim walks the tenants in the order of their fair-share pass (issue 37; docs/design.md,
"Tenants"): `email_tenants` gets `ix_email_tenants_pass (pass, id)`, which the claim reads from the
lowest pass up and stops once the tenants it has found cover its slots, so its work follows the slots
it hands out, not the number of tenants with due rows; and `ix_email_tenants_weight (weight)`, whose
one-entry read gives the highest weight (the furthest a tenant not yet read could still come forward).

Idempotent: each index is added only when missing, online.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_index_if_missing

__depends__ = {"0017b_tenant_guard", "0021_release"}

__transactional__ = False


def add_indexes(conn: Any) -> None:
    add_index_if_missing(conn, "email_tenants", "ix_email_tenants_pass", "(pass, id)")
    add_index_if_missing(conn, "email_tenants", "ix_email_tenants_weight", "(weight)")


steps = [step(add_indexes)]
