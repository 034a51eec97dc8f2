"""Throughput benchmark: the outbox beside the bare SES send loop and Celery + Redis, in one run.

Starts a private database server with durable settings (innodb_flush_log_at_trx_commit=1) and the
local SES endpoint in a process of its own (with a configurable latency), then measures:

- the outbox: N emails enqueued, R worker replicas with concurrency C, until drained. It reports
  emails/s, enqueue-to-sent latency p50/p99 (paced run), database statements per email, worker CPU
  ms per email (and the database server's), empty claims per email, and peak RSS per replica.
- baseline 1, the bare loop: plain boto3 send_email from R processes x C threads, no database;
- the peers: at 0 and 50 ms endpoint latency, the bare loop, Celery + Redis (bench/celery_peer.py:
  acks_late, 2 `celery worker` processes x 8 threads, a private redis-server) and the outbox, all
  2 x 8 on the same N from a backlog, in one table: emails/s, ratio to the bare loop, CPU ms per
  email of senders + store, and lost and duplicated sends counted per id by the endpoint;
- baseline 2, the per-row claim path of the original design (candidates, then email_try_claim per
  row) against email_claim_batch, at R = 1, 2, 4, 8: emails/s and lost claim races per email;
- baseline 3, the database path alone: claim and finalize, no provider call;
- baseline 4, enqueue: CALL email_enqueue per second on 1 and 8 connections, one transaction each;
- table size: claim latency and claim rate (claims/s) with an empty table, 10k and 1M terminal rows.

    .venv/bin/python bench/throughput.py         # the full run: docs/performance.png and the generated
                                                 # block of docs/performance.md (the peers, the claim rate)
    .venv/bin/python bench/throughput.py --tiny  # the few-hundred-email run of `make test`; writes its
                                                 # plot and document copy beside its results.json

The Celery peer needs the `bench` extra (`pip install -e .[bench]`) and a redis-server binary
(db/ensure-server-binary.sh installs Debian's). Benchmarks print figures. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer, free_port
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.worker_process import spawn_worker

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- helpers ---------------------------------------------------------------------------------------
def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Endpoint:
    """The local SES endpoint in a process of its own, so its work is not charged to the harness."""

    def __init__(self, latency: float) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "email_outbox_devtools.ses_endpoint", "--port", str(self.port),
             "--latency", str(latency)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.url + "/_control/health", timeout=1).read()
                return
            time.sleep(0.05)
        raise RuntimeError("the SES endpoint did not start")

    def accepted_count(self) -> int:
        with urllib.request.urlopen(self.url + "/_control/accepted", timeout=30) as r:
            return len(json.loads(r.read()))

    def sends(self) -> int:
        """Send requests taken so far: a cheap count to poll (the accepted list is read once, after)."""
        with urllib.request.urlopen(self.url + "/_control/health", timeout=10) as r:
            return int(json.loads(r.read())["requests"])

    def id_counts(self) -> Counter[str]:
        """How many times the endpoint accepted each `outbox_id` EmailTag."""
        with urllib.request.urlopen(self.url + "/_control/accepted", timeout=60) as r:
            return Counter(str(m["tags"].get("outbox_id")) for m in json.loads(r.read()))

    def reset(self) -> None:
        req = urllib.request.Request(self.url + "/_control/reset", method="POST", data=b"")
        urllib.request.urlopen(req, timeout=10).read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def lost_and_duplicates(counts: Counter[str], expected: list[str]) -> tuple[int, int]:
    """Expected ids the endpoint never accepted, and ids it accepted more than once."""
    return sum(1 for i in expected if counts[i] == 0), sum(1 for i in expected if counts[i] > 1)


def aws_env(endpoint_url: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_SESV2": endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }


@dataclass
class Bench:
    server: PrivateServer
    names: Iterator[int] = field(default_factory=lambda: iter(range(1, 10**9)))

    def fresh_database(self) -> DatabaseDsn:
        name = f"bench_{next(self.names)}"
        conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        dsn = DatabaseDsn.parse(self.server.dsn(name))
        migrate_for_local_use(dsn)
        return dsn

    @property
    def server_pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def status(self, name: str) -> int:
        conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root")
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        row = cur.fetchone()
        conn.close()
        return int(row[1]) if row else 0  # type: ignore[index, arg-type]


def enqueue_bulk(
    dsn: DatabaseDsn, n: int, prefix: str, per_commit: int = 200, connections: int = 4, hold: bool = False
) -> None:
    """n emails through email_enqueue; with `hold` they are due an hour from now (see make_due)."""
    send_after = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1) if hold else None

    def part(k: int) -> None:
        conn = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
        cur = conn.cursor()
        for start in range(k, n, connections * per_commit):
            conn.start_transaction()
            for i in range(start, min(start + per_commit, n)):
                cur.execute(
                    "CALL email_enqueue(%s, %s, NULL, %s, %s, NULL, NULL, %s)",
                    (f"{prefix}-{i}", f"user{i}@example.com", f"subject {i}", "hello", send_after),
                )
                cur.fetchall()
                while cur.nextset():
                    pass
            conn.commit()
        conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(part, [i * per_commit for i in range(connections)]))


def make_due(dsn: DatabaseDsn) -> None:
    """A benchmark fixture, not a transition: make every held row due now, so timing starts with the
    workers already up (their start-up is not charged to the outbox; the bare loop's is not either)."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute(
        "UPDATE email_delivery_attempts SET next_attempt_at = UTC_TIMESTAMP(6) WHERE status = 'Pending'"
    )
    conn.close()


