"""A 3-node MariaDB Galera cluster of private servers: `migrate` run at the same moment on
all three nodes, as an account without SUPER and with the binary log on, ends with one complete,
identical install on every node, and a rerun changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.schema.migrate import migrate
from tests.support.cluster import GaleraCluster, missing_cluster_parts, start_cluster
from tests.support.servers import MIGRATOR, MIGRATOR_PASSWORD, query
from tests.support.worker_harness import wait_until

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
    from email_outbox.db.repository import OutboxRepository

    _create_outbox_database(cluster)
    writer_dsn, reader_dsn = (
        DatabaseDsn(MIGRATOR, MIGRATOR_PASSWORD, "127.0.0.1", node.server.port, "outbox")
        for node in cluster.nodes[:2]
    )
    migrate(writer_dsn)
    writer, reader = OutboxRepository.open(writer_dsn), OutboxRepository.open(reader_dsn)
    try:
        reader.read_consistently()
        assert reader._select("SELECT @@SESSION.wsrep_sync_wait AS w")[0]["w"] == 1, "causal reads are on"
        for i in range(100):
            attempt_id = writer.enqueue(f"causal-{i}", "a@example.com", "s", text_body="t").attempt_id
            assert reader.get_row(attempt_id).notification_id == f"causal-{i}"
    finally:
        writer.close()
        reader.close()


def test_racing_enqueues_on_two_nodes_retried_as_a_whole_make_one_email(cluster: GaleraCluster) -> None:
    """Two nodes enqueue one notification_id at the same moment inside their transactions: one COMMIT
    fails certification with 1213 (raised by the C extension as its own error type, seen here as the
    1213 it is). Retrying the whole transaction, as docs/procedures.md says, ends with one email."""
    import threading

    from email_outbox.db.repository import DRIVER_ERRORS, connect, translate_error
    from email_outbox.errors import TransientDatabaseError

    _create_outbox_database(cluster)
    dsns = [
        DatabaseDsn(MIGRATOR, MIGRATOR_PASSWORD, "127.0.0.1", n.server.port, "outbox")
        for n in cluster.nodes[:2]
    ]
    migrate(dsns[0])
    conflicts = 0

    def business_transaction(
        dsn: DatabaseDsn, notification_id: str, barrier: threading.Barrier
    ) -> tuple[int, int]:
        nonlocal conflicts
        for attempt in range(10):
            conn = connect(dsn)
            conn.autocommit = False
            try:
                cursor = conn.cursor()
                cursor.execute("START TRANSACTION")
                cursor.execute(
                    "CALL email_enqueue(%s, 'ann@example.com', NULL, 's', 't', NULL, NULL, NULL)",
                    (notification_id,),
                )
                ((affected, attempt_id),) = cursor.fetchall()
                while cursor.nextset():
                    pass
                if attempt == 0:
                    barrier.wait(timeout=30)
                conn.commit()
                return int(affected), int(attempt_id)
            except DRIVER_ERRORS as exc:
                error = translate_error(exc)
                assert isinstance(error, TransientDatabaseError), error
                conflicts += 1
            finally:
                conn.close()
        raise AssertionError("no attempt committed")

    for trial in range(5):
        barrier = threading.Barrier(2)
        results: list[tuple[int, int]] = []
        threads = [
            threading.Thread(
                target=lambda d=d: results.append(business_transaction(d, f"race-{trial}", barrier))
            )
            for d in dsns
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(results) == 2
        assert sorted(a for a, _ in results) == [0, 1], "one new email, one duplicate"
        assert results[0][1] == results[1][1], "both callers learn the same attempt id"
    count = "SELECT COUNT(*) AS n FROM outbox.email_delivery_attempts WHERE notification_id LIKE 'race-%'"
    wait_until(
        lambda: query(cluster.nodes[2].server, count)[0]["n"] == 5, 30, "five emails on the third node"
    )
    print(f"certification conflicts absorbed by retrying the transaction: {conflicts}")


def test_a_worker_with_every_node_in_its_dsn_moves_on_when_its_node_dies(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    """kill -9 of the node the worker uses, mid-run: it moves to the next synced node of its DSN, and
    every email is accounted for (this test kills node 1, so it runs last in this module)."""
    from email_outbox.db.repository import OutboxRepository
    from email_outbox.models import Status
    from email_outbox_devtools.localdb import migrate_for_local_use
    from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
    from tests.support.helpers import enqueue_many
    from tests.support.worker_harness import account, drained, spawn_worker

    _create_outbox_database(cluster)
    node1, node2, node3 = ((n.server.port) for n in cluster.nodes)
    everywhere = DatabaseDsn(
        MIGRATOR,
        MIGRATOR_PASSWORD,
        "127.0.0.1",
        node1,
        "outbox",
        alternates=(("127.0.0.1", node2), ("127.0.0.1", node3)),
    )
    migrate_for_local_use(everywhere)
    for table in ("email_delivery_events", "email_delivery_attempts"):  # earlier tests' rows
        query(cluster.nodes[1].server, f"TRUNCATE TABLE outbox.{table}")
    survivor = DatabaseDsn(MIGRATOR, MIGRATOR_PASSWORD, "127.0.0.1", node2, "outbox")
    repo = OutboxRepository.open(survivor)
    repo.read_consistently()
    enqueue_many(repo, 200, prefix="node-loss")
    with SesEndpoint() as endpoint:
        endpoint.set_faults(FaultRule("latency", seconds=0.02))
        worker = spawn_worker(
            everywhere, endpoint.url, tmp_path, "cluster-w", concurrency=4, lease_seconds=20,
            ses_connect_timeout=1, ses_read_timeout=3,
        )  # fmt: skip
        try:
            wait_until(lambda: len(endpoint.accepted()) >= 50, 60, "sends before the node dies")
            cluster.nodes[0].server.kill()
            wait_until(lambda: drained(repo), 120, "the outbox to drain on the surviving nodes")
        finally:
            assert worker.terminate() == 0, worker.log()[-3000:]
        result = account(repo, endpoint, 200)
    repo.close()
    assert result.duplicates == 0
    assert result.by_status[Status.UNKNOWN_OUTCOME] <= 4, "at most what was in flight"
    assert "connected to a later database host" in worker.log()
