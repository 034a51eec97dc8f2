"""The calls about tenants (email_tenant_*): a part of OutboxRepository, kept apart like the
send-rate calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from email_outbox.db.calls import Calls

# The rows migration 0017 starts with: the shared default tenant (id 1, every row enqueued before
# tenants and every message that names none, from an account with no default of its own), which
# every account may use, and the claim's fair-share clock at 0.
DEFAULT_TENANT = "default"
INITIAL_TENANT_ROWS = (
    "INSERT IGNORE INTO email_tenants (id, name, created_at, updated_at)"
    " VALUES (1, 'default', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    "INSERT IGNORE INTO email_tenant_accounts (account, tenant_id) VALUES ('*', 1)",
    "INSERT IGNORE INTO email_tenant_schedule (id, virtual_time) VALUES (1, 0)",
)


@dataclass(frozen=True)
class Tenant:
    """One tenant as operators set it, and what holds it now."""

    name: str
    weight: int
    max_priority: int
    send_rate: float | None
    daily_quota: int | None
    max_waiting_rows: int | None
    ses_tenant_name: str | None
    accounts: tuple[str, ...]
    default_for: tuple[str, ...]
    paused_reason: str | None
    guard_below_priority: int | None
    guard_reason: str | None
    ses_sending_status: str | None
    day_count: int


@dataclass(frozen=True)
class TenantStats:
    """One row of email_tenant_stats: what `status`, the console and /metrics show per tenant."""

    tenant: str
    weight: int
    paused_reason: str | None
    guard_below_priority: int | None
    guard_reason: str | None
    due_rows: int
    oldest_due_age_seconds: float
    claimed_24h: int
    sends_24h: int
    bounce_rate: float | None
    complaint_rate: float | None

    @property
    def held(self) -> str | None:
        """Why its sends wait, if they do: the `reason` label of email_outbox_tenant_paused."""
        if self.paused_reason:
            return self.paused_reason
        if self.guard_below_priority is not None:
            return f"reputation-guard-below-{self.guard_below_priority}"
        return None


@dataclass(frozen=True)
class GuardedTenant:
    tenant: str
    sends: int
    complaint_rate: float
    bounce_rate: float
    reason: str


@dataclass(frozen=True)
class TenantResume:
    affected: int
    paused_reason: str | None
    guard_below_priority: int | None


class TenantCalls(Calls):
    def tenant_add(self, name: str, settings: dict[str, Any], added_by: str, reason: str) -> int:
        return self._affected(
            "email_tenant_add", name=name, settings=json.dumps(settings), added_by=added_by, reason=reason
        )

    def tenant_set(self, name: str, settings: dict[str, Any], changed_by: str, reason: str) -> int:
        return self._affected(
            "email_tenant_set", name=name, settings=json.dumps(settings), changed_by=changed_by, reason=reason
        )

    def tenant_remove(self, name: str, removed_by: str, reason: str) -> int:
        return self._affected("email_tenant_remove", name=name, removed_by=removed_by, reason=reason)

    def tenant_pause(self, name: str, paused_by: str, reason: str) -> int:
        return self._affected("email_tenant_pause", name=name, paused_by=paused_by, reason=reason)

    def tenant_resume(self, name: str, resumed_by: str, reason: str) -> TenantResume:
        row = self._call("email_tenant_resume", name=name, resumed_by=resumed_by, reason=reason)[0]
        guard = row["guard_below_priority"]
        return TenantResume(int(row["affected"]), row["paused_reason"], None if guard is None else int(guard))

    # --- the worker's side: SES's sending status per tenant ----------------------------------------
    def tenant_sending_paused(
        self,
        ses_tenant_name: str,
        reason: str | None,
        reported_by: str,
        detail: str | None,
        status_read: str | None = None,
    ) -> int:
        """Pause (reason 'ses-disabled', 'ses-sending-paused') or lift (None) the tenants with this SES
        tenant name; `status_read`: the SendingStatus a GetTenant read."""
        return self._affected(
            "email_tenant_sending_paused",
            ses_tenant_name=ses_tenant_name,
            reason=reason,
            reported_by=reported_by,
            detail=detail,
            status_read=status_read,
        )

    def tenant_status_due(self, worker: str, refresh_seconds: int) -> list[str]:
        rows = self._call("email_tenant_status_due", worker=worker, refresh_seconds=refresh_seconds)
        return [r["ses_tenant_name"] for r in rows]

    def tenant_guard(
        self, checked_by: str, min_sends: int, complaint_rate: float, bounce_rate: float, below_priority: int
    ) -> list[GuardedTenant]:
        rows = self._call(
            "email_tenant_guard",
            checked_by=checked_by,
            min_sends=min_sends,
            complaint_rate=complaint_rate,
            bounce_rate=bounce_rate,
            below_priority=below_priority,
        )
        return [
            GuardedTenant(
                r["tenant"], int(r["sends"]), float(r["complaint_rate"]), float(r["bounce_rate"]), r["reason"]
            )
            for r in rows
        ]

    def tenant_stats(self) -> list[TenantStats]:
        stats = []
        for r in self._call("email_tenant_stats"):
            oldest, now = r["oldest_due_at"], r["database_now"]
            stats.append(
                TenantStats(
                    tenant=r["tenant"],
                    weight=int(r["weight"]),
                    paused_reason=r["paused_reason"],
                    guard_below_priority=_int_or_none(r["guard_below_priority"]),
                    guard_reason=r["guard_reason"],
                    due_rows=int(r["due_rows"]),
                    oldest_due_age_seconds=0.0
                    if oldest is None
                    else max(0.0, (now - oldest).total_seconds()),
                    claimed_24h=int(r["claimed_24h"]),
                    sends_24h=int(r["sends_24h"]),
                    bounce_rate=None if r["bounce_rate"] is None else float(r["bounce_rate"]),
                    complaint_rate=None if r["complaint_rate"] is None else float(r["complaint_rate"]),
                )
            )
        return stats

    def tenants(self) -> list[Tenant]:
        rows = self._select(
            "SELECT id, name, weight, max_priority, send_rate, daily_quota, max_waiting_rows, ses_tenant_name,"
            " paused_reason, guard_below_priority, guard_reason, ses_sending_status,"
            " IF(day_started_at > UTC_TIMESTAMP(6) - INTERVAL 1 DAY, day_count, 0) AS day_count"
            " FROM email_tenants ORDER BY name LIMIT 10000"
        )
        accounts: dict[int, list[tuple[str, int]]] = {}
        for r in self._select(
            "SELECT tenant_id, account, is_default FROM email_tenant_accounts ORDER BY account LIMIT 100000"
        ):
            accounts.setdefault(int(r["tenant_id"]), []).append((r["account"], int(r["is_default"])))
        return [
            Tenant(
                name=r["name"],
                weight=int(r["weight"]),
                max_priority=int(r["max_priority"]),
                send_rate=None if r["send_rate"] is None else float(r["send_rate"]),
                daily_quota=_int_or_none(r["daily_quota"]),
                max_waiting_rows=_int_or_none(r["max_waiting_rows"]),
                ses_tenant_name=r["ses_tenant_name"],
                accounts=tuple(a for a, _ in accounts.get(int(r["id"]), [])),
                default_for=tuple(a for a, d in accounts.get(int(r["id"]), []) if d),
                paused_reason=r["paused_reason"],
                guard_below_priority=_int_or_none(r["guard_below_priority"]),
                guard_reason=r["guard_reason"],
                ses_sending_status=r["ses_sending_status"],
                day_count=int(r["day_count"]),
            )
            for r in rows
        ]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
