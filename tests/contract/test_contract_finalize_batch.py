"""email_finalize_batch: several finalizes in one call, each with its own fence and its single
procedure's exact change; a malformed item refuses the whole call and writes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.models import FinalizeItem, Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, scalar, token


def claimed(repo: OutboxRepository, count: int, **kwargs: Any) -> list[tuple[int, str]]:
    out = []
    for attempt_id in enqueue_many(repo, count, prefix=token(), **kwargs):
        t = token()
        assert repo.try_claim(attempt_id, t, "worker-a", 60) == 1
        out.append((attempt_id, t))
    return out


def raw_batch(repo: OutboxRepository, document: str) -> list[tuple[Any, ...]]:
    with repo._cursor() as cursor:
        cursor.execute("CALL email_finalize_batch(%s)", (document,))
        rows = [tuple(r.values()) for r in cursor.fetchall()]
        while cursor.nextset():
            pass
        return rows


def row_state(repo: OutboxRepository, attempt_id: int) -> tuple[Any, ...]:
    r = repo.get_row(attempt_id)
    return (
        r.status,
        r.attempt_count,
        r.claim_token,
        r.provider_message_id,
        r.last_error_code,
        r.next_attempt_at,
    )


def test_each_outcome_makes_its_single_procedures_change(repo: OutboxRepository) -> None:
    """The batch's rows end exactly as twins finalized one by one by the single procedures."""
    batch = claimed(repo, 5, max_attempts=3)
    single = claimed(repo, 5, max_attempts=3)
    items = [
        FinalizeItem(batch[0][0], batch[0][1], "Sent", provider_message_id="m-0"),
        FinalizeItem(batch[1][0], batch[1][1], "Failed", error_code="MessageRejected", error_message="no"),
        FinalizeItem(
            batch[2][0],
            batch[2][1],
            "Retrying",
            error_code="Throttling",
            error_message="slow",
            delay_seconds=0,
        ),
        FinalizeItem(batch[3][0], batch[3][1], "UnknownOutcome", error_message="read timeout"),
        FinalizeItem(batch[4][0], batch[4][1], "Released", delay_seconds=0),
    ]
    results = repo.finalize_batch(items)
    assert [(r.affected, r.status) for r in results] == [
        (1, Status.SENT), (1, Status.FAILED), (1, Status.RETRYING), (1, Status.UNKNOWN_OUTCOME), (1, Status.PENDING),
    ]  # fmt: skip
    (i0, t0), (i1, t1), (i2, t2), (i3, t3), (i4, t4) = single
    assert repo.finalize_sent(i0, t0, "m-0") == 1
    repo.finalize_failure(
        i1, t1, permanent=True, error_code="MessageRejected", error_message="no", retry_delay_seconds=0
    )
    repo.finalize_failure(
        i2, t2, permanent=False, error_code="Throttling", error_message="slow", retry_delay_seconds=0
    )
    assert repo.finalize_unknown(i3, t3, "read timeout") == 1
    assert repo.release_claim(i4, t4, 0) == 1
    for (b, _), (s, _) in zip(batch, single, strict=True):
        got, want = row_state(repo, b), row_state(repo, s)
        assert got[:5] == want[:5]
        assert [(e.from_status, e.to_status) for e in repo.events(b)] == [
            (e.from_status, e.to_status) for e in repo.events(s)
        ]


def test_each_item_keeps_its_own_fence(repo: OutboxRepository) -> None:
    """A stale item is refused (affected 0) and its neighbours still land, in one call."""
    (a, ta), (b, tb), (c, tc) = claimed(repo, 3)
    results = repo.finalize_batch(
        [
            FinalizeItem(a, ta, "Sent", provider_message_id="m-a"),
            FinalizeItem(b, token(), "Sent", provider_message_id="stolen"),
            FinalizeItem(c, tc, "Sent", provider_message_id="m-c"),
        ]
    )
    assert [r.affected for r in results] == [1, 0, 1]
    assert results[1].status is None
    assert repo.get_row(b).status is Status.PROCESSING and repo.get_row(b).claim_token == tb
    again = repo.finalize_batch([FinalizeItem(a, ta, "Sent", provider_message_id="m-a")] * 2)
    assert [r.affected for r in again] == [0, 0], "a repeat finalize is a no-op, inside a batch too"


