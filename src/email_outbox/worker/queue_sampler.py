"""The live queue for /metrics: every `stats_interval` seconds, on a connection of its own, the
counts per status (email_outbox_queue_stats: its cost follows the backlog, not the history), the
emails failed unsent, retention's last run and each tenant, as one snapshot the collector reads."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from email_outbox.db.repository import OutboxRepository
from email_outbox.db.tenant_calls import TenantStats
from email_outbox.errors import AccessDenied, OutboxError
from email_outbox.models import RetentionRuns, Status, StatusCount

log = logging.getLogger("email_outbox.worker.metrics")

UNSENT_WINDOW_SECONDS = 86_400


@dataclass
class QueueSnapshot:
    counts: list[StatusCount] = field(default_factory=list)
    database_now: datetime | None = None
    sampled_at: float = 0.0
    # Emails failed in the last 24 h without being handed to SES, by reason (email_unsent_failure_stats).
    unsent_failures: dict[str, int] = field(default_factory=dict)
    # When retention last finished (email_retention_last_run); None: not readable by this account.
    retention: RetentionRuns | None = None
    # Each tenant (email_tenant_stats); empty when the account may not read them yet.
    tenants: list[TenantStats] = field(default_factory=list)

    def oldest_due_age_seconds(self) -> float:
        due = [
            c.oldest_due_at
            for c in self.counts
            if c.status in (Status.PENDING, Status.RETRYING) and c.oldest_due_at is not None
        ]
        if not due or self.database_now is None:
            return 0.0
        return max(0.0, (self.database_now - min(due)).total_seconds())


class QueueSampler:
    """Reads email_outbox_stats every `interval` seconds on its own connection.

    Its success does not count toward /healthz: health is about the delivery loop's own calls.
    """

    def __init__(
        self,
        open_repository: Callable[[], OutboxRepository],
        interval: float,
        stopping: threading.Event,
    ) -> None:
        self.open_repository = open_repository
        self.interval = interval
        self.stopping = stopping
        self.latest = QueueSnapshot()
        self.thread = threading.Thread(target=self._run, name="queue-sampler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def sample(self, repo: OutboxRepository) -> None:
        counts = repo.queue_stats()
        # A worker account granted before these procedures existed: the queue depth still counts;
        # `email-outbox grant worker` again adds the rest.
        try:
            unsent = repo.unsent_failures(UNSENT_WINDOW_SECONDS)
        except AccessDenied:
            unsent = {}
        retention: RetentionRuns | None
        try:
            retention = repo.retention_last_run()
        except AccessDenied:
            retention = None
        tenants: list[TenantStats]
        try:
            tenants = repo.tenant_stats()
        except AccessDenied:
            tenants = []
        now = repo.database_time()
        self.latest = QueueSnapshot(
            counts, now, time.monotonic(), unsent_failures=unsent, retention=retention, tenants=tenants
        )

    def _run(self) -> None:
        repo: OutboxRepository | None = None
        while not self.stopping.is_set():
            try:
                repo = repo or self.open_repository()
                self.sample(repo)
            except OutboxError as exc:
                log.warning("queue depth not read", extra={"error": str(exc)})
                if repo is not None:
                    repo.close()
                repo = None
            self.stopping.wait(self.interval)
        if repo is not None:
            repo.close()
