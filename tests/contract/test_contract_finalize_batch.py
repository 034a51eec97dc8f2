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


def test_the_previous_releases_outcome_names_still_work_for_one_release(repo: OutboxRepository) -> None:
    """sent, failed, retry, unknown, released and started are deprecated aliases of the status names
    (docs/procedures.md, "Versions"): a worker of the previous release keeps finalizing during a
    rolling deploy, in email_finalize_batch and in email_finalize_and_start."""
    rows = claimed(repo, 5, max_attempts=3)
    old = ["sent", "failed", "retry", "unknown", "released"]
    items = [
        FinalizeItem(i, t, name, provider_message_id="m" if name == "sent" else None)
        for (i, t), name in zip(rows, old, strict=True)
    ]
    assert [(r.affected, r.status) for r in repo.finalize_batch(items)] == [
        (1, Status.SENT), (1, Status.FAILED), (1, Status.RETRYING), (1, Status.UNKNOWN_OUTCOME), (1, Status.PENDING),
    ]  # fmt: skip
    (a, ta), tn = claimed(repo, 1)[0], token()
    (nxt,) = enqueue_many(repo, 1, prefix=token())
    assert nxt in [r.id for r in repo.reserve_batch(tn, "worker-a", 60, 10, 1_000_000)]
    assert repo.finalize_batch([FinalizeItem(nxt, tn, "started")])[0].affected == 1
    result, started = repo.finalize_and_start(FinalizeItem(a, ta, "sent", "m-a"), nxt, tn)
    assert (result.affected, result.status, started) == (1, Status.SENT, False), (
        "started already by the alias"
    )


def full_state(repo: OutboxRepository, attempt_id: int) -> tuple[Any, ...]:
    """Every column a finalize writes, but the times, and its audit events."""
    row = scalar(
        repo,
        "SELECT JSON_ARRAY(status, attempt_count, claim_token, lease_expires_at, claimed_from_status,"
        " reserved_at, provider_message_id, sent_at IS NULL, last_error_code, last_error_message,"
        " row_version) FROM email_delivery_attempts WHERE id = %s",
        (attempt_id,),
    )
    events = [(e.from_status, e.to_status, e.actor, e.detail) for e in repo.events(attempt_id)]
    return json.loads(row), events


def session_calls(repo: OutboxRepository) -> int:
    with repo._cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_call_procedure'")
        return int(cursor.fetchall()[0]["Value"])


def test_the_set_path_ends_claims_exactly_as_the_single_procedures(repo: OutboxRepository) -> None:
    """A batch of well-formed finalizes ends in one statement (email_internal_finalize_rows), not one
    per item, and every row and audit event is what the single procedures write: each outcome, the
    attempt that uses up max_attempts, a stale claim, long and non-ASCII messages."""
    long_message = "x" * 7990 + "é" * 10
    odd = 'quote " backslash \\ emoji \U0001f4e7'
    batch = claimed(repo, 6, max_attempts=3) + claimed(repo, 1, max_attempts=1)
    single = claimed(repo, 6, max_attempts=3) + claimed(repo, 1, max_attempts=1)
    specs: list[dict[str, Any]] = [
        {"outcome": "Sent", "provider_message_id": "m-é"},
        {"outcome": "Failed", "error_code": "MessageRejected", "error_message": odd},
        {
            "outcome": "Retrying",
            "error_code": "Throttling",
            "error_message": long_message,
            "delay_seconds": 30,
        },
        {"outcome": "UnknownOutcome", "error_message": "read timeout"},
        {"outcome": "Released", "delay_seconds": 5},
        {"outcome": "Sent", "provider_message_id": "stale"},
        {"outcome": "Retrying", "error_code": "ServiceUnavailable", "error_message": "used up"},
    ]
    stale = token()
    items = [
        FinalizeItem(i, stale if n == 5 else t, **spec)  # the sixth claim is no longer held
        for n, ((i, t), spec) in enumerate(zip(batch, specs, strict=True))
    ]
    before = session_calls(repo)
    results = repo.finalize_batch(items)
    # Com_call_procedure counts the nested CALLs too: a fixed handful for the set, ~14 per item otherwise.
    assert session_calls(repo) - before < 2 * len(items), "the batch was not ended in one set"
    assert [(r.affected, r.status) for r in results] == [
        (1, Status.SENT), (1, Status.FAILED), (1, Status.RETRYING), (1, Status.UNKNOWN_OUTCOME),
        (1, Status.PENDING), (0, None), (1, Status.FAILED),
    ]  # fmt: skip
    for n, ((i, t), spec) in enumerate(zip(single, specs, strict=True)):
        held = stale if n == 5 else t
        outcome = spec["outcome"]
        if outcome == "Sent":
            repo.finalize_sent(i, held, spec["provider_message_id"])
        elif outcome in ("Failed", "Retrying"):
            repo.finalize_failure(
                i, held, permanent=outcome == "Failed", error_code=spec["error_code"],
                error_message=spec["error_message"], retry_delay_seconds=spec.get("delay_seconds", 0),
            )  # fmt: skip
        elif outcome == "UnknownOutcome":
            repo.finalize_unknown(i, held, spec["error_message"])
        else:
            repo.release_claim(i, held, spec["delay_seconds"])
    for (b, _), (s, _) in zip(batch, single, strict=True):
        (got_row, got_events), (want_row, want_events) = full_state(repo, b), full_state(repo, s)
        assert got_row[:2] == want_row[:2] and got_row[4:] == want_row[4:]
        assert (got_row[2] is None) == (want_row[2] is None)  # the claim cleared, or still held
        assert got_events == want_events


