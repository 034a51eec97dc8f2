"""Prometheus metrics for one worker replica, and the one small HTTP server that also answers its
health checks.

GET /metrics  the Prometheus text format: the replica's counters (email_outbox.worker.stats) read at scrape
              time, plus the live queue (Pending, Retrying, Processing) per status, refreshed every
              `stats_interval` seconds by the queue sampler (worker.queue_sampler) on a connection of
              its own (its cost follows the backlog, not the history).
GET /healthz  200 while the delivery loop turns and the database answered recently; 503 otherwise.
GET /readyz   200 while /healthz is and the replica claims (the provider is enabled and it is not
              shutting down); 503 otherwise (both judged by worker.health).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from email_outbox.db.repository import OutboxRepository
from email_outbox.db.send_rate_calls import PAUSED_DAILY_QUOTA, RateSlice
from email_outbox.db.tenant_calls import TenantStats
from email_outbox.metrics_server import MetricsServer
from email_outbox.worker.health import Health
from email_outbox.worker.queue_sampler import QueueSampler, QueueSnapshot
from email_outbox.worker.stats import Distribution, WorkerStats


class WorkerCollector(Collector):
    """Presents WorkerStats and the latest queue snapshot as Prometheus metric families."""

    def __init__(self, stats: WorkerStats, queue: Callable[[], QueueSnapshot], worker_id: str) -> None:
        self.stats = stats
        self.queue = queue
        self.worker_id = worker_id

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        with s.lock:
            outcomes = dict(s.outcomes)
            tenant_outcomes = dict(s.tenant_outcomes)
            finalize = dict(s.finalize)
            db_errors = dict(s.db_errors)
            claims, claimed_rows = s.claims, s.claimed_rows
            claim_sizes = s.claim_sizes.copy()
            finalize_groups = s.finalize_group_sizes.copy()
            send_latency = s.send_latency.copy()
            enqueue_to_send = s.enqueue_to_send.copy()
            throttles, pauses, in_flight = s.throttle_events, s.pause_events, s.in_flight
            last_db, last_loop = s.last_db_success, s.last_loop
            breaker, breaker_state, down_since = dict(s.breaker), s.breaker_state, s.breaker_down_since
            send_rate = s.send_rate
            last_error = s.breaker_last_error

        yield _labelled(
            CounterMetricFamily,
            "email_outbox_sends",
            "SES calls by classified outcome (accepted, permanent, transient, throttled, account, ambiguous, disabled)",
            "outcome",
            outcomes,
        )
        yield _labelled(
            CounterMetricFamily,
            "email_outbox_finalize",
            "Finalize and release results: Sent, Retrying, Failed, UnknownOutcome, Released, Started, stale_claimant"
            " (refused: the claim was no longer held), *_never_landed, *_refused_after_reconnect",
            "result",
            finalize,
        )
        yield _labelled(
            CounterMetricFamily,
            "email_outbox_db_errors",
            "Database errors by kind: the server error code of a retried transient error (1213 deadlock or Galera certification conflict, 1205 lock wait, 1020 snapshot, 1047 Galera node not ready), or unavailable (reconnected)",
            "kind",
            db_errors,
        )
        yield CounterMetricFamily("email_outbox_claims", "email_claim_batch calls", value=claims)
        yield CounterMetricFamily("email_outbox_claimed_rows", "Rows claimed", value=claimed_rows)
        yield _histogram("email_outbox_claim_batch_size", "Rows per claim", claim_sizes)
        yield _histogram(
            "email_outbox_finalize_group_size",
            "Finalizes, releases and start marks per database call (one alone: its own procedure;"
            " a finalize and its slot's next start: email_finalize_and_start; more: email_finalize_batch)",
            finalize_groups,
        )
        yield _histogram("email_outbox_send_seconds", "SES SendEmail call duration", send_latency)
        yield _histogram(
            "email_outbox_enqueue_to_send_seconds",
            "From an email's enqueue to SES accepting it (accepted sends; a scheduled send_after counts)",
            enqueue_to_send,
        )
        yield GaugeMetricFamily("email_outbox_in_flight", "Claimed rows not yet finalized", value=in_flight)
        yield CounterMetricFamily("email_outbox_throttle_events", "SES throttling answers", value=throttles)
        yield CounterMetricFamily(
            "email_outbox_pause_events", "Replica pauses after an SES account problem", value=pauses
        )
        yield from _breaker_metrics(breaker_state, down_since, last_error, breaker)
        now = time.monotonic()
        yield GaugeMetricFamily(
            "email_outbox_seconds_since_db_success",
            "Seconds since the database last answered this replica",
            value=now - last_db if last_db else float("inf"),
        )
        yield GaugeMetricFamily(
            "email_outbox_seconds_since_loop",
            "Seconds since the delivery loop last turned",
            value=now - last_loop if last_loop else float("inf"),
        )

        if send_rate is not None:
            yield from _send_rate_metrics(send_rate)
        snapshot = self.queue()
        if snapshot.sampled_at:
            yield from _queue_metrics(snapshot, now)
        yield from _tenant_metrics(snapshot.tenants, tenant_outcomes)
        info = GaugeMetricFamily("email_outbox_worker_info", "This replica", labels=["worker_id"])
        info.add_metric([self.worker_id], 1)
        yield info


def _breaker_metrics(
    breaker_state: str, down_since: datetime | None, last_error: str | None, events: dict[str, int]
) -> Iterator[Metric]:
    """The shared provider breaker as this replica last read it, and this replica's breaker events."""
    state = GaugeMetricFamily(
        "email_outbox_provider_breaker",
        "The provider breaker as this replica last read it (shared by all replicas): 1 for its state",
        labels=["state"],
    )
    for name in ("closed", "half_open", "open"):
        state.add_metric([name], 1 if name == breaker_state else 0)
    yield state
    yield GaugeMetricFamily(
        "email_outbox_provider_down_since_timestamp_seconds",
        "When the provider was seen down (Unix time, UTC), while the breaker is not closed; 0 otherwise",
        value=down_since.replace(tzinfo=UTC).timestamp() if down_since else 0,
    )
    error = GaugeMetricFamily(
        "email_outbox_provider_last_error",
        "1, labelled with the error code that keeps the provider breaker open; absent while closed",
        labels=["code"],
    )
    if down_since and last_error:
        error.add_metric([last_error], 1)
    yield error
    yield _labelled(
        CounterMetricFamily,
        "email_outbox_provider_breaker_events",
        "This replica's breaker events: opened, closed, probes (sends made as a probe), probes_failed, held (claimed rows"
        " given back unsent while the provider was down), released (transient failures given back"
        " without using an attempt), own_failures (the rule was met but SES answered GetAccount: the"
        " failures were left to the emails' own attempts)",
        "event",
        events,
    )


