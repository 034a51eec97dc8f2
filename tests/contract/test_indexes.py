"""The claim scan and the sweep scan stay index range scans however much history the table holds:
EXPLAIN of the procedures' own scan shapes over 20,000 terminal rows and a few live ones."""

from __future__ import annotations

from typing import Any

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from tests.support.helpers import enqueue_many, token

# The scans exactly as email_claim_batch and email_internal_sweep_stale_leases run them, without the
# FORCE INDEX hints: the optimizer must pick these indexes on its own, so the hints are a safety net
# and not the only thing standing between a claim and a full table scan.
# The claim is the one exception: the claim (procedures/source/fragments/claim_batch.sql) forces the priority index
# (claim_queue_rank, claim_due_at, id), and that is what is checked here. Left to itself on a small backlog
# the optimizer may take the due-time index instead, also a range that skips the history, plus a sort.
CLAIM_SCAN = (
    "SELECT id, status FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_queue)"
    " WHERE claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)"
    " AND claim_due_at <= UTC_TIMESTAMP(6) AND attempt_count < max_attempts"
    " ORDER BY claim_queue_rank, claim_due_at, id LIMIT 8"
)
SWEEP_SCAN = (
    "SELECT id FROM email_delivery_attempts"
    " WHERE status = 'Processing' AND lease_expires_at <= UTC_TIMESTAMP(6) ORDER BY lease_expires_at LIMIT 100"
)


def explain(repo: OutboxRepository, sql: str) -> dict[str, Any]:
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute("EXPLAIN " + sql)
    (plan,) = cursor.fetchall()
    cursor.close()
    return plan  # type: ignore[no-any-return]


def test_claim_and_sweep_scans_use_their_indexes(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
        " attempt_count, max_attempts, next_attempt_at, created_at, updated_at)"
        " SELECT CONCAT('hist-', seq), 'a@example.com', 's', 't', 'Sent', 1, 5, UTC_TIMESTAMP(6),"
        " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM seq_1_to_20000"
        if "mariadb" in repo.server_version().lower()
        else "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
        " attempt_count, max_attempts, next_attempt_at, created_at, updated_at)"
        " WITH RECURSIVE s(seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < 20000)"
        " SELECT CONCAT('hist-', seq), 'a@example.com', 's', 't', 'Sent', 1, 5, UTC_TIMESTAMP(6),"
        " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM s"
    )
    cursor.execute("ANALYZE TABLE email_delivery_attempts")
    cursor.fetchall()
    cursor.close()
    ids = enqueue_many(repo, 20, prefix="live")
    for attempt_id in ids[:5]:
        assert repo.try_claim(attempt_id, token(), "w", 60) == 1

    claim = explain(repo, CLAIM_SCAN)
    assert claim["key"] == "ix_email_delivery_attempts_claim_queue", claim
    assert claim["type"] == "range", claim
    # Highest priority first, then oldest due, read in index order: no sort of the due rows.
    assert "filesort" not in (claim["Extra"] or ""), claim
    assert int(claim["rows"]) < 1000, f"the claim scan must not touch the history: {claim}"

    sweep = explain(repo, SWEEP_SCAN)
    assert sweep["key"] == "ix_email_delivery_attempts_lease", sweep
    assert sweep["type"] == "range", sweep
    assert int(sweep["rows"]) < 1000, f"the sweep scan must not touch the history: {sweep}"


def test_queue_health_reads_one_index_entry_per_priority(repo: OutboxRepository) -> None:
    """The operators' oldest due row is the first entry of each priority in the claim's index: no
    range of the history or of the backlog is read, and the answer is the oldest due row of any
    priority."""
    from email_outbox.db.reads import _OLDEST_DUE

    assert repo.queue_health().oldest_due_at is None
    cursor = repo.connection.cursor()
    for name, priority, minutes_ago in (("low-old", 1, 30), ("high-new", 9, 5), ("later", 5, -60)):
        repo.enqueue(name, "a@example.com", "s", text_body="t")
        cursor.execute(
            "UPDATE email_delivery_attempts SET priority = %s,"
            " next_attempt_at = UTC_TIMESTAMP(6) - INTERVAL %s MINUTE WHERE notification_id = %s",
            (priority, minutes_ago, name),
        )
    cursor.execute("SELECT next_attempt_at FROM email_delivery_attempts WHERE notification_id = 'low-old'")
    ((oldest,),) = cursor.fetchall()  # type: ignore[misc]
    cursor.close()
    assert repo.queue_health().oldest_due_at == oldest
    for part in _OLDEST_DUE.split(" UNION ALL "):
        # Answered from the index alone: its first entry of that priority, or none.
        plan = explain(repo, part)
        assert plan["Extra"] in ("Select tables optimized away", "No matching min/max row"), plan
