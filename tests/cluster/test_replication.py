"""A primary with the binary log and a replica fed by it: after real worker traffic the
replica holds the same rows and history, and the operator's read commands work against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import find_server_binary
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.servers import ReplicatedPair, managed_database, query, start_pair
from tests.support.worker_harness import account, drained, spawn_worker, wait_until

pytestmark = pytest.mark.skipif(find_server_binary() is None, reason="no mariadbd/mysqld on PATH")

OPERATOR_PASSWORD = "Op-pass-for-tests-1"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ReplicatedPair]:
    replicated = start_pair(tmp_path / "servers")
    yield replicated
    replicated.stop()


def _table(server_pair: ReplicatedPair, which: str, table: str) -> list[dict[str, object]]:
    server = server_pair.primary if which == "primary" else server_pair.replica
    return query(server, f"SELECT * FROM outbox.{table} ORDER BY id")


def test_replica_matches_the_primary_and_serves_the_operators_reads(
    pair: ReplicatedPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = managed_database(pair.primary)
    migrate_for_local_use(dsn)
    monkeypatch.setenv("EMAIL_OUTBOX_OPERATOR_PW", OPERATOR_PASSWORD)
    # The DBA's account creates the operator's, on the primary; both reach the replica by replication.
    dba = pair.primary.dsn("outbox")
    assert main(["grant", "operator", "ops@%", "--dsn", dba, "--create", "--password-env",
                 "EMAIL_OUTBOX_OPERATOR_PW"]) == 0  # fmt: skip
    repo = OutboxRepository.open(dsn)
    for i in range(20):
        repo.enqueue(f"ok-{i}", f"ann{i}@example.com", f"Hello 🎉 {i}", text_body="t")
    for i in range(4):
        repo.enqueue(f"rej-{i}", f"reject-{i}@example.com", "s", text_body="t")
    for i in range(4):
        repo.enqueue(f"retry-{i}", f"retry-{i}@example.com", "s", text_body="t")
    with SesEndpoint() as endpoint:
        endpoint.set_faults(
            FaultRule("reject", match="reject-"), FaultRule("error", status=503, code="ServiceUnavailable",
                                                              remaining=4, match="retry-")
        )  # fmt: skip
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "replicated", retry_base_seconds=0.2)
        try:
            wait_until(lambda: drained(repo), 90, "the outbox to drain")
        finally:
            assert worker.terminate() == 0
        result = account(repo, endpoint, 28)
    assert result.by_status[Status.SENT] == 24 and result.by_status[Status.FAILED] == 4
    retried = repo.events(repo.get_row_by_notification_id("retry-0").id)
    assert Status.RETRYING in [e.to_status for e in retried]
    repo.close()

    pair.wait_caught_up()
    for table in ("email_delivery_attempts", "email_delivery_events", "email_allowed_senders"):
        assert _table(pair, "replica", table) == _table(pair, "primary", table), table
    status = pair.replica_status()
    assert (status["Slave_IO_Running"], status["Slave_SQL_Running"]) == ("Yes", "Yes")
    assert (status["Last_IO_Errno"], status["Last_SQL_Errno"]) == (0, 0)

    on_replica = DatabaseDsn("ops", OPERATOR_PASSWORD, "127.0.0.1", pair.replica.port, "outbox")
    monkeypatch.setenv("EMAIL_OUTBOX_DSN", on_replica.url())
    sent = query(pair.replica, "SELECT id FROM outbox.email_delivery_attempts WHERE status = 'Sent' LIMIT 1")[
        0
    ]
    for argv in (["status"], ["list", "--status", "Sent"], ["show", str(sent["id"])]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    for argv in (
        ["requeue", str(sent["id"]), "--by", "ops", "--reason", "on the replica"],
        [
            "enqueue",
            "--notification-id",
            "on-replica",
            "--to",
            "a@example.com",
            "--subject",
            "s",
            "--text",
            "t",
        ],
    ):
        assert main(argv) == 1, argv
        errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(errors) == 1 and "read-only" in errors[0] and "primary" in errors[0], errors
