"""Everything the web console reads and does in the database, over one connection its pool
(`console.pool`) lends: the console's part of the db/ layer, beside the operators' reads
(`db/reads.py`).

Every read is bounded twice: a LIMIT, and the per-session statement time limit the pool sets on each
connection, so no page can pin the server. The actions are the operator procedures, in
`console_actions`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from email_outbox.db.console_actions import ConsoleActions
from email_outbox.db.durability import DurabilityRisk
from email_outbox.db.reads import status_filter
from email_outbox.db.repository import OutboxRepository
from email_outbox.db.send_rate_calls import SendRateStatus
from email_outbox.db.tenant_calls import TenantStats
from email_outbox.errors import (
    AccessDenied,
    NotFound,
    OutboxError,
)
from email_outbox.models import BreakerState, DeliveryEvent, QueueHealth, Status

MAX_EVENTS = 1000
MAX_ATTACHMENTS = 100
MAX_PROVIDER_EVENTS = 200
# Bodies shown in the page (and the HTML frame) are cut here; the row keeps them whole.
MAX_BODY_CHARS = 1_000_000
LIST_COLUMNS = (
    "id, notification_id, to_address, subject, status, priority, attempt_count, max_attempts,"
    " last_error_code, created_at, updated_at,"
    " (SELECT t.name FROM email_tenants t WHERE t.id = email_delivery_attempts.tenant_id) AS tenant"
)


@dataclass(frozen=True)
class ListedEmail:
    id: int
    notification_id: str
    to_address: str
    subject: str
    status: str
    priority: int
    attempt_count: int
    max_attempts: int
    last_error_code: str | None
    created_at: datetime
    updated_at: datetime
    tenant: str | None = None


@dataclass(frozen=True)
class Page:
    rows: list[ListedEmail]
    # The keyset cursor of the next page, or None on the last one.
    next_cursor: str | None


@dataclass(frozen=True)
class Overview:
    now: datetime
    # Rows in each status, counted up to a cap; a status in `over_cap` has more than its count.
    counts: dict[str, int]
    over_cap: frozenset[str]
    health: QueueHealth
    # Emails sent in each of the last 60 minutes, oldest first.
    sent_per_minute: list[int]
    # The provider breaker every worker shares; None where this account may not read it.
    provider: BreakerState | None = None
    # The SES account's shared send rate and daily quota (None: not readable by this account).
    send_rate: SendRateStatus | None = None
    # The server settings that let a crash lose a committed transition (None: not readable).
    durability: list[DurabilityRisk] | None = None
    # Each tenant as `status` and /metrics show it (email_tenant_stats); None: not readable.
    tenants: list[TenantStats] | None = None
    # Emails each tenant had sent in the last minute, by tenant name (absent: none).
    tenant_sent_last_minute: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EmailDetail:
    fields: dict[str, Any]
    text_body: str | None
    text_cut: bool
    has_html: bool
    events: list[DeliveryEvent]
    events_cut: bool
    attachments: list[dict[str, Any]]
    provider_events: list[dict[str, Any]] | None
    suppression: dict[str, Any] | None

    @property
    def status(self) -> str:
        return str(self.fields["status"])


def _listed(row: dict[str, Any]) -> ListedEmail:
    return ListedEmail(**{k: row[k] for k in ListedEmail.__dataclass_fields__})


# Every prefix search names its escape character: a backslash stops being one under the
# NO_BACKSLASH_ESCAPES sql_mode, and then '%' and '_' in a search would match anything.
LIKE_PREFIX = "LIKE %s ESCAPE '!'"


def like_prefix(text: str) -> str:
    """`text` as the pattern of LIKE_PREFIX, its wildcards and '!' taken literally."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


@contextmanager
def cursor_of(repo: OutboxRepository) -> Iterator[Any]:
    # The repository's own cursor, and its translation of driver errors into OutboxError.
    with repo._cursor() as cursor:
        yield cursor