def test_a_batch_the_set_path_does_not_take_lands_item_by_item_alike(repo: OutboxRepository) -> None:
    """A deprecated outcome name or a message over 8,000 characters sends the batch down the
    item-by-item path: the same rows, and the message cut to 8,000 characters."""
    (a, ta), (b, tb) = claimed(repo, 2)
    before = session_calls(repo)
    results = repo.finalize_batch(
        [
            FinalizeItem(a, ta, "sent", provider_message_id="m-a"),
            FinalizeItem(b, tb, "UnknownOutcome", error_message="y" * 9000),
        ]
    )
    assert session_calls(repo) - before >= 10, "expected the item-by-item path"
    assert [(r.affected, r.status) for r in results] == [(1, Status.SENT), (1, Status.UNKNOWN_OUTCOME)]
    message = scalar(repo, "SELECT last_error_message FROM email_delivery_attempts WHERE id = %s", (b,))
    assert message == "y" * 8000


def test_start_marks_in_the_set_path_are_fenced_as_email_start_send(repo: OutboxRepository) -> None:
    """What a replica carrying on sends: its slots' finalizes with the start marks of their next rows,
    in one set. Each start is fenced as email_start_send's: another claim's token, a started claim and
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
        before = session_calls(repo)
        results = repo.finalize_batch(
            [FinalizeItem(i, ti, "Sent", provider_message_id=f"m-{i}") for i, ti in sent]
            + [
                FinalizeItem(fresh[0], t, "Started"),
                FinalizeItem(fresh[1], token(), "Started"),  # another claim's token
                FinalizeItem(fresh[2], t, "Started"),  # started already
                FinalizeItem(expiring, t, "Started"),  # past its expires_at
            ]
        )
        calls = session_calls(repo) - before
    finally:
        set_clock(repo, None)
    # item by item this batch makes ~14 nested CALLs an item (84); the set path a fixed handful, plus
    # email_internal_start's own few for each start that did not land
    assert calls < 40, "the set path"
    assert [(r.affected, r.status) for r in results] == [
        (1, Status.SENT), (1, Status.SENT), (1, Status.PROCESSING), (0, None), (0, None), (0, None),
    ]  # fmt: skip
    assert reserved_at(repo, fresh[0]) is None and reserved_at(repo, fresh[1]) is not None
    row = repo.get_row(expiring)
    assert row.status is Status.FAILED and row.last_error_code == "Expired"
    assert row.attempt_count == 0, "never sent: no attempt used"


def reserved_at(repo: OutboxRepository, attempt_id: int) -> object:
    return scalar(repo, "SELECT reserved_at FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