def test_rows_come_back_in_the_order_given(repo: OutboxRepository) -> None:
    rows = claimed(repo, 6)
    items = [FinalizeItem(i, t, "Sent", provider_message_id=f"m-{i}") for i, t in reversed(rows)]
    rows_back = raw_batch(repo, json.dumps([item.as_json() for item in items]))
    assert [r[0] for r in rows_back] == list(range(6))
    assert [r[1] for r in rows_back] == [i for i, _ in reversed(rows)]
    assert all(r[2] == 1 and r[3] == "Sent" for r in rows_back)


def test_text_survives_byte_for_byte(repo: OutboxRepository) -> None:
    ((a, ta),) = claimed(repo, 1)
    message = 'quote " backslash \\ emoji \U0001f4e7 and ünïcode'
    repo.finalize_batch([FinalizeItem(a, ta, "UnknownOutcome", error_message=message)])
    assert (
        scalar(repo, "SELECT last_error_message FROM email_delivery_attempts WHERE id = %s", (a,)) == message
    )


def good(attempt_id: int, claim_token: str) -> dict[str, Any]:
    return {"id": attempt_id, "claim_token": claim_token, "outcome": "Sent", "provider_message_id": "m"}


BAD_ITEMS: list[tuple[Any, str]] = [
    (None, "outcomes must be a JSON array"),
    ("not json", "outcomes must be a JSON array"),
    ('{"id": 1}', "outcomes must be a JSON array"),
    ("[]", "outcomes must be a JSON array"),
    (["x"], r"outcomes\[1\] must be an object"),
    ([{"claim_token": "t", "outcome": "Sent", "provider_message_id": "m"}], r"outcomes\[1\]: id"),
    ([{"id": "7", "claim_token": "t", "outcome": "Sent", "provider_message_id": "m"}], r"outcomes\[1\]: id"),
    ([{"id": 0, "claim_token": "t", "outcome": "Sent", "provider_message_id": "m"}], r"outcomes\[1\]: id"),
    (
        [{"id": 1, "claim_token": "", "outcome": "Sent", "provider_message_id": "m"}],
        r"outcomes\[1\]: claim_token",
    ),
    (
        [{"id": 1, "claim_token": 5, "outcome": "Sent", "provider_message_id": "m"}],
        r"outcomes\[1\]: claim_token must be a string",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "SENT", "provider_message_id": "m"}],
        r"outcomes\[1\]: outcome",
    ),
    ([{"id": 1, "claim_token": "t", "outcome": "resend"}], r"outcomes\[1\]: outcome"),
    ([{"id": 1, "claim_token": "t", "outcome": "Sent"}], r"outcomes\[1\]: provider_message_id"),
    (
        [{"id": 1, "claim_token": "t", "outcome": "Retrying", "delay_seconds": -1}],
        r"outcomes\[1\]: delay_seconds",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "Released", "delay_seconds": 604801}],
        r"outcomes\[1\]: delay_seconds",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "Retrying", "delay_seconds": "5"}],
        r"outcomes\[1\]: delay_seconds",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "Failed", "error_code": "x" * 192}],
        r"outcomes\[1\]: error_code",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "UnknownOutcome", "extra": 1}],
        r"outcomes\[1\] may hold only",
    ),
    ([{"id": 1, "claim_token": "t", "outcome": "UnknownOutcome", "ID": 1}], r"outcomes\[1\] may hold only"),
    (
        '[{"id": 1, "claim_token": "t", "outcome": "UnknownOutcome", "outcome": "Sent"}]',
        r"outcomes\[1\] may hold only",
    ),
    (
        [{"id": 1, "claim_token": "t", "outcome": "Sent", "provider_message_id": "m"}] * 1001,
        "outcomes must be a JSON array of 1 to 1000",
    ),
]


@pytest.mark.parametrize(("document", "message"), BAD_ITEMS)
def test_a_bad_item_refuses_the_whole_call_and_writes_nothing(
    repo: OutboxRepository, document: Any, message: str
) -> None:
    (a, ta), (b, _) = claimed(repo, 2)
    if isinstance(document, list) and len(document) < 1000:
        # A good item before the bad one: it must not land either.
        document = [good(a, ta), *document]
    else:
        message = message.replace(r"outcomes\[1\]", r"outcomes\[0\]")
    before = [row_state(repo, a), row_state(repo, b)], len(repo.events(a))
    text = document if isinstance(document, str) or document is None else json.dumps(document)
    with pytest.raises(InvalidInput, match=f"email_finalize_batch: {message}"):
        raw_batch(repo, text)
    assert ([row_state(repo, a), row_state(repo, b)], len(repo.events(a))) == before


