"""One typed function per stored procedure: the only code that talks SQL to the outbox (over the
connections of email_outbox.db.connection). This module has the connection handling: the cursor, the
CALL by name, the transaction, the server's clock and version. The calls are its parts, mixed in
from modules of their own: the send path (enqueue, claim, finalize: `send_calls`), the operators'
calls, the read-only views, the provider events, the shared send rate and the tenants.

Every call is `CALL name(...)` through cursor.execute (one round trip; callproc costs three), the one
result set is read, and the connection is drained so the next call never finds unread results.
Writes go through the procedures only; the few SELECTs here are read-only views for operators.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

import mysql.connector

from email_outbox.db.connection import DRIVER_ERRORS, Connection, connect, first_ready, translate_error
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.durability import DurabilityRisk, server_durability_risks
from email_outbox.db.operator_calls import OperatorCalls
from email_outbox.db.provider_calls import ProviderEventCalls
from email_outbox.db.reads import OperatorReads
from email_outbox.db.send_calls import SendPathCalls, finalize_alone
from email_outbox.db.send_rate_calls import SendRateCalls
from email_outbox.db.tenant_calls import TenantCalls
from email_outbox.procedure_files import parameter_names


class OutboxRepository(
    SendPathCalls, OperatorCalls, OperatorReads, ProviderEventCalls, SendRateCalls, TenantCalls
):
    """The procedure contract over one connection. Not thread-safe: one per thread."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.calls = 0
        # One cursor for the repository's life: mysql-connector's connection.cursor() pings the
        # server (is_connected), so a cursor per call cost a second round trip for every CALL.
        self._open_cursor: Any = None

    @classmethod
    def open(
        cls, dsn: DatabaseDsn, *, connect_timeout: float = 5.0, read_timeout: float | None = None
    ) -> OutboxRepository:
        return cls(connect(dsn, connect_timeout=connect_timeout, read_timeout=read_timeout))

    def read_consistently(self) -> None:
        """On a Galera node, make every read wait until the node has applied what the cluster
        committed before it (causal reads), so a row just written on another node is seen. A no-op
        on other servers. For operators' reads, not the worker's hot path."""
        rows = self._select("SHOW VARIABLES LIKE 'wsrep_on'")
        if rows and str(rows[0]["Value"]).upper() == "ON":
            with self._cursor() as cursor:
                cursor.execute("SET SESSION wsrep_sync_wait = 1")

    def limit_row_lock_wait(self, seconds: int) -> None:
        """Wait at most `seconds` for a row lock another session holds (innodb_lock_wait_timeout of this
        session), then fail with the retryable 1205."""
        with self._cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", (int(seconds),))

    def close(self) -> None:
        self._drop_cursor()
        with suppress(mysql.connector.Error):
            self.connection.close()

    def _drop_cursor(self) -> None:
        if self._open_cursor is not None:
            with suppress(Exception):
                self._open_cursor.close()
        self._open_cursor = None

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        if self._open_cursor is None:
            try:
                self._open_cursor = self.connection.cursor(dictionary=True)
            except DRIVER_ERRORS as exc:
                raise translate_error(exc) from exc
        try:
            yield self._open_cursor
        except DRIVER_ERRORS as exc:
            # After an error the cursor may hold unread results; the next call starts a fresh one.
            self._drop_cursor()
            raise translate_error(exc) from exc

    def _call(self, procedure: str, **arguments: Any) -> list[dict[str, Any]]:
        """CALL `procedure` with its arguments bound by name, in the order its file in procedures/
        declares them: a reordered parameter cannot bind silently to the wrong value."""
        names = parameter_names(procedure)
        if set(arguments) != set(names):
            raise TypeError(
                f"{procedure} takes {', '.join(names) or 'no arguments'}; got {', '.join(sorted(arguments))}"
            )
        args = [arguments[name] for name in names]
        placeholders = ", ".join(["%s"] * len(args))
        self.calls += 1
        with self._cursor() as cursor:
            cursor.execute(f"CALL {procedure}({placeholders})", tuple(args))
            rows: list[dict[str, Any]] = cursor.fetchall() if cursor.with_rows else []
            while cursor.nextset():
                if cursor.with_rows:
                    cursor.fetchall()
            return rows

    def _select(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._cursor() as cursor:
            cursor.execute(sql, tuple(args))
            rows: list[dict[str, Any]] = cursor.fetchall()
            return rows

    def _affected(self, procedure: str, **arguments: Any) -> int:
        return int(self._call(procedure, **arguments)[0]["affected"])

    # --- several calls in one transaction (a batch of SES events) ---------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several calls (a batch of events commits once); rolled back on any
        error. The procedures see it open and set savepoints instead of committing."""
        try:
            self.connection.start_transaction()
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc
        try:
            yield
        except BaseException:
            with suppress(*DRIVER_ERRORS):
                self._drop_cursor()
                self.connection.rollback()
            raise
        try:
            self.connection.commit()
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc

    def installed_procedures(self) -> set[str]:
        rows = self._select(
            "SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES"
            " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'"
        )
        return {str(r["name"]) for r in rows}

    def database_time(self) -> datetime:
        """UTC_TIMESTAMP(6): the one clock every procedure uses."""
        value: datetime = self._select("SELECT UTC_TIMESTAMP(6) AS now")[0]["now"]
        return value

    def server_version(self) -> str:
        return str(self._select("SELECT VERSION() AS v")[0]["v"])

    def durability_risks(self) -> list[DurabilityRisk]:
        """The server's settings that let a crash lose a committed transition (email_outbox.db.durability)."""
        with self._cursor() as cursor:
            return server_durability_risks(cursor)


__all__ = [
    "DRIVER_ERRORS",
    "Connection",
    "OutboxRepository",
    "connect",
    "finalize_alone",
    "first_ready",
    "translate_error",
]
