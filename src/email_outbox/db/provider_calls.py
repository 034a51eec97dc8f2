"""The calls about what happened after SES accepted: provider events, the evidence that
settles UnknownOutcome, provider figures, and the suppression list. A part of OutboxRepository, kept
apart so the core of the contract reads in one sitting."""

from __future__ import annotations

from datetime import datetime

from email_outbox.db.calls import Calls
from email_outbox.models import (
    ProviderEventRow,
    ProviderState,
    ProviderStats,
    RecordResult,
    SuppressedAddress,
)


class ProviderEventCalls(Calls):
    """Mixed into OutboxRepository, which supplies the three ways to talk to the server."""

    def record_provider_event(
        self,
        *,
        event_type: str,
        ses_message_id: str,
        outbox_id: str | None,
        recipient: str | None,
        event_at: datetime,
        kind: str | None,
        subkind: str | None,
        detail: str | None,
        recorded_by: str,
    ) -> RecordResult:
        row = self._call(
            "email_record_provider_event",
            event_type=event_type,
            ses_message_id=ses_message_id,
            outbox_id=outbox_id,
            recipient=recipient,
            event_at=event_at,
            kind=kind,
            subkind=subkind,
            detail=detail,
            recorded_by=recorded_by,
        )[0]
        attempt_id = row["attempt_id"]
        return RecordResult(
            int(row["affected"]),
            None if attempt_id is None else int(attempt_id),
            str(row["outcome"]),
            None if row["resolved"] is None else str(row["resolved"]),
            bool(row["suppressed"]),
        )

    def resolve_unknown_from_evidence(self, limit: int, resolved_by: str) -> int:
        return self._affected("email_resolve_unknown_from_evidence", limit=limit, resolved_by=resolved_by)

    def provider_stats(self, window_seconds: int, evidence_wait_seconds: int) -> ProviderStats:
        row = self._call(
            "email_provider_stats", window_seconds=window_seconds, evidence_wait_seconds=evidence_wait_seconds
        )[0]

        def rate(name: str) -> float | None:
            return None if row[name] is None else float(row[name])

        counts = {k: int(v) for k, v in row.items() if k not in ("bounce_rate", "complaint_rate")}
        return ProviderStats(**counts, bounce_rate=rate("bounce_rate"), complaint_rate=rate("complaint_rate"))

    def suppression_add(self, address: str, added_by: str, reason: str) -> int:
        return self._affected("email_suppression_add", address=address, added_by=added_by, reason=reason)

    def suppression_remove(self, address: str, removed_by: str, reason: str) -> int:
        return self._affected(
            "email_suppression_remove", address=address, removed_by=removed_by, reason=reason
        )

    def suppressed_addresses(self, limit: int = 10_000) -> list[SuppressedAddress]:
        rows = self._select(
            "SELECT address, reason, detail, ses_message_id, attempt_id, added_at, added_by"
            " FROM email_suppressed_addresses ORDER BY address_key LIMIT %s",
            (limit,),
        )
        return [SuppressedAddress(**{**r, "reason": str(r["reason"])}) for r in rows]

    def provider_events(self, attempt_id: int) -> list[ProviderEventRow]:
        rows = self._select(
            "SELECT event_type, ses_message_id, recipient, event_at, kind, subkind, detail, match_note,"
            " recorded_at, recorded_by FROM email_provider_events WHERE attempt_id = %s ORDER BY event_at, id",
            (attempt_id,),
        )
        return [ProviderEventRow(**r) for r in rows]

    def provider_state(self, attempt_id: int) -> ProviderState | None:
        rows = self._select(
            "SELECT state, state_at, ses_message_id, kind, subkind, event_count"
            " FROM email_delivery_status WHERE attempt_id = %s",
            (attempt_id,),
        )
        return ProviderState(**{**rows[0], "state": str(rows[0]["state"])}) if rows else None

    def provider_state_counts(self, window_seconds: int) -> dict[str, int]:
        """Emails per latest provider state, among those whose state changed within the window."""
        rows = self._select(
            "SELECT CAST(state AS CHAR) AS state, COUNT(*) AS n FROM email_delivery_status"
            " WHERE state_at >= UTC_TIMESTAMP(6) - INTERVAL %s SECOND GROUP BY state",
            (window_seconds,),
        )
        return {str(r["state"]): int(r["n"]) for r in rows}
