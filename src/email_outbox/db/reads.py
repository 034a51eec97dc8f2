"""The read-only views for operators and the console: a row, its attachments and events, lists and
queue health, by plain SELECTs; a part of OutboxRepository. Writes never come here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from email_outbox.db.calls import Calls, status_or_none
from email_outbox.errors import InvalidInput, NotFound, SchemaNotInstalled
from email_outbox.models import (
    DeliveryEvent,
    DeliveryRow,
    QueueHealth,
    Status,
)

_ROW_COLUMNS = (
    "id, notification_id, to_address, from_address, subject, status, attempt_count, max_attempts,"
    " next_attempt_at, claim_token, claimed_by, claimed_at, lease_expires_at, last_attempt_at,"
    " last_error_code, last_error_message, provider_message_id, sent_at, created_at, updated_at,"
    " message_options, attachment_bytes, priority, expires_at,"
    " (SELECT t.name FROM email_tenants t WHERE t.id = email_delivery_attempts.tenant_id) AS tenant"
)


# The earliest claim_due_at of each priority: the claim's index (claim_queue_rank, claim_due_at, id)
# holds claimable rows only, so each is one index entry read ("Select tables optimized away").
_OLDEST_DUE = " UNION ALL ".join(
    f"SELECT MIN(claim_due_at) AS due FROM email_delivery_attempts WHERE claim_queue_rank = {rank}"
    for rank in range(10)
)


class OperatorReads(Calls):
    # --- read-only views for operators ------------------------------------------------------------
    def schema_release(self) -> str | None:
        """The version of the release that last migrated the database (email_outbox_release); None
        when it was migrated before 0.2.0 recorded one."""
        try:
            rows = self._select("SELECT contract_version FROM email_outbox_release WHERE id = 1")
        except SchemaNotInstalled:
            return None
        return str(rows[0]["contract_version"]) if rows else None

    def get_row(self, attempt_id: int) -> DeliveryRow:
        rows = self._select(
            f"SELECT {_ROW_COLUMNS} FROM email_delivery_attempts WHERE id = %s", (attempt_id,)
        )
        if not rows:
            raise NotFound(f"no email with id {attempt_id}")
        return _delivery_row(rows[0])

    def attachments_of(self, attempt_id: int) -> list[dict[str, Any]]:
        """What an email carries as attachments, without their content: position, filename,
        content_type, disposition, content_id, bytes (none once its bodies are purged)."""
        return self._select(
            "SELECT position, filename, content_type, disposition, content_id, LENGTH(content) AS bytes"
            " FROM email_attachments WHERE attempt_id = %s ORDER BY position",
            (attempt_id,),
        )

    def get_row_by_notification_id(
        self, notification_id: str, account: str | None = None, tenant: str | None = None
    ) -> DeliveryRow:
        """The row of `notification_id`; ids are per enqueuing account, so with two accounts using the
        same id the caller names the account (its database user name) or the tenant, and a choice
        that still leaves several is refused with their row ids: never the other service's row."""
        sql = f"SELECT {_ROW_COLUMNS}, account FROM email_delivery_attempts WHERE notification_id = %s"
        args: tuple[str, ...] = (notification_id,)
        if account is not None:
            sql += " AND account = %s"
            args += (account,)
        if tenant is not None:
            sql += " AND tenant_id = (SELECT id FROM email_tenants WHERE name = %s)"
            args += (tenant,)
        rows = self._select(sql + " ORDER BY id LIMIT 100", args)
        if not rows:
            raise NotFound(f"no email with notification id {notification_id!r}")
        if len(rows) > 1:
            owners = ", ".join(
                f"row {r['id']} (account {r['account']!r}, tenant {r['tenant']!r})" for r in rows
            )
            raise InvalidInput(
                f"notification id {notification_id!r} names {len(rows)} emails: {owners}; name one with"
                " --account or --tenant, or act on its row id"
            )
        return _delivery_row(rows[0])

    def list_rows(
        self,
        status: Status,
        *,
        since: datetime | None = None,
        older_than_seconds: float | None = None,
        limit: int = 50,
        priority: int | None = None,
        tenant: str | None = None,
    ) -> list[DeliveryRow]:
        """Rows in `status`, oldest first; `since`/`older_than_seconds` filter on when the row entered
        its current state (updated_at), measured on the database clock; `priority` on the priority,
        `tenant` on the tenant's name."""
        where, args = status_filter(status, priority, tenant)
        sql = f"SELECT {_ROW_COLUMNS} FROM email_delivery_attempts WHERE {where}"
        if since is not None:
            sql += " AND updated_at >= %s"
            args.append(since)
        if older_than_seconds is not None:
            sql += " AND updated_at <= UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
            args.append(int(older_than_seconds * 1_000_000))
        sql += " ORDER BY id LIMIT %s"
        args.append(limit)
        return [_delivery_row(r) for r in self._select(sql, args)]

    def queue_health(self) -> QueueHealth:
        """What an on-call engineer asks first: how late is the oldest due row, are leases overdue.

        Both are index reads, cheap at any table size: the oldest due row is the first entry of each
        priority in the claim's index (_OLDEST_DUE), the overdue leases a range of the lease index.
        """
        row = self._select(
            "SELECT UTC_TIMESTAMP(6) AS now,"
            f" (SELECT MIN(due) FROM ({_OLDEST_DUE}) d WHERE due <= UTC_TIMESTAMP(6)) AS oldest_due_at,"
            " (SELECT COUNT(*) FROM email_delivery_attempts"
            "   WHERE status = 'Processing' AND lease_expires_at < UTC_TIMESTAMP(6)) AS overdue_leases"
        )[0]
        return QueueHealth(row["now"], row["oldest_due_at"], int(row["overdue_leases"]))

    def events(self, attempt_id: int) -> list[DeliveryEvent]:
        rows = self._select(
            "SELECT id, attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account,"
            " detail FROM email_delivery_events WHERE attempt_id = %s ORDER BY id",
            (attempt_id,),
        )
        return [
            DeliveryEvent(
                id=int(r["id"]),
                attempt_id=int(r["attempt_id"]),
                occurred_at=r["occurred_at"],
                from_status=status_or_none(r["from_status"]),
                to_status=Status(r["to_status"]),
                claim_token=r["claim_token"],
                actor=r["actor"],
                db_account=r["db_account"],
                detail=r["detail"],
            )
            for r in rows
        ]


