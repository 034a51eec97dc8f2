"""The outage procedures: the provider breaker every replica shares, and the redrive of Failed rows
SES never accepted (docs/procedures.md; docs/design.md, "Provider outages")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, scalar, token


def failed_row(repo: OutboxRepository, *, max_attempts: int = 2, code: str = "ServiceUnavailable") -> int:
    """A row that used up its attempts on transient failures: Failed, never accepted."""
    (attempt_id,) = enqueue_many(repo, 1, prefix=token(), max_attempts=max_attempts)
    for _ in range(max_attempts):
        t = token()
        set_clock(repo, db_now(repo) + timedelta(hours=1))
        assert repo.try_claim(attempt_id, t, "worker-a", 60) == 1
        repo.finalize_failure(
            attempt_id, t, permanent=False, error_code=code, error_message="503", retry_delay_seconds=0
        )
    set_clock(repo, None)
    assert repo.get_row(attempt_id).status is Status.FAILED
    return attempt_id


def test_redrive_moves_a_failed_unaccepted_row_back_with_a_fresh_budget(repo: OutboxRepository) -> None:
    attempt_id = failed_row(repo)
    row = repo.get_row(attempt_id)
    assert row.attempt_count == 2
    assert repo.redrive_failed(row.notification_id, "ops", "SES outage 10:02-10:07") == 1
    after = repo.get_row(attempt_id)
    assert after.status is Status.PENDING and after.attempt_count == 0
    assert after.notification_id == row.notification_id and after.max_attempts == 2
    assert after.next_attempt_at <= db_now(repo)
    (event,) = [e for e in repo.events(attempt_id) if e.from_status is Status.FAILED]
    assert event.to_status is Status.PENDING and event.actor == "ops"
    assert event.detail is not None and "SES outage 10:02-10:07" in event.detail
    # Claimable again, with a whole budget: two transient failures before Failed, as the first time.
    assert repo.try_claim(attempt_id, token(), "worker-b", 60) == 1
    assert repo.redrive_failed(row.notification_id, "ops", "again") == 0, "an open row is not redriven"


def test_redrive_refuses_every_row_that_is_not_failed_unaccepted(repo: OutboxRepository) -> None:
    assert repo.redrive_failed("no-such-id", "ops", "why") == 0
    (pending,) = enqueue_many(repo, 1, prefix=token())
    assert repo.redrive_failed(repo.get_row(pending).notification_id, "ops", "why") == 0
    (sent,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(sent, t, "w", 60) == 1 and repo.finalize_sent(sent, t, "ses-1") == 1
    assert repo.redrive_failed(repo.get_row(sent).notification_id, "ops", "why") == 0
    # Failed, but SES accepted it: its Send event arrived while the row was being sent.
    (accepted,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(accepted, t, "w", 60) == 1
    row = repo.get_row(accepted)
    repo.record_provider_event(
        event_type="Send", ses_message_id="ses-accepted", outbox_id=str(accepted), recipient=row.to_address,
        event_at=db_now(repo), kind=None, subkind=None, detail=None, recorded_by="events",
    )  # fmt: skip
    repo.finalize_failure(
        accepted, t, permanent=True, error_code="X", error_message="x", retry_delay_seconds=0
    )
    assert repo.get_row(accepted).status is Status.FAILED
    assert repo.redrive_failed(row.notification_id, "ops", "why") == 0
    # Failed after UnknownOutcome: it may have reached SES, so only a requeue (with its warning) applies.
    (unknown,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(unknown, t, "w", 60) == 1 and repo.finalize_unknown(unknown, t, "timeout") == 1
    assert repo.resolve_unknown_outcome(unknown, "Failed", "ops", "checked") == 1
    assert repo.redrive_failed(repo.get_row(unknown).notification_id, "ops", "why") == 0
    for attempt_id in (pending, sent, accepted, unknown):
        assert not [e for e in repo.events(attempt_id) if e.actor == "ops" and e.to_status is Status.PENDING]


def test_redrive_checks_its_arguments_and_writes_nothing(repo: OutboxRepository) -> None:
    attempt_id = failed_row(repo)
    nid = repo.get_row(attempt_id).notification_id
    for args in ((nid, "", "why"), (nid, "ops", " "), ("", "ops", "why"), (nid, "ops\x07", "why")):
        with pytest.raises(InvalidInput):
            repo.redrive_failed(*args)
    assert repo.get_row(attempt_id).status is Status.FAILED


def test_redrive_batch_dry_run_counts_and_batches_move_only_matching_rows(repo: OutboxRepository) -> None:
    since = db_now(repo) - timedelta(minutes=1)
    outage = [failed_row(repo) for _ in range(5)]
    other = failed_row(repo, code="SomethingElse")
    (sent,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(sent, t, "w", 60) == 1 and repo.finalize_sent(sent, t, "ses-2") == 1

    def run(dry_run: bool, code: str | None = "ServiceUnavailable") -> tuple[int, int]:
        total = calls = after = 0
        while True:
            batch = repo.redrive_failed_batch(
                since, None, code, after, 2, dry_run=dry_run, redriven_by="ops", reason="outage"
            )
            total, calls, after = total + batch.affected, calls + 1, batch.last_id
            if batch.examined < 2:
                return total, calls

    assert run(dry_run=True) == (5, 4), "6 Failed rows, 2 a batch: 3 full batches and an empty one"
    assert all(repo.get_row(i).status is Status.FAILED for i in [*outage, other])
    assert run(dry_run=False)[0] == 5
    assert all(repo.get_row(i).status is Status.PENDING for i in outage)
    assert repo.get_row(other).status is Status.FAILED
    assert run(dry_run=False)[0] == 0, "a second run finds nothing left"
    later = db_now(repo) + timedelta(hours=10)  # failed_row moved the clock forward per attempt
    assert repo.redrive_failed_batch(
        later, None, None, 0, 10, dry_run=True, redriven_by="ops", reason="outage"
    ).affected == 0, "failed_since after every failure"  # fmt: skip
    with pytest.raises(InvalidInput, match="limit"):
        repo.redrive_failed_batch(since, None, None, 0, 1001, dry_run=True, redriven_by="o", reason="r")
    with pytest.raises(InvalidInput, match="failed_until"):
        repo.redrive_failed_batch(since, since, None, 0, 10, dry_run=True, redriven_by="o", reason="r")


def test_breaker_reads_closed_until_a_replica_opens_it(repo: OutboxRepository) -> None:
    state = repo.breaker_state("ses")
    assert state.state == "closed" and not state.down and state.since is None and not state.probe_due
    assert repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503 from SES", 30) == 1
    state = repo.breaker_state("ses")
    assert state.state == "open" and state.changed_by == "worker-a"
    assert state.last_error_code == "ServiceUnavailable" and not state.probe_due
    assert "down since" in state.summary() and "ServiceUnavailable" in state.summary()
    since = state.since
    # Another replica's failure while open: the last error moves on, the transition does not repeat.
    assert repo.breaker_open("ses", "worker-b", "ConnectFailed", "refused", 30) == 0
    state = repo.breaker_state("ses")
    assert (
        state.changed_by == "worker-a" and state.last_error_code == "ConnectFailed" and state.since == since
    )


def test_one_probe_at_a_time_across_replicas_and_close(repo: OutboxRepository) -> None:
    repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 30)
    assert repo.breaker_try_probe("ses", "worker-a", 10) == 0, "not before probe_at"
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.breaker_state("ses").probe_due
    assert repo.breaker_try_probe("ses", "worker-a", 10) == 1
    assert repo.breaker_try_probe("ses", "worker-b", 10) == 0, "the probe is held"
    state = repo.breaker_state("ses")
    assert state.state == "half_open" and state.probe_by == "worker-a" and state.probes == 1
    # The probe failed: open again, the outage's start kept.
    assert repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 30) == 1
    assert repo.breaker_state("ses").since == repo.breaker_state("ses").since
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.breaker_try_probe("ses", "worker-b", 10) == 1
    # The prober died: its hold ends and another replica takes the probe over.
    set_clock(repo, db_now(repo) + timedelta(seconds=11))
    assert repo.breaker_try_probe("ses", "worker-c", 10) == 1
    assert repo.breaker_close("ses", "worker-c", "probe accepted") == 1
    assert repo.breaker_close("ses", "worker-c", "again") == 0
    state = repo.breaker_state("ses")
    assert state.state == "closed" and state.probe_at is None and state.changed_by == "worker-c"
    assert scalar(repo, "SELECT COUNT(*) FROM email_provider_breaker_log") == 6
    detail = scalar(repo, "SELECT detail FROM email_provider_breaker_log WHERE to_state = 'closed'")
    assert "3 probes" in detail and "probe accepted" in detail


def test_breaker_arguments_are_checked(repo: OutboxRepository) -> None:
    with pytest.raises(InvalidInput, match="probe_after_seconds"):
        repo.breaker_open("ses", "w", "X", "x", 0)
    with pytest.raises(InvalidInput, match="opened_by"):
        repo.breaker_open("ses", "", "X", "x", 10)
    with pytest.raises(InvalidInput, match="provider"):
        repo.breaker_try_probe("", "w", 10)
    with pytest.raises(InvalidInput, match="closed_by"):
        repo.breaker_close("ses", " ", None)
    assert repo.breaker_state("ses").state == "closed"
