"""Crash points for fault-injection runs: off unless EMAIL_OUTBOX_FAILPOINTS is set.

EMAIL_OUTBOX_FAILPOINTS="after_claim=0.2,before_finalize=0.1,during_finalize=0.1" makes this
process SIGKILL itself at that point with that probability, the way FoundationDB's BUGGIFY or
fail-rs put crashes where a test wants them instead of where a timer happens to land. The soak
(bench/soak.py) uses them to crash a worker after a claim but before the send, after the send but
before the finalize, and while the finalize is on the wire. EMAIL_OUTBOX_FAILPOINTS_SEED makes the
coin flips repeatable.
"""

from __future__ import annotations

import os
import random
import signal
import threading

POINTS = (
    "after_claim",
    "before_finalize",
    "during_finalize",
    # The events consumer (email_outbox.events): with a batch recorded but not committed, and with it
    # committed but its messages not yet deleted from the queue.
    "events_before_commit",
    "events_before_delete",
)


def _parse(spec: str) -> dict[str, float]:
    points: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, probability = item.partition("=")
        if name not in POINTS:
            raise ValueError(f"EMAIL_OUTBOX_FAILPOINTS: unknown point {name!r}; one of {', '.join(POINTS)}")
        points[name] = float(probability or 1.0)
    return points


_points = _parse(os.environ.get("EMAIL_OUTBOX_FAILPOINTS", ""))
_rng = random.Random(os.environ.get("EMAIL_OUTBOX_FAILPOINTS_SEED"))
_lock = threading.Lock()


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _fires(name: str) -> bool:
    probability = _points.get(name)
    if not probability:
        return False
    with _lock:
        return _rng.random() < probability


def hit(name: str) -> None:
    """Crash here, now, if this point is armed and the coin says so."""
    if _fires(name):
        _crash()


def hit_soon(name: str, within_seconds: float = 0.003) -> None:
    """Crash a moment from now: armed before a database call, it lands while the call is on the wire
    (or just after it returned), which no point in Python code can reach exactly."""
    if _fires(name):
        with _lock:
            delay = _rng.uniform(0, within_seconds)
        threading.Timer(delay, _crash).start()
