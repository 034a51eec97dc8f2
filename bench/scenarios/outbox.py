"""The outbox: N emails from a backlog through R worker replicas until drained, and its paced latency."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import mysql.connector
from harness import (
    Bench,
    Endpoint,
    aws_env,
    bulk_ids,
    enqueue_bulk,
    lost_and_duplicates,
    make_due,
    percentile,
    proc_cpu_seconds,
    proc_peak_rss_mb,
    wait_drained,
)

from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.worker_process import spawn_worker


@dataclass
class OutboxRun:
    replicas: int
    concurrency: int
    latency_ms: float
    emails: int
    emails_per_s: float
    statements_per_email: float
    calls_per_email: float
    cpu_ms_per_email: float
    empty_claims_per_email: float
    peak_rss_mb: float
    store_cpu_ms_per_email: float = 0.0  # the database server over the same interval
    lost: int = 0
    duplicates: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    # finalizes, releases and starts per database call: above 2, email_finalize_batch carried them
    mean_finalize_group: float = 0.0


def spawn_workers(
    dsn: DatabaseDsn,
    endpoint: Endpoint,
    replicas: int,
    concurrency: int,
    log_dir: Path,
    ses_client: str = "lean",
) -> list[tuple[subprocess.Popen[bytes], int]]:
    procs = []
    for r in range(replicas):
        worker = spawn_worker(
            dsn, endpoint.url, log_dir, f"bench-{r}", env=aws_env(endpoint.url),
            concurrency=concurrency, batch_size=concurrency, poll_interval=0.05,
            metrics_port=free_port(), stats_interval=3600, ses_client=ses_client,
        )  # fmt: skip
        assert worker.metrics_port is not None
        procs.append((worker.proc, worker.metrics_port))
    return procs


def scrape(port: int) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + "".join(f"[{k}={v}]" for k, v in sorted(s.labels.items()))
            out[key] = s.value
    return out


def wait_ready(procs: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    deadline = time.monotonic() + 60
    for _, port in procs:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not become healthy")
            time.sleep(0.05)


def stop_workers(procs: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    for proc, _ in procs:
        proc.send_signal(signal.SIGTERM)
    for proc, _ in procs:
        proc.wait(timeout=60)


def run_outbox(
    bench: Bench,
    latency: float,
    replicas: int,
    concurrency: int,
    emails: int,
    log_dir: Path,
    paced_rate: float = 0.0,
    ses_client: str = "lean",
    observe: Callable[[], AbstractContextManager[object]] | None = None,
) -> OutboxRun:
    """`ses_client`: the worker's SES client, `lean` (its default) or `boto3`. `observe`: a context
    entered once the rows are due and left once they are drained, around the timed interval the
    database's CPU is charged for (bench/db_profile.py profiles the server there)."""
    dsn = bench.fresh_database()
    endpoint = Endpoint(latency)
    try:
        enqueue_bulk(dsn, emails, "bulk", hold=True)
        procs = spawn_workers(dsn, endpoint, replicas, concurrency, log_dir, ses_client)
        try:
            wait_ready(procs)
        except RuntimeError:  # one did not start: the others must not outlive the run
            for proc, _ in procs:
                proc.kill()
                proc.wait(timeout=60)
            raise
        q0, c0 = bench.status("Questions"), bench.status("Com_call_procedure")
        sends_before = endpoint.sends()
        make_due(dsn)
        # The rows are due from here (the fixture's UPDATE has committed, and its CPU is not charged,
        # as Celery's enqueue is not).
        with observe() if observe else contextlib.nullcontext():
            started_at = time.time()
            cpu0 = {p.pid: proc_cpu_seconds(p.pid) for p, _ in procs}
            store0 = proc_cpu_seconds(bench.server_pid)
            wait_drained(dsn, endpoint, sends_before + emails)
            store_cpu = proc_cpu_seconds(bench.server_pid) - store0
        q1, c1 = bench.status("Questions"), bench.status("Com_call_procedure")
        cpu = sum(proc_cpu_seconds(p.pid) - cpu0[p.pid] for p, _ in procs)
        lost, duplicates = lost_and_duplicates(endpoint.id_counts(), bulk_ids(dsn))
        elapsed = endpoint.seconds_to_last_send(started_at)
        rss = max(proc_peak_rss_mb(p.pid) for p, _ in procs)
        metrics = [scrape(port) for _, port in procs]
        empty = sum(m.get("email_outbox_claim_batch_size_bucket[le=0.0]", 0.0) for m in metrics)
        groups = sum(m.get("email_outbox_finalize_group_size_count", 0.0) for m in metrics)
        grouped = sum(m.get("email_outbox_finalize_group_size_sum", 0.0) for m in metrics)
        p50 = p99 = None
        if paced_rate:
            p50, p99 = paced_latency(dsn, paced_rate, min(emails, int(paced_rate * 10)))
        stop_workers(procs)
        return OutboxRun(
            replicas, concurrency, latency * 1000, emails, emails / elapsed, (q1 - q0) / emails,
            (c1 - c0) / emails, cpu * 1000 / emails, empty / emails, rss, store_cpu * 1000 / emails,
            lost, duplicates, p50, p99, grouped / groups if groups else 0.0,
        )  # fmt: skip
    finally:
        endpoint.close()


def paced_latency(dsn: DatabaseDsn, rate: float, n: int) -> tuple[float, float]:
    """Enqueue at a steady rate into a running outbox: enqueue-to-sent latency, database clock."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    start = time.monotonic()
    for i in range(n):
        cur.execute(
            "CALL email_enqueue(%s, 'p@example.com', NULL, 's', 't', NULL, NULL, NULL)", (f"paced-{i}",)
        )
        cur.fetchall()
        while cur.nextset():
            pass
        delay = start + (i + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    wait_drained(dsn)
    cur.execute(
        "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, sent_at) / 1000 FROM email_delivery_attempts"
        " WHERE notification_id LIKE 'paced-%' AND status = 'Sent'"
    )
    values = [float(r[0]) for r in cur.fetchall()]  # type: ignore[index, arg-type]
    conn.close()
    return percentile(values, 50), percentile(values, 99)
