"""Two indexes of email_delivery_attempts that no statement reads any more go (issue 36: the database's
CPU per email, docs/performance.md "Where the database's CPU per email goes"):

- `ix_email_delivery_attempts_claim (claim_due_at, id)`, the first claim's index (0001), replaced by
  the priority order of 0012;
- `ix_email_delivery_attempts_claim_order (claim_rank, claim_due_at, id)`, that order (0012), replaced
  by `..._claim_queue` (0015) and the tenants' `..._tenant_due` and `..._tenant_queue` (0017).

Every claim changes `claim_due_at` (due time to NULL) and every release or retry changes it back, so
each index cost an entry deleted and one inserted per transition, and purge's removal of the old one
later, and held an entry for every row the table keeps. No procedure of this release names either:
the installed procedures that do (an older release's FORCE INDEX) are replaced by their files first,
so no CALL meets a missing index. The `claim_rank` column stays (VIRTUAL and no longer indexed, it is
stored nowhere and costs nothing); dropping it would be the only step here that touches the table's
columns. Checked first, so it runs again.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import drop_indexes_if_present

__depends__ = {"0016b_flat_claim", "0018_erasure_keys", "0019b_changes_feed_retention", "0021_release"}

__transactional__ = False

UNREAD = ["ix_email_delivery_attempts_claim", "ix_email_delivery_attempts_claim_order"]


def drop_indexes(conn: Any) -> None:
    drop_indexes_if_present(conn, "email_delivery_attempts", UNREAD)


steps = [step(drop_indexes)]
