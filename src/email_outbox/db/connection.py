"""Connections to the outbox's database and what its errors mean: the connection layer under the
repository. Picks the first host of a DSN that answers and is ready, trying hosts that failed lately
last, and turns every driver error into one of email_outbox.errors, by the server's error code.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time

import mysql.connector
from mysql.connector.abstracts import MySQLConnectionAbstract
from mysql.connector.pooling import PooledMySQLConnection

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.first_use import FirstUseGate
from email_outbox.errors import (
    REFUSAL_BY_ERRNO,
    AccessDenied,
    DatabaseUnavailable,
    InvalidInput,
    OutboxError,
    ReadOnlyServer,
    SchemaNotInstalled,
    TransientDatabaseError,
)

Connection = MySQLConnectionAbstract | PooledMySQLConnection
log = logging.getLogger("email_outbox.db.connection")
# The process's first connection is made alone: the driver's client library is set up then (FirstUseGate).
_CLIENT_SET_UP = FirstUseGate()

# mysql-connector's C extension raises its own MySQLError (not a mysql.connector.Error) for some
# failures, e.g. a COMMIT-time deadlock or an argument it cannot convert: both are driver errors.
try:
    from _mysql_connector import MySQLError as _CExtensionError
except ImportError:  # the pure-Python connector
    _CExtensionError = mysql.connector.Error
DRIVER_ERRORS: tuple[type[Exception], ...] = (mysql.connector.Error, _CExtensionError)

# A SIGNAL without MYSQL_ERRNO (the procedures set one by rule class: errors.REFUSALS).
ER_SIGNAL_EXCEPTION = 1644
ER_SP_DOES_NOT_EXIST = 1305
ER_NO_SUCH_TABLE = 1146
# --read-only (a replica): the server refuses the write before it happens.
ER_OPTION_PREVENTS_STATEMENT = 1290
# A value the server refused to convert to a parameter's type (out of range, wrong integer or date,
# too long): bad input, never written.
VALUE_REFUSED_ERRNOS = frozenset({1264, 1292, 1366, 1406, 1411})
ER_NET_PACKET_TOO_LARGE = 1153
ER_LOCK_DEADLOCK = 1213
# Database, table, column and routine privilege refusals. 1045 (bad password) is a connect failure.
ACCESS_DENIED_ERRNOS = frozenset({1044, 1142, 1143, 1370})
ER_LOCK_WAIT_TIMEOUT = 1205
# Galera: "WSREP has not yet prepared node for application use", while a node joins or loses quorum.
ER_WSREP_NOT_READY = 1047
# "Got error N during COMMIT": on Galera, the node left the Primary Component under the COMMIT. Whether
# the cluster applied the transaction is unknown, as after a lost connection.
ER_ERROR_DURING_COMMIT = 1180
# MariaDB with innodb_snapshot_isolation=ON: a locking read met a row changed after the snapshot.
# The statement's transaction is rolled back, like a deadlock, and is safe to retry the same way.
ER_CHECKREAD = 1020
# Server going away or refusing work: a new connection (maybe later) is the remedy.
CONNECTION_ERRNOS = frozenset(
    {1040, 1053, 1077, 1152, 1158, 1159, 1160, 1161, 1180, 1927, 2003, 2006, 2013, 2055, 4031}
)

# How long a host that failed (refused, timed out, lost a connection, left the Primary Component) is
# tried after the DSN's other hosts: long enough that every reconnect of a process does not first wait
# out a paused or cut-off node's timeout, short enough to return to the DSN's order soon after it heals.
SUSPECT_SECONDS = 30.0


class _Suspects:
    """The hosts of this process's DSNs that failed lately, with when each is trusted again."""

    def __init__(self) -> None:
        self._until: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    def mark(self, host: str, port: int) -> None:
        with self._lock:
            self._until[(host, port)] = time.monotonic() + SUSPECT_SECONDS

    def order(self, endpoints: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """The endpoints in their order, those that failed lately last (in their order too)."""
        now = time.monotonic()
        with self._lock:
            return sorted(endpoints, key=lambda e: self._until.get(e, 0.0) > now)


SUSPECTS = _Suspects()


def mark_failed(conn: Connection | None) -> None:
    """The host this connection went to failed: later connections try the DSN's other hosts first."""
    if conn is None:
        return
    host, port = getattr(conn, "server_host", None), getattr(conn, "server_port", None)
    if host and port:
        SUSPECTS.mark(str(host), int(port))


def connect(
    dsn: DatabaseDsn, *, connect_timeout: float = 5.0, read_timeout: float | None = None
) -> Connection:
    """A connection in autocommit mode (each worker-facing CALL commits on its own) to the first host
    of the DSN that answers and, on a Galera node, is synced (wsrep_ready ON, wsrep_local_state 4).
    A node that is joining, donating or has lost quorum would refuse or stall the outbox's writes.
    Of a DSN with several hosts, a read-only one (a replica) is never used: the procedures run with
    their definer's rights, which an administrator's read_only does not stop (READ ONLY ADMIN), so
    a worker there would write on the replica and break its replication. A single-host DSN may name
    a replica, for an operator's reads.
    Hosts that failed in the last SUSPECT_SECONDS are tried last. `read_timeout` bounds each wait for
    the server's answer (and each write to it): a paused or cut-off node then costs that long, and
    the call fails as a lost connection, instead of hanging for as long as TCP keeps the socket."""
    last: OutboxError | None = None
    timeouts: dict[str, int] = {"connection_timeout": math.ceil(max(1, connect_timeout))}
    if read_timeout is not None:
        timeouts["read_timeout"] = timeouts["write_timeout"] = math.ceil(max(1, read_timeout))
    for host, port in SUSPECTS.order(dsn.endpoints()):
        try:
            conn = _CLIENT_SET_UP.run(
                functools.partial(
                    mysql.connector.connect, **dsn.at(host, port).connect_args(), autocommit=True, **timeouts
                )
            )
        except DRIVER_ERRORS as exc:
            last = translate_error(exc)
            SUSPECTS.mark(host, port)
            continue
        try:
            unsynced = _galera_not_synced(conn)
            writable = unsynced is not None or not dsn.alternates or not _read_only(conn)
        except DRIVER_ERRORS as exc:  # the node stopped answering between the handshake and the check
            conn.close()
            last = translate_error(exc)
            SUSPECTS.mark(host, port)
            continue
        if unsynced is None and writable:
            return _chosen(conn, dsn, host, port)
        conn.close()
        SUSPECTS.mark(host, port)
        last = DatabaseUnavailable(
            f"{host}:{port} is a Galera node that is not synced ({unsynced})"
            if unsynced
            else f"{host}:{port} is read-only (a replica not promoted)"
        )
    assert last is not None
    raise last


def _chosen(conn: Connection, dsn: DatabaseDsn, host: str, port: int) -> Connection:
    if (host, port) != (dsn.host, dsn.port):
        log.warning("connected to a later database host of the DSN", extra={"db_host": f"{host}:{port}"})
    return conn


def _read_only(conn: Connection) -> bool:
    cursor = conn.cursor()
    try:
        cursor.execute("SELECT @@global.read_only")
        row = cursor.fetchone()
    finally:
        cursor.close()
    return bool(row and int(str(next(iter(row)))))


def first_ready(dsn: DatabaseDsn) -> DatabaseDsn:
    """The DSN narrowed to the host `connect` would use now: for tools that take one host (yoyo)."""
    if not dsn.alternates:
        return dsn
    conn = connect(dsn)
    try:
        return dsn.at(str(conn.server_host), int(conn.server_port))
    finally:
        conn.close()


def _galera_not_synced(conn: Connection) -> str | None:
    """None for a server that is not a Galera node or is synced; otherwise what is wrong."""
    cursor = conn.cursor()
    try:
        cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
        wsrep_on = cursor.fetchall()
        if not wsrep_on or str(list(wsrep_on[0])[1]).upper() != "ON":  # MySQL, or MariaDB without Galera
            return None
        cursor.execute(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state', 'wsrep_local_state_comment')"
        )
        status = {str(name): str(value) for name, value in cursor.fetchall()}
    finally:
        cursor.close()
    if status.get("wsrep_ready") == "ON" and status.get("wsrep_local_state") == "4":
        return None
    return f"wsrep_ready={status.get('wsrep_ready')}, state={status.get('wsrep_local_state_comment')}"


def translate_error(exc: Exception) -> OutboxError:
    errno = getattr(exc, "errno", None)
    message = getattr(exc, "msg", None) or str(exc)
    if errno == ER_SIGNAL_EXCEPTION or getattr(exc, "sqlstate", None) == "45000":
        return REFUSAL_BY_ERRNO.get(errno or ER_SIGNAL_EXCEPTION, InvalidInput)(message)
    if errno in VALUE_REFUSED_ERRNOS:
        return InvalidInput(message)
    if errno == ER_NET_PACKET_TOO_LARGE:
        return InvalidInput(
            f"{message}: the database server refused the call because it is larger than the server's"
            " max_allowed_packet setting (a database setting, not SES's limit: the message itself is within"
            " SES's 40 MB); raise max_allowed_packet above your largest message (a 40 MB message with base64"
            " attachments needs about 64 MB)"
        )
    if errno == ER_OPTION_PREVENTS_STATEMENT and "read-only" in message:
        return ReadOnlyServer(f"the server is read-only (a replica?): send writes to the primary ({message})")
    if errno == ER_NO_SUCH_TABLE:
        return SchemaNotInstalled(f"{message}: run `email-outbox migrate`")
    if errno == ER_SP_DOES_NOT_EXIST:
        return SchemaNotInstalled(
            f"{message}: run `email-outbox migrate` (migration 0001_schema and procedures/)"
        )
    if errno in ACCESS_DENIED_ERRNOS:
        return AccessDenied(message)
    if errno in (ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, ER_CHECKREAD, ER_WSREP_NOT_READY):
        return TransientDatabaseError(f"error {errno}: {message}", errno)
    if errno in CONNECTION_ERRNOS or isinstance(
        exc, (mysql.connector.InterfaceError, mysql.connector.OperationalError)
    ):
        return DatabaseUnavailable(message)
    return OutboxError(f"database error {errno}: {message}")
