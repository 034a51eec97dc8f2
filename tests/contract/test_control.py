"""Priority, expiry and cancel (issue 26), through the procedures as any caller would CALL them: the
claim order, the expiry decided at claim time, at the start of a reservation and by the sweep, the
cancel of what was never handed to SES and its refusal of anything that may have been, the fence
between a cancel and a worker's start, the roles that may cancel, and the refusals of bad members."""

from __future__ import annotations

import json
from datetime import timedelta

import mysql.connector
import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import AccessDenied, InvalidInput
from email_outbox.models import FinalizeItem, Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, scalar, token


def message(**members: object) -> str:
    return json.dumps({"to": ["user@example.com"], "subject": "s", "text": "t", **members})


def enqueue(repo: OutboxRepository, notification_id: str, **members: object) -> int:
    result = repo.enqueue_message(notification_id, message(**members))
    assert result.affected == 1
    return result.attempt_id


def events(repo: OutboxRepository, attempt_id: int) -> list[tuple[str | None, str, str | None, str | None]]:
    return [
        (e.from_status.value if e.from_status else None, e.to_status.value, e.actor, e.detail)
        for e in repo.events(attempt_id)
    ]


# --- priority --------------------------------------------------------------------------------------
def test_claims_take_the_highest_priority_first_then_the_oldest_due(repo: OutboxRepository) -> None:
    # A send_after in the past is stored as now, so older due times come from enqueuing in the past.
    now = db_now(repo)
    set_clock(repo, now - timedelta(hours=1))
    low_old = enqueue(repo, "low-old", priority=0)
    set_clock(repo, now - timedelta(minutes=5))
    high_old = enqueue(repo, "high-old", priority=9)
    set_clock(repo, None)
    default = repo.enqueue("default", "a@example.com", "s", text_body="t").attempt_id
    high_new = enqueue(repo, "high-new", priority=9)
    middle = enqueue(repo, "middle", priority=7)
    assert repo.get_row(default).priority == 5, "the 8-argument email_enqueue gets the default"
    order = [c.id for c in repo.claimable_candidates(10)]
    assert order == [high_old, high_new, middle, default, low_old]
    claimed = [r.id for r in repo.claim_batch_bounded(token(), "w", 60, 3, 1_000_000)]
    assert claimed == [high_old, high_new, middle], "the batch takes the top three, in claim order"
    assert [r.id for r in repo.reserve_batch(token(), "w", 60, 5, 1_000_000)] == [default, low_old]


def test_everything_at_nine_is_first_come_first_served(repo: OutboxRepository) -> None:
    """No trap for an operator who sends everything at 9: one priority is the due-time order of old."""
    ids = [enqueue(repo, f"all-nine-{i}", priority=9) for i in range(6)]
    assert [r.id for r in repo.claim_batch_bounded(token(), "w", 60, 6, 1_000_000)] == ids


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (10, "priority must be an integer from 0 to 9"),
        (-1, "priority must be an integer from 0 to 9"),
        (4.5, "priority must be an integer from 0 to 9"),
        ("9", "priority must be an integer from 0 to 9"),
        (True, "priority must be an integer from 0 to 9"),
    ],
)
def test_a_bad_priority_is_refused_and_nothing_is_written(
    repo: OutboxRepository, value: object, rule: str
) -> None:
    with pytest.raises(InvalidInput, match=rule):
        repo.enqueue_message("bad-priority", message(priority=value))
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == 0


# --- expiry ----------------------------------------------------------------------------------------
def test_expires_at_takes_the_send_after_formats_and_is_stored_in_utc(repo: OutboxRepository) -> None:
    day = (db_now(repo) + timedelta(days=2)).date().isoformat()
    attempt_id = enqueue(
        repo, "offset", send_after=f"{day}T10:00:00+02:00", expires_at=f"{day}T09:30:00.5-01:00"
    )
    row = repo.get_row(attempt_id)
    assert row.next_attempt_at.isoformat() == f"{day}T08:00:00"
    assert row.expires_at is not None and row.expires_at.isoformat() == f"{day}T10:30:00.500000"


