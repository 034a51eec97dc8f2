"""The Celery peers: Celery 5 draining a backlog of N send tasks on a private broker, run the way the
outbox is run.

1. a private broker (bench/brokers.py): Redis in memory, or a durable RabbitMQ node;
2. N tasks enqueued first, a backlog no worker consumes yet;
3. R real `celery worker` processes (`--pool threads --concurrency C`, the app in bench/celery_peer.py)
   started on an empty queue, and waited for until each answers a ping;
4. then the backlog reaches the workers at once and the clock runs until the endpoint has taken N
   sends. On Redis the backlog waits in a list of its own and a RENAME makes it the workers' queue
   (kombu keeps a queue as a list of that name, and RENAME wakes their blocked BRPOP); on RabbitMQ it
   waits in the durable queue itself and a broadcast `add_consumer` makes every worker consume it
   (AMQP has no rename; the broadcast reaches each worker in a few milliseconds). As with the outbox
   (whose rows are held until its workers are healthy, then made due at once), no start-up is timed;
5. CPU of the workers and of the broker's processes over that interval, from /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from brokers import RabbitServer, RedisServer
from celery import Celery
from celery_peer import QUEUE, celery_id, send_email, settings
from harness import ROOT, Endpoint, cpu_seconds

HOLD_QUEUE = "held"  # Redis: where the backlog waits until the workers are up
IDLE_QUEUE = "idle"  # RabbitMQ: what the workers consume until the broadcast
BROKERS: dict[str, type[RedisServer] | type[RabbitServer]] = {"redis": RedisServer, "rabbitmq": RabbitServer}


@dataclass
class CeleryRun:
    broker: str
    replicas: int
    concurrency: int
    latency_ms: float
    emails: int
    emails_per_s: float
    cpu_ms_per_email: float  # workers + broker
    worker_cpu_ms_per_email: float
    store_cpu_ms_per_email: float  # the broker's processes
    enqueue_s: float


def _enqueue(client: Celery, emails: int, queue: str) -> float:
    started = time.monotonic()
    with client.producer_or_acquire() as producer:
        for i in range(emails):
            client.send_task(send_email.name, (i,), queue=queue, producer=producer)
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


def _spawn(
    name: str, queue: str, concurrency: int, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_peer", "worker", "--pool", "threads",
             "--concurrency", str(concurrency), "--prefetch-multiplier", "1", "--loglevel", "WARNING",
             "--hostname", name, "--queues", queue, "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT / "bench",
        )  # fmt: skip


def run_celery(
    broker_kind: str,
    endpoint: Endpoint,
    latency: float,
    replicas: int,
    concurrency: int,
    emails: int,
    log_dir: Path,
    timeout: float = 900,
    stall: float = 60,
) -> CeleryRun:
    """emails/s and CPU ms per email (workers + broker) of Celery draining a backlog of `emails`
    tasks on a private broker ("redis" or "rabbitmq") through `endpoint`."""
    broker = BROKERS[broker_kind](log_dir)
    # The harness's own client app, bound to this run's broker (the module's app is the workers').
    client = Celery("celery_peer_harness", set_as_current=False)
    client.conf.update(settings(broker.url))
    rabbit = isinstance(broker, RabbitServer)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        backlog_queue = QUEUE if rabbit else HOLD_QUEUE
        enqueue_s = _enqueue(client, emails, backlog_queue)
        env = {
            **os.environ,
            "BENCH_CELERY_BROKER": broker.url,
            "BENCH_CELERY_THREADS": str(concurrency),
            "AWS_ENDPOINT_URL_SESV2": endpoint.url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")]),
        }
        names = [f"bench-{r}@celery" for r in range(replicas)]
        for r, name in enumerate(names):
            procs.append(
                _spawn(name, IDLE_QUEUE if rabbit else QUEUE, concurrency, env, log_dir / f"celery-{r}.log")
            )
        _wait_ready(client, names, procs, log_dir)
        if (held := broker.backlog(backlog_queue)) != emails:
            raise RuntimeError(f"{held} of {emails} tasks are in the backlog")
        pids = [p.pid for p in procs]
        store_pids = broker.store_pids()
        worker0, store0 = cpu_seconds(pids), cpu_seconds(store_pids)
        base = endpoint.sends()
        started_at, started = time.time(), time.monotonic()
        if rabbit:
            client.control.add_consumer(QUEUE, destination=names, reply=False)
        else:
            admin = broker.client()
            admin.rename(HOLD_QUEUE, QUEUE)
            admin.close()
        # Until the endpoint has taken N sends; a run that stops short (no send for `stall` seconds)
        # ends there, and its missing ids show as lost in the endpoint's records.
        deadline, done, last_progress = started + timeout, 0, started
        while done < emails:
            now_done = endpoint.sends() - base
            now = time.monotonic()
            if now_done > done:
                done, last_progress = now_done, now
            elif now - last_progress > stall or now > deadline:
                break
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a celery worker exited; see {log_dir}/celery-*.log")
            time.sleep(0.05)
        worker_cpu, store_cpu = cpu_seconds(pids) - worker0, cpu_seconds(store_pids) - store0
        elapsed = last_progress - started if done < emails else endpoint.seconds_to_last_send(started_at)
        return CeleryRun(
            broker.name, replicas, concurrency, latency * 1000, emails, emails / elapsed,
            (worker_cpu + store_cpu) * 1000 / emails, worker_cpu * 1000 / emails, store_cpu * 1000 / emails,
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
        broker.close()


__all__ = ["BROKERS", "CeleryRun", "celery_id", "run_celery"]
