"""How many failed logins the console takes before a client must wait.

Counted over a minute, per user at an address and per address; an IPv6 address counts by its /64,
which one client usually holds whole. Past `per_user` failures that user waits it out from that
address, so someone guessing one password behind a shared proxy or NAT does not lock everyone else
out; past `per_address` failures (guesses spread over many names) everyone at the address waits. A
login counts against its user from the moment it starts, so a burst of parallel guesses is held to
the limit too, and a login that succeeds takes its count back.
"""

from __future__ import annotations

import ipaddress
import threading
import time

Key = tuple[str, str | None]


def address_key(peer: str) -> str:
    """The address a failure counts against: the IPv4 address, or the IPv6 /64."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class FailedLogins:
    def __init__(self, per_user: int = 20, per_address: int = 100, window_seconds: float = 60.0) -> None:
        self.per_user, self.per_address, self.window = per_user, per_address, window_seconds
        self._counts: dict[Key, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def start(self, peer: str, user: str) -> bool:
        """Whether `user` may try a password from `peer` now; if so, the try counts as failed until
        `succeeded` says otherwise."""
        address = address_key(peer)
        with self._lock:
            now = time.monotonic()
            if self._count((address, None), now) >= self.per_address:
                return False
            if self._count((address, user), now) >= self.per_user:
                return False
            self._add((address, user), now, 1)
            return True

    def failed(self, peer: str) -> None:
        """A try that failed counts against its address as well."""
        with self._lock:
            self._add((address_key(peer), None), time.monotonic(), 1)

    def succeeded(self, peer: str, user: str) -> None:
        with self._lock:
            self._add((address_key(peer), user), time.monotonic(), -1)

    def _count(self, key: Key, now: float) -> int:
        start, count = self._counts.get(key, (now, 0))
        return count if now - start <= self.window else 0

    def _add(self, key: Key, now: float, delta: int) -> None:
        if len(self._counts) > 10_000:  # only ended windows go: a live count is never forgotten
            self._counts = {k: v for k, v in self._counts.items() if now - v[0] <= self.window}
        start, count = self._counts.get(key, (now, 0))
        if now - start > self.window:
            start, count = now, 0
        self._counts[key] = (start, max(0, count + delta))
