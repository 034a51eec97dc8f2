"""The claim's index holds ranks for claimable rows only (issue 28).

`claim_queue_rank` = 9 - priority for a `Pending` or `Retrying` row and NULL for every other status, a
VIRTUAL column (instant; its index is built online), and `ix_email_delivery_attempts_claim_queue
(claim_queue_rank, claim_due_at, id)` the claim's index in place of `..._claim_order`.

Why: `claim_rank` had a value for every row, so the claim-order index held every terminal row too, at
(rank, NULL due time, id): after one rank's claimable rows and before the next rank's. A claim scans
one range per rank; a range with nothing due ended on the first entry past it, the oldest terminal
row of the next rank, and the claim's locking read locked that entry for a moment. Retention deletes
exactly the oldest terminal rows first: claims waited on its batches and now and then deadlocked with
them (measured: 888 row lock waits and 95 deadlocks while 1,000,000 rows were deleted, claim p99 5.5x;
docs/performance.md, "Retention beside two sending workers"). With NULL for every row that cannot be
claimed, all of them sort before rank 0, and no claim range ends on one.

The old index stays: the claim first reads it, without locking, to find which ranks hold a due row
(email_internal_claim_batch), and a replica still running the previous procedures forces it by name
until the new ones are installed, which happens after this migration (db/migrations/post-apply).
Every step checks first, so a migrator killed mid-way runs again.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_column_if_missing, add_index_if_missing

__depends__ = {"0012_control", "0014_retention"}

__transactional__ = False

TABLE = "email_delivery_attempts"
INDEX = "ix_email_delivery_attempts_claim_queue"


def add_column(conn: Any) -> None:
    add_column_if_missing(
        conn,
        TABLE,
        "claim_queue_rank",
        "TINYINT GENERATED ALWAYS AS (IF(status IN ('Pending', 'Retrying'), 9 - priority, NULL)) VIRTUAL",
    )


def add_index(conn: Any) -> None:
    add_index_if_missing(conn, TABLE, INDEX, "(claim_queue_rank, claim_due_at, id)")


steps = [step(add_column), step(add_index)]
