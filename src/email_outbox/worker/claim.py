"""A claimed row as it travels through the worker: the email, the claim token that fences every
later change to the row, and the moment this replica stops trusting its lease."""

from __future__ import annotations

from dataclasses import dataclass, replace

from email_outbox.models import Attachment, ClaimedEmail


@dataclass(frozen=True)
class Claim:
    email: ClaimedEmail
    token: str
    # time.monotonic() at which the lease may have ended: taken before the claim CALL, so it is
    # never later than the server's own expiry.
    deadline: float

    @property
    def id(self) -> int:
        return self.email.id

    @property
    def attempt(self) -> int:
        """The number of this attempt, 1 for the first send."""
        return self.email.attempt_count + 1

    def context(self) -> dict[str, object]:
        """The fields every log line about this row carries."""
        return {
            "id": self.email.id,
            "notification_id": self.email.notification_id,
            "tenant": self.email.tenant,
        }

    def with_bodies(self, text_body: str | None, html_body: str | None) -> Claim:
        email = replace(self.email, text_body=text_body, html_body=html_body, bodies_loaded=True)
        return replace(self, email=email)

    def with_attachments(self, attachments: tuple[Attachment, ...]) -> Claim:
        return replace(self, email=replace(self.email, attachments=attachments))
