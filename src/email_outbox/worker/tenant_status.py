"""The tenants' watch on one replica: SES's sending status of each tenant that has an SES tenant name (GetTenant), read by one replica at a
time: every few seconds this replica asks the database whose turn is due (email_tenant_status_due hands
each name to one caller) and reads those; a DISABLED tenant is paused (its rows wait, no attempt
used), and an ENABLED or REINSTATED one has a pause SES caused lifted; and the outbox's own
reputation guard (email_tenant_guard, with this replica's thresholds), which holds a tenant's sends
below a priority once SES's events show its complaint or bounce rate at SES's review thresholds
(docs/design.md, "Tenants")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from email_outbox.db.repository import OutboxRepository
from email_outbox.db.tenant_calls import GuardedTenant
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.database import DatabaseCalls

log = logging.getLogger("email_outbox.worker")

# A tenant's status is read again once this old, by whichever replica asks first: well inside the
# 60 s the outbox promises, with a poll of POLL_SECONDS.
REFRESH_SECONDS = 30
POLL_SECONDS = 5.0
DISABLED = "DISABLED"


def get_tenant_status(client: Any) -> Callable[[str], str]:
    """SendingStatus of SESv2 GetTenant through `client` (ENABLED, REINSTATED or DISABLED)."""

    def read(name: str) -> str:
        return str(client.get_tenant(TenantName=name)["Tenant"]["SendingStatus"])

    return read


class TenantStatusWatch:
    def __init__(
        self,
        database: DatabaseCalls,
        config: WorkerConfig,
        read_status: Callable[[], Callable[[str], str]],
        stopping: threading.Event,
    ) -> None:
        self._database = database
        self._config = config
        self._worker_id = config.worker_id
        self._make_reader = read_status
        self._reader: Callable[[str], str] | None = None
        self._stopping = stopping
        self._thread = threading.Thread(target=self._run, name="tenant-status", daemon=True)

    def start(self) -> TenantStatusWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.guard()
                self.read_due()
            except Exception as exc:  # the database or SES had a bad moment: the next turn tries again
                log.warning("tenant status not read", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
            self._stopping.wait(POLL_SECONDS)

    def guard(self) -> int:
        """Run the reputation guard; each tenant it holds is logged once, here, when it is set."""
        c = self._config

        def check(repo: OutboxRepository) -> list[GuardedTenant]:
            return repo.tenant_guard(
                self._worker_id,
                c.tenant_guard_min_sends,
                c.tenant_guard_complaint_rate,
                c.tenant_guard_bounce_rate,
                c.tenant_guard_below_priority,
            )

        guarded = self._database.call("email_tenant_guard", check)
        for g in guarded:
            log.error(
                "tenant reputation guard: its sends below the guard's priority wait until an operator's tenants resume",
                extra={
                    "tenant": g.tenant,
                    "below_priority": c.tenant_guard_below_priority,
                    "sends_24h": g.sends,
                    "complaint_rate": g.complaint_rate,
                    "bounce_rate": g.bounce_rate,
                },
            )
        return len(guarded)

    def read_due(self) -> int:
        """Read the tenants whose turn this replica took; the number read."""
        names = self._database.call(
            "email_tenant_status_due", lambda r: r.tenant_status_due(self._worker_id, REFRESH_SECONDS)
        )
        if names and self._reader is None:
            self._reader = self._make_reader()
        for name in names:
            assert self._reader is not None
            try:
                status = self._reader(name)
            except Exception as exc:  # refused or unreachable: the status stays as last read
                log.warning(
                    "GetTenant failed",
                    extra={"ses_tenant": name, "error": f"{type(exc).__name__}: {exc}"[:300]},
                )
                continue
            reason = "ses-disabled" if status == DISABLED else None
            changed = self._report(name, reason, status)
            if changed:
                log.log(
                    logging.ERROR if reason else logging.WARNING,
                    "SES tenant disabled: its outbox tenant is paused"
                    if reason
                    else "SES tenant enabled again",
                    extra={"ses_tenant": name, "sending_status": status},
                )
        return len(names)

    def _report(self, name: str, reason: str | None, status: str) -> int:
        def report(repo: OutboxRepository) -> int:
            return repo.tenant_sending_paused(name, reason, self._worker_id, "GetTenant", status)

        return self._database.call("email_tenant_sending_paused", report)
