"""Issue 13, the security review: one test (or a few) per finding, each against the real server."""

from __future__ import annotations

import io
import sys
import uuid
from collections.abc import Iterator

import pytest
from email_outbox.cli import main
from email_outbox.dsn import DatabaseDsn

from tests.harness import TestServer


def _account_exists(server: TestServer, user: str) -> bool:
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (user,))
    (count,) = cursor.fetchone()
    conn.close()
    return bool(count)


@pytest.fixture
def permissive_sql_mode(server: TestServer) -> Iterator[None]:
    """The server as some installations run it: GRANT may create accounts (no NO_AUTO_CREATE_USER)."""
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute("SELECT @@GLOBAL.sql_mode")
    (saved,) = cursor.fetchone()
    cursor.execute("SET GLOBAL sql_mode = 'STRICT_TRANS_TABLES'")
    try:
        yield
    finally:
        cursor.execute("SET GLOBAL sql_mode = %s", (saved,))
        conn.close()


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


# --- finding 3: grant never creates an account by accident -------------------------------------------
def test_grant_to_a_missing_account_is_one_line_and_creates_nothing(
    server: TestServer,
    dsn: DatabaseDsn,
    permissive_sql_mode: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = f"eo_ghost_{uuid.uuid4().hex[:8]}"
    code = main(["grant", "worker", f"{user}@%", "--dsn", dsn.url()])
    errors = _stderr_lines(capsys)
    assert code == 2
    assert len(errors) == 1 and "does not exist" in errors[0] and "--create" in errors[0]
    assert "Traceback" not in errors[0]
    assert not _account_exists(server, user)


def test_grant_create_needs_a_password_and_never_takes_it_from_argv(
    server: TestServer, dsn: DatabaseDsn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    user = f"eo_new_{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password-stdin"]) == 2
    assert "empty password" in _stderr_lines(capsys)[-1]
    assert not _account_exists(server, user)
    with pytest.raises(SystemExit) as usage:
        main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password", "x"])
    assert usage.value.code == 2

    monkeypatch.setattr(sys, "stdin", io.StringIO("a-Good-pass-1\n"))
    try:
        assert main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password-stdin"]) == 0
        assert _account_exists(server, user)
        login = DatabaseDsn(user, "a-Good-pass-1", dsn.host, dsn.port, dsn.database, dsn.unix_socket)
        from email_outbox.repository import OutboxRepository

        OutboxRepository.open(login).close()
    finally:
        conn = server.admin_connection()
        conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()
