"""The claim walks the tenants in the order of their fair-share pass (issue 37; docs/design.md,
"Tenants"): `email_tenants` gets `ix_email_tenants_pass (pass, id)`, which the claim reads from the
lowest pass up and stops once the tenants it has found cover its slots, so its work follows the slots
it hands out, not the number of tenants with due rows; and `ix_email_tenants_weight (weight)`, whose
one-entry read gives the highest weight (the furthest a tenant not yet read could still come forward).

The claims' expiry and suppression checks of the rows they lock are assembled into each claim
(procedures/source/fragments), so the internal procedures they called are retired here:
`email_internal_fail_expired_claims`, `email_internal_fail_suppressed_claims`,
`email_internal_drop_suppressed_claims` (the installed procedures that still call one are replaced
by their files first, so a running worker never meets a missing procedure).

Idempotent: each index is added only when missing, online; a retired procedure is dropped if present.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_index_if_missing
from email_outbox.schema.routines import retire_step

__depends__ = {"0017b_tenant_guard", "0021_release"}

__transactional__ = False


def add_indexes(conn: Any) -> None:
    add_index_if_missing(conn, "email_tenants", "ix_email_tenants_pass", "(pass, id)")
    add_index_if_missing(conn, "email_tenants", "ix_email_tenants_weight", "(weight)")


RETIRED = (
    "email_internal_fail_expired_claims",
    "email_internal_fail_suppressed_claims",
    "email_internal_drop_suppressed_claims",
)

steps = [step(add_indexes), step(retire_step(RETIRED))]
