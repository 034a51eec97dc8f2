"""The per-replica send rate: a token bucket that SES throttling slows down and successes restore."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Holds `max_rate` sends per second (None: unlimited, until throttling sets a rate)."""

    def __init__(self, max_rate: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_rate = max_rate
        self.rate = max_rate
        self._clock = clock
        self._tokens = 1.0
        self._stamp = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        if self.rate is None:
            return
        burst = max(1.0, self.rate)
        self._tokens = min(burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def try_acquire(self) -> float:
        """Take a token and return 0, or return how long to wait before one is there."""
        with self._lock:
            if self.rate is None:
                return 0.0
            now = self._clock()
            self._refill(now)
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.rate

    def acquire(self, stop: threading.Event) -> bool:
        """Block until a token is taken (True) or `stop` is set (False)."""
        while True:
            wait = self.try_acquire()
            if wait == 0.0:
                return True
            if stop.wait(wait):
                return False

    def slow_down(self, observed_rate: float) -> None:
        """Throttled by SES: halve the rate (from what was actually being sent when unlimited)."""
        with self._lock:
            self._refill(self._clock())
            current = self.rate if self.rate is not None else max(observed_rate, 1.0)
            self.rate = max(0.5, current / 2)

    def speed_up(self) -> None:
        """A success: win back 2% of the rate, up to the configured maximum (or unlimited)."""
        with self._lock:
            if self.rate is None:
                return
            self._refill(self._clock())
            grown = self.rate * 1.02 + 0.01
            if self.max_rate is not None:
                self.rate = min(self.max_rate, grown)
            else:
                self.rate = grown
