"""`email-outbox redrive` and the provider line of `email-outbox status`, against a real server."""

from __future__ import annotations

import json

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.contract.test_contract_outage import failed_row
from tests.support.helpers import enqueue_many, token


def run(dsn: DatabaseDsn, *argv: str) -> int:
    return main([argv[0], "--dsn", dsn.url(), *argv[1:]])


def test_status_shows_the_provider_breaker(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(dsn, "status") == 0
    assert "provider state:          up" in capsys.readouterr().out
    repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 60)
    assert run(dsn, "status") == 0
    out = capsys.readouterr().out
    assert "provider state:          down since " in out and "last error ServiceUnavailable" in out
    assert run(dsn, "status", "--json") == 0
    breaker = json.loads(capsys.readouterr().out)["provider_breaker"]
    assert breaker["state"] == "open" and breaker["changed_by"] == "worker-a"


def test_redrive_one_email_and_the_refusals(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    nid = repo.get_row(failed_row(repo)).notification_id
    assert run(dsn, "redrive", nid, "--by", "alice", "--reason", "SES outage") == 0
    assert "Failed -> Pending, attempts reset to 0" in capsys.readouterr().out
    assert repo.get_row_by_notification_id(nid).status is Status.PENDING
    assert run(dsn, "redrive", nid, "--by", "alice", "--reason", "again") == 1
    assert "it is Pending, not Failed" in capsys.readouterr().err
    assert run(dsn, "redrive", "no-such", "--by", "alice", "--reason", "x") == 1
    assert "no email with notification id" in capsys.readouterr().err
    assert run(dsn, "redrive", nid, "--dry-run", "--by", "alice", "--reason", "x") == 2
    assert run(dsn, "redrive", "--by", "alice", "--reason", "x") == 2


def test_bulk_redrive_dry_run_then_for_real(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [failed_row(repo) for _ in range(3)]
    other = failed_row(repo, code="MessageRejected")
    enqueue_many(repo, 2, prefix=token())
    common = (
        "--failed-since",
        "1h",
        "--error-code",
        "ServiceUnavailable",
        "--by",
        "alice",
        "--reason",
        "outage",
    )
    assert run(dsn, "redrive", *common, "--dry-run", "--batch", "2") == 0
    assert "would redrive 3 Failed emails" in capsys.readouterr().out
    assert all(repo.get_row(i).status is Status.FAILED for i in ids)
    assert run(dsn, "redrive", *common, "--batch", "2") == 0
    assert "redrove 3 Failed emails" in capsys.readouterr().out
    assert all(repo.get_row(i).status is Status.PENDING and repo.get_row(i).attempt_count == 0 for i in ids)
    assert repo.get_row(other).status is Status.FAILED
    assert run(dsn, "redrive", *common) == 1, "nothing left to redrive"