def _queue_metrics(snapshot: QueueSnapshot, now: float) -> Iterator[Metric]:
    """The queue as the last email_outbox_queue_stats read saw it."""
    depth = GaugeMetricFamily(
        "email_outbox_queue_depth",
        "Rows per live status (email_outbox_queue_stats)",
        labels=["status"],
    )
    for c in snapshot.counts:
        depth.add_metric([c.status.value], c.count)
    yield depth
    yield _labelled(
        GaugeMetricFamily,
        "email_outbox_failed_unsent_24h",
        "Emails that ended Failed in the last 24 h without being handed to SES, by reason"
        " (Expired, Cancelled, Suppressed; email_unsent_failure_stats)",
        "reason",
        snapshot.unsent_failures,
    )
    yield GaugeMetricFamily(
        "email_outbox_oldest_due_age_seconds",
        "How long the oldest due Pending/Retrying row has waited (database clock)",
        value=snapshot.oldest_due_age_seconds(),
    )
    if snapshot.retention is not None:
        finished = snapshot.retention.last_finished_at
        yield GaugeMetricFamily(
            "email_outbox_retention_last_finished_timestamp_seconds",
            "When the last retention run finished (Unix time, database clock; 0: never): email_retention_last_run",
            value=finished.replace(tzinfo=UTC).timestamp() if finished else 0,
        )
    yield GaugeMetricFamily(
        "email_outbox_queue_sample_age_seconds",
        "Seconds since the queue depth was read",
        value=now - snapshot.sampled_at,
    )