@pytest.mark.parametrize(
    ("members", "rule"),
    [
        ({"expires_at": "DAY 10:00:00"}, "expires_at must be ISO 8601 with an offset"),
        ({"expires_at": "2099-02-30T10:00:00Z"}, "expires_at is not a real time"),
        ({"expires_at": 4102444800}, "expires_at must be a string"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at must be later than send_after"),
        (
            {"send_after": "DAYT10:00:00Z", "expires_at": "DAYT10:00:00Z"},
            "expires_at must be later than send_after",
        ),
        (
            {"send_after": "DAYT10:00:00Z", "expires_at": "DAYT11:00:00+02:00"},
            "expires_at must be later than send_after",
        ),
    ],
)
def test_a_bad_expiry_is_refused_and_nothing_is_written(
    repo: OutboxRepository, members: dict[str, object], rule: str
) -> None:
    day = (db_now(repo) + timedelta(days=2)).date().isoformat()
    members = {k: v.replace("DAY", day) if isinstance(v, str) else v for k, v in members.items()}
    with pytest.raises(InvalidInput, match=rule):
        repo.enqueue_message("bad-expiry", message(**members))
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0


def expiring(repo: OutboxRepository, notification_id: str, seconds: int, **members: object) -> int:
    when = db_now(repo) + timedelta(seconds=seconds)
    return enqueue(repo, notification_id, expires_at=when.isoformat() + "Z", **members)


def assert_expired(repo: OutboxRepository, attempt_id: int, actor: str) -> None:
    row = repo.get_row(attempt_id)
    # No attempt is counted for the expiry itself: only one SES answered (a retry's) stays counted.
    assert (row.status, row.last_error_code) == (Status.FAILED, "Expired")
    assert row.attempt_count == (1 if row.last_attempt_at else 0)
    assert row.claim_token is None
    last = events(repo, attempt_id)[-1]
    assert (
        last[1:3] == ("Failed", actor) and last[3] is not None and last[3].startswith("expired: not sent by")
    )


def test_a_row_past_its_expiry_is_failed_at_claim_time_and_never_claimed(repo: OutboxRepository) -> None:
    stale = expiring(repo, "stale", 30, priority=9)
    fresh = expiring(repo, "fresh", 3600)
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    claimed = repo.claim_batch_bounded(token(), "worker-a", 60, 10, 1_000_000)
    set_clock(repo, None)
    assert [r.id for r in claimed] == [fresh]
    assert_expired(repo, stale, "expiry-sweep")


def test_the_batch_claim_fails_an_expired_row_it_locked(repo: OutboxRepository) -> None:
    """The claim's own check, behind its sweep: the sweep takes as many expired rows as the claim's
    limit, earliest expiry first; an expired row the claim then locks is failed there, not claimed."""
    swept = expiring(repo, "swept", 30, priority=0)
    locked = expiring(repo, "locked", 40, priority=9)
    set_clock(repo, db_now(repo) + timedelta(seconds=41))
    assert repo.claim_batch_bounded(token(), "worker-a", 60, 1, 1_000_000) == []
    set_clock(repo, None)
    assert_expired(repo, swept, "expiry-sweep")
    assert_expired(repo, locked, "worker-a")


def test_try_claim_fails_an_expired_row_instead_of_claiming_it(repo: OutboxRepository) -> None:
    stale = expiring(repo, "stale-try", 30)
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.try_claim(stale, token(), "worker-b", 60) == 0
    set_clock(repo, None)
    assert_expired(repo, stale, "worker-b")


def test_a_reservation_past_its_expiry_is_not_started_and_ends_expired(repo: OutboxRepository) -> None:
    attempt_id = expiring(repo, "reserved", 30)
    t = token()
    (row,) = repo.reserve_batch(t, "worker-a", 120, 1, 1_000_000)
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.start_send(row.id, t) == 0, "never start a send after the expiry"
    set_clock(repo, None)
    assert_expired(repo, attempt_id, "start-check")
    assert repo.release_claim(attempt_id, t, 0) == 0, "the worker's give-back finds nothing to change"


def test_finalize_and_start_lands_the_finalize_and_ends_an_expired_next_reservation(
    repo: OutboxRepository,
) -> None:
    """The start mark inside email_finalize_and_start: the next reservation past its expiry is not
    started but ends Failed ('Expired') in the same call, and the finalize before it still lands."""
    sent = expiring(repo, "sent-first", 3600, priority=9)
    later = expiring(repo, "expires-next", 30, priority=0)
    t = token()
    first, second = repo.reserve_batch(t, "worker-a", 120, 2, 1_000_000)
    assert (first.id, second.id) == (sent, later)
    assert repo.start_send(sent, t) == 1
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    result, started = repo.finalize_and_start(FinalizeItem(sent, t, "Sent", "m-1"), later, t)
    set_clock(repo, None)
    assert (result.affected, result.status, started) == (1, Status.SENT, False), "never start it"
    assert_expired(repo, later, "start-check")


def test_a_send_started_before_the_expiry_is_untouched(repo: OutboxRepository) -> None:
    attempt_id = expiring(repo, "started", 30)
    t = token()
    repo.reserve_batch(t, "worker-a", 120, 1, 1_000_000)
    assert repo.start_send(attempt_id, t) == 1
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.sweep(100) == (0, 0)
    set_clock(repo, None)
    assert repo.finalize_sent(attempt_id, t, "ses-1") == 1
    assert repo.get_row(attempt_id).status is Status.SENT


def test_the_sweep_expires_rows_no_claim_reaches(repo: OutboxRepository) -> None:
    """Due later than their expiry (a send_after, a retry's backoff), or nobody claiming: the sweep."""
    later = expiring(
        repo, "due-later", 60, send_after=(db_now(repo) + timedelta(seconds=30)).isoformat() + "Z"
    )
    retrying = expiring(repo, "retrying", 60)
    t = token()
    repo.claim_batch_bounded(t, "worker-a", 60, 10, 1_000_000)
    assert (
        repo.finalize_failure(
            retrying,
            t,
            permanent=False,
            error_code="Throttling",
            error_message="slow",
            retry_delay_seconds=600,
        ).status
        is Status.RETRYING
    )
    reserved = expiring(repo, "reserved-idle", 60)
    repo.reserve_batch(token(), "worker-a", 600, 1, 1_000_000)
    untouched = expiring(
        repo, "not-yet", 3600, send_after=(db_now(repo) + timedelta(seconds=30)).isoformat() + "Z"
    )
    set_clock(repo, db_now(repo) + timedelta(seconds=61))
    assert repo.sweep(100) == (0, 3)
    set_clock(repo, None)
    for attempt_id in (later, retrying, reserved):
        assert_expired(repo, attempt_id, "expiry-sweep")
    assert repo.get_row(untouched).status is Status.PENDING
    assert repo.get_row(retrying).attempt_count == 1, "the attempt SES answered still counts"


# --- cancel ----------------------------------------------------------------------------------------
def test_cancel_ends_a_pending_or_retrying_row_failed_audited_with_who_and_why(
    repo: OutboxRepository,
) -> None:
    pending, retrying = enqueue_many(repo, 2, prefix="c")
    t = token()
    assert repo.try_claim(retrying, t, "w", 60) == 1
    assert (
        repo.finalize_failure(
            retrying,
            t,
            permanent=False,
            error_code="Throttling",
            error_message="slow",
            retry_delay_seconds=600,
        ).status
        is Status.RETRYING
    )
    for attempt_id, notification_id, source in (
        (pending, "c-0", Status.PENDING),
        (retrying, "c-1", Status.RETRYING),
    ):
        result = repo.cancel(notification_id, "shop-service", "order 7 cancelled")
        assert (result.affected, result.attempt_id, result.from_status) == (1, attempt_id, source)
        row = repo.get_row(attempt_id)
        assert (row.status, row.last_error_code) == (Status.FAILED, "Cancelled")
        assert events(repo, attempt_id)[-1] == (
            source.value,
            "Failed",
            "shop-service",
            "cancelled: order 7 cancelled",
        )
        assert repo.cancel(notification_id, "shop-service", "again").affected == 0, "terminal now"
    assert repo.claim_batch_bounded(token(), "w", 60, 10, 1_000_000) == []


def test_cancel_of_a_reservation_fences_its_start(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="r")
    t = token()
    repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    result = repo.cancel("r-0", "ops", "customer asked")
    assert (result.affected, result.from_status) == (1, Status.PROCESSING)
    assert repo.start_send(attempt_id, t) == 0, "the worker must not send what was cancelled"
    row = repo.get_row(attempt_id)
    assert (row.status, row.last_error_code, row.claim_token) == (Status.FAILED, "Cancelled", None)
    assert events(repo, attempt_id)[-1][:3] == ("Processing", "Failed", "ops")


def test_cancel_refuses_anything_that_may_have_been_sent(repo: OutboxRepository) -> None:
    started, sent, unknown = enqueue_many(repo, 3, prefix="s")
    t = token()
    repo.reserve_batch(t, "worker-a", 60, 3, 1_000_000)
    for attempt_id in (started, sent, unknown):
        assert repo.start_send(attempt_id, t) == 1
    assert repo.finalize_sent(sent, t, "ses-1") == 1
    assert repo.finalize_unknown(unknown, t, "read timeout") == 1
    claimed = repo.enqueue("s-claimed", "a@example.com", "s", text_body="t").attempt_id
    assert repo.try_claim(claimed, token(), "worker-b", 60) == 1, "claimed as started: may be in flight"
    for notification_id in ("s-0", "s-1", "s-2", "s-claimed"):
        assert repo.cancel(notification_id, "ops", "too late?").affected == 0
    assert repo.cancel("no-such-id", "ops", "?").attempt_id is None
    assert [repo.get_row(i).status for i in (started, sent, unknown, claimed)] == [
        Status.PROCESSING, Status.SENT, Status.UNKNOWN_OUTCOME, Status.PROCESSING,
    ]  # fmt: skip


def test_a_start_that_got_there_first_wins_over_the_cancel(repo: OutboxRepository) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="f")
    t = token()
    repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    assert repo.start_send(attempt_id, t) == 1
    assert repo.cancel("f-0", "ops", "late").affected == 0
    assert repo.finalize_sent(attempt_id, t, "ses-1") == 1


