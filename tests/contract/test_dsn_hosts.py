"""Which host of a multi-host DSN a connection goes to: a read-only server (a replica not yet
promoted) only when no listed host takes writes; a host that failed lately after the others."""

from __future__ import annotations

import pytest

from email_outbox.db.connection import connect
from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import free_port
from tests.support.harness import TestServer


def _read_only(server: TestServer, on: bool) -> None:
    conn = server.admin_connection()
    try:
        conn.cursor().execute(f"SET GLOBAL read_only = {1 if on else 0}")
    finally:
        conn.close()


def test_a_read_only_host_is_passed_over_for_one_that_takes_writes_and_used_when_alone(
    server: TestServer, killable_server: TestServer
) -> None:
    replica, primary = killable_server.admin, server.admin
    if (replica.user, replica.password) != (primary.user, primary.password):
        pytest.skip("the two servers have different root credentials: one DSN cannot name both")
    _read_only(killable_server, True)
    both = DatabaseDsn(
        replica.user,
        replica.password,
        replica.host,
        replica.port,
        "mysql",
        alternates=((primary.host, primary.port),),
    )
    conn = connect(both)
    assert int(conn.server_port) == primary.port
    conn.close()

    # The writable host gone: the replica is better than nothing (an operator's reads work there).
    gone = DatabaseDsn(
        replica.user,
        replica.password,
        replica.host,
        replica.port,
        "mysql",
        alternates=(("127.0.0.1", free_port()),),
    )
    conn = connect(gone, connect_timeout=1)
    assert int(conn.server_port) == replica.port
    conn.close()

    _read_only(killable_server, False)  # promoted: the DSN's first host again
    conn = connect(both)
    assert int(conn.server_port) == replica.port
    conn.close()