def status_filter(status: Status, priority: int | None, tenant: str | None) -> tuple[str, list[Any]]:
    """The WHERE condition and its arguments for rows of one status, of one priority and one tenant
    (by name) if given: the operators' lists and the console's pages filter alike."""
    where = "status = %s"
    args: list[Any] = [status.value]
    if priority is not None:
        where += " AND priority = %s"
        args.append(priority)
    if tenant is not None:
        where += " AND tenant_id = (SELECT id FROM email_tenants WHERE name = %s)"
        args.append(tenant)
    return where, args


def _delivery_row(r: dict[str, Any]) -> DeliveryRow:
    return DeliveryRow(
        id=int(r["id"]),
        notification_id=r["notification_id"],
        to_address=r["to_address"],
        from_address=r["from_address"],
        subject=r["subject"],
        status=Status(r["status"]),
        attempt_count=int(r["attempt_count"]),
        max_attempts=int(r["max_attempts"]),
        next_attempt_at=r["next_attempt_at"],
        claim_token=r["claim_token"],
        claimed_by=r["claimed_by"],
        claimed_at=r["claimed_at"],
        lease_expires_at=r["lease_expires_at"],
        last_attempt_at=r["last_attempt_at"],
        last_error_code=r["last_error_code"],
        last_error_message=r["last_error_message"],
        provider_message_id=r["provider_message_id"],
        sent_at=r["sent_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        message_options=r.get("message_options"),
        attachment_bytes=int(r.get("attachment_bytes") or 0),
        priority=int(r.get("priority", 5)),
        expires_at=r.get("expires_at"),
        tenant=r.get("tenant"),
    )
