"""The Celery + Redis peer of the throughput benchmark (bench/throughput.py).

A Celery 5 app whose one task sends one email with boto3 `sesv2.send_email` to the local SES
endpoint: the same message as the bare loop and the outbox, with an `outbox_id` EmailTag carrying a
unique id, so the endpoint's records show lost and duplicated sends. Configured as a careful Celery
user would for email: `task_acks_late=True` (a task is acknowledged after it ran, so a crash
redelivers it instead of dropping it), `worker_prefetch_multiplier=1`, no result backend
(`task_ignore_result=True`).

`run_celery` runs it the way the benchmark runs the outbox:

1. a private `redis-server` (the binary, on a free port, in a temp directory; in memory only:
   `--save "" --appendonly no`, so the broker does no disk writes, where the outbox's database commits
   every row with an fsync);
2. N tasks enqueued first, a backlog, on a queue `held` that no worker consumes;
3. R real `celery worker` processes (`--pool threads --concurrency C`) started on the empty queue
   `emails`, and waited for until each answers a ping;
4. then the backlog appears on `emails` at once (kombu's Redis transport keeps a queue as a list of
   that name, and RENAME moves the whole list and wakes the workers' blocked BRPOP), and the clock
   runs from there until the endpoint has taken N sends. As with the outbox (whose rows are held
   until its workers are healthy, then made due at once), no start-up is timed;
5. CPU of the workers and of redis-server over that interval, from /proc.

The worker processes import this module (`celery -A celery_peer`); the broker's address reaches them
in BENCH_CELERY_BROKER and the endpoint's in AWS_ENDPOINT_URL_SESV2.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from email_outbox_devtools.dbserver import free_port

HERE = Path(__file__).resolve().parent
QUEUE = "emails"
HOLD_QUEUE = "held"  # where the backlog waits until the workers are up

SETTINGS: dict[str, Any] = {
    "task_acks_late": True,
    "worker_prefetch_multiplier": 1,
    "task_ignore_result": True,
    "result_backend": None,
    "task_serializer": "json",
    "accept_content": ["json"],
    "task_default_queue": QUEUE,
    "broker_connection_retry_on_startup": True,
    "worker_hijack_root_logger": False,
}
app = Celery("celery_peer", broker=os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6399/0"))
app.conf.update(SETTINGS)

_client: Any = None
_client_lock = threading.Lock()


def ses_client() -> Any:
    """One boto3 client per worker process, shared by its threads (boto3 clients are thread-safe),
    with the bare loop's settings: no retries, a connection per thread."""
    global _client
    with _client_lock:
        if _client is None:
            import boto3
            from botocore.config import Config

            threads = int(os.environ.get("BENCH_CELERY_THREADS", "8"))
            _client = boto3.client(
                "sesv2",
                region_name="us-east-1",
                config=Config(
                    retries={"total_max_attempts": 1},
                    max_pool_connections=threads,
                    connect_timeout=5,
                    read_timeout=20,
                ),
            )
        return _client


@worker_ready.connect
def _warm_up(**_: Any) -> None:
    ses_client()  # built before the release, as the bare loop builds its client before `go`


def celery_id(i: int) -> str:
    """The unique id send `i` carries in its `outbox_id` EmailTag."""
    return f"celery-{i}"


@app.task(name="send_email", acks_late=True, ignore_result=True)
def send_email(i: int) -> None:
    ses_client().send_email(
        FromEmailAddress="shop@example.com",
        Destination={"ToAddresses": [f"user{i}@example.com"]},
        Content={"Simple": {"Subject": {"Data": f"subject {i}"}, "Body": {"Text": {"Data": "hello"}}}},
        EmailTags=[{"Name": "outbox_id", "Value": celery_id(i)}],
    )


# --- the harness side --------------------------------------------------------------------------------
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class RedisServer:
    """A private redis-server from the binary: a free port, a temp directory, stopped afterwards."""

    def __init__(self, base: Path) -> None:
        binary = shutil.which("redis-server") or next(
            (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).exists()), None
        )
        if binary is None:
            raise RuntimeError(
                "no redis-server binary: run db/ensure-server-binary.sh (installs redis-server)"
            )
        self.dir = Path(tempfile.mkdtemp(prefix="redis-", dir=base))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--daemonize", "no",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start; see {self.dir / 'redis.log'}") from None
                time.sleep(0.05)
        client.close()

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class CeleryRun:
    replicas: int
    concurrency: int
    latency_ms: float
    emails: int
    emails_per_s: float
    cpu_ms_per_email: float  # workers + redis-server
    worker_cpu_ms_per_email: float
    broker_cpu_ms_per_email: float
    enqueue_s: float