def open_count(dsn: DatabaseDsn) -> int:
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute(
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE status IN ('Pending','Retrying','Processing')"
    )
    (n,) = cur.fetchone()  # type: ignore[misc]
    conn.close()
    return int(n)


def bulk_ids(dsn: DatabaseDsn) -> list[str]:
    """The ids the worker tags its sends with (OUTBOX_ID_TAG), for the backlog rows."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT id FROM email_delivery_attempts WHERE notification_id LIKE 'bulk-%'")
    ids = [str(r[0]) for r in cur.fetchall()]  # type: ignore[index]
    conn.close()
    return ids


STALL_SECONDS = 2.0


def wait_drained(
    dsn: DatabaseDsn, endpoint: Endpoint | None = None, emails: int = 0, timeout: float = 900
) -> None:
    """Until no row is open. With `endpoint`, first until it has taken `emails` sends, or its count
    has stood still for `STALL_SECONDS` (a row that ends without a send), polled there as the Celery
    peer's run is: a poll of the database costs its server about 0.9 ms at 4,000 open rows (a
    connection and a count), which the outbox's CPU per email would otherwise carry."""
    deadline = time.monotonic() + timeout
    seen, moved = -1, time.monotonic()
    while endpoint is not None and seen < emails and time.monotonic() - moved < STALL_SECONDS:
        if (now_seen := endpoint.sends()) > seen:
            seen, moved = now_seen, time.monotonic()
        time.sleep(0.05)
    while open_count(dsn) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not drain")
        time.sleep(0.05)


# --- the outbox run --------------------------------------------------------------------------------
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


def spawn_workers(
    dsn: DatabaseDsn, endpoint: Endpoint, replicas: int, concurrency: int, log_dir: Path
) -> list[tuple[subprocess.Popen[bytes], int]]:
    procs = []
    for r in range(replicas):
        worker = spawn_worker(
            dsn, endpoint.url, log_dir, f"bench-{r}", env=aws_env(endpoint.url),
            concurrency=concurrency, batch_size=concurrency, poll_interval=0.05,
            metrics_port=free_port(), stats_interval=3600,
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
) -> OutboxRun:
    dsn = bench.fresh_database()
    endpoint = Endpoint(latency)
    try:
        enqueue_bulk(dsn, emails, "bulk", hold=True)
        procs = spawn_workers(dsn, endpoint, replicas, concurrency, log_dir)
        wait_ready(procs)
        cpu0 = {p.pid: proc_cpu_seconds(p.pid) for p, _ in procs}
        store0 = proc_cpu_seconds(bench.server_pid)
        q0, c0 = bench.status("Questions"), bench.status("Com_call_procedure")
        sends_before = endpoint.sends()
        make_due(dsn)
        started = time.monotonic()
        wait_drained(dsn, endpoint, sends_before + emails)
        elapsed = time.monotonic() - started
        store_cpu = proc_cpu_seconds(bench.server_pid) - store0
        q1, c1 = bench.status("Questions"), bench.status("Com_call_procedure")
        cpu = sum(proc_cpu_seconds(p.pid) - cpu0[p.pid] for p, _ in procs)
        lost, duplicates = lost_and_duplicates(endpoint.id_counts(), bulk_ids(dsn))
        rss = max(proc_peak_rss_mb(p.pid) for p, _ in procs)
        metrics = [scrape(port) for _, port in procs]
        empty = sum(m.get("email_outbox_claim_batch_size_bucket[le=0.0]", 0.0) for m in metrics)
        p50 = p99 = None
        if paced_rate:
            p50, p99 = paced_latency(dsn, paced_rate, min(emails, int(paced_rate * 10)))
        stop_workers(procs)
        return OutboxRun(
            replicas, concurrency, latency * 1000, emails, emails / elapsed, (q1 - q0) / emails,
            (c1 - c0) / emails, cpu * 1000 / emails, empty / emails, rss, store_cpu * 1000 / emails,
            lost, duplicates, p50, p99,
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


def run_in_lockstep(target: Callable[..., None], args: list[tuple[Any, ...]]) -> float:
    """Start one process per args tuple, wait until every one is ready, release them together, and
    return the seconds from the release until the last one finished."""
    ctx = mp.get_context("fork")
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [ctx.Process(target=target, args=(*a, ready, go)) for a in args]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=60):
            raise RuntimeError(f"a {target.__name__} process did not start")
    started = time.monotonic()
    go.set()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError(f"a {target.__name__} process failed")
    return time.monotonic() - started


