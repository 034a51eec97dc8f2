"""`email-outbox migrate`: yoyo schema migrations, then the procedures, under one migration lock that
every node of a cluster sees (email_outbox.schema.migration_lock; yoyo's own lock row survives a kill -9).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql
import yoyo
from yoyo.migrations import MigrationList

from email_outbox.db.connection import first_ready
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.durability import WARNING_PREFIX, DurabilityRisk, server_durability_risks
from email_outbox.errors import DatabaseUnavailable, MigrationError
from email_outbox.procedure_files import migrations_dir
from email_outbox.schema.migration_lock import MigrationLock, read_your_writes
from email_outbox.schema.release import refuse_a_newer_schema
from email_outbox.schema.routines import DriftReport, check_drift, replace_installed_naming


def add_column_if_missing(conn: Any, table: str, column: str, definition: str) -> None:
    """A migration step's ADD COLUMN that can run again (MySQL 8 has no ADD COLUMN IF NOT EXISTS)."""
    _alter_unless_present(
        conn, "COLUMNS", "COLUMN_NAME", table, column, f"ALTER TABLE {table} ADD COLUMN {column} {definition}"
    )


def add_index_if_missing(conn: Any, table: str, name: str, columns: str) -> None:
    """A migration step's ADD INDEX that can run again, built online (INPLACE, LOCK=NONE): writes to
    the table go on while it builds."""
    _alter_unless_present(
        conn,
        "STATISTICS",
        "INDEX_NAME",
        table,
        name,
        f"ALTER TABLE {table} ADD INDEX {name} {columns}, ALGORITHM=INPLACE, LOCK=NONE",
    )


def drop_indexes_if_present(conn: Any, table: str, names: list[str]) -> None:
    """A migration step's DROP INDEX that can run again: the installed procedures that name one of the
    indexes (an older release's FORCE INDEX) are replaced by their files first, so no CALL meets a
    missing index; then every index still present goes in one ALTER (in place, no copy of the table)."""
    cursor = conn.cursor()
    try:
        replace_installed_naming(cursor, names)
        cursor.execute(
            "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = %s",
            (table,),
        )
        indexes = {str(r[0]) for r in cursor.fetchall()}
        present = [name for name in names if name in indexes]
        if present:
            drops = ", ".join(f"DROP INDEX {name}" for name in present)
            cursor.execute(f"ALTER TABLE {table} {drops}, ALGORITHM=INPLACE, LOCK=NONE")
    finally:
        cursor.close()


def _alter_unless_present(conn: Any, view: str, name_column: str, table: str, name: str, alter: str) -> None:
    """`alter`, unless information_schema.`view` already lists `name` for `table` in this schema."""
    cursor = conn.cursor()
    cursor.execute(
        f"SELECT COUNT(*) FROM information_schema.{view} WHERE TABLE_SCHEMA = DATABASE()"
        f" AND TABLE_NAME = %s AND {name_column} = %s",
        (table, name),
    )
    if not cursor.fetchone()[0]:
        cursor.execute(alter)
    cursor.close()


@dataclass
class MigrateReport:
    applied: list[str] = field(default_factory=list)
    procedures_installed: list[str] = field(default_factory=list)
    drift_after: DriftReport = field(default_factory=DriftReport)
    durability: list[DurabilityRisk] = field(default_factory=list)

    def lines(self, *, verbose: bool = False) -> list[str]:
        """A summary; with `verbose`, every migration applied and every procedure installed."""
        if verbose:
            out = [f"applied migration {m}" for m in self.applied] or ["schema up to date"]
            out += [f"installed procedure {p}" for p in self.procedures_installed] or [
                "procedures up to date"
            ]
        else:
            out = [self._applied_summary()]
            count = len(self.procedures_installed)
            out.append(f"{count} procedures installed (-v lists them)" if count else "procedures up to date")
        out.append(self.drift_after.describe())
        out += [f"WARNING: {WARNING_PREFIX}: {r.describe()}" for r in self.durability]
        return out

    def _applied_summary(self) -> str:
        if not self.applied:
            return "schema up to date"
        if len(self.applied) == 1:
            return f"applied migration {self.applied[0]}"
        return f"applied migration {self.applied[0]} and {len(self.applied) - 1} more, to {self.applied[-1]}"


def _backend(dsn: DatabaseDsn) -> Any:
    try:
        return yoyo.get_backend(dsn.url())
    except pymysql.err.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot connect to {dsn.redacted()}: {exc}") from exc


def migrate(
    dsn: DatabaseDsn, *, lock_timeout: int = 120, progress: Callable[[str], None] = lambda _line: None
) -> MigrateReport:
    dsn = first_ready(dsn)
    backend = _backend(dsn)
    lock = MigrationLock(lambda: pymysql.connect(**_pymysql_args(dsn)))
    try:
        _preflight(backend)
        lock.acquire(lock_timeout)
    except (pymysql.err.Error, MigrationError) as exc:
        backend.connection.close()
        if isinstance(exc, MigrationError):
            raise
        raise MigrationError(f"migration failed: {_server_error(exc)}") from exc
    progress("acquired migration lock")
    report = MigrateReport()
    try:
        _see_the_cluster_as_of_now(backend)
        refuse_a_newer_schema(backend.connection)
        _repair_interrupted_bootstrap(backend)
        migrations = yoyo.read_migrations(str(migrations_dir()))
        pending = backend.to_apply(migrations)
        report.applied = [m.id for m in pending]
        backend.apply_migrations_only(pending)
        before = _drift(dsn)
        # The post-apply step runs every time, not only when a schema migration was pending.
        backend.run_post_apply(MigrationList([], migrations.post_apply))
        report.procedures_installed = sorted(before.missing + list(before.changed))
        report.drift_after = _drift(dsn)
        report.durability = server_durability_risks(backend.connection.cursor())
        if not report.drift_after.clean:
            raise MigrationError(f"procedures still differ after install: {report.drift_after.describe()}")
    except pymysql.err.Error as exc:
        raise MigrationError(f"migration failed: {_server_error(exc)}") from exc
    finally:
        lock.release()
        backend.connection.close()
    return report


