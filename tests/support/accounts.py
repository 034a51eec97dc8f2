"""Database accounts for the role tests: made by `email-outbox grant`, dropped afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from tests.support.harness import TestServer


@contextmanager
def granted_account(server: TestServer, dsn: DatabaseDsn, role: str) -> Iterator[DatabaseDsn]:
    """A fresh account created and given `role` by `email-outbox grant`, dropped afterwards."""
    user, password = f"eo_{role}", f"{role}-Pass1"
    os.environ["TEST_ROLE_ACCOUNT_PASSWORD"] = password
    try:
        code = main(["grant", role, f"{user}@%", "--dsn", dsn.url(), "--create",
                     "--password-env", "TEST_ROLE_ACCOUNT_PASSWORD"])  # fmt: skip
        assert code == 0
        yield DatabaseDsn(user, password, dsn.host, dsn.port, dsn.database, dsn.unix_socket)
    finally:
        del os.environ["TEST_ROLE_ACCOUNT_PASSWORD"]
        admin = server.admin_connection()
        admin.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()
