"""`email-outbox retention` while two real worker processes claim and send through the local SES
endpoint: old history of every status goes or stays as it should, with nothing left pointing at a
deleted row, and every live email is sent exactly once meanwhile. `email-outbox erase` afterwards:
its exit codes and its one-line output."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.conftest import set_clock
from tests.support.helpers import scalar
from tests.support.history import claim, days_ago, make_history, orphans, rows
from tests.support.worker_harness import account, counts, drained, spawn_worker, wait_until

OLD_SENT = 60
LIVE = 300


def test_retention_while_two_workers_send(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forty = days_ago(repo, 40)
    histories = [make_history(repo, forty, f"old{i}") for i in range(3)]
    set_clock(repo, forty)
    for i in range(OLD_SENT):
        attempt_id = repo.enqueue(f"bulk-{i}", f"bulk{i}@example.com", "old", text_body="x").attempt_id
        assert (
            attempt_id is not None and repo.finalize_sent(attempt_id, claim(repo, attempt_id), f"m-{i}") == 1
        )
    set_clock(repo, None)
    old_terminal = {i for h in histories for i in h.terminal()}
    for i in range(LIVE):
        repo.enqueue(f"live-{i}", f"live{i}@example.com", f"live {i}", text_body="hello")

    with SesEndpoint() as endpoint:
        endpoint.set_faults(FaultRule("latency", seconds=0.02))
        workers = [
            spawn_worker(dsn, endpoint.url, tmp_path, f"w{i}", concurrency=2, batch_size=2) for i in range(2)
        ]
        try:
            wait_until(lambda: counts(repo)[Status.SENT] >= 20, 60, "the workers to be sending")
            sent_before = counts(repo)[Status.SENT]
            codes: list[int] = []
            argv = [
                "retention",
                "--dsn",
                dsn.url(),
                "--older-than-days",
                "30",
                "--batch-size",
                "10",
                "--by",
                "system",
            ]
            run = threading.Thread(target=lambda: codes.append(main(argv)))
            run.start()
            run.join(timeout=120)
            sent_during = counts(repo)[Status.SENT]
            assert codes == [0]
            wait_until(lambda: drained(repo), 180, "the outbox to drain")
        finally:
            exits = [w.terminate() for w in workers]
        assert exits == [0, 0]
        result = account(repo, endpoint, int(scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts")))

    out = capsys.readouterr().out
    assert f"deleted {OLD_SENT + len(old_terminal)} emails" in out
    assert sent_during > sent_before or counts(repo)[Status.SENT] > sent_during, "workers sent during the run"
    live = {
        r[0] for r in rows(repo, "SELECT notification_id FROM email_delivery_attempts WHERE status = 'Sent'")
    }
    assert {f"live-{i}" for i in range(LIVE)} <= live, "every live email sent"
    assert result.duplicates == 0
    remaining = {r[0] for r in rows(repo, "SELECT id FROM email_delivery_attempts")}
    assert remaining.isdisjoint(old_terminal)
    assert all(h.unknown in remaining for h in histories), "UnknownOutcome rows stay"
    assert orphans(repo) == {t: 0 for t in orphans(repo)}
    ((deleted, batches),) = rows(repo, "SELECT deleted_rows, batches FROM email_retention_runs")
    assert deleted == OLD_SENT + len(old_terminal) and batches >= (OLD_SENT + len(old_terminal)) // 10
    # Retried by its client after the delete: still a duplicate, nothing sent.
    assert main(["enqueue", "--dsn", dsn.url(), "--notification-id", "bulk-0", "--to", "bulk0@example.com",
                 "--subject", "old", "--text", "x"]) == 1  # fmt: skip
    assert "deleted by retention" in capsys.readouterr().out


def test_erase_cli_says_what_it_did_and_refuses_bad_input_in_one_line(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.enqueue("e-1", "ann@example.com", "hello", text_body="x")
    argv = ["erase", "--dsn", dsn.url(), "--address", "ANN@example.com", "--by", "dpo"]
    assert main([*argv, "--reason", "request 7"]) == 0
    assert "erased 1 emails" in capsys.readouterr().out
    assert main([*argv, "--reason", "for ann@example.com"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must not contain the address" in err[0]