def _enqueue(client: Celery, emails: int) -> float:
    started = time.monotonic()
    with client.producer_or_acquire() as producer:
        for i in range(emails):
            client.send_task(send_email.name, (i,), queue=HOLD_QUEUE, producer=producer)
    return time.monotonic() - started


def _wait_ready(
    client: Celery, names: list[str], procs: list[subprocess.Popen[bytes]], log_dir: Path
) -> None:
    deadline = time.monotonic() + 90
    while True:
        replies = client.control.ping(destination=names, timeout=1.0) or []
        answered = {name for reply in replies for name in reply}
        if answered >= set(names):
            return
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise RuntimeError(f"celery workers did not start; see {log_dir}/celery-*.log")


def run_celery(
    endpoint_url: str,
    sent: Callable[[], int],
    latency: float,
    replicas: int,
    concurrency: int,
    emails: int,
    log_dir: Path,
    timeout: float = 900,
    stall: float = 60,
) -> CeleryRun:
    """emails/s and CPU ms per email (workers + redis-server) of Celery draining a backlog of
    `emails` tasks. `sent()` counts the sends the endpoint has taken so far."""
    redis_server = RedisServer(log_dir)
    # The harness's own client app, bound to this run's broker (the module's app and its connection
    # pools are for the workers).
    client = Celery("celery_peer_harness", broker=redis_server.url, set_as_current=False)
    client.conf.update(SETTINGS)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        enqueue_s = _enqueue(client, emails)
        env = {
            **os.environ,
            "BENCH_CELERY_BROKER": redis_server.url,
            "BENCH_CELERY_THREADS": str(concurrency),
            "AWS_ENDPOINT_URL_SESV2": endpoint_url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        names = [f"bench-{r}@celery" for r in range(replicas)]
        for r, name in enumerate(names):
            log = open(log_dir / f"celery-{r}.log", "wb")  # noqa: SIM115 - lives with the process
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "celery_peer",
                        "worker",
                        "--pool",
                        "threads",
                        "--concurrency",
                        str(concurrency),
                        "--prefetch-multiplier",
                        "1",
                        "--loglevel",
                        "WARNING",
                        "--hostname",
                        name,
                        "--queues",
                        QUEUE,
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=HERE,
                )
            )
        _wait_ready(client, names, procs, log_dir)
        admin = redis_server.client()
        held = admin.llen(HOLD_QUEUE)
        if held != emails:
            raise RuntimeError(f"{held} of {emails} tasks are in the backlog")
        pids = [p.pid for p in procs] + [redis_server.pid]
        cpu0 = {pid: _cpu_seconds(pid) for pid in pids}
        base = sent()
        started = time.monotonic()
        # The backlog appears on the workers' queue at once: kombu's Redis transport keeps a queue as
        # a list of that name, and RENAME wakes the workers' blocked BRPOP on it.
        admin.rename(HOLD_QUEUE, QUEUE)
        # Until the endpoint has taken N sends; a run that stops short (no send for `stall` seconds)
        # ends there, and its missing ids show as lost in the endpoint's records.
        deadline, done, last_progress = started + timeout, 0, started
        while done < emails:
            now_done = sent() - base
            now = time.monotonic()
            if now_done > done:
                done, last_progress = now_done, now
            elif now - last_progress > stall or now > deadline:
                break
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a celery worker exited; see {log_dir}/celery-*.log")
            time.sleep(0.05)
        elapsed = last_progress - started if done < emails else time.monotonic() - started
        admin.close()
        cpu = {pid: _cpu_seconds(pid) - cpu0[pid] for pid in pids}
        worker_cpu = sum(cpu[p.pid] for p in procs)
        broker_cpu = cpu[redis_server.pid]
        return CeleryRun(
            replicas, concurrency, latency * 1000, emails, emails / elapsed,
            (worker_cpu + broker_cpu) * 1000 / emails, worker_cpu * 1000 / emails, broker_cpu * 1000 / emails,
            enqueue_s,
        )  # fmt: skip
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # a warm shutdown: running tasks finish and are acked
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        client.close()
        redis_server.close()
