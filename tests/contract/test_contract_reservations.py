"""Reservations (email_reserve_batch, email_start_send): a row claimed ahead is Processing but not
started; only a start mark, fenced like a finalize, lets it be sent; an expired reservation goes back
to where it was claimed from, an expired started claim to UnknownOutcome."""

from __future__ import annotations

from datetime import timedelta

from email_outbox.db.repository import OutboxRepository
from email_outbox.models import FinalizeItem, Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, scalar, token


def reserved_at(repo: OutboxRepository, attempt_id: int) -> object:
    return scalar(repo, "SELECT reserved_at FROM email_delivery_attempts WHERE id = %s", (attempt_id,))


def test_a_reservation_is_a_claim_whose_send_has_not_started(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    (row,) = repo.reserve_batch(t, "worker-a", 60, 5, 1_000_000)
    assert row.id == attempt_id and row.text_body is not None
    claimed = repo.get_row(attempt_id)
    assert claimed.status is Status.PROCESSING and claimed.claim_token == t
    assert reserved_at(repo, attempt_id) is not None
    assert repo.start_send(attempt_id, t) == 1
    assert reserved_at(repo, attempt_id) is None
    assert repo.start_send(attempt_id, t) == 0, "started once only"
    assert repo.finalize_sent(attempt_id, t, "m-1") == 1
    assert repo.get_row(attempt_id).status is Status.SENT


def test_the_other_claims_are_started_from_the_start(repo: OutboxRepository) -> None:
    ids = enqueue_many(repo, 2, prefix=token())
    t = token()
    assert len(repo.claim_batch_bounded(t, "worker-a", 60, 1, 1_000_000)) == 1
    assert repo.try_claim(ids[1], t, "worker-a", 60) == 1
    assert [reserved_at(repo, i) for i in ids] == [None, None]
    assert [repo.start_send(i, t) for i in ids] == [0, 0]


def test_the_start_is_fenced_by_the_claim_token_and_the_lease(repo: OutboxRepository) -> None:
    enqueue_many(repo, 2, prefix=token())
    t = token()
    first, second = repo.reserve_batch(t, "worker-a", 60, 2, 1_000_000)
    assert repo.start_send(first.id, token()) == 0, "another claim token"
    set_clock(repo, db_now(repo) + timedelta(seconds=61))
    assert repo.start_send(second.id, t) == 0, "the lease is over: never start a send then"
    set_clock(repo, None)
    assert reserved_at(repo, first.id) is not None and reserved_at(repo, second.id) is not None


def test_an_expired_reservation_goes_back_unsent_and_a_started_claim_goes_unknown(
    repo: OutboxRepository,
) -> None:
    ids = enqueue_many(repo, 2, prefix=token(), max_attempts=3)
    t = token()
    assert len(repo.reserve_batch(t, "worker-a", 60, 2, 1_000_000)) == 2
    assert repo.start_send(ids[1], t) == 1
    set_clock(repo, db_now(repo) + timedelta(seconds=61))
    assert repo.sweep_stale_leases(10) == 2
    back, unknown = repo.get_row(ids[0]), repo.get_row(ids[1])
    assert back.status is Status.PENDING and back.attempt_count == 0 and back.claim_token is None
    assert unknown.status is Status.UNKNOWN_OUTCOME and unknown.attempt_count == 1
    assert reserved_at(repo, ids[0]) is None
    events = repo.events(ids[0])
    assert (events[-1].from_status, events[-1].to_status, events[-1].actor) == (
        "Processing",
        "Pending",
        "lease-sweep",
    )
    assert "before its send started" in (events[-1].detail or "")
    assert repo.start_send(ids[0], t) == 0 and repo.finalize_sent(ids[0], t, "late") == 0


def test_a_released_reservation_is_claimable_again_at_once(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    assert repo.release_claim(attempt_id, t, 0) == 1
    assert reserved_at(repo, attempt_id) is None
    (again,) = repo.claim_batch_bounded(token(), "worker-b", 60, 1, 1_000_000)
    assert again.id == attempt_id and again.attempt_count == 0


def test_the_start_of_the_next_rides_with_the_last_finalize(repo: OutboxRepository) -> None:
    """What a worker with slow sends does: one call finalizes the row it sent and starts the next."""
    ids = enqueue_many(repo, 2, prefix=token())
    t = token()
    assert repo.try_claim(ids[0], t, "worker-a", 60) == 1
    (reserved,) = repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    results = repo.finalize_batch(
        [
            FinalizeItem(ids[0], t, "Sent", provider_message_id="m-0"),
            FinalizeItem(reserved.id, t, "Started"),
        ]
    )
    assert [(r.affected, r.status) for r in results] == [(1, Status.SENT), (1, Status.PROCESSING)]
    assert reserved_at(repo, reserved.id) is None
    again = repo.finalize_batch([FinalizeItem(reserved.id, t, "Started")])
    assert again[0].affected == 0
