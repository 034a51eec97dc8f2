"""Least privilege against the real server: each role can make exactly its calls, and every refusal
is the server's own privilege error. The procedures (SQL SECURITY DEFINER) are the only door."""

from __future__ import annotations

from pathlib import Path

import mysql.connector
import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import AccessDenied
from email_outbox.models import Status
from email_outbox.schema.grants import (
    OPERATOR_PROCEDURES,
    OPERATOR_TABLES,
    WORKER_PROCEDURES,
    Account,
    grant_statements,
)
from email_outbox.version import PACKAGE_VERSION
from email_outbox.worker.startup import SCHEMA_RELEASE_WARNING
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import enqueue_many, token
from tests.support.worker_harness import account, drained, spawn_worker, wait_until

ER_TABLEACCESS_DENIED = 1142
ER_PROCACCESS_DENIED = 1370


def raw(dsn: DatabaseDsn) -> mysql.connector.MySQLConnection:
    return mysql.connector.connect(**dsn.connect_args(), autocommit=True)  # type: ignore[return-value]


def refused(dsn: DatabaseDsn, sql: str, errno: int) -> None:
    conn = raw(dsn)
    try:
        cursor = conn.cursor()
        with pytest.raises(mysql.connector.Error) as info:
            cursor.execute(sql)
            cursor.fetchall()
        assert info.value.errno == errno, f"{sql}: {info.value}"
    finally:
        conn.close()


WRITES = (
    "UPDATE email_delivery_attempts SET status = 'Sent'",
    "DELETE FROM email_delivery_attempts",
    "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, max_attempts,"
    " next_attempt_at, created_at, updated_at) VALUES ('x', 'a@b.c', 's', 1, NOW(), NOW(), NOW())",
    "DELETE FROM email_delivery_events",
)