def test_inside_the_callers_transaction_it_rolls_back_with_it(repo: OutboxRepository) -> None:
    ((a, ta),) = claimed(repo, 1)
    conn = repo.connection
    conn.start_transaction()
    repo.finalize_batch([FinalizeItem(a, ta, "Sent", provider_message_id="m")])
    conn.rollback()
    assert repo.get_row(a).status is Status.PROCESSING


def test_the_previous_releases_outcome_names_are_refused(repo: OutboxRepository) -> None:
    """sent, failed, retry, unknown, released and started were deprecated aliases in 0.1.0 and are gone
    in 0.2.0 (docs/procedures.md, "Versions"): each refuses the call, in email_finalize_batch and in
    email_finalize_and_start, and nothing is written."""
    rows = claimed(repo, 2)
    for name in ["sent", "failed", "retry", "unknown", "released", "started"]:
        item = FinalizeItem(rows[0][0], rows[0][1], name, provider_message_id="m" if name == "sent" else None)
        with pytest.raises(InvalidInput, match=r"outcomes\[0\]: outcome must be"):
            repo.finalize_batch([item])
        with pytest.raises(InvalidInput, match="email_finalize_and_start: outcome must be"):
            repo.finalize_and_start(item, rows[1][0], rows[1][1])
    assert repo.get_row(rows[0][0]).status is Status.PROCESSING
    assert [e.to_status for e in repo.events(rows[0][0])] == [Status.PENDING, Status.PROCESSING]


def session_calls(repo: OutboxRepository) -> int:
    with repo._cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_call_procedure'")
        return int(cursor.fetchall()[0]["Value"])


def test_sends_and_start_marks_end_in_one_call_with_no_nested_call(repo: OutboxRepository) -> None:
    """The send path runs flat: a batch of finalizes and start marks is one CALL, however many items."""
    sent = claimed(repo, 3)
    enqueue_many(repo, 2, prefix=token())
    t = token()
    reserved = [r.id for r in repo.reserve_batch(t, "worker-a", 60, 2, 1_000_000)]
    before = session_calls(repo)
    results = repo.finalize_batch(
        [FinalizeItem(i, ti, "Sent", provider_message_id=f"m-{i}") for i, ti in sent]
        + [FinalizeItem(i, t, "Started") for i in reserved]
    )
    assert session_calls(repo) - before == 1
    assert [(r.affected, r.status) for r in results] == [(1, Status.SENT)] * 3 + [(1, Status.PROCESSING)] * 2


def test_an_id_named_twice_lands_item_by_item_in_order(repo: OutboxRepository) -> None:
    """Items that name one row twice end one at a time, in the order given, so the second sees the
    first: a start mark then the same row's finalize both land; a message over 8,000 characters is
    cut to 8,000 as the single procedures cut it."""
    enqueue_many(repo, 1, prefix=token())
    t = token()
    (r,) = repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    results = repo.finalize_batch(
        [
            FinalizeItem(r.id, t, "Started"),
            FinalizeItem(r.id, t, "UnknownOutcome", error_message="y" * 9000),
        ]
    )
    assert [(x.affected, x.status) for x in results] == [(1, Status.PROCESSING), (1, Status.UNKNOWN_OUTCOME)]
    message = scalar(repo, "SELECT last_error_message FROM email_delivery_attempts WHERE id = %s", (r.id,))
    assert message == "y" * 8000


def test_start_marks_in_a_batch_are_fenced_as_email_start_send(repo: OutboxRepository) -> None:
    """What a replica carrying on sends: its slots' finalizes with the start marks of their next rows,
    in one call. Each start is fenced as email_start_send's: another claim's token, a started claim and
    a reservation past its expires_at are not started, and the last ends Failed ('Expired')."""
    sent = claimed(repo, 2)
    enqueue_many(repo, 3, prefix=token())
    soon = (db_now(repo) + timedelta(seconds=2)).isoformat() + "Z"
    message = {"to": ["user@example.com"], "subject": "s", "text": "t", "expires_at": soon}
    expiring = repo.enqueue_message(token(), json.dumps(message)).attempt_id
    t = token()
    reserved = repo.reserve_batch(t, "worker-a", 60, 4, 1_000_000)
    assert len(reserved) == 4 and expiring in [r.id for r in reserved]
    fresh = [r.id for r in reserved if r.id != expiring]
    assert repo.start_send(fresh[2], t) == 1  # started already
    set_clock(repo, db_now(repo) + timedelta(seconds=3))  # past the one row's expires_at
    try:
        results = repo.finalize_batch(
            [FinalizeItem(i, ti, "Sent", provider_message_id=f"m-{i}") for i, ti in sent]
            + [
                FinalizeItem(fresh[0], t, "Started"),
                FinalizeItem(fresh[1], token(), "Started"),  # another claim's token
                FinalizeItem(fresh[2], t, "Started"),  # started already
                FinalizeItem(expiring, t, "Started"),  # past its expires_at
            ]
        )
    finally:
        set_clock(repo, None)
    assert [(r.affected, r.status) for r in results] == [
        (1, Status.SENT), (1, Status.SENT), (1, Status.PROCESSING), (0, None), (0, None), (0, None),
    ]  # fmt: skip
    assert reserved_at(repo, fresh[0]) is None and reserved_at(repo, fresh[1]) is not None
    row = repo.get_row(expiring)
    assert row.status is Status.FAILED and row.last_error_code == "Expired"
    assert row.attempt_count == 0, "never sent: no attempt used"


