"""What a worker replica did, counted in process: read by the metrics endpoint and logged at exit.

Plain counters and cumulative histograms under one lock, with no dependency on a metrics library:
email_outbox.worker.metrics presents them to Prometheus at scrape time.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from email_outbox.db.send_rate_calls import RateSlice

SEND_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CLAIM_SIZE_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
# From a second (a worker keeping up) to a day (an email scheduled ahead, or a long outage).
ENQUEUE_TO_SEND_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    86400.0,
)


@dataclass
class Distribution:
    """A cumulative histogram: counts per upper bound (plus +Inf), sum and count. Bounded memory."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def copy(self) -> Distribution:
        return Distribution(self.bounds, list(self.counts), self.total, self.count)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs, '+Inf' last, as the Prometheus text format wants them."""
        out, running = [], 0
        for bound, n in zip([*map(str, self.bounds), "+Inf"], self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


# Sends are slow when the median recent send takes at least this long: then a slot carries on with a
# reservation as soon as it is free; with fast sends the loop's shared claims serve several freed
# slots per CALL and do better (docs/performance.md, "The worker's timing constants").
SLOW_SEND_SECONDS = 0.010
# ... judged on the median of at least this many recent sends: the first sends of a replica open their
# connections and are slow, and reservations taken on their account would only be given back.
JUDGE_AFTER_SENDS = 10


@dataclass
class WorkerStats:
    outcomes: Counter[str] = field(default_factory=Counter)
    # The same per tenant: (tenant, outcome) -> sends (email_outbox_tenant_sends_total).
    tenant_outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    finalize: Counter[str] = field(default_factory=Counter)
    db_errors: Counter[str] = field(default_factory=Counter)
    # The provider breaker (email_outbox.worker.breaker): opened, closed, probes, held, released,
    # own_failures.
    breaker: Counter[str] = field(default_factory=Counter)
    breaker_state: str = "closed"
    breaker_down_since: datetime | None = None
    breaker_last_error: str | None = None
    claims: int = 0
    backlogged: bool = False
    claimed_rows: int = 0
    claim_sizes: Distribution = field(default_factory=lambda: Distribution(CLAIM_SIZE_BUCKETS))
    finalize_group_sizes: Distribution = field(default_factory=lambda: Distribution(CLAIM_SIZE_BUCKETS))
    send_latency: Distribution = field(default_factory=lambda: Distribution(SEND_SECONDS_BUCKETS))
    # From the row's enqueue (database clock) to SES accepting it (this host's clock), accepted sends only.
    enqueue_to_send: Distribution = field(default_factory=lambda: Distribution(ENQUEUE_TO_SEND_BUCKETS))
    # Recent samples only (the throttle logic's view of the current send rate): a replica runs for
    # weeks, so nothing here may grow without bound.
    recent_send_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=50))
    throttle_events: int = 0
    pause_events: int = 0
    in_flight: int = 0
    # The last answer of email_send_rate_take: the account's rate in force, its source, the day's use.
    send_rate: RateSlice | None = None
    last_db_success: float = 0.0
    last_loop: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, counter: str, key: str, n: int = 1) -> None:
        with self.lock:
            getattr(self, counter)[key] += n

    def record_claim(self, rows: int, asked: int) -> None:
        with self.lock:
            # Every row asked for came back: more are probably due (a backlog), so a slot that has
            # just sent carries on with the next instead of going back to the claim loop.
            self.backlogged = rows >= asked > 0
            self.claims += 1
            self.claimed_rows += rows
            self.claim_sizes.observe(rows)

    def record_finalize_group(self, rows: int) -> None:
        with self.lock:
            self.finalize_group_sizes.observe(rows)

    def record_send(
        self, outcome: str, seconds: float, enqueued_at: datetime | None = None, tenant: str | None = None
    ) -> None:
        waited = None
        if outcome == "accepted" and enqueued_at is not None:
            waited = max(0.0, (datetime.now(UTC).replace(tzinfo=None) - enqueued_at).total_seconds())
        with self.lock:
            self.outcomes[outcome] += 1
            if tenant is not None:
                self.tenant_outcomes[(tenant, outcome)] += 1
            self.send_latency.observe(seconds)
            self.recent_send_seconds.append(seconds)
            if waited is not None:
                self.enqueue_to_send.observe(waited)

    def sends_are_slow(self) -> bool:
        """The median of the recent sends took at least SLOW_SEND_SECONDS, judged on at least
        JUDGE_AFTER_SENDS of them: the one judgement behind every choice the worker makes between its
        fast-send and slow-send behaviour (gathering slots, carrying on with reservations, waiting for
        company at a finalize)."""
        median = self.median_send_seconds()
        return median is not None and median >= SLOW_SEND_SECONDS

    def median_send_seconds(self) -> float | None:
        """The median of the recent sends; None until JUDGE_AFTER_SENDS of them are known."""
        with self.lock:
            recent = sorted(self.recent_send_seconds)
        return recent[len(recent) // 2] if len(recent) >= JUDGE_AFTER_SENDS else None

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "outcomes": dict(self.outcomes),
                "finalize": dict(self.finalize),
                "db_errors": dict(self.db_errors),
                "claims": self.claims,
                "claimed_rows": self.claimed_rows,
                "throttle_events": self.throttle_events,
                "pause_events": self.pause_events,
                "breaker": dict(self.breaker),
            }
