"""How many bytes of email bodies a replica holds at once, whatever its batch size and concurrency.

A claim carries small bodies inline. A row whose bodies are larger is claimed without them, and its
send first takes that many bytes from this budget, then loads its bodies, sends, and gives the bytes
back. Sends of large emails wait for each other instead of piling up in memory. A body larger than the
whole budget takes all of it, so it goes out alone rather than never.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ByteBudget:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._changed = threading.Condition()

    @contextmanager
    def hold(self, size: int, stopping: threading.Event) -> Iterator[bool]:
        """Yields True once `size` bytes are held (given back on exit), or False if `stopping` is set first."""
        size = min(max(size, 0), self.capacity)
        with self._changed:
            while self.used + size > self.capacity and not stopping.is_set():
                self._changed.wait(timeout=0.5)
            held = self.used + size <= self.capacity
            if held:
                self.used += size
        try:
            yield held
        finally:
            if held:
                with self._changed:
                    self.used -= size
                    self._changed.notify_all()
