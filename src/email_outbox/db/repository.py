"""One typed function per stored procedure. The only module that talks SQL to the outbox (over the
connections of email_outbox.db.connection).

Every call is `CALL name(...)` through cursor.execute (one round trip; callproc costs three), the one
result set is read, and the connection is drained so the next call never finds unread results.
Writes go through the procedures only; the few SELECTs here are read-only views for operators.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

import mysql.connector

from email_outbox.db.connection import DRIVER_ERRORS, Connection, connect, first_ready, translate_error
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.provider_calls import ProviderEventCalls
from email_outbox.db.send_rate_calls import SendRateCalls
from email_outbox.errors import InvalidInput, NotFound
from email_outbox.models import (
    AllowedConfigurationSet,
    AllowedSender,
    Attachment,
    BreakerState,
    CancelResult,
    Candidate,
    ClaimedEmail,
    DeliveryEvent,
    DeliveryRow,
    EnqueueResult,
    Erasure,
    FailureResult,
    FinalizeItem,
    QueueHealth,
    RedriveBatch,
    RetentionBatch,
    Status,
    StatusCount,
    optional_id,
)
from email_outbox.schema.routines import parameter_names

_ROW_COLUMNS = (
    "id, notification_id, to_address, from_address, subject, status, attempt_count, max_attempts,"
    " next_attempt_at, claim_token, claimed_by, claimed_at, lease_expires_at, last_attempt_at,"
    " last_error_code, last_error_message, provider_message_id, sent_at, created_at, updated_at,"
    " message_options, attachment_bytes, priority, expires_at"
)


def _claimed_email(row: dict[str, Any], max_inline_body_bytes: int | None = None) -> ClaimedEmail:
    """A claimed row in the one claim row shape; `max_inline_body_bytes` given
    (email_claim_batch_bounded, email_reserve_batch): bodies above it were left out."""
    body_bytes = int(row.get("body_bytes") or 0)
    return ClaimedEmail(
        id=int(row["id"]),
        notification_id=row["notification_id"],
        to_address=row["to_address"],
        from_address=row["from_address"],
        subject=row["subject"],
        text_body=row["text_body"],
        html_body=row["html_body"],
        attempt_count=int(row["attempt_count"]),
        max_attempts=int(row["max_attempts"]),
        lease_expires_at=row["lease_expires_at"],
        body_bytes=body_bytes,
        bodies_loaded=max_inline_body_bytes is None or body_bytes <= max_inline_body_bytes,
        message_options=row.get("message_options"),
        attachment_bytes=int(row.get("attachment_bytes") or 0),
    )


def _status(value: Any) -> Status | None:
    return None if value is None else Status(str(value))


def _cancel_result(row: dict[str, Any]) -> CancelResult:
    attempt_id = row["attempt_id"]
    return CancelResult(
        int(row["affected"]),
        None if attempt_id is None else int(attempt_id),
        _status(row["from_status"]),
    )


class OutboxRepository(ProviderEventCalls, SendRateCalls):
    """The procedure contract over one connection. Not thread-safe: one per thread."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.calls = 0
        # One cursor for the repository's life: mysql-connector's connection.cursor() pings the
        # server (is_connected), so a cursor per call cost a second round trip for every CALL.
        self._open_cursor: Any = None

    @classmethod
    def open(cls, dsn: DatabaseDsn, *, connect_timeout: float = 5.0) -> OutboxRepository:
        return cls(connect(dsn, connect_timeout=connect_timeout))

    def read_consistently(self) -> None:
        """On a Galera node, make every read wait until the node has applied what the cluster
        committed before it (causal reads), so a row just written on another node is seen. A no-op
        on other servers. For operators' reads, not the worker's hot path."""
        rows = self._select("SHOW VARIABLES LIKE 'wsrep_on'")
        if rows and str(rows[0]["Value"]).upper() == "ON":
            with self._cursor() as cursor:
                cursor.execute("SET SESSION wsrep_sync_wait = 1")

    def close(self) -> None:
        self._drop_cursor()
        with suppress(mysql.connector.Error):
            self.connection.close()

    def _drop_cursor(self) -> None:
        if self._open_cursor is not None:
            with suppress(Exception):
                self._open_cursor.close()
        self._open_cursor = None

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        if self._open_cursor is None:
            try:
                self._open_cursor = self.connection.cursor(dictionary=True)
            except DRIVER_ERRORS as exc:
                raise translate_error(exc) from exc
        try:
            yield self._open_cursor
        except DRIVER_ERRORS as exc:
            # After an error the cursor may hold unread results; the next call starts a fresh one.
            self._drop_cursor()
            raise translate_error(exc) from exc

    def _call(self, procedure: str, **arguments: Any) -> list[dict[str, Any]]:
        """CALL `procedure` with its arguments bound by name, in the order its file in procedures/
        declares them: a reordered parameter cannot bind silently to the wrong value."""
        names = parameter_names(procedure)
        if set(arguments) != set(names):
            raise TypeError(
                f"{procedure} takes {', '.join(names) or 'no arguments'}; got {', '.join(sorted(arguments))}"
            )
        args = [arguments[name] for name in names]
        placeholders = ", ".join(["%s"] * len(args))
        self.calls += 1
        with self._cursor() as cursor:
            cursor.execute(f"CALL {procedure}({placeholders})", tuple(args))
            rows: list[dict[str, Any]] = cursor.fetchall() if cursor.with_rows else []
            while cursor.nextset():
                if cursor.with_rows:
                    cursor.fetchall()
            return rows

    def _select(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._cursor() as cursor:
            cursor.execute(sql, tuple(args))
            rows: list[dict[str, Any]] = cursor.fetchall()
            return rows

    def _affected(self, procedure: str, **arguments: Any) -> int:
        return int(self._call(procedure, **arguments)[0]["affected"])

    # --- enqueue --------------------------------------------------------------------------------
    def enqueue(
        self,
        notification_id: str,
        to_address: str,
        subject: str,
        *,
        text_body: str | None = None,
        html_body: str | None = None,
        from_address: str | None = None,
        max_attempts: int | None = None,
        send_after: datetime | None = None,
    ) -> EnqueueResult:
        row = self._call(
            "email_enqueue",
            notification_id=notification_id,
            to_address=to_address,
            from_address=from_address,
            subject=subject,
            text_body=text_body,
            html_body=html_body,
            max_attempts=max_attempts,
            send_after=send_after,
        )[0]
        return EnqueueResult(int(row["affected"]), optional_id(row["attempt_id"]))

    def enqueue_message(self, notification_id: str, message: str) -> EnqueueResult:
        """email_enqueue_message: `message` is the JSON document (email_outbox.message builds one)."""
        row = self._call("email_enqueue_message", notification_id=notification_id, message=message)[0]
        return EnqueueResult(int(row["affected"]), optional_id(row["attempt_id"]))

    # --- claiming -------------------------------------------------------------------------------
    def claimable_candidates(self, limit: int) -> list[Candidate]:
        return [
            Candidate(
                id=int(r["id"]),
                notification_id=r["notification_id"],
                to_address=r["to_address"],
                from_address=r["from_address"],
                subject=r["subject"],
                text_body=r["text_body"],
                html_body=r["html_body"],
                status=Status(r["status"]),
                attempt_count=int(r["attempt_count"]),
                max_attempts=int(r["max_attempts"]),
                next_attempt_at=r["next_attempt_at"],
            )
            for r in self._call("email_claimable_candidates", limit=limit)
        ]

    def try_claim(self, attempt_id: int, claim_token: str, claimed_by: str, lease_seconds: int) -> int:
        return self._affected(
            "email_try_claim",
            id=attempt_id,
            claim_token=claim_token,
            claimed_by=claimed_by,
            lease_seconds=lease_seconds,
        )

    def claim_batch(
        self, claim_token: str, claimed_by: str, lease_seconds: int, limit: int
    ) -> list[ClaimedEmail]:
        rows = self._call(
            "email_claim_batch",
            claim_token=claim_token,
            claimed_by=claimed_by,
            lease_seconds=lease_seconds,
            limit=limit,
        )
        return [_claimed_email(r) for r in rows]

    def claim_batch_bounded(
        self, claim_token: str, claimed_by: str, lease_seconds: int, limit: int, max_inline_body_bytes: int
    ) -> list[ClaimedEmail]:
        """The claim the worker uses: bodies over `max_inline_body_bytes` stay in the database."""
        return self._claim_bounded(
            "email_claim_batch_bounded", claim_token, claimed_by, lease_seconds, limit, max_inline_body_bytes
        )

    def reserve_batch(
        self, claim_token: str, claimed_by: str, lease_seconds: int, limit: int, max_inline_body_bytes: int
    ) -> list[ClaimedEmail]:
        """claim_batch_bounded's rows as reservations: mark each started (start_send, or a `started`
        item of finalize_batch) just before its send."""
        return self._claim_bounded(
            "email_reserve_batch", claim_token, claimed_by, lease_seconds, limit, max_inline_body_bytes
        )

    def _claim_bounded(
        self,
        procedure: str,
        claim_token: str,
        claimed_by: str,
        lease_seconds: int,
        limit: int,
        max_inline: int,
    ) -> list[ClaimedEmail]:
        rows = self._call(
            procedure,
            claim_token=claim_token,
            claimed_by=claimed_by,
            lease_seconds=lease_seconds,
            limit=limit,
            max_inline_body_bytes=max_inline,
        )
        return [_claimed_email(r, max_inline) for r in rows]

    def start_send(self, attempt_id: int, claim_token: str) -> int:
        return self._affected("email_start_send", id=attempt_id, claim_token=claim_token)

    def claimed_bodies(self, attempt_id: int, claim_token: str) -> tuple[str | None, str | None] | None:
        """The bodies of a row this claim holds; None when it no longer holds it."""
        rows = self._call("email_claimed_bodies", id=attempt_id, claim_token=claim_token)
        return (rows[0]["text_body"], rows[0]["html_body"]) if rows else None

    def claimed_attachments(self, attempt_id: int, claim_token: str) -> tuple[Attachment, ...]:
        """The attachments of a row this claim holds, in order (none if it no longer holds it)."""
        rows = self._call("email_claimed_attachments", id=attempt_id, claim_token=claim_token)
        return tuple(
            Attachment(
                filename=r["filename"],
                content_type=r["content_type"],
                disposition=r["disposition"],
                content_id=r["content_id"],
                content=bytes(r["content"] or b""),
            )
            for r in rows
        )

    def sweep_stale_leases(self, limit: int) -> int:
        """Leases swept (email_sweep_stale_leases also expires rows: see sweep)."""
        return self.sweep(limit)[0]

    def sweep(self, limit: int) -> tuple[int, int]:
        """email_sweep_stale_leases: (leases swept, rows expired)."""
        row = self._call("email_sweep_stale_leases", limit=limit)[0]
        return int(row["affected"]), int(row["expired"])

    def extend_lease(self, attempt_id: int, claim_token: str, lease_seconds: int) -> int:
        return self._affected(
            "email_extend_lease", id=attempt_id, claim_token=claim_token, lease_seconds=lease_seconds
        )

    # --- finalizing -----------------------------------------------------------------------------
    def finalize_sent(self, attempt_id: int, claim_token: str, provider_message_id: str) -> int:
        return self._affected(
            "email_finalize_sent",
            id=attempt_id,
            claim_token=claim_token,
            provider_message_id=provider_message_id,
        )

    def finalize_failure(
        self,
        attempt_id: int,
        claim_token: str,
        *,
        permanent: bool,
        error_code: str | None,
        error_message: str | None,
        retry_delay_seconds: int,
    ) -> FailureResult:
        row = self._call(
            "email_finalize_failure",
            id=attempt_id,
            claim_token=claim_token,
            permanent=1 if permanent else 0,
            error_code=error_code,
            error_message=error_message,
            retry_delay_seconds=retry_delay_seconds,
        )[0]
        return FailureResult(int(row["affected"]), _status(row["status"]))

    def finalize_unknown(self, attempt_id: int, claim_token: str, error_message: str | None) -> int:
        return self._affected(
            "email_finalize_unknown", id=attempt_id, claim_token=claim_token, error_message=error_message
        )

    def release_claim(self, attempt_id: int, claim_token: str, delay_seconds: int) -> int:
        return self._affected(
            "email_release_claim", id=attempt_id, claim_token=claim_token, delay_seconds=delay_seconds
        )

    def finalize_batch(self, items: Sequence[FinalizeItem]) -> list[FailureResult]:
        """Several finalizes in one call and one transaction, each fenced by its own claim: one result
        per item, in order (affected 0 where the claim was no longer held)."""
        rows = self._call(
            "email_finalize_batch",
            outcomes=json.dumps([item.as_json() for item in items], ensure_ascii=False),
        )
        return [FailureResult(int(r["affected"]), _status(r["status"])) for r in rows]

    def finalize_and_start(
        self, item: FinalizeItem, next_id: int, next_claim_token: str
    ) -> tuple[FailureResult, bool]:
        """`item`'s finalize and the start mark of the reservation `next_id` in one call and one
        transaction, each fenced by its own claim: (the finalize's result, the next row may be sent)."""
        (row,) = self._call(
            "email_finalize_and_start",
            id=item.id,
            claim_token=item.claim_token,
            outcome=item.outcome,
            provider_message_id=item.provider_message_id,
            error_code=item.error_code,
            error_message=item.error_message,
            delay_seconds=item.delay_seconds,
            next_id=next_id,
            next_claim_token=next_claim_token,
        )
        return FailureResult(int(row["affected"]), _status(row["status"])), int(row["started"]) == 1

    # --- operators ------------------------------------------------------------------------------
    def cancel(self, notification_id: str, cancelled_by: str, reason: str) -> CancelResult:
        """email_cancel: the calling account's row not yet handed to SES ends Failed 'Cancelled'
        (affected 1), else 0."""
        return _cancel_result(
            self._call(
                "email_cancel", notification_id=notification_id, cancelled_by=cancelled_by, reason=reason
            )[0]
        )

    def cancel_email(self, attempt_id: int, cancelled_by: str, reason: str) -> CancelResult:
        """email_cancel_email: the same, by row id, whichever account enqueued it (operators, console)."""
        return _cancel_result(
            self._call("email_cancel_email", id=attempt_id, cancelled_by=cancelled_by, reason=reason)[0]
        )

    def unsent_failures(self, window_seconds: int) -> dict[str, int]:
        """email_unsent_failure_stats: rows that ended Failed within the window without being handed
        to SES, by reason (Expired, Cancelled, Suppressed), 0 when none."""
        rows = self._call("email_unsent_failure_stats", window_seconds=window_seconds)
        return {str(r["reason"]): int(r["count"]) for r in rows}

    def requeue_unknown_outcome(self, attempt_id: int, requeued_by: str, reason: str) -> int:
        return self._affected(
            "email_requeue_unknown_outcome", id=attempt_id, requeued_by=requeued_by, reason=reason
        )

    def resolve_unknown_outcome(
        self,
        attempt_id: int,
        outcome: str,
        resolved_by: str,
        reason: str,
        provider_message_id: str | None = None,
    ) -> int:
        return self._affected(
            "email_resolve_unknown_outcome",
            id=attempt_id,
            outcome=outcome,
            resolved_by=resolved_by,
            reason=reason,
            provider_message_id=provider_message_id,
        )

    def redrive_failed(self, notification_id: str, redriven_by: str, reason: str) -> int:
        """email_redrive_failed: 1 when the Failed row SES never accepted is Pending again."""
        return self._affected(
            "email_redrive_failed", notification_id=notification_id, redriven_by=redriven_by, reason=reason
        )

    def redrive_failed_batch(
        self,
        failed_since: datetime,
        failed_until: datetime | None,
        error_code: str | None,
        after_id: int,
        limit: int,
        *,
        dry_run: bool,
        redriven_by: str,
        reason: str,
    ) -> RedriveBatch:
        row = self._call(
            "email_redrive_failed_batch",
            failed_since=failed_since,
            failed_until=failed_until,
            error_code=error_code,
            after_id=after_id,
            limit=limit,
            dry_run=1 if dry_run else 0,
            redriven_by=redriven_by,
            reason=reason,
        )[0]
        return RedriveBatch(int(row["affected"]), int(row["examined"]), int(row["last_id"]))

    # --- the provider breaker (docs/design.md, "Provider outages") ---------------------------------
    def breaker_state(self, provider: str) -> BreakerState:
        r = self._call("email_breaker_state", provider=provider)[0]
        return BreakerState(
            provider=str(r["provider"]),
            state=str(r["state"]),
            since=r["since"],
            changed_at=r["changed_at"],
            changed_by=r["changed_by"],
            last_error_code=r["last_error_code"],
            last_error_message=r["last_error_message"],
            last_failure_at=r["last_failure_at"],
            probe_at=r["probe_at"],
            probe_by=r["probe_by"],
            probes=int(r["probes"]),
            probe_due=bool(r["probe_due"]),
            database_time=r["database_time"],
        )

    def breaker_open(
        self,
        provider: str,
        opened_by: str,
        error_code: str | None,
        error_message: str | None,
        probe_after_seconds: int,
    ) -> int:
        return self._affected(
            "email_breaker_open",
            provider=provider,
            opened_by=opened_by,
            error_code=error_code,
            error_message=error_message,
            probe_after_seconds=probe_after_seconds,
        )

    def breaker_try_probe(self, provider: str, probe_by: str, probe_hold_seconds: int) -> int:
        return self._affected(
            "email_breaker_try_probe",
            provider=provider,
            probe_by=probe_by,
            probe_hold_seconds=probe_hold_seconds,
        )

    def breaker_close(self, provider: str, closed_by: str, detail: str | None) -> int:
        return self._affected("email_breaker_close", provider=provider, closed_by=closed_by, detail=detail)

    def outbox_stats(self) -> list[StatusCount]:
        return [
            StatusCount(Status(r["status"]), int(r["count"]), r["oldest_due_at"])
            for r in self._call("email_outbox_stats")
        ]

    # --- the sender allow-list (docs/security.md) -------------------------------------------------
    def sender_allowed(self, sender: str, account: str = "") -> bool:
        return bool(self._call("email_sender_allowed", sender=sender, account=account)[0]["allowed"])

    def sender_add(self, sender: str, account: str, added_by: str, reason: str) -> int:
        return self._affected(
            "email_sender_add", sender=sender, account=account, added_by=added_by, reason=reason
        )

    def sender_remove(self, sender: str, account: str, removed_by: str, reason: str) -> int:
        return self._affected(
            "email_sender_remove", sender=sender, account=account, removed_by=removed_by, reason=reason
        )

    def allowed_senders(self) -> list[AllowedSender]:
        rows = self._select(
            "SELECT sender, account, added_at, added_by, added_via, reason FROM email_allowed_senders"
            " ORDER BY sender, account LIMIT 10000"
        )
        return [AllowedSender(**r) for r in rows]

    # --- the configuration sets a message may name (docs/security.md) ------------------------------
    def configuration_set_add(self, name: str, added_by: str, reason: str) -> int:
        return self._affected("email_configuration_set_add", name=name, added_by=added_by, reason=reason)

    def configuration_set_remove(self, name: str, removed_by: str, reason: str) -> int:
        return self._affected(
            "email_configuration_set_remove", name=name, removed_by=removed_by, reason=reason
        )

    def allowed_configuration_sets(self) -> list[AllowedConfigurationSet]:
        rows = self._select(
            "SELECT name, added_at, added_by, added_via, reason FROM email_allowed_configuration_sets"
            " ORDER BY name LIMIT 10000"
        )
        return [AllowedConfigurationSet(**r) for r in rows]

    def queue_stats(self) -> list[StatusCount]:
        """Pending, Retrying and Processing only: a cost that follows the backlog, not the history."""
        return [
            StatusCount(Status(r["status"]), int(r["count"]), r["oldest_due_at"])
            for r in self._call("email_outbox_queue_stats")
        ]

    def purge_bodies(self, older_than_days: int, limit: int) -> int:
        """One batch from the start of the table (email_purge_bodies_after with after_id 0)."""
        return self.purge_bodies_after(older_than_days, 0, limit)[0]

    def purge_bodies_after(self, older_than_days: int, after_id: int, limit: int) -> tuple[int, int]:
        """One keyset batch: (rows cleared, the id to pass as after_id next)."""
        row = self._call(
            "email_purge_bodies_after", older_than_days=older_than_days, after_id=after_id, limit=limit
        )[0]
        return int(row["affected"]), int(row["last_id"])

    def retention(
        self, older_than_days: int, keep_ids_days: int | None, batch_size: int, actor: str
    ) -> RetentionBatch:
        """One batch of email_retention (its own transaction); call again while `more`."""
        row = self._call(
            "email_retention",
            older_than_days=older_than_days,
            keep_ids_days=keep_ids_days,
            batch_size=batch_size,
            actor=actor,
        )[0]
        return RetentionBatch(
            int(row["deleted"]),
            int(row["tombstones_expired"]),
            bool(row["more"]),
            int(row["run_id"]),
            row["cutoff"],
        )

    def erase_address(self, address: str, actor: str, reason: str) -> Erasure:
        row = self._call("email_erase_address", address=address, actor=actor, reason=reason)[0]
        return Erasure(
            int(row["erased"]),
            int(row["processing"]),
            int(row["provider_events"]),
            int(row["suppression_entries"]),
        )

    # --- read-only views for operators ------------------------------------------------------------
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

    def get_row_by_notification_id(self, notification_id: str, account: str | None = None) -> DeliveryRow:
        """The row of `notification_id`; ids are per enqueuing account, so with two accounts using the
        same id the caller must name the account (its database user name)."""
        sql = f"SELECT {_ROW_COLUMNS}, account FROM email_delivery_attempts WHERE notification_id = %s"
        args: tuple[str, ...] = (notification_id,)
        if account is not None:
            sql += " AND account = %s"
            args += (account,)
        rows = self._select(sql + " ORDER BY id", args)
        if not rows:
            raise NotFound(f"no email with notification id {notification_id!r}")
        if len(rows) > 1:
            owners = ", ".join(repr(r["account"]) for r in rows)
            raise InvalidInput(
                f"notification id {notification_id!r} was enqueued by several accounts ({owners}): name one with --account"
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
    ) -> list[DeliveryRow]:
        """Rows in `status`, oldest first; `since`/`older_than_seconds` filter on when the row entered
        its current state (updated_at), measured on the database clock; `priority` on the priority."""
        sql = f"SELECT {_ROW_COLUMNS} FROM email_delivery_attempts WHERE status = %s"
        args: list[Any] = [status.value]
        if priority is not None:
            sql += " AND priority = %s"
            args.append(priority)
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

        Both reads are index range scans (the claim index and the lease index), cheap at any table size.
        """
        row = self._select(
            "SELECT UTC_TIMESTAMP(6) AS now,"
            " (SELECT MIN(claim_due_at) FROM email_delivery_attempts"
            "   WHERE claim_due_at <= UTC_TIMESTAMP(6)) AS oldest_due_at,"
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
                from_status=_status(r["from_status"]),
                to_status=Status(r["to_status"]),
                claim_token=r["claim_token"],
                actor=r["actor"],
                db_account=r["db_account"],
                detail=r["detail"],
            )
            for r in rows
        ]

    # --- several calls in one transaction (a batch of SES events) ---------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several calls (a batch of events commits once); rolled back on any
        error. The procedures see it open and set savepoints instead of committing."""
        try:
            self.connection.start_transaction()
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc
        try:
            yield
        except BaseException:
            with suppress(*DRIVER_ERRORS):
                self._drop_cursor()
                self.connection.rollback()
            raise
        try:
            self.connection.commit()
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc

    def installed_procedures(self) -> set[str]:
        rows = self._select(
            "SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES"
            " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'"
        )
        return {str(r["name"]) for r in rows}

    def database_time(self) -> datetime:
        """UTC_TIMESTAMP(6): the one clock every procedure uses."""
        value: datetime = self._select("SELECT UTC_TIMESTAMP(6) AS now")[0]["now"]
        return value

    def server_version(self) -> str:
        return str(self._select("SELECT VERSION() AS v")[0]["v"])


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
    )


__all__ = ["DRIVER_ERRORS", "Connection", "OutboxRepository", "connect", "first_ready", "translate_error"]
