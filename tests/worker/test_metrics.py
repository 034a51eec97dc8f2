"""/metrics and /healthz of a real worker process, scraped over HTTP during and after a real run."""

from __future__ import annotations

from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox.worker.stats import Distribution
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import enqueue_many, scalar
from tests.support.worker_harness import (
    Samples,
    account,
    drained,
    health,
    metric,
    scrape,
    spawn_worker,
    wait_until,
)


def test_distribution_is_cumulative_with_le_semantics() -> None:
    d = Distribution((1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 7.0):
        d.observe(value)
    assert d.cumulative() == [("1.0", 2), ("2.0", 3), ("+Inf", 4)]
    assert d.count == 4 and d.total == 10.0


def live_queue_empty(samples: Samples) -> bool:
    """The gauge has been read since every row left Pending, Retrying and Processing."""
    live = [
        samples.get(("email_outbox_queue_depth", (("status", s),)))
        for s in ("Pending", "Retrying", "Processing")
    ]
    return live == [0, 0, 0]


@pytest.mark.parametrize("send_seconds", [0.0, 0.03], ids=["fast-sends", "slow-sends-reserve-ahead"])
def test_counters_match_what_happened(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path, send_seconds: float
) -> None:
    enqueue_many(repo, 40, prefix="ok")
    for i in range(5):
        repo.enqueue(f"rej-{i}", f"reject-{i}@example.com", "s", text_body="x")
    with SesEndpoint() as endpoint:
        endpoint.set_faults(
            FaultRule("throttle", remaining=3, match="user"), FaultRule("latency", seconds=send_seconds)
        )
        port = free_port()
        worker = spawn_worker(
            dsn, endpoint.url, tmp_path, "metered", concurrency=4, metrics_port=port,
            stats_interval=0.2, throttle_delay_seconds=0,
        )  # fmt: skip
        try:
            wait_until(lambda: health(port) == 200, 30, "the worker to report healthy")
            wait_until(lambda: drained(repo), 90, "the outbox to drain")
            # The queue gauge is read every 0.2 s: wait until it has seen the drained outbox.
            wait_until(lambda: live_queue_empty(scrape(port)), 30, "the queue-depth gauge to catch up")
            samples = scrape(port)
            assert health(port) == 200
        finally:
            assert worker.terminate() == 0
        result = account(repo, endpoint, 45)

    assert result.by_status[Status.SENT] == 40 and result.by_status[Status.FAILED] == 5
    assert metric(samples, "email_outbox_sends_total", outcome="accepted") == 40
    assert metric(samples, "email_outbox_sends_total", outcome="permanent") == 5
    assert metric(samples, "email_outbox_sends_total", outcome="throttled") == 3
    assert metric(samples, "email_outbox_finalize_total", result="Sent") == 40
    assert metric(samples, "email_outbox_finalize_total", result="Failed") == 5
    # Releases are the 3 throttled sends, plus any reservation given back unsent: a worker that finds
    # its sends slow (over 10 ms, as on a loaded machine) reserves ahead, and gives the reservations
    # back while the throttle pauses it. The audit trail says how many there were.
    released, claimed = (
        scalar(repo, "SELECT COUNT(*) FROM email_delivery_events WHERE to_status = %s" + extra, (to,))
        for to, extra in (("Pending", " AND from_status = 'Processing'"), ("Processing", ""))
    )
    assert metric(samples, "email_outbox_finalize_total", result="Released") == released >= 3
    assert metric(samples, "email_outbox_throttle_events_total") == 3
    assert metric(samples, "email_outbox_claimed_rows_total") == claimed == 45 + released
    assert metric(samples, "email_outbox_send_seconds_count") == 48, "45 sends, 3 throttled sent again"
    assert metric(samples, "email_outbox_send_seconds_bucket", le="+Inf") == 48
    # Every accepted send, and only those, timed from its enqueue: all within the run.
    assert metric(samples, "email_outbox_enqueue_to_send_seconds_count") == 40
    assert 0 < metric(samples, "email_outbox_enqueue_to_send_seconds_sum") < 40 * 300
    assert metric(samples, "email_outbox_claim_batch_size_sum") == claimed
    assert metric(samples, "email_outbox_claim_batch_size_count") == metric(
        samples, "email_outbox_claims_total"
    )
    parts = sum(v for (name, _), v in samples.items() if name == "email_outbox_finalize_total")
    assert metric(samples, "email_outbox_finalize_group_size_sum") == parts, "each part in one call"
    assert metric(samples, "email_outbox_in_flight") == 0
    # The account's shared rate, as GetAccount gave it (the local endpoint's default quota), paced at 95%
    # and cut by the throttles; the day's use and no pause.
    assert metric(samples, "email_outbox_account_send_rate", source="ses") == 10000
    assert 0 < metric(samples, "email_outbox_send_rate", source="ses") <= 9500
    assert metric(samples, "email_outbox_daily_quota") == 10_000_000
    assert metric(samples, "email_outbox_daily_sent") > 0
    assert metric(samples, "email_outbox_paused", reason="daily quota") == 0
    # The gauge shows the live queue only: its cost follows the backlog, not the history.
    assert {labels for name, labels in samples if name == "email_outbox_queue_depth"} == {
        (("status", s),) for s in ("Pending", "Retrying", "Processing")
    }
    assert metric(samples, "email_outbox_oldest_due_age_seconds") == 0
    assert metric(samples, "email_outbox_worker_info", worker_id="metered") == 1


def test_finalizes_that_end_together_land_in_one_batch_call(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    """With eight fast sends at a time, finalizes overlap: a real worker lands some of them together
    through email_finalize_batch, and every email is still sent once and finalized once."""
    enqueue_many(repo, 200, prefix="grouped")
    with SesEndpoint() as endpoint:
        port = free_port()
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "grouped", concurrency=8, metrics_port=port)
        try:
            wait_until(lambda: drained(repo), 90, "the outbox to drain")
            samples = scrape(port)
        finally:
            assert worker.terminate() == 0
        result = account(repo, endpoint, 200)
    assert result.by_status[Status.SENT] == 200
    assert metric(samples, "email_outbox_finalize_total", result="Sent") == 200
    # Every part of every call is counted once by result: finalizes, releases and, if the sends were
    # slow for a while, the start marks of reservations.
    parts = sum(v for (name, _), v in samples.items() if name == "email_outbox_finalize_total")
    assert metric(samples, "email_outbox_finalize_group_size_sum") == parts >= 200
    groups = metric(samples, "email_outbox_finalize_group_size_count")
    assert groups < parts, "some went together in one email_finalize_batch call"
    events = scalar(
        repo,
        "SELECT COUNT(*) FROM email_delivery_events e JOIN email_delivery_attempts a ON a.id = e.attempt_id"
        " WHERE a.notification_id LIKE 'grouped%%' AND e.to_status = 'Sent'",
    )
    assert events == 200, "one audit event per finalize, grouped or not"


def test_healthz_turns_503_while_the_database_is_down_and_back_to_200(
    killable_server: TestServer, tmp_path: Path
) -> None:
    dsn = killable_server.migrated_database("email_outbox_health")
    assert killable_server.private is not None
    port = free_port()
    with SesEndpoint() as endpoint:
        worker = spawn_worker(
            dsn, endpoint.url, tmp_path, "health", metrics_port=port, health_stale_seconds=1
        )
        try:
            wait_until(lambda: health(port) == 200, 30, "healthy at start")
            killable_server.private.kill()
            wait_until(lambda: health(port) == 503, 30, "503 with the database gone")
            samples = scrape(port)
            assert metric(samples, "email_outbox_db_errors_total", kind="unavailable") >= 1
            killable_server.private.start()
            wait_until(lambda: health(port) == 200, 60, "healthy again after the restart")
        finally:
            assert worker.terminate() == 0


def test_healthz_is_503_before_the_database_ever_answered(tmp_path: Path) -> None:
    port = free_port()
    nowhere = DatabaseDsn("root", "", "127.0.0.1", free_port(), "email_outbox")
    worker = spawn_worker(nowhere, "http://127.0.0.1:9", tmp_path, "nodb", metrics_port=port)
    try:
        wait_until(lambda: health(port) != 0, 30, "the metrics server to answer")
        assert health(port) == 503
        assert worker.proc.poll() is None, "a missing database stops claiming, not the process"
    finally:
        assert worker.terminate() == 0
