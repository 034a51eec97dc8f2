"""Worker processes against the local SES endpoint: throughput without duplicates, and every fault path."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import scalar
from tests.support.worker_harness import (
    account,
    counts,
    drained,
    health,
    metric,
    scrape,
    spawn_worker,
    wait_until,
)

FAST = {"lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def enqueue(repo: OutboxRepository, n: int, prefix: str = "e", to: str = "user{i}@example.com") -> None:
    for i in range(n):
        repo.enqueue(
            f"{prefix}-{i}", to.format(i=i), f"subject {i}", text_body="hello", html_body="<p>hi</p>"
        )


def test_four_workers_3000_emails_each_sent_exactly_once(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 3000)
    started = time.monotonic()
    workers = [
        spawn_worker(dsn, endpoint.url, tmp_path, f"w{i}", concurrency=8, batch_size=8) for i in range(4)
    ]
    try:
        wait_until(lambda: drained(repo), 240, "the outbox to drain")
        elapsed = time.monotonic() - started
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0, 0, 0]
    result = account(repo, endpoint, 3000)
    assert result.by_status[Status.SENT] == 3000 and result.accepted_total == 3000
    claimed_by = {r.claimed_by for r in repo.list_rows(Status.SENT, limit=3000)}
    assert len(claimed_by) == 4, "all four replicas took part"
    print(f"3000 emails by 4 workers in {elapsed:.1f}s ({3000 / elapsed:.0f}/s)")
    messages = endpoint.accepted()
    assert all(m.from_address == "shop@example.com" and m.outbox_id for m in messages)


def test_kill_minus_9_worker_mid_run(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 300)
    endpoint.set_faults(FaultRule("latency", seconds=0.2))
    victim = spawn_worker(dsn, endpoint.url, tmp_path, "victim", concurrency=4, **FAST)
    wait_until(lambda: counts(repo)[Status.SENT] >= 20, 60, "the victim to send some")
    wait_until(lambda: counts(repo)[Status.PROCESSING] > 0, 30, "sends in flight")
    victim.kill()
    survivor = spawn_worker(dsn, endpoint.url, tmp_path, "survivor", concurrency=4, **FAST)
    try:
        wait_until(lambda: drained(repo), 120, "the survivor to finish")
    finally:
        assert survivor.terminate() == 0
    result = account(repo, endpoint, 300)
    unknown = repo.list_rows(Status.UNKNOWN_OUTCOME, limit=100)
    assert 1 <= len(unknown) <= 4, "at most `concurrency` rows are ambiguous after a crash"
    assert all(r.claimed_by == "victim" and r.last_error_code == "LeaseExpired" for r in unknown)
    assert result.by_status[Status.SENT] + len(unknown) == 300


def test_kill_minus_9_with_reservations_held_sends_them_later_and_leaves_only_started_rows_ambiguous(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """With slow sends a worker holds reservations: rows claimed ahead, not started. Killed then, the
    rows it was sending go UnknownOutcome as before, and its reservations go back unsent, attempt not
    counted, to be sent once by another worker."""
    enqueue(repo, 60)
    endpoint.set_faults(FaultRule("latency", seconds=0.8))
    victim = spawn_worker(dsn, endpoint.url, tmp_path, "victim", concurrency=4, **FAST)
    reserved = (
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = 'Processing' AND reserved_at IS NOT NULL"
    )
    wait_until(lambda: scalar(repo, reserved) > 0, 60, "the victim to hold reservations")
    victim.kill()
    held = scalar(repo, reserved)
    survivor = spawn_worker(dsn, endpoint.url, tmp_path, "survivor", concurrency=4, **FAST)
    try:
        wait_until(lambda: drained(repo), 120, "the survivor to finish")
    finally:
        assert survivor.terminate() == 0
    result = account(repo, endpoint, 60)
    unknown = repo.list_rows(Status.UNKNOWN_OUTCOME, limit=100)
    assert len(unknown) <= 4, "only the rows being sent are ambiguous, not the reservations"
    released = scalar(
        repo,
        "SELECT COUNT(DISTINCT attempt_id) FROM email_delivery_events WHERE actor = 'lease-sweep'"
        " AND to_status IN ('Pending', 'Retrying') AND detail LIKE '%%before its send started'",
    )
    assert held >= 1 and released == held, "every reservation held at the kill went back unsent"
    assert result.by_status[Status.SENT] + len(unknown) == 60 and result.duplicates == 0


def test_read_timeout_after_accept_goes_unknown_and_is_never_resent(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 30)
    endpoint.set_faults(FaultRule("timeout_after_accept", remaining=3, seconds=3))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=4, **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
        time.sleep(1)  # a resend would have to happen in this window; nothing to await for an absence
    finally:
        assert worker.terminate() == 0
    result = account(repo, endpoint, 30)
    assert result.by_status[Status.UNKNOWN_OUTCOME] == 3 and result.unknown_accepted == 3
    assert all(r.last_error_code == "AmbiguousOutcome" for r in repo.list_rows(Status.UNKNOWN_OUTCOME))


def test_connection_reset_after_accept_is_ambiguous(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 20)
    endpoint.set_faults(FaultRule("reset_after_accept", remaining=2))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=2, **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    result = account(repo, endpoint, 20)
    assert result.by_status[Status.UNKNOWN_OUTCOME] == 2 and result.unknown_accepted == 2


def test_worker_stalled_past_its_lease_is_swept_and_its_late_finalize_refused(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """SES (or the replica) slower than the lease: the row is swept; the late answer changes nothing."""
    enqueue(repo, 1, prefix="slow")
    endpoint.set_faults(FaultRule("hold_after_accept"))
    port = free_port()
    slow = spawn_worker(dsn, endpoint.url, tmp_path, "slow", concurrency=1, metrics_port=port, **FAST)
    wait_until(lambda: len(endpoint.accepted()) == 1, 30, "the send to reach the endpoint")
    slow.proc.send_signal(signal.SIGSTOP)  # the replica stalls with the send open
    sweeper = spawn_worker(dsn, endpoint.url, tmp_path, "sweeper", concurrency=1, **FAST)
    try:
        wait_until(lambda: counts(repo)[Status.UNKNOWN_OUTCOME] == 1, 30, "the sweep")
        endpoint.state.released.set()
        slow.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: "finalize refused" in slow.log(), 30, "the late finalize to be refused")
        # The refusal is what the stale-claimant alert watches.
        assert metric(scrape(port), "email_outbox_finalize_total", result="stale_claimant") == 1
    finally:
        slow.proc.send_signal(signal.SIGCONT)
        assert slow.terminate() == 0 and sweeper.terminate() == 0
    line = next(x for x in slow.log().splitlines() if "finalize refused" in x)
    # Whatever the stalled replica finally heard (the held 200, or its own read timeout), its write is
    # refused and logged at ERROR with the row and the claim token it no longer holds.
    assert "ERROR" in line and "id=1" in line and "claim_token=" in line
    result = account(repo, endpoint, 1)
    assert result.by_status[Status.UNKNOWN_OUTCOME] == 1 and result.unknown_accepted == 1


def test_throttling_counts_no_attempts_and_everything_is_sent(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 40)
    endpoint.set_faults(FaultRule("throttle", remaining=15))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=4, throttle_delay_seconds=0, **FAST)
    try:
        wait_until(lambda: drained(repo), 90, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    result = account(repo, endpoint, 40)
    assert result.by_status[Status.SENT] == 40
    rows = repo.list_rows(Status.SENT, limit=40)
    assert all(r.attempt_count == 1 for r in rows), "a throttled try is not an attempt"
    assert "throttled by SES" in worker.log()
    assert scalar(repo, "SELECT throttled_rate < pace_rate FROM email_send_rate") == 1, (
        "the account's shared rate was cut for every replica"
    )


def test_5xx_then_success_retries_with_attempts_counted(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 5, prefix="ok")
    repo.enqueue("flaky-1", "flaky@example.com", "s", text_body="x")
    endpoint.set_faults(FaultRule("error", remaining=2, match="flaky", status=503, code="ServiceUnavailable"))
    worker = spawn_worker(
        dsn, endpoint.url, tmp_path, "w", concurrency=2, retry_base_seconds=0.2, retry_max_seconds=1, **FAST
    )
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    account(repo, endpoint, 6)
    flaky = repo.get_row_by_notification_id("flaky-1")
    assert flaky.status is Status.SENT and flaky.attempt_count == 3
    path = [(e.from_status, e.to_status) for e in repo.events(flaky.id)]
    assert path.count((Status.PROCESSING, Status.RETRYING)) == 2


def test_permanent_rejection_fails_without_retry(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 10, prefix="bad", to="reject-{i}@example.com")
    enqueue(repo, 10, prefix="good")
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=4, **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    result = account(repo, endpoint, 20)
    failed = repo.list_rows(Status.FAILED)
    assert result.by_status[Status.FAILED] == 10 and all(r.attempt_count == 1 for r in failed)
    assert all(r.last_error_code == "MessageRejected" for r in failed)
    assert endpoint.state.requests == 20, "a rejected email is asked about once"


def test_provider_disabled_claims_nothing_idles_and_says_so(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """It used to claim and release the same rows forever (229 events on one row in 2 minutes)."""
    enqueue(repo, 10)
    port = free_port()
    worker = spawn_worker(
        dsn, endpoint.url, tmp_path, "w", concurrency=4, disable_provider=True, metrics_port=port, **FAST
    )
    try:
        wait_until(lambda: health(port) == 200, 30, "the idle worker to report healthy")
        started = time.monotonic()
        # The quantity under test is time: over two seconds (ten poll intervals), not one claim.
        wait_until(lambda: time.monotonic() - started > 2.0 and health(port) == 200, 10, "two idle seconds")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            detail = json.loads(response.read())
        samples = scrape(port)
    finally:
        assert worker.terminate() == 0
    assert detail["provider_enabled"] is False and detail["claiming"] is False and detail["ok"] is True
    assert metric(samples, "email_outbox_claims_total") == 0
    assert "provider disabled: claiming nothing" in worker.log()
    rows = repo.list_rows(Status.PENDING, limit=10)
    assert len(rows) == 10 and all(r.attempt_count == 0 and len(repo.events(r.id)) == 1 for r in rows)
    assert endpoint.state.requests == 0


def test_sigterm_finishes_in_flight_sends_and_exits_0(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 8)
    endpoint.set_faults(FaultRule("hold_after_accept", seconds=1.5))
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=4, batch_size=4, **FAST)
    wait_until(lambda: len(endpoint.accepted()) == 4, 30, "four sends held open at the endpoint")
    assert counts(repo)[Status.PROCESSING] == 4
    code = worker.terminate()
    assert code == 0
    by_status = counts(repo)
    assert by_status[Status.PROCESSING] == 0
    assert by_status[Status.SENT] == 4, "every in-flight send was finalized before exit"
    assert by_status[Status.PENDING] == 4 and all(
        r.attempt_count == 0 for r in repo.list_rows(Status.PENDING)
    )
    assert "no more claims" in worker.log()
    account(repo, endpoint, 8)


def test_rate_limit_holds_and_no_claimed_row_waits_for_it(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    enqueue(repo, 12)
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", concurrency=8, max_send_rate=4, **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    times = sorted(m.accepted_at for m in endpoint.accepted())
    span = times[-1] - times[0]
    assert span >= (12 - 1 - 1) / 4 * 0.9, f"12 sends at 4/s took only {span:.2f}s"
    claims = [
        e
        for r in repo.list_rows(Status.SENT, limit=12)
        for e in repo.events(r.id)
        if e.to_status is Status.PROCESSING
    ]
    assert len(claims) == 12, "each row was claimed once: none sat claimed waiting for the limiter"
    account(repo, endpoint, 12)


def test_database_killed_and_restarted_mid_run(
    killable_server: TestServer, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    dsn = killable_server.migrated_database("email_outbox_fault")
    repo = OutboxRepository.open(dsn)
    enqueue(repo, 400)
    repo.close()
    endpoint.set_faults(FaultRule("latency", seconds=0.02))
    lease = {"lease_seconds": 20, "ses_connect_timeout": 1, "ses_read_timeout": 2}
    workers = [spawn_worker(dsn, endpoint.url, tmp_path, f"w{i}", concurrency=4, **lease) for i in range(2)]
    try:
        wait_until(lambda: len(endpoint.accepted()) >= 60, 60, "some sends before the crash")
        assert killable_server.private is not None
        killable_server.private.kill()
        time.sleep(1.0)  # the database stays dead for a while; the workers must ride it out
        assert all(w.proc.poll() is None for w in workers), "a worker died with the database"
        killable_server.private.start()
        repo = OutboxRepository.open(dsn)
        wait_until(lambda: drained(repo), 120, "the outbox to drain after the restart")
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0]
    result = account(repo, endpoint, 400)
    assert result.duplicates == 0
    # The claim loop's first call each second is the provider breaker's read: either may meet the outage.
    noticed = ("database unavailable", "claim failed", "provider breaker state not read")
    assert any(line in w.log() for w in workers for line in noticed)
    repo.close()


def test_worker_against_moto_server(dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path) -> None:
    import boto3
    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        url = f"http://{host}:{port}"
        ses = boto3.client(
            "sesv2",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        ses.create_email_identity(
            EmailIdentity="shop@example.com"
        )  # moto sends only from verified identities
        enqueue(repo, 12)
        worker = spawn_worker(dsn, url, tmp_path, "moto-w", concurrency=4, **FAST)
        try:
            wait_until(lambda: drained(repo), 60, "the outbox to drain via moto")
        finally:
            assert worker.terminate() == 0
        rows = repo.list_rows(Status.SENT, limit=20)
        assert len(rows) == 12 and all(r.provider_message_id for r in rows)
        assert len({r.provider_message_id for r in rows}) == 12
    finally:
        moto.stop()


def test_worker_refuses_to_start_without_migrations(fresh_dsn: DatabaseDsn, endpoint: SesEndpoint) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        worker = spawn_worker(fresh_dsn, endpoint.url, Path(tmp), "w", **FAST)
        code = worker.proc.wait(timeout=60)
        assert code != 0 and "email-outbox migrate" in worker.log() and "Traceback" not in worker.log()


def test_worker_refuses_timeouts_that_do_not_fit_the_lease(
    dsn: DatabaseDsn, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", lease_seconds=10, ses_read_timeout=20)
    assert worker.proc.wait(timeout=60) == 2
    assert "half the lease" in worker.log()
    assert os.path.exists(worker.log_path)


def test_json_logs_carry_id_and_notification_id(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    import json

    enqueue(repo, 3, prefix="json")
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", log_format="json", log_level="debug", **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the outbox to drain")
    finally:
        assert worker.terminate() == 0
    lines = [json.loads(line) for line in worker.log().splitlines() if line.strip()]
    sent = [line for line in lines if line["msg"] == "Sent"]
    assert len(sent) == 3
    assert {line["notification_id"] for line in sent} == {"json-0", "json-1", "json-2"}
    assert all(line["message_id"].startswith("local-") and line["level"] == "DEBUG" for line in sent)


def test_large_bodies_are_loaded_per_send_within_the_byte_budget(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    bodies = {f"big-{i}": ("😀" * 100_000 + str(i), f"<p>{'x' * 300_000}{i}</p>") for i in range(4)}
    bodies |= {f"small-{i}": (f"small {i}", None) for i in range(4)}
    for nid, (text, html) in bodies.items():
        repo.enqueue(nid, f"{nid}@example.com", "s", text_body=text, html_body=html)
    worker = spawn_worker(
        dsn, endpoint.url, tmp_path, "w", concurrency=8, batch_size=8, inline_body_bytes=1000,
        body_memory_bytes=1048576, **FAST,
    )  # fmt: skip
    try:
        wait_until(lambda: drained(repo), 60, "every email to go out")
    finally:
        assert worker.terminate() == 0
    assert account(repo, endpoint, 8).by_status[Status.SENT] == 8
    received = {m.to[0].split("@")[0]: (m.text, m.html) for m in endpoint.accepted()}
    assert received == bodies, "byte-exact, whether the bodies came with the claim or were loaded"
