"""The consumer's /metrics (Prometheus text format) on --metrics-port: events by type and outcome
from its own Tally, and the bounce and complaint rates of the last 24 hours from
`email_provider_stats`, refreshed every `interval` seconds on a connection of its own. /healthz: the
process is up; /readyz: that refresh reached the database within the last three intervals."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import OutboxError
from email_outbox.events.ingest import Tally
from email_outbox.metrics_server import MetricsServer
from email_outbox.models import ProviderStats

log = logging.getLogger("email_outbox.events")

DAY_SECONDS = 86_400


class EventsCollector(Collector):
    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.stats: ProviderStats | None = None

    def collect(self) -> Iterator[Metric]:
        t = self.tally
        by_type = CounterMetricFamily(
            "email_outbox_provider_events", "SES events recorded by this consumer, by type", labels=["type"]
        )
        for event_type, n in sorted(t.by_type.items()):
            by_type.add_metric([event_type], n)
        yield by_type
        outcomes = CounterMetricFamily(
            "email_outbox_provider_event_outcomes",
            "SES events and messages seen, by what became of them",
            labels=["outcome"],
        )
        for outcome, n in (
            ("recorded", t.recorded),
            ("duplicate", t.duplicates),
            ("unmatched", t.unmatched),
            ("skipped", t.skipped),
            ("malformed", t.malformed),
        ):
            outcomes.add_metric([outcome], n)
        yield outcomes
        resolved = CounterMetricFamily(
            "email_outbox_unknown_resolved", "UnknownOutcome rows settled from SES evidence", labels=["to"]
        )
        for to, n in sorted(t.resolved.items()):
            resolved.add_metric([to], n)
        yield resolved
        yield CounterMetricFamily(
            "email_outbox_addresses_suppressed", "addresses this consumer put on the suppression list",
            value=t.suppressed,
        )  # fmt: skip
        stats = self.stats
        if stats is not None:
            for name, value, text in (
                ("email_outbox_bounce_rate_24h", stats.bounce_rate, "permanent bounces per Send, last 24 h"),
                ("email_outbox_complaint_rate_24h", stats.complaint_rate, "complaints per Send, last 24 h"),
            ):
                if value is not None:
                    yield GaugeMetricFamily(name, text, value=value)
            yield GaugeMetricFamily(
                "email_outbox_unknown_without_evidence",
                "UnknownOutcome rows with no SES event after 15 minutes: they need an operator",
                value=stats.unknown_without_evidence,
            )


def serve(
    host: str,
    port: int,
    tally: Tally,
    open_repository: Callable[[], OutboxRepository],
    stop: threading.Event,
    interval: float = 30.0,
) -> MetricsServer:
    collector = EventsCollector(tally)
    registry = CollectorRegistry()
    registry.register(collector)
    last_reached: list[float] = []  # when the refresh last reached the database (monotonic)

    def ready() -> tuple[bool, dict[str, Any]]:
        age = time.monotonic() - last_reached[-1] if last_reached else None
        ok = age is not None and age <= 3 * interval
        return ok, {"ok": ok, "seconds_since_db_success": None if age is None else round(age, 3)}

    # The worker's bounded server (one thread, idle connections dropped oldest first); bound to the
    # host given, loopback by default.
    server = MetricsServer(host, port, registry, ready=ready)
    server.start()

    def refresh() -> None:
        repo: OutboxRepository | None = None
        while not stop.is_set():
            try:
                repo = repo or open_repository()
                collector.stats = repo.provider_stats(DAY_SECONDS, 900)
                last_reached[:] = [time.monotonic()]
            except OutboxError as exc:
                log.warning("provider stats unavailable", extra={"error": str(exc)[:200]})
                if repo is not None:
                    repo.close()
                repo = None
            stop.wait(interval)
        if repo is not None:
            repo.close()

    threading.Thread(target=refresh, name="events-metrics", daemon=True).start()
    return server
