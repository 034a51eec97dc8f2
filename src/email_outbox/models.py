"""Typed values the repository returns. Column names follow docs/design.md section 4 exactly."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class Status(enum.StrEnum):
    """The six statuses, spelled as in the column's ENUM (a test keeps the two in step)."""

    PENDING = "Pending"
    RETRYING = "Retrying"
    PROCESSING = "Processing"
    SENT = "Sent"
    FAILED = "Failed"
    UNKNOWN_OUTCOME = "UnknownOutcome"

    @property
    def terminal(self) -> bool:
        return self in (Status.SENT, Status.FAILED, Status.UNKNOWN_OUTCOME)


@dataclass(frozen=True)
class CancelResult:
    """email_cancel's answer: cancelled (1) or not (0), the row's id (None: no such notification id),
    and the status it was cancelled from."""

    affected: int
    attempt_id: int | None
    from_status: Status | None


@dataclass(frozen=True)
class EnqueueResult:
    affected: int
    # None: a duplicate of an email retention deleted (only its tombstone is left, email_retention).
    attempt_id: int | None

    @property
    def duplicate(self) -> bool:
        return self.affected == 0


def optional_id(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class RetentionPreview:
    """email_retention_preview: what a retention run would delete now."""

    would_delete: int
    under_a_day_old: int
    oldest_final_at: datetime | None
    cutoff: datetime


@dataclass(frozen=True)
class RetentionBatch:
    """One call of email_retention: what it deleted, and whether to call again."""

    deleted: int
    tombstones_expired: int
    more: bool
    run_id: int
    cutoff: datetime


@dataclass(frozen=True)
class RetentionRuns:
    """email_retention_last_run: when retention last finished and last started (database clock, UTC)."""

    last_finished_at: datetime | None
    last_started_at: datetime | None
    database_now: datetime


@dataclass(frozen=True)
class Erasure:
    """What email_erase_address changed; `processing` rows were left for a rerun."""

    erased: int
    processing: int
    provider_events: int
    suppression_entries: int


@dataclass(frozen=True)
class ClaimedEmail:
    id: int
    notification_id: str
    to_address: str
    from_address: str | None
    subject: str
    text_body: str | None
    html_body: str | None
    attempt_count: int
    max_attempts: int
    lease_expires_at: datetime | None = None
    # Text and HTML bodies together, in bytes; False: too large to come with the claim, load them
    # (email_claimed_bodies) just before the send.
    body_bytes: int = 0
    bodies_loaded: bool = True
    # A row enqueued by email_enqueue_message: its recipients, reply-to, headers, tags, configuration
    # set or template (JSON), and its attachments' size; the attachments themselves are loaded
    # (email_claimed_attachments) just before the send.
    message_options: str | None = None
    attachment_bytes: int = 0
    attachments: tuple[Attachment, ...] | None = None
    # The row's tenant, and SES's tenant name its send carries (TenantName), if the tenant has one.
    tenant: str | None = None
    ses_tenant_name: str | None = None
    # When it was enqueued (UTC, the database clock): the enqueue-to-send histogram.
    created_at: datetime | None = None

    @property
    def options(self) -> dict[str, Any]:
        return json.loads(self.message_options) if self.message_options else {}

    @property
    def attachment_count(self) -> int:
        return int(self.options.get("attachment_count") or 0)

    @property
    def ready(self) -> bool:
        """Everything the send needs is in hand."""
        return self.bodies_loaded and (self.attachments is not None or self.attachment_count == 0)


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    disposition: str  # attachment or inline
    content_id: str | None
    content: bytes


@dataclass(frozen=True)
class Candidate:
    id: int
    notification_id: str
    to_address: str
    from_address: str | None
    subject: str
    text_body: str | None
    html_body: str | None
    status: Status
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime


@dataclass(frozen=True)
class FailureResult:
    affected: int
    status: Status | None


@dataclass(frozen=True)
class FinalizeItem:
    """One finalize of email_finalize_batch; `outcome` is Sent, Failed, Retrying, UnknownOutcome,
    Released or Started (a worker.actions.Step's value)."""

    id: int
    claim_token: str
    outcome: str
    provider_message_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    delay_seconds: int = 0

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class StatusCount:
    status: Status
    count: int
    oldest_due_at: datetime | None


@dataclass(frozen=True)
class DeliveryRow:
    """A row of email_delivery_attempts as operators see it."""

    id: int
    notification_id: str
    to_address: str
    from_address: str | None
    subject: str
    status: Status
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime
    claim_token: str | None
    claimed_by: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    last_attempt_at: datetime | None
    last_error_code: str | None
    last_error_message: str | None
    provider_message_id: str | None
    sent_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # email_enqueue_message's recipients, reply-to, headers, tags, configuration set or template (JSON).
    message_options: str | None = None
    attachment_bytes: int = 0
    priority: int = 5  # 0-9, claimed highest first
    expires_at: datetime | None = None  # not handed to SES by then: Failed 'Expired'
    tenant: str | None = None  # the tenant it was enqueued for (docs/design.md, "Tenants")


@dataclass(frozen=True)
class DeliveryEvent:
    id: int
    attempt_id: int
    occurred_at: datetime
    from_status: Status | None
    to_status: Status
    claim_token: str | None
    # The name the caller gave (worker id, operator's --by) and the server's word for the account.
    actor: str | None
    db_account: str | None
    detail: str | None


@dataclass(frozen=True)
class QueueHealth:
    """Read on the database clock, so replica clocks never matter."""

    now: datetime
    oldest_due_at: datetime | None
    overdue_leases: int

    @property
    def oldest_due_age_seconds(self) -> float:
        if self.oldest_due_at is None:
            return 0.0
        return max(0.0, (self.now - self.oldest_due_at).total_seconds())


@dataclass(frozen=True)
class AllowedConfigurationSet:
    """An SES configuration set a message may name (email_enqueue_message's configuration_set)."""

    name: str
    added_at: datetime
    added_by: str
    added_via: str
    reason: str


@dataclass(frozen=True)
class AllowedSender:
    """One entry of the sender allow-list: an address or '@domain', for one user name or all ('')."""

    sender: str
    account: str
    added_at: datetime
    added_by: str
    added_via: str
    reason: str


# --- after SES accepted ----------------------------------------------------------------
@dataclass(frozen=True)
class RecordResult:
    """What email_record_provider_event did with one event."""

    affected: int
    attempt_id: int | None
    outcome: str  # 'recorded', 'duplicate' or 'unmatched'
    resolved: str | None  # 'Sent' or 'Failed' when it settled an UnknownOutcome row
    suppressed: bool


@dataclass(frozen=True)
class ProviderEventRow:
    """A recorded SES event of one email (email_provider_events)."""

    event_type: str
    ses_message_id: str
    recipient: str | None
    event_at: datetime
    kind: str | None
    subkind: str | None
    detail: str | None
    match_note: str | None
    recorded_at: datetime
    recorded_by: str


@dataclass(frozen=True)
class ProviderState:
    """An email's latest provider state (email_delivery_status): the outbox status is not changed."""

    state: str
    state_at: datetime
    ses_message_id: str
    kind: str | None
    subkind: str | None
    event_count: int


@dataclass(frozen=True)
class ProviderStats:
    """email_provider_stats: the figures SES reviews an account on, over a window."""

    window_seconds: int
    sends: int
    deliveries: int
    delays: int
    bounces: int
    permanent_bounces: int
    complaints: int
    rejects: int
    rendering_failures: int
    bounce_rate: float | None
    complaint_rate: float | None
    suppressed_addresses: int
    unknown_without_evidence: int


@dataclass(frozen=True)
class SuppressedAddress:
    address: str
    reason: str
    detail: str
    ses_message_id: str | None
    attempt_id: int | None
    added_at: datetime
    added_by: str


@dataclass(frozen=True)
class BreakerState:
    """The provider breaker every replica shares (email_breaker_state), read on the database clock."""

    provider: str
    state: str  # 'closed', 'open' or 'half_open'
    since: datetime | None
    changed_at: datetime | None
    changed_by: str | None
    last_error_code: str | None
    last_error_message: str | None
    last_failure_at: datetime | None
    probe_at: datetime | None
    probe_by: str | None
    probes: int
    probe_due: bool
    database_time: datetime

    @property
    def down(self) -> bool:
        return self.state != "closed"

    def summary(self) -> str:
        """One line, as `status`, the console and the logs say it."""
        if not self.down:
            return "up" if self.since is None else f"up (since {_utc(self.since)})"
        text = f"down since {_utc(self.since)}, last error {self.last_error_code or '-'}"
        if self.state == "half_open":
            return f"{text}; probing ({self.probe_by})"
        return f"{text}; next probe {_utc(self.probe_at)}"


@dataclass(frozen=True)
class RedriveBatch:
    """One call of email_redrive_failed_batch."""

    affected: int
    examined: int
    last_id: int


def _utc(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")
