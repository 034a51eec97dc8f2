"""How many password checks a client gets before its checks go one at a time.

Counted over a minute, per user at a client address and per client address; an IPv6 address counts
by its /64, which one client usually holds whole. The client address is the TCP peer, or behind
`--trusted-proxy` the address the proxy reports (`client_address`), so that users behind one TLS
proxy are not one client. A try counts against its user and its address the moment it starts, so a
parallel burst is held to the limit too; a login that succeeds takes its count back.

Past the limit a client is not refused outright: a correct password must always get in (a guesser
cannot lock the real user out). Its tries go through one check at a time for the whole console (the
app's over-limit lane), and a wrong one is answered 429.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Sequence

from email_outbox.console.auth import peer_in

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
        """Count a try of `user` from `peer` as failed until `succeeded` says otherwise; whether the
        client was still within its limits before this try."""
        address = address_key(peer)
        with self._lock:
            now = time.monotonic()
            within = (
                self._count((address, None), now) < self.per_address
                and self._count((address, user), now) < self.per_user
            )
            self._add((address, None), now, 1)
            self._add((address, user), now, 1)
            return within

    def succeeded(self, peer: str, user: str) -> None:
        address = address_key(peer)
        with self._lock:
            now = time.monotonic()
            self._add((address, None), now, -1)
            self._add((address, user), now, -1)

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


def client_address(
    peer: str, forwarded_for: list[str], trusted: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> str:
    """The client a request comes from: the TCP peer, or when the peer is a trusted proxy, the nearest
    address in X-Forwarded-For that is not itself a trusted proxy (each proxy appends the address it
    was reached from, so the right end is the only part a client cannot write)."""
    if not peer_in(peer, trusted):
        return peer
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not peer_in(hop, trusted):
            return hop
    return hops[0] if hops else peer
