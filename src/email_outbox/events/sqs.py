"""The SQS long-poll loop: receive, record, and delete a message only after what it carries is
committed. Any number of replicas may run at once: SQS hides a received message from the others for
the visibility timeout, and recording is idempotent, so a message seen twice changes nothing.

A replica killed at any moment loses nothing: what it had not committed comes back after the
visibility timeout; what it had committed but not deleted comes back too, as duplicates.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from email_outbox import failpoints
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import DatabaseUnavailable, OutboxError
from email_outbox.events.ingest import Ingestor, Tally
from email_outbox.ses.settings import aws_region

log = logging.getLogger("email_outbox.events")


@dataclass(frozen=True)
class SqsOptions:
    queue_url: str
    wait_seconds: int = 20
    visibility_timeout: int = 120
    batch_size: int = 100
    delete_malformed: bool = False
    resolve_every_seconds: float = 10.0


def make_client() -> Any:
    # The endpoint comes from boto3's own AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL when set; the region
    # from AWS_REGION or AWS_DEFAULT_REGION (docs/design.md section 5: boto3 reads only the latter).
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30)
    return boto3.session.Session().client("sqs", region_name=aws_region(), config=config)


def batch_entries(handles: list[str], **each: Any) -> Iterator[list[dict[str, Any]]]:
    """SQS's batch calls take at most 10 entries: the receipt handles as entries, 10 at a time."""
    for start in range(0, len(handles), 10):
        yield [{"Id": str(i), "ReceiptHandle": h, **each} for i, h in enumerate(handles[start : start + 10])]


class VisibilityKeeper:
    """While a batch is being recorded, pushes its messages' visibility timeout forward every third of
    it. Each receive counts toward the queue's maxReceiveCount: a batch held up past its timeout (a long
    lock wait) would come back to another replica, be received again, and after a few rounds go to the
    dead-letter queue unrecorded. A failed extension only lets a message come back as a duplicate."""

    def __init__(self, client: Any, queue_url: str, messages: list[dict[str, Any]], timeout: int) -> None:
        self._client = client
        self._queue_url = queue_url
        self._handles = [m["ReceiptHandle"] for m in messages]
        self._timeout = timeout
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqs-visibility", daemon=True)

    def __enter__(self) -> VisibilityKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        # A call to SQS in flight (retried by botocore while SQS is slow) must not hold up the delete
        # of a recorded batch or a SIGTERM: the thread is a daemon, and its extension is only a help.
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._done.wait(self._timeout / 3):
            for entries in batch_entries(self._handles, VisibilityTimeout=self._timeout):
                if self._done.is_set():
                    return
                self._extend(entries)

    def _extend(self, entries: list[dict[str, Any]]) -> None:
        try:
            response = self._client.change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
            failed = response.get("Failed", [])
        except Exception as exc:  # whatever it is, the batch goes on; it is logged
            failed = [{"Code": type(exc).__name__}]
        if failed:
            log.warning("visibility not extended", extra={"code": failed[0].get("Code")})


class SqsConsumer:
    def __init__(
        self,
        open_repository: Callable[[], OutboxRepository],
        consumer_id: str,
        options: SqsOptions,
        stop: threading.Event,
        *,
        tally: Tally | None = None,
        client: Any | None = None,
    ) -> None:
        self.options = options
        self.stop = stop
        self.consumer_id = consumer_id
        self.tally = tally if tally is not None else Tally()
        self.client = client if client is not None else make_client()
        self._open_repository = open_repository
        self._ingestor: Ingestor | None = None
        self._last_resolve = 0.0

    def _receive(self, wait: int) -> list[dict[str, Any]]:
        response = self.client.receive_message(
            QueueUrl=self.options.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=wait,
            VisibilityTimeout=self.options.visibility_timeout,
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def _gather(self) -> list[dict[str, Any]]:
        """Up to batch_size messages: one long poll, then short polls while the queue keeps giving."""
        batch = self._receive(self.options.wait_seconds)
        while batch and len(batch) < self.options.batch_size and not self.stop.is_set():
            more = self._receive(0)
            if not more:
                break
            batch.extend(more)
        return batch

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for entries in batch_entries([m["ReceiptHandle"] for m in messages]):
            response = self.client.delete_message_batch(QueueUrl=self.options.queue_url, Entries=entries)
            for failure in response.get("Failed", []):
                # The message comes back after its visibility timeout: a duplicate, harmless.
                log.warning("delete failed", extra={"code": failure.get("Code"), "sqs_id": failure.get("Id")})

    def _ingestor_now(self) -> Ingestor:
        if self._ingestor is None:
            self._ingestor = Ingestor(self._open_repository(), self.consumer_id, self.tally)
        return self._ingestor

    def run_once(self) -> int:
        """One batch: receive, record, delete. Returns the number of messages received."""
        # Receive nothing while the database does not answer: each receive counts toward the queue's
        # maxReceiveCount, and an outage of a few visibility timeouts would move every waiting event
        # to the dead-letter queue unrecorded.
        self._ingestor_now().repo.server_version()
        messages = self._gather()
        if messages:
            ingestor = self._ingestor_now()
            with VisibilityKeeper(
                self.client, self.options.queue_url, messages, self.options.visibility_timeout
            ):
                done = ingestor.ingest([m.get("Body", "") for m in messages])
            failpoints.hit("events_before_delete")
            deletable = [
                m for m, ok in zip(messages, done, strict=True) if ok or self.options.delete_malformed
            ]
            self._delete(deletable)
        self._maybe_resolve()
        return len(messages)

    def _maybe_resolve(self) -> None:
        """Rows whose evidence arrived while they were still Processing, then went UnknownOutcome."""
        if time.monotonic() - self._last_resolve < self.options.resolve_every_seconds:
            return
        self._last_resolve = time.monotonic()
        ingestor = self._ingestor_now()
        settled = ingestor.repo.resolve_unknown_from_evidence(1000, self.consumer_id)
        if settled:
            self.tally.resolved["late evidence"] += settled

    def run(self) -> int:
        """Until `stop` is set (SIGTERM: the batch in hand is finished first). Returns the exit code."""
        while not self.stop.is_set():
            try:
                self.run_once()
            except DatabaseUnavailable as exc:
                log.warning("database unavailable; retrying", extra={"error": str(exc)[:300]})
                self._drop_ingestor()
                self.stop.wait(2.0)
            except OutboxError as exc:
                log.error("batch failed; its messages come back later", extra={"error": str(exc)[:300]})
                self._drop_ingestor()
                self.stop.wait(1.0)
            except (BotoCoreError, ClientError) as exc:
                # SQS unreachable, throttling, credentials expiring: nothing was deleted that was not
                # committed, so waiting and polling again is always safe.
                log.warning("SQS call failed; polling again shortly", extra={"error": str(exc)[:300]})
                self.stop.wait(5.0)
        return 0

    def _drop_ingestor(self) -> None:
        if self._ingestor is not None:
            self._ingestor.repo.close()
            self._ingestor = None

    def close(self) -> None:
        self._drop_ingestor()
