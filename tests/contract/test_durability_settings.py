"""`migrate`, `status` and the worker name a server setting that lets a crash lose a committed
transition (docs/operations.md, "Durability settings"), against a real server whose setting changes."""

from __future__ import annotations

import json
import logging

import pytest

from email_outbox.cli.main import main
from email_outbox.db.repository import OutboxRepository
from email_outbox.worker.startup import warn_durability
from tests.support.harness import TestServer

WARNING = "durability setting may lose committed transitions"


def test_migrate_status_and_worker_name_a_risky_flush_setting_and_stay_quiet_at_1(
    killable_server: TestServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    dsn = killable_server.create_database("outbox_durability")
    killable_server.set_global("innodb_flush_log_at_trx_commit", 0)
    assert main(["migrate", "--dsn", dsn.url()]) == 0
    warned = [line for line in capsys.readouterr().out.splitlines() if WARNING in line]
    assert len(warned) == 1 and "innodb_flush_log_at_trx_commit=0" in warned[0]
    assert "crash of the server process" in warned[0]

    assert main(["status", "--dsn", dsn.url(), "--json"]) == 0
    risks = json.loads(capsys.readouterr().out)["durability_risks"]
    assert [(r["setting"], r["value"]) for r in risks] == [("innodb_flush_log_at_trx_commit", "0")]

    repo = OutboxRepository.open(dsn)
    try:
        with caplog.at_level(logging.WARNING, logger="email_outbox.worker"):
            warn_durability(repo.connection)
        assert [r.getMessage() for r in caplog.records] == [WARNING]
        assert "innodb_flush_log_at_trx_commit=0" in caplog.records[0].risks  # type: ignore[attr-defined]
        caplog.clear()

        killable_server.set_global("innodb_flush_log_at_trx_commit", 1)
        with caplog.at_level(logging.WARNING, logger="email_outbox.worker"):
            warn_durability(repo.connection)
        assert caplog.records == []
    finally:
        repo.close()
    assert main(["migrate", "--dsn", dsn.url()]) == 0
    assert WARNING not in capsys.readouterr().out
    assert main(["status", "--dsn", dsn.url()]) == 0
    assert "durability:              no setting known to lose commits" in capsys.readouterr().out
