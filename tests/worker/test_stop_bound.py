"""After SIGTERM a worker exits within its stop bound (docs/operations.md, "Stopping a worker"), whatever
its database does: here the server stops answering (SIGSTOP) while four sends are in flight, so their
finalizes can never land. On the way, SIGUSR1 dumps every thread's stack without stopping it. The worker exits with EXIT_ROWS_LEFT naming the rows it left, and once the
server answers again those rows go UnknownOutcome at the end of their lease: none is sent twice."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox.worker.config import load_config
from email_outbox.worker.process import EXIT_ROWS_LEFT
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import enqueue_many
from tests.support.worker_harness import account, drained, spawn_worker, wait_until

# Grace 2 s, read timeout 2 s: the stop bound is 2 + 2 x 2 = 6 s. Before the bound, a finalize on a
# silent server retried until its lease ended (8 s here, 120 s by default) and the process waited for
# it at exit.
STOPPING = {
    "concurrency": 4, "batch_size": 4, "lease_seconds": 8, "ses_connect_timeout": 1, "ses_read_timeout": 2,
    "shutdown_grace_seconds": 2, "db_read_timeout": 2,
}  # fmt: skip


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def test_a_worker_whose_database_stops_answering_mid_send_exits_within_its_stop_bound(
    killable_server: TestServer, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    bound = load_config({"dsn": "mysql://u@h/db", **{k: str(v) for k, v in STOPPING.items()}}, {})
    assert bound.stop_bound_seconds == 6
    dsn = killable_server.migrated_database("email_outbox_stop_bound")
    repo = OutboxRepository.open(dsn)
    server = killable_server.private
    assert server is not None and server.process is not None
    endpoint.set_faults(FaultRule("hold_after_accept", seconds=1.5))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **STOPPING)
    stopped = False
    try:
        wait_until(lambda: "worker started" in worker.log(), 30, "the worker to start")
        worker.dump_stacks()  # SIGUSR1, the operator's aid: every thread's stack, and it carries on
        assert "most recent call first" in worker.log() and 'File "' in worker.log()
        enqueue_many(repo, 8, prefix="stop")
        wait_until(lambda: len(endpoint.accepted()) == 4, 30, "four sends held open at the endpoint")
        assert worker.running()
        os.kill(server.process.pid, signal.SIGSTOP)
        stopped = True
        signalled = time.monotonic()
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.proc.wait(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if stopped:
            os.kill(server.process.pid, signal.SIGCONT)
        if worker.running():
            worker.kill()
    log = worker.log()
    assert took <= bound.stop_bound_seconds + 1, f"exited {took:.1f}s after SIGTERM: {log[-3000:]}"
    assert code == EXIT_ROWS_LEFT, log[-3000:]
    assert "shutdown grace ran out with sends in flight" in log, log[-3000:]
    assert "in_flight_ids" in log, "the rows left are named"

    # The server answers again: the four rows stay claimed until their lease ends, then the sweep makes
    # them UnknownOutcome; a second worker sends the four never claimed, and none of the four again.
    endpoint.set_faults()
    sweeper = spawn_worker(dsn, endpoint.url, tmp_path, "sweeper", **STOPPING)
    try:
        wait_until(lambda: drained(repo), 60, "the lease to end and the rest to be sent")
    finally:
        assert sweeper.terminate() == 0, sweeper.log()[-3000:]
    result = account(repo, endpoint, 8)
    repo.close()
    assert result.duplicates == 0, "a row left in flight was sent again"
    assert result.by_status[Status.UNKNOWN_OUTCOME] == 4 and result.unknown_accepted == 4, str(result)
    assert result.by_status[Status.SENT] == 4, str(result)
