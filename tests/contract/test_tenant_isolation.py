"""No service holds up another through the database (issue 37): an email_cancel that changes nothing
(the row is being sent) keeps no row lock after it returns, so the caller's transaction left open does
not block the worker's finalize; and a worker's connection waits for a row lock a few seconds at most."""

from __future__ import annotations

import mysql.connector
import pytest

from email_outbox.db.connection import connect
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import TransientDatabaseError
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.process import ROW_LOCK_WAIT_SECONDS, _worker_repository
from tests.support.helpers import enqueue_many, token


def test_a_cancel_that_changes_nothing_keeps_no_lock_in_the_callers_open_transaction(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="being-sent")
    claim = token()
    assert repo.try_claim(attempt_id, claim, "w", 60) == 1  # claimed as started: its send may be in flight
    service = connect(dsn)
    service.autocommit = False
    cursor = service.cursor()
    try:
        cursor.execute("START TRANSACTION")
        cursor.execute("CALL email_cancel('being-sent-0', 'svc', 'changed my mind')")
        assert cursor.fetchall()[0][0] == 0, "a started send is never cancelled"
        while cursor.nextset():
            pass
        # The service's transaction stays open. The worker's finalize must not wait for it.
        worker = OutboxRepository.open(dsn)
        try:
            worker.limit_row_lock_wait(1)
            assert worker.finalize_sent(attempt_id, claim, "ses-1") == 1
        finally:
            worker.close()
    finally:
        service.rollback()
        cursor.close()
        service.close()


def test_a_worker_waits_for_a_row_lock_a_few_seconds_at_most(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="locked")
    claim = token()
    assert repo.try_claim(attempt_id, claim, "w", 60) == 1
    holder = mysql.connector.connect(
        host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password, database=dsn.database
    )
    holder_cursor = holder.cursor()
    holder_cursor.execute("START TRANSACTION")
    holder_cursor.execute("SELECT id FROM email_delivery_attempts WHERE id = %s FOR UPDATE", (attempt_id,))
    holder_cursor.fetchall()
    worker = _worker_repository(WorkerConfig(dsn=dsn, default_from=None, worker_id="w"))
    try:
        assert ROW_LOCK_WAIT_SECONDS <= 5
        with pytest.raises(TransientDatabaseError, match="1205"):
            worker.finalize_sent(attempt_id, claim, "ses-1")
    finally:
        holder.rollback()
        holder.close()
    assert worker.finalize_sent(attempt_id, claim, "ses-1") == 1, "the row, once free, finalizes"
    worker.close()


def test_rows_from_before_accounts_were_recorded_are_cancelled_by_operators_only(
    repo: OutboxRepository,
) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="legacy")
    cursor = repo.connection.cursor()
    cursor.execute("UPDATE email_delivery_attempts SET account = '' WHERE id = %s", (attempt_id,))
    cursor.close()
    repo.connection.commit()
    by_notification_id = repo.cancel("legacy-0", "svc", "any service could name it")
    assert (by_notification_id.affected, by_notification_id.attempt_id) == (0, None)
    assert repo.cancel_email(attempt_id, "operator", "by its row id").affected == 1
