"""Release 0.2.0: what 0.1.0 deprecated goes, and the send path runs flat (issue 36). The procedures
themselves are installed by post-apply as always; this step retires what no file defines any more:

- the deprecated public names of 0.1.0, `email_claim_batch_v2` (now `email_claim_batch_bounded`) and
  `email_purge_bodies` (now `email_purge_bodies_after`), as docs/procedures.md "Versions" announced;
- the internal procedures the finalizes, the batch and the start mark used to CALL, now assembled into
  them from procedures/source/fragments (the set path's `email_internal_finalize_rows`,
  `email_internal_settle_rows` and its working table's `_clear`, `email_internal_start_rows`, and
  `email_internal_finalize`, `email_internal_start`, `email_internal_step_status`).

The installed procedures that still call one are replaced by their files first, so a running worker
never meets a missing procedure. The old lower-case outcome names (sent, failed, retry, unknown,
released, started) are refused from now on by the new files. No table changes: every row stays.
"""

from yoyo import step

from email_outbox.schema.routines import retire_step

__depends__ = {"0015_claim_queue"}

__transactional__ = False

RETIRED = (
    "email_claim_batch_v2",
    "email_purge_bodies",
    "email_internal_finalize",
    "email_internal_finalize_rows",
    "email_internal_settle_rows",
    "email_internal_settle_rows_clear",
    "email_internal_start",
    "email_internal_start_rows",
    "email_internal_step_status",
)


steps = [step(retire_step(RETIRED))]
