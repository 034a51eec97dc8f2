"""A call whose first use in a process must run alone: later ones run side by side."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class FirstUseGate:
    """Runs the first call alone, however many threads arrive at once, and every call after the first
    has ended (returned or raised) without waiting.

    mysql-connector's C extension (9.x) sets its client library up on a process's first connection,
    its authentication plugins among it (mysql_native_password is a loadable plugin there), and that set-up is not
    thread-safe: threads making a process's first connections at once met "2059 Authentication plugin
    'mysql_native_password' cannot be loaded: not initialized" (a worker's start-up, whose stats reader
    connects beside the main thread, exited on it; reproduced in 3 of 150 processes of 16 threads each).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used = False

    def run(self, call: Callable[[], T]) -> T:
        if self._used:
            return call()
        with self._lock:
            if self._used:
                return call()
            try:
                return call()
            finally:
                self._used = True
