"""Priority and cancel with real parts: real worker processes delivering to the local SES endpoint.

- A priority-9 email overtakes a real backlog of thousands of due priority-0 rows worked by a replica
  limited to 50 sends/s: its send starts within 2 s of its enqueue (the figure is printed).
- Two workers claim, reserve and send while four threads cancel: every row is either cancelled (1)
  and never seen by the endpoint, or not cancelled and sent once; never both (the counts are printed),
  and /metrics counts the cancelled rows by reason.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.message import Message
from email_outbox.models import CancelResult, Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.worker_harness import account, drained, health, metric, scrape, spawn_worker, wait_until

BACKLOG = 2_000
SEND_RATE = 50.0
PROBES = 5
LATENCY_LIMIT_SECONDS = 2.0


def enqueue_backlog(repo: OutboxRepository, count: int, prefix: str, priority: int) -> None:
    message = Message(to=["bulk@example.com"], subject="weekly digest", text="t", priority=priority).to_json()
    with repo.transaction():
        for i in range(count):
            repo.enqueue_message(f"{prefix}-{i}", message)


def accepted_at(endpoint: SesEndpoint, attempt_id: int) -> float | None:
    return next((m.accepted_at for m in endpoint.accepted() if m.outbox_id == str(attempt_id)), None)


def test_a_priority_nine_email_overtakes_a_real_backlog(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    enqueue_backlog(repo, BACKLOG, "digest", 0)
    with SesEndpoint() as endpoint:
        endpoint.set_faults(FaultRule("latency", seconds=0.02))
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "paced", max_send_rate=SEND_RATE)
        latencies: list[float] = []
        try:
            wait_until(lambda: len(endpoint.accepted()) >= 100, 60, "the backlog to be flowing at full rate")
            for n in range(PROBES):
                enqueued = time.time()
                message = (
                    '{"to": ["reset@example.com"], "subject": "password reset", "text": "t", "priority": 9}'
                )
                attempt_id = repo.enqueue_message(f"reset-{n}", message).attempt_id
                wait_until(lambda: accepted_at(endpoint, attempt_id) is not None, 30, "the reset to be sent")
                latencies.append(float(accepted_at(endpoint, attempt_id) or 0) - enqueued)
                time.sleep(0.3)  # the next probe lands at another point of the worker's cycle
            backlog_left = repo.get_row_by_notification_id(f"digest-{BACKLOG - 1}").status
        finally:
            assert worker.terminate() == 0
        sent = len(endpoint.accepted())
    print(
        f"\npriority latency: {PROBES} priority-9 emails behind {BACKLOG} due priority-0 rows at"
        f" {SEND_RATE:.0f} sends/s: enqueue to SES acceptance max {max(latencies):.3f} s,"
        f" median {sorted(latencies)[PROBES // 2]:.3f} s ({', '.join(f'{x:.3f}' for x in latencies)});"
        f" {sent} sent meanwhile"
    )
    assert backlog_left is Status.PENDING, "the backlog was still waiting: the probes overtook it"
    assert max(latencies) < LATENCY_LIMIT_SECONDS


ROWS = 600
CANCELLERS = 4


def test_cancels_racing_two_workers_never_cancel_a_sent_email(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    enqueue_backlog(repo, ROWS, "order", 5)
    ids = {repo.get_row_by_notification_id(f"order-{i}").id: f"order-{i}" for i in range(ROWS)}
    results: dict[int, CancelResult] = {}
    lock = threading.Lock()
    order = list(ids)
    random.Random(26).shuffle(order)
    queue = iter(order)

    def cancel_some() -> None:
        own = OutboxRepository.open(dsn)
        try:
            while True:
                with lock:
                    attempt_id = next(queue, None)
                if attempt_id is None:
                    return
                result = own.cancel(ids[attempt_id], "canceller", "the customer cancelled the order")
                with lock:
                    results[attempt_id] = result
                time.sleep(0.002)  # four threads at a few hundred cancels/s: the race lasts the whole run
        finally:
            own.close()

    with SesEndpoint() as endpoint:
        # Slow sends make the workers reserve ahead: cancels meet Pending rows, reservations not yet
        # started, started sends and sent rows.
        endpoint.set_faults(FaultRule("latency", seconds=0.03))
        port = free_port()
        workers = [
            spawn_worker(dsn, endpoint.url, tmp_path, "racer-a", metrics_port=port, stats_interval=0.2),
            spawn_worker(dsn, endpoint.url, tmp_path, "racer-b"),
        ]
        try:
            wait_until(lambda: len(endpoint.accepted()) >= 20, 60, "the workers to be sending")
            threads = [threading.Thread(target=cancel_some) for _ in range(CANCELLERS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            wait_until(lambda: drained(repo), 120, "the outbox to drain")
            failed = repo.unsent_failures(3600)["Cancelled"]
            wait_until(
                lambda: metric(scrape(port), "email_outbox_failed_unsent_24h", reason="Cancelled") == failed,
                30,
                "the gauge to read every cancelled row",
            )
            samples = scrape(port)
            assert health(port) == 200
        finally:
            for worker in workers:
                assert worker.terminate() == 0
        accounting = account(repo, endpoint, ROWS)
        accepted = {int(m.outbox_id or 0) for m in endpoint.accepted()}

    cancelled = {i for i, r in results.items() if r.affected == 1}
    refused = set(results) - cancelled
    by_source = Counter(r.from_status.value for r in results.values() if r.from_status)
    both = cancelled & accepted
    print(
        f"\ncancel race: {ROWS} rows, 2 workers, {CANCELLERS} cancelling threads: cancelled {len(cancelled)}"
        f" (from {dict(sorted(by_source.items()))}), refused {len(refused)}, endpoint accepted {len(accepted)},"
        f" both cancelled and accepted {len(both)}; {accounting}"
    )
    assert len(results) == ROWS
    assert both == set(), "a cancelled email reached SES"
    assert cancelled | accepted == set(ids), "every row was either cancelled or sent"
    for attempt_id in cancelled:
        row = repo.get_row(attempt_id)
        assert (row.status, row.last_error_code) == (Status.FAILED, "Cancelled")
    assert {repo.get_row(i).status for i in refused} <= {Status.SENT}
    assert accounting.by_status[Status.FAILED] == len(cancelled)
    assert cancelled and refused, "the race was not run: no cancel met a send, or none was in time"
    assert metric(samples, "email_outbox_failed_unsent_24h", reason="Cancelled") == len(cancelled)
    assert metric(samples, "email_outbox_failed_unsent_24h", reason="Expired") == 0