@pytest.mark.parametrize(
    ("arguments", "rule"),
    [
        (("", "ops", "why"), "notification_id must be 1 to 191 characters"),
        (("n", "", "why"), "cancelled_by"),
        (("n", "ops", "   "), "reason"),
        (("n", "ops\u202e", "why"), "cancelled_by"),
    ],
)
def test_cancel_refuses_bad_arguments(
    repo: OutboxRepository, arguments: tuple[str, str, str], rule: str
) -> None:
    with pytest.raises(InvalidInput, match=rule):
        repo.cancel(*arguments)


def test_a_service_cancels_only_its_own_emails_and_operators_cancel_any_by_row_id(
    repo: OutboxRepository, accounts: dict[str, DatabaseDsn]
) -> None:
    """Notification ids are per enqueuing account, so email_cancel reaches only the calling account's
    rows: a service that knows (or guesses) another service's notification id cannot cancel its email.
    Operators cancel any account's email by row id (email_cancel_email), which no service may call."""
    (others,) = enqueue_many(repo, 1, prefix="theirs")
    enqueuer = OutboxRepository.open(accounts["enqueuer"])
    operator = OutboxRepository.open(accounts["operator"])
    worker = OutboxRepository.open(accounts["worker"])
    try:
        (own,) = enqueue_many(enqueuer, 1, prefix="mine")
        refused = enqueuer.cancel("theirs-0", "shop", "not its email")
        assert (refused.affected, refused.attempt_id) == (0, None), "another account's row is not found"
        assert repo.get_row(others).status is Status.PENDING
        with pytest.raises(AccessDenied):
            enqueuer.cancel_email(others, "shop", "by row id")
        assert enqueuer.cancel("mine-0", "shop", "order cancelled").affected == 1
        assert repo.get_row(own).status is Status.FAILED
        with pytest.raises(AccessDenied):
            worker.cancel("theirs-0", "worker", "not its business")
        assert operator.cancel_email(others, "ops", "customer asked").affected == 1
        assert repo.get_row(others).last_error_code == "Cancelled"
    finally:
        for account in (enqueuer, operator, worker):
            account.close()


