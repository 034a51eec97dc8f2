"""The worker's one INFO line per interval: what it finalized since the last line. Per-email lines
are DEBUG, so a busy replica's log costs nothing on the send path."""

from __future__ import annotations

import logging
import time
from collections import Counter

from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")


class ProgressLine:
    def __init__(self, stats: WorkerStats, interval: float) -> None:
        self._stats = stats
        self._interval = interval
        self._last = time.monotonic()
        self._seen: Counter[str] = Counter()

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._last >= self._interval:
            self.write(now)

    def write(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._stats.lock:
            finalized = Counter(self._stats.finalize)
            in_flight = self._stats.in_flight
        since = finalized - self._seen
        if since:
            log.info(
                "progress",
                extra={
                    **{k: since[k] for k in sorted(since)},
                    "in_flight": in_flight,
                    "seconds": round(now - self._last, 1),
                },
            )
        self._seen, self._last = finalized, now
