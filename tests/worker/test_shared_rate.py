"""The SES account's send rate and daily quota, shared by real worker processes through the database,
against the local SES endpoint holding the account to its quota as SES does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import spawn_worker as start_worker
from tests.support.helpers import enqueue_many, run_bench, scalar
from tests.support.worker_harness import counts, drained, spawn_worker, wait_until


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def shared(repo: OutboxRepository) -> str:
    status = repo.send_rate_status()
    assert status is not None
    return status.describe()


@pytest.mark.slow
def test_replicas_started_stopped_and_crashed_send_together_at_the_account_rate(tmp_path: Path) -> None:
    """bench/rate.py in its tiny form: 40/s, phases of 1, 4 and 2 replicas (one of the two stopped
    crashed), 4 s each. Each phase delivers at least 85% of the account's rate with fewer than 2% of
    sends throttled: the schedule is paced at 95%, so the margin is ten points of the rate for a
    loaded machine's jitter, and the endpoint's one-second bucket for the sends' timing."""
    output = run_bench("rate.py", "--tiny", "--out", str(tmp_path), timeout=300)
    (results,) = tmp_path.glob("rate-*/results.json")
    phases = json.loads(results.read_text())["phases"]
    assert [p["replicas"] for p in phases] == [1, 4, 2]
    for p in phases:
        assert p["share_of_rate"] >= 0.85, f"{p['replicas']} replicas sent {p['per_second']:.1f}/s of 40"
        assert p["throttled_share"] < 0.02, f"{p['replicas']} replicas: {p['throttled']} throttled"
    assert "throttled %" in output


def test_the_daily_quota_pauses_claims_without_attempts_and_sending_resumes_when_ses_shows_room(
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    endpoint: SesEndpoint,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    endpoint.set_quota(max_send_rate=200, max_24_hour_send=10)
    enqueue_many(repo, 15)
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", account_refresh_seconds=1)
    try:
        wait_until(lambda: counts(repo)[Status.SENT] == 10, 60, "ten rows Sent")
        assert shared(repo).endswith("paused: daily quota")
        by_status = counts(repo)
        assert by_status[Status.SENT] == 10 and by_status[Status.PENDING] == 5
        assert all(r.attempt_count == 0 for r in repo.list_rows(Status.PENDING)), "waiting uses no attempt"
        assert main(["status", "--dsn", dsn.url()]) == 0
        assert "paused: daily quota" in capsys.readouterr().out
        # Several GetAccount reads later, still no room: nothing was tried against SES meanwhile.
        wait_until(lambda: "daily quota used up" in worker.log(), 30, "the pause to be logged")
        assert endpoint.state.quota.throttled == 0, "the replica never spun on SES's refusals"
        endpoint.set_quota(max_24_hour_send=20)
        wait_until(lambda: drained(repo), 60, "sending to resume once GetAccount shows room")
    finally:
        assert worker.terminate() == 0
    assert counts(repo)[Status.SENT] == 15 and len(endpoint.accepted()) == 15
    assert all(r.attempt_count == 1 for r in repo.list_rows(Status.SENT, limit=15))
    assert endpoint.state.quota.throttled == 0
    assert "daily quota has room again" in worker.log()


def test_the_overrides_win_over_get_account(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    endpoint.set_quota(max_send_rate=1000, max_24_hour_send=100000)
    enqueue_many(repo, 12)
    env = {"EMAIL_OUTBOX_ACCOUNT_SEND_RATE": "8", "EMAIL_OUTBOX_POLL_INTERVAL": "0.2"}
    worker = start_worker(dsn, endpoint.url, tmp_path, "w", env=env, account_daily_quota=10)
    try:
        wait_until(lambda: len(endpoint.accepted()) == 10, 60, "ten sends")
        wait_until(lambda: counts(repo)[Status.SENT] == 10, 30, "ten rows Sent")
        status = repo.send_rate_status()
        assert status is not None
        assert (status.account_rate, status.rate_source, status.rate) == (8.0, "override", pytest.approx(7.6))
        assert (status.daily_quota, status.daily_source, status.paused) == (10, "override", "daily quota")
    finally:
        assert worker.terminate() == 0
    times = sorted(m.accepted_at for m in endpoint.accepted())
    # Ten sends at 7.6/s, less the quarter of a second an idle schedule keeps and the 50 ms a send may
    # go before its moment.
    assert times[-1] - times[0] >= (9 / 7.6 - 0.3) * 0.9, "ten sends at 7.6/s"
    assert counts(repo)[Status.PENDING] == 2


def test_get_account_refused_warns_once_and_falls_back_to_the_conservative_default(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    endpoint.set_quota(get_account="deny")
    enqueue_many(repo, 3)
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", account_refresh_seconds=1)
    try:
        wait_until(lambda: drained(repo), 60, "three sends at the default rate")
        wait_until(lambda: worker.log().count("SES GetAccount failed") >= 1, 10, "the warning")
        status = repo.send_rate_status()
        assert status is not None
        assert (status.rate_source, status.account_rate, status.daily_quota) == ("default", 1.0, 200)
        assert "1/s" in shared(repo) or "0.95/s" in shared(repo)
        # Later reads fail too (one a second here) and say nothing more at WARNING.
        wait_until(
            lambda: (
                scalar(repo, "SELECT TIMESTAMPDIFF(SECOND, counted_since, reported_at) FROM email_send_rate")
                >= 2
            ),
            30,
            "later reads",
        )
    finally:
        assert worker.terminate() == 0
    assert worker.log().count("WARNING email_outbox.worker: SES GetAccount failed") == 1
    times = sorted(m.accepted_at for m in endpoint.accepted())
    assert times[-1] - times[0] >= (2 / 0.95 - 0.3) * 0.9, "three sends at 0.95/s"
