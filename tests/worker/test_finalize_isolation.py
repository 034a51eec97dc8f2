"""A row another session keeps locked holds up its own finalize only (issue 37): the worker's finalizes
share one connection per replica, and a call there that meets the lock is landed part by part, the
locked part retried on a connection of its own until the lock is gone, while every other row's finalize
keeps landing."""

from __future__ import annotations

from pathlib import Path

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.helpers import scalar
from tests.support.worker_harness import account, counts, spawn_worker, wait_until

# A lease long enough that the locked row lands once the lock is let go, instead of being swept.
LEASE = {"lease_seconds": 60, "ses_connect_timeout": 1, "ses_read_timeout": 10}


def test_a_locked_row_holds_up_its_own_finalize_only(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    with SesEndpoint() as endpoint:
        _send_one_locked_and_twenty_free(dsn, repo, endpoint, tmp_path)


def _send_one_locked_and_twenty_free(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    locked_id = repo.enqueue("locked-0", "locked@example.com", "locked", text_body="hello").attempt_id
    assert locked_id is not None
    for i in range(20):
        repo.enqueue(f"other-{i}", f"user{i}@example.com", f"subject {i}", text_body="hello")
    # Every answer is held, so the locked row's finalize meets the lock in the same group as the
    # finalizes of the other rows in the send slots.
    endpoint.set_faults(FaultRule("hold_after_accept"))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=4, **LEASE)
    holder = mysql.connector.connect(
        host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password, database=dsn.database
    )
    try:
        wait_until(
            lambda: str(locked_id) in endpoint.accepted_counts(), 30, "the locked row's send to reach SES"
        )
        cursor = holder.cursor()
        cursor.execute("START TRANSACTION")
        cursor.execute("SELECT id FROM email_delivery_attempts WHERE id = %s FOR UPDATE", (locked_id,))
        cursor.fetchall()
        endpoint.state.released.set()
        wait_until(lambda: counts(repo)[Status.SENT] == 20, 20, "every other row to be Sent")
        status = scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (locked_id,))
        assert status == Status.PROCESSING, "the locked row cannot land while the lock is held"
        holder.rollback()
        wait_until(lambda: counts(repo)[Status.SENT] == 21, 30, "the locked row to land once free")
    finally:
        holder.close()
        assert worker.terminate() == 0
    result = account(repo, endpoint, 21)
    assert result.by_status[Status.SENT] == 21 and result.accepted_total == 21
    assert "retrying it on a connection of its own" in worker.log()
