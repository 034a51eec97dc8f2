"""The migration lock: a row every node of a cluster sees, not a server-local GET_LOCK.

A Galera (or Group Replication) cluster replicates rows but not GET_LOCK: three migrators started on
three nodes each took "the" lock and corrupted the install. So the lock is a row in
`email_outbox_migration_lock`, taken by an INSERT or a compare-and-swap UPDATE on its token: two
nodes racing for it get one winner (the loser's commit fails certification, 1213, and it tries again).

A holder that dies must not block the next run for long:
- the holder renews the row's expiry from a thread of its own while it works, so a live migration
  never expires, and a dead holder's row expires after `ttl` seconds;
- a holder that died on the same server is seen at once: its connection is gone from the process
  list (an account always sees its own connections), and the lock is taken over without waiting.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pymysql

from email_outbox.errors import MigrationError

LOCK_NAME = "migrate"
TABLE_DDL = """
CREATE TABLE IF NOT EXISTS email_outbox_migration_lock (
  name          VARCHAR(64) NOT NULL,
  token         CHAR(32) NOT NULL,
  holder_server VARCHAR(300) NOT NULL,
  holder_conn   BIGINT UNSIGNED NOT NULL,
  acquired_at   DATETIME(6) NOT NULL,
  expires_at    DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
# Errors a racing node or a cluster in flux answers with: try again.
RETRY_ERRNOS = frozenset({1205, 1213, 1047})


class MigrationLock:
    def __init__(self, connect: Callable[[], Any], *, ttl: int = 60) -> None:
        self._connect = connect
        self.ttl = ttl
        self.token = uuid.uuid4().hex
        self._conn: Any = None
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def acquire(self, timeout: float) -> None:
        self._conn = self._connect()
        self._conn.autocommit(True)
        cursor = self._conn.cursor()
        _outlive_idle_timeout(cursor)
        cursor.execute(TABLE_DDL)
        read_your_writes(cursor)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._try_take(cursor):
                    break
            except pymysql.err.OperationalError as exc:
                if exc.args[0] not in RETRY_ERRNOS:
                    raise
            if time.monotonic() > deadline:
                raise MigrationError(f"another migrator held the migration lock for {timeout:g}s")
            time.sleep(0.2)
        self._heartbeat = threading.Thread(target=self._renew, name="migration-lock", daemon=True)
        self._heartbeat.start()

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=10)
        if self._conn is not None:
            try:
                self._conn.cursor().execute(
                    "DELETE FROM email_outbox_migration_lock WHERE name = %s AND token = %s",
                    (LOCK_NAME, self.token),
                )
            finally:
                self._conn.close()

    def _try_take(self, cursor: Any) -> bool:
        try:
            cursor.execute(
                "INSERT INTO email_outbox_migration_lock (name, token, holder_server, holder_conn, acquired_at,"
                " expires_at) VALUES (%s, %s, CONCAT(@@hostname, ':', @@port), CONNECTION_ID(), UTC_TIMESTAMP(6),"
                " UTC_TIMESTAMP(6) + INTERVAL %s SECOND)",
                (LOCK_NAME, self.token, self.ttl),
            )
            return True
        except pymysql.err.IntegrityError:
            pass
        cursor.execute(
            "SELECT token, holder_conn, holder_server = CONCAT(@@hostname, ':', @@port) AS here,"
            " expires_at < UTC_TIMESTAMP(6) AS expired FROM email_outbox_migration_lock WHERE name = %s",
            (LOCK_NAME,),
        )
        row = cursor.fetchone()
        if row is None:
            return False
        held_by, holder_conn, here, expired = row
        if not (expired or (here and not _connection_alive(cursor, int(holder_conn)))):
            return False
        cursor.execute(
            "UPDATE email_outbox_migration_lock SET token = %s, holder_server = CONCAT(@@hostname, ':', @@port),"
            " holder_conn = CONNECTION_ID(), acquired_at = UTC_TIMESTAMP(6),"
            " expires_at = UTC_TIMESTAMP(6) + INTERVAL %s SECOND WHERE name = %s AND token = %s",
            (self.token, self.ttl, LOCK_NAME, held_by),
        )
        return bool(cursor.rowcount == 1)

    def _renew(self) -> None:
        conn = self._connect()
        conn.autocommit(True)
        try:
            _outlive_idle_timeout(conn.cursor())
            while not self._stop.wait(self.ttl / 4):
                # A failed beat is tried again at the next one: the expiry leaves ttl seconds of slack.
                with contextlib.suppress(pymysql.err.Error):
                    conn.cursor().execute(
                        "UPDATE email_outbox_migration_lock SET expires_at = UTC_TIMESTAMP(6) + INTERVAL %s SECOND"
                        " WHERE name = %s AND token = %s",
                        (self.ttl, LOCK_NAME, self.token),
                    )
        finally:
            conn.close()


def _outlive_idle_timeout(cursor: Any) -> None:
    """The lock's connections idle while the migration works: a server with a short wait_timeout
    would close them, and another migrator would then take the lock of a live holder for a dead one's."""
    cursor.execute("SET SESSION wait_timeout = GREATEST(@@SESSION.wait_timeout, 86400)")


def _connection_alive(cursor: Any, connection_id: int) -> bool:
    cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (connection_id,))
    return bool(cursor.fetchone()[0])


def read_your_writes(cursor: Any) -> None:
    """On a Galera node, make each read wait for what the cluster has committed (causal reads)."""
    cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
    row = cursor.fetchone()
    if row and str(row[1]).upper() == "ON":
        cursor.execute("SET SESSION wsrep_sync_wait = 1")
