"""What the web console does in the database: the operator procedures (requeue, cancel, resolve,
redrive, the breaker's close) over the connection its reads use, each retried on a deadlock. A part
of ConsoleReads, kept apart from the reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import DatabaseUnavailable, NotFound, TransientDatabaseError


class ConsoleActions:
    """The console's actions: the operator procedures, called through OutboxRepository like the CLI's."""

    repo: OutboxRepository

    def select(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def requeue(self, attempt_id: int, actor: str, reason: str) -> int:
        return self._retrying(lambda: self.repo.requeue_unknown_outcome(attempt_id, actor, reason))

    def cancel(self, attempt_id: int, actor: str, reason: str) -> int:
        return self._retrying(lambda: self.repo.cancel_email(attempt_id, actor, reason).affected)

    def resolve(self, attempt_id: int, outcome: str, actor: str, reason: str, message_id: str | None) -> int:
        return self._retrying(
            lambda: self.repo.resolve_unknown_outcome(attempt_id, outcome, actor, reason, message_id)
        )

    def close_breaker(self, provider_name: str, actor: str, reason: str) -> int:
        """email_breaker_close: 1 when the provider breaker was open or half open and is closed now."""
        return self._retrying(
            lambda: self.repo.breaker_close(provider_name, actor, f"closed by an operator: {reason}")
        )

    def redrive(self, attempt_id: int, actor: str, reason: str) -> int:
        """email_redrive_email for this row (by its id: another service's email with the same
        notification id is never the one moved): 0 unless it is Failed and SES never accepted it."""
        rows = self.select("SELECT id FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
        if not rows:
            raise NotFound(f"no email with id {attempt_id}")
        return self._retrying(lambda: self.repo.redrive_email(attempt_id, actor, reason))

    def _retrying(self, call: Any) -> int:
        # A deadlock rolls the call back whole; the call is guarded, so trying it again is safe.
        for attempt in range(3):
            try:
                return int(call())
            except TransientDatabaseError:
                if attempt == 2:
                    raise
        raise DatabaseUnavailable("unreachable")  # pragma: no cover