# --- baseline 1: the bare loop ---------------------------------------------------------------------
def _bare_process(
    endpoint_url: str, threads: int, n: int, offset: int, cpu: Any, ready: Any, go: Any
) -> None:
    import boto3
    from botocore.config import Config

    os.environ.update(aws_env(endpoint_url))
    client = boto3.client(
        "sesv2",
        region_name="us-east-1",  # boto3 reads AWS_DEFAULT_REGION, not AWS_REGION (docs/design.md section 5)
        config=Config(
            retries={"total_max_attempts": 1},
            max_pool_connections=threads,
            connect_timeout=5,
            read_timeout=20,
        ),
    )
    ready.release()
    go.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)

    def send(i: int) -> None:
        client.send_email(
            FromEmailAddress="shop@example.com",
            Destination={"ToAddresses": [f"user{i}@example.com"]},
            Content={"Simple": {"Subject": {"Data": f"subject {i}"}, "Body": {"Text": {"Data": "hello"}}}},
            EmailTags=[{"Name": "outbox_id", "Value": str(i)}],
        )

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(send, range(offset, offset + n)))
    after = resource.getrusage(resource.RUSAGE_SELF)
    with cpu.get_lock():
        cpu.value += (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


@dataclass
class BareRun:
    emails_per_s: float
    cpu_ms_per_email: float  # the senders from the release on: no database, no broker
    lost: int
    duplicates: int


def run_bare(latency: float, replicas: int, concurrency: int, emails: int) -> BareRun:
    """Plain boto3 sends from R processes x C threads; CPU is counted from the release, as for the
    outbox and Celery (whose workers are up before their clocks start)."""
    endpoint = Endpoint(latency)
    share = emails // replicas
    cpu = mp.get_context("fork").Value("d", 0.0)
    try:
        elapsed = run_in_lockstep(
            _bare_process, [(endpoint.url, concurrency, share, r * share, cpu) for r in range(replicas)]
        )
        lost, duplicates = lost_and_duplicates(
            endpoint.id_counts(), [str(i) for i in range(share * replicas)]
        )
    finally:
        endpoint.close()
    return BareRun(share * replicas / elapsed, cpu.value * 1000 / (share * replicas), lost, duplicates)


# --- baselines 2 and 3: the claim paths, database only ---------------------------------------------
def _claim_process(
    dsn_url: str, path: str, batch: int, total: int, counts: Any, lost: Any, ready: Any, go: Any
) -> None:
    repo = OutboxRepository.open(DatabaseDsn.parse(dsn_url))
    me = f"db-{os.getpid()}"
    ready.release()
    go.wait()
    races = 0
    idle = 0
    while idle < 3:
        if path == "batch":
            # SKIP LOCKED never makes a batch claim fail; what it can cost is a short batch while rows
            # were left. Count that shortfall against what was unclaimed just before the call (an
            # upper bound: other replicas' claims in between count too).
            with counts.get_lock():
                remaining = total - counts.value
            token = uuid.uuid4().hex
            rows = repo.claim_batch(token, me, 60, batch)
            claimed = [(r.id, token) for r in rows]
            races += max(0, min(batch, remaining) - len(rows))
            with counts.get_lock():
                counts.value += len(rows)
        else:
            claimed = []
            for c in repo.claimable_candidates(batch):
                token = uuid.uuid4().hex
                if repo.try_claim(c.id, token, me, 60) == 1:
                    claimed.append((c.id, token))
                else:
                    races += 1
            with counts.get_lock():
                counts.value += len(claimed)
        if not claimed:
            idle += 1
            continue
        idle = 0
        for attempt_id, token in claimed:
            repo.finalize_sent(attempt_id, token, "m-" + token[:8])

    with lost.get_lock():
        lost.value += races
    repo.close()


@dataclass
class ClaimRun:
    path: str
    replicas: int
    emails_per_s: float
    lost_per_email: float


def run_claim_path(bench: Bench, path: str, replicas: int, emails: int, batch: int = 8) -> ClaimRun:
    dsn = bench.fresh_database()
    enqueue_bulk(dsn, emails, "db")
    counts, lost = mp.get_context("fork").Value("l", 0), mp.get_context("fork").Value("l", 0)
    elapsed = run_in_lockstep(
        _claim_process, [(dsn.url(), path, batch, emails, counts, lost) for _ in range(replicas)]
    )
    assert counts.value == emails, f"{path}: {counts.value} of {emails} finalized"
    return ClaimRun(path, replicas, emails / elapsed, lost.value / emails)


# --- baseline 4: enqueue -----------------------------------------------------------------------------
def run_enqueue(bench: Bench, connections: int, seconds: float) -> float:
    dsn = bench.fresh_database()
    stop = threading.Event()
    made = [0] * connections

    def loop(k: int) -> None:
        conn = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
        cur = conn.cursor()
        i = 0
        while not stop.is_set():
            conn.start_transaction()
            cur.execute(
                "CALL email_enqueue(%s, 'a@example.com', NULL, 's', 't', NULL, NULL, NULL)", (f"enq-{k}-{i}",)
            )
            cur.fetchall()
            while cur.nextset():
                pass
            conn.commit()
            i += 1
        made[k] = i
        conn.close()

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(made) / seconds


# --- table size --------------------------------------------------------------------------------------
FILL_COLUMNS = (
    "notification_id, to_address, subject, text_body, status, attempt_count, max_attempts,"
    " next_attempt_at, sent_at, provider_message_id, created_at, updated_at"
)
FILL_VALUES = (
    "CONCAT('hist-', {start} + seq), 'old@example.com', 's', 't', 'Sent', 1, 5,"
    " UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY, 'm',"
    " UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY"
)


def fill_terminal_rows(dsn: DatabaseDsn, n: int) -> None:
    """History rows straight into the table (a fixture, not a transition): Sent, a month ago."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    mariadb = "mariadb" in str(cur.fetchone()[0]).lower()  # type: ignore[index]
    chunk = 50_000
    for start in range(0, n, chunk):
        last = min(chunk, n - start) - 1
        values = FILL_VALUES.format(start=int(start))
        if mariadb:  # the sequence engine
            sql = f"INSERT INTO email_delivery_attempts ({FILL_COLUMNS}) SELECT {values} FROM seq_0_to_{last}"
        else:  # MySQL 8: a recursive CTE
            cur.execute(f"SET SESSION cte_max_recursion_depth = {chunk + 1}")
            sql = (
                f"INSERT INTO email_delivery_attempts ({FILL_COLUMNS}) WITH RECURSIVE s(seq) AS"
                f" (SELECT 0 UNION ALL SELECT seq + 1 FROM s WHERE seq < {last}) SELECT {values} FROM s"
            )
        cur.execute(sql)
    cur.execute("ANALYZE TABLE email_delivery_attempts")
    cur.fetchall()
    conn.close()


def settle(bench: Bench, timeout: float = 180) -> float:
    """Wait until InnoDB has flushed and purged what the fixtures wrote (dirty pages under 1% of the
    pool, purge history under 1,000), so each table is measured as it stands in steady state and not
    while the server is still writing back a million inserted rows. Returns the seconds waited."""
    conn = mysql.connector.connect(host="127.0.0.1", port=bench.server.port, user="root", autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
    (pct,) = cur.fetchone()  # type: ignore[misc]
    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")  # the page cleaner flushes at full speed
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            dirty = bench.status("Innodb_buffer_pool_pages_dirty")
            total = max(1, bench.status("Innodb_buffer_pool_pages_total"))
            history = bench.status("Innodb_history_list_length")
            if dirty < total / 100 and history < 1000:
                break
            time.sleep(0.5)
    finally:
        cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(pct)}")  # type: ignore[arg-type]
        conn.close()
    return time.monotonic() - started


def claim_rates(bench: Bench, histories: list[int], claims: int, blocks: int = 10) -> list[dict[str, Any]]:
    """email_claim_batch(8) on one connection per table, each table holding `history` terminal rows and
    a backlog to claim. The tables are measured in alternating blocks of claims (forwards, then
    backwards), so a drift of the machine over the run falls on every table alike. Finalizes follow
    each claim and are not timed."""
    dsns = {}
    for h in histories:
        dsn = bench.fresh_database()
        fill_terminal_rows(dsn, h)
        enqueue_bulk(dsn, claims * 8, "due")
        dsns[h] = dsn
    waited = settle(bench)
    repos = {h: OutboxRepository.open(dsn) for h, dsn in dsns.items()}
    times: dict[int, list[float]] = {h: [] for h in histories}
    per_block = max(1, claims // blocks)
    for b in range(blocks):
        for h in histories if b % 2 == 0 else histories[::-1]:
            repo = repos[h]
            for _ in range(per_block):
                token = uuid.uuid4().hex
                t0 = time.perf_counter()
                rows = repo.claim_batch(token, "rate", 60, 8)
                times[h].append((time.perf_counter() - t0) * 1000)
                for r in rows:
                    repo.finalize_sent(r.id, token, "m")
    for repo in repos.values():
        repo.close()
    return [
        {
            "history_rows": h,
            "claims": len(times[h]),
            "settle_s": waited,
            "p50_ms": percentile(times[h], 50),
            "p99_ms": percentile(times[h], 99),
            # claim_batch(8) calls per second of claiming on one connection (finalizes not timed)
            "claims_per_s": len(times[h]) / (sum(times[h]) / 1000),
        }
        for h in histories
    ]


# --- the peers: bare loop, Celery + Redis, outbox --------------------------------------------------
PEER_LATENCIES = (0.0, 0.05)
PEER_SYSTEMS = ("bare boto3 loop", "Celery + Redis", "outbox")


def run_celery_peer(
    latency: float, replicas: int, concurrency: int, emails: int, log_dir: Path
) -> dict[str, Any]:
    import celery_peer  # bench/celery_peer.py; needs the `bench` extra (celery, redis) and redis-server

    endpoint = Endpoint(latency)
    try:
        run = celery_peer.run_celery(
            endpoint.url, endpoint.sends, latency, replicas, concurrency, emails, log_dir
        )
        lost, duplicates = lost_and_duplicates(
            endpoint.id_counts(), [celery_peer.celery_id(i) for i in range(emails)]
        )
    finally:
        endpoint.close()
    return {**asdict(run), "lost": lost, "duplicates": duplicates}


@dataclass
class Measured:
    """One Celery run at one latency."""

    emails_per_s: float
    cpu_ms_per_email: float  # senders + store
    lost: int
    duplicates: int
    detail: dict[str, Any] = field(default_factory=dict)


def measure_round_robin(
    bench: Bench,
    systems: tuple[str, ...],
    latency: float,
    replicas: int,
    concurrency: int,
    emails: int,
    log_dir: Path,
    rounds: int,
) -> dict[str, list[Any]]:
    """Every system `rounds` times at this latency; round k starts with system k, so neither a drift of
    the machine nor going first or last favours one system. The outbox's and the bare loop's runs
    come back as OutboxRun and BareRun, Celery's as Measured."""
    out: dict[str, list[Any]] = {s: [] for s in systems}
    for k in range(rounds):
        for system in systems[k % len(systems) :] + systems[: k % len(systems)]:
            if system == "bare boto3 loop":
                bare = run_bare(latency, replicas, concurrency, emails)
                out[system].append(bare)
                line = f"{bare.emails_per_s:.0f}/s, CPU {bare.cpu_ms_per_email:.2f} ms/email"
            elif system == "Celery + Redis":
                cel = run_celery_peer(latency, replicas, concurrency, emails, log_dir)
                out[system].append(
                    Measured(
                        cel["emails_per_s"], cel["cpu_ms_per_email"], cel["lost"], cel["duplicates"], cel
                    )
                )
                line = (f"{cel['emails_per_s']:.0f}/s, CPU {cel['cpu_ms_per_email']:.2f} ms/email"
                        f" (redis-server {cel['broker_cpu_ms_per_email']:.2f}), lost {cel['lost']}, duplicates {cel['duplicates']}")  # fmt: skip
            else:
                run = run_outbox(bench, latency, replicas, concurrency, emails, log_dir)
                out[system].append(run)
                line = (f"{run.emails_per_s:.0f}/s, CPU {run.cpu_ms_per_email:.2f} ms/email"
                        f" (+ database {run.store_cpu_ms_per_email:.2f}), lost {run.lost}, duplicates {run.duplicates}")  # fmt: skip
            print(
                f"  round {k + 1}/{rounds}, {system} {replicas} x {concurrency} at {latency * 1000:g} ms: {line}",
                flush=True,
            )
    return out


def middle(runs: list[Any]) -> Any:
    """The run with the median emails/s (the lower middle for an even count)."""
    return sorted(runs, key=lambda r: r.emails_per_s)[(len(runs) - 1) // 2]


def peer_row(system: str, latency: float, runs: list[Any]) -> dict[str, Any]:
    """The table's row: median emails/s and CPU per email over the rounds, lost and duplicates summed."""

    def cpu(r: Any) -> float:
        return (
            float(r.cpu_ms_per_email + r.store_cpu_ms_per_email)
            if isinstance(r, OutboxRun)
            else float(r.cpu_ms_per_email)
        )

    return {
        "system": system,
        "latency_ms": latency * 1000,
        "emails_per_s": statistics.median(r.emails_per_s for r in runs),
        "cpu_ms_per_email": statistics.median(cpu(r) for r in runs),
        "lost": sum(r.lost for r in runs),
        "duplicates": sum(r.duplicates for r in runs),
        "rounds_emails_per_s": [r.emails_per_s for r in runs],
        "rounds_cpu_ms_per_email": [cpu(r) for r in runs],
        "rounds_detail": [r.detail if isinstance(r, Measured) else asdict(r) for r in runs],
    }


def peer_table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """One table: system, latency, emails/s, ratio to bare, CPU ms per email, lost, duplicates."""
    out = []
    for latency_ms in sorted({r["latency_ms"] for r in rows}):
        at = {r["system"]: r for r in rows if r["latency_ms"] == latency_ms}
        bare = at["bare boto3 loop"]["emails_per_s"]
        for system in PEER_SYSTEMS:
            if system not in at:
                continue
            r = at[system]
            out.append([system, f"{latency_ms:g} ms", f"{r['emails_per_s']:,.0f}", f"{r['emails_per_s'] / bare:.2f}",
                        f"{r['cpu_ms_per_email']:.2f}", str(r["lost"]), str(r["duplicates"])])  # fmt: skip
    return out


PEER_HEADER = ["system", "latency", "emails/s", "ratio to bare", "CPU ms/email", "lost", "duplicates"]


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=False)]
    for line in [header, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip(), flush=True)


