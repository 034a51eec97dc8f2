"""Finalize, release and operator procedures: fenced by the claim token, bounded, audited."""

from __future__ import annotations

from datetime import timedelta

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.models import Status
from email_outbox.procedure_files import parameter_names
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, scalar, token


def claimed(repo: OutboxRepository, **kwargs: object) -> tuple[int, str]:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token(), **kwargs)
    t = token()
    assert repo.try_claim(attempt_id, t, "worker-a", 60) == 1
    return attempt_id, t


def test_finalize_sent_clears_the_claim(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    assert repo.finalize_sent(attempt_id, t, "ses-msg-1") == 1
    row = repo.get_row(attempt_id)
    assert row.status is Status.SENT and row.provider_message_id == "ses-msg-1"
    assert row.claim_token is None and row.lease_expires_at is None
    assert row.attempt_count == 1 and row.sent_at is not None
    assert repo.finalize_sent(attempt_id, t, "ses-msg-1") == 0, "a repeat finalize is a no-op"


def test_stale_claimant_cannot_finalize_after_sweep(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    set_clock(repo, db_now(repo) + timedelta(seconds=61))
    assert repo.sweep_stale_leases(10) == 1
    assert repo.finalize_sent(attempt_id, t, "late") == 0
    assert (
        repo.finalize_failure(
            attempt_id, t, permanent=False, error_code="x", error_message="x", retry_delay_seconds=0
        ).affected
        == 0
    )
    assert repo.finalize_unknown(attempt_id, t, "x") == 0
    assert repo.release_claim(attempt_id, t, 0) == 0
    row = repo.get_row(attempt_id)
    assert row.status is Status.UNKNOWN_OUTCOME and row.provider_message_id is None


def test_stale_claimant_cannot_undo_newer_claimants_result(repo: OutboxRepository) -> None:
    attempt_id, old = claimed(repo)
    assert repo.release_claim(attempt_id, old, 0) == 1
    new = token()
    assert repo.try_claim(attempt_id, new, "worker-b", 60) == 1
    assert repo.finalize_sent(attempt_id, new, "by-b") == 1
    assert (
        repo.finalize_failure(
            attempt_id, old, permanent=True, error_code="x", error_message="x", retry_delay_seconds=0
        ).affected
        == 0
    )
    assert repo.finalize_unknown(attempt_id, old, "x") == 0
    row = repo.get_row(attempt_id)
    assert (row.status, row.provider_message_id, row.claimed_by) == (Status.SENT, "by-b", "worker-b")


def test_transient_failures_end_failed_at_max_attempts(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1, max_attempts=3)
    statuses = []
    for _ in range(3):
        t = token()
        assert repo.try_claim(attempt_id, t, "w", 60) == 1
        result = repo.finalize_failure(
            attempt_id,
            t,
            permanent=False,
            error_code="InternalFailure",
            error_message="503",
            retry_delay_seconds=0,
        )
        statuses.append(result.status)
    assert statuses == [Status.RETRYING, Status.RETRYING, Status.FAILED]
    row = repo.get_row(attempt_id)
    assert row.status is Status.FAILED and row.attempt_count == 3 and row.last_error_code == "InternalFailure"
    assert repo.try_claim(attempt_id, token(), "w", 60) == 0


def test_permanent_failure_ends_failed_at_once(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    result = repo.finalize_failure(
        attempt_id,
        t,
        permanent=True,
        error_code="MessageRejected",
        error_message="bad address",
        retry_delay_seconds=60,
    )
    assert (result.affected, result.status) == (1, Status.FAILED)
    row = repo.get_row(attempt_id)
    assert row.attempt_count == 1 and row.last_error_message == "bad address"


def test_retry_delay_sets_next_attempt(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    set_clock(repo, db_now(repo))
    now = db_now(repo)
    repo.finalize_failure(
        attempt_id, t, permanent=False, error_code="e", error_message="m", retry_delay_seconds=42
    )
    assert repo.get_row(attempt_id).next_attempt_at == now + timedelta(seconds=42)


def test_finalize_unknown_goes_straight_to_unknown_outcome(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    assert repo.finalize_unknown(attempt_id, t, "read timeout after request was sent") == 1
    row = repo.get_row(attempt_id)
    assert row.status is Status.UNKNOWN_OUTCOME and row.attempt_count == 1
    assert row.last_error_message == "read timeout after request was sent"


@pytest.mark.parametrize("from_status", [Status.PENDING, Status.RETRYING])
def test_release_returns_to_claimed_from_status(repo: OutboxRepository, from_status: Status) -> None:
    attempt_id, t = claimed(repo)
    if from_status is Status.RETRYING:
        repo.finalize_failure(
            attempt_id, t, permanent=False, error_code="e", error_message="m", retry_delay_seconds=0
        )
        t = token()
        assert repo.try_claim(attempt_id, t, "w", 60) == 1
    count_before = repo.get_row(attempt_id).attempt_count
    set_clock(repo, db_now(repo))
    now = db_now(repo)
    assert repo.release_claim(attempt_id, t, 30) == 1
    row = repo.get_row(attempt_id)
    assert row.status is from_status and row.attempt_count == count_before
    assert row.next_attempt_at == now + timedelta(seconds=30) and row.claim_token is None
    assert repo.try_claim(attempt_id, token(), "w", 60) == 0, "not due before the delay"
    set_clock(repo, now + timedelta(seconds=30))
    assert repo.try_claim(attempt_id, token(), "w", 60) == 1


def test_requeue_only_from_unknown_outcome_and_audited(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    assert repo.requeue_unknown_outcome(attempt_id, "alice", "checked SES") == 0, "Processing is not requeued"
    repo.finalize_sent(attempt_id, t, "m")
    assert repo.requeue_unknown_outcome(attempt_id, "alice", "checked SES") == 0, "Sent stays Sent"
    other, t2 = claimed(repo)
    repo.finalize_unknown(other, t2, "timeout")
    assert repo.requeue_unknown_outcome(other, "alice", "not in SES event data") == 1
    row = repo.get_row(other)
    assert row.status is Status.PENDING
    last = repo.events(other)[-1]
    assert (last.from_status, last.to_status, last.actor) == (Status.UNKNOWN_OUTCOME, Status.PENDING, "alice")
    assert last.detail is not None and "not in SES event data" in last.detail
    assert repo.try_claim(other, token(), "w", 60) == 1


def test_requeue_grants_an_attempt_when_all_are_used(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo, max_attempts=1)
    repo.finalize_unknown(attempt_id, t, "timeout")
    assert repo.requeue_unknown_outcome(attempt_id, "bob", "verified not delivered") == 1
    assert repo.try_claim(attempt_id, token(), "w", 60) == 1


@pytest.mark.parametrize("outcome", ["Sent", "Failed"])
def test_resolve_unknown_outcome(repo: OutboxRepository, outcome: str) -> None:
    attempt_id, t = claimed(repo)
    assert repo.resolve_unknown_outcome(attempt_id, outcome, "carol", "looked it up") == 0
    repo.finalize_unknown(attempt_id, t, "reset")
    message_id = "found-in-ses" if outcome == "Sent" else None
    assert repo.resolve_unknown_outcome(attempt_id, outcome, "carol", "SES events say so", message_id) == 1
    row = repo.get_row(attempt_id)
    assert row.status.value == outcome and row.provider_message_id == message_id
    last = repo.events(attempt_id)[-1]
    assert (last.to_status.value, last.actor) == (outcome, "carol") and "SES events say so" in (
        last.detail or ""
    )
    assert repo.resolve_unknown_outcome(attempt_id, "Sent", "carol", "again") == 0, "terminal stays terminal"


def test_every_transition_leaves_exactly_one_event(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)  # Pending, Processing
    repo.release_claim(attempt_id, t, 0)  # Pending
    t = token()
    repo.try_claim(attempt_id, t, "w2", 60)  # Processing
    repo.extend_lease(attempt_id, t, 120)  # no transition
    repo.finalize_failure(
        attempt_id, t, permanent=False, error_code="e", error_message="m", retry_delay_seconds=0
    )  # Retrying
    (_row,) = repo.claim_batch(token(), "w3", 5, 1)  # Processing
    set_clock(repo, db_now(repo) + timedelta(seconds=10))
    repo.sweep_stale_leases(5)  # UnknownOutcome
    repo.requeue_unknown_outcome(attempt_id, "op", "why")  # Pending
    t = token()
    repo.try_claim(attempt_id, t, "w4", 60)  # Processing
    repo.finalize_sent(attempt_id, t, "mid")  # Sent
    events = repo.events(attempt_id)
    path = [(e.from_status, e.to_status) for e in events]
    P, R, X, S, U = Status.PENDING, Status.RETRYING, Status.PROCESSING, Status.SENT, Status.UNKNOWN_OUTCOME
    assert path == [(None, P), (P, X), (X, P), (P, X), (X, R), (R, X), (X, U), (U, P), (P, X), (X, S)]
    assert [e.actor for e in events[1:]] == [
        "worker-a",
        "worker-a",
        "w2",
        "w2",
        "w3",
        "lease-sweep",
        "op",
        "w4",
        "w4",
    ]
    assert events[-1].claim_token == t
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == len(events)


def test_purge_bodies_keeps_row_and_idempotency(repo: OutboxRepository) -> None:
    attempt_id, t = claimed(repo)
    repo.finalize_sent(attempt_id, t, "m")
    nid = repo.get_row(attempt_id).notification_id
    assert repo.purge_bodies(1, 100) == 0, "too recent"
    set_clock(repo, db_now(repo) + timedelta(days=2))
    assert repo.purge_bodies(1, 100) == 1
    assert scalar(repo, "SELECT text_body FROM email_delivery_attempts WHERE id = %s", (attempt_id,)) is None
    assert repo.enqueue(nid, "a@b.c", "s", text_body="again").affected == 0
    assert repo.purge_bodies(1, 100) == 0


def test_purge_bodies_after_walks_keyset_batches(repo: OutboxRepository) -> None:
    ids = []
    for _ in range(5):
        attempt_id, t = claimed(repo)
        assert repo.finalize_sent(attempt_id, t, "m") == 1
        ids.append(attempt_id)
    (young,) = enqueue_many(repo, 1, prefix="young")
    set_clock(repo, db_now(repo) + timedelta(days=2))
    assert repo.purge_bodies_after(1, 0, 2) == (2, ids[1])
    assert repo.purge_bodies_after(1, ids[1], 2) == (2, ids[3])
    assert repo.purge_bodies_after(1, ids[3], 2) == (1, ids[4]), "the last batch is short: stop"
    assert repo.purge_bodies_after(1, ids[4], 2) == (0, ids[4])
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE text_body IS NOT NULL") == 1
    assert repo.get_row(young).status is Status.PENDING


def test_stats_one_row_per_status(repo: OutboxRepository) -> None:
    enqueue_many(repo, 3)
    _attempt_id, _t = claimed(repo)
    stats = {s.status: s for s in repo.outbox_stats()}
    assert list(stats) == list(Status)
    assert stats[Status.PENDING].count == 3 and stats[Status.PROCESSING].count == 1
    assert stats[Status.PENDING].oldest_due_at is not None and stats[Status.SENT].oldest_due_at is None


BAD_CALLS = [
    ("email_try_claim", (1, "t", "w", 0), "lease_seconds"),
    ("email_try_claim", (1, "t", "w", 86401), "lease_seconds"),
    ("email_try_claim", (1, "", "w", 10), "claim_token"),
    ("email_try_claim", (1, "t", "", 10), "claimed_by"),
    ("email_try_claim", (0, "t", "w", 10), "id"),
    ("email_claim_batch", ("t", "w", 10, 0), "limit"),
    ("email_claim_batch", ("t", "w", 10, 10001), "limit"),
    ("email_claim_batch", ("t", "w", None, 10), "lease_seconds"),
    ("email_claimable_candidates", (0,), "limit"),
    ("email_sweep_stale_leases", (-1,), "limit"),
    ("email_extend_lease", (1, "t", 0), "lease_seconds"),
    ("email_finalize_sent", (1, "t", ""), "provider_message_id"),
    ("email_finalize_failure", (1, "t", 2, "c", "m", 0), "permanent"),
    ("email_finalize_failure", (1, "t", 0, "c", "m", -1), "retry_delay_seconds"),
    ("email_finalize_failure", (1, "t", 0, "c", "m", 604801), "retry_delay_seconds"),
    ("email_release_claim", (1, "t", 604801), "delay_seconds"),
    ("email_requeue_unknown_outcome", (1, "", "why"), "requeued_by"),
    ("email_requeue_unknown_outcome", (1, "op", ""), "reason"),
    ("email_requeue_unknown_outcome", (1, "op", "   "), "reason"),
    ("email_resolve_unknown_outcome", (1, "Maybe", "op", "why", None), "outcome"),
    ("email_resolve_unknown_outcome", (1, "sent", "op", "why", None), "outcome"),
    ("email_resolve_unknown_outcome", (1, "Sent", None, "why", None), "resolved_by"),
    ("email_resolve_unknown_outcome", (1, "Sent", "op", None, None), "reason"),
    ("email_purge_bodies_after", (-1, 0, 10), "older_than_days"),
    ("email_purge_bodies_after", (1, -1, 10), "after_id"),
    ("email_purge_bodies_after", (1, 0, 0), "limit"),
]


@pytest.mark.parametrize(("procedure", "args", "names"), BAD_CALLS)
def test_bad_arguments_refused_and_nothing_written(
    repo: OutboxRepository, procedure: str, args: tuple[object, ...], names: str
) -> None:
    attempt_id, t = claimed(repo)
    repo.finalize_unknown(attempt_id, t, "x")
    args = tuple(attempt_id if a == 1 and i == 0 else a for i, a in enumerate(args))
    before = scalar(repo, "SELECT CONCAT(COUNT(*), ':', SUM(row_version)) FROM email_delivery_attempts")
    events_before = scalar(repo, "SELECT COUNT(*) FROM email_delivery_events")
    with pytest.raises(InvalidInput, match=rf"{procedure}: {names}"):
        repo._call(procedure, **dict(zip(parameter_names(procedure), args, strict=True)))
    assert (
        scalar(repo, "SELECT CONCAT(COUNT(*), ':', SUM(row_version)) FROM email_delivery_attempts") == before
    )
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == events_before