class ConsoleReads(ConsoleActions):
    """The console's reads over one lent connection, and (ConsoleActions) its actions."""

    def __init__(self, repo: OutboxRepository, tables: set[str]) -> None:
        """`tables`: the optional tables this account can see (attachments, provider events,
        suppressions); a read of one that is absent is skipped."""
        self.repo = repo
        self.tables = tables

    def select(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with cursor_of(self.repo) as cursor:
            cursor.execute(sql, tuple(args))
            rows: list[dict[str, Any]] = cursor.fetchall()
            return rows

    def visible_tables(self) -> set[str]:
        rows = self.select(
            "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() LIMIT 1000"
        )
        return {str(r["name"]) for r in rows}

    # --- overview -----------------------------------------------------------------------------------
    def overview(self, count_cap: int, provider_name: str) -> Overview:
        """`provider_name`: the provider breaker's row to show. Counts stop at `count_cap` per status, so each refresh reads at most that many index entries
        a status however much history the table holds (an uncapped count read every Sent row)."""
        counts = {s.value: 0 for s in Status}
        per_status = " UNION ALL ".join(
            "SELECT %s AS status, COUNT(*) AS n FROM (SELECT 1 FROM email_delivery_attempts"
            " FORCE INDEX (ix_email_delivery_attempts_status_id) WHERE status = %s LIMIT %s) AS capped"
            for _ in counts
        )
        args = [a for status in counts for a in (status, status, count_cap + 1)]
        for row in self.select(per_status, args):
            counts[str(row["status"])] = int(row["n"])
        over_cap = frozenset(status for status, n in counts.items() if n > count_cap)
        counts = {status: min(n, count_cap) for status, n in counts.items()}
        health = self.repo.queue_health()
        per_minute = [0] * 60
        for row in self.select(
            "SELECT FLOOR(TIMESTAMPDIFF(SECOND, sent_at, %s) / 60) AS ago, COUNT(*) AS n"
            " FROM email_delivery_attempts WHERE sent_at > %s - INTERVAL 60 MINUTE AND sent_at <= %s"
            " GROUP BY ago LIMIT 61",
            (health.now, health.now, health.now),
        ):
            ago = int(row["ago"])
            if 0 <= ago < 60:
                per_minute[59 - ago] = int(row["n"])
        try:
            provider: BreakerState | None = self.repo.breaker_state(provider_name)
        except (AccessDenied, NotFound):  # an account granted before the breaker existed
            provider = None
        try:
            send_rate = self.repo.send_rate_status()
        except OutboxError:  # an account granted before email_send_rate_status existed
            send_rate = None
        try:
            durability: list[DurabilityRisk] | None = self.repo.durability_risks()
        except OutboxError:
            durability = None
        try:
            tenants: list[TenantStats] | None = self.repo.tenant_stats()
        except OutboxError:  # an account granted before email_tenant_stats existed
            tenants = None
        return Overview(
            health.now,
            counts,
            over_cap,
            health,
            per_minute,
            provider,
            send_rate,
            durability,
            tenants,
            self._tenant_sent_last_minute(health.now) if tenants else {},
        )

    def _tenant_sent_last_minute(self, now: datetime) -> dict[str, int]:
        rows = self.select(
            "SELECT t.name AS tenant, COUNT(*) AS n FROM email_delivery_attempts a"
            " JOIN email_tenants t ON t.id = a.tenant_id"
            " WHERE a.sent_at > %s - INTERVAL 1 MINUTE AND a.sent_at <= %s GROUP BY t.name LIMIT 10000",
            (now, now),
        )
        return {str(r["tenant"]): int(r["n"]) for r in rows}

    # --- lists --------------------------------------------------------------------------------------
    def list_status(
        self,
        status: Status,
        before_id: int | None,
        limit: int,
        priority: int | None = None,
        tenant: str | None = None,
    ) -> Page:
        """One status, newest first, of one priority and one tenant if given; the next page starts below
        the last id shown."""
        where, args = status_filter(status, priority, tenant)
        sql = (
            f"SELECT {LIST_COLUMNS} FROM email_delivery_attempts"
            f" FORCE INDEX (ix_email_delivery_attempts_status_id) WHERE {where}"
        )
        if before_id is not None:
            sql += " AND id < %s"
            args.append(before_id)
        sql += " ORDER BY id DESC LIMIT %s"
        args.append(limit + 1)
        rows = [_listed(r) for r in self.select(sql, args)]
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(rows, str(rows[-1].id) if more and rows else None)

    def search(self, by: str, prefix: str, after: tuple[str, int] | None, limit: int) -> Page:
        """Rows whose notification_id or recipient starts with `prefix`, in the order of the index that
        finds them; the cursor is the (value, id) pair of the last row shown."""
        column = {"notification_id": "notification_id", "recipient": "to_address"}[by]
        index = {
            "notification_id": "uq_email_delivery_attempts_notification_account",
            "recipient": "ix_email_delivery_attempts_to_id",
        }[by]
        sql = f"SELECT {LIST_COLUMNS} FROM email_delivery_attempts FORCE INDEX ({index}) WHERE {column} {LIKE_PREFIX}"
        args: list[Any] = [like_prefix(prefix)]
        if after is not None:
            sql += f" AND ({column} > %s OR ({column} = %s AND id > %s))"
            args += [after[0], after[0], after[1]]
        sql += f" ORDER BY {column}, id LIMIT %s"
        args.append(limit + 1)
        rows = [_listed(r) for r in self.select(sql, args)]
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = None
        if more and rows:
            last = rows[-1]
            cursor = f"{last.id}:{last.notification_id if by == 'notification_id' else last.to_address}"
        return Page(rows, cursor)

    def unknown_outcome_ids(self, older_than_seconds: float, recipient_prefix: str, cap: int) -> list[int]:
        """The frozen list of a bulk action: UnknownOutcome rows in that state for at least that long,
        oldest first, at most `cap` + 1 (one more tells the caller the cap was reached)."""
        return self._frozen_ids(
            "status = 'UnknownOutcome' AND updated_at <= UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND",
            older_than_seconds,
            recipient_prefix,
            cap,
        )

    def failed_ids(self, within_seconds: float, recipient_prefix: str, cap: int) -> list[int]:
        """The frozen list of a bulk redrive: rows that became Failed within the last `within_seconds`,
        oldest first, at most `cap` + 1. Whether each may be redriven is the procedure's rule, at apply."""
        return self._frozen_ids(
            "status = 'Failed' AND updated_at >= UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND",
            within_seconds,
            recipient_prefix,
            cap,
        )

    def _frozen_ids(self, condition: str, seconds: float, recipient_prefix: str, cap: int) -> list[int]:
        """Ids of the rows meeting `condition` (one %s: the microseconds), of recipients starting with
        `recipient_prefix` if given, oldest first, at most `cap` + 1."""
        sql = f"SELECT id FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_status_id) WHERE {condition}"
        args: list[Any] = [int(seconds * 1_000_000)]
        if recipient_prefix:
            sql += f" AND to_address {LIKE_PREFIX}"
            args.append(like_prefix(recipient_prefix))
        sql += " ORDER BY id LIMIT %s"
        args.append(cap + 1)
        return [int(r["id"]) for r in self.select(sql, args)]

    # --- one email ----------------------------------------------------------------------------------
    def email(self, attempt_id: int) -> EmailDetail:
        # Every column but the bodies, of which only a bounded prefix is read: a 16 MiB body must not
        # become 16 MiB (and more) of the console's memory for each page view.
        columns = [
            r["name"]
            for r in self.select(
                "SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                " AND TABLE_NAME = 'email_delivery_attempts' ORDER BY ORDINAL_POSITION"
            )
            # The bodies; derived, or unused since 0002.
            if r["name"]
            not in (
                "text_body",
                "html_body",
                "claim_due_at",
                "claim_rank",
                "claim_queue_rank",
                "updated_by",
                "transition_detail",
            )
        ]
        rows = self.select(
            f"SELECT {', '.join(f'`{c}`' for c in columns)}, LEFT(text_body, %s) AS text_prefix,"
            " html_body IS NOT NULL AS has_html FROM email_delivery_attempts WHERE id = %s LIMIT 1",
            (MAX_BODY_CHARS + 1, attempt_id),
        )
        if not rows:
            raise NotFound(f"no email with id {attempt_id}")
        fields = dict(rows[0])
        text_body = fields.pop("text_prefix")
        has_html = bool(fields.pop("has_html"))
        events = self.events(attempt_id)
        return EmailDetail(
            fields=fields,
            text_body=None if text_body is None else text_body[:MAX_BODY_CHARS],
            text_cut=text_body is not None and len(text_body) > MAX_BODY_CHARS,
            has_html=has_html,
            events=events[:MAX_EVENTS],
            events_cut=len(events) > MAX_EVENTS,
            attachments=self.attachments(attempt_id),
            provider_events=self.provider_events(attempt_id),
            suppression=self.suppression(str(fields["to_address"])),
        )

    def html_body(self, attempt_id: int) -> str | None:
        rows = self.select(
            "SELECT LEFT(html_body, %s) AS html FROM email_delivery_attempts WHERE id = %s LIMIT 1",
            (MAX_BODY_CHARS, attempt_id),
        )
        if not rows:
            raise NotFound(f"no email with id {attempt_id}")
        html: str | None = rows[0]["html"]
        return html

    def events(self, attempt_id: int) -> list[DeliveryEvent]:
        rows = self.select(
            "SELECT id, attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account,"
            " detail FROM email_delivery_events WHERE attempt_id = %s ORDER BY id LIMIT %s",
            (attempt_id, MAX_EVENTS + 1),
        )
        return [
            DeliveryEvent(
                id=int(r["id"]),
                attempt_id=int(r["attempt_id"]),
                occurred_at=r["occurred_at"],
                from_status=None if r["from_status"] is None else Status(str(r["from_status"])),
                to_status=Status(str(r["to_status"])),
                claim_token=r["claim_token"],
                actor=r["actor"],
                db_account=r["db_account"],
                detail=r["detail"],
            )
            for r in rows
        ]

    def attachments(self, attempt_id: int) -> list[dict[str, Any]]:
        if "email_attachments" not in self.tables:
            return []
        return (
            self._optional(
                "SELECT position, filename, content_type, disposition, content_id, LENGTH(content) AS bytes"
                " FROM email_attachments WHERE attempt_id = %s ORDER BY position LIMIT %s",
                (attempt_id, MAX_ATTACHMENTS),
            )
            or []
        )

    def provider_events(self, attempt_id: int) -> list[dict[str, Any]] | None:
        """SES's events for this email, where the provider-events tables exist."""
        if "email_provider_events" not in self.tables:
            return None
        return self._optional(
            "SELECT event_type, ses_message_id, recipient, event_at, kind, subkind, detail"
            " FROM email_provider_events WHERE attempt_id = %s ORDER BY event_at, id LIMIT %s",
            (attempt_id, MAX_PROVIDER_EVENTS),
        )

    def suppression(self, address: str) -> dict[str, Any] | None:
        """The suppression-list entry of the recipient, where that list exists."""
        if "email_suppressed_addresses" not in self.tables:
            return None
        local, _, domain = address.rpartition("@")
        rows = self._optional(
            "SELECT address, reason, detail, added_at, added_by FROM email_suppressed_addresses"
            " WHERE address_key = %s LIMIT 1",
            (f"{local}@{domain.lower()}",),
        )
        return rows[0] if rows else None

    def _optional(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]] | None:
        """A read of a table this account may not be granted: None when refused."""
        try:
            return self.select(sql, args)
        except AccessDenied:
            return None