def markdown_table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, align, *rows])


def claim_rate_rows(table_size: list[dict[str, Any]]) -> list[list[str]]:
    empty = next(t for t in table_size if t["history_rows"] == 0)
    return [[f"{t['history_rows']:,}", f"{t['claims_per_s']:,.0f}", f"{t['claims_per_s'] / empty['claims_per_s']:.2f}",
             f"{t['p50_ms']:.2f} ms", f"{t['p99_ms']:.2f} ms"] for t in table_size]  # fmt: skip


CLAIM_HEADER = ["terminal rows already in the table", "claims/s", "of the empty table's rate", "p50", "p99"]
X = "\N{MULTIPLICATION SIGN}"
DOC_BEGIN = "<!-- bench/throughput.py: peers begin -->"
DOC_END = "<!-- bench/throughput.py: peers end -->"


def rounds_rows(peers: list[dict[str, Any]]) -> list[list[str]]:
    return [[r["system"], f"{r['latency_ms']:g} ms", ", ".join(f"{v:,.0f}" for v in r["rounds_emails_per_s"]),
             ", ".join(f"{v:.2f}" for v in r["rounds_cpu_ms_per_email"])] for r in peers]  # fmt: skip


def doc_section(results: dict[str, Any]) -> str:
    peers = results["peers"]
    n = results["emails_per_run"]
    rounds = results["peer_rounds"]
    r = results["latency_sweep_replicas"]
    sizes = results["table_size"]
    return f"""{DOC_BEGIN}
<!-- Written by bench/throughput.py from its last full run ({results["date"]}); edit the script, not this block. -->
Measured {results["date"]}: {results["cpus"]} cores, {results["server"]} (durable), {n:,} emails per run
from a backlog, {r} processes {X} 8 concurrent sends for every system, a fresh local SES endpoint per
run. Each system ran {rounds} times at each latency, in rotating order (round k starts with the k-th
system), so neither a drift of the machine nor going first favours one; emails/s and CPU are the
medians. CPU per email is the senders' CPU from the moment the clock starts, plus the store's: the
database server for the outbox, redis-server for Celery, none for the bare loop. Lost and duplicates
come from the endpoint's records, by the unique id each send carries in an EmailTag, summed over the
rounds ({n * rounds:,} sends per system and latency): lost are ids it never accepted, duplicates ids
it accepted more than once.

{markdown_table(PEER_HEADER, peer_table(peers), right_from=2)}

- **Bare boto3 loop**: `send_email` from {r} processes {X} 8 threads, no store: the ceiling.
- **Celery + Redis** (`bench/celery_peer.py`): Celery {results.get("celery_version", "?")} with redis-py and a
  private `redis-server` ({results.get("redis_version", "?")}, in memory only: `--save "" --appendonly no`).
  `task_acks_late=True`, `worker_prefetch_multiplier=1`, no result backend, {r} `celery worker`
  processes with `--pool threads --concurrency 8`. The tasks are enqueued first, on a queue no
  worker consumes; the workers start on their empty queue, and once each answers a ping the backlog
  is moved onto it at once (a Redis `RENAME` of the list kombu keeps the queue in, which wakes the
  workers' blocked `BRPOP`) and the clock starts. It stops when the endpoint has taken all the sends.
- **Outbox**: {r} worker replicas {X} concurrency 8 on the durable database; the clock runs from making
  the held rows due until every row is final.

Every round (emails/s; CPU ms per email):

{markdown_table(["system", "latency", "emails/s per round", "CPU ms/email per round"], rounds_rows(peers), right_from=2)}

The claim rate with history: `email_claim_batch(limit 8)` on one connection, {sizes[0]["claims"]:,}
claims per table (finalizes follow each claim and are not timed), with the table empty and with
terminal (`Sent`) rows already in it. The tables are filled, then InnoDB is left to flush and purge
what the fill wrote ({sizes[0]["settle_s"]:.0f} s), and then they are measured in alternating blocks of
claims, so a drift of the machine falls on each alike.

{markdown_table(CLAIM_HEADER, claim_rate_rows(sizes))}
{DOC_END}"""