def _see_the_cluster_as_of_now(backend: Any) -> None:
    """Read yoyo's records as the cluster holds them now, not as this connection first saw them.

    The connection was opened before the lock was taken, while another node may have been migrating:
    end any snapshot it holds, and on a Galera node make its reads wait until every write the cluster
    has committed is applied here (a migrator that read a lagging node re-applied 0001, once in CI).
    """
    backend.connection.commit()
    read_your_writes(backend.connection.cursor())


def _server_error(exc: pymysql.err.Error) -> str:
    """The server's own code and message, on one line."""
    if len(exc.args) >= 2 and isinstance(exc.args[0], int):
        return f"error {exc.args[0]}: {' '.join(str(exc.args[1]).split())}"
    return " ".join(str(exc).split())


def _preflight(backend: Any) -> None:
    """Settings no migration can work around, checked before anything changes."""
    cursor = backend.connection.cursor()
    cursor.execute("SELECT @@GLOBAL.read_only")
    (read_only,) = cursor.fetchone()
    if int(read_only):
        raise MigrationError(
            "the server is read-only (read_only=ON): run migrate against the primary (RDS: the instance"
            " or cluster writer endpoint; Aurora: the cluster endpoint; Cloud SQL: the primary instance,"
            " not a read replica)"
        )
    _check_old_triggers_can_be_dropped(cursor)


OLD_TRIGGERS = ("email_delivery_attempts_audit_insert", "email_delivery_attempts_audit_update")


def _check_old_triggers_can_be_dropped(cursor: Any) -> None:
    """An install from before 0002 has triggers, and with the binary log on and
    log_bin_trust_function_creators=0 even DROP TRIGGER needs SUPER (1419, measured on MariaDB 10.11),
    which no managed-service admin has. Say so, and how to change it, before anything changes."""
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.TRIGGERS"
        " WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME IN (%s, %s)",
        OLD_TRIGGERS,
    )
    if not cursor.fetchone()[0]:
        return
    cursor.execute("SELECT @@GLOBAL.log_bin, @@GLOBAL.log_bin_trust_function_creators")
    log_bin, trusted = cursor.fetchone()
    cursor.execute("SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SUPER'")
    has_super = cursor.fetchone()[0] > 0
    if int(log_bin) and not int(trusted) and not has_super:
        raise MigrationError(
            "this install still has the audit triggers of 0001, and dropping a trigger with the binary"
            " log on needs SUPER unless log_bin_trust_function_creators=1: set it to 1 for the upgrade"
            " (RDS/Aurora: the DB (cluster) parameter group; Cloud SQL: the database flag"
            " log_bin_trust_function_creators=on), run migrate again, then set it back to 0"
        )


def _repair_interrupted_bootstrap(backend: Any) -> None:
    """Undo yoyo's own table set-up if a killed migrator left it half done.

    yoyo creates its bookkeeping tables in several DDL statements, each committing on its own; a kill -9
    in between leaves tables it then refuses to read (an empty version table fails an assertion).
    While no migration is recorded, nothing is lost by dropping them, and yoyo creates them again.
    Runs under the migration lock, so no other migrator is half-way through the same set-up.
    """
    tables = set(backend.list_tables())
    cursor = backend.connection.cursor()
    if backend.lock_table in tables:
        # yoyo takes its lock row while it sets up its tables; a killed migrator leaves the row behind
        # and the next run would wait for it and fail. Under our migration lock any such row is stale.
        cursor.execute(f"DELETE FROM `{backend.lock_table}`")
        backend.connection.commit()
    # (yoyo_lock is left alone: yoyo creates it when it connects, and we never use it.)
    ours = [backend.migration_table, backend.log_table, backend.version_table]
    present = [t for t in ours if t in tables]
    if not present:
        return
    if backend.version_table in tables:
        cursor.execute(f"SELECT COUNT(*) FROM `{backend.version_table}`")
        if cursor.fetchone()[0] > 0:
            return
    if backend.migration_table in tables:
        cursor.execute(f"SELECT COUNT(*) FROM `{backend.migration_table}`")
        if cursor.fetchone()[0] > 0:
            return  # an older yoyo's records: yoyo knows how to upgrade those
    for table in present:
        cursor.execute(f"DROP TABLE IF EXISTS `{table}`")


def _drift(dsn: DatabaseDsn) -> DriftReport:
    conn = pymysql.connect(**_pymysql_args(dsn))
    try:
        with conn.cursor() as cursor:
            read_your_writes(cursor)
            return check_drift(cursor)
    finally:
        conn.close()


def _pymysql_args(dsn: DatabaseDsn) -> dict[str, Any]:
    args: dict[str, Any] = {
        "user": dsn.user,
        "password": dsn.password,
        "database": dsn.database,
        "charset": "utf8mb4",
    }
    if dsn.unix_socket:
        args["unix_socket"] = dsn.unix_socket
    else:
        args["host"], args["port"] = dsn.host, dsn.port
    return args
