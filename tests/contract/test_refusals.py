"""Refusals through CALL on a real server: a representative refusal of each errno class carries its
MYSQL_ERRNO (SQLSTATE still 45000, the message still naming the rule) and reaches Python as the class
of that number, a subclass of InvalidInput; nothing is written. The table itself is
tests/unit/test_refusals.py's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mysql.connector
import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository, connect
from email_outbox.errors import (
    REFUSALS,
    ConfigurationSetNotAllowed,
    InvalidAddress,
    InvalidArgument,
    InvalidClaim,
    InvalidHeader,
    InvalidInput,
    InvalidMember,
    MessageTooLarge,
    QuotaExceeded,
    SenderNotAllowed,
    TenantNotAllowed,
    UnsafeText,
    WrongState,
)
from email_outbox.models import Erasure
from tests.support.helpers import scalar


def _message(**members: Any) -> str:
    return json.dumps({"to": ["ann@example.com"], "subject": "s", "text": "t", **members})


# (refusal class, the call, a part of the message that names the rule)
CASES: list[tuple[type[InvalidInput], Callable[[OutboxRepository], object], str]] = [
    (
        InvalidArgument,
        lambda r: r.sweep_stale_leases(0),
        "email_sweep_stale_leases: limit must be 1 to 10000",
    ),
    (
        InvalidMember,
        lambda r: r.enqueue_message("n-member", _message(bcc_list=["b@example.com"])),
        'unknown member "bcc_list"',
    ),
    (InvalidAddress, lambda r: r.enqueue("n-address", "not-an-address", "s", text_body="b"), "to_address"),
    (
        InvalidHeader,
        lambda r: r.enqueue_message("n-header", _message(headers={"Bcc": "x@example.com"})),
        "header Bcc is set by SES or the outbox itself",
    ),
    (
        SenderNotAllowed,
        lambda r: r.enqueue("n-sender", "a@example.com", "s", text_body="b", from_address="x@elsewhere.test"),
        "is not an allowed sender",
    ),
    (
        MessageTooLarge,
        lambda r: r.enqueue_message(
            "n-large",
            json.dumps({"to": ["a@example.com"], "template": {"name": "t", "data": {"x": "y" * 270000}}}),
        ),
        "template.data must be at most 256 KiB",
    ),
    (InvalidClaim, lambda r: r.claim_batch("tok", "worker-1", 0, 10), "lease_seconds must be 1 to 86400"),
    (
        WrongState,
        lambda r: r.redrive_failed("n-erased", "ops", "again"),
        "cannot be redriven: it was erased",
    ),
    (
        UnsafeText,
        lambda r: r.enqueue("n-unsafe", "a@example.com", "line\nbreak", text_body="b"),
        "subject must not contain control characters",
    ),
    (
        ConfigurationSetNotAllowed,
        lambda r: r.enqueue_message("n-set", _message(configuration_set="not-on-the-list")),
        "configuration_set not-on-the-list is not on the list",
    ),
    (
        TenantNotAllowed,
        lambda r: r.enqueue_message("n-tenant", _message(tenant="someone-elses")),
        "tenant someone-elses is not one this account may use",
    ),
    (
        QuotaExceeded,
        lambda r: (
            r.tenant_add("closed", {"accounts": ["*"], "max_waiting_rows": 0}, "ops", "closed to new mail"),
            r.enqueue_message("n-quota", _message(tenant="closed")),
        ),
        "tenant closed has 0 waiting rows, its cap (max_waiting_rows 0)",
    ),
]


def _erased_failed_row(repo: OutboxRepository) -> None:
    attempt_id = repo.enqueue("n-erased", "gone@example.com", "s", text_body="b").attempt_id
    assert attempt_id is not None
    assert repo.erase_address("gone@example.com", "dpo", "request") == Erasure(1, 0, 0, 0)


# What a refusal needs to exist first (a row in the state it refuses).
SETUPS: dict[type[InvalidInput], Callable[[OutboxRepository], None]] = {WrongState: _erased_failed_row}


def test_every_class_has_a_case_here() -> None:
    assert [cls for cls, _, _ in CASES] == list(REFUSALS)


@pytest.mark.parametrize(("cls", "call", "rule"), CASES, ids=[cls.__name__ for cls, _, _ in CASES])
def test_the_refusal_reaches_python_as_the_class_of_its_number(
    repo: OutboxRepository, cls: type[InvalidInput], call: Callable[[OutboxRepository], object], rule: str
) -> None:
    SETUPS.get(cls, lambda _repo: None)(repo)
    rows, events = (
        scalar(repo, f"SELECT COUNT(*) FROM {t}")
        for t in ("email_delivery_attempts", "email_delivery_events")
    )
    with pytest.raises(InvalidInput) as refused:
        call(repo)
    assert type(refused.value) is cls, f"{type(refused.value).__name__}: {refused.value}"
    assert refused.value.errno == cls.errno
    assert rule in str(refused.value)
    cause = refused.value.__cause__
    assert isinstance(cause, mysql.connector.Error), "the driver's error is chained"
    assert (cause.errno, cause.sqlstate) == (cls.errno, "45000")
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == rows, "nothing written"
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == events


def test_the_number_survives_a_callers_transaction_and_its_exit_handler(dsn: DatabaseDsn) -> None:
    """email_enqueue refuses from a shared check two procedures down, through its EXIT HANDLER's
    RESIGNAL, inside the caller's open transaction: the driver still sees 45005, and the caller's
    earlier write stays."""
    conn = connect(dsn)
    conn.autocommit = False
    cursor = conn.cursor()
    try:
        cursor.execute("CALL email_enqueue('kept', 'a@example.com', NULL, 's', 'b', NULL, NULL, NULL)")
        cursor.fetchall()
        while cursor.nextset():  # the CALL's status after its result set
            pass
        with pytest.raises(mysql.connector.Error) as refused:
            cursor.execute(
                "CALL email_enqueue('refused', 'a@example.com', 'x@elsewhere.test', 's', 'b', NULL, NULL, NULL)"
            )
        assert (refused.value.errno, refused.value.sqlstate) == (SenderNotAllowed.errno, "45000")
        assert "email_enqueue: from_address x@elsewhere.test is not an allowed sender" in str(
            refused.value.msg
        )
        conn.commit()
        cursor.execute("SELECT notification_id FROM email_delivery_attempts")
        assert cursor.fetchall() == [("kept",)]
    finally:
        conn.close()
