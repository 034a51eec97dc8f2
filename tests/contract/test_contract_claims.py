"""Claims, leases and the sweep: one holder at a time, no stolen leases, UnknownOutcome never claimed."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import deadlocks, enqueue_many, scalar, token


def test_only_one_of_two_concurrent_claimers_wins(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    rounds = 60
    ids = enqueue_many(repo, rounds)
    claimers = [OutboxRepository.open(dsn) for _ in range(2)]
    wins: Counter[int] = Counter()
    try:
        for attempt_id in ids:
            barrier = threading.Barrier(2)
            results: list[int] = [0, 0]

            def claim(i: int, attempt_id: int = attempt_id) -> None:
                barrier.wait()
                results[i] = claimers[i].try_claim(attempt_id, token(), f"w{i}", 60)

            threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(results) == [0, 1], f"row {attempt_id}: {results}"
            wins[results.index(1)] += 1
    finally:
        for c in claimers:
            c.close()
    assert sum(wins.values()) == rounds
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = 'Processing'") == rounds


def test_active_lease_is_not_stolen(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1)
    assert repo.try_claim(attempt_id, token(), "w1", 60) == 1
    assert repo.try_claim(attempt_id, token(), "w2", 60) == 0
    assert repo.claim_batch(token(), "w2", 60, 10) == []
    assert repo.sweep_stale_leases(100) == 0
    assert repo.get_row(attempt_id).claimed_by == "w1"


def test_retrying_row_not_claimable_before_next_attempt_at(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1)
    t1 = token()
    assert repo.try_claim(attempt_id, t1, "w1", 60) == 1
    result = repo.finalize_failure(
        attempt_id, t1, permanent=False, error_code="X", error_message="e", retry_delay_seconds=300
    )
    assert (result.affected, result.status) == (1, Status.RETRYING)
    assert repo.try_claim(attempt_id, token(), "w1", 60) == 0
    assert repo.claimable_candidates(10) == []
    assert repo.claim_batch(token(), "w1", 60, 10) == []
    set_clock(repo, db_now(repo) + timedelta(seconds=301))
    assert [c.id for c in repo.claimable_candidates(10)] == [attempt_id]
    assert [c.id for c in repo.claim_batch(token(), "w1", 60, 10)] == [attempt_id]


def test_unknown_outcome_is_never_a_candidate_nor_claimed(repo: OutboxRepository) -> None:
    ids = enqueue_many(repo, 2)
    for attempt_id in ids:
        t = token()
        assert repo.try_claim(attempt_id, t, "w1", 60) == 1
        assert repo.finalize_unknown(attempt_id, t, "read timeout") == 1
    set_clock(repo, db_now(repo) + timedelta(days=30))
    assert repo.claimable_candidates(10) == []
    assert repo.claim_batch(token(), "w1", 60, 10) == []
    assert all(repo.try_claim(i, token(), "w1", 60) == 0 for i in ids)
    assert all(repo.get_row(i).status is Status.UNKNOWN_OUTCOME for i in ids)


def test_candidates_oldest_due_first(repo: OutboxRepository) -> None:
    # A send_after in the past is stored as now, so the due order is set by enqueuing in the past.
    now = db_now(repo)
    set_clock(repo, now - timedelta(seconds=20))
    b = repo.enqueue("early", "a@b.c", "s", text_body="x").attempt_id
    set_clock(repo, now - timedelta(seconds=10))
    a = repo.enqueue("late", "a@b.c", "s", text_body="x").attempt_id
    set_clock(repo, None)
    c = repo.enqueue("now", "a@b.c", "s", text_body="x").attempt_id
    assert [x.id for x in repo.claimable_candidates(10)] == [b, a, c]
    assert [x.id for x in repo.claim_batch(token(), "w", 60, 2)] == [b, a]


def test_claim_batch_returns_message_columns_and_lease(repo: OutboxRepository) -> None:
    attempt_id = repo.enqueue(
        "m1",
        "to@x.y",
        "Hi",
        text_body="t",
        html_body="<b>h</b>",
        from_address="f@example.com",
        max_attempts=3,
    ).attempt_id
    (claimed,) = repo.claim_batch(token(), "w", 90, 5)
    assert (claimed.id, claimed.notification_id, claimed.to_address, claimed.from_address) == (
        attempt_id,
        "m1",
        "to@x.y",
        "f@example.com",
    )
    assert (claimed.subject, claimed.text_body, claimed.html_body) == ("Hi", "t", "<b>h</b>")
    assert (claimed.attempt_count, claimed.max_attempts) == (0, 3)
    row = repo.get_row(attempt_id)
    assert row.lease_expires_at == claimed.lease_expires_at
    assert row.lease_expires_at is not None and row.claimed_at is not None
    assert row.lease_expires_at - row.claimed_at == timedelta(seconds=90)


def test_batch_claim_8_threads_2000_rows_each_exactly_once(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    cursor = repo.connection.cursor()
    for chunk in range(0, 2000, 500):
        for i in range(chunk, chunk + 500):
            cursor.execute("CALL email_enqueue(%s,'a@b.c',NULL,'s','x',NULL,NULL,NULL)", (f"batch-{i}",))
            cursor.fetchall()
            while cursor.nextset():
                pass
    cursor.close()
    before = deadlocks(repo)
    claimed: list[list[int]] = [[] for _ in range(8)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def claimer(i: int) -> None:
        r = OutboxRepository.open(dsn)
        try:
            barrier.wait()
            tok = token()
            while True:
                rows = r.claim_batch(tok, f"w{i}", 60, 25)
                if not rows:
                    break
                claimed[i].extend(row.id for row in rows)
        except BaseException as exc:  # surfaced below: a thread must not fail silently
            errors.append(exc)
        finally:
            r.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    everything = [i for part in claimed for i in part]
    assert len(everything) == 2000 and len(set(everything)) == 2000
    assert sum(1 for part in claimed if part) >= 2, "claims should be spread over several threads"
    assert deadlocks(repo) == before


@pytest.mark.parametrize(("offset_us", "swept"), [(-1, 0), (0, 1), (1, 1)])
def test_sweep_lease_boundary(repo: OutboxRepository, offset_us: int, swept: int) -> None:
    """The lease is over at lease_expires_at itself: just before it is active, at and after it is swept."""
    (attempt_id,) = enqueue_many(repo, 1)
    assert repo.try_claim(attempt_id, token(), "w1", 60) == 1
    expires = repo.get_row(attempt_id).lease_expires_at
    assert expires is not None
    set_clock(repo, expires + timedelta(microseconds=offset_us))
    assert repo.sweep_stale_leases(100) == swept
    row = repo.get_row(attempt_id)
    assert row.status is (Status.UNKNOWN_OUTCOME if swept else Status.PROCESSING)
    if swept:
        assert row.attempt_count == 1 and row.claim_token is None and row.last_error_code == "LeaseExpired"


def test_claim_batch_sweeps_first(repo: OutboxRepository) -> None:
    ids = enqueue_many(repo, 2)
    assert repo.try_claim(ids[0], token(), "w1", 5) == 1
    set_clock(repo, db_now(repo) + timedelta(seconds=6))
    claimed = repo.claim_batch(token(), "w2", 60, 10)
    assert [c.id for c in claimed] == [ids[1]]
    assert repo.get_row(ids[0]).status is Status.UNKNOWN_OUTCOME


def test_extend_lease(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1)
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 10) == 1
    assert repo.extend_lease(attempt_id, token(), 100) == 0
    # A frozen clock leaves lease_expires_at unchanged; the count is still the matched count.
    set_clock(repo, db_now(repo))
    assert repo.extend_lease(attempt_id, t, 100) == 1
    assert repo.extend_lease(attempt_id, t, 100) == 1
    set_clock(repo, db_now(repo) + timedelta(seconds=50))
    assert repo.sweep_stale_leases(10) == 0
    set_clock(repo, db_now(repo) + timedelta(seconds=60))
    assert repo.extend_lease(attempt_id, t, 100) == 0, "an expired lease cannot be revived"


def test_claim_batch_bounded_leaves_large_bodies_for_a_fenced_load(repo: OutboxRepository) -> None:
    small = repo.enqueue("v2-small", "a@example.com", "s", text_body="hi", html_body="<p>hi</p>").attempt_id
    large_text = "é" * 5000  # 10,000 bytes
    large = repo.enqueue("v2-large", "a@example.com", "s", text_body=large_text).attempt_id
    t = token()
    claimed = {c.id: c for c in repo.claim_batch_bounded(t, "w", 60, 10, 1000)}
    assert (claimed[small].text_body, claimed[small].body_bytes, claimed[small].bodies_loaded) == (
        "hi",
        11,
        True,
    )
    assert (claimed[large].text_body, claimed[large].body_bytes, claimed[large].bodies_loaded) == (
        None,
        10000,
        False,
    )
    assert repo.claimed_bodies(large, t) == (large_text, None)
    assert repo.claimed_bodies(large, token()) is None, "another token reads nothing"
    assert repo.finalize_sent(large, t, "m") == 1
    assert repo.claimed_bodies(large, t) is None, "a finalized row is no longer held"
    events = repo.events(large)
    assert [(e.from_status, e.to_status) for e in events][-2:] == [
        (Status.PENDING, Status.PROCESSING),
        (Status.PROCESSING, Status.SENT),
    ]