def _tenant_metrics(tenants: list[TenantStats], outcomes: dict[tuple[str, str], int]) -> Iterator[Metric]:
    """Per tenant, labelled with the operators' tenant names (docs/operations.md, "Tenants")."""
    sends = CounterMetricFamily(
        "email_outbox_tenant_sends",
        "SES calls of this replica by tenant and classified outcome (as email_outbox_sends)",
        labels=["tenant", "outcome"],
    )
    for (tenant, outcome), count in sorted(outcomes.items()):
        sends.add_metric([tenant, outcome], count)
    yield sends
    paused = GaugeMetricFamily(
        "email_outbox_tenant_paused",
        "1 while the tenant's sends wait: paused (operator, ses-disabled, ses-sending-paused) or held by the"
        " reputation guard (reputation-guard-below-N: rows below priority N wait)",
        labels=["tenant", "reason"],
    )
    due = GaugeMetricFamily(
        "email_outbox_tenant_due_rows", "The tenant's due Pending/Retrying rows", labels=["tenant"]
    )
    age = GaugeMetricFamily(
        "email_outbox_tenant_oldest_due_age_seconds",
        "How long the tenant's oldest due row has waited (database clock)",
        labels=["tenant"],
    )
    bounce = GaugeMetricFamily(
        "email_outbox_tenant_bounce_rate",
        "The tenant's permanent bounces per send over the last 24 h, from SES's events",
        labels=["tenant"],
    )
    complaint = GaugeMetricFamily(
        "email_outbox_tenant_complaint_rate",
        "The tenant's complaints per send over the last 24 h, from SES's events",
        labels=["tenant"],
    )
    for t in tenants:
        if t.held is not None:
            paused.add_metric([t.tenant, t.held], 1)
        due.add_metric([t.tenant], t.due_rows)
        age.add_metric([t.tenant], t.oldest_due_age_seconds)
        bounce.add_metric([t.tenant], t.bounce_rate or 0.0)
        complaint.add_metric([t.tenant], t.complaint_rate or 0.0)
    yield from (paused, due, age, bounce, complaint)


def _send_rate_metrics(r: RateSlice) -> Iterator[Metric]:
    """The account's shared rate and daily quota as this replica last heard them from the database."""
    rate = GaugeMetricFamily(
        "email_outbox_send_rate",
        "Sends per second in force for the whole SES account, all replicas together (after a throttling"
        " cut, while it grows back), by source of the account's rate: ses, override or default",
        labels=["source"],
    )
    rate.add_metric([r.rate_source], r.rate)
    yield rate
    account = GaugeMetricFamily(
        "email_outbox_account_send_rate", "The SES account's maximum send rate", labels=["source"]
    )
    account.add_metric([r.rate_source], r.account_rate)
    yield account
    yield GaugeMetricFamily(
        "email_outbox_daily_sent",
        "Sends counted against the daily quota (SES's SentLast24Hours plus what was handed out since)",
        value=r.daily_used,
    )
    if r.daily_quota is not None:
        yield GaugeMetricFamily(
            "email_outbox_daily_quota", "The SES account's Max24HourSend", value=r.daily_quota
        )
    paused = GaugeMetricFamily(
        "email_outbox_paused", "1 while sending is paused for this reason", labels=["reason"]
    )
    paused.add_metric([PAUSED_DAILY_QUOTA], 1 if r.paused == PAUSED_DAILY_QUOTA else 0)
    yield paused


def _labelled(kind: Any, name: str, doc: str, label: str, values: dict[str, int]) -> Metric:
    family = kind(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family  # type: ignore[no-any-return]


def _histogram(name: str, doc: str, d: Distribution) -> Metric:
    return HistogramMetricFamily(name, doc, buckets=d.cumulative(), sum_value=d.total)


def start_metrics(
    stats: WorkerStats,
    worker_id: str,
    open_repository: Callable[[], OutboxRepository],
    stopping: threading.Event,
    *,
    host: str,
    port: int,
    stats_interval: float,
    stale_after: float,
    provider_enabled: bool = True,
) -> tuple[MetricsServer, QueueSampler]:
    sampler = QueueSampler(open_repository, stats_interval, stopping)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(stats, lambda: sampler.latest, worker_id))
    health = Health(stats, stale_after, provider_enabled, stopping)
    server = MetricsServer(host, port, registry, health.check, health.ready)
    server.start()
    sampler.start()
    return server, sampler


__all__ = ["Health", "QueueSampler", "QueueSnapshot", "WorkerCollector", "start_metrics"]
