"""The calls of the send path: the enqueues, the claims and reservations, the bodies and attachments
a claim loads, the lease's sweep and extension, and the finalizes. A part of OutboxRepository, kept
apart like the operators' calls; every worker call goes through here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from email_outbox.db.calls import Calls, status_or_none
from email_outbox.errors import InvalidArgument
from email_outbox.models import (
    Attachment,
    Candidate,
    ClaimedEmail,
    EnqueueResult,
    FailureResult,
    FinalizeItem,
    Status,
    optional_id,
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
        tenant=row.get("tenant"),
        ses_tenant_name=row.get("ses_tenant_name"),
        created_at=row.get("created_at"),
    )


class SendPathCalls(Calls):
    """enqueue, claim, finalize: one typed function per procedure of the send path."""

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
        return FailureResult(int(row["affected"]), status_or_none(row["status"]))

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
        return [FailureResult(int(r["affected"]), status_or_none(r["status"])) for r in rows]

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
        return FailureResult(int(row["affected"]), status_or_none(row["status"])), int(row["started"]) == 1


def finalize_alone(repo: SendPathCalls, item: FinalizeItem) -> int:
    """`item` through the single procedure its outcome names (email_finalize_batch's table in
    docs/procedures.md), for one finalize or start alone: its affected-row count."""
    if item.outcome == "Sent":
        return repo.finalize_sent(item.id, item.claim_token, item.provider_message_id or "")
    if item.outcome == "UnknownOutcome":
        return repo.finalize_unknown(item.id, item.claim_token, item.error_message)
    if item.outcome == "Released":
        return repo.release_claim(item.id, item.claim_token, item.delay_seconds)
    if item.outcome == "Started":
        return repo.start_send(item.id, item.claim_token)
    if item.outcome not in ("Failed", "Retrying"):
        raise InvalidArgument(f"not an outcome: {item.outcome!r}")
    return repo.finalize_failure(
        item.id,
        item.claim_token,
        permanent=item.outcome == "Failed",
        error_code=item.error_code,
        error_message=item.error_message,
        retry_delay_seconds=item.delay_seconds,
    ).affected
