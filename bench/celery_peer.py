"""The Celery app of the benchmark's Celery peers: what each `celery worker` process imports.

One task sends one email with boto3 `sesv2.send_email` to the local SES endpoint: the same message as
the bare loop and the outbox, with an `outbox_id` EmailTag carrying a unique id, so the endpoint's
records show lost and duplicated sends. Configured as a careful Celery user would for email:
`task_acks_late=True` (a task is acknowledged after it ran, so a crash redelivers it instead of
dropping it), `worker_prefetch_multiplier=1`, no result backend (`task_ignore_result=True`). On
RabbitMQ, what a team that cares about losing email deploys: a durable queue, persistent delivery
(delivery_mode 2) and publisher confirms (`confirm_publish`).

The broker's URL reaches the workers in BENCH_CELERY_BROKER, the endpoint's in AWS_ENDPOINT_URL_SESV2.
The harness side (a private broker, the backlog, the clock) is bench/scenarios/celery.py.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from celery import Celery
from celery.signals import worker_ready

QUEUE = "emails"


def settings(broker_url: str) -> dict[str, Any]:
    """The Celery settings for a broker URL: the same for both brokers, plus RabbitMQ's durability."""
    common: dict[str, Any] = {
        "broker_url": broker_url,
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
    if broker_url.startswith("amqp"):
        common |= {
            "task_default_delivery_mode": "persistent",  # delivery_mode 2: written to disk
            "broker_transport_options": {"confirm_publish": True},  # publish returns once the broker has it
        }
    return common


app = Celery("celery_peer")
app.conf.update(settings(os.environ.get("BENCH_CELERY_BROKER", "memory://")))

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