def reserved_at(repo: OutboxRepository, attempt_id: int) -> object:
    return scalar(repo, "SELECT reserved_at FROM email_delivery_attempts WHERE id = %s", (attempt_id,))


def notification_of(repo: OutboxRepository, attempt_id: int) -> str:
    return str(
        scalar(repo, "SELECT notification_id FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
    )


@pytest.mark.parametrize("twice", [False, True], ids=["ids-once", "an-id-twice"])
def test_every_item_gets_its_row_whatever_became_of_its_claim(repo: OutboxRepository, twice: bool) -> None:
    """One row per item, in order, also when claims were lost between the claim and the finalize
    (cancelled, swept, taken over, the row gone), a start is for a row started already or cancelled,
    outcomes and starts are mixed, and the same batch is sent again after it landed (a retry)."""
    sent, retried, cancelled, swept = claimed(repo, 4)
    enqueue_many(repo, 3, prefix=token())
    t = token()
    fresh, started, cancelled_reservation = (
        r.id for r in repo.reserve_batch(t, "worker-a", 60, 3, 1_000_000)
    )
    assert repo.start_send(started, t) == 1
    for attempt_id in (cancelled[0], cancelled_reservation):
        raw_call(repo, "email_cancel", notification_of(repo, attempt_id), "test", "cancelled mid-send")
    with repo._cursor() as cursor:  # its lease over: the sweep takes it
        cursor.execute(
            "UPDATE email_delivery_attempts SET lease_expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
            " WHERE id = %s",
            (swept[0],),
        )
    repo.sweep_stale_leases(100)
    items = [
        FinalizeItem(sent[0], sent[1], "Sent", provider_message_id="m-1"),
        FinalizeItem(fresh, t, "Started"),
        FinalizeItem(cancelled[0], cancelled[1], "Sent", provider_message_id="m-2"),
        FinalizeItem(retried[0], retried[1], "Retrying", error_code="E", error_message="e", delay_seconds=5),
        FinalizeItem(started, t, "Started"),
        FinalizeItem(swept[0], swept[1], "UnknownOutcome", error_message="x"),
        FinalizeItem(cancelled_reservation, t, "Started"),
        FinalizeItem(9_000_000_000, t, "Started"),  # no such row
        FinalizeItem(9_000_000_001, t, "Released"),
    ]
    if twice:
        items.append(FinalizeItem(sent[0], sent[1], "Failed", error_code="E", error_message="late"))
    first = repo.finalize_batch(items)
    assert [(r.affected, r.status) for r in first] == [
        (1, Status.SENT), (1, Status.PROCESSING), (1, Status.SENT), (1, Status.RETRYING), (0, None), (0, None),
        (0, None), (0, None), (0, None),
    ] + ([(0, None)] if twice else [])  # fmt: skip
    again = repo.finalize_batch(items)
    assert [(r.affected, r.status) for r in again] == [(0, None)] * len(items), "a retry lands nothing"
    with repo._cursor() as cursor:
        cursor.execute("CALL email_finalize_batch(%s)", (json.dumps([i.as_json() for i in items]),))
        assert [(r["seq"], r["id"]) for r in cursor.fetchall()] == [(n, i.id) for n, i in enumerate(items)]
        while cursor.nextset():
            pass


def raw_call(repo: OutboxRepository, procedure: str, *args: Any) -> None:
    with repo._cursor() as cursor:
        cursor.execute(f"CALL {procedure}({', '.join(['%s'] * len(args))})", args)
        while cursor.nextset():
            pass
