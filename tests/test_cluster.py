"""A 3-node MariaDB Galera cluster of private servers (issue 17): `migrate` run at the same moment on
all three nodes, as an account without SUPER and with the binary log on, ends with one complete,
identical install on every node, and a rerun changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from email_outbox.dsn import DatabaseDsn
from email_outbox.migrate import migrate

from tests.cluster import GaleraCluster, missing_cluster_parts, start_cluster
from tests.servers import MIGRATOR, MIGRATOR_PASSWORD, query
from tests.worker_harness import wait_until

pytestmark = pytest.mark.skipif(missing_cluster_parts() is not None, reason=str(missing_cluster_parts()))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GaleraCluster]:
    started = start_cluster(tmp_path_factory.mktemp("galera"))
    yield started
    started.stop()


def _migrate_everywhere(cluster: GaleraCluster, tmp_path: Path, round_: str) -> list[str]:
    """`email-outbox migrate` on every node at once; each node's output."""
    runs = []
    for node in cluster.nodes:
        dsn = DatabaseDsn(MIGRATOR, MIGRATOR_PASSWORD, "127.0.0.1", node.server.port, "outbox")
        log = tmp_path / f"{round_}-{node.name}.log"
        env = {**os.environ, "EMAIL_OUTBOX_DSN": dsn.url()}
        proc = subprocess.Popen(
            [sys.executable, "-m", "email_outbox.cli", "migrate", "--lock-timeout", "120"],
            env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        )  # fmt: skip
        runs.append((proc, log))
    outputs = []
    for proc, log in runs:
        assert proc.wait(timeout=180) == 0, log.read_text()
        outputs.append(log.read_text())
    return outputs


def _install(node_server: object) -> dict[str, object]:
    routines = query(
        node_server,  # type: ignore[arg-type]
        "SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = 'outbox' ORDER BY ROUTINE_NAME",
    )
    tables = query(
        node_server,  # type: ignore[arg-type]
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'outbox' ORDER BY TABLE_NAME",
    )
    applied = query(node_server, "SELECT migration_id FROM outbox._yoyo_migration ORDER BY migration_id")  # type: ignore[arg-type]
    return {"routines": routines, "tables": tables, "applied": applied}


def _create_outbox_database(cluster: GaleraCluster) -> None:
    first = cluster.nodes[0].server
    if query(first, "SHOW DATABASES LIKE 'outbox'"):
        return
    query(first, "CREATE DATABASE outbox CHARACTER SET utf8mb4")
    query(first, f"CREATE USER '{MIGRATOR}'@'%' IDENTIFIED BY '{MIGRATOR_PASSWORD}'")
    query(first, f"GRANT ALL PRIVILEGES ON outbox.* TO '{MIGRATOR}'@'%'")
    wait_until(
        lambda: all(_has_account(n.server) for n in cluster.nodes), 30, "the account to reach every node"
    )


def _has_account(server: object) -> bool:
    rows = query(server, "SELECT COUNT(*) AS n FROM mysql.user WHERE User = %s", (MIGRATOR,))  # type: ignore[arg-type]
    return bool(rows[0]["n"])


def test_migrate_at_once_on_three_nodes_makes_one_identical_install(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    _create_outbox_database(cluster)
    outputs = _migrate_everywhere(cluster, tmp_path, "first")
    assert sum("applied migration 0001_schema" in out for out in outputs) == 1, "one node did the work"
    cluster.wait_synced()
    installs = [_install(node.server) for node in cluster.nodes]
    assert installs[0]["applied"] and len(installs[0]["routines"]) > 20  # type: ignore[arg-type]
    assert installs[1] == installs[0] and installs[2] == installs[0], "every node holds the same install"

    again = _migrate_everywhere(cluster, tmp_path, "again")
    for out in again:
        assert "schema up to date" in out and "procedures up to date" in out, out


def test_operator_reads_on_another_node_see_a_row_just_written(cluster: GaleraCluster) -> None:
    """Without causal reads, 33 of 300 reads on another node missed a row just written."""
    from email_outbox.repository import OutboxRepository

    _create_outbox_database(cluster)
    writer_dsn, reader_dsn = (
        DatabaseDsn(MIGRATOR, MIGRATOR_PASSWORD, "127.0.0.1", node.server.port, "outbox")
        for node in cluster.nodes[:2]
    )
    migrate(writer_dsn)
    writer, reader = OutboxRepository.open(writer_dsn), OutboxRepository.open(reader_dsn)
    try:
        reader.read_consistently()
        for i in range(100):
            attempt_id = writer.enqueue(f"causal-{i}", "a@example.com", "s", text_body="t").attempt_id
            assert reader.get_row(attempt_id).notification_id == f"causal-{i}"
    finally:
        writer.close()
        reader.close()
