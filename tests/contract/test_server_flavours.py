"""The code paths that differ between MariaDB and MySQL 8, proved without a server (this machine has
MariaDB only; MySQL 8 runs through testcontainers where a Docker engine answers)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from email_outbox.procedure_files import load_procedures, procedures_dir
from email_outbox.schema.grants import Account, apply_grants
from email_outbox.schema.routines import sync_procedures


class RecordingCursor:
    """Answers the few metadata reads with a given server version; records every statement."""

    def __init__(self, version: str, sql_mode: str = "STRICT_TRANS_TABLES") -> None:
        self.version = version
        self.sql_mode = sql_mode
        self.statements: list[str] = []
        self._rows: list[Any] = []

    def execute(self, operation: str, params: Any = None) -> None:
        self.statements.append(operation)
        if "VERSION()" in operation and "sql_mode" in operation:
            self._rows = [(self.sql_mode, self.version)]
        elif "VERSION()" in operation:
            self._rows = [(self.version,)]
        elif "sql_mode" in operation and operation.startswith("SELECT"):
            self._rows = [(self.sql_mode,)]
        else:
            self._rows = []

    def fetchall(self) -> list[Any]:
        return self._rows


def test_mysql_8_installs_by_drop_and_create_mariadb_by_create_or_replace() -> None:
    names = {p.name for p in load_procedures()}
    mysql = RecordingCursor("8.0.40")
    assert set(sync_procedures(mysql)) == names
    assert {s.split()[-1] for s in mysql.statements if s.startswith("DROP PROCEDURE IF EXISTS")} == names
    assert not any("CREATE OR REPLACE" in s for s in mysql.statements)

    mariadb = RecordingCursor("10.11.19-MariaDB-0+deb12u1")
    assert set(sync_procedures(mariadb)) == names
    assert not any(s.startswith("DROP PROCEDURE") for s in mariadb.statements)
    assert sum("CREATE OR REPLACE PROCEDURE" in s for s in mariadb.statements) == len(names)


@pytest.mark.parametrize(
    ("version", "expect_mode_change"), [("10.11.19-MariaDB", True), ("8.0.40", False), ("8.4.3", False)]
)
def test_grant_forbids_auto_created_accounts_the_way_each_server_spells_it(
    version: str, expect_mode_change: bool
) -> None:
    cursor = RecordingCursor(version)
    apply_grants(cursor, "worker", Account.parse("w@%"), "outbox")
    changed = [s for s in cursor.statements if s.startswith("SET SESSION sql_mode")]
    # MySQL 8 removed NO_AUTO_CREATE_USER (and never creates accounts with GRANT): setting it would fail.
    assert bool(changed) == expect_mode_change
    assert all("NO_AUTO_CREATE_USER" in s for s in changed)


# System variables both servers have (MariaDB 10.6+ and MySQL 8.0): a procedure may read only these.
# group_concat_max_len: the claim's tenant walk sizes its reads by it (MariaDB caps JSON_ARRAYAGG at it).
BOTH_SERVERS = {"log_bin", "binlog_format", "read_only", "group_concat_max_len"}


def test_procedures_read_only_variables_both_servers_have() -> None:
    used = set()
    for path in procedures_dir().glob("*.sql"):
        used |= {m.lower() for m in re.findall(r"@@(?:GLOBAL\.|SESSION\.)?(\w+)", path.read_text())}
    assert used <= BOTH_SERVERS, used - BOTH_SERVERS
