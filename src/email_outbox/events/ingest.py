"""A batch of messages into the database: unwrap, parse, record every event in one transaction.

A message is *done* (safe to delete from its queue) when every event it carries is committed, or
when it carries nothing to record (an Open, an SNS subscription confirmation). A malformed message
(not JSON, an unknown envelope, a record the procedure refuses) is counted and reported, never
raised, and never stops the messages beside it. A deadlock or a lost connection undoes the whole
batch's transaction: the batch is retried, and nothing is reported done that was not committed.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from email_outbox import failpoints
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput, TransientDatabaseError
from email_outbox.events.envelopes import MalformedMessage, records_in
from email_outbox.events.records import ProviderEvent, SkippedRecord, events_of
from email_outbox.tracing.spans import ses_event_span

log = logging.getLogger("email_outbox.events")
# The events that say SES refused the mail (email_internal_resolve_from_event: Failed); every other
# recorded type says it accepted it.
REFUSAL_EVENTS = frozenset({"Reject", "RenderingFailure"})

DEADLOCK_RETRIES = 8


@dataclass
class Tally:
    """What the consumer did, cumulatively; read by its metrics and printed at exit."""

    messages: int = 0
    malformed: int = 0
    skipped: int = 0
    recorded: int = 0
    duplicates: int = 0
    unmatched: int = 0
    resolved: Counter[str] = field(default_factory=Counter)
    suppressed: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    deadlock_retries: int = 0

    def line(self) -> str:
        resolved = ", ".join(f"{k} {v}" for k, v in sorted(self.resolved.items())) or "none"
        return (
            f"messages {self.messages}: events recorded {self.recorded}, duplicates {self.duplicates},"
            f" not this outbox's {self.unmatched}, skipped {self.skipped}, malformed {self.malformed};"
            f" UnknownOutcome resolved: {resolved}; addresses suppressed {self.suppressed}"
        )


@dataclass
class Parsed:
    events: list[ProviderEvent] = field(default_factory=list)
    malformed: str | None = None
    skipped: int = 0


def parse_message(body: str | bytes) -> Parsed:
    parsed = Parsed()
    try:
        for record in records_in(body):
            try:
                parsed.events.extend(events_of(record))
            except SkippedRecord:
                parsed.skipped += 1
    except MalformedMessage as exc:
        return Parsed(malformed=str(exc))
    except Exception as exc:  # a shape no rule foresaw: this message is malformed, the batch goes on
        return Parsed(malformed=f"unreadable record ({type(exc).__name__}: {exc!s:.200})")
    return parsed


class Ingestor:
    """Records batches of messages through one repository (one connection: one per thread)."""

    def __init__(self, repo: OutboxRepository, consumer_id: str, tally: Tally | None = None) -> None:
        self.repo = repo
        self.consumer_id = consumer_id
        self.tally = tally if tally is not None else Tally()

    def ingest(self, bodies: Sequence[str | bytes]) -> list[bool]:
        """Record every event of `bodies` in one transaction; per message, True when it is done
        (committed, or nothing to record) and may be deleted, False when it is malformed."""
        parsed = [parse_message(b) for b in bodies]
        for index, p in enumerate(parsed):
            if p.malformed:
                log.warning("malformed message skipped", extra={"reason": p.malformed[:300], "index": index})
        # One order for every replica (by outbox id, then MessageId), so two batches that touch the
        # same emails take their row locks in the same order and seldom deadlock. Within one MessageId
        # a refusal (Reject, RenderingFailure) goes last: SES sends Send before it, so a batch settles
        # an UnknownOutcome row as events arriving one by one would, and as the late resolver does.
        work = sorted(
            ((i, e) for i, p in enumerate(parsed) if not p.malformed for e in p.events),
            key=lambda item: (
                item[1].outbox_id or "",
                item[1].ses_message_id,
                item[1].event_type in REFUSAL_EVENTS,
                item[1].event_type,
            ),
        )
        refused: dict[int, str] = {}
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                results = self._record(work, refused)
                break
            except TransientDatabaseError:
                if attempt == DEADLOCK_RETRIES:
                    raise
                self.tally.deadlock_retries += 1
                refused.clear()
                time.sleep(random.uniform(0.005, 0.05) * (attempt + 1))
        self.tally.batches += 1
        self.tally.messages += len(bodies)
        for outcome_list in results:
            self._count(*outcome_list)
            event = outcome_list[0]
            ses_event_span(
                event.event_type, event.ses_message_id, event.outbox_id, event.traceparent, outcome_list[1]
            )
        done = []
        for index, p in enumerate(parsed):
            self.tally.skipped += p.skipped
            bad = p.malformed or refused.get(index)
            if bad:
                self.tally.malformed += 1
                if index in refused:
                    log.warning(
                        "message refused by the database", extra={"reason": bad[:300], "index": index}
                    )
            done.append(not bad)
        return done

    def _record(
        self, work: list[tuple[int, ProviderEvent]], refused: dict[int, str]
    ) -> list[tuple[ProviderEvent, str, str | None, bool]]:
        results: list[tuple[ProviderEvent, str, str | None, bool]] = []
        if not work:
            return results
        with self.repo.transaction():
            for index, event in work:
                if index in refused:
                    continue
                try:
                    r = self.repo.record_provider_event(
                        event_type=event.event_type,
                        ses_message_id=event.ses_message_id,
                        outbox_id=event.outbox_id,
                        recipient=event.recipient,
                        event_at=event.event_at,
                        kind=event.kind,
                        subkind=event.subkind,
                        detail=event.detail,
                        recorded_by=self.consumer_id,
                    )
                except InvalidInput as exc:
                    # The procedure undid its own writes only; the batch's transaction goes on.
                    refused[index] = str(exc)
                    continue
                results.append((event, r.outcome, r.resolved, r.suppressed))
            failpoints.hit("events_before_commit")
        return results

    def _count(self, event: ProviderEvent, outcome: str, resolved: str | None, suppressed: bool) -> None:
        t = self.tally
        if outcome == "recorded":
            t.recorded += 1
            t.by_type[event.event_type] += 1
        elif outcome == "duplicate":
            t.duplicates += 1
        else:
            t.unmatched += 1
        if resolved:
            t.resolved[resolved] += 1
        t.suppressed += int(suppressed)
