"""The real database the tests run against, chosen once per session.

Order: EMAIL_OUTBOX_TEST_DSN if set; else testcontainers MySQL 8 when a Docker engine answers a ping;
else a private server from the mariadbd/mysqld binary on PATH, in a temp dir. Fault tests that must
kill the server always get a private one of their own (`PrivateServer`), whichever ran here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.send_rate_calls import INITIAL_SEND_RATE_ROW
from email_outbox.db.tenant_calls import INITIAL_TENANT_ROWS
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use

TABLES = (
    "email_delivery_events",
    "email_attachments",
    "email_delivery_attempts",
    "email_provider_events",
    "email_delivery_status",
    "email_suppressed_addresses",
    "email_suppressed_addresses_log",
    "email_notification_tombstones",
    "email_retention_runs",
    "email_erasures",
    "email_provider_breaker",
    "email_provider_breaker_log",
    "email_tenants",
    "email_tenant_accounts",
    "email_tenants_log",
    "email_tenant_schedule",
    "email_tenant_event_hours",
    "email_changes_feed",
    "email_changes_state",
)


def written(cursor: Any) -> list[str]:
    """The tables of TABLES that differ from a truncated one: with rows, or with an AUTO_INCREMENT past
    1 (rows written and deleted since). A TRUNCATE rebuilds its table: all 19 took 0.3 s, before each
    of the 675 tests on the shared database, where most tests write to a few."""
    # MySQL 8 caches information_schema.TABLES for a day unless told not to; MariaDB reads it live.
    with contextlib.suppress(mysql.connector.Error):
        cursor.execute("SET SESSION information_schema_stats_expiry = 0")
    cursor.execute(
        "SELECT TABLE_NAME, AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
    )
    counters = {str(name): int(counter or 1) for name, counter in cursor.fetchall()}
    cursor.execute(
        " UNION ALL ".join(f"SELECT '{t}' FROM DUAL WHERE EXISTS (SELECT 1 FROM {t})" for t in TABLES)
    )
    with_rows = {str(name) for (name,) in cursor.fetchall()}
    return [t for t in TABLES if t in with_rows or counters.get(t, 1) > 1]


@dataclass
class TestServer:
    __test__ = False  # a fixture value, not a test class

    kind: str
    admin: DatabaseDsn
    private: PrivateServer | None = None
    _cleanup: list[Any] = field(default_factory=list)

    def admin_connection(self, database: str | None = None) -> Any:
        args = self.admin.connect_args()
        args.pop("database")
        if database:
            args["database"] = database
        return mysql.connector.connect(**args, autocommit=True)

    def set_global(self, name: str, value: int) -> None:
        """SET GLOBAL `name` = `value` (a test that changes a shared server's setting puts it back)."""
        conn = self.admin_connection()
        try:
            conn.cursor().execute(f"SET GLOBAL {name} = {int(value)}")
        finally:
            conn.close()

    @property
    def version(self) -> str:
        conn = self.admin_connection()
        try:
            cur = conn.cursor()
            cur.execute("SELECT VERSION()")
            return str(cur.fetchone()[0])
        finally:
            conn.close()

    def create_database(self, name: str) -> DatabaseDsn:
        conn = self.admin_connection()
        try:
            cur = conn.cursor()
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        finally:
            conn.close()
        return self.admin.with_database(name)

    def migrated_database(self, name: str) -> DatabaseDsn:
        dsn = self.create_database(name)
        migrate_for_local_use(dsn)
        return dsn

    def truncate(self, dsn: DatabaseDsn) -> None:
        """Every table of TABLES as TRUNCATE leaves it, and the rows migrate starts with."""
        conn = self.admin_connection(dsn.database)
        try:
            cur = conn.cursor()
            for table in written(cur):
                cur.execute(f"TRUNCATE TABLE {table}")
            # The account's shared send rate starts again from its first row: a test's quota, schedule
            # or throttling cut never reaches the next test.
            cur.execute("DELETE FROM email_send_rate")
            cur.execute(INITIAL_SEND_RATE_ROW)
            # The shared default tenant and the fair-share clock at 0, as migration 0017 leaves them.
            for statement in INITIAL_TENANT_ROWS:
                cur.execute(statement)
        finally:
            conn.close()

    def close(self) -> None:
        for stop in reversed(self._cleanup):
            with contextlib.suppress(Exception):
                stop()


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:
        return False


def start_test_server() -> TestServer:
    dsn = os.environ.get("EMAIL_OUTBOX_TEST_DSN")
    if dsn:
        return TestServer("EMAIL_OUTBOX_TEST_DSN", DatabaseDsn.parse(dsn))
    if _docker_answers():
        from testcontainers.mysql import MySqlContainer

        container = MySqlContainer("mysql:8.0", username="root", password="test", dbname="test")
        container.start()
        port = int(container.get_exposed_port(3306))
        host = container.get_container_host_ip()
        server = TestServer(
            "testcontainers MySQL 8", DatabaseDsn.parse(f"mysql://root:test@{host}:{port}/test")
        )
        server._cleanup.append(container.stop)
        return server
    return start_private_test_server()


def start_private_test_server(durable: bool = False) -> TestServer:
    base = Path(tempfile.mkdtemp(prefix="email-outbox-db-"))
    private = PrivateServer(base, durable=durable)
    try:
        private.start()
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    name = "private " + Path(private.binary).name
    server = TestServer(name, DatabaseDsn.parse(private.dsn("mysql")), private=private)
    # Cleanups run last first: the server stops, then its ~240 MB of files go (they filled the disk
    # of a machine running many sessions when they stayed behind).
    server._cleanup.append(lambda: shutil.rmtree(base, ignore_errors=True))
    server._cleanup.append(private.stop)
    return server
