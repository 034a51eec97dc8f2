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
        self._last_slow_down = float("-inf")

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

    def acquire_up_to(self, wanted: int, stop: threading.Event) -> int:
        """Wait for at least one token, then take as many as are there, up to `wanted`.

        Returns 0 only when `stop` was set. The worker takes tokens before it claims, so a claimed row
        never waits for the rate limiter while its lease runs.
        """
        while True:
            wait = self.try_acquire()
            if wait == 0.0:
                taken = 1
                with self._lock:
                    if self.rate is None:
                        return wanted
                    extra = min(wanted - 1, int(self._tokens))
                    self._tokens -= extra
                return taken + extra
            if stop.wait(wait):
                return 0

    def give_back(self, count: int) -> None:
        """Return tokens a claim did not use (it found fewer rows than it asked for)."""
        with self._lock:
            if self.rate is not None and count > 0:
                self._tokens = min(max(1.0, self.rate), self._tokens + count)

    def slow_down(self, observed_rate: float) -> None:
        """Throttled by SES: halve the rate (from what was actually being sent when unlimited)."""
        with self._lock:
            now = self._clock()
            # One halving per second: a burst of throttled answers to sends already in flight is one
            # signal, not eight.
            if now - self._last_slow_down < 1.0:
                return
            self._last_slow_down = now
            self._refill(now)
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
