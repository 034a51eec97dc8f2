"""Send slots: a row holds one from its claim until its finalize has committed, so a crash leaves at
most `concurrency` rows ambiguous and a claimed row never waits for a slot."""

from __future__ import annotations

import threading
import time

from email_outbox.worker.stats import WorkerStats


class Slots:
    def __init__(self, concurrency: int, stats: WorkerStats) -> None:
        self.concurrency = concurrency
        self._stats = stats
        self._changed = threading.Condition()
        self._taken = 0

    @property
    def taken(self) -> int:
        return self._taken

    def wait_for_free(self, timeout: float, stopping: threading.Event) -> int:
        """The number of free slots, after waiting up to `timeout` for at least one.

        It does not wait for more to free up: with slow sends a slot waiting is a send not made (the
        claim loop gathers, `wait_for_more`, only while sends are fast)."""
        with self._changed:
            free = self.concurrency - self._taken
            if free <= 0 and not stopping.is_set():
                self._changed.wait(timeout=timeout)
                free = self.concurrency - self._taken
            return max(free, 0)

    def wait_for_more(self, want: int, timeout: float) -> int:
        """The number of free slots, after waiting up to `timeout` for `want` of them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.concurrency - self._taken < want:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(timeout=remaining)
            return max(self.concurrency - self._taken, 0)

    def take(self, n: int) -> None:
        with self._changed:
            self._taken += n
            self._stats.in_flight = self._taken

    def free_one(self) -> None:
        with self._changed:
            self._taken -= 1
            self._stats.in_flight = self._taken
            self._changed.notify_all()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_all_free(self, until: float) -> bool:
        """Wait until no slot is taken or the monotonic clock passes `until`; True if all are free."""
        with self._changed:
            while self._taken > 0:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(timeout=min(remaining, 0.5))
            return self._taken == 0
