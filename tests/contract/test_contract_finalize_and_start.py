"""email_finalize_and_start: the finalize of the row just sent and the start of the next reservation in
one call: each the same change as email_finalize_batch's item, each fenced by its own claim, and a
malformed argument refuses both."""

from __future__ import annotations

from typing import Any

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.models import FinalizeItem, Status
from tests.support.helpers import enqueue_many, scalar, token

OUTCOMES = [
    FinalizeItem(0, "", "Sent", provider_message_id="m-0"),
    FinalizeItem(0, "", "Failed", error_code="MessageRejected", error_message="no"),
    FinalizeItem(0, "", "Retrying", error_code="Throttling", error_message="slow", delay_seconds=30),
    FinalizeItem(0, "", "UnknownOutcome", error_message="read timeout"),
    FinalizeItem(0, "", "Released", delay_seconds=5),
]


def sent_and_reserved(repo: OutboxRepository, **kwargs: Any) -> tuple[int, int, str]:
    """A started claim (the row just sent) and a reservation under the same token."""
    first, _ = enqueue_many(repo, 2, prefix=token(), **kwargs)
    t = token()
    assert repo.try_claim(first, t, "worker-a", 60) == 1
    (reserved,) = repo.reserve_batch(t, "worker-a", 60, 1, 1_000_000)
    return first, reserved.id, t


def state(repo: OutboxRepository, attempt_id: int) -> tuple[Any, ...]:
    r = repo.get_row(attempt_id)
    reserved = scalar(repo, "SELECT reserved_at FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
    events = [(e.from_status, e.to_status, e.detail) for e in repo.events(attempt_id)]
    return (r.status, r.attempt_count, r.claim_token is None, r.provider_message_id, r.last_error_code,
            r.last_error_message, reserved is None, events)  # fmt: skip


def like(item: FinalizeItem, attempt_id: int, claim_token: str) -> FinalizeItem:
    return FinalizeItem(attempt_id, claim_token, item.outcome, item.provider_message_id, item.error_code,
                        item.error_message, item.delay_seconds)  # fmt: skip


@pytest.mark.parametrize("outcome", OUTCOMES, ids=[o.outcome for o in OUTCOMES])
def test_it_makes_the_same_two_changes_as_the_batch_of_two(
    repo: OutboxRepository, outcome: FinalizeItem
) -> None:
    a, a_next, ta = sent_and_reserved(repo, max_attempts=3)
    b, b_next, tb = sent_and_reserved(repo, max_attempts=3)
    result, started = repo.finalize_and_start(like(outcome, a, ta), a_next, ta)
    batch = repo.finalize_batch([like(outcome, b, tb), FinalizeItem(b_next, tb, "Started")])
    assert started is True and batch[1].affected == 1
    assert (result.affected, result.status) == (batch[0].affected, batch[0].status) == (1, batch[0].status)
    assert state(repo, a) == state(repo, b)
    assert state(repo, a_next) == state(repo, b_next)
    assert state(repo, a_next)[0] is Status.PROCESSING and state(repo, a_next)[6], "started: may be sent now"


def test_each_change_is_fenced_by_its_own_claim(repo: OutboxRepository) -> None:
    a, a_next, ta = sent_and_reserved(repo)
    result, started = repo.finalize_and_start(FinalizeItem(a, token(), "Sent", "m-1"), a_next, ta)
    assert (result.affected, result.status, started) == (0, None, True), "a stale finalize; the start lands"
    assert repo.get_row(a).status is Status.PROCESSING
    b, b_next, tb = sent_and_reserved(repo)
    assert repo.start_send(b_next, tb) == 1
    result, started = repo.finalize_and_start(FinalizeItem(b, tb, "Sent", "m-2"), b_next, tb)
    assert (result.affected, result.status, started) == (1, Status.SENT, False), (
        "started already: do not send"
    )


BAD = [
    ({"outcome": "SENT"}, "email_finalize_and_start: outcome must be Sent, Failed, Retrying, UnknownOutcome"),
    ({"outcome": None}, "email_finalize_and_start: outcome must be"),
    ({"provider_message_id": None}, "email_finalize_and_start: provider_message_id must be 1 to 191"),
    ({"id": 0}, "email_finalize_and_start: id must be a positive integer"),
    ({"claim_token": ""}, "email_finalize_and_start: claim_token must be 1 to 64"),
    ({"next_id": None}, "email_finalize_and_start: next: id must be a positive integer"),
    ({"next_claim_token": "x" * 65}, "email_finalize_and_start: next: claim_token must be 1 to 64"),
    (
        {"outcome": "Retrying", "delay_seconds": -1},
        "email_finalize_and_start: delay_seconds must be 0 to 604800",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_malformed_argument_refuses_the_call_and_writes_nothing(
    repo: OutboxRepository, change: dict[str, Any], message: str
) -> None:
    a, a_next, t = sent_and_reserved(repo)
    args = {"id": a, "claim_token": t, "outcome": "Sent", "provider_message_id": "m-1", "error_code": None,
            "error_message": None, "delay_seconds": 0, "next_id": a_next, "next_claim_token": t, **change}  # fmt: skip
    before = state(repo, a), state(repo, a_next)
    with pytest.raises(InvalidInput, match=message):
        repo._call("email_finalize_and_start", **args)
    assert (state(repo, a), state(repo, a_next)) == before


def test_inside_the_callers_transaction_it_rolls_back_with_it(repo: OutboxRepository) -> None:
    a, a_next, t = sent_and_reserved(repo)
    repo.connection.start_transaction()
    repo.finalize_and_start(FinalizeItem(a, t, "Sent", "m-1"), a_next, t)
    repo.connection.rollback()
    assert repo.get_row(a).status is Status.PROCESSING
    assert (
        scalar(repo, "SELECT reserved_at FROM email_delivery_attempts WHERE id = %s", (a_next,)) is not None
    )


def test_the_send_path_is_one_call_with_no_nested_call(repo: OutboxRepository) -> None:
    """What a worker calls after each send while sends are slow runs flat (issue 36): the finalize and
    the next start mark land in the one CALL the worker makes, with no procedure called inside it."""
    first, reserved, t = sent_and_reserved(repo)
    with repo._cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_call_procedure'")
        before = int(cursor.fetchall()[0]["Value"])
    result, started = repo.finalize_and_start(
        FinalizeItem(first, t, "Sent", provider_message_id="m"), reserved, t
    )
    with repo._cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_call_procedure'")
        assert int(cursor.fetchall()[0]["Value"]) - before == 1
    assert (result.affected, result.status, started) == (1, Status.SENT, True)
