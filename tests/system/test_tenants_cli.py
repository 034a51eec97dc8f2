"""`email-outbox tenants` against a real server: add, set, list, pause, resume, remove, their output
and exit codes (0 done, 1 nothing matched, 2 a refusal), and `enqueue --tenant`, `list --tenant`."""

from __future__ import annotations

import json

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository


def tenants(dsn: DatabaseDsn, action: str, *argv: str) -> int:
    return main(["tenants", action, "--dsn", dsn.url(), *argv])


def test_operators_manage_tenants_from_the_command_line(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    by = ("--by", "alice", "--reason", "the newsletter")
    assert tenants(dsn, "add", "news", "--weight", "2", "--send-rate", "5", "--account", "*", *by) == 0
    assert tenants(dsn, "add", "news", *by) == 1
    assert tenants(dsn, "set", "news", "--send-rate", "none", "--daily-quota", "500", *by) == 0
    assert tenants(dsn, "set", "news", "--weight", "many", *by) == 2
    assert "--weight must be an integer or none" in capsys.readouterr().err
    assert tenants(dsn, "pause", "news", *by) == 0
    capsys.readouterr()
    assert tenants(dsn, "list", "--json") == 0
    (news,) = [t for t in json.loads(capsys.readouterr().out) if t["name"] == "news"]
    assert (news["weight"], news["send_rate"], news["daily_quota"], news["paused_reason"]) == (
        2,
        None,
        500,
        "operator",
    )
    assert tenants(dsn, "list") == 0
    listing = capsys.readouterr().out
    assert "news" in listing and "paused (operator)" in listing
    assert tenants(dsn, "resume", "news", *by) == 0
    assert "resumed, lifted paused (operator): tenant news" in capsys.readouterr().out
    assert tenants(dsn, "resume", "news", *by) == 1

    common = ["--dsn", dsn.url(), "--to", "a@example.com", "--subject", "s", "--text", "t"]
    assert main(["enqueue", "--notification-id", "n1", "--tenant", "news", *common]) == 0
    assert main(["enqueue", "--notification-id", "n2", *common]) == 0
    capsys.readouterr()
    assert main(["list", "--status", "Pending", "--tenant", "news", "--dsn", dsn.url(), "--json"]) == 0
    assert [r["notification_id"] for r in json.loads(capsys.readouterr().out)] == ["n1"]
    assert tenants(dsn, "remove", "news", *by) == 2, "it has a waiting row"
    assert "still has waiting rows" in capsys.readouterr().err
