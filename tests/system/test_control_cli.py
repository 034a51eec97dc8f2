"""`email-outbox` for priority, expiry and cancel against a real server: enqueue --priority and
--expires-at, list and show of the priority, cancel's output and exit codes (0 cancelled, 1 nothing
changed), and `status` counting Expired and Cancelled apart from the failures SES caused."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, token


def run(dsn: DatabaseDsn, *argv: str) -> int:
    return main([argv[0], "--dsn", dsn.url(), *argv[1:]])


def test_enqueue_takes_priority_and_expiry_and_list_shows_and_filters_them(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    expires = (db_now(repo) + timedelta(hours=3)).replace(microsecond=0)
    local = expires.isoformat() + "+02:00"  # two hours east: the same instant minus two hours in UTC
    base = ("--to", "a@example.com", "--subject", "code", "--text", "123456")
    assert (
        run(dsn, "enqueue", "--notification-id", "otp-1", *base, "--priority", "9", "--expires-at", local)
        == 0
    )
    assert run(dsn, "enqueue", "--notification-id", "digest-1", *base) == 0
    assert run(dsn, "enqueue", "--notification-id", "bad", *base, "--priority", "10") == 2
    row = repo.get_row_by_notification_id("otp-1")
    assert (row.priority, row.expires_at) == (9, expires - timedelta(hours=2))
    assert repo.get_row_by_notification_id("digest-1").priority == 5
    capsys.readouterr()

    assert run(dsn, "list", "--status", "Pending", "--priority", "9", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["notification_id"], r["priority"]) for r in listed] == [("otp-1", 9)]
    assert run(dsn, "list", "--status", "Pending") == 0
    assert "prio" in capsys.readouterr().out
    assert run(dsn, "list", "--status", "Pending", "--priority", "0") == 1
    assert run(dsn, "show", "--notification-id", "otp-1") == 0
    out = capsys.readouterr().out
    assert "priority" in out and "expires_at" in out


def test_cancel_prints_what_happened_and_exits_non_zero_when_nothing_changed(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    pending, sent = enqueue_many(repo, 2, prefix="order")
    t = token()
    assert repo.try_claim(sent, t, "w", 60) == 1
    assert repo.finalize_sent(sent, t, "ses-1") == 1
    capsys.readouterr()
    assert run(dsn, "cancel", "order-0", "--by", "ann", "--reason", "order cancelled") == 0
    assert f"cancelled email {pending} (order-0): Pending -> Failed (Cancelled)" in capsys.readouterr().out
    assert run(dsn, "cancel", "order-0", "--by", "ann", "--reason", "again") == 1
    assert "is Failed: it is already terminal" in capsys.readouterr().err
    assert run(dsn, "cancel", "order-1", "--by", "ann", "--reason", "too late") == 1
    assert "is Sent: its send may have started or be done" in capsys.readouterr().err
    assert run(dsn, "cancel", "order-9", "--by", "ann", "--reason", "?") == 1
    assert "no email with notification id order-9" in capsys.readouterr().err
    assert run(dsn, "cancel", "order-0", "--by", "", "--reason", "x") == 2
    event = repo.events(pending)[-1]
    assert (event.actor, event.detail) == ("ann", "cancelled: order cancelled")


def test_status_counts_expired_and_cancelled_apart(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue_many(repo, 2, prefix="c")
    assert repo.cancel("c-0", "ann", "why").affected == 1
    expires = (db_now(repo) + timedelta(seconds=30)).isoformat() + "Z"
    message = {"to": ["a@example.com"], "subject": "s", "text": "t", "expires_at": expires}
    expiring = repo.enqueue_message("e-0", json.dumps(message)).attempt_id
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.sweep(100) == (0, 1)
    set_clock(repo, None)
    assert repo.get_row(expiring).status is Status.FAILED
    capsys.readouterr()
    assert run(dsn, "status") == 0
    assert "Failed unsent, last 24h: Expired 1, Cancelled 1, Suppressed 0" in capsys.readouterr().out
    assert run(dsn, "status", "--json") == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["failed_unsent_24h"] == {"Expired": 1, "Cancelled": 1, "Suppressed": 0}
    assert figures["counts"]["Failed"] == 2
