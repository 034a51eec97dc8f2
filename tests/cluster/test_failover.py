"""Failover with accounting: a primary with a semi-synchronous replica, worker replicas
reaching it through a proxy, kill -9 of the primary mid-run, the replica promoted and the proxy moved
to it, as production moves a DNS name or a ProxySQL/MaxScale backend. Every email is accounted for.

`make failover` runs the same scenario with 3,000 emails (EMAIL_OUTBOX_FAILOVER_EMAILS).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import find_server_binary
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from email_outbox_devtools.tcp_proxy import TcpProxy
from tests.support.helpers import enqueue_many
from tests.support.servers import managed_database, promote, query, start_pair
from tests.support.worker_harness import account, counts, drained, spawn_worker, wait_until

pytestmark = [
    pytest.mark.skipif(find_server_binary() is None, reason="no mariadbd/mysqld on PATH"),
    # In `make test` the semi-sync pair's short fault run (tests/cluster/test_faults.py, its last phase
    # the same kill -9 of the primary and promotion, with the checker over the whole history) proves
    # this; the suite's time goes to that one.
    pytest.mark.skipif(
        "EMAIL_OUTBOX_FAILOVER_EMAILS" not in os.environ,
        reason="`make failover` runs it; in `make test` the pair's fault run covers the failover",
    ),
]

EMAILS = int(os.environ.get("EMAIL_OUTBOX_FAILOVER_EMAILS", "300"))
WORKERS, CONCURRENCY = 3, 4


def test_failover_to_a_semi_sync_replica_loses_nothing_and_sends_nothing_twice(tmp_path: Path) -> None:
    pair = start_pair(tmp_path / "servers", semi_sync=True)
    try:
        with TcpProxy(pair.primary.port) as proxy, SesEndpoint() as endpoint:
            direct = managed_database(pair.primary)
            dsn = DatabaseDsn(direct.user, direct.password, "127.0.0.1", proxy.port, direct.database)
            migrate_for_local_use(dsn)
            repo = OutboxRepository.open(dsn)
            enqueue_many(repo, EMAILS, prefix="failover")
            repo.close()
            semi_sync = {
                r["Variable_name"]: r["Value"]
                for r in query(pair.primary, "SHOW STATUS LIKE 'Rpl_semi_sync_master_%'")
            }
            assert (
                semi_sync["Rpl_semi_sync_master_status"] == "ON"
                and semi_sync["Rpl_semi_sync_master_clients"] == "1"
            )

            endpoint.set_faults(FaultRule("latency", seconds=0.02))
            lease = {"lease_seconds": 12, "ses_connect_timeout": 1, "ses_read_timeout": 3}
            workers = [
                spawn_worker(dsn, endpoint.url, tmp_path, f"fo{i}", concurrency=CONCURRENCY, **lease)
                for i in range(WORKERS)
            ]
            try:
                wait_until(lambda: len(endpoint.accepted()) >= EMAILS // 4, 120, "sends before the failover")
                accepted_at_kill = len(endpoint.accepted())
                killed_at = time.monotonic()
                pair.primary.kill()
                promote(pair.replica)
                proxy.switch(pair.replica.port)
                repo = OutboxRepository.open(dsn)
                wait_until(lambda: drained(repo), 180, "the outbox to drain on the promoted replica")
                drained_after = time.monotonic() - killed_at
            finally:
                codes = [w.terminate() for w in workers]
            assert codes == [0] * WORKERS, [w.log()[-2000:] for w in workers]
            result = account(repo, endpoint, EMAILS)
            by_status = counts(repo)
            repo.close()
    finally:
        pair.stop()

    print(
        f"failover: {EMAILS} emails, {WORKERS} workers x {CONCURRENCY}, {accepted_at_kill} accepted before the"
        f" kill, drained {drained_after:.1f}s after it (lease 12 s); {result}"
    )
    assert result.duplicates == 0, "no email accepted twice by the endpoint"
    assert by_status[Status.SENT] + by_status[Status.UNKNOWN_OUTCOME] + by_status[Status.FAILED] == EMAILS
    assert by_status[Status.UNKNOWN_OUTCOME] <= WORKERS * CONCURRENCY, (
        "at most what was in flight at the kill"
    )
    assert by_status[Status.PENDING] == by_status[Status.RETRYING] == by_status[Status.PROCESSING] == 0
