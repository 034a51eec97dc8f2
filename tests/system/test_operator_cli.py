"""The operator CLI against a real server: every command, its output, and its exit codes (0 done,
1 nothing matched or refused, 2 usage or input error; one line on error, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import enqueue_many, token


def run(dsn: DatabaseDsn, *argv: str) -> int:
    return main([argv[0], "--dsn", dsn.url(), *argv[1:]])


def unknown_row(repo: OutboxRepository, worker: str = "worker-a") -> int:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(attempt_id, t, worker, 60) == 1
    assert repo.finalize_unknown(attempt_id, t, "read timeout after the request was sent") == 1
    return attempt_id


def sent_row(repo: OutboxRepository, message_id: str = "ses-1") -> int:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token())
    t = token()
    assert repo.try_claim(attempt_id, t, "worker-b", 60) == 1
    assert repo.finalize_sent(attempt_id, t, message_id) == 1
    return attempt_id


def test_status_counts_overdue_leases_and_unknown(
    dsn: DatabaseDsn, repo: OutboxRepository, open_repo: object, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue_many(repo, 3, prefix="p")
    sent_row(repo)
    unknown_row(repo)
    # A claim made an hour ago (on this session's clock) with a 60 s lease: overdue by real time.
    stale = open_repo()  # type: ignore[operator]
    set_clock(stale, db_now(stale) - timedelta(hours=1))
    (late,) = enqueue_many(stale, 1, prefix="late")
    assert stale.try_claim(late, token(), "gone-worker", 60) == 1

    assert run(dsn, "status") == 0
    out = capsys.readouterr().out
    assert "Processing past lease:   1" in out
    assert "UnknownOutcome:          1" in out
    assert "oldest due row waiting:" in out and "nothing due" not in out

    assert run(dsn, "status", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {
        "Pending": 3,
        "Retrying": 0,
        "Processing": 1,
        "Sent": 1,
        "Failed": 0,
        "UnknownOutcome": 1,
    }
    assert data["processing_past_lease"] == 1 and data["unknown_outcome"] == 1
    assert data["oldest_due_age_seconds"] >= 0


def test_list_filters_by_status_and_limit(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [unknown_row(repo) for _ in range(3)]
    sent_row(repo)
    assert run(dsn, "list", "--status", "unknownoutcome", "--limit", "2", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ids[:2]
    assert rows[0]["claimed_by"] == "worker-a" and rows[0]["last_error_code"] == "AmbiguousOutcome"

    assert run(dsn, "list", "--status", "UnknownOutcome", "--since", "1h") == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:6] == ["id", "notification_id", "to", "tenant", "prio", "attempts"]
    assert len(table.splitlines()) == 4

    assert run(dsn, "list", "--status", "Failed") == 1, "nothing matched"
    assert "no Failed rows" in capsys.readouterr().err
    assert run(dsn, "list", "--status", "Lost") == 2


def test_show_has_the_row_and_its_whole_history(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    attempt_id = unknown_row(repo, worker="replica-7")
    assert repo.resolve_unknown_outcome(attempt_id, "Sent", "alice", "found in SES events", "ses-42") == 1
    assert run(dsn, "show", str(attempt_id), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["row"]["status"] == "Sent" and data["row"]["provider_message_id"] == "ses-42"
    transitions = [(e["from_status"], e["to_status"], e["actor"]) for e in data["events"]]
    assert transitions[0][:2] == (None, "Pending") and transitions[0][2].startswith(dsn.user + "@")
    assert transitions[1:] == [
        ("Pending", "Processing", "replica-7"),
        ("Processing", "UnknownOutcome", "replica-7"),
        ("UnknownOutcome", "Sent", "alice"),
    ]
    assert "found in SES events" in data["events"][-1]["detail"]

    notification_id = data["row"]["notification_id"]
    assert run(dsn, "show", "--notification-id", notification_id) == 0
    out = capsys.readouterr().out
    assert "provider_message_id" in out and "ses-42" in out
    assert "UnknownOutcome -> Sent" in out and "alice" in out and "history (4 events)" in out

    assert run(dsn, "show", "999999") == 1
    assert capsys.readouterr().err.strip() == "email-outbox: no email with id 999999"


def test_requeue_one_warns_and_refuses_what_is_not_unknown(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    attempt_id = unknown_row(repo)
    assert run(dsn, "requeue", str(attempt_id), "--by", "bob", "--reason", "not in SES logs") == 0
    captured = capsys.readouterr()
    assert "requeued email" in captured.out
    assert "may reach the recipient twice" in captured.err
    row = repo.get_row(attempt_id)
    assert row.status is Status.PENDING
    event = repo.events(attempt_id)[-1]
    assert event.actor == "bob" and "not in SES logs" in (event.detail or "")

    assert run(dsn, "requeue", str(attempt_id), "--by", "bob", "--reason", "again") == 1
    assert "is Pending, not UnknownOutcome" in capsys.readouterr().err


def test_requeue_refuses_without_a_reason(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    attempt_id = unknown_row(repo)
    with pytest.raises(SystemExit) as exit_info:
        run(dsn, "requeue", str(attempt_id), "--by", "bob")
    assert exit_info.value.code == 2
    assert run(dsn, "requeue", str(attempt_id), "--by", "bob", "--reason", "   ") == 2
    assert "reason must be" in capsys.readouterr().err
    assert repo.get_row(attempt_id).status is Status.UNKNOWN_OUTCOME, "nothing was written"


def test_requeue_all_unknown_needs_confirmation(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [unknown_row(repo) for _ in range(3)]
    args = ["requeue", "--all-unknown", "--by", "carol", "--reason", "SES outage, none delivered"]
    # Nothing is that old yet.
    assert run(dsn, *args, "--older-than", "1d", "--yes") == 1
    # No terminal to confirm on, no --yes: refused, nothing changed.
    assert run(dsn, *args, "--older-than", "0s") == 1
    assert "pass --yes" in capsys.readouterr().err
    assert all(repo.get_row(i).status is Status.UNKNOWN_OUTCOME for i in ids)
    assert run(dsn, *args, "--older-than", "0s", "--yes") == 0
    assert "requeued 3" in capsys.readouterr().out
    assert all(repo.get_row(i).status is Status.PENDING for i in ids)


def test_resolve_records_the_verdict(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = unknown_row(repo), unknown_row(repo)
    assert run(dsn, "resolve", str(a), "--outcome", "Sent", "--by", "dan", "--reason", "SES delivery event",
               "--message-id", "0100-abc") == 0  # fmt: skip
    assert run(dsn, "resolve", str(b), "--outcome", "Failed", "--by", "dan", "--reason", "bounced") == 0
    assert repo.get_row(a).status is Status.SENT and repo.get_row(a).provider_message_id == "0100-abc"
    assert repo.get_row(b).status is Status.FAILED
    assert run(dsn, "resolve", str(a), "--outcome", "Failed", "--by", "dan", "--reason", "x") == 1
    assert "is Sent, not UnknownOutcome" in capsys.readouterr().err


def test_enqueue_from_flags_and_from_json(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "body.html"
    body.write_text("<p>Grüße 🎉</p>", encoding="utf-8")
    in_200_days = (datetime.now(UTC) + timedelta(days=200)).strftime("%Y-%m-%dT12:00:00Z")
    flags = ["enqueue", "--notification-id", "adhoc-1", "--to", "ann@example.com", "--subject", "Hi"]
    assert run(dsn, *flags, "--html-file", str(body)) == 0
    assert run(dsn, *flags, "--text", "again") == 1, "a duplicate notification id enqueues nothing"
    assert "duplicate of id" in capsys.readouterr().out

    batch = tmp_path / "batch.json"
    batch.write_text(
        json.dumps(
            [
                {"notification_id": "adhoc-2", "to": "bo@example.com", "subject": "A", "text": "a"},
                {"notification_id": "adhoc-3", "to": "cy@example.com", "subject": "B", "text": "b",
                 "max_attempts": 2, "send_after": in_200_days},
            ]
        )
    )  # fmt: skip
    assert run(dsn, "enqueue", "--json", str(batch)) == 0
    row = repo.get_row_by_notification_id("adhoc-3")
    assert row.max_attempts == 2 and row.next_attempt_at.date().isoformat() == in_200_days[:10]
    assert repo.get_row_by_notification_id("adhoc-1").status is Status.PENDING

    assert run(dsn, "enqueue", "--notification-id", "bad", "--to", "no-at-sign", "--subject", "x",
               "--text", "x") == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "to_address" in err[0]
    assert run(dsn, "enqueue", "--to", "x@example.com") == 2


def test_purge_bodies_in_batches(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(5):
        sent_row(repo)
    assert run(dsn, "purge-bodies", "--older-than-days", "1") == 1, "nothing that old"
    # Purging is measured on the database clock; age the rows instead of waiting a day.
    conn = repo.connection.cursor()
    conn.execute("UPDATE email_delivery_attempts SET updated_at = updated_at - INTERVAL 3 DAY")
    conn.close()
    assert run(dsn, "purge-bodies", "--older-than-days", "1", "--batch", "2") == 0
    assert "cleared the bodies of 5" in capsys.readouterr().out


def test_errors_are_one_line_without_traceback_unless_debug(dsn: DatabaseDsn) -> None:
    cmd = [sys.executable, "-m", "email_outbox.cli"]
    plain = subprocess.run([*cmd, "show", "424242", "--dsn", dsn.url()], capture_output=True, text=True)
    assert plain.returncode == 1
    assert plain.stderr.strip() == "email-outbox: no email with id 424242"
    debug = subprocess.run(
        [*cmd, "--debug", "show", "424242", "--dsn", dsn.url()], capture_output=True, text=True
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "NotFound" in debug.stderr
    no_dsn = subprocess.run([*cmd, "status"], capture_output=True, text=True, env={"PATH": "/usr/bin"})
    assert no_dsn.returncode == 2 and "EMAIL_OUTBOX_DSN" in no_dsn.stderr
