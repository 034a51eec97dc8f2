"""The release (issue 41): `email-outbox --version` is pyproject's version; every `migrate` records it
in the database; `status` says whether the database's schema is older or newer than the installed
package (and when retention last finished); `migrate` refuses a database a newer release migrated, and
changes nothing there."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import MigrationError
from email_outbox.schema.migrate import migrate
from email_outbox.version import PACKAGE_VERSION
from tests.conftest import TestServer

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_version_flag_prints_the_version_pyproject_declares(capsys: pytest.CaptureFixture[str]) -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"email-outbox {declared}"


def _status(dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]) -> tuple[str, dict[str, str]]:
    assert main(["status", "--dsn", dsn.url()]) == 0
    text = capsys.readouterr().out
    assert main(["status", "--json", "--dsn", dsn.url()]) == 0
    schema = json.loads(capsys.readouterr().out)["schema"]
    (line,) = [line for line in text.splitlines() if line.startswith("schema release:")]
    return line, schema


def test_status_says_when_the_schema_is_older_or_newer_than_the_package_and_migrate_refuses_newer(
    server: TestServer, fresh_dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate(fresh_dsn)
    line, schema = _status(fresh_dsn, capsys)
    assert schema == {"database": PACKAGE_VERSION, "package": PACKAGE_VERSION, "state": "current"}
    assert "this package's" in line

    admin = server.admin_connection(fresh_dsn.database)
    cursor = admin.cursor()
    cursor.execute("UPDATE email_outbox_release SET contract_version = '0.1.0'")
    line, schema = _status(fresh_dsn, capsys)
    assert schema["state"] == "older" and schema["database"] == "0.1.0"
    assert "older than this package" in line and "email-outbox migrate" in line

    # A database migrated before 0.2.0 has no record at all.
    cursor.execute("DELETE FROM email_outbox_release")
    line, schema = _status(fresh_dsn, capsys)
    assert schema["state"] == "older" and schema["database"] is None
    assert "before 0.2.0" in line

    cursor.execute("INSERT INTO email_outbox_release VALUES (1, '99.0.0', UTC_TIMESTAMP(6))")
    line, schema = _status(fresh_dsn, capsys)
    assert schema["state"] == "newer"
    assert "newer than this package" in line and "upgrade" in line
    cursor.execute("DROP PROCEDURE email_outbox_stats")
    with pytest.raises(MigrationError, match=r"migrated by email-outbox 99\.0\.0"):
        migrate(fresh_dsn)
    cursor.execute("SELECT contract_version FROM email_outbox_release")
    assert cursor.fetchall() == [("99.0.0",)]
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()"
        " AND ROUTINE_NAME = 'email_outbox_stats'"
    )
    assert cursor.fetchall() == [(0,)], "the refused migrate installed procedures"

    # Once the package is as new, migrate runs again and records it.
    cursor.execute("UPDATE email_outbox_release SET contract_version = '0.1.0'")
    migrate(fresh_dsn)
    cursor.execute("SELECT contract_version FROM email_outbox_release")
    assert cursor.fetchall() == [(PACKAGE_VERSION,)]
    admin.close()


def test_an_operator_account_reads_the_schema_release_and_when_retention_last_finished(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    line, schema = _status(accounts["operator"], capsys)
    assert schema["state"] == "current", line
    assert main(["status", "--dsn", accounts["operator"].url()]) == 0
    assert "retention last finished: never" in capsys.readouterr().out
    repo.retention(30, None, 10, "release-test")
    assert main(["status", "--json", "--dsn", accounts["operator"].url()]) == 0
    assert json.loads(capsys.readouterr().out)["retention_last_finished_at"] is not None
