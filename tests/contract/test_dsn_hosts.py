"""Which host of a multi-host DSN a connection goes to: never a read-only server (a replica not yet
promoted), whose read_only the procedures' definer rights would pass; a single-host DSN may name one."""

from __future__ import annotations

import pytest

from email_outbox.db.connection import connect
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.errors import DatabaseUnavailable
from email_outbox_devtools.dbserver import free_port
from tests.support.harness import TestServer


def test_a_read_only_host_is_passed_over_in_a_multi_host_dsn_and_used_alone(
    server: TestServer, killable_server: TestServer
) -> None:
    replica, primary = killable_server.admin, server.admin
    if (replica.user, replica.password) != (primary.user, primary.password):
        pytest.skip("the two servers have different root credentials: one DSN cannot name both")
    killable_server.set_global("read_only", 1)
    user, password = replica.user, replica.password
    both = DatabaseDsn(
        user, password, replica.host, replica.port, "mysql", alternates=((primary.host, primary.port),)
    )
    conn = connect(both)
    assert int(conn.server_port) == primary.port
    conn.close()

    # The writable host gone: no host takes writes, and the replica is not one.
    gone = DatabaseDsn(
        user, password, replica.host, replica.port, "mysql", alternates=(("127.0.0.1", free_port()),)
    )
    with pytest.raises(DatabaseUnavailable, match="read-only"):
        connect(gone, connect_timeout=1)

    # Alone, for an operator's reads.
    conn = connect(DatabaseDsn(user, password, replica.host, replica.port, "mysql"))
    assert int(conn.server_port) == replica.port
    conn.close()
