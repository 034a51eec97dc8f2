"""Release 0.2.0, the claim side of the flat send path (issue 36): the claims (`email_claim_batch`,
`email_claim_batch_bounded`, `email_reserve_batch`, `email_try_claim`) are assembled from
procedures/source/fragments, so the internal procedures they used to CALL are retired here:
`email_internal_claim_rows`, `email_internal_claim_batch` and `email_internal_check_token`.

It runs after the tenants' migrations because the claims that replace the callers read the tenants'
tables: the installed procedures that still call a retired one are replaced by their files first
(retire_procedures), so a running worker never meets a missing procedure or a missing table.
"""

from yoyo import step

from email_outbox.schema.routines import retire_step

__depends__ = {"0016_flat_send_path", "0017b_tenant_guard"}

__transactional__ = False

RETIRED = (
    "email_internal_claim_rows",
    "email_internal_claim_batch",
    "email_internal_check_token",
)

steps = [step(retire_step(RETIRED))]
