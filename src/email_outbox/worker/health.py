"""The replica's health as /healthz and /readyz answer it: the delivery loop turns and the database
answered recently; ready while it also claims."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from email_outbox.worker.stats import WorkerStats


@dataclass
class Health:
    stats: WorkerStats
    stale_after: float
    # False: the worker was started with the provider disabled and claims nothing, by design.
    provider_enabled: bool = True
    # Set once a signal asked the replica to stop: it claims nothing more.
    stopping: threading.Event = field(default_factory=threading.Event)

    def check(self) -> tuple[bool, dict[str, Any]]:
        now = time.monotonic()
        with self.stats.lock:
            last_db, last_loop = self.stats.last_db_success, self.stats.last_loop
        loop_age = now - last_loop if last_loop else None
        db_age = now - last_db if last_db else None
        ok = (
            loop_age is not None
            and loop_age <= self.stale_after
            and db_age is not None
            and db_age <= self.stale_after
        )
        return ok, {
            "ok": ok,
            "seconds_since_loop": None if loop_age is None else round(loop_age, 3),
            "seconds_since_db_success": None if db_age is None else round(db_age, 3),
            "stale_after_seconds": self.stale_after,
            "provider_enabled": self.provider_enabled,
            "claiming": self.provider_enabled and not self.stopping.is_set(),
        }

    def ready(self) -> tuple[bool, dict[str, Any]]:
        """/readyz: healthy, and claiming: the database answers and this replica takes work."""
        healthy, detail = self.check()
        ready = healthy and bool(detail["claiming"])
        return ready, {**detail, "ok": ready}
