"""A real worker process through an SES outage (503s, then refused connections) with emails arriving
throughout: every email Sent once, none Failed, the calls during the outage bounded; and one email that
fails on its own still ends Failed (docs/design.md, "Provider outages")."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.worker_harness import account, counts, drained, metric, scrape, spawn_worker, wait_until

FAST = {"lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}
# Without the breaker, five attempts at a 0.2 s retry base are used up in about 6 s of outage.
OUTAGE_WORKER = {
    **FAST, "concurrency": 4, "retry_base_seconds": 0.2, "retry_max_seconds": 1,
    "breaker_probe_seconds": 1, "breaker_failures": 5, "breaker_distinct_emails": 3,
}  # fmt: skip


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def sends(port: int) -> float:
    """SES calls this worker made, whatever their outcome."""
    samples = scrape(port)
    return sum(v for (name, _), v in samples.items() if name == "email_outbox_sends_total")


class Arrivals:
    """Emails enqueued on a thread of their own, one every `every` seconds, until stopped."""

    def __init__(self, dsn: DatabaseDsn, every: float) -> None:
        self.dsn, self.every, self.count = dsn, every, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        repo = OutboxRepository.open(self.dsn)
        try:
            while not self.stop.wait(self.every):
                repo.enqueue(f"arrival-{self.count}", f"a{self.count}@example.com", "s", text_body="x")
                self.count += 1
        finally:
            repo.close()

    def __enter__(self) -> Arrivals:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.mark.slow
def test_an_outage_of_503s_then_refused_connections_fails_nothing_and_sends_everything_once(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    for i in range(20):
        repo.enqueue(f"backlog-{i}", f"b{i}@example.com", "s", text_body="x")
    port = free_port()
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", metrics_port=port, **OUTAGE_WORKER)
    try:
        worker.wait_healthy()
        with Arrivals(dsn, 0.05) as arrivals:
            wait_until(lambda: counts(repo)[Status.SENT] >= 10, 60, "the first sends")
            before, down_at = sends(port), time.monotonic()
            endpoint.outage("503")
            wait_until(lambda: repo.breaker_state("ses").state != "closed", 30, "the breaker to open")
            wait_until(
                lambda: (
                    metric(scrape(port), "email_outbox_provider_last_error", code="ServiceUnavailable") == 1
                ),
                10,
                "/metrics to show the provider down and why",
            )
            assert metric(scrape(port), "email_outbox_provider_down_since_timestamp_seconds") > 0
            time.sleep(3)  # the outage goes on: the probes meet 503s
            endpoint.outage("refused")
            time.sleep(3)  # ... then refused connections
            assert repo.breaker_state("ses").down, "the breaker stayed open through the outage"
            assert counts(repo)[Status.FAILED] == 0
            calls, down_seconds = sends(port) - before, time.monotonic() - down_at
            endpoint.outage(None)
            wait_until(
                lambda: repo.breaker_state("ses").state == "closed", 30, "a probe to close the breaker"
            )
        wait_until(lambda: drained(repo), 90, "the backlog to drain")
        samples = scrape(port)
    finally:
        assert worker.terminate() == 0
    total = 20 + arrivals.count
    result = account(repo, endpoint, total)
    assert result.by_status[Status.SENT] == total and result.duplicates == 0
    assert result.by_status[Status.FAILED] == 0 and result.by_status[Status.UNKNOWN_OUTCOME] == 0
    # Bounded: the failures that opened the breaker, the sends already in flight, then one probe a
    # probe interval (1 s here, plus up to a third as jitter).
    bound = OUTAGE_WORKER["breaker_failures"] + OUTAGE_WORKER["concurrency"] + math.ceil(down_seconds) + 2
    print(
        f"calls during a {down_seconds:.1f} s outage: {calls:.0f} (bound {bound}); arrivals {arrivals.count}"
    )
    assert calls <= bound
    assert metric(samples, "email_outbox_provider_breaker_events_total", event="opened") == 1
    assert metric(samples, "email_outbox_provider_breaker_events_total", event="probes") >= 2
    assert metric(samples, "email_outbox_provider_breaker", state="closed") == 1
    # No email used more attempts than the failures before the breaker opened allow.
    assert max(r.attempt_count for r in repo.list_rows(Status.SENT, limit=total)) <= 2
    log = worker.log()
    assert "provider breaker open: sends held without using attempts" in log
    assert "provider answering again: breaker closed, sending resumes" in log


@pytest.mark.slow
def test_one_email_failing_on_its_own_still_uses_its_attempts_and_ends_failed(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    endpoint.set_faults(FaultRule("error", match="broken", status=503, code="ServiceUnavailable"))
    repo.enqueue("broken-1", "broken@example.com", "s", text_body="x", max_attempts=4)
    port = free_port()
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", metrics_port=port, **OUTAGE_WORKER)
    try:
        with Arrivals(dsn, 0.05) as arrivals:
            wait_until(lambda: repo.get_row_by_notification_id("broken-1").status is Status.FAILED, 60,
                       "the broken email to fail")  # fmt: skip
        wait_until(lambda: drained(repo), 60, "the others to drain")
        samples = scrape(port)
    finally:
        assert worker.terminate() == 0
    broken = repo.get_row_by_notification_id("broken-1")
    assert broken.attempt_count == 4 and broken.last_error_code == "ServiceUnavailable"
    result = account(repo, endpoint, 1 + arrivals.count)
    assert result.by_status[Status.SENT] == arrivals.count
    assert metric(samples, "email_outbox_provider_breaker_events_total", event="opened") == 0
    assert repo.breaker_state("ses").since is None, "the breaker never opened"


@pytest.mark.slow
def test_emails_failed_in_an_outage_are_redriven_and_sent_once_under_the_same_notification_id(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """With the breaker off, an outage uses up the attempts and the emails end Failed, as before this
    release; `email-outbox redrive` gives them back and a worker sends each once."""
    endpoint.outage("503")
    for i in range(6):
        repo.enqueue(f"victim-{i}", f"v{i}@example.com", "s", text_body="x", max_attempts=2)
    flags = {**OUTAGE_WORKER, "breaker_failures": 0}
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **flags)
    try:
        wait_until(lambda: counts(repo)[Status.FAILED] == 6, 60, "the outage to fail every email")
        endpoint.outage(None)
        reason = "SES outage, breaker off"
        assert main(["redrive", "--dsn", dsn.url(), "--failed-since", "1h", "--error-code",
                     "ServiceUnavailable", "--by", "ops", "--reason", reason]) == 0  # fmt: skip
        wait_until(lambda: counts(repo)[Status.SENT] == 6, 60, "the redriven emails to be sent")
    finally:
        assert worker.terminate() == 0
    result = account(repo, endpoint, 6)
    assert result.duplicates == 0 and result.by_status[Status.SENT] == 6
    for i in range(6):
        row = repo.get_row_by_notification_id(f"victim-{i}")
        assert row.attempt_count == 1, "a fresh budget: the send after the redrive was its first attempt"
        path = [(e.from_status, e.to_status, e.actor) for e in repo.events(row.id)]
        assert (Status.FAILED, Status.PENDING, "ops") in path
