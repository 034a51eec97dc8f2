"""SES events end to end: a worker sends to the local SES endpoint (some sends time out after SES
accepted them, so those rows end UnknownOutcome); the endpoint's accepted messages become SES event
records in SES's documented shapes, published through moto's SNS to SQS (and the EventBridge shape
straight to SQS); `email-outbox events` consumes them. moto runs in server mode, started here."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from email_outbox_devtools.ses_events import eventbridge_event, record, sns_notification
from tests.support.helpers import scalar
from tests.support.worker_harness import account, drained, spawn_worker, wait_until

FAST = {"lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}
REGION = "us-east-1"


@dataclass
class Aws:
    url: str
    sqs: Any
    sns: Any
    queue_url: str
    raw_queue_url: str
    topic_arn: str
    raw_topic_arn: str

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL_SQS": self.url,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }

    def waiting(self, queue_url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def in_flight(aws: Aws, queue_url: str) -> int:
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws(moto_server: str) -> Aws:
    """A fresh topic and queue per test: SNS -> SQS (SNS envelope), and SNS -> SQS with raw delivery."""
    kwargs = {
        "endpoint_url": moto_server,
        "region_name": REGION,
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
    }
    sqs, sns = boto3.client("sqs", **kwargs), boto3.client("sns", **kwargs)
    suffix = f"{os.getpid()}-{time.monotonic_ns()}"
    queue_url = sqs.create_queue(QueueName=f"ses-events-{suffix}")["QueueUrl"]
    raw_queue_url = sqs.create_queue(QueueName=f"ses-events-raw-{suffix}")["QueueUrl"]
    topic_arn = sns.create_topic(Name=f"ses-events-{suffix}")["TopicArn"]
    raw_topic_arn = sns.create_topic(Name=f"ses-events-raw-{suffix}")["TopicArn"]
    for topic, url, raw in ((topic_arn, queue_url, False), (raw_topic_arn, raw_queue_url, True)):
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(
            TopicArn=topic,
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true" if raw else "false"},
        )
    return Aws(moto_server, sqs, sns, queue_url, raw_queue_url, topic_arn, raw_topic_arn)


@dataclass
class Consumer:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def spawn_consumer(
    dsn: DatabaseDsn,
    aws: Aws,
    queue_url: str,
    log_dir: Path,
    name: str,
    *extra: str,
    env: dict[str, str] | None = None,
) -> Consumer:
    environment = {**os.environ, **aws.env(), "EMAIL_OUTBOX_DSN": dsn.url(), **(env or {})}
    args = [
        sys.executable, "-m", "email_outbox.cli", "events", "--sqs-queue-url", queue_url,
        "--consumer-id", name, "--wait-seconds", "1", *extra,
    ]  # fmt: skip
    log_path = log_dir / f"{name}.log"
    proc = subprocess.Popen(args, env=environment, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return Consumer(proc, log_path)


def recorded(repo: OutboxRepository) -> int:
    return int(scalar(repo, "SELECT COUNT(*) FROM email_provider_events"))


def test_unknown_outcome_rows_end_sent_from_ses_events_and_a_bounced_address_is_never_sent_again(
    dsn: DatabaseDsn, repo: OutboxRepository, aws: Aws, tmp_path: Path
) -> None:
    with SesEndpoint() as endpoint:
        for i in range(40):
            repo.enqueue(f"e2e-{i}", f"user{i}@example.com", f"subject {i}", text_body="hello")
        endpoint.set_faults(FaultRule("timeout_after_accept", remaining=6, seconds=3))
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "w1", concurrency=4, **FAST)
        try:
            wait_until(lambda: drained(repo), 90, "the outbox to drain")
        finally:
            assert worker.terminate() == 0
        before = account(repo, endpoint, 40)
        assert before.by_status[Status.UNKNOWN_OUTCOME] == 6 and before.unknown_accepted == 6
        unknown_ids = {r.id for r in repo.list_rows(Status.UNKNOWN_OUTCOME)}

        # Every accepted message's Send and Delivery, in SES's shapes: shuffled (a Delivery may come
        # before its Send), a fifth of them twice (at-least-once delivery), over three envelopes.
        rng = random.Random(15)
        accepted = endpoint.accepted()
        messages: list[tuple[str, dict[str, Any]]] = []
        for m in accepted:
            sent_at = datetime.fromtimestamp(m.accepted_at, UTC).replace(tzinfo=None)
            for event_type, after in (("Send", 0.0), ("Delivery", 1.5)):
                rec = record(event_type, m.message_id, m.to[0], m.outbox_id, sent_at, after=after)
                route = rng.choice(["sns", "raw", "eventbridge"])
                messages.append((route, rec))
                if rng.random() < 0.2:
                    messages.append((rng.choice(["sns", "raw", "eventbridge"]), rec))
        rng.shuffle(messages)
        for route, rec in messages:
            if route == "sns":
                aws.sns.publish(TopicArn=aws.topic_arn, Message=json.dumps(rec))
            elif route == "raw":
                aws.sns.publish(TopicArn=aws.raw_topic_arn, Message=json.dumps(rec))
            else:
                aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=json.dumps(eventbridge_event(rec)))
        expected = 2 * len(accepted)

        consumers = [
            spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "events-a"),
            spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "events-b"),
            spawn_consumer(dsn, aws, aws.raw_queue_url, tmp_path, "events-raw"),
        ]
        try:
            wait_until(lambda: recorded(repo) == expected, 90, f"{expected} events recorded", interval=0.2)
            wait_until(
                lambda: aws.waiting(aws.queue_url) + aws.waiting(aws.raw_queue_url) == 0, 30, "empty queues"
            )
        finally:
            codes = [c.terminate() for c in consumers]
        assert codes == [0, 0, 0], [c.log()[-2000:] for c in consumers]
        by_outbox_id = {m.outbox_id: m.message_id for m in accepted}
        for attempt_id in unknown_ids:
            row = repo.get_row(attempt_id)
            assert row.status is Status.SENT and row.provider_message_id == by_outbox_id[str(attempt_id)]
            assert "from SES evidence" in (repo.events(attempt_id)[-1].detail or "")
        after = account(repo, endpoint, 40)
        assert after.by_status[Status.SENT] == 40 and after.by_status[Status.UNKNOWN_OUTCOME] == 0
        logs = "".join(c.log() for c in consumers)
        duplicates = len(messages) - expected
        print(
            f"end to end: {len(accepted)} accepted, {len(unknown_ids)} UnknownOutcome -> Sent,"
            f" {len(messages)} messages ({duplicates} duplicates), {expected} events recorded"
        )
        assert "Traceback" not in logs

        # A permanent bounce for user3: the address is suppressed; a new email to it never reaches SES.
        bounced = next(m for m in accepted if m.to == ["user3@example.com"])
        bounce = record(
            "Bounce", bounced.message_id, "user3@example.com", bounced.outbox_id, datetime(2026, 12, 1)
        )
        aws.sns.publish(TopicArn=aws.topic_arn, Message=json.dumps(bounce))
        consumer = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "events-c")
        try:
            wait_until(lambda: recorded(repo) == expected + 1, 60, "the bounce recorded", interval=0.2)
        finally:
            assert consumer.terminate() == 0
        assert [s.address for s in repo.suppressed_addresses()] == ["user3@example.com"]
        repo.enqueue("e2e-again-3", "user3@example.com", "again", text_body="hello")
        repo.enqueue("e2e-again-4", "user4@example.com", "again", text_body="hello")
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "w2", concurrency=2, **FAST)
        try:
            wait_until(lambda: drained(repo), 60, "the outbox to drain")
        finally:
            assert worker.terminate() == 0
        assert repo.get_row_by_notification_id("e2e-again-3").status is Status.FAILED
        assert repo.get_row_by_notification_id("e2e-again-3").last_error_code == "Suppressed"
        assert repo.get_row_by_notification_id("e2e-again-4").status is Status.SENT
        assert sum(1 for m in endpoint.accepted() if m.to == ["user3@example.com"]) == 1


def test_malformed_messages_never_crash_the_consumer_nor_block_the_valid_ones(
    dsn: DatabaseDsn, repo: OutboxRepository, aws: Aws, tmp_path: Path
) -> None:
    ids = [repo.enqueue(f"m-{i}", f"m{i}@example.com", "s", text_body="t").attempt_id for i in range(6)]
    at = datetime(2026, 12, 1, 10)
    valid = [record("Send", f"ses-m{i}", f"m{i}@example.com", str(a), at) for i, a in enumerate(ids)]
    huge = record("Delivery", "ses-m0", "m0@example.com", str(ids[0]), at)
    huge["mail"]["headers"] = [{"name": "X-Padding", "value": "x" * 1000} for _ in range(250)]
    bad_bodies = [
        "not JSON at all",
        json.dumps({"Type": "Notification", "Message": "{not json"}),
        json.dumps({"hello": "world"}),
        json.dumps(record("Subscription", "ses-x", "m1@example.com", str(ids[1]), at)),
        json.dumps({"eventType": "Bounce", "mail": {"messageId": 42, "timestamp": "yesterday"}}),
        "[" * 3000,
        "y" * (256 * 1024 - 10),
    ]
    bodies = [json.dumps(v) for v in valid] + [json.dumps(huge)] + bad_bodies
    assert len(json.dumps(huge)) > 240_000
    random.Random(3).shuffle(bodies)
    for body in bodies:
        aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body)
    consumer = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "events-m", "--visibility-timeout", "60")
    try:
        wait_until(lambda: recorded(repo) == 7, 60, "the valid events recorded", interval=0.2)
        time.sleep(1.5)
        assert consumer.proc.poll() is None, consumer.log()[-3000:]
    finally:
        assert consumer.terminate() == 0
    log = consumer.log()
    assert "Traceback" not in log
    # Left for the dead-letter queue (6 malformed), the Subscription record skipped and deleted.
    assert "malformed 6" in log and "skipped 1" in log, log[-1500:]
    assert aws.waiting(aws.queue_url) == 6


def test_kill_minus_9_mid_batch_loses_no_event(
    dsn: DatabaseDsn, repo: OutboxRepository, aws: Aws, tmp_path: Path
) -> None:
    ids = [repo.enqueue(f"k-{i}", f"k{i}@example.com", "s", text_body="t").attempt_id for i in range(60)]
    at = datetime(2026, 12, 1, 10)
    for i, a in enumerate(ids):
        for event_type, after in (("Send", 0.0), ("Delivery", 2.0)):
            rec = record(event_type, f"ses-k{i}", f"k{i}@example.com", str(a), at, after=after)
            aws.sns.publish(TopicArn=aws.topic_arn, Message=json.dumps(rec))
    short = ("--visibility-timeout", "2", "--batch-size", "30")
    # Killed with a batch recorded but not committed: nothing is recorded, nothing deleted.
    victim = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "victim-1", *short,
                            env={"EMAIL_OUTBOX_FAILPOINTS": "events_before_commit=1"})  # fmt: skip
    assert victim.proc.wait(timeout=60) == -signal.SIGKILL
    assert recorded(repo) == 0
    # Killed with a batch committed but its messages not deleted: they come back as duplicates.
    victim = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "victim-2", *short,
                            env={"EMAIL_OUTBOX_FAILPOINTS": "events_before_delete=1"})  # fmt: skip
    assert victim.proc.wait(timeout=60) == -signal.SIGKILL
    committed = recorded(repo)
    assert committed > 0
    survivor = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "survivor", *short)
    try:
        wait_until(lambda: recorded(repo) == 120, 60, "every event recorded", interval=0.2)
        wait_until(lambda: aws.waiting(aws.queue_url) == 0, 30, "an empty queue")
    finally:
        assert survivor.terminate() == 0
    assert "duplicates 0" not in survivor.log(), "the committed batch came back and was recognised"
    print(f"kill -9: {committed} events committed before the second kill; 120 recorded in the end")


def test_sigterm_finishes_the_batch_in_hand_and_exits_0(
    dsn: DatabaseDsn, repo: OutboxRepository, aws: Aws, tmp_path: Path
) -> None:
    ids = [repo.enqueue(f"t-{i}", f"t{i}@example.com", "s", text_body="t").attempt_id for i in range(300)]
    at = datetime(2026, 12, 1, 10)
    for i, a in enumerate(ids):
        rec = record("Send", f"ses-t{i}", f"t{i}@example.com", str(a), at)
        aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=json.dumps(sns_notification(rec)))
    consumer = spawn_consumer(dsn, aws, aws.queue_url, tmp_path, "events-t", "--batch-size", "20",
                              "--visibility-timeout", "300")  # fmt: skip
    wait_until(lambda: recorded(repo) > 0, 60, "a first batch recorded", interval=0.02)
    assert consumer.terminate() == 0
    done = recorded(repo)
    # Every message is either recorded and deleted, or still on the queue: none deleted unrecorded,
    # none recorded and left behind (the visibility timeout is long, so nothing came back meanwhile).
    assert aws.waiting(aws.queue_url) == 300 - done, consumer.log()[-2000:]
    assert done < 300, "the consumer stopped before the backlog was done"


def test_a_batch_held_up_past_its_visibility_timeout_is_not_received_again(
    aws: Aws, dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    """A lock wait longer than the visibility timeout: the consumer keeps pushing the timeout forward,
    so no other replica receives the batch meanwhile (each receive counts toward maxReceiveCount, and
    a few such rounds would send it to the dead-letter queue unrecorded)."""
    import threading

    import mysql.connector

    from email_outbox.events.sqs import SqsConsumer, SqsOptions

    attempt_id = repo.enqueue("o-held", "held@example.com", "s", text_body="t").attempt_id
    assert repo.try_claim(attempt_id, "tok-held", "w1", 60) == 1
    assert repo.finalize_unknown(attempt_id, "tok-held", "read timeout") == 1
    sent_at = datetime(2026, 12, 1, 10, 0, 0)
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody=json.dumps(record("Send", "ses-held", "held@example.com", str(attempt_id), sent_at)),
    )
    locker = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
    cursor = locker.cursor()
    cursor.execute("SELECT id FROM email_delivery_attempts WHERE id = %s FOR UPDATE", (attempt_id,))
    cursor.fetchall()
    consumer = SqsConsumer(
        lambda: OutboxRepository.open(dsn), "held", SqsOptions(aws.queue_url, wait_seconds=1, visibility_timeout=3),
        threading.Event(), client=aws.sqs,
    )  # fmt: skip
    worker = threading.Thread(target=consumer.run_once)
    worker.start()
    try:
        # Received by the consumer (in flight, not visible), with no receive of the test's own: that
        # would hide the message from the consumer instead.
        wait_until(lambda: in_flight(aws, aws.queue_url) == 1, 10, "the consumer to receive the message")
        # Three visibility timeouts while the row lock holds the batch up.
        deadline = time.monotonic() + 9
        while time.monotonic() < deadline:
            seen = aws.sqs.receive_message(QueueUrl=aws.queue_url, WaitTimeSeconds=1, VisibilityTimeout=30)
            assert not seen.get("Messages"), "the held batch was received by another replica"
        assert worker.is_alive(), "the batch is still waiting for the lock"
    finally:
        locker.rollback()
        locker.close()
        worker.join(timeout=30)
        consumer.close()
    assert repo.get_row(attempt_id).status is Status.SENT
    assert aws.waiting(aws.queue_url) == 0, "recorded, then deleted"
