"""One claim row shape and one name per operation (issue 23). The procedures themselves are installed
by post-apply as always; this step retires the internal procedure the renamed claim left behind
(email_internal_claim_v2, now email_internal_claim_rows). The installed procedures that call it (the
old email_claim_batch_v2 and email_reserve_batch) are replaced by their files first, so a running
worker never meets a missing procedure. No table changes: an existing installation keeps every row.

The deprecated public names of this release (email_claim_batch_v2, email_purge_bodies) stay as thin
wrappers; the next release's migration retires them the same way (docs/procedures.md, "Versions").
"""

from yoyo import step

from email_outbox.schema.routines import retire_step

__depends__ = {"0008_copy_recipient_events"}

__transactional__ = False

RETIRED = ("email_internal_claim_v2",)


steps = [step(retire_step(RETIRED))]