def write_doc(results: dict[str, Any], source: Path, target: Path) -> None:
    """Replace the generated block of docs/performance.md (appended once if the document has none)."""
    text = source.read_text() if source.exists() else "# Performance\n"
    section = doc_section(results)
    if DOC_BEGIN in text and DOC_END in text:
        head, rest = text.split(DOC_BEGIN, 1)
        text = head + section + rest.split(DOC_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Beside Celery + Redis and the bare loop\n\n" + section + "\n"
    target.write_text(text)


# --- report ------------------------------------------------------------------------------------------
def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.4))
    by_r = results["replica_sweep"]
    left.plot([r["replicas"] for r in by_r], [r["emails_per_s"] for r in by_r], "o-", label="outbox")
    left.plot(
        [r["replicas"] for r in by_r], [r["bare_emails_per_s"] for r in by_r], "s--", label="bare boto3 loop"
    )
    left.set_xlabel("replicas (concurrency 8 each)")
    left.set_ylabel("emails/s")
    left.set_title(f"emails/s vs replicas, endpoint latency {results['replica_sweep_latency_ms']:g} ms")
    left.grid(alpha=0.3)
    left.legend()
    by_l = results["latency_sweep"]
    middle.plot([r["latency_ms"] for r in by_l], [r["emails_per_s"] for r in by_l], "o-", label="outbox")
    middle.plot(
        [r["latency_ms"] for r in by_l],
        [r["bare_emails_per_s"] for r in by_l],
        "s--",
        label="bare boto3 loop",
    )
    middle.plot(
        [r["latency_ms"] for r in by_l], [r["ideal_emails_per_s"] for r in by_l], ":", label="R x C / latency"
    )
    middle.set_xlabel("endpoint latency (ms)")
    middle.set_ylabel("emails/s")
    middle.set_title(f"emails/s vs endpoint latency, {results['latency_sweep_replicas']} replicas x 8")
    middle.set_yscale("log")
    middle.grid(alpha=0.3)
    middle.legend()
    peers = results["peers"]
    latencies = sorted({r["latency_ms"] for r in peers})
    width = 0.8 / len(PEER_SYSTEMS)
    for k, system in enumerate(PEER_SYSTEMS):
        at = {r["latency_ms"]: r["emails_per_s"] for r in peers if r["system"] == system}
        xs = [i + (k - (len(PEER_SYSTEMS) - 1) / 2) * width for i in range(len(latencies))]
        bars = right.bar(xs, [at.get(lat, 0.0) for lat in latencies], width, label=system)
        right.bar_label(bars, fmt="%.0f", fontsize=8)
    right.set_xticks(range(len(latencies)), [f"{lat:g} ms" for lat in latencies])
    right.set_xlabel("endpoint latency")
    right.set_ylabel("emails/s")
    right.set_title(f"the peers, {results['latency_sweep_replicas']} processes x 8, same run")
    right.grid(alpha=0.3, axis="y")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def versions() -> dict[str, str]:
    out = {}
    with contextlib.suppress(Exception):
        import celery

        out["celery_version"] = str(celery.__version__)
    with contextlib.suppress(Exception):
        text = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False
        ).stdout
        out["redis_version"] = "redis-server " + text.split("v=", 1)[1].split()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few hundred emails: proves the harness runs")
    parser.add_argument("--emails", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--history", type=int, default=1_000_000, help="terminal rows for the table-size test"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"), help="JSON results and logs")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "performance.png"))
    parser.add_argument(
        "--doc", default=str(ROOT / "docs" / "performance.md"), help="its generated block is rewritten"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each peer at 0 and 50 ms; the table gives the median"
    )
    args = parser.parse_args(argv)
    tiny = args.tiny
    emails = 300 if tiny else args.emails
    c = args.concurrency
    replica_counts = [1, 2] if tiny else [1, 2, 4]
    latencies = [0.0, 0.05] if tiny else [0.0, 0.02, 0.05]
    claim_replicas = [1, 2] if tiny else [1, 2, 4, 8]
    history = [0, 2_000, 10_000] if tiny else [0, 10_000, args.history]
    claims_per_table = 50 if tiny else 1000
    rounds = 1 if tiny else args.rounds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="throughput-", dir=out))
    server = PrivateServer(base / "db", durable=True, extra_args=["--innodb-buffer-pool-size=1G"])
    server.start()
    bench = Bench(server)
    results: dict[str, Any] = {"server": server.version(), "durable": "innodb_flush_log_at_trx_commit=1",
                               "cpus": os.cpu_count(), "emails_per_run": emails,
                               "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), **versions()}  # fmt: skip
    print(f"server {results['server']}, {results['durable']}, {emails} emails per run", flush=True)
    try:
        sweep = []
        for r in replica_counts:
            run = run_outbox(
                bench, 0.0, r, c, emails, base, paced_rate=100.0 if r == replica_counts[-1] else 0.0
            )
            bare = run_bare(0.0, r, c, emails)
            row = {**asdict(run), "bare_emails_per_s": bare.emails_per_s, "bare_cpu_ms_per_email": bare.cpu_ms_per_email,
                   "ratio": run.emails_per_s / bare.emails_per_s}  # fmt: skip
            sweep.append(row)
            print(f"outbox R={r} C={c} latency 0: {run.emails_per_s:.0f}/s, bare {bare.emails_per_s:.0f}/s, ratio {row['ratio']:.2f};"
                  f" bare CPU {bare.cpu_ms_per_email:.2f} ms/email;"
                  f" statements/email {run.statements_per_email:.2f}, CALLs/email {run.calls_per_email:.2f},"
                  f" CPU {run.cpu_ms_per_email:.2f} ms/email (+ database {run.store_cpu_ms_per_email:.2f}),"
                  f" empty claims/email {run.empty_claims_per_email:.3f},"
                  f" peak RSS {run.peak_rss_mb:.0f} MB" + (f", paced p50/p99 {run.p50_ms:.0f}/{run.p99_ms:.0f} ms" if run.p50_ms else ""),
                  flush=True)  # fmt: skip
        results["replica_sweep"], results["replica_sweep_latency_ms"] = sweep, 0.0
        lat_r = 2
        by_latency, peers = [], []
        for latency in latencies:
            peer = latency in PEER_LATENCIES
            systems = PEER_SYSTEMS if peer else ("bare boto3 loop", "outbox")
            measured = measure_round_robin(
                bench, systems, latency, lat_r, c, emails, base, rounds if peer else 1
            )
            run, bare = middle(measured["outbox"]), middle(measured["bare boto3 loop"])
            ideal = lat_r * c / latency if latency else float("nan")
            row = {**asdict(run), "bare_emails_per_s": bare.emails_per_s, "ideal_emails_per_s": ideal,
                   "of_ideal": run.emails_per_s / ideal if latency else float("nan")}  # fmt: skip
            by_latency.append(row)
            print(f"outbox R={lat_r} latency {latency * 1000:g} ms: {run.emails_per_s:.0f}/s, bare {bare.emails_per_s:.0f}/s,"
                  f" ideal {ideal:.0f}/s", flush=True)  # fmt: skip
            if peer:
                peers += [peer_row(system, latency, measured[system]) for system in PEER_SYSTEMS]
        results["latency_sweep"], results["latency_sweep_replicas"] = by_latency, lat_r
        results["peers"], results["peer_rounds"] = peers, rounds
        print(f"\nthe peers, {lat_r} processes x {c}, {emails} emails each from a backlog, median of {rounds}"
              f" round(s); CPU ms/email = senders + store; lost and duplicates summed over the rounds:",
              flush=True)  # fmt: skip
        print_table(PEER_HEADER, peer_table(peers))
        print(flush=True)
        claims = []
        for r in claim_replicas:
            for path in ("per_row", "batch"):
                cr = run_claim_path(bench, path, r, emails)
                claims.append(asdict(cr))
                print(
                    f"database path {path} R={r}: {cr.emails_per_s:.0f}/s, lost races/email {cr.lost_per_email:.3f}",
                    flush=True,
                )
        results["claim_paths"] = claims
        results["enqueue"] = []
        for k in (1, 8):
            rate = run_enqueue(bench, k, 2.0 if tiny else 8.0)
            results["enqueue"].append({"connections": k, "per_s": rate})
            print(f"enqueue on {k} connection(s), one transaction each: {rate:.0f}/s", flush=True)
        results["table_size"] = claim_rates(bench, history, claims_per_table)
        print(
            f"(InnoDB settled for {results['table_size'][0]['settle_s']:.0f} s after the fixtures)",
            flush=True,
        )
        for lat in results["table_size"]:
            h = lat["history_rows"]
            print(
                f"claim_batch(8) with {h} terminal rows: p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms,"
                f" {lat['claims_per_s']:.0f} claims/s",
                flush=True,
            )
        empty_rate = results["table_size"][0]["claims_per_s"]
        largest = results["table_size"][-1]
        print(
            f"claim rate with {largest['history_rows']} terminal rows: {largest['claims_per_s']:.0f} claims/s,"
            f" empty table {empty_rate:.0f} claims/s, ratio {largest['claims_per_s'] / empty_rate:.2f}",
            flush=True,
        )
    finally:
        server.stop()
    (base / "results.json").write_text(json.dumps(results, indent=2, default=str))
    plot(results, Path(args.plot) if not tiny else base / "performance.png")
    write_doc(results, Path(args.doc), Path(args.doc) if not tiny else base / "performance.md")
    print(f"results in {base / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