def test_a_redrive_never_brings_back_a_cancelled_or_expired_email(repo: OutboxRepository) -> None:
    """A bulk redrive after an SES outage must not send what its sender cancelled, or a one-time code
    past its expiry: those were never to go."""
    (cancelled,) = enqueue_many(repo, 1, prefix="gone")
    assert repo.cancel("gone-0", "shop", "order cancelled").affected == 1
    expired = expiring(repo, "otp", 30)
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.sweep(10) == (0, 1)
    set_clock(repo, None)
    for notification_id in ("gone-0", "otp"):
        assert repo.redrive_failed(notification_id, "ops", "after the outage") == 0
    assert [repo.get_row(i).status for i in (cancelled, expired)] == [Status.FAILED, Status.FAILED]


def test_a_service_s_cancel_answers_alike_whether_or_not_the_address_is_suppressed(
    repo: OutboxRepository, accounts: dict[str, DatabaseDsn]
) -> None:
    """A service learns nothing of the suppression list from its enqueue or its cancel (issue 37): an
    email to a suppressed address (failed 'Suppressed' at its enqueue, or at the claim that found the
    address listed since) is cancelled with the same answer, columns and warnings as one to a normal
    address, the cancel is audited, and the email is never sent, not even after the address leaves
    the list and an operator redrives."""
    repo.suppression_add("gone@example.com", "ops", "hard bounce")
    conn = mysql.connector.connect(**accounts["enqueuer"].connect_args(), autocommit=True)

    def answer(sql: str, *args: object) -> tuple[tuple[str, ...], list[tuple[object, ...]], object]:
        cursor = conn.cursor()
        cursor.execute(sql, args)
        columns, rows = tuple(cursor.column_names), cursor.fetchall()
        while cursor.nextset():
            cursor.fetchall()
        cursor.execute("SHOW WARNINGS")
        return columns, rows, cursor.fetchall()

    def enqueue_as_service(notification_id: str, to: str) -> tuple[int, object]:
        columns, rows, warnings = answer(
            "CALL email_enqueue_message(%s, %s)",
            notification_id,
            json.dumps({"to": [to], "subject": "s", "text": "t"}),
        )
        ((affected, attempt_id),) = rows
        return int(attempt_id), (columns, affected, warnings)

    def cancel_as_service(notification_id: str, attempt_id: int) -> object:
        columns, rows, warnings = answer("CALL email_cancel(%s, 'shop', 'order cancelled')", notification_id)
        ((affected, answered_id, from_status),) = rows
        assert answered_id == attempt_id
        return columns, affected, from_status, warnings

    try:
        later, _ = enqueue_as_service("listed-later", "late@example.com")
        repo.suppression_add("late@example.com", "ops", "complained")
        assert repo.claim_batch_bounded(token(), "w", 60, 10, 1_000_000) == []
        assert repo.get_row(later).last_error_code == "Suppressed", "failed at the claim"
        suppressed, suppressed_enqueue = enqueue_as_service("to-suppressed", "gone@example.com")
        normal, normal_enqueue = enqueue_as_service("to-normal", "ann@example.com")
        assert suppressed_enqueue == normal_enqueue == (("affected", "attempt_id"), 1, [])
        assert repo.get_row(suppressed).last_error_code == "Suppressed", "failed at its enqueue"
        assert repo.get_row(normal).status is Status.PENDING

        first = [cancel_as_service(n, i) for n, i in (("to-normal", normal), ("to-suppressed", suppressed))]
        first.append(cancel_as_service("listed-later", later))
        assert (
            first[0] == first[1] == first[2] == (("affected", "attempt_id", "from_status"), 1, "Pending", [])
        )
        again = [cancel_as_service(n, i) for n, i in (("to-normal", normal), ("to-suppressed", suppressed))]
        assert again[0] == again[1] == (("affected", "attempt_id", "from_status"), 0, None, [])
    finally:
        conn.close()

    row = repo.get_row(suppressed)
    assert (row.status, row.last_error_code) == (Status.FAILED, "Cancelled")
    assert row.last_error_message is not None and "suppression list" in row.last_error_message
    assert events(repo, suppressed)[-1] == ("Failed", "Failed", "shop", "cancelled: order cancelled")
    for address in ("gone@example.com", "late@example.com"):
        repo.suppression_remove(address, "ops", "the mailbox works again")
    assert [repo.redrive_email(i, "ops", "after the list changed") for i in (suppressed, later, normal)] == [
        0,
        0,
        0,
    ]
    assert repo.claim_batch_bounded(token(), "w", 60, 10, 1_000_000) == [], "none of them is ever sent"
