"""Private servers in the shapes production has: one initialised data directory copied for each
server (initialising costs seconds), a primary with the binary log, and a replica fed by it,
asynchronous or semi-synchronous (MariaDB's built-in semi-sync)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import PrivateServer

_template: Path | None = None

MIGRATOR, MIGRATOR_PASSWORD = "outbox_admin", "Adm1n-pass-for-tests"
REPLICATION_USER, REPLICATION_PASSWORD = "repl", "Repl-pass-for-tests"
BINLOG_ARGS = ("--log-bin=binlog", "--binlog-format=ROW", "--log-bin-trust-function-creators=0")


def template_datadir() -> Path:
    global _template
    if _template is None:
        base = Path(tempfile.mkdtemp(prefix="email-outbox-template-"))
        PrivateServer(base).initialise()
        _template = base / "data"
    return _template


def start_server(base: Path, *args: str, buffer_pool_size: str | None = "256M") -> PrivateServer:
    server = PrivateServer(base, extra_args=list(args), buffer_pool_size=buffer_pool_size)
    shutil.copytree(template_datadir(), server.datadir)
    server.start()
    return server


def admin(server: PrivateServer) -> Any:
    return mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)


def query(server: PrivateServer, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    conn = admin(server)
    try:
        cursor = conn.cursor(dictionary=True)
        cursor.execute(sql, args)
        return list(cursor.fetchall()) if cursor.with_rows else []
    finally:
        conn.close()


def managed_database(
    server: PrivateServer, create: str = "CREATE DATABASE outbox CHARACTER SET utf8mb4"
) -> DatabaseDsn:
    """What a managed service hands its customer: all privileges on one database, nothing global."""
    conn = admin(server)
    cursor = conn.cursor()
    cursor.execute(create)
    cursor.execute(f"CREATE USER '{MIGRATOR}'@'%' IDENTIFIED BY '{MIGRATOR_PASSWORD}'")
    cursor.execute(f"GRANT ALL PRIVILEGES ON outbox.* TO '{MIGRATOR}'@'%'")
    conn.close()
    return DatabaseDsn.parse(server.dsn("outbox", MIGRATOR, MIGRATOR_PASSWORD))


@dataclass
class ReplicatedPair:
    primary: PrivateServer
    replica: PrivateServer

    def wait_caught_up(self, timeout: int = 60) -> None:
        (position,) = query(self.primary, "SELECT @@GLOBAL.gtid_binlog_pos AS pos")
        (waited,) = query(self.replica, "SELECT MASTER_GTID_WAIT(%s, %s) AS r", (position["pos"], timeout))
        assert waited["r"] == 0, f"the replica did not reach {position['pos']} in {timeout}s"

    def replica_status(self) -> dict[str, Any]:
        (status,) = query(self.replica, "SHOW SLAVE STATUS")
        return dict(status)

    def stop(self) -> None:
        for server in (self.replica, self.primary):
            server.stop()


def start_pair(base: Path, *, semi_sync: bool = False) -> ReplicatedPair:
    primary_args = [*BINLOG_ARGS, "--server-id=1"]
    replica_args = [
        *BINLOG_ARGS,
        "--server-id=2",
        "--log-slave-updates",
        "--read-only=1",
        "--relay-log=relay",
    ]
    if semi_sync:
        # AFTER_SYNC: a commit is acknowledged to the client only once the replica has it, so a
        # promoted replica holds every transition a worker was told had committed. The long timeout
        # keeps the primary from quietly falling back to asynchronous replication.
        primary_args += [
            "--rpl-semi-sync-master-enabled=ON",
            "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
            "--rpl-semi-sync-master-timeout=60000",
        ]
        replica_args += ["--rpl-semi-sync-slave-enabled=ON"]
    primary = start_server(base / "primary", *primary_args)
    replica = start_server(base / "replica", *replica_args)
    query(primary, f"CREATE USER '{REPLICATION_USER}'@'%' IDENTIFIED BY '{REPLICATION_PASSWORD}'")
    query(primary, f"GRANT REPLICATION SLAVE ON *.* TO '{REPLICATION_USER}'@'%'")
    query(
        replica,
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='{REPLICATION_USER}',"
        f" MASTER_PASSWORD='{REPLICATION_PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
    )
    query(replica, "START SLAVE")
    pair = ReplicatedPair(primary, replica)
    pair.wait_caught_up()
    return pair


def promote(replica: PrivateServer) -> None:
    """What an operator (or the orchestrator) does to a replica whose primary is gone."""
    query(replica, "STOP SLAVE")
    query(replica, "RESET SLAVE ALL")
    query(replica, "SET GLOBAL read_only = 0")
