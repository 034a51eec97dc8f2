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
