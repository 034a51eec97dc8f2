"""The operators' procedures: cancel, requeue, resolve, redrive, the provider breaker, the allow-lists,
purge, retention and erasure; a part of OutboxRepository."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from email_outbox.db.calls import Calls, status_or_none
from email_outbox.models import (
    AllowedConfigurationSet,
    AllowedSender,
    BreakerState,
    CancelResult,
    Erasure,
    RedriveBatch,
    RetentionBatch,
    RetentionPreview,
    RetentionRuns,
    Status,
    StatusCount,
)


def _cancel_result(row: dict[str, Any]) -> CancelResult:
    attempt_id = row["attempt_id"]
    return CancelResult(
        int(row["affected"]),
        None if attempt_id is None else int(attempt_id),
        status_or_none(row["from_status"]),
    )


class OperatorCalls(Calls):
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

    def redrive_email(self, attempt_id: int, redriven_by: str, reason: str) -> int:
        """email_redrive_email: the same rule by row id, whichever account enqueued it."""
        return self._affected("email_redrive_email", id=attempt_id, redriven_by=redriven_by, reason=reason)

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

    def retention_preview(self, older_than_days: int) -> RetentionPreview:
        """email_retention_preview: what a retention run with this age would delete now; changes nothing."""
        row = self._call("email_retention_preview", older_than_days=older_than_days)[0]
        return RetentionPreview(
            int(row["would_delete"]), int(row["under_a_day_old"]), row["oldest_final_at"], row["cutoff"]
        )

    def retention_last_run(self) -> RetentionRuns:
        """email_retention_last_run: when retention last finished and last started."""
        row = self._call("email_retention_last_run")[0]
        return RetentionRuns(row["last_finished_at"], row["last_started_at"], row["database_now"])

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

    def rotate_erasure_key(self, rotated_by: str, reason: str) -> tuple[int, int]:
        """Adds an erasure key made by the server: (its id, how many keys are held)."""
        row = self._call("email_erasure_key_rotate", rotated_by=rotated_by, reason=reason)[0]
        return int(row["key_id"]), int(row["keys_held"])

    def erase_address(self, address: str, actor: str, reason: str) -> Erasure:
        row = self._call("email_erase_address", address=address, actor=actor, reason=reason)[0]
        return Erasure(
            int(row["erased"]),
            int(row["processing"]),
            int(row["provider_events"]),
            int(row["suppression_entries"]),
        )
