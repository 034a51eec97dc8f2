"""The bare loop: plain boto3 `send_email` from R processes x C threads, no store. The ceiling."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness import Endpoint, aws_env, lost_and_duplicates, run_in_lockstep


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
        run = run_in_lockstep(
            _bare_process, [(endpoint.url, concurrency, share, r * share, cpu) for r in range(replicas)]
        )
        elapsed = endpoint.seconds_to_last_send(run.released_at)
        lost, duplicates = lost_and_duplicates(
            endpoint.id_counts(), [str(i) for i in range(share * replicas)]
        )
    finally:
        endpoint.close()
    return BareRun(share * replicas / elapsed, cpu.value * 1000 / (share * replicas), lost, duplicates)
