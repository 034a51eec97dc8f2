"""Redrive by row id (issue 37): two services that use the same notification id; an operator's redrive
of one row by its id (the console, `redrive --id`) moves that row, never the other service's."""

from __future__ import annotations

import json

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.support.helpers import token


def failed(repo: OutboxRepository, attempt_id: int) -> None:
    t = token()
    assert repo.try_claim(attempt_id, t, "w", 60) == 1
    repo.finalize_failure(
        attempt_id,
        t,
        permanent=True,
        error_code="MessageRejected",
        error_message="rejected",
        retry_delay_seconds=0,
    )
    assert repo.get_row(attempt_id).status is Status.FAILED


def test_redrive_by_id_moves_that_row_only(repo: OutboxRepository, accounts: dict[str, DatabaseDsn]) -> None:
    message = json.dumps({"to": ["a@example.com"], "subject": "s", "text": "t"})
    other = OutboxRepository.open(accounts["enqueuer"])
    try:
        theirs = other.enqueue_message("dup-1", message).attempt_id
    finally:
        other.close()
    ours = repo.enqueue_message("dup-1", message).attempt_id
    assert theirs != ours
    failed(repo, theirs)
    failed(repo, ours)
    assert repo.redrive_email(theirs, "alice", "their rejection was fixed") == 1
    assert repo.get_row(theirs).status is Status.PENDING
    assert repo.get_row(ours).status is Status.FAILED, "the other service's row with the same id stayed"
    assert repo.redrive_email(theirs, "alice", "again") == 0, "not Failed any more"
    assert repo.redrive_email(10**12, "alice", "no such row") == 0
