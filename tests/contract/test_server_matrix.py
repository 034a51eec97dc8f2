"""The servers users really have: each case a private server started with one setting a
managed or company server may have, the migrator an account with ALL on its own database only (no
SUPER), then an enqueue with 4-byte characters, a real worker process delivering to the local SES
endpoint, and a byte-exact comparison of what the endpoint received. Every case also reruns
`migrate` and checks it changes nothing, and reads each email's history with the calling account.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import mysql.connector
import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox.schema.migrate import migrate
from email_outbox_devtools.dbserver import PrivateServer, find_server_binary
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.worker_harness import account, drained, spawn_worker, wait_until

pytestmark = pytest.mark.skipif(find_server_binary() is None, reason="no mariadbd/mysqld on PATH")

MIGRATOR, MIGRATOR_PASSWORD = "outbox_admin", "Adm1n-pass-for-tests"


@dataclass(frozen=True)
class Case:
    server_args: tuple[str, ...]
    create_database: str = "CREATE DATABASE outbox CHARACTER SET utf8mb4"
    session_checks: dict[str, str] = field(default_factory=dict)


BINLOG = ("--log-bin=binlog", "--server-id=1", "--log-bin-trust-function-creators=0")
CASES = {
    "binlog-row": Case((*BINLOG, "--binlog-format=ROW"), session_checks={"log_bin": "1"}),
    "binlog-mixed": Case((*BINLOG, "--binlog-format=MIXED"), session_checks={"binlog_format": "MIXED"}),
    "binlog-statement": Case(
        (*BINLOG, "--binlog-format=STATEMENT"), session_checks={"binlog_format": "STATEMENT"}
    ),
    # MariaDB's compiled-in defaults, and a database created without naming a character set.
    "latin1-defaults": Case(
        ("--character-set-server=latin1", "--collation-server=latin1_swedish_ci"),
        create_database="CREATE DATABASE outbox",
        session_checks={"character_set_server": "latin1"},
    ),
    "ansi-quotes-full-group-by": Case(
        ("--sql-mode=ANSI_QUOTES,ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_DATE",),
        session_checks={"sql_mode": "ANSI_QUOTES,ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_DATE"},
    ),
    "wait-timeout-3s": Case(("--wait-timeout=3",), session_checks={"wait_timeout": "3"}),
    "read-committed-default": Case(
        ("--transaction-isolation=READ-COMMITTED",), session_checks={"tx_isolation": "READ-COMMITTED"}
    ),
    "time-zone-plus-0530": Case(("--default-time-zone=+05:30",), session_checks={"time_zone": "+05:30"}),
}


@pytest.fixture(scope="module")
def initialised_datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One initialised data directory, copied for each case (initialising costs seconds)."""
    base = tmp_path_factory.mktemp("template")
    PrivateServer(base).initialise()
    return base / "data"


@pytest.fixture
def case_server(request: pytest.FixtureRequest, initialised_datadir: Path, tmp_path: Path) -> Iterator[
    tuple[Case, PrivateServer]
]:  # fmt: skip
    case = CASES[request.param]
    server = PrivateServer(tmp_path / "db", extra_args=list(case.server_args))
    shutil.copytree(initialised_datadir, server.datadir)
    server.start()
    try:
        yield case, server
    finally:
        server.stop()


def _admin(server: PrivateServer) -> mysql.connector.MySQLConnection:
    return mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)  # type: ignore[return-value]


def _managed_admin_account(server: PrivateServer, case: Case) -> DatabaseDsn:
    """What a managed service hands its customer: all privileges on one database, nothing global."""
    conn = _admin(server)
    cursor = conn.cursor()
    cursor.execute(case.create_database)
    cursor.execute(f"CREATE USER '{MIGRATOR}'@'%' IDENTIFIED BY '{MIGRATOR_PASSWORD}'")
    cursor.execute(f"GRANT ALL PRIVILEGES ON outbox.* TO '{MIGRATOR}'@'%'")
    for name, expected in case.session_checks.items():
        cursor.execute(f"SELECT @@GLOBAL.{name}")
        (value,) = cursor.fetchone()  # type: ignore[misc]
        assert str(value) == expected, f"the server did not take {name}={expected} (has {value})"
    conn.close()
    return DatabaseDsn.parse(server.dsn("outbox", MIGRATOR, MIGRATOR_PASSWORD))


EMAILS = [
    (f"matrix-{i}", f"ann{i}@example.com", f"Grüße 🎉 {i} 𝄞", f"text 😀 {i}\nline 2", f"<p>html 🚀 {i}</p>")
    for i in range(6)
]


@pytest.mark.parametrize("case_server", list(CASES), indirect=True)
def test_server_configuration(case_server: tuple[Case, PrivateServer], tmp_path: Path) -> None:
    case, server = case_server
    dsn = _managed_admin_account(server, case)
    migrate_for_local_use(dsn)
    again = migrate(dsn)
    assert again.applied == [] and again.procedures_installed == [], "a second migrate changed something"
    assert again.drift_after.clean

    repo = OutboxRepository.open(dsn)
    try:
        first, second = EMAILS[:3], EMAILS[3:]
        for nid, to, subject, text, html in first:
            repo.enqueue(nid, to, subject, text_body=text, html_body=html)
        with SesEndpoint() as endpoint:
            worker = spawn_worker(dsn, endpoint.url, tmp_path, f"matrix-{case.server_args[0][2:12]}")
            try:
                wait_until(lambda: drained(repo), 60, "the first emails to go out")
                if "--wait-timeout=3" in case.server_args:
                    # Let the server drop every connection that idles past wait_timeout, the worker's
                    # send and finalize connections among them; the worker must carry on unaided.
                    aborted = _aborted_clients(server)
                    wait_until(
                        lambda: _aborted_clients(server) > aborted, 30, "the server to drop idle connections"
                    )
                    # The test's own connection idled too: a client reconnects, as the worker must.
                    repo.close()
                    repo = OutboxRepository.open(dsn)
                for nid, to, subject, text, html in second:
                    repo.enqueue(nid, to, subject, text_body=text, html_body=html)
                wait_until(lambda: drained(repo), 60, "the later emails to go out")
            finally:
                assert worker.terminate() == 0, worker.log()[-3000:]
            result = account(repo, endpoint, len(EMAILS))
            assert result.by_status[Status.SENT] == len(EMAILS)
            received = {m.to[0]: m for m in endpoint.accepted()}
        for nid, to, subject, text, html in EMAILS:
            message = received[to]
            assert (message.subject, message.text, message.html) == (subject, text, html), "byte-exact"
            row = repo.get_row_by_notification_id(nid)
            assert abs(row.created_at - datetime.now(UTC).replace(tzinfo=None)) < timedelta(minutes=2), (
                "times are stored in UTC whatever the server's time zone"
            )
            history = repo.events(row.id)
            assert [(e.from_status, e.to_status) for e in history] == [
                (None, Status.PENDING),
                (Status.PENDING, Status.PROCESSING),
                (Status.PROCESSING, Status.SENT),
            ]
            assert all((e.db_account or "").startswith(f"{MIGRATOR}@") for e in history)
    finally:
        repo.close()


def _aborted_clients(server: PrivateServer) -> int:
    conn = _admin(server)
    cursor = conn.cursor()
    cursor.execute("SHOW GLOBAL STATUS LIKE 'Aborted_clients'")
    (_, value) = cursor.fetchone()  # type: ignore[misc]
    conn.close()
    return int(value)
