"""How fast this replica sends: its share of the account's rate (SharedRate, through the database),
under its own optional cap (a local token bucket), and the pauses after an account problem or with the
provider switched off."""

from __future__ import annotations

import threading
import time

from email_outbox.worker.actions import Effect
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.ratelimit import TokenBucket
from email_outbox.worker.shared_rate import SharedRate
from email_outbox.worker.stats import WorkerStats


class Pacer:
    def __init__(self, config: WorkerConfig, stats: WorkerStats, shared: SharedRate | None = None) -> None:
        """`shared` None: this replica's own cap alone (parts tested without a database)."""
        self.bucket = TokenBucket(config.max_send_rate)
        self.shared = shared
        self._config = config
        self._stats = stats
        self._paused_until = 0.0

    def tokens(self, wanted: int, stopping: threading.Event) -> int:
        """Rate tokens for up to `wanted` sends, taken before the claim: a claimed row never waits here.
        0 when stopping, or paused by the daily quota for now."""
        own = self.bucket.acquire_up_to(wanted, stopping)
        if self.shared is None or own == 0:
            return own
        taken = self.shared.take(own, stopping)
        self.bucket.give_back(own - taken)
        return taken

    def tokens_at_hand(self, wanted: int) -> int:
        """Up to `wanted` rate tokens there now; never waits."""
        own = 0
        while own < wanted and self.bucket.try_acquire() == 0.0:
            own += 1
        if self.shared is None or own == 0:
            return own
        taken = self.shared.take_at_hand(own)
        self.bucket.give_back(own - taken)
        return taken

    def give_back(self, unused: int) -> None:
        self.bucket.give_back(unused)
        if self.shared is not None:
            self.shared.give_back(unused)

    def pause_remaining(self) -> float:
        return self._paused_until - time.monotonic()

    def apply(self, effect: Effect) -> None:
        if effect is Effect.SPEED_UP:
            self.bucket.speed_up()
        elif effect is Effect.SLOW_DOWN:
            with self._stats.lock:
                self._stats.throttle_events += 1
            if self.shared is not None:
                self.shared.throttled()
            else:
                self.bucket.slow_down(self._observed_rate())
        elif effect is Effect.PAUSE_REPLICA:
            with self._stats.lock:
                self._stats.pause_events += 1
            self._pause(self._config.account_pause_seconds)
        elif effect is Effect.HOLD_CLAIMS:
            self._pause(self._config.poll_interval)

    def _pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def _observed_rate(self) -> float:
        with self._stats.lock:
            recent = list(self._stats.recent_send_seconds)
        return len(recent) / max(sum(recent), 1e-3) * self._config.concurrency if recent else 1.0