def test_grant_print_shows_exactly_the_role(dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grant", "worker", "w@10.0.0.%", "--dsn", dsn.url(), "--print"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(WORKER_PROCEDURES) + 1
    assert all("'w'@'10.0.0.%'" in line for line in lines)
    assert sum(line.startswith("GRANT EXECUTE ON PROCEDURE") for line in lines) == len(WORKER_PROCEDURES)
    # The one table a worker reads: the release that migrated the database, for its start-up warning.
    assert [line for line in lines if line.startswith("GRANT SELECT")] == [
        f"GRANT SELECT ON `{dsn.database}`.`email_outbox_release` TO 'w'@'10.0.0.%';"
    ]
    operator = grant_statements("operator", Account.parse("ops"), "outbox")
    # the outbox and its attachments, the allow-list, the configuration sets a message may name, and
    # provider events, delivery status, the suppression list, and the release that migrated the database
    assert sum("GRANT SELECT" in s for s in operator) == len(OPERATOR_TABLES) == 15
    assert not any("UPDATE" in s or "INSERT" in s or "DELETE" in s for s in operator)


def test_worker_account_runs_the_worker_and_nothing_else(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository, tmp_path: Path
) -> None:
    worker = accounts["worker"]
    for sql in WRITES:
        refused(worker, sql, ER_TABLEACCESS_DENIED)
    refused(worker, "SELECT * FROM email_delivery_attempts", ER_TABLEACCESS_DENIED)
    refused(worker, "CALL email_requeue_unknown_outcome(1, 'w', 'r')", ER_PROCACCESS_DENIED)
    refused(worker, "CALL email_resolve_unknown_outcome(1, 'Sent', 'w', 'r', NULL)", ER_PROCACCESS_DENIED)
    refused(
        worker, "CALL email_enqueue('n', 'a@b.c', NULL, 's', 't', NULL, NULL, NULL)", ER_PROCACCESS_DENIED
    )
    refused(worker, "CALL email_purge_bodies_after(1, 0, 10)", ER_PROCACCESS_DENIED)

    # The allowed calls: a real worker process on this account delivers a batch end to end.
    enqueue_many(repo, 20, prefix="least")
    with SesEndpoint() as endpoint:
        proc = spawn_worker(worker, endpoint.url, tmp_path, "least-priv", concurrency=4)
        try:
            wait_until(lambda: drained(repo), 60, "the worker account to deliver everything")
        finally:
            assert proc.terminate() == 0
        result = account(repo, endpoint, 20)
    assert result.by_status[Status.SENT] == 20
    assert "differ from this release" not in proc.log(), "no false drift warning for an EXECUTE-only account"
    assert SCHEMA_RELEASE_WARNING not in proc.log(), "the schema is this package's release"
    assert "could not read the database's schema release" not in proc.log()


def test_a_worker_warns_once_when_the_schema_release_is_not_the_package_s(
    accounts: dict[str, DatabaseDsn],
    server: TestServer,
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    tmp_path: Path,
) -> None:
    """A database migrated by 0.1.9 (its release row says so) under this package: the worker on a
    granted worker account reads the row, says both versions once in one WARNING, and delivers."""
    conn = server.admin_connection(dsn.database)
    cursor = conn.cursor()
    cursor.execute("SELECT contract_version FROM email_outbox_release WHERE id = 1")
    ((recorded,),) = cursor.fetchall()
    cursor.execute("UPDATE email_outbox_release SET contract_version = '0.1.9' WHERE id = 1")
    try:
        with SesEndpoint() as endpoint:
            proc = spawn_worker(accounts["worker"], endpoint.url, tmp_path, "old-schema")
            try:
                enqueue_many(repo, 3, prefix="old-schema")
                wait_until(lambda: drained(repo), 60, "the worker to deliver under the older schema")
            finally:
                assert proc.terminate() == 0
        warnings = [line for line in proc.log().splitlines() if SCHEMA_RELEASE_WARNING in line]
        assert len(warnings) == 1, proc.log()
        assert "WARNING" in warnings[0]
        assert "0.1.9" in warnings[0] and PACKAGE_VERSION in warnings[0]
        assert "email-outbox migrate" in warnings[0]
    finally:
        cursor.execute("UPDATE email_outbox_release SET contract_version = %s WHERE id = 1", (recorded,))
        conn.close()


def test_a_worker_account_missing_a_procedure_of_this_release_refuses_to_start_and_names_it(
    accounts: dict[str, DatabaseDsn], server: TestServer, tmp_path: Path
) -> None:
    """An upgrade that added a procedure but was not followed by `email-outbox grant`: the worker does
    not start sending (its finalizes would be refused and every row sent would go UnknownOutcome)."""
    worker = accounts["worker"]
    conn = server.admin_connection()
    conn.cursor().execute(
        f"REVOKE EXECUTE ON PROCEDURE `{worker.database}`.`email_finalize_and_start` FROM '{worker.user}'@'%'"
    )
    conn.close()
    with SesEndpoint() as endpoint:
        proc = spawn_worker(worker, endpoint.url, tmp_path, "not-granted")
        assert proc.proc.wait(timeout=60) != 0
    log = proc.log()
    assert "email_finalize_and_start" in log and "email-outbox grant worker" in log
    assert "Traceback" not in log


def test_enqueuer_can_only_enqueue(accounts: dict[str, DatabaseDsn], repo: OutboxRepository) -> None:
    enqueuer = OutboxRepository.open(accounts["enqueuer"])
    try:
        result = enqueuer.enqueue("from-app-1", "ann@example.com", "Hello", text_body="hi")
        assert result.affected == 1
        with pytest.raises(AccessDenied):
            enqueuer.claim_batch(token(), "app", 60, 10)
        with pytest.raises(AccessDenied):
            enqueuer.outbox_stats()
        with pytest.raises(AccessDenied):
            enqueuer.get_row(result.attempt_id)
    finally:
        enqueuer.close()
    for sql in WRITES:
        refused(accounts["enqueuer"], sql, ER_TABLEACCESS_DENIED)
    assert repo.get_row(result.attempt_id).status is Status.PENDING


def test_operator_reads_and_acts_but_cannot_claim_or_write(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="ops")
    t = token()
    assert repo.try_claim(attempt_id, t, "w", 60) == 1
    assert repo.finalize_unknown(attempt_id, t, "reset after send") == 1

    operator = accounts["operator"]
    url = operator.url()
    assert main(["status", "--dsn", url]) == 0
    assert main(["show", str(attempt_id), "--dsn", url]) == 0
    assert main(["list", "--status", "UnknownOutcome", "--dsn", url]) == 0
    assert main(["requeue", str(attempt_id), "--by", "ops", "--reason", "checked SES", "--dsn", url]) == 0
    capsys.readouterr()
    assert repo.get_row(attempt_id).status is Status.PENDING

    refused(operator, f"CALL email_claim_batch('{token()}', 'ops', 60, 10)", ER_PROCACCESS_DENIED)
    refused(operator, f"CALL email_try_claim({attempt_id}, '{token()}', 'ops', 60)", ER_PROCACCESS_DENIED)
    refused(operator, f"CALL email_finalize_sent({attempt_id}, 'x', 'm')", ER_PROCACCESS_DENIED)
    for sql in WRITES:
        refused(operator, sql, ER_TABLEACCESS_DENIED)
    assert set(OPERATOR_PROCEDURES).isdisjoint(
        {"email_claim_batch", "email_try_claim", "email_finalize_sent"}
    )


def test_cli_says_access_denied_in_one_line(
    accounts: dict[str, DatabaseDsn], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMAIL_OUTBOX_DSN", accounts["enqueuer"].url())
    assert main(["status"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "denied" in err[0].lower()


# --- docs/security.md, sentence by sentence --------------------------------------------------------
def test_every_event_names_the_calling_account_beside_the_name_the_caller_gave(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository
) -> None:
    enqueuer, worker, operator = (
        OutboxRepository.open(accounts[r]) for r in ("enqueuer", "worker", "operator")
    )
    try:
        attempt_id = enqueuer.enqueue("audit-1", "ann@example.com", "s", text_body="t").attempt_id
        t = token()
        # A worker may call itself anything: the actor is its word, db_account the server's.
        assert worker.try_claim(attempt_id, t, "pretending-to-be-another-worker", 60) == 1
        assert worker.finalize_unknown(attempt_id, t, "read timeout") == 1
        assert operator.requeue_unknown_outcome(attempt_id, "alice", "checked SES") == 1
    finally:
        for r in (enqueuer, worker, operator):
            r.close()
    history = repo.events(attempt_id)
    accounts_seen = [(e.actor, (e.db_account or "").split("@")[0]) for e in history]
    assert accounts_seen == [
        (f"{accounts['enqueuer'].user}@127.0.0.1", accounts["enqueuer"].user),
        ("pretending-to-be-another-worker", accounts["worker"].user),
        ("pretending-to-be-another-worker", accounts["worker"].user),
        ("alice", accounts["operator"].user),
    ]


def test_the_worker_account_changes_only_rows_under_its_own_claim(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository
) -> None:
    (claimed_elsewhere, done) = enqueue_many(repo, 2, prefix="fence")
    other = token()
    assert repo.try_claim(claimed_elsewhere, other, "other-worker", 60) == 1
    t = token()
    assert repo.try_claim(done, t, "w", 60) == 1 and repo.finalize_sent(done, t, "m-1") == 1
    worker = OutboxRepository.open(accounts["worker"])
    try:
        # Another claim's row: no token, no change. A terminal row: nothing applies.
        assert worker.finalize_sent(claimed_elsewhere, token(), "forged") == 0
        assert worker.release_claim(claimed_elsewhere, token(), 0) == 0
        failure = worker.finalize_failure(
            done, t, permanent=True, error_code="X", error_message="after the fact", retry_delay_seconds=0
        )
        assert failure.affected == 0
        assert worker.try_claim(done, token(), "w", 60) == 0
        with pytest.raises(AccessDenied):
            worker.sender_add("@evil.example", "", "w", "widen my own rights")
        # What remains trusted: a claim it holds, it may finalize with any outcome, Sent included,
        # without sending. The event names its account.
        mine = token()
        (fresh,) = enqueue_many(repo, 1, prefix="trusted")
        assert worker.try_claim(fresh, mine, "w", 60) == 1
        assert worker.finalize_sent(fresh, mine, "never-sent") == 1
    finally:
        worker.close()
    assert repo.get_row(claimed_elsewhere).status is Status.PROCESSING
    assert repo.get_row(done).status is Status.SENT
    assert (repo.events(fresh)[-1].db_account or "").startswith(accounts["worker"].user + "@")


def test_the_enqueuer_cannot_widen_or_read_the_sender_allow_list(accounts: dict[str, DatabaseDsn]) -> None:
    refused(
        accounts["enqueuer"], "CALL email_sender_add('@evil.example', '', 'app', 'x')", ER_PROCACCESS_DENIED
    )
    refused(accounts["enqueuer"], "SELECT * FROM email_allowed_senders", ER_TABLEACCESS_DENIED)
    refused(accounts["enqueuer"], "INSERT INTO email_allowed_senders_log VALUES ()", ER_TABLEACCESS_DENIED)
    refused(
        accounts["worker"], "CALL email_sender_remove('@example.com', '', 'w', 'x')", ER_PROCACCESS_DENIED
    )
